package proptest

import (
	"fmt"
	"math/rand"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// The admit action: how the generator draws it (prompt lengths around
// block boundaries, filling the pool) and how the runner plays it (a
// prefill of ref and the SUT through a fresh host table).

// drawAdmit draws an admit, its prompt length biased to k·bs-1, k·bs and
// k·bs+1 (k = 1, 2).
func drawAdmit(rng *rand.Rand, m model) (Cmd, bool) {
	if m.freeSlot() < 0 {
		return Cmd{}, false
	}
	bs := m.sc.BlockSize
	free := m.sc.NumBlocks - m.blocksInUse()
	if c, ok := drawLongChunked(m, free); ok {
		return c, m.check(c) == nil
	}
	limit := min(m.maxLen, free*bs, m.budget()-m.work+bs)
	if limit < 1 {
		return Cmd{}, false
	}
	var n int
	switch pick(rng, 7, 3, 1) {
	case 0:
		k := 1 + pick(rng, 3, 1)
		n = k*bs - 1 + rng.Intn(3)
	case 1:
		n = 1 + rng.Intn(bs/2)
	default:
		// Fill the pool (past the work budget when it takes a small
		// cache), or come one position short of it.
		n = min(m.maxLen, free*bs) - rng.Intn(2)
		limit = max(limit, min(m.maxLen, free*bs, 2*m.budget()))
	}
	if n > limit {
		n = limit - rng.Intn(min(limit, 2))
	}
	c := Cmd{Kind: Admit, Seq: newSeq(rng, m), Prompt: n, Salt: m.admits}
	if m.serve.PrefillFrom && rng.Intn(4) == 0 {
		c.Chunk = drawChunk(rng, bs)
	}
	return c, m.check(c) == nil
}

// drawLongChunked draws, in one eligible admit in three, a chunked
// prompt past 8 blocks: the first chunk's table fits one 32-byte stick of
// int32 block ids (8 blocks), a later chunk's does not, which is where a
// program compiled for the first chunk's table width reads past its
// stick (offcard's engine did: regression chunked-past-eight-blocks).
// An admit is eligible when the SUT serves PrefillFrom, the pool and the
// length limit hold more than 8 blocks, less than half the work budget
// is spent, and 8 blocks fit twice the budget (the cap of a prompt that
// fills the pool; so tiny's campaign draws them, the 0.6B shape's, at 72
// positions a case, does not). The decision and the draw come from a
// stream of their own, keyed by the scenario and the admission count, so
// an admit that is not drawn long leaves the case's draws as they were.
func drawLongChunked(m model, free int) (Cmd, bool) {
	bs := m.sc.BlockSize
	room := min(m.maxLen, free*bs, 2*m.budget())
	if !m.serve.PrefillFrom || room <= 8*bs || 2*m.work >= m.budget() {
		return Cmd{}, false
	}
	rng := keyedRand(fmt.Sprintf("%s\nlong chunked %d", m.sc, m.admits))
	if rng.Intn(3) != 0 {
		return Cmd{}, false
	}
	n := 8*bs + 1 + rng.Intn(min(room-8*bs, bs))
	c := Cmd{Kind: Admit, Seq: newSeq(rng, m), Prompt: n, Salt: m.admits, Chunk: drawChunk(rng, bs)}
	return c, true
}

// newSeq picks the id of a new sequence: the admission count's (mod
// MaxSeqs) half the time when it is free, else the lowest id neither live
// nor preempted (or, failing that, the lowest not live).
func newSeq(rng *rand.Rand, m model) int {
	if q := m.admits % MaxSeqs; rng.Intn(2) == 0 && !m.live[q] && m.preempted[q] == 0 {
		return q
	}
	for _, skipPreempted := range []bool{true, false} {
		for q, l := range m.live {
			if !l && (!skipPreempted || m.preempted[q] == 0) {
				return q
			}
		}
	}
	return -1
}

// drawChunk draws a chunk size for a prefill through PrefillFrom: around
// the block size and its double (bs-1, bs, bs+1, 2bs), or a few positions.
func drawChunk(rng *rand.Rand, bs int) int {
	switch pick(rng, 2, 3, 2, 1, 2) {
	case 0:
		return bs - 1
	case 1:
		return bs
	case 2:
		return bs + 1
	case 3:
		return 2 * bs
	}
	return 1 + rng.Intn(8)
}

func (r *runner) admit(c Cmd) *Failure {
	r.hist[c.Seq], r.outh[c.Seq] = nil, nil
	toks := promptTokens(c.Seq, c.Salt, c.Prompt, r.cfg.VocabSize)
	f := r.prefill(c, c.Seq, r.pool.NewTable(), toks, 0, c.Chunk, nil, nil)
	r.reach.add(ReachAdmit)
	return f
}

// prefill prefills sequence q (not live) with the tokens toks[start:]
// through tab (empty, or holding the positions below start: a prefix
// hit): with Prefill when start and chunk are 0, else with PrefillFrom
// calls of chunk positions each (all at once when chunk is 0), each after
// its kvpage PrepareWrite and the copies that asks for. cold and first,
// when set, are the cold run's outputs and the first run's output hashes
// by position (the prefix-hit and recompute properties' expectations).
func (r *runner) prefill(c Cmd, q int, tab *kvpage.Table, toks []int32, start, chunk int, cold []qwen3.Output, first []uint64) *Failure {
	r.tabs[q] = tab
	slot := r.m.freeSlot()
	seq := qwen3.SeqID(q)
	N := len(toks)
	var last qwen3.Output // ref's output at the last position
	var next int32        // the token to feed next: ref's, or the SUT's when tolerant
	var f *Failure
	if start == 0 && chunk == 0 {
		if err := tab.Grow(N); err != nil {
			panic(fmt.Sprintf("host pool: %v", err))
		}
		p := qwen3.Prefill{Seq: seq, Tokens: toks, Blocks: tab.Blocks()}
		want, err := r.ref.Prefill(p)
		if err != nil {
			panic(fmt.Sprintf("ref prefill: %v", err))
		}
		got, gerr := sutDo(func() ([]qwen3.Output, error) { return r.dec.Prefill(p) })
		a := active{seq: q, slot: slot, blocks: p.Blocks, pos: positions(0, N)}
		f = r.check(call{c: c, act: []active{a}, got: got, want: want, err: gerr, cold: cold, first: first})
		r.steps += N
		r.recordAll(q, toks, 0, got, want, f)
		last, next = want[len(want)-1], r.fedLast(got, want, f)
	} else {
		pf, ok := r.dec.(qwen3.PrefixPrefiller)
		if !ok {
			panic("runner: a PrefillFrom action drawn for a SUT without PrefixPrefiller")
		}
		if chunk == 0 {
			chunk = N - start
		}
		sub := 0
		for s := start; s < N && f == nil; s += chunk {
			e := min(N, s+chunk)
			sub++
			copies, err := tab.PrepareWrite(s, e)
			if err != nil {
				panic(fmt.Sprintf("host pool: %v", err))
			}
			if len(copies) > 0 {
				if f = r.copyBlocks(c, sub, copies); f != nil {
					break
				}
			}
			p := qwen3.PrefillFrom{Seq: seq, Start: s, Tokens: toks[s:e], Blocks: tab.Blocks()}
			want, err := r.ref.PrefillFrom(p)
			if err != nil {
				panic(fmt.Sprintf("ref prefill from %d: %v", s, err))
			}
			got, gerr := sutDo(func() ([]qwen3.Output, error) { return pf.PrefillFrom(p) })
			a := active{seq: q, slot: slot, blocks: p.Blocks, pos: positions(s, e)}
			k := call{c: c, subStep: sub, from: true, act: []active{a}, got: got, want: want, err: gerr}
			if cold != nil {
				k.cold = cold[s:e]
			}
			if first != nil {
				k.first = first[s:e]
			}
			f = r.check(k)
			r.steps += e - s
			r.recordAll(q, toks[s:e], s, got, want, f)
			last, next = want[len(want)-1], r.fedLast(got, want, f)
			if chunk < N-start {
				r.reach.add(ReachChunk)
				if len(p.Blocks) > 8 {
					r.reach.add(ReachChunkPastStick)
				}
			}
		}
	}
	if f != nil {
		return f
	}
	r.next[q] = next
	r.prev = map[int]stepState{slot: {seq: q, pos: N - 1, token: last.Token}}
	if r.sc.Prefill == qwen3.PrefillDecode {
		r.reach.add(ReachPrefillByDecode)
	}
	if r.reach.afterReplay {
		r.reach.prefillAfterReplay = true
	}
	return nil
}

// positions is from, from+1, ..., to-1.
func positions(from, to int) []int {
	p := make([]int, to-from)
	for i := range p {
		p[i] = from + i
	}
	return p
}

// promptTokens is the prompt of an admit: token i is
// splitmix64(splitmix64(splitmix64(seq) + salt) + i) mod vocab.
func promptTokens(seq, salt, n, vocab int) []int32 {
	t := make([]int32, n)
	base := splitmix64(splitmix64(uint64(seq)) + uint64(salt))
	for i := range t {
		t[i] = int32(splitmix64(base+uint64(i)) % uint64(vocab))
	}
	return t
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser of x+γ.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// streamToken is token pos of the token stream (seq, salt): a prompt's
// token pos, a teacher-forced token, a started sequence's first token.
func streamToken(seq, salt, pos, vocab int) int32 {
	base := splitmix64(splitmix64(uint64(seq)) + uint64(salt))
	return int32(splitmix64(base+uint64(pos)) % uint64(vocab))
}
