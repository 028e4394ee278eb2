package proptest

import (
	"fmt"
	"math/rand"
	"slices"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// The prefix-hit action (share): a new sequence whose first Len positions
// are another live sequence's (its tokens and its KV blocks, shared
// through kvpage SharePrefix: at, before and after block boundaries; a
// partial last block is copied before the first write into it), then its
// own tokens prefilled with PrefillFrom from Len, in chunks or at once.
// The donor may finish while the sharer lives: the shared blocks stay
// held by the sharer. Its expectation besides every exact property: the
// prefix-hit property (prop_prefixhit.go), the outputs equal a cold run
// of the same tokens that ref computes from position 0 on a cache of its
// own.

func (r *runner) share(c Cmd) *Failure {
	q, d := c.Seq, c.From
	tab := r.pool.NewTable()
	if err := tab.SharePrefix(r.tabs[d], c.Len); err != nil {
		panic(fmt.Sprintf("host pool: %v", err))
	}
	toks := promptTokens(q, c.Salt, c.Prompt, r.cfg.VocabSize)
	copy(toks, r.hist[d][:c.Len])
	r.hist[q] = slices.Clone(r.hist[d][:c.Len])
	r.outh[q] = slices.Clone(r.outh[d][:c.Len])
	r.rolled[q] = [2]int{}
	r.ref.seat(qwen3.SeqID(q), toks[:c.Len])
	if _, ok := r.sut.(*EngineSUT); ok {
		r.wire().inherit(q, d, c.Len)
	}
	cold, err := r.coldRun(qwen3.SeqID(q), toks)
	if err != nil {
		panic(fmt.Sprintf("ref cold run: %v", err))
	}
	r.reach.add(ReachShare)
	if c.Len%r.sc.BlockSize == 0 {
		r.reach.add(ReachShareAtBoundary)
	} else {
		r.reach.add(ReachShareInBlock)
	}
	return r.prefill(c, q, tab, toks, c.Len, c.Chunk, cold, nil)
}

// coldRun is what a cold prefill of toks returns: ref itself (not the
// runner's oracle and its memo) prefills them from position 0 into a cache
// of its own.
func (r *runner) coldRun(seq qwen3.SeqID, toks []int32) ([]qwen3.Output, error) {
	bs := r.sc.BlockSize
	if r.cold == nil {
		d, err := ref.New(r.w, ref.Options{BlockSize: bs, NumBlocks: blocksFor(r.m.maxLen, bs), Threads: 1})
		if err != nil {
			return nil, err
		}
		r.cold = d
	}
	blocks := make([]int32, blocksFor(len(toks), bs))
	for i := range blocks {
		blocks[i] = int32(i)
	}
	outs, err := r.cold.Prefill(qwen3.Prefill{Seq: 0, Tokens: toks, Blocks: blocks})
	if err != nil {
		return nil, err
	}
	for i := range outs {
		outs[i].Seq = seq
	}
	return outs, r.cold.Finish(0)
}

// drawShare draws a prefix hit: a live donor with a gapless history, a
// shared length at, before or after a block boundary (k·bs-1, k·bs,
// k·bs+1; only whole blocks when the SUT cannot copy blocks), or the
// donor's whole history, and a tail of the sharer's own tokens reaching
// the next boundary or a few positions; chunked one time in three.
func drawShare(rng *rand.Rand, m model) (Cmd, bool) {
	if !m.serve.PrefillFrom || m.freeSlot() < 0 {
		return Cmd{}, false
	}
	var donors []int
	for q, l := range m.live {
		if l && m.contig[q] >= 1 {
			donors = append(donors, q)
		}
	}
	if len(donors) == 0 {
		return Cmd{}, false
	}
	bs := m.sc.BlockSize
	d := donors[rng.Intn(len(donors))]
	most := m.contig[d]
	var L int
	if k := rng.Intn(most/bs + 1); k > 0 && rng.Intn(4) > 0 {
		// Around the boundary k·bs: at it half the time.
		L = k*bs + []int{-1, 0, 0, 1}[rng.Intn(4)]
	} else {
		L = most - rng.Intn(min(most, 3))
	}
	if !m.serve.CopyBlocks {
		L = L / bs * bs
	}
	L = min(max(L, 1), most)
	if !m.serve.CopyBlocks && L%bs != 0 {
		return Cmd{}, false
	}
	free := m.sc.NumBlocks - m.blocksInUse()
	room := min(m.maxLen, (blocksFor(L, bs)+free-1)*bs, L+max(1, m.budget()-m.work))
	var n int
	switch pick(rng, 2, 3) {
	case 0:
		n = (L/bs+1)*bs - 1 + rng.Intn(3)
	default:
		n = L + 1 + rng.Intn(bs/2)
	}
	n = min(n, room)
	if n <= L {
		return Cmd{}, false
	}
	c := Cmd{Kind: Share, Seq: newSeq(rng, m), From: d, Len: L, Prompt: n, Salt: m.admits}
	if rng.Intn(3) == 0 {
		c.Chunk = drawChunk(rng, bs)
	}
	return c, m.check(c) == nil
}
