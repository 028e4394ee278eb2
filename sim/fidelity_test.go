package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// Every program-cache miss loads the program's kernel binaries into a DRAM
// buffer the engine never asked for (MeshWorkload::load_binaries,
// tt_metal/distributed/mesh_workload.cpp at tt.TTMetalCommit), top-down;
// hits load nothing; a miss after a trace capture warns like any allocation.
func TestKernelBinariesAtProgramCacheMisses(t *testing.T) {
	f := newUCFix(t, Options{}, 2, 1, 32, 32, 8, 2)
	f.setTable([][]int32{{0, 1}, {2, 3}})
	top := f.d.Options().DRAMBankSize - f.d.TraceRegionPerBank()
	if n := len(f.d.KernelBinaries()); n != 0 {
		t.Fatalf("%d binaries before any program", n)
	}
	for i := 0; i < 3; i++ { // one miss, two hits
		if err := f.step([]int32{int32(i), 5}, nil); err != nil {
			t.Fatal(err)
		}
	}
	bins := f.d.KernelBinaries()
	if len(bins) != 1 || bins[0] != top-KernelBinaryBytesPerBank {
		t.Fatalf("binaries %#x after one miss, want one at the top %#x", bins, top-KernelBinaryBytesPerBank)
	}
	// The engine's next allocation is still bottom-up, below it.
	x := mustAlloc(t, f.d, rmSpec(2, 2))
	if x.Addr >= bins[0] {
		t.Fatalf("engine tensor at %#x above the binaries at %#x", x.Addr, bins[0])
	}
	// A capture, then a miss (a new page-table width): its binaries warn.
	id, err := f.d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := run1(f.d, f.op()); err != nil {
		t.Fatal(err)
	}
	if err := f.d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	pt3 := mustAlloc(t, f.d, rmSpec(2, 3)) // warns (an allocation after capture)
	_ = pt3
	f.d.warnings, f.d.warned = nil, false
	f.pt, f.W = pt3, 3
	f.setTable([][]int32{{0, 1, 4}, {2, 3, 5}})
	if err := f.step([]int32{40, 41}, nil); err != nil {
		t.Fatal(err)
	}
	if got := f.d.KernelBinaries(); len(got) != 2 || got[1] != bins[0]-KernelBinaryBytesPerBank {
		t.Fatalf("binaries %#x after the second miss", got)
	}
	if w := f.d.Warnings(); len(w) != 1 || w[0] != tt.MsgUnsafeAllocation {
		t.Fatalf("warnings %q, want the unsafe-allocation warning for the binaries", w)
	}
}

// Paged SDPA decode (ttnn/cpp/ttnn/operations/transformer/sdpa_decode/
// device/sdpa_decode_program_factory.cpp and kernels/rt_args_common.hpp at
// tt.TTMetalCommit): the dynamic K chunk is the nearest power of two of the
// tiles holding 0..cur_pos, capped at dst_size (8 tiles, 4 with fp32
// accumulation); a user k_chunk_size is used as given.
func TestSDPADynamicChunkCap(t *testing.T) {
	for _, c := range []struct {
		kchunk int
		fp32   bool
		cur    uint32
		want   uint64
	}{
		{0, false, 0, 32}, {0, false, 33, 64}, {0, false, 100, 128}, {0, false, 200, 256},
		{0, false, 600, 768}, // 8-tile cap: 1024 uncapped
		{0, true, 600, 640},  // 4-tile cap with fp32 accumulation
		{0, true, 100, 128},
		{32, false, 600, 608}, {128, true, 600, 640},
	} {
		p := &sdpaProgram{kchunk: c.kchunk, maxChunkT: 8}
		if c.fp32 {
			p.maxChunkT = 4
		}
		if got := p.validLen(c.cur); got != c.want {
			t.Errorf("k_chunk %d fp32 %t cur_pos %d: valid length %d, want %d", c.kchunk, c.fp32, c.cur, got, c.want)
		}
	}
}

// The card fetches the masked tile rows of the last chunk too
// (reader_decode_all.cpp reads every tile row of a chunk; the mask is added
// after QK^T): with k_chunk 128 at cur_pos 33, rows 2 and 3 are masked and
// fetched through entries 2 and 3; a garbage id there leaves the bank and
// faults as the NoC would (Watcher: NOC target address overflow).
// cur_pos is part of the program-cache key (compute_program_hash in
// sdpa_decode_device_operation.cpp:515-520, 553-554 hashes the cur_pos
// tensor, whose attributes are its storage and tensor_spec): a cur_pos of
// another spec misses.
func TestSDPAMaskedFetchAndCurPosKey(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	c := sdpaCase{bs: 32, blocks: 8, kvh: 1, heads: 1, D: 32, W: 4, kchunk: 128, pos: []int32{33}}
	d := cDev(t, Options{})
	kt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, c.blocks, 1, 32, 32), cRand(r, c.blocks*32*32, false))
	vt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, c.blocks, 1, 32, 32), cRand(r, c.blocks*32*32, false))
	qt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 1, 32), cRand(r, 32, false))
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1, 4), []int32{3, 5, 0x800000, 0x800000})
	cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1), []int32{33})
	op := tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: pt, CurPos: cp, KChunkSize: c.kchunk}
	_, err := d.Run(op)
	if _, fault := err.(*Fault); !fault {
		t.Fatalf("masked fetch through a garbage entry: err %v, want a Fault", err)
	}
	// k_chunk 32 fetches no masked row past the row: it runs.
	op.KChunkSize = 32
	if _, err := d.Run(op); err != nil {
		t.Fatal(err)
	}
	hits, misses := d.ProgramCacheStats()
	cpL1 := cUploadI32(t, d, tt.Spec{Shape: []int{1}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.L1Interleaved}, []int32{33})
	op.CurPos = cpL1
	if _, err := d.Run(op); err != nil {
		t.Fatal(err)
	}
	if h, m := d.ProgramCacheStats(); h != hits || m != misses+1 {
		t.Fatalf("cur_pos of another spec: hits/misses %d/%d -> %d/%d, want a miss", hits, misses, h, m)
	}
}

// worker_l1_size at tt.TTMetalCommit: tt_metal/soc_descriptors/
// wormhole_b0_80_arch.yaml 1499136, blackhole_140_arch.yaml 1572864.
func TestL1SizePerArch(t *testing.T) {
	for arch, want := range map[Arch]uint64{Wormhole: 1499136, Blackhole: 1572864} {
		if got := newDev(t, Options{Arch: arch}).Options().L1Size; got != want {
			t.Errorf("%v: L1 %d, want %d", arch, got, want)
		}
	}
}

// Paged paged_update_cache runs its users' cores with no ordering (the
// wait_to_start/send_signal chain is set only with share_cache, which paged
// mode refuses: paged_update_cache_program_factory.cpp at tt.TTMetalCommit).
// Two users handed the same block, at positions in one 32-row tile, race on
// that tile's read-modify-write: one row is lost; which one is the device
// seed's choice (deterministic). Strict names the aliasing.
func TestUpdateCacheConcurrentUsersRace(t *testing.T) {
	outcomes := map[int]bool{}
	for seed := uint64(0); seed < 8; seed++ {
		for _, strict := range []bool{false, true} {
			f := newUCFix(t, Options{Seed: seed, Strict: strict}, 2, 1, 32, 32, 8, 1)
			f.setTable([][]int32{{2}, {2}})
			before := append([]bf16.BF16(nil), f.model...)
			if err := f.step([]int32{3, 5}, nil); err != nil {
				t.Fatal(err)
			}
			h, err := f.d.ReadHost(f.cache)
			if err != nil {
				t.Fatal(err)
			}
			got := h.BF16s()
			in, err := f.d.Peek(f.in)
			if err != nil {
				t.Fatal(err)
			}
			iv := in.BF16s()
			row := func(r int) []bf16.BF16 { return got[(2*32+r)*32 : (2*32+r+1)*32] }
			kept := -1
			for u, pos := range []int{3, 5} {
				if slices.Equal(row(pos), iv[u*32:(u+1)*32]) {
					if kept >= 0 {
						t.Fatalf("seed %d: both rows kept: no race modelled", seed)
					}
					kept = u
				} else if !slices.Equal(row(pos), before[(2*32+pos)*32:(2*32+pos+1)*32]) {
					t.Fatalf("seed %d: row %d is neither the update nor the old row", seed, pos)
				}
			}
			if kept < 0 {
				t.Fatalf("seed %d: no row kept", seed)
			}
			outcomes[kept] = true
			named := false
			for _, fd := range f.d.Findings() {
				named = named || fd.Class == KVTileRace
			}
			if named != strict {
				t.Fatalf("seed %d strict %t: race finding %t (%v)", seed, strict, named, f.d.Findings())
			}
		}
	}
	if len(outcomes) != 2 {
		t.Fatalf("over 8 seeds the same user always won (%v): the interleaving does not depend on the seed", outcomes)
	}
}
