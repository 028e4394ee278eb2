package sim

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/offcard/offcard/tt"
)

// §6.4 allocator placement sequences on a bare allocator (addresses in bytes).
func TestAllocatorSequences(t *testing.T) {
	type step struct {
		op   byte // 'a' alloc name size, 'f' free name
		name string
		size uint64
		want uint64 // expected address for 'a'
	}
	for _, c := range []struct {
		name     string
		bottomUp bool
		best     bool
		steps    []step
		free     []block
	}{
		{"first-fit bottom-up reuse", true, false, []step{
			{'a', "A", 100, 0}, {'a', "B", 64, 128}, {'a', "C", 32, 192},
			{'f', "B", 0, 0},
			{'a', "D", 64, 128}, // lands on B's address at once
		}, []block{{224, 1024 - 224}}},
		{"coalescing", true, false, []step{
			{'a', "A", 64, 0}, {'a', "B", 64, 64}, {'a', "C", 64, 128}, {'a', "E", 64, 192},
			{'f', "A", 0, 0}, {'f', "C", 0, 0}, {'f', "B", 0, 0}, // A+B+C coalesce into [0,192)
			{'a', "D", 160, 0},
		}, []block{{160, 32}, {256, 768}}},
		{"first fit takes lowest hole, not best", true, false, []step{
			{'a', "A", 256, 0}, {'a', "X", 32, 256}, {'a', "B", 64, 288}, {'a', "Y", 32, 352},
			{'f', "A", 0, 0}, {'f', "B", 0, 0},
			{'a', "D", 64, 0},
		}, []block{{64, 192}, {288, 64}, {384, 640}}},
		{"top-down", false, false, []step{
			{'a', "A", 100, 1024 - 128}, {'a', "B", 32, 1024 - 160},
			{'f', "A", 0, 0},
			{'a', "C", 32, 1024 - 32}, // highest fitting block, placed at its high end
		}, []block{{0, 864}, {896, 96}}},
		{"free unknown ignored; double free ignored", true, false, []step{
			{'a', "A", 32, 0}, {'f', "A", 0, 0}, {'f', "A", 0, 0}, {'a', "B", 32, 0},
		}, []block{{32, 992}}},
	} {
		a := newAllocator(0, 1024, 32, c.bottomUp, c.best)
		addrs := map[string]uint64{}
		for i, s := range c.steps {
			if s.op == 'f' {
				a.release(addrs[s.name])
				continue
			}
			got, ok := a.alloc(s.size)
			if !ok || got != s.want {
				t.Fatalf("%s step %d alloc %s: got %d,%v want %d", c.name, i, s.name, got, ok, s.want)
			}
			addrs[s.name] = got
		}
		if got := a.freeBlocks(); !reflect.DeepEqual(got, c.free) {
			t.Errorf("%s: free list %v want %v", c.name, got, c.free)
		}
	}
}

// §6.4 BEST (older DRAM FreeListOpt): a fitting block of a lower size class wins
// over a lower-address block of a higher class.
func TestAllocatorBestFit(t *testing.T) {
	a := newAllocator(0, 1<<20, 32, true, true)
	big, _ := a.alloc(64 << 10) // 0
	sep, _ := a.alloc(32)
	small, _ := a.alloc(1024)
	a.alloc(32)
	a.release(big)
	a.release(small)
	got, _ := a.alloc(1024)
	if got != small {
		t.Errorf("best fit got %d want %d (the 1 KiB hole), sep=%d", got, small, sep)
	}
	f := newAllocator(0, 1<<20, 32, true, false)
	big, _ = f.alloc(64 << 10)
	f.alloc(32)
	small, _ = f.alloc(1024)
	f.alloc(32)
	f.release(big)
	f.release(small)
	if got, _ := f.alloc(1024); got != big {
		t.Errorf("first fit got %d want %d", got, big)
	}
}

// §6.3/§6.4/§5.6 device-level: one address across all banks, DRAM bottom-up
// from the base, L1 top-down, the trace region excluded from the top,
// immediate reuse, and the OOM text (§6.4) exactly.
func TestDeviceAllocation(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole, DRAMBankSize: 1 << 20, TraceRegionSize: 64 << 10})
	// [25,1] int32: 25 pages of 4 B on 12 banks -> 3 slots of 32 B per bank.
	a := mustAlloc(t, d, rmSpec(25, 1))
	b := mustAlloc(t, d, rmSpec(8, 256)) // 8 pages of 1 KiB -> 1 slot per bank
	c := mustAlloc(t, d, rmSpec(1))
	if a.Addr != 32 || b.Addr != 32+96 || c.Addr != 32+96+1024 {
		t.Fatalf("addresses %d %d %d", a.Addr, b.Addr, c.Addr)
	}
	if err := d.Free(b); err != nil {
		t.Fatal(err)
	}
	e := mustAlloc(t, d, rmSpec(8, 256))
	if e.Addr != b.Addr {
		t.Errorf("freed address not reused: %d vs %d", e.Addr, b.Addr)
	}
	l := mustAlloc(t, d, tt.Spec{Shape: []int{64, 4}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.L1Interleaved})
	if want := d.opt.L1Size - 32; l.Addr != want {
		t.Errorf("L1 top-down: %d want %d", l.Addr, want)
	}
	// Largest fitting: bank 1 MiB - the trace region's share of the bank -
	// 32 base. The 64 KiB region is the total over the 12 banks: each
	// reserves round_up(div_up(65536, 12), 32) = 5472 B
	// (tt_metal/impl/allocator/allocator.cpp:43-49 at tt.TTMetalCommit).
	if got := d.TraceRegionPerBank(); got != 5472 {
		t.Fatalf("trace region per bank %d, want 5472", got)
	}
	free := uint64(1<<20 - 5472 - 32 - 96 - 1024 - 32)
	pages := int(free / 32 * 12)
	if _, err := d.Allocate(rmSpec(pages, 8)); err != nil {
		t.Fatalf("exact fit: %v", err)
	}
	_, err := d.Allocate(rmSpec(13, 1))
	want := "Out of Memory: Not enough space to allocate 52 B DRAM buffer across 12 banks, where each bank needs to store 64 B, but bank size is 1043072 B (allocated: 1043072 B, free: 0 B, largest free block: 0 B)"
	if te, ok := err.(*tt.Error); !ok || te.Msg != want {
		t.Fatalf("OOM: %v", err)
	}
}

// lowestUsed, read off the free list, is the lowest address of the
// allocations in every state of random sequences (both directions, first
// and best fit, frees in random order, the allocator filled to the top).
func TestAllocatorLowestUsed(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, bottomUp := range []bool{true, false} {
		for _, best := range []bool{false, true} {
			a := newAllocator(4096, 4096+64*1024, 32, bottomUp, best)
			var live []uint64
			for step := 0; step < 3000; step++ {
				if len(live) > 0 && r.IntN(5) < 2 {
					i := r.IntN(len(live))
					a.release(live[i])
					live = append(live[:i], live[i+1:]...)
				} else if addr, ok := a.allocDir(uint64(1+r.IntN(4096)), r.IntN(4) != 0 == bottomUp); ok {
					live = append(live, addr)
				}
				want := a.hi
				for addr := range a.used {
					want = min(want, addr)
				}
				if got := a.lowestUsed(); got != want {
					t.Fatalf("bottomUp %v best %v step %d: lowestUsed %d, lowest allocation %d (free %v)", bottomUp, best, step, got, want, a.free)
				}
			}
		}
	}
}
