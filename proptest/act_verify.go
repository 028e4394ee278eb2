package proptest

import (
	"fmt"
	"math/rand"
	"slices"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// The speculative-verify action: each sequence of the batch runs k tokens
// (its next token, then k-1 drafts from the stream (seq, draft)) at
// positions len..len+k-1 in one Verify call, through a table grown (and
// copied on write) beforehand, so the k positions may cross a block
// boundary; then the first accept positions are kept and the rest rolled
// back with kvpage Truncate (no call: the rejected rows keep the drafts'
// KV until rewritten). The next token fed is the output at the last kept
// position. Expectations: every exact property of the call (kv-write:
// each of the k writes where the host table says; cur-pos after the call:
// len+k), and the rollback property (prop_rollback.go) until the rejected
// rows are rewritten.

func (r *runner) verify(c Cmd) *Failure {
	vf, ok := r.dec.(qwen3.Verifier)
	if !ok {
		panic("runner: a verify drawn for a SUT without Verifier")
	}
	bs := r.sc.BlockSize
	var copies []kvpage.BlockCopy
	for i, q := range c.Seqs {
		pos := r.m.length[q]
		cp, err := r.tabs[q].PrepareWrite(pos, pos+c.K[i])
		if err != nil {
			panic(fmt.Sprintf("host pool: %v", err))
		}
		copies = append(copies, cp...)
	}
	if len(copies) > 0 {
		if f := r.copyBlocks(c, 0, copies); f != nil {
			return f
		}
	}
	batch := make([]qwen3.VerifyStep, len(c.Seqs))
	act := make([]active, len(c.Seqs))
	for i, q := range c.Seqs {
		pos, k := r.m.length[q], c.K[i]
		toks := make([]int32, k)
		toks[0] = r.next[q]
		for j := 1; j < k; j++ {
			toks[j] = streamToken(q, c.Draft, pos+j, r.cfg.VocabSize)
		}
		batch[i] = qwen3.VerifyStep{Seq: qwen3.SeqID(q), Tokens: toks, Pos: pos, Blocks: r.tabs[q].Blocks()}
		act[i] = active{seq: q, slot: r.m.slot[q], pos: positions(pos, pos+k), blocks: batch[i].Blocks}
		r.reach.add(ReachVerify)
		if pos/bs != (pos+k-1)/bs {
			r.reach.add(ReachVerifyAcrossBlock)
		}
	}
	want, err := r.ref.Verify(batch)
	if err != nil {
		panic(fmt.Sprintf("ref verify: %v", err))
	}
	got, gerr := sutDo(func() ([][]qwen3.Output, error) { return vf.Verify(batch) })
	// Flattened in batch order; a reply of the wrong shape stays short.
	var flatW, flatG []qwen3.Output
	shaped := len(got) == len(want)
	for i := range want {
		flatW = append(flatW, want[i]...)
		if shaped && len(got[i]) == len(want[i]) {
			flatG = append(flatG, got[i]...)
		} else {
			shaped = false
		}
	}
	if !shaped {
		flatG = nil
		for _, g := range got {
			flatG = append(flatG, g...)
		}
	}
	if f := r.check(call{c: c, verify: true, act: act, got: flatG, want: flatW, err: gerr}); f != nil {
		return f
	}
	r.steps++
	at := 0
	for i, q := range c.Seqs {
		pos, k, a := r.m.length[q], c.K[i], c.Accept[i]
		for j := 0; j < a; j++ {
			r.record(q, pos+j, batch[i].Tokens[j], flatG, at+j)
		}
		r.next[q] = r.fed(flatG, flatW, at+a-1)
		at += k
		if err := r.tabs[q].Truncate(pos + a); err != nil {
			panic(fmt.Sprintf("host pool: %v", err))
		}
		if a < k {
			end := max(pos+k, r.rolled[q][1])
			r.rolled[q] = [2]int{pos + a, end}
			r.reach.add(ReachRollback)
		}
		r.ref.seat(qwen3.SeqID(q), r.hist[q])
	}
	r.prev = nil
	return nil
}

// drawVerify draws a verify of one to three live sequences: k in 1..8
// (one time in three just enough to cross the sequence's next block
// boundary), accept uniform in 1..k (all of them one time in four).
func drawVerify(rng *rand.Rand, m model) (Cmd, bool) {
	if !m.serve.Verify {
		return Cmd{}, false
	}
	var live []int
	for q, l := range m.live {
		if l {
			live = append(live, q)
		}
	}
	if len(live) == 0 {
		return Cmd{}, false
	}
	n := 1 + rng.Intn(min(len(live), 3))
	rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
	seqs := slices.Clone(live[:n])
	slices.Sort(seqs)
	bs := m.sc.BlockSize
	c := Cmd{Kind: Verify, Seqs: seqs, Draft: 1 + rng.Intn(1000)}
	for _, q := range seqs {
		k := 1 + rng.Intn(MaxVerifyK)
		if rng.Intn(3) == 0 {
			pos := m.length[q]
			k = (pos/bs+1)*bs - pos + rng.Intn(3)
		}
		k = max(1, min(k, MaxVerifyK, m.maxLen-m.length[q]))
		a := 1 + rng.Intn(k)
		if rng.Intn(4) == 0 {
			a = k
		}
		c.K, c.Accept = append(c.K, k), append(c.Accept, a)
	}
	if m.work >= m.budget() {
		return Cmd{}, false
	}
	return c, m.check(c) == nil
}
