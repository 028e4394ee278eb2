package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// The card's own answers at tt.TTMetalCommit (622c6fb9) where the simulator
// once followed older tt-metal versions; each test cites the source it holds
// the simulator to.

// sdpaFix is a small paged SDPA decode setup: B users, kvh KV heads, heads
// query heads, head_dim 32, block 32, a 2-wide page table.
type sdpaFix struct {
	d                  *Device
	q, k, v, pt, cp    tt.Tensor
	B, heads, kvh, dim int
}

func newSDPAFix(t *testing.T, o Options, B, heads, kvh int) *sdpaFix {
	t.Helper()
	const D, bs, blocks = 32, 32, 8
	r := rand.New(rand.NewPCG(uint64(B), uint64(heads*kvh)))
	d := cDev(t, o)
	f := &sdpaFix{d: d, B: B, heads: heads, kvh: kvh, dim: D}
	f.k = cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, kvh, bs, D), cRand(r, blocks*kvh*bs*D, false))
	f.v = cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, kvh, bs, D), cRand(r, blocks*kvh*bs*D, false))
	f.q = cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, B, heads, D), cRand(r, B*heads*D, false))
	tbl := make([]int32, 2*B)
	for i := range tbl {
		tbl[i] = int32(i % blocks)
	}
	f.pt = cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B, 2), tbl)
	pos := make([]int32, B)
	for i := range pos {
		pos[i] = int32(10 + 7*i)
	}
	f.cp = cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B), pos)
	return f
}

func (f *sdpaFix) op(out tt.MemoryConfig) tt.PagedSDPADecode {
	return tt.PagedSDPADecode{Q: f.q, K: f.k, V: f.v, PageTable: f.pt, CurPos: f.cp, KChunkSize: 32, Memory: out}
}

// wantErr runs op and wants it refused with exactly op: text.
func wantErr(t *testing.T, d *Device, what string, op tt.Op, text string) {
	t.Helper()
	err := run1(d, op)
	if err == nil || err.Error() != op.Name()+": "+text {
		t.Errorf("%s: err %v, want %q", what, err, text)
	}
}

// sdpa_decode_device_operation.cpp:83-109, 403-405: Q is HEIGHT_SHARDED
// when sharded (else DRAM); the output is checked only when sharded, and
// then must be HEIGHT_SHARDED; with more than one KV head (GQA) a sharded
// output is refused. An L1-interleaved output is allowed, and gives the
// DRAM output's bytes.
func TestSDPAOutputAndQMemoryRules(t *testing.T) {
	hs := tt.L1HeightSharded(2, [2]int{32, 32})
	ws := tt.L1WidthSharded(1, [2]int{64, 32})
	// GQA: 4 query heads over 2 KV heads.
	f := newSDPAFix(t, Options{}, 2, 4, 2)
	wantErr(t, f.d, "GQA, height-sharded output", f.op(hs), "Sharded output not supported for GQA")
	wantErr(t, f.d, "GQA, width-sharded output", f.op(ws),
		"Output memory config layout must be HEIGHT_SHARDED when sharded but got TensorMemoryLayout::WIDTH_SHARDED")
	dram := cOut(t, f.d, f.op(tt.DRAMInterleaved))
	l1 := cOut(t, f.d, f.op(tt.L1Interleaved))
	cSame(t, "L1-interleaved output", cDown(t, f.d, l1), cDown(t, f.d, dram))

	// One KV head (not GQA): a height-sharded output runs, a width-sharded
	// one is refused.
	m := newSDPAFix(t, Options{}, 2, 1, 1)
	if err := run1(m.d, m.op(tt.L1HeightSharded(2, [2]int{32, 32}))); err != nil {
		t.Errorf("MHA, height-sharded output: %v", err)
	}
	wantErr(t, m.d, "MHA, width-sharded output", m.op(tt.L1WidthSharded(1, [2]int{64, 32})),
		"Output memory config layout must be HEIGHT_SHARDED when sharded but got TensorMemoryLayout::WIDTH_SHARDED")

	// Q: width-sharded refused, L1-interleaved refused, height-sharded runs.
	qv := cDown(t, m.d, m.q)
	for _, c := range []struct {
		mem  tt.MemoryConfig
		text string
	}{
		{tt.L1WidthSharded(1, [2]int{64, 32}), "Q tensor memory layout must be HEIGHT_SHARDED when sharded but got TensorMemoryLayout::WIDTH_SHARDED"},
		{tt.L1Interleaved, "Q tensor buffer type must be DRAM when not sharded but got BufferType::L1"},
		{tt.L1HeightSharded(2, [2]int{32, 32}), ""},
	} {
		s := m.q.Spec
		s.Memory = c.mem
		q := cUpload(t, m.d, s, qv)
		op := m.op(tt.DRAMInterleaved)
		op.Q = q
		if c.text == "" {
			if err := run1(m.d, op); err != nil {
				t.Errorf("Q %v: %v", c.mem, err)
			}
			continue
		}
		wantErr(t, m.d, fmt.Sprintf("Q %v", c.mem), op, c.text)
	}
}

// paged_update_cache_device_operation.cpp:257-259: a width-sharded input is
// refused, whatever its shard shape.
func TestUpdateCacheRefusesWidthSharded(t *testing.T) {
	f := newUCFix(t, Options{}, 1, 1, 32, 32, 8, 2)
	in := mustAlloc(t, f.d, tt.Spec{Shape: []int{1, 1, 1, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1WidthSharded(1, [2]int{32, 32})})
	op := f.op()
	op.Input = in
	wantErr(t, f.d, "width-sharded input", op, "Expect input_tensor to NOT have memory layout WIDTH SHARDED")
}

// A capture whose SDPA decode has a cur_pos of a spec not seen before misses
// the program cache (the spec is keyed: sdpa_decode_device_operation.cpp:
// 515-520, 553-554) and fails as every miss during capture does.
func TestSDPACurPosSpecMissesInCapture(t *testing.T) {
	f := newSDPAFix(t, Options{}, 2, 4, 2)
	cRun(t, f.d, f.op(tt.DRAMInterleaved)) // warm
	cpL1 := cUploadI32(t, f.d, tt.Spec{Shape: []int{2}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.L1Interleaved}, []int32{10, 17})
	id, err := f.d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	cRun(t, f.d, f.op(tt.DRAMInterleaved)) // the warmed spec hits
	op := f.op(tt.DRAMInterleaved)
	op.CurPos = cpL1
	wantErr(t, f.d, "capture with a new cur_pos spec", op, fmt.Sprintf("Writes are not supported during trace capture. trace id: %d", id))
	if err := f.d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
}

// A program-cache miss during capture (ttnn/api/ttnn/device_operation.hpp:
// 337-347; tt_metal/distributed/distributed.cpp:115-118;
// tt_metal/distributed/mesh_workload.cpp:138-179;
// tt_metal/distributed/fd_mesh_command_queue.cpp:665): the program is
// cached, its kernel-binary buffer allocated (top-down), then the write of
// the binaries fails with the trace id. The binaries were never committed:
// each later launch of it (a cache hit) allocates a new buffer, then frees
// the old one, until a launch outside the capture commits them; after that
// a launch loads nothing.
func TestCaptureMissCachesAndAllocatesThenFails(t *testing.T) {
	f := newUCFix(t, Options{Strict: true}, 2, 1, 32, 32, 8, 2)
	f.setTable([][]int32{{0, 1}, {2, 3}})
	if err := f.step([]int32{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	bins := f.d.KernelBinaries()
	id, err := f.d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	o := f.op()
	o.FP32DestAcc = true // a program never compiled
	hits, misses := f.d.ProgramCacheStats()
	wantErr(t, f.d, "miss during capture", o, fmt.Sprintf("Writes are not supported during trace capture. trace id: %d", id))
	if h, m := f.d.ProgramCacheStats(); h != hits || m != misses+1 {
		t.Fatalf("miss during capture: hits/misses %d/%d -> %d/%d, want one miss", hits, misses, h, m)
	}
	got := f.d.KernelBinaries()
	if len(got) != len(bins)+1 || got[len(bins)] != bins[len(bins)-1]-KernelBinaryBytesPerBank {
		t.Fatalf("binaries %#x, want %#x plus one below", got, bins)
	}
	named := false
	for _, fd := range f.d.Findings() {
		named = named || fd.Class == CacheMissDuringCapture
	}
	if !named {
		t.Fatalf("strict: no %s finding: %v", CacheMissDuringCapture, f.d.Findings())
	}
	// Still capturing: the cached program hits and fails the same way,
	// with a new buffer allocated and the old one freed.
	wantErr(t, f.d, "hit of the uncommitted program during capture", o, fmt.Sprintf("Writes are not supported during trace capture. trace id: %d", id))
	if err := f.d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	hits, misses = f.d.ProgramCacheStats()
	got = f.d.KernelBinaries()
	if err := run1(f.d, o); err != nil {
		t.Fatal(err)
	}
	if h, m := f.d.ProgramCacheStats(); h != hits+1 || m != misses {
		t.Fatalf("after the capture: hits/misses %d/%d -> %d/%d, want a hit", hits, misses, h, m)
	}
	after := f.d.KernelBinaries()
	if len(after) != len(bins)+1 || !slices.Equal(after[:len(bins)], bins) || after[len(bins)] == got[len(bins)] {
		t.Fatalf("binaries after the eager hit %#x (before it %#x): want the uncommitted buffer replaced", after, got)
	}
	if err := run1(f.d, o); err != nil {
		t.Fatal(err)
	}
	if again := f.d.KernelBinaries(); !slices.Equal(again, after) {
		t.Fatalf("a committed program loaded binaries again: %#x -> %#x", after, again)
	}
}

// to_memory_config to the tensor's own memory config returns the tensor
// itself (ttnn/cpp/ttnn/operations/core/to_memory_config/
// to_memory_config_op.cpp:257-261): no allocation, no program, nothing
// recorded during a capture. Another config allocates and copies.
func TestToMemoryConfigSameConfigIsTheInput(t *testing.T) {
	d := cDev(t, Options{LogOps: true})
	r := rand.New(rand.NewPCG(3, 4))
	x := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 32, 64), cRand(r, 32*64, false))
	probe := cAlloc(t, d, cSpec(tt.INT32, tt.RowMajor, 4))
	if err := d.Free(probe); err != nil {
		t.Fatal(err)
	}
	h0, m0 := d.ProgramCacheStats()
	id, err := d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := d.Run(tt.ToMemoryConfig{Input: x, Memory: x.Spec.Memory})
	if err != nil || len(outs) != 1 || outs[0].ID != x.ID || outs[0].Addr != x.Addr {
		t.Fatalf("same config: outs %v err %v, want the input %v", outs, err, x)
	}
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	if h, m := d.ProgramCacheStats(); h != h0 || m != m0 {
		t.Fatalf("same config ran a program: hits/misses %d/%d -> %d/%d", h0, m0, h, m)
	}
	if n := len(d.OpLog()); n != 0 {
		t.Fatalf("same config observed as %d ops: %v", n, d.OpLog())
	}
	y := cAlloc(t, d, cSpec(tt.INT32, tt.RowMajor, 4))
	if y.Addr != probe.Addr {
		t.Fatalf("same config allocated: the next tensor is at %#x, not %#x", y.Addr, probe.Addr)
	}
	l1 := cOut(t, d, tt.ToMemoryConfig{Input: x, Memory: tt.L1Interleaved})
	if l1.ID == x.ID {
		t.Fatal("another config returned the input")
	}
	cSame(t, "to L1", cDown(t, d, l1), cDown(t, d, x))
}

// Paged SDPA decode's CBs in the pin's creation order and sizes
// (ttnn/cpp/ttnn/operations/transformer/sdpa_decode/device/
// sdpa_decode_program_factory.cpp:385-387, 414-421, 443-461, 538-611), at
// the qwen3-0.6b decode geometry (8 users, 16 query heads over 8 KV heads,
// head_dim 128, block 32, k_chunk 32, Wormhole): Q/mask/statistics in half
// tiles (16 heads), K and V double-buffered, c_8 and c_15 for cur_pos, c_9
// the page table's aligned page, then c_10.
func TestSDPACBOrderAndSizes(t *testing.T) {
	d := cDev(t, Options{})
	const B, H, KVH, D, W = 8, 16, 8, 128, 4
	q := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, B, H, D))
	k := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 16, KVH, 32, D))
	v := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 16, KVH, 32, D))
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B, W), make([]int32, B*W))
	cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B), []int32{0, 1, 2, 3, 4, 5, 6, 7})
	for _, x := range []tt.Tensor{q, k, v} {
		if err := d.WriteHost(x, tt.HostBF16(x.Spec.Shape, tt.Tile, make([]bf16.BF16, x.Spec.Volume()))); err != nil {
			t.Fatal(err)
		}
	}
	cRun(t, d, tt.PagedSDPADecode{Q: q, K: k, V: v, PageTable: pt, CurPos: cp, KChunkSize: 32})
	var p *sdpaProgram
	for _, pr := range d.progs {
		if sp, ok := pr.(*sdpaProgram); ok {
			p = sp
		}
	}
	if p == nil {
		t.Fatal("no SDPA program cached")
	}
	type want struct{ idx, size int }
	// half tile 1024 B, full 2048 B; DHt 4, PNHt 1, Sk_chunk_t 1.
	ws := []want{{0, 4096}, {1, 16384}, {2, 16384}, {3, 1024}, {5, 1024}, {6, 1024}, {7, 1024},
		{8, 32}, {15, 32}, {9, 32}, {10, 4096}, {11, 2048}, {12, 1024}}
	at := uint64(96 << 10)
	for i, w := range ws {
		c := p.cbs[i]
		if c.indices[0] != w.idx || c.size != uint64(w.size) || c.addr != at {
			t.Fatalf("CB %d: c_%d %d B at %#x, want c_%d %d B at %#x", i, c.indices[0], c.size, c.addr, w.idx, w.size, at)
		}
		at = alignUp(at+uint64(w.size), 32)
	}
	if p.ptCB != p.cbs[9].addr || p.qCB != p.cbs[0].addr {
		t.Fatalf("page-table CB %#x / Q CB %#x not c_9 / c_0", p.ptCB, p.qCB)
	}
}

// share_cache chains the users' cores by a semaphore: core i waits for core
// i-1's signal before it reads the cache and signals after its write
// barrier (ttnn/cpp/ttnn/operations/experimental/paged_cache/device/
// update_cache/paged_update_cache_program_factory.cpp:380-395;
// paged_cache/device/kernels/dataflow/reader_update_cache_interleaved_start_id.cpp:125-130,
// paged_cache/device/kernels/dataflow/writer_update_cache_interleaved_start_id.cpp:146-161). Two users writing
// rows 3 and 4 of one shared tile both keep their row, whatever the
// device seed, and strict finds no race.
func TestShareCacheUsersSerialised(t *testing.T) {
	const B, H, S, D = 2, 1, 32, 32
	for seed := uint64(0); seed < 4; seed++ {
		d := newDev(t, Options{Seed: seed, Strict: true})
		cacheS := tt.Spec{Shape: []int{1, H, S, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
		cache := mustAlloc(t, d, cacheS)
		model := make([]bf16.BF16, H*S*D)
		for i := range model {
			model[i] = bf16.BF16(0x3f00 + i%64)
		}
		if err := d.WriteHost(cache, tt.HostBF16(cacheS.Shape, tt.Tile, model)); err != nil {
			t.Fatal(err)
		}
		in := mustAlloc(t, d, tt.Spec{Shape: []int{1, B, H, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})})
		inv := make([]bf16.BF16, B*H*D)
		for i := range inv {
			inv[i] = bf16.BF16(0x4000 + i)
		}
		if err := d.WriteHost(in, tt.HostBF16([]int{1, B, H, D}, tt.Tile, inv)); err != nil {
			t.Fatal(err)
		}
		idx := mustAlloc(t, d, rmSpec(B))
		if err := d.WriteHost(idx, tt.HostInt32([]int{B}, tt.RowMajor, []int32{3, 4})); err != nil {
			t.Fatal(err)
		}
		if err := run1(d, tt.PagedUpdateCache{Cache: cache, Input: in, UpdateIdxs: &idx, ShareCache: true}); err != nil {
			t.Fatal(err)
		}
		got, err := d.ReadHost(cache)
		if err != nil {
			t.Fatal(err)
		}
		g := got.BF16s()
		for u, pos := range []int{3, 4} {
			if !slices.Equal(g[pos*D:(pos+1)*D], inv[u*D:(u+1)*D]) {
				t.Fatalf("seed %d: user %d's row %d lost", seed, u, pos)
			}
		}
		if fs := d.Findings(); len(fs) != 0 {
			t.Fatalf("seed %d: findings %v", seed, fs)
		}
	}
}

// Stale L1 after paged SDPA decode holds what its reader streamed through
// the K and V rings c_1 and c_2 (sdpa_decode_program_factory.cpp:538-541:
// one k chunk, double-buffered): with one tile per KV head, slot h of c_1 is
// head h's K tile of the user's block. Under zero the rings stay zero.
func TestSDPAStaleLeavesKVRings(t *testing.T) {
	for _, mode := range []L1Init{L1Zero, L1Stale} {
		f := newSDPAFix(t, Options{L1: mode}, 1, 4, 2)
		cRun(t, f.d, f.op(tt.DRAMInterleaved))
		var p *sdpaProgram
		for _, pr := range f.d.progs {
			if sp, ok := pr.(*sdpaProgram); ok {
				p = sp
			}
		}
		kb, err := f.d.operandOf("test", f.k)
		if err != nil {
			t.Fatal(err)
		}
		// The fixture's table maps user 0's block 0 to block 0: K tile of
		// head h is page h (block 0, head h, tile row 0, column tile 0).
		for h := 0; h < 2; h++ {
			want := make([]byte, kb.pageSize)
			m, a := f.d.memAt(f.d.pageLoc(kb, h))
			m.read(a, want)
			got := make([]byte, kb.pageSize)
			f.d.l1[0].read(p.cbs[1].addr+uint64(h)*kb.pageSize, got)
			if mode == L1Stale && !slices.Equal(got, want) {
				t.Fatalf("stale: c_1 slot %d does not hold head %d's K tile", h, h)
			}
			if mode == L1Zero && slices.ContainsFunc(got, func(b byte) bool { return b != 0 }) {
				t.Fatalf("zero: c_1 slot %d written", h)
			}
		}
	}
}
