package proptest

import (
	"fmt"
	"slices"
	"strings"
)

// Property page-table (6), exact mode: the device page table after every
// call against the host's rows and the width policy (the contract's pad
// and width are written here, never taken from the engine's helpers).

// contractPad is the page-table value of every column a slot does not use
// (the columns past its current block, every column of an inactive slot).
const contractPad int32 = 0

// contractWidth is the page-table width of a step whose longest active
// row needs longest blocks: fixed:N is N; dynamic is the longest row, at
// least one column.
func (sc Scenario) contractWidth(longest int) int {
	if fw, ok := sc.Width.FixedWidth(); ok {
		return fw
	}
	return max(longest, 1)
}

// hostTable is the page table the host expects after call k (see
// checkPageTable), its width and the longest active row in blocks.
func (r *runner) hostTable(k call) (want []int32, w, longest int) {
	bs, C := r.sc.BlockSize, r.sc.Capacity
	for _, a := range k.act {
		longest = max(longest, a.pos[len(a.pos)-1]/bs+1)
	}
	w = r.sc.contractWidth(longest)
	want = make([]int32, C*w)
	for i := range want {
		want[i] = contractPad
	}
	for _, a := range k.act {
		copy(want[a.slot*w:], a.blocks[:a.pos[len(a.pos)-1]/bs+1])
	}
	return want, w, longest
}

// checkPageTable compares the device page table after a Decoder call with
// the rows the engine documents (qwen3.Engine, "Page table"): row s of an
// active slot of the call's last step holds Blocks[:Pos/BlockSize+1] of
// that step, then the contract's pad 0; every other row is all pad; the width
// is the width policy over the active rows' block counts. The table is
// read after the call, so inside a prefill only its last step's table is
// seen.
func (r *runner) checkPageTable(ps *[]problem, k call, slotSeq map[int]int) {
	po, ok := r.sut.(PageTableObserver)
	if !ok {
		return
	}
	bs, C := r.sc.BlockSize, r.sc.Capacity
	want, w, longest := r.hostTable(k)
	r.ptWant, r.ptWidth = want, w
	got, gw, ok, err := po.DevicePageTable()
	off := len(k.act[0].pos) - 1
	switch {
	case err != nil:
		*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read page table: " + err.Error()})
		return
	case !ok:
		*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1, located: true, offset: off,
			detail: "the engine has no page table after a step"})
		return
	case gw != w || len(got) != C*w:
		*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1, located: true, offset: off,
			detail: fmt.Sprintf("the device page table is %d values of width %d, the host expects [%d, %d] (width policy %s, longest active row %d blocks)", len(got), gw, C, w, r.sc.Width, longest)})
		return
	}
	for s := 0; s < C; s++ {
		g, x := got[s*w:(s+1)*w], want[s*w:(s+1)*w]
		if slices.Equal(g, x) {
			continue
		}
		seq, pos, what := -1, -1, fmt.Sprintf("slot %d is inactive in the step", s)
		if q, ok := slotSeq[s]; ok {
			for _, a := range k.act {
				if a.slot == s {
					seq, pos = q, a.pos[len(a.pos)-1]
				}
			}
			what = fmt.Sprintf("slot %d holds seq %d at pos %d (block size %d)", s, seq, pos, bs)
		}
		*ps = append(*ps, problem{prop: PropPageTable, seq: seq, pos: pos, located: true, offset: off,
			detail: fmt.Sprintf("device page-table row %d is %s, the host expects %s: %s (columns past its blocks hold PagePad %d)", s, fmtRow(g), fmtRow(x), what, contractPad)})
		return
	}
}

// checkPageTableKept checks that a command that runs no step (finish,
// recapture) left the device page table as the last step wrote it.
func (r *runner) checkPageTableKept(ps *[]problem) {
	po, ok := r.sut.(PageTableObserver)
	if !ok || r.ptWant == nil {
		return
	}
	got, gw, ok, err := po.DevicePageTable()
	switch {
	case err != nil:
		*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read page table: " + err.Error()})
	case !ok || gw != r.ptWidth || !slices.Equal(got, r.ptWant):
		*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1,
			detail: fmt.Sprintf("a command that runs no step changed the device page table: %s (width %d, present %v), the last step left %s (width %d)", fmtRow(got), gw, ok, fmtRow(r.ptWant), r.ptWidth)})
	}
}

// fmtRow prints page-table values with a trailing run of more than four
// PagePad entries collapsed, e.g. "[3 7 ...254×0]".
func fmtRow(v []int32) string {
	n := len(v)
	for n > 0 && v[n-1] == contractPad {
		n--
	}
	if len(v)-n <= 4 {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(fmt.Sprint(v[:n]), "]")
	if n > 0 {
		s += " "
	}
	return fmt.Sprintf("%s...%d×%d]", s, len(v)-n, contractPad)
}
