package proptest

import (
	"fmt"

	"github.com/offcard/offcard/bf16"
)

// Property shared-write, exact mode: a block that two or more host tables
// hold (a fork's, a prefix hit's; kvpage's reference count above one when
// the call is made, after PrepareWrite took every copy the call's writes
// need) is never written: only its sole owner writes, after the copy.
// Observed through the device's KV write log (any write record into such a
// block: a write of equal bytes too) and through the cache bytes (any
// element of such a block that changed and differs from ref's, which never
// writes one). The expectation is the host pool's reference counts (the
// scheduler's truth, kvpage), not the SUT's.

// PropSharedWrite: the device wrote into a block another table holds too.
const PropSharedWrite = "shared-write"

// sharedBlocks is the set of blocks more than one host table holds, by
// id; nil when none.
func (r *runner) sharedBlocks() []bool {
	var s []bool
	for b := range r.sc.NumBlocks {
		if r.pool.RefCount(int32(b)) > 1 {
			if s == nil {
				s = make([]bool, r.sc.NumBlocks)
			}
			s[b] = true
		}
	}
	return s
}

// holdersOf names the live sequences whose host tables hold block b.
func (r *runner) holdersOf(b int32) []int {
	var qs []int
	for q, t := range r.tabs {
		if t == nil {
			continue
		}
		for _, x := range t.Blocks() {
			if x == b {
				qs = append(qs, q)
				break
			}
		}
	}
	return qs
}

// checkSharedLog checks the KV write log of a call.
func (r *runner) checkSharedLog(ps *[]problem, ws []KVWrite, slotSeq map[int]int) {
	shared := r.sharedBlocks()
	if shared == nil {
		return
	}
	for _, w := range ws {
		if w.Layer < 0 || w.Block < 0 || w.Block >= int64(len(shared)) || !shared[w.Block] {
			continue
		}
		seq, pos := -1, -1
		if q, ok := slotSeq[w.Slot]; ok {
			seq, pos = q, int(w.Pos)
		}
		*ps = append(*ps, problem{prop: PropSharedWrite, seq: seq, pos: pos,
			detail: fmt.Sprintf("the device wrote into block %d, which the host tables of seqs %v share (reference count %d): %v", w.Block, r.holdersOf(int32(w.Block)), r.pool.RefCount(int32(w.Block)), w)})
		return
	}
}

// checkSharedBytes checks layer l's changed cache elements (spans, as
// PeekKV returned them) for writes into shared blocks.
func (r *runner) checkSharedBytes(ps *[]problem, l int, dk, dv []bf16.BF16, spans [][2]int, shared []bool) bool {
	rk, rv := r.ref.KV().Layer(l)
	per := r.cfg.NumKeyValueHeads * r.cfg.HeadDim * r.sc.BlockSize // elements per block
	for _, x := range []struct {
		value      bool
		dev, oracl []bf16.BF16
	}{{false, dk, rk}, {true, dv, rv}} {
		for _, sp := range spans {
			for b := sp[0] / per; b*per < sp[1] && b < len(shared); b++ {
				if !shared[b] {
					continue
				}
				lo, hi := max(sp[0], b*per), min(sp[1], (b+1)*per, len(x.dev))
				for i := lo; i < hi; i++ {
					var o bf16.BF16
					if i < len(x.oracl) {
						o = x.oracl[i]
					}
					if x.dev[i] == o {
						continue
					}
					blk, row, head, dim := r.cacheCoord(i)
					*ps = append(*ps, problem{prop: PropSharedWrite, seq: -1, pos: -1,
						detail: fmt.Sprintf("layer %d %s cache block %d row %d (head %d dim %d) changed to bits %#04x (ref %#04x), but the host tables of seqs %v share the block (reference count %d)", l, kvName(x.value), blk, row, head, dim, uint16(x.dev[i]), uint16(o), r.holdersOf(int32(blk)), r.pool.RefCount(int32(blk)))})
					return true
				}
			}
		}
	}
	return false
}
