package proptest

import (
	"fmt"
	"slices"
	"strings"
)

// Grids of a failure: small text pictures of the failing step, for a
// person reading the report — the device page table beside the host's,
// row by row, and a block × row map of the step's KV writes.

// maxGridCols and maxGridBlocks bound a KV write map.
const (
	maxGridCols   = 64
	maxGridBlocks = 16
)

// grids draws the failing call k: the page tables (when the SUT shows
// its own) and the KV write map (when it logs its writes: ws, logged).
func (r *runner) grids(k call, ws []KVWrite, logged bool) string {
	if len(k.act) == 0 {
		return ""
	}
	var b strings.Builder
	if po, ok := r.sut.(PageTableObserver); ok {
		r.pageTableGrid(&b, k, po)
	}
	if logged {
		r.kvWriteGrid(&b, k, ws)
	}
	return b.String()
}

func (r *runner) pageTableGrid(b *strings.Builder, k call, po PageTableObserver) {
	host, w, _ := r.hostTable(k)
	got, gw, present, err := po.DevicePageTable()
	if err != nil {
		return
	}
	slotSeq := map[int]int{}
	for _, a := range k.act {
		slotSeq[a.slot] = a.seq
	}
	fmt.Fprintf(b, "page table after the step: device (width %d) | host (width %d)\n", gw, w)
	for s := 0; s < r.sc.Capacity; s++ {
		dev := "absent"
		if present && gw > 0 && len(got) >= (s+1)*gw {
			dev = fmtRow(got[s*gw : (s+1)*gw])
		}
		hst := fmtRow(host[s*w : (s+1)*w])
		who := "inactive"
		if q, ok := slotSeq[s]; ok {
			who = fmt.Sprintf("seq %d", q)
		}
		mark := ""
		if dev != hst {
			mark = "   <- differs"
		}
		fmt.Fprintf(b, "  slot %d (%s)  %s | %s%s\n", s, who, dev, hst, mark)
	}
}

type cell struct{ block, row int64 }

// kvWriteGrid maps the K or V writes of one layer in call k: the first
// layer (K before V) whose writes differ from the host's expectation,
// else layer 0's K.
func (r *runner) kvWriteGrid(b *strings.Builder, k call, ws []KVWrite) {
	bs := r.sc.BlockSize
	want := map[cell]int{} // expected writer slot
	for _, a := range k.act {
		for _, p := range a.pos {
			want[cell{int64(a.blocks[p/bs]), int64(p % bs)}] = a.slot
		}
	}
	got := func(layer int, value bool) map[cell][]int {
		m := map[cell][]int{}
		for _, w := range ws {
			if w.Layer == layer && w.Value == value {
				c := cell{w.Block, w.Row}
				m[c] = append(m[c], w.Slot)
			}
		}
		return m
	}
	same := func(g map[cell][]int) bool {
		if len(g) != len(want) {
			return false
		}
		for c, s := range g {
			if x, ok := want[c]; !ok || len(s) != 1 || s[0] != x {
				return false
			}
		}
		return true
	}
	layer, value, g := 0, false, got(0, false)
	for l := 0; l < r.cfg.NumHiddenLayers; l++ {
		found := false
		for _, v := range []bool{false, true} {
			if m := got(l, v); !same(m) {
				layer, value, g, found = l, v, m, true
				break
			}
		}
		if found {
			break
		}
	}
	var blocks []int64
	lo, hi := int64(bs), int64(-1)
	add := func(c cell) {
		if !slices.Contains(blocks, c.block) {
			blocks = append(blocks, c.block)
		}
		lo, hi = min(lo, c.row), max(hi, c.row)
	}
	for c := range want {
		add(c)
	}
	for c := range g {
		add(c)
	}
	if len(blocks) == 0 {
		return
	}
	slices.Sort(blocks)
	from, to := int64(0), int64(bs)
	if bs > maxGridCols {
		from = max(0, min(lo-4, int64(bs-maxGridCols)))
		to = from + maxGridCols
	}
	kv := "K"
	if value {
		kv = "V"
	}
	fmt.Fprintf(b, "KV writes of the step, layer %d %s, rows %d..%d of each block (digit: the slot that wrote a row the host expects it to; ! expected, not written; x written, not expected or by another slot; * several writes):\n",
		layer, kv, from, to-1)
	shown := blocks
	if len(shown) > maxGridBlocks {
		shown = shown[:maxGridBlocks]
	}
	for _, blk := range shown {
		var row strings.Builder
		for rr := from; rr < to; rr++ {
			c := cell{blk, rr}
			x, exp := want[c]
			s := g[c]
			switch {
			case len(s) > 1:
				row.WriteByte('*')
			case len(s) == 1 && exp && s[0] == x:
				row.WriteString(fmt.Sprint(x))
			case len(s) == 1:
				row.WriteByte('x')
			case exp:
				row.WriteByte('!')
			default:
				row.WriteByte('.')
			}
		}
		fmt.Fprintf(b, "  block %4d  %s\n", blk, row.String())
	}
	if n := len(blocks) - len(shown); n > 0 {
		fmt.Fprintf(b, "  (%d more blocks)\n", n)
	}
}
