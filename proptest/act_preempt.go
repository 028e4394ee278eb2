package proptest

import (
	"fmt"
	"math/rand"

	"github.com/offcard/offcard/qwen3"
)

// Preemption by recompute: preempt ends a live sequence (Finish; its
// blocks return to the pool, where other sequences take them) and keeps
// its tokens; readmit prefills its prompt and generated tokens again
// through fresh blocks (Prefill, or PrefillFrom chunks). Expectation
// besides every exact property: the recompute property
// (prop_recompute.go), each recomputed output bit-identical to the SUT's
// own first run at that position.

func (r *runner) preempt(c Cmd) *Failure {
	f := r.end(c)
	r.rolled[c.Seq] = [2]int{}
	r.reach.add(ReachPreempt)
	return f
}

func (r *runner) readmit(c Cmd) *Failure {
	q := c.Seq
	toks, first := r.hist[q], r.outh[q]
	if len(toks) != r.m.preempted[q] {
		panic(fmt.Sprintf("runner: seq %d preempted at %d positions, %d tokens kept", q, r.m.preempted[q], len(toks)))
	}
	r.hist[q], r.outh[q] = nil, nil
	r.reach.add(ReachReadmit)
	return r.prefill(c, q, r.pool.NewTable(), toks, 0, c.Chunk, nil, first)
}

// end finishes sequence q on ref and the SUT and releases its table (the
// blocks another table shares stay held by it).
func (r *runner) end(c Cmd) *Failure {
	if err := r.ref.Finish(qwen3.SeqID(c.Seq)); err != nil {
		panic(fmt.Sprintf("ref finish: %v", err))
	}
	_, err := sutDo(func() (struct{}, error) { return struct{}{}, r.dec.Finish(qwen3.SeqID(c.Seq)) })
	for _, b := range r.tabs[c.Seq].Blocks() {
		if r.pool.RefCount(b) > 1 {
			r.reach.add(ReachSharedAfterEnd)
			break
		}
	}
	r.tabs[c.Seq].Release()
	r.tabs[c.Seq] = nil
	r.prev = nil
	return r.checkQuiet(c, err)
}

// drawPreempt draws the preemption of a live sequence with a gapless
// history.
func drawPreempt(rng *rand.Rand, m model) (Cmd, bool) {
	var qs []int
	for q, l := range m.live {
		if l && m.contig[q] == m.length[q] {
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		return Cmd{}, false
	}
	return Cmd{Kind: Preempt, Seq: qs[rng.Intn(len(qs))]}, true
}

// drawReadmit draws the re-admit of a preempted sequence, chunked one
// time in four when the SUT serves PrefillFrom.
func drawReadmit(rng *rand.Rand, m model) (Cmd, bool) {
	var qs []int
	for q, n := range m.preempted {
		if n > 0 && !m.live[q] {
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		return Cmd{}, false
	}
	c := Cmd{Kind: Readmit, Seq: qs[rng.Intn(len(qs))]}
	if m.serve.PrefillFrom && rng.Intn(4) == 0 {
		c.Chunk = drawChunk(rng, m.sc.BlockSize)
	}
	return c, m.check(c) == nil
}
