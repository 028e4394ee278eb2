package proptest

import (
	"fmt"
	"math"
	"slices"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
)

// Properties kv-write and kv-cache (2), exact mode: the device's KV write
// log and cache bytes against ref's cache, which wrote each position at the
// host table's block, row pos%bs.

type wkey struct {
	layer int
	value bool
	slot  int
}

func (r *runner) checkWrites(ps *[]problem, k call, ws []KVWrite, slotSeq map[int]int) {
	bs := r.sc.BlockSize
	if k.from {
		r.checkWritesByPlace(ps, k, ws)
		return
	}
	// The writes by cache and slot, in the order the keys first appear:
	// r.wkeys maps a key to its group in r.wgroups (both reused, emptied
	// here; a key checked below is deleted).
	if r.wkeys == nil {
		r.wkeys = map[wkey]int{}
	}
	clear(r.wkeys)
	groups, order := r.wgroups[:0], r.worder[:0]
	for _, w := range ws {
		key := wkey{w.Layer, w.Value, w.Slot}
		i, ok := r.wkeys[key]
		if !ok {
			i = len(groups)
			r.wkeys[key] = i
			order = append(order, key)
			if i < cap(groups) {
				groups = groups[:i+1]
				groups[i] = groups[i][:0]
			} else {
				groups = append(groups, nil)
			}
		}
		groups[i] = append(groups[i], w)
	}
	r.wgroups, r.worder = groups, order
	take := func(key wkey) ([]KVWrite, bool) {
		i, ok := r.wkeys[key]
		if !ok {
			return nil, false
		}
		delete(r.wkeys, key)
		return groups[i], true
	}
	var curPos, place *problem
	note := func(dst **problem, p problem) {
		if *dst == nil {
			*dst = &p
		}
	}
	for _, a := range k.act {
		for l := 0; l < r.cfg.NumHiddenLayers; l++ {
			for _, value := range []bool{false, true} {
				got, _ := take(wkey{l, value, a.slot})
				for i, p := range a.pos {
					wantB, wantR := int64(a.blocks[p/bs]), int64(p%bs)
					exp := KVWrite{Layer: l, Value: value, Slot: a.slot, Pos: int64(p), Block: wantB, Row: wantR}
					if i >= len(got) {
						note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: p, located: true, offset: i, missing: true,
							detail: fmt.Sprintf("seq %d: missing KV write (%v)", a.seq, exp)})
						break
					}
					g := got[i]
					if g.Pos != int64(p) {
						note(&curPos, problem{prop: PropCurPos, seq: a.seq, pos: p, located: true, offset: i,
							detail: fmt.Sprintf("seq %d: paged_update_cache (layer %d %s, slot %d) ran with device cur_pos %d, host seq_len-1 is %d", a.seq, l, kvName(value), a.slot, g.Pos, p)})
						continue
					}
					if g.Block != wantB || g.Row != wantR {
						note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: p, located: true, offset: i,
							detail: fmt.Sprintf("seq %d pos %d: KV written to block %d row %d, the host table says block %d row %d (table %v, layer %d %s)", a.seq, p, g.Block, g.Row, wantB, wantR, a.blocks[:p/bs+1], l, kvName(value))})
					}
				}
				if len(got) > len(a.pos) {
					lastPos, off := -1, 0
					if len(a.pos) > 0 {
						lastPos, off = a.pos[len(a.pos)-1], len(a.pos)-1
					}
					note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: lastPos, located: true, offset: off,
						detail: fmt.Sprintf("seq %d: %d extra KV writes, first %v", a.seq, len(got)-len(a.pos), got[len(a.pos)])})
				}
			}
		}
	}
	for _, key := range order {
		got, ok := take(key)
		if !ok {
			continue
		}
		g := got[0]
		switch {
		case key.layer < 0:
			note(&place, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("KV write into a buffer that is no cache of the engine: %v", g)})
		case key.layer >= r.cfg.NumHiddenLayers:
			note(&place, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("KV write into layer %d of %d: %v", key.layer, r.cfg.NumHiddenLayers, g)})
		default:
			note(&curPos, problem{prop: PropCurPos, seq: -1, pos: -1, detail: fmt.Sprintf("slot %d is inactive (host cur_pos -1) but paged_update_cache wrote for it with device cur_pos %d (%v)", key.slot, g.Pos, g)})
		}
	}
	if curPos != nil {
		*ps = append(*ps, *curPos)
	}
	if place != nil {
		*ps = append(*ps, *place)
	}
}

// checkWritesByPlace is checkWrites for a PrefillFrom call: its one
// sequence's positions written exactly once each, at the host table's
// block and row, and nothing else, matched by place. A chunk's
// paged_fill_cache writes through the chunk's own page-table slice (batch
// row 0, update index from 0, as tt_transformers' chunked prefill does),
// so the log's slot and position are the slice's, not the sequence's.
func (r *runner) checkWritesByPlace(ps *[]problem, k call, ws []KVWrite) {
	bs := r.sc.BlockSize
	a := k.act[0]
	type place struct {
		layer      int
		value      bool
		block, row int64
	}
	want := map[place]int{} // the position to write there
	for _, p := range a.pos {
		for l := 0; l < r.cfg.NumHiddenLayers; l++ {
			for _, v := range []bool{false, true} {
				want[place{l, v, int64(a.blocks[p/bs]), int64(p % bs)}] = p
			}
		}
	}
	seen := map[place]bool{}
	for _, w := range ws {
		pl := place{w.Layer, w.Value, w.Block, w.Row}
		p, ok := want[pl]
		switch {
		case w.Layer < 0 || w.Layer >= r.cfg.NumHiddenLayers:
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("KV write into a buffer that is no cache of the engine: %v", w)})
			return
		case !ok:
			*ps = append(*ps, problem{prop: PropKVWrite, seq: a.seq, pos: a.pos[0], located: true,
				detail: fmt.Sprintf("seq %d: KV write to block %d row %d, which no position %d..%d of the call maps to (table %v; %v)", a.seq, w.Block, w.Row, a.pos[0], a.pos[len(a.pos)-1], a.blocks, w)})
			return
		case seen[pl]:
			*ps = append(*ps, problem{prop: PropKVWrite, seq: a.seq, pos: p, located: true, offset: p - a.pos[0],
				detail: fmt.Sprintf("seq %d pos %d: KV written twice (block %d row %d, layer %d %s)", a.seq, p, w.Block, w.Row, w.Layer, kvName(w.Value))})
			return
		}
		seen[pl] = true
	}
	for i, p := range a.pos {
		for l := 0; l < r.cfg.NumHiddenLayers; l++ {
			for _, v := range []bool{false, true} {
				if pl := (place{l, v, int64(a.blocks[p/bs]), int64(p % bs)}); !seen[pl] {
					*ps = append(*ps, problem{prop: PropKVWrite, seq: a.seq, pos: p, located: true, offset: i, missing: true,
						detail: fmt.Sprintf("seq %d: missing KV write (layer %d %s pos %d -> block %d row %d)", a.seq, l, kvName(v), p, pl.block, pl.row)})
					return
				}
			}
		}
	}
}

// dropPromptPadding removes from a multi-token prefill's KV writes those
// of the tile padding rows past the prompt (positions T..roundup32(T)-1 of
// the last block, where the host table names them): paged_fill_cache
// writes whole 32-row tiles, and the oracle expects those rows to hold
// zeros. A prefill by decode steps writes no such row.
func (r *runner) dropPromptPadding(ws []KVWrite, k call) []KVWrite {
	if k.decode || k.verify || r.sc.Prefill != qwen3.PrefillProgram {
		return ws
	}
	bs := r.sc.BlockSize
	if k.from {
		// By place (see checkWritesByPlace): the rows after the call's
		// last position to its tile's end, when the call ran a chunk.
		a := k.act[0]
		end := a.pos[len(a.pos)-1] + 1
		if !chunkRuns(a.pos[0], len(a.pos), bs) {
			return ws
		}
		pad := map[[2]int64]bool{}
		for p := end; p < promptTileEnd(end) && p/bs < len(a.blocks); p++ {
			pad[[2]int64{int64(a.blocks[p/bs]), int64(p % bs)}] = true
		}
		out := ws[:0:0]
		for _, w := range ws {
			if !pad[[2]int64{w.Block, w.Row}] {
				out = append(out, w)
			}
		}
		return out
	}
	out := ws[:0:0]
	for _, w := range ws {
		pad := false
		for _, a := range k.act {
			T := len(a.pos)
			if w.Slot != a.slot || w.Pos < int64(T) || w.Pos >= int64(promptTileEnd(T)) {
				continue
			}
			p := int(w.Pos)
			if p/bs < len(a.blocks) && w.Block == int64(a.blocks[p/bs]) && w.Row == int64(p%bs) {
				pad = true
			}
		}
		if !pad {
			out = append(out, w)
		}
	}
	return out
}

func kvName(value bool) string {
	if value {
		return "V"
	}
	return "K"
}

// expectedRows lists the cache rows (block, row) a call writes, by slot.
func expectedRows(act []active, bs int) map[[2]int][2]int {
	rows := map[[2]int][2]int{}
	for _, a := range act {
		for _, p := range a.pos {
			rows[[2]int{int(a.blocks[p/bs]), p % bs}] = [2]int{a.seq, p}
		}
	}
	return rows
}

// diffCache compares the SUT's whole KV cache with ref's after a call:
// ref wrote each position of the call at the host table's block, row
// pos%bs, so a row that differs is a write that went elsewhere (a row the
// call should have written does not hold its values) or a write where
// none belongs (any other row changed). The cache is read where the
// kernel really wrote, not from any log.
func (r *runner) diffCache(ps *[]problem, k call) {
	kp := r.sut.(KVPeeker)
	kvh, hd, bs := r.cfg.NumKeyValueHeads, r.cfg.HeadDim, r.sc.BlockSize
	rows := expectedRows(k.act, bs)
	// The caches were equal after the previous call (before the first
	// one both held +0, as PeekKV's ranges count from): only what the
	// device or ref wrote since can differ.
	var refRows [][2]int
	for _, slot := range r.ref.takeWritten() {
		blk, row := slot/bs, slot%bs
		for h := 0; h < kvh; h++ {
			lo := ((blk*kvh+h)*bs + row) * hd
			refRows = append(refRows, [2]int{lo, lo + hd})
		}
	}
	shared, sharedSeen := r.sharedBlocks(), false
	for l := 0; l < r.cfg.NumHiddenLayers; l++ {
		dk, dv, changed, err := kp.PeekKV(l)
		if err != nil {
			*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "peek KV cache: " + err.Error()})
			return
		}
		if shared != nil && !sharedSeen {
			sharedSeen = r.checkSharedBytes(ps, l, dk, dv, changed, shared)
		}
		value, i, ok := r.firstCacheDiff(ps, l, dk, dv, mergeSpans(append(changed, refRows...))) // changed is ours until the next PeekKV
		if !ok {
			return
		}
		if i < 0 {
			continue
		}
		blk, row, head, dim := r.cacheCoord(i)
		dev, oracl := r.cacheBits(l, value, i, dk, dv)
		where := fmt.Sprintf("layer %d %s cache block %d row %d (head %d dim %d): device bits %#04x, ref %#04x", l, kvName(value), blk, row, head, dim, dev, oracl)
		if c, ok := copyDst(k.copies, blk); ok {
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("block copy %d->%d: destination row %d does not hold the source's row (a copy writes its whole destination block): %s", c.Src, c.Dst, row, where)})
		} else if sp, ok := rows[[2]int{blk, row}]; ok {
			*ps = append(*ps, problem{prop: PropKVWrite, seq: sp[0], pos: sp[1], detail: fmt.Sprintf("seq %d pos %d: the cache row the host table names does not hold ref's values (the write went elsewhere, was dropped, or wrote other values): %s", sp[0], sp[1], where)})
		} else {
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: "a cache row no position of the call maps to differs from ref's (a stray write): " + where})
		}
		return
	}
}

// copyDst is the copy whose destination is block blk.
func copyDst(copies []qwen3.BlockCopy, blk int) (qwen3.BlockCopy, bool) {
	for _, c := range copies {
		if int(c.Dst) == blk {
			return c, true
		}
	}
	return qwen3.BlockCopy{}, false
}

// firstCacheDiff is the first element, K before V, where layer l's device
// caches dk and dv differ from ref's, looking only inside spans (sorted
// and disjoint; allSpans: everywhere); i is -1 when they agree. ok is false
// when the sizes differ (a problem is added). ref holds the memory of its
// first blocks only (ref.KVStore.Layer): past them its values are +0.
func (r *runner) firstCacheDiff(ps *[]problem, l int, dk, dv []bf16.BF16, spans [][2]int) (value bool, i int, ok bool) {
	rk, rv := r.ref.KV().Layer(l)
	size := r.ref.KV().LayerSize()
	for _, x := range []struct {
		value      bool
		dev, oracl []bf16.BF16
	}{{false, dk, rk}, {true, dv, rv}} {
		if len(x.dev) != size {
			*ps = append(*ps, problem{prop: PropKVCache, seq: -1, pos: -1, detail: fmt.Sprintf("device cache has %d values, ref %d", len(x.dev), size)})
			return false, -1, false
		}
		held := len(x.oracl)
		for _, sp := range spans {
			lo, hi := sp[0], min(sp[1], size)
			if m := min(hi, held); lo < m {
				if j := firstDiff(x.dev[lo:m], x.oracl[lo:m]); j >= 0 {
					return x.value, lo + j, true
				}
			}
			if lo = max(lo, held); lo < hi {
				if j := firstNonZero(x.dev[lo:hi]); j >= 0 {
					return x.value, lo + j, true
				}
			}
		}
	}
	return false, -1, true
}

// firstNonZero is the index of the first value of a whose bits are not
// +0's, or -1.
func firstNonZero(a []bf16.BF16) int {
	for i, x := range a {
		if x != 0 {
			return i
		}
	}
	return -1
}

// allSpans is the one span that covers a whole cache.
var allSpans = [][2]int{{0, math.MaxInt}}

// cacheCoord is element i of a layer's cache in ref's layout
// [block][kvHead][row][headDim].
func (r *runner) cacheCoord(i int) (blk, row, head, dim int) {
	kvh, hd, bs := r.cfg.NumKeyValueHeads, r.cfg.HeadDim, r.sc.BlockSize
	return i / hd / bs / kvh, i / hd % bs, i / hd / bs % kvh, i % hd
}

// cacheBits are element i of layer l's K (or V) cache on the device and
// in ref.
func (r *runner) cacheBits(l int, value bool, i int, dk, dv []bf16.BF16) (dev, oracl uint16) {
	rk, rv := r.ref.KV().Layer(l)
	d, o := dk, rk
	if value {
		d, o = dv, rv
	}
	if i < len(o) { // past ref's held blocks: +0
		oracl = uint16(o[i])
	}
	return uint16(d[i]), oracl
}

// mergeSpans sorts the ranges [lo, hi) and merges those that overlap or
// touch, so the first difference found scanning them in order is the
// lowest index.
func mergeSpans(s [][2]int) [][2]int {
	slices.SortFunc(s, func(a, b [2]int) int { return a[0] - b[0] })
	out := s[:0]
	for _, x := range s {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []bf16.BF16) int {
	if bf16.Equal(a[:len(b)], b) { // the common case, compared at once
		return -1
	}
	for i := range b {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// auditMaxBlocks: caches of more blocks are not audited (reading 256
// blocks back after every finish costs more than the rest of a schedule;
// the KV write log still shows every write landed where the table says).
const auditMaxBlocks = 64

// auditCache compares the SUT's whole KV cache with ref's.
func (r *runner) auditCache(ps *[]problem) {
	kr, ok := r.sut.(KVReader)
	if !ok {
		return
	}
	for l := 0; l < r.cfg.NumHiddenLayers; l++ {
		dk, dv, err := kr.ReadKV(l)
		if err != nil {
			*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read KV cache: " + err.Error()})
			return
		}
		value, i, ok := r.firstCacheDiff(ps, l, dk, dv, allSpans)
		if !ok {
			return
		}
		if i >= 0 {
			blk, row, head, dim := r.cacheCoord(i)
			dev, oracl := r.cacheBits(l, value, i, dk, dv)
			*ps = append(*ps, problem{prop: PropKVCache, seq: -1, pos: -1, detail: fmt.Sprintf("layer %d %s cache, block %d row %d head %d dim %d: device bits %#04x, ref %#04x", l, kvName(value), blk, row, head, dim, dev, oracl)})
			return
		}
	}
}
