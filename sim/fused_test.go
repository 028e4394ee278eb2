package sim

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// fusedFix holds K and V caches [blocks, H, BS, D], two inputs [1, B, H, D]
// (K on cores kFirst.., V on cores vFirst..), an index tensor [B] and a page
// table [B, W] on one device.
type fusedFix struct {
	t              *testing.T
	d              *Device
	B, H, BS, D, W int
	kc, vc, ki, vi tt.Tensor
	idx, pt        tt.Tensor
	kFirst, vFirst int
	blocks         int
}

func newFusedFix(t *testing.T, o Options, B, H, BS, D, blocks, W, kFirst, vFirst int) *fusedFix {
	t.Helper()
	f := &fusedFix{t: t, d: newDev(t, o), B: B, H: H, BS: BS, D: D, W: W, blocks: blocks, kFirst: kFirst, vFirst: vFirst}
	cs := tt.Spec{Shape: []int{blocks, H, BS, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	f.kc, f.vc = mustAlloc(t, f.d, cs), mustAlloc(t, f.d, cs)
	in := func(first int) tt.Tensor {
		return mustAlloc(t, f.d, tt.Spec{Shape: []int{1, B, H, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightShardedAt(first, B, [2]int{32, D})})
	}
	f.ki, f.vi = in(kFirst), in(vFirst)
	f.idx = mustAlloc(t, f.d, rmSpec(B))
	f.pt = mustAlloc(t, f.d, rmSpec(B, W))
	return f
}

func (f *fusedFix) write(x tt.Tensor, h tt.HostTensor) {
	f.t.Helper()
	if err := f.d.WriteHost(x, h); err != nil {
		f.t.Fatal(err)
	}
}

// load writes the same cache contents, inputs, positions and table.
func (f *fusedFix) load(kc, vc, k, v []bf16.BF16, pos []int32, table [][]int32) {
	f.write(f.kc, tt.HostBF16(f.kc.Spec.Shape, tt.Tile, kc))
	f.write(f.vc, tt.HostBF16(f.vc.Spec.Shape, tt.Tile, vc))
	f.write(f.ki, tt.HostBF16(f.ki.Spec.Shape, tt.Tile, k))
	f.write(f.vi, tt.HostBF16(f.vi.Spec.Shape, tt.Tile, v))
	f.write(f.idx, tt.HostInt32([]int{f.B}, tt.RowMajor, pos))
	var flat []int32
	for _, r := range table {
		flat = append(flat, r...)
	}
	f.write(f.pt, tt.HostInt32([]int{f.B, f.W}, tt.RowMajor, flat))
}

func (f *fusedFix) fused() tt.PagedFusedUpdateCache {
	return tt.PagedFusedUpdateCache{Cache1: f.kc, Input1: f.ki, Cache2: f.vc, Input2: f.vi, UpdateIdxs: &f.idx, PageTable: &f.pt}
}

func (f *fusedFix) separate() []tt.Op {
	return []tt.Op{
		tt.PagedUpdateCache{Cache: f.kc, Input: f.ki, UpdateIdxs: &f.idx, PageTable: &f.pt},
		tt.PagedUpdateCache{Cache: f.vc, Input: f.vi, UpdateIdxs: &f.idx, PageTable: &f.pt},
	}
}

func (f *fusedFix) read(x tt.Tensor) []byte {
	f.t.Helper()
	h, err := f.d.ReadHost(x)
	if err != nil {
		f.t.Fatal(err)
	}
	return h.Data
}

// §1.5: paged_fused_update_cache equals paged_update_cache on K then on V
// (the two caches are distinct and the table is full width, so no stale L1
// is read): the same cache bytes and the same KV log, for random permuted
// tables, positions around block boundaries, -1 users and tt-metal's
// "arbitrary update indices" (base + i*17). The fused run's V writes come
// from the second grid's cores.
func TestFusedUpdateCacheEqualsTwoCalls(t *testing.T) {
	for _, c := range []struct {
		arch                Arch
		B, H, BS, D, blocks int
		kFirst, vFirst      int
	}{
		{Wormhole, 4, 2, 32, 64, 16, 0, 4},
		{Wormhole, 8, 1, 64, 32, 32, 8, 0},
		{Blackhole, 3, 2, 32, 32, 12, 0, 20},
	} {
		W := c.blocks / c.B
		o := Options{Arch: c.arch, Strict: true, LogKV: true}
		fu := newFusedFix(t, o, c.B, c.H, c.BS, c.D, c.blocks, W, c.kFirst, c.vFirst)
		se := newFusedFix(t, o, c.B, c.H, c.BS, c.D, c.blocks, W, c.kFirst, c.vFirst)
		rng := rand.New(rand.NewPCG(uint64(c.B), 3))
		kc, vc := cRand(rng, c.blocks*c.H*c.BS*c.D, false), cRand(rng, c.blocks*c.H*c.BS*c.D, false)
		maxPos := W*c.BS - 1
		for s := 0; s < 16; s++ {
			table := permTable(rng, c.B, W, c.blocks)
			pos := make([]int32, c.B)
			for b := range pos {
				switch r := rng.IntN(8); {
				case s >= 12: // arbitrary update indices
					pos[b] = int32((s*13 + b*17) % (maxPos + 1))
				case r == 0:
					pos[b] = -1
				case r < 4:
					pos[b] = int32(min([]int{c.BS - 1, c.BS, c.BS + 1, 0, maxPos}[rng.IntN(5)], maxPos))
				default:
					pos[b] = int32(rng.IntN(maxPos + 1))
				}
			}
			k, v := cRand(rng, c.B*c.H*c.D, false), cRand(rng, c.B*c.H*c.D, false)
			fu.load(kc, vc, k, v, pos, table)
			se.load(kc, vc, k, v, pos, table)
			fu.d.ResetKVLog()
			se.d.ResetKVLog()
			cRun(t, fu.d, fu.fused())
			for _, op := range se.separate() {
				cRun(t, se.d, op)
			}
			if !bytes.Equal(fu.read(fu.kc), se.read(se.kc)) || !bytes.Equal(fu.read(fu.vc), se.read(se.vc)) {
				t.Fatalf("%v step %d pos %v: fused caches differ from two paged_update_cache calls", c.arch, s, pos)
			}
			// The host's expectation: cache[table[b][p/bs], h, p%bs, :] = input row.
			want := append([]bf16.BF16(nil), kc...)
			for b, p := range pos {
				if p < 0 {
					continue
				}
				blk := int(table[b][int(p)/c.BS])
				for h := 0; h < c.H; h++ {
					copy(want[((blk*c.H+h)*c.BS+int(p)%c.BS)*c.D:][:c.D], k[(b*c.H+h)*c.D:][:c.D])
				}
			}
			if got := tt.HostBF16(nil, tt.Tile, want).Data; !bytes.Equal(fu.read(fu.kc), got) {
				t.Fatalf("%v step %d: K cache is not exactly the host's expectation", c.arch, s)
			}
			fl, sl := fu.d.KVLog(), se.d.KVLog()
			if len(fl) != len(sl) {
				t.Fatalf("logs %d vs %d writes", len(fl), len(sl))
			}
			for i := range fl {
				a, b := fl[i], sl[i]
				wantPart := 0
				if i >= len(fl)/2 {
					wantPart = 1
				}
				if a.Op != opFusedUpdateCache || a.Part != wantPart || a.User != b.User || a.Pos != b.Pos || a.Physical != b.Physical || a.Row != b.Row || a.FirstTile != b.FirstTile || a.CacheAddr != b.CacheAddr {
					t.Fatalf("write %d: fused %+v, separate %+v", i, a, b)
				}
				first := c.kFirst
				if a.Part == 1 {
					first = c.vFirst
				}
				if a.Core != first+a.User {
					t.Fatalf("write %d ran on core %d, want %d", i, a.Core, first+a.User)
				}
			}
		}
		for _, x := range []*fusedFix{fu, se} {
			if fs := x.d.Findings(); len(fs) != 0 {
				t.Fatalf("strict findings on a correct run: %v", fs)
			}
		}
		if h, m := fu.d.ProgramCacheStats(); m != 1 || h != 15 {
			t.Errorf("fused program cache %d hits / %d misses, want 15/1", h, m)
		}
	}
}

// §1.5 validation, per pair as §1.1, only on a miss; the two grids are the
// fused op's own rules.
func TestFusedUpdateCacheValidation(t *testing.T) {
	f := newFusedFix(t, Options{}, 2, 1, 32, 32, 4, 2, 0, 2)
	o := f.fused()
	o.BatchOffset = 1
	if err := run1(f.d, o); !tt.HasMsg(err, "batch_offset must be 0") {
		t.Errorf("batch_offset: %v", err)
	}
	o = f.fused()
	o.UpdateIdxsList = []int32{0, 0}
	if err := run1(f.d, o); !tt.HasMsg(err, "Only an update tensor or an update vector can be provided. Not both or neither.") {
		t.Errorf("both index kinds: %v", err)
	}
	// Pair 2 is checked too: V input interleaved.
	vi := mustAlloc(t, f.d, tt.Spec{Shape: []int{1, 2, 1, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1Interleaved})
	o = f.fused()
	o.Input2 = vi
	if err := run1(f.d, o); !tt.HasMsg(err, "Expect input_tensor to be sharded") {
		t.Errorf("pair 2: %v", err)
	}
	// Overlapping grids.
	ov := mustAlloc(t, f.d, tt.Spec{Shape: []int{1, 2, 1, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightShardedAt(1, 2, [2]int{32, 32})})
	o = f.fused()
	o.Input2 = ov
	if err := run1(f.d, o); err == nil || !strings.Contains(err.Error(), "must not overlap") {
		t.Errorf("overlapping grids: %v", err)
	}
	// Page table wider than the cache.
	wide := mustAlloc(t, f.d, rmSpec(2, 5))
	o = f.fused()
	o.PageTable = &wide
	if err := run1(f.d, o); !tt.HasMsg(err, "max_num_blocks_per_seq must be less than max_num_blocks: max_num_blocks_per_seq=5, max_num_blocks=4") {
		t.Errorf("wide table: %v", err)
	}
	if h, m := f.d.ProgramCacheStats(); h != 0 || m != 0 {
		t.Errorf("failed validations cached: %d/%d", h, m)
	}
}

// §1.5 cache-hit refresh: new cache, input, index and page-table addresses
// with the same specs are a hit, and the launch uses the new addresses.
func TestFusedUpdateCacheHitRefreshesAddresses(t *testing.T) {
	f := newFusedFix(t, Options{Strict: true}, 2, 1, 32, 32, 4, 2, 0, 2)
	z := make([]bf16.BF16, 4*32*32)
	in := cRand(rand.New(rand.NewPCG(1, 1)), 2*32, false)
	f.load(z, z, in, in, []int32{0, 1}, [][]int32{{0, 1}, {2, 3}})
	cRun(t, f.d, f.fused())
	// New V cache, V input and page table (fresh addresses).
	vc2 := mustAlloc(t, f.d, f.vc.Spec)
	vi2 := mustAlloc(t, f.d, f.vi.Spec)
	pt2 := mustAlloc(t, f.d, f.pt.Spec)
	f.write(vc2, tt.HostBF16(vc2.Spec.Shape, tt.Tile, z))
	v2 := cRand(rand.New(rand.NewPCG(2, 2)), 2*32, false)
	f.write(vi2, tt.HostBF16(vi2.Spec.Shape, tt.Tile, v2))
	f.write(pt2, tt.HostInt32([]int{2, 2}, tt.RowMajor, []int32{3, 2, 1, 0}))
	o := f.fused()
	o.Cache2, o.Input2, o.PageTable = vc2, vi2, &pt2
	cRun(t, f.d, o)
	if h, m := f.d.ProgramCacheStats(); h != 1 || m != 1 {
		t.Fatalf("hits/misses %d/%d want 1/1", h, m)
	}
	got := tt.HostTensor{DType: tt.BF16, Data: f.read(vc2)}.BF16s()
	// user 0 pos 0 -> block 3 row 0; user 1 pos 1 -> block 1 row 1.
	for c := 0; c < 32; c++ {
		if got[(3*32+0)*32+c] != v2[c] || got[(1*32+1)*32+c] != v2[32+c] {
			t.Fatalf("V row not at the refreshed page table's blocks")
		}
	}
	if fs := f.d.Findings(); len(fs) != 0 {
		t.Fatal(fs)
	}
}

// §1.5 + §2: the fused op has the same missing bound check: a [B,1] table at
// a position >= block_size reads past the row on both grids; strict names
// the row width and the core of each grid. Unlike paged_update_cache, the
// fused factories read the page table's aligned page
// (ttnn/cpp/ttnn/operations/experimental/paged_cache/device/
// fused_update_cache/paged_tiled_fused_update_cache_program_factory.cpp at
// tt.TTMetalCommit), so entry 1 of a one-column row is the slot's DRAM
// padding, not L1 past the CB.
func TestFusedUpdateCacheNarrowTable(t *testing.T) {
	f := newFusedFix(t, Options{Strict: true, LogKV: true}, 2, 1, 32, 32, 8, 1, 0, 2)
	z := make([]bf16.BF16, 8*32*32)
	in := cRand(rand.New(rand.NewPCG(1, 1)), 2*32, false)
	f.load(z, z, in, in, []int32{3, 4}, [][]int32{{4}, {6}})
	cRun(t, f.d, f.fused())
	if fs := f.d.Findings(); len(fs) != 0 {
		t.Fatalf("findings inside block 0: %v", fs)
	}
	// Stale block ids past the CB on every core (what paged_update_cache
	// would read), and block 5 in the padding of user 0's page slot.
	var p *ucProgram
	for _, pr := range f.d.progs {
		p = pr.(*ucProgram)
	}
	if p.c3.size != 32 || p.c2.size != 32 {
		t.Fatalf("fused CBs: page table %d B, index %d B; want the aligned pages (32 B)", p.c3.size, p.c2.size)
	}
	for core := 0; core < 4; core++ {
		f.d.l1[core].write(p.c3.addr+32, []byte{byte(core), 0, 0, 0})
	}
	m, a := f.d.dramAt(0, f.pt.Addr+4)
	m.write(a, []byte{5, 0, 0, 0})
	f.d.ResetKVLog()
	f.write(f.idx, tt.HostInt32([]int{2}, tt.RowMajor, []int32{32, 5}))
	cRun(t, f.d, f.fused())
	log := f.d.KVLog()
	if len(log) != 4 || log[0].Physical != 5 || log[2].Physical != 5 || log[2].Core != 2 {
		t.Fatalf("faithful writes: %+v", log)
	}
	fs := f.d.Findings()
	if len(fs) < 2 {
		t.Fatalf("findings %v", fs)
	}
	var cores []int
	for _, x := range fs {
		if x.Class == PTReadPastRow {
			cores = append(cores, x.Core)
			if !strings.Contains(x.String(), "page_table[0][1] read but the row has 1 entries") {
				t.Errorf("finding %q", x)
			}
		}
	}
	if len(cores) != 2 || cores[0] != 0 || cores[1] != 2 {
		t.Errorf("past-row findings on cores %v, want [0 2]", cores)
	}
}

// The fused program's first CB sits on the bounding box of both inputs'
// shard grids (fused_update_cache/paged_tiled_fused_update_cache_program_factory.cpp:169-197),
// so a CB clash names that range: two users from core 6 and two from core
// 8 of Wormhole's 8-wide grid span [0-0 - 7-1]; the plain op's is its
// input's first range.
func TestFusedCBCoresBoundingBox(t *testing.T) {
	f := newFusedFix(t, Options{}, 2, 1, 32, 32, 8, 1, 6, 8)
	z := make([]bf16.BF16, 8*32*32)
	in := cRand(rand.New(rand.NewPCG(1, 1)), 2*32, false)
	f.load(z, z, in, in, []int32{3, 4}, [][]int32{{4}, {6}})
	cRun(t, f.d, f.fused())
	for _, pr := range f.d.progs {
		if got := pr.(*ucProgram).cbCores.String(); got != "[0-0 - 7-1]" {
			t.Errorf("fused program's first CB range %s, want [0-0 - 7-1]", got)
		}
	}
}
