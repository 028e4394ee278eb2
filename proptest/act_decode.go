package proptest

import (
	"fmt"
	"math/rand"
	"slices"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// The decode action: how the generator draws it (batches, starts, teacher
// streams, position jumps, runs to the next block boundary) and how the
// runner plays it (one ref and SUT decode batch per step, the host tables
// grown as positions need).

// drawDecode draws a decode of every live sequence (4/5) or a subset, for a
// few steps or exactly as many as take one of them across its next block
// boundary (to position k·bs-1, k·bs or k·bs+1).
func drawDecode(rng *rand.Rand, m model) (Cmd, bool) {
	live := m.nLive()
	if live == 0 {
		return Cmd{}, false
	}
	c := Cmd{Kind: Decode}
	if live > 1 && rng.Intn(5) == 0 {
		for q, l := range m.live {
			if l && rng.Intn(2) == 0 {
				c.Seqs = append(c.Seqs, q)
			}
		}
		if len(c.Seqs) == 0 || len(c.Seqs) == live {
			c.Seqs = nil
		}
	}
	// Start sequences in the decode (several at once sometimes), feed a
	// teacher stream, jump positions.
	if free := m.freeSlots(); free > 0 && rng.Intn(5) == 0 {
		n := 1 + rng.Intn(min(free, 3))
		for q := 0; q < MaxSeqs && len(c.Start) < n; q++ {
			if !m.live[q] && !slices.Contains(c.Seqs, q) && rng.Intn(3) > 0 {
				c.Start = append(c.Start, q)
			}
		}
	}
	if rng.Intn(6) == 0 {
		c.Force = 1 + rng.Intn(1000)
	}
	if rng.Intn(8) == 0 {
		c.Skip = 1 + rng.Intn(m.sc.BlockSize+2)
	}
	b := m.batch(c)
	// The most steps the pool, the length limits and the budget allow.
	most := min(MaxDecodeSteps, m.budget()-m.work)
	for _, q := range b {
		most = min(most, m.maxLen-m.firstPos(c, q))
	}
	if most < 1 && (c.Skip > 0 || c.Start != nil) {
		c.Skip, c.Start = 0, nil
		return drawPlainDecode(rng, m, c)
	}
	most = mostSteps(&m, c, most)
	c.Steps = most
	if most < 1 {
		if c.Skip > 0 || c.Start != nil {
			c.Skip, c.Start = 0, nil
			return drawPlainDecode(rng, m, c)
		}
		return Cmd{}, false
	}
	bs := m.sc.BlockSize
	if rng.Intn(5) < 2 {
		q := b[rng.Intn(len(b))]
		// The next decode position is firstPos; reach the boundary
		// position k·bs (then -1, +0 or +1 around it).
		p := m.firstPos(c, q)
		edge := (p/bs + 1) * bs
		c.Steps = edge - p + rng.Intn(3)
	} else if rng.Intn(8) == 0 {
		c.Steps = most // as far as the pool allows: fill it
	} else {
		c.Steps = 1 + pick(rng, 4, 3, 2, 2, 1, 1, 1, 1)
		if rng.Intn(8) == 0 {
			c.Steps += rng.Intn(bs)
		}
	}
	c.Steps = max(1, min(c.Steps, most))
	return c, true
}

// mostSteps is the largest Steps in 1..most with which c passes m.check,
// or 0: what trying most, most-1, ... in turn finds. Steps enters check
// only as 1 <= Steps <= MaxDecodeSteps, the length limit and the blocks
// the batch needs, each met by a smaller Steps when met by a larger one,
// so the passing values are 1..k, and a bisection finds k in a few checks.
func mostSteps(m *model, c Cmd, most int) int {
	ok := func(s int) bool {
		c.Steps = s
		return m.check(c) == nil
	}
	if most < 1 || ok(most) {
		return max(most, 0)
	}
	lo, hi := 0, most-1 // the answer is in lo..hi (0: none passes)
	for lo < hi {
		if mid := (lo + hi + 1) / 2; ok(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// drawPlainDecode redraws c without starts and jumps (when those left no
// room).
func drawPlainDecode(rng *rand.Rand, m model, c Cmd) (Cmd, bool) {
	b := m.batch(c)
	if len(b) == 0 {
		return Cmd{}, false
	}
	most := min(MaxDecodeSteps, m.budget()-m.work)
	for _, q := range b {
		most = min(most, m.maxLen-m.length[q])
	}
	if most = mostSteps(&m, c, most); most < 1 {
		return Cmd{}, false
	}
	c.Steps = 1 + rng.Intn(min(most, 4))
	return c, m.check(c) == nil
}

// redecode steps the last decode's batch again, when it is all live.
func redecode(rng *rand.Rand, m model) (Cmd, bool) {
	c := Cmd{Kind: Decode, Seqs: []int{}}
	for q, in := range m.last {
		if in {
			if !m.live[q] {
				return Cmd{}, false
			}
			c.Seqs = append(c.Seqs, q)
		}
	}
	if len(c.Seqs) == 0 {
		return Cmd{}, false
	}
	for n := 1 + rng.Intn(4); n > 0; n-- {
		c.Steps = n
		if m.check(c) == nil {
			return c, true
		}
	}
	return Cmd{}, false
}

func (r *runner) decode(c Cmd) *Failure {
	seqs := r.m.batch(c)
	starts := r.m.startSlots(c)
	first := map[int]int{}
	for _, q := range seqs {
		first[q] = r.m.firstPos(c, q)
		if _, ok := starts[q]; ok {
			r.tabs[q] = r.pool.NewTable()
			r.hist[q], r.outh[q] = nil, nil
		}
	}
	r.reach.decodeCmd(c)
	for k := 1; k <= c.Steps; k++ {
		batch := make([]qwen3.Step, len(seqs))
		act := make([]active, len(seqs))
		fed := map[int]int32{}
		var copies []kvpage.BlockCopy
		for _, q := range seqs {
			pos := first[q] + k - 1
			cp, err := r.tabs[q].PrepareWrite(pos, pos+1)
			if err != nil {
				panic(fmt.Sprintf("host pool: %v", err))
			}
			copies = append(copies, cp...)
		}
		if len(copies) > 0 {
			if f := r.copyBlocks(c, k, copies); f != nil {
				return f
			}
		}
		for i, q := range seqs {
			pos := first[q] + k - 1
			tab := r.tabs[q]
			tok := r.next[q]
			_, started := starts[q]
			switch {
			case c.Force > 0:
				tok = streamToken(q, c.Force, pos, r.cfg.VocabSize)
			case k == 1 && started:
				tok = streamToken(q, 0, 0, r.cfg.VocabSize)
			}
			fed[q] = tok
			slot, ok := starts[q]
			if !ok {
				slot = r.m.slot[q]
			}
			batch[i] = qwen3.Step{Seq: qwen3.SeqID(q), Token: tok, Pos: pos, Blocks: tab.Blocks()}
			act[i] = active{seq: q, slot: slot, pos: []int{pos}, blocks: batch[i].Blocks}
		}
		want, err := r.ref.Decode(batch)
		if err != nil {
			panic(fmt.Sprintf("ref decode: %v", err))
		}
		steadyStep := steady(r.prev, act, fed, r.sc.BlockSize)
		got, gerr := sutDo(func() ([]qwen3.Output, error) { return r.dec.Decode(batch) })
		if f := r.check(call{c: c, subStep: k, decode: true, act: act, got: got, want: want, err: gerr, steady: steadyStep}); f != nil {
			return f
		}
		r.steps++
		r.prev = map[int]stepState{}
		for i, q := range seqs {
			r.next[q] = r.fed(got, want, i)
			r.prev[act[i].slot] = stepState{seq: q, pos: act[i].pos[0], token: want[i].Token}
			r.record(q, act[i].pos[0], fed[q], got, i)
		}
		r.reach.poolFull(r.pool.NumFree() == 0)
	}
	return nil
}
