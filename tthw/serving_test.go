package tthw_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
	"github.com/offcard/offcard/tthw"
)

// The serving ops on the loopback: chunked prefill attention through a page
// table, a block copy as slice + fill_cache, and their refusals with ttnn's
// texts. Every expectation is a closed form the test states itself.

func dramSpec(shape []int, dt tt.DType, l tt.Layout) tt.Spec {
	return tt.Spec{Shape: shape, DType: dt, Layout: l, Memory: tt.DRAMInterleaved}
}

func alloc(t *testing.T, d *tthw.Device, s tt.Spec) tt.Tensor {
	t.Helper()
	x, err := d.Allocate(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func writeBF16(t *testing.T, d *tthw.Device, x tt.Tensor, f func(i []int) float32) {
	t.Helper()
	sh := x.Spec.Shape
	v := make([]bf16.BF16, x.Spec.Volume())
	for n := range v {
		v[n] = bf16.FromFloat32(f(unflat(sh, n)))
	}
	if err := d.WriteHost(x, tt.HostBF16(sh, x.Spec.Layout, v)); err != nil {
		t.Fatal(err)
	}
}

func writeI32(t *testing.T, d *tthw.Device, x tt.Tensor, v ...int32) {
	t.Helper()
	if err := d.WriteHost(x, tt.HostInt32(x.Spec.Shape, x.Spec.Layout, v)); err != nil {
		t.Fatal(err)
	}
}

func unflat(sh []int, n int) []int {
	idx := make([]int, len(sh))
	for i := len(sh) - 1; i >= 0; i-- {
		idx[i] = n % sh[i]
		n /= sh[i]
	}
	return idx
}

func readF(t *testing.T, d *tthw.Device, x tt.Tensor) []float32 {
	t.Helper()
	h, err := d.ReadHost(x)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, 0, x.Spec.Volume())
	for _, b := range h.BF16s() {
		out = append(out, b.Float32())
	}
	return out
}

// chunkFixture: a paged V cache whose row for logical position p holds p
// in every column (K all zero, so every attended key weighs the same and
// query row i of a chunk starting at s comes out as the mean of 0..s+i,
// (s+i)/2). The sequence's logical blocks 0..3 sit in physical blocks
// 5, 2, 7, 0; the others hold 200. Page table [1, 8] (the flexible form
// needs a stick of a multiple of 32 B), padded with zeros.
type chunkFixture struct {
	q, k, v, pt tt.Tensor
}

var chunkBlocks = []int32{5, 2, 7, 0, 0, 0, 0, 0}

func newChunk(t *testing.T, d *tthw.Device, w int) chunkFixture {
	const bs, dh = 32, 32
	var c chunkFixture
	c.q = alloc(t, d, dramSpec([]int{1, 2, 32, dh}, tt.BF16, tt.Tile))
	writeBF16(t, d, c.q, func(i []int) float32 { return 1 })
	c.k = alloc(t, d, dramSpec([]int{8, 1, bs, dh}, tt.BF16, tt.Tile))
	writeBF16(t, d, c.k, func(i []int) float32 { return 0 })
	logical := map[int]int{5: 0, 2: 1, 7: 2, 0: 3}
	c.v = alloc(t, d, dramSpec([]int{8, 1, bs, dh}, tt.BF16, tt.Tile))
	writeBF16(t, d, c.v, func(i []int) float32 {
		if lb, ok := logical[i[0]]; ok {
			return float32(lb*bs + i[2])
		}
		return 200
	})
	c.pt = alloc(t, d, dramSpec([]int{1, w}, tt.INT32, tt.RowMajor))
	writeI32(t, d, c.pt, chunkBlocks[:w]...)
	return c
}

// wantMeans checks out [1,2,32,32]: row i of both heads is first+i over 2.
func wantMeans(t *testing.T, what string, got []float32, first int) {
	t.Helper()
	for n, x := range got {
		i := unflat([]int{1, 2, 32, 32}, n)
		if want := float32(first+i[2]) / 2; x != want {
			t.Fatalf("%s: out%v = %v, want %v (mean of positions 0..%d)", what, i, x, want, first+i[2])
		}
	}
}

func TestChunkedSDPAThroughPageTable(t *testing.T) {
	d := open(t, tthw.Options{})
	c := newChunk(t, d, 8)
	start := alloc(t, d, dramSpec([]int{1}, tt.INT32, tt.RowMajor))
	for _, x := range []struct {
		name  string
		op    tt.ChunkedSDPA
		csi   int32 // the tensor form's start (-1: legacy)
		first int   // the chunk's first position as the kernel places it
	}{
		{"legacy, start 64", tt.ChunkedSDPA{ChunkStart: 64}, -1, 64},
		{"legacy, start 0", tt.ChunkedSDPA{}, -1, 0},
		{"legacy, program config 32/64, start 64", tt.ChunkedSDPA{ChunkStart: 64, QChunkSize: 32, KChunkSize: 64, ExactExp: true}, -1, 64},
		{"tensor form, start 96", tt.ChunkedSDPA{}, 96, 96},
		// the kernel's q chunk offset is start / q_chunk_size: a start off
		// the 32-row chunk is placed at the chunk below (reader_interleaved.cpp:260)
		{"tensor form, start 80 (placed at 64)", tt.ChunkedSDPA{}, 80, 64},
		{"legacy without a program config, start 40 (placed at 32)", tt.ChunkedSDPA{ChunkStart: 40}, -1, 32},
	} {
		op := x.op
		op.Q, op.K, op.V, op.PageTable = c.q, c.k, c.v, c.pt
		if x.csi >= 0 {
			writeI32(t, d, start, x.csi)
			op.ChunkStartTensor = &start
		}
		outs, err := d.Run(&op)
		if err != nil {
			t.Fatalf("%s: %v", x.name, err)
		}
		if len(outs) != 1 || !slices.Equal(outs[0].Spec.Shape, []int{1, 2, 32, 32}) || outs[0].Spec.Layout != tt.Tile {
			t.Fatalf("%s: outputs %v", x.name, outs)
		}
		wantMeans(t, x.name, readF(t, d, outs[0]), x.first)
		if err := d.Free(outs[0]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestChunkedSDPARefusals(t *testing.T) {
	d := open(t, tthw.Options{})
	c := newChunk(t, d, 8)
	short := newChunk(t, d, 4).pt
	u32 := alloc(t, d, dramSpec([]int{1}, tt.UINT32, tt.RowMajor))
	two := alloc(t, d, dramSpec([]int{2}, tt.INT32, tt.RowMajor))
	ptU32 := alloc(t, d, dramSpec([]int{1, 8}, tt.UINT32, tt.RowMajor))
	qRM := alloc(t, d, dramSpec([]int{1, 2, 32, 32}, tt.BF16, tt.RowMajor))
	v64 := alloc(t, d, dramSpec([]int{8, 1, 64, 32}, tt.BF16, tt.Tile))
	for _, x := range []struct {
		op  tt.ChunkedSDPA
		msg string
	}{
		{tt.ChunkedSDPA{ChunkStart: -32}, "chunk_start_idx must be non-negative"},
		{tt.ChunkedSDPA{ChunkStart: 16, QChunkSize: 32, KChunkSize: 32}, "chunk_start_idx must be a multiple of q_chunk_size. Got chunk_start_idx: 16, q_chunk_size: 32"},
		{tt.ChunkedSDPA{ChunkStart: 32, QChunkSize: 32, KChunkSize: 64}, "chunk_start_idx must be a multiple of k_chunk_size. Got chunk_start_idx: 32, k_chunk_size: 64"},
		{tt.ChunkedSDPA{QChunkSize: 48, KChunkSize: 32}, "q_chunk_size must be divisible by TILE_SIZE. Got q_chunk_size: 48, TILE_SIZE: 32"},
		{tt.ChunkedSDPA{ChunkStart: 240}, "K's sequence length must be >= Q's sequence length + chunk_start_idx. Got K: 256, Q: 32, chunk_start_idx: 240"},
		{tt.ChunkedSDPA{ChunkStartTensor: &u32}, "chunk_start_idx tensor must be int32. Got DataType::UINT32"},
		{tt.ChunkedSDPA{ChunkStartTensor: &two}, "chunk_start_idx tensor must have shape [1]. Got Shape([2])"},
		{tt.ChunkedSDPA{PageTable: ptU32}, "Page table must be int32"},
		{tt.ChunkedSDPA{Q: qRM}, "Inputs to SDPA must be tilized"},
		{tt.ChunkedSDPA{V: v64}, "K page size must match V page size. Got K: 32, V: 64"},
		{tt.ChunkedSDPA{ExactExp: true}, "offcard: exp_approx_mode needs a program config"},
		{tt.ChunkedSDPA{QChunkSize: 0, KChunkSize: 64}, "offcard: q_chunk_size and k_chunk_size must both be positive"},
	} {
		op := x.op
		if op.Q.ID == 0 {
			op.Q = c.q
		}
		if op.PageTable.ID == 0 {
			op.PageTable = c.pt
		}
		op.K = c.k
		if op.V.ID == 0 {
			op.V = c.v
		}
		if _, err := d.Run(op); !tt.HasMsg(err, x.msg) {
			t.Errorf("%+v: want %q, got %v", x.op, x.msg, err)
		}
	}
	// the tensor form reads a stick of W*4 bytes, which must be whole 32 B
	// (sdpa_program_factory.cpp:141); the legacy form reads the aligned page
	start := alloc(t, d, dramSpec([]int{1}, tt.INT32, tt.RowMajor))
	writeI32(t, d, start, 0)
	if _, err := d.Run(tt.ChunkedSDPA{Q: c.q, K: c.k, V: c.v, PageTable: short, ChunkStartTensor: &start}); !tt.HasMsg(err, "page table stick size must be a multiple of 32") {
		t.Errorf("tensor form, page table [1, 4]: %v", err)
	}
	outs, err := d.Run(tt.ChunkedSDPA{Q: c.q, K: c.k, V: c.v, PageTable: short, ChunkStart: 64})
	if err != nil {
		t.Fatalf("legacy form, page table [1, 4]: %v", err)
	}
	wantMeans(t, "legacy form, page table [1, 4]", readF(t, d, outs[0]), 64)
}

// A block copy, as a scheduler's copy-on-write runs it: slice block 3 out
// of a paged cache, fill_cache it into block 6; only block 6 changes.
func TestBlockCopySliceFillCache(t *testing.T) {
	d := open(t, tthw.Options{})
	sh := []int{8, 2, 32, 64}
	cache := alloc(t, d, dramSpec(sh, tt.BF16, tt.Tile))
	val := func(i []int) float32 { return float32(i[0]*16 + i[1]*8 + i[2]%8) }
	writeBF16(t, d, cache, val)
	outs, err := d.Run(tt.Slice{Input: cache, Begin: []int{3, 0, 0, 0}, End: []int{4, 2, 32, 64}})
	if err != nil {
		t.Fatal(err)
	}
	blk := outs[0]
	if !slices.Equal(blk.Spec.Shape, []int{1, 2, 32, 64}) || blk.Addr == cache.Addr {
		t.Fatalf("slice output %v", blk)
	}
	for n, x := range readF(t, d, blk) {
		i := unflat(blk.Spec.Shape, n)
		if want := val([]int{3, i[1], i[2], i[3]}); x != want {
			t.Fatalf("slice%v = %v, want block 3's %v", i, x, want)
		}
	}
	if _, err := d.Run(&tt.FillCache{Cache: cache, Input: blk, BatchIdx: 6}); err != nil {
		t.Fatal(err)
	}
	for n, x := range readF(t, d, cache) {
		i := unflat(sh, n)
		want := val(i)
		if i[0] == 6 {
			want = val([]int{3, i[1], i[2], i[3]})
		}
		if x != want {
			t.Fatalf("cache%v = %v after the copy, want %v", i, x, want)
		}
	}
}

// fill_cache at update_idx: the input's rows land at rows update_idx..; a
// partial fill leaves the other rows.
func TestFillCacheUpdateIdx(t *testing.T) {
	d := open(t, tthw.Options{})
	cache := alloc(t, d, dramSpec([]int{2, 2, 128, 32}, tt.BF16, tt.Tile))
	writeBF16(t, d, cache, func(i []int) float32 { return -1 })
	in := alloc(t, d, dramSpec([]int{1, 2, 64, 32}, tt.BF16, tt.Tile))
	writeBF16(t, d, in, func(i []int) float32 { return float32(i[1]*64 + i[2]) })
	if _, err := d.Run(tt.FillCache{Cache: cache, Input: in, BatchIdx: 1, UpdateIdx: 32}); err != nil {
		t.Fatal(err)
	}
	for n, x := range readF(t, d, cache) {
		i := unflat([]int{2, 2, 128, 32}, n)
		want := float32(-1)
		if i[0] == 1 && i[2] >= 32 && i[2] < 96 {
			want = float32(i[1]*64 + i[2] - 32)
		}
		if x != want {
			t.Fatalf("cache%v = %v, want %v", i, x, want)
		}
	}
}

// fill_cache's program gives each core whole tile rows and has it write
// them to consecutive cache tiles (fill_cache_multi_core_program_factory.cpp:
// 153-180): with more rows than cores (8 heads * 9 rows = 72 > Wormhole's
// 64 cores) the first 8 cores take two rows each, and the core holding
// head 0's last row and head 1's first writes the latter into head 0's
// row 9; head 1's row 0 is never written. Blackhole's 130 cores take one
// row each: no spill.
func TestFillCacheSpillsPastAHead(t *testing.T) {
	for _, arch := range []string{"wormhole", "blackhole"} {
		d := open(t, tthw.Options{Arch: arch})
		cache := alloc(t, d, dramSpec([]int{1, 8, 320, 32}, tt.BF16, tt.Tile))
		writeBF16(t, d, cache, func(i []int) float32 { return -1 })
		in := alloc(t, d, dramSpec([]int{1, 8, 288, 32}, tt.BF16, tt.Tile))
		writeBF16(t, d, in, func(i []int) float32 { return float32(i[1]*10 + i[2]/32) })
		if _, err := d.Run(tt.FillCache{Cache: cache, Input: in}); err != nil {
			t.Fatal(err)
		}
		got := readF(t, d, cache)
		at := func(h, row int) float32 { return got[(h*320+row*32)*32] }
		spill := arch == "wormhole"
		for _, c := range []struct {
			h, row int
			want   float32
		}{
			{0, 8, 8},
			{0, 9, map[bool]float32{true: 10, false: -1}[spill]}, // head 1's row 0, or untouched
			{1, 0, map[bool]float32{true: -1, false: 10}[spill]},
			{1, 1, 11},
			{7, 8, 78},
		} {
			if g := at(c.h, c.row); g != c.want {
				t.Errorf("%s: head %d tile row %d holds %v, want %v", arch, c.h, c.row, g, c.want)
			}
		}
	}
}

func TestFillCacheRefusals(t *testing.T) {
	d := open(t, tthw.Options{})
	cache := alloc(t, d, dramSpec([]int{8, 2, 32, 64}, tt.BF16, tt.Tile))
	in := alloc(t, d, dramSpec([]int{1, 2, 32, 64}, tt.BF16, tt.Tile))
	in1 := alloc(t, d, dramSpec([]int{1, 1, 32, 64}, tt.BF16, tt.Tile))
	in32 := alloc(t, d, dramSpec([]int{1, 2, 32, 64}, tt.FP32, tt.Tile))
	inW := alloc(t, d, dramSpec([]int{1, 2, 32, 32}, tt.BF16, tt.Tile))
	inRM := alloc(t, d, dramSpec([]int{1, 2, 32, 64}, tt.BF16, tt.RowMajor))
	for _, x := range []struct {
		op  tt.FillCache
		msg string
	}{
		{tt.FillCache{Input: in, BatchIdx: 8}, "Batch index (8) must be less than cache tensor batch size (8)"},
		{tt.FillCache{Input: in, BatchIdx: -1}, "Batch index (4294967295) must be less than cache tensor batch size (8)"},
		{tt.FillCache{Input: in, UpdateIdx: 16}, "Fill update_idx (16) must be a multiple of TILE_HEIGHT (32)"},
		{tt.FillCache{Input: in, UpdateIdx: 32}, "Fill update_idx (32) + input tensor height (32) must be <= cache tensor height (32)"},
		{tt.FillCache{Input: in1}, "Input tensor height (1) must equal cache tensor height (2)"},
		{tt.FillCache{Input: inW}, "Input tensor width (32) must equal cache tensor width (64)"},
		{tt.FillCache{Input: in32}, "Input and cache tensors must have same dtype!"},
		{tt.FillCache{Input: inRM}, "Inputs to update_cache must be tilized"},
	} {
		op := x.op
		op.Cache = cache
		if _, err := d.Run(op); !tt.HasMsg(err, x.msg) {
			t.Errorf("%+v: want %q, got %v", x.op, x.msg, err)
		}
	}
}

// A row-major slice element by element; a slice of the whole input is the
// input itself. (The ABI wraps negative indices as ttnn's wrap_index does;
// tt.Slice's OutputSpecs takes End-Begin as given, so the contract's
// callers pass non-negative ones.)
func TestSliceRowMajorAndWholeInput(t *testing.T) {
	d := open(t, tthw.Options{})
	x := alloc(t, d, dramSpec([]int{3, 5}, tt.INT32, tt.RowMajor))
	v := make([]int32, 15)
	for i := range v {
		v[i] = int32(i)
	}
	writeI32(t, d, x, v...)
	outs, err := d.Run(tt.Slice{Input: x, Begin: []int{1, 2}, End: []int{3, 5}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := d.ReadHost(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Int32s(); !slices.Equal(got, []int32{7, 8, 9, 12, 13, 14}) || !slices.Equal(h.Shape, []int{2, 3}) {
		t.Errorf("slice [1,2]..[3,5] of 0..14 as [3,5]: %v %v, want [7 8 9 12 13 14] as [2 3]", h.Shape, got)
	}
	whole, err := d.Run(tt.Slice{Input: x, Begin: []int{0, 0}, End: []int{3, 5}})
	if err != nil {
		t.Fatal(err)
	}
	if whole[0].Addr != x.Addr || whole[0].ID == x.ID {
		t.Errorf("whole-input slice: %v, want a new handle at the input's address %#x", whole[0], x.Addr)
	}
	for _, c := range []struct {
		begin, end []int
		msg        string
	}{
		{[]int{0}, []int{3}, "Input rank 2 and begins 1 must have the same size"},
		{[]int{0, 0}, []int{3}, "Start 2 and end 1 must have the same size"},
		{[]int{2, 0}, []int{1, 5}, "End 1 must be greater than or equal to start 2"},
		{[]int{0, 0}, []int{3, 6}, "Ends 6 must be less than or equal to the shape of the tensor 5"},
	} {
		if _, err := d.Run(tt.Slice{Input: x, Begin: c.begin, End: c.end}); !tt.HasMsg(err, c.msg) {
			t.Errorf("slice %v..%v: want %q, got %v", c.begin, c.end, c.msg, err)
		}
	}
}

// The serving ops record into a trace and replay: a block copy captured
// once copies whatever the source block holds at each replay, and the
// tensor form of chunked SDPA replays with a new start read on the device.
func TestServingOpsReplay(t *testing.T) {
	d := open(t, tthw.Options{TraceRegionSize: 1 << 20})
	c := newChunk(t, d, 8)
	start := alloc(t, d, dramSpec([]int{1}, tt.INT32, tt.RowMajor))
	writeI32(t, d, start, 0)
	op := tt.ChunkedSDPA{Q: c.q, K: c.k, V: c.v, PageTable: c.pt, ChunkStartTensor: &start}
	warm, err := d.Run(op) // the program cache
	if err != nil {
		t.Fatal(err)
	}
	id, err := d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	outs, err := d.Run(op)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	for _, s := range []int32{32, 96} {
		writeI32(t, d, start, s)
		if err := d.Execute(id); err != nil {
			t.Fatal(err)
		}
		wantMeans(t, fmt.Sprintf("replay with start %d", s), readF(t, d, outs[0]), int(s))
	}
	_ = d.Free(warm[0])
}
