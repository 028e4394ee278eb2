package proptest

import (
	"fmt"
	"math/rand"
	"slices"

	"github.com/offcard/offcard/qwen3"
)

// The fork action (parallel sampling, beam search): a new sequence that
// shares every block of a live parent (kvpage Fork) and decodes its first
// position at the parent's length, fed a token of its own (its stream
// (seq, salt) there), after the copy-on-write of the shared partial block
// its write lands in (kvpage PrepareWrite; none at a block boundary). The
// parent's next write into a block the child still shares is copied too.
// Expectations: every exact property of a decode step; shared-write.

func (r *runner) fork(c Cmd) *Failure {
	q, p := c.Seq, c.From
	tab := r.tabs[p].Fork()
	r.tabs[q] = tab
	pos := tab.Len()
	r.hist[q] = slices.Clone(r.hist[p][:pos])
	r.outh[q] = slices.Clone(r.outh[p][:pos])
	r.rolled[q] = [2]int{}
	r.ref.seat(qwen3.SeqID(q), r.hist[q])
	if _, ok := r.sut.(*EngineSUT); ok {
		r.wire().inherit(q, p, pos)
	}
	r.reach.add(ReachFork)
	copies, err := tab.PrepareWrite(pos, pos+1)
	if err != nil {
		panic(fmt.Sprintf("host pool: %v", err))
	}
	if len(copies) > 0 {
		if f := r.copyBlocks(c, 0, copies); f != nil {
			return f
		}
	}
	tok := streamToken(q, c.Salt, pos, r.cfg.VocabSize)
	batch := []qwen3.Step{{Seq: qwen3.SeqID(q), Token: tok, Pos: pos, Blocks: tab.Blocks()}}
	want, err := r.ref.Decode(batch)
	if err != nil {
		panic(fmt.Sprintf("ref decode: %v", err))
	}
	got, gerr := sutDo(func() ([]qwen3.Output, error) { return r.dec.Decode(batch) })
	a := active{seq: q, slot: r.m.freeSlot(), pos: []int{pos}, blocks: batch[0].Blocks}
	if f := r.check(call{c: c, decode: true, act: []active{a}, got: got, want: want, err: gerr}); f != nil {
		return f
	}
	r.steps++
	r.next[q] = r.fed(got, want, 0)
	r.record(q, pos, tok, got, 0)
	r.prev = map[int]stepState{a.slot: {seq: q, pos: pos, token: want[0].Token}}
	return nil
}

// drawFork draws a fork of a live parent (any when the SUT copies blocks;
// else one whose length is a whole number of blocks, as no copy is then
// needed), child the lowest free id.
func drawFork(rng *rand.Rand, m model) (Cmd, bool) {
	if m.freeSlot() < 0 {
		return Cmd{}, false
	}
	var ps []int
	for q, l := range m.live {
		if l && (m.serve.CopyBlocks || m.length[q]%m.sc.BlockSize == 0) {
			ps = append(ps, q)
		}
	}
	if len(ps) == 0 {
		return Cmd{}, false
	}
	c := Cmd{Kind: Fork, Seq: newSeq(rng, m), From: ps[rng.Intn(len(ps))], Salt: rng.Intn(4)}
	return c, m.check(c) == nil
}
