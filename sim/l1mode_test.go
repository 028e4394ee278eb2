package sim

import (
	"testing"

	"github.com/offcard/offcard/tt"
)

// The seed's [C,1] page table on each L1 contents mode. The KV-update reader
// (ttnn/cpp/ttnn/operations/experimental/paged_cache/device/kernels/dataflow/
// reader_update_cache_interleaved_start_id.cpp at tt.TTMetalCommit) copies
// one page-table stick into CB c_3 and loads page_table_ptr[idx/block_size]
// with no bound check, so position 32 reads the word past the one-column
// row: L1 past the last CB the program created.
//   - poison: a huge block id (0x7FC17FC1); the wrapped address lands far
//     outside the cache;
//   - zero (tt-metal's L1 clear at device open): block 0, silently — the row
//     lands in a block the user does not own, no error;
//   - stale: what earlier programs left in L1 there; with the region
//     untouched since the clear, zeros again.
//
// Strict mode names the out-of-row read in every mode.
func TestL1ModesOneColumnTable(t *testing.T) {
	for _, c := range []struct {
		mode      L1Init
		wantFault bool
		wantBlock uint32
	}{
		{L1Poison, false, 0x7FC17FC1},
		{L1Zero, false, 0},
		{L1Stale, false, 0},
	} {
		for _, strict := range []bool{false, true} {
			f := newUCFix(t, Options{L1: c.mode, Strict: strict, LogKV: true}, 2, 1, 32, 32, 8, 1)
			f.setTable([][]int32{{5}, {6}})
			err := f.step([]int32{32, -1}, nil)
			if _, fault := err.(*Fault); fault != c.wantFault || (err != nil && !fault) {
				t.Fatalf("%v strict=%t: err %v, want fault %t", c.mode, strict, err, c.wantFault)
			}
			if !c.wantFault {
				log := f.d.KVLog()
				if len(log) != 1 || log[0].Physical != c.wantBlock || log[0].User != 0 {
					t.Fatalf("%v strict=%t: KV writes %+v, want one write of user 0 into block %d", c.mode, strict, log, c.wantBlock)
				}
			}
			named := false
			for _, fd := range f.d.Findings() {
				named = named || (fd.Class == PTReadPastRow && fd.Index == 1)
			}
			if named != strict {
				t.Fatalf("%v strict=%t: past-row finding %t; findings %v", c.mode, strict, named, f.d.Findings())
			}
		}
	}
}

// Stale L1 holds real bytes of earlier programs' circular buffers: after a
// compute op, the bytes at the CB base of core 0 are its first input page.
func TestL1StaleHoldsEarlierInputs(t *testing.T) {
	for _, mode := range []L1Init{L1Poison, L1Zero, L1Stale} {
		d := newDev(t, Options{L1: mode})
		spec := tt.Spec{Shape: []int{1, 1, 32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
		a, b, out := mustAlloc(t, d, spec), mustAlloc(t, d, spec), mustAlloc(t, d, spec)
		v := make([]int32, 32*16)
		for i := range v {
			v[i] = int32(0x3F80_3F80 + i)
		}
		h := tt.HostInt32([]int{1, 1, 32, 32}, tt.Tile, v)
		h.DType, h.Shape = tt.BF16, []int{1, 1, 32, 32}
		for _, x := range []tt.Tensor{a, b} {
			if err := d.WriteHost(x, h); err != nil {
				t.Fatal(err)
			}
		}
		if err := run1(d, tt.Add{A: a, B: b, Output: out}); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 8)
		d.l1[0].read(alignUp(d.opt.L1UnreservedBase, d.arch.dramAlign), got)
		want := map[L1Init][]byte{
			L1Poison: {0xC1, 0x7F, 0xC1, 0x7F, 0xC1, 0x7F, 0xC1, 0x7F},
			L1Zero:   make([]byte, 8),
			L1Stale:  {0x80, 0x3F, 0x80, 0x3F, 0x81, 0x3F, 0x80, 0x3F},
		}[mode]
		if string(got) != string(want) {
			t.Fatalf("%v: CB base of core 0 holds % x, want % x", mode, got, want)
		}
	}
}

// Under zero and stale the host write path sends each DRAM page slot's
// alignment padding as zeros; under poison the padding keeps its bytes.
func TestL1ModeDRAMSlotPadding(t *testing.T) {
	for _, mode := range []L1Init{L1Poison, L1Zero} {
		d := newDev(t, Options{L1: mode})
		x := mustAlloc(t, d, rmSpec(2, 1)) // 4 B rows in 32 B slots
		if err := d.WriteHost(x, tt.HostInt32([]int{2, 1}, tt.RowMajor, []int32{7, 9})); err != nil {
			t.Fatal(err)
		}
		m, a := d.memAt(d.pageLoc(d.bufs.at(x.ID), 0))
		pad := make([]byte, 4)
		m.read(a+4, pad)
		zero := string(pad) == "\x00\x00\x00\x00"
		if zero != (mode == L1Zero) {
			t.Fatalf("%v: padding % x", mode, pad)
		}
	}
}
