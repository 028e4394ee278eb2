package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// What ttnn refuses at tt.TTMetalCommit, sim refuses with the same text, on
// every call: each case runs once on a cold cache and once after the op's
// program is cached by a good call of the same specs where the refusal is
// about an attribute the cache key does not hold.
func TestContractRefusals(t *testing.T) {
	d := cDev(t, Options{})
	r := rand.New(rand.NewPCG(41, 42))
	const B, D = 2, 32
	sharded := tt.Spec{Shape: []int{1, B, 1, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})}
	hs := cUpload(t, d, sharded, cRand(r, B*D, false))
	w := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 1, 1, 1, D), cRand(r, D, false))
	table := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 8, D), cRand(r, 8*D, false))
	ids32 := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1, 1, 1, B), []int32{1, 2})
	emb := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, B, D))
	kc := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, 32, D), cRand(r, 4*32*D, false))
	vc := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, 32, D), cRand(r, 4*32*D, false))
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B, 4), []int32{0, 1, 2, 3, 3, 2, 1, 0})
	cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B), []int32{40, 3})
	q := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, B, 1, D), cRand(r, B*D, false))
	sdpa := func(chunk int) tt.PagedSDPADecode {
		return tt.PagedSDPADecode{Q: q, K: kc, V: vc, PageTable: pt, CurPos: cp, KChunkSize: chunk}
	}
	interleavedCat := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, B, D))
	for _, c := range []struct {
		name, src string
		op        tt.Op
		want      string
	}{
		{"rms_norm refuses height-sharded input",
			"ttnn/cpp/ttnn/operations/normalization/layernorm/device/layernorm_device_operation.cpp",
			tt.RMSNorm{Input: hs, Weight: w, Epsilon: 1e-6}, "Height sharded inputs are not supported."},
		{"embedding refuses INT32 ids",
			"ttnn/cpp/ttnn/operations/embedding/device/embedding_device_operation.cpp",
			tt.Embedding{Input: ids32, Weight: table, Output: emb}, "Input must be UINT32 or BFLOAT16"},
		{"SDPA decode refuses a user k_chunk_size that is not a power of two",
			"ttnn/cpp/ttnn/operations/transformer/sdpa_decode/sdpa_decode.cpp",
			sdpa(96), "User provided k_chunk_size must be power of 2, got: 96"},
		{"nlp_concat_heads_decode needs a sharded output (the factory reads its shard spec)",
			"ttnn/cpp/ttnn/operations/experimental/transformer/nlp_concat_heads_decode/device/",
			tt.ConcatHeads{Input: hs, Output: interleavedCat, NumHeads: 1}, "bad optional access"},
	} {
		before := d.bufs.n
		_, err := d.Run(c.op)
		if !tt.HasMsg(err, c.want) {
			t.Errorf("%s (%s): got %v, want %q", c.name, c.src, err, c.want)
		}
		if d.bufs.n != before {
			t.Errorf("%s: a refused op left %d tensors allocated", c.name, d.bufs.n-before)
		}
	}
	// On a program-cache hit too: the SDPA program with k_chunk 32 is
	// cached; a bad scale-free call differing only in cur_pos contents
	// still validates. Here: a cur_pos of the wrong dtype on a hit.
	out, err := d.Run(sdpa(32))
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Free(out[0])
	hits, _ := d.ProgramCacheStats()
	cpBad := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, B), []bf16.BF16{1, 2})
	bad := sdpa(32)
	bad.CurPos = cpBad
	if _, err := d.Run(bad); !tt.HasMsg(err, "Expect cur_pos to be INT32, got DataType::BFLOAT16") {
		t.Fatalf("cur_pos dtype on a cached program: %v", err)
	}
	if h, _ := d.ProgramCacheStats(); h != hits {
		t.Fatalf("a refused call counted as a hit")
	}
}

// rotary_embedding_llama (ttnn/cpp/ttnn/operations/experimental/transformer/
// rotary_embedding_llama at tt.TTMetalCommit) rotates interleaved pairs
// (x[2i], x[2i+1]) through its transformation matrix: with
// tt_transformers' get_rot_transformation_mat, out[2i] = x[2i]cos - x[2i+1]sin
// and out[2i+1] = x[2i+1]cos + x[2i]sin, each product rounded to bf16 and the
// sum rounded (ref.Rope's rounding). rotary_embedding_hf pairs i and i+D/2.
func TestRotaryLlamaInterleavedPairs(t *testing.T) {
	d := cDev(t, Options{})
	r := rand.New(rand.NewPCG(43, 44))
	const B, H, D = 3, 2, 64
	x := cRand(r, B*H*D, false)
	in := cUpload(t, d, tt.Spec{Shape: []int{1, B, H, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})}, x)
	cos, sin := cRand(r, B*D, false), cRand(r, B*D, false)
	for i := 0; i < B*D; i += 2 { // interleaved tables: cos[2i] = cos[2i+1]
		cos[i+1], sin[i+1] = cos[i], sin[i]
	}
	rows := tt.Spec{Shape: []int{1, B, 1, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})}
	ct, st := cUpload(t, d, rows, cos), cUpload(t, d, rows, sin)
	tm := make([]bf16.BF16, 32*32)
	for i := 0; i < 32; i += 2 {
		tm[i*32+i+1] = bf16.FromFloat32(1)
		tm[(i+1)*32+i] = bf16.FromFloat32(-1)
	}
	// One copy of the matrix per user's core, as tt_transformers shards it.
	var reps []bf16.BF16
	for range B {
		reps = append(reps, tm...)
	}
	trans := cUpload(t, d, tt.Spec{Shape: []int{1, 1, 32 * B, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, 32})}, reps)
	got := cDown(t, d, cOut(t, d, tt.RotaryEmbeddingLlama{Input: in, Cos: ct, Sin: st, TransMat: trans}))
	rr := func(f float32) float32 { return bf16.FromFloat32(f).Float32() }
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			row := x[(b*H+h)*D:]
			for i := 0; i < D; i += 2 {
				c0, s0 := cos[b*D+i].Float32(), sin[b*D+i].Float32()
				x0, x1 := row[i].Float32(), row[i+1].Float32()
				w0 := bf16.FromFloat32(rr(x0*c0) + rr(-x1*s0))
				w1 := bf16.FromFloat32(rr(x1*c0) + rr(x0*s0))
				g := got[(b*H+h)*D+i:]
				if g[0] != w0 || g[1] != w1 {
					t.Fatalf("user %d head %d pair %d: got %v %v want %v %v", b, h, i/2, g[0], g[1], w0, w1)
				}
			}
		}
	}
	if op := (tt.RotaryEmbeddingHF{}); op.Name() != "rotary_embedding_hf" || (tt.RotaryEmbeddingLlama{}).Name() != "rotary_embedding_llama" {
		t.Fatal("op names are not ttnn's")
	}

	// The matrix on one core only: the matrix CB is bound to its address
	// on every user's core (rotary_embedding_llama_sharded_program_factory.cpp:
	// 114-126), so users 1 and 2 rotate with whatever their own L1 holds
	// there (poison here), user 0 with the matrix; strict names users 1 and 2.
	sd := cDev(t, Options{Strict: true})
	one := tt.RotaryEmbeddingLlama{Input: cUpload(t, sd, in.Spec, x), Cos: cUpload(t, sd, rows, cos), Sin: cUpload(t, sd, rows, sin),
		TransMat: cUpload(t, sd, tt.Spec{Shape: []int{1, 1, 32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(1, [2]int{32, 32})}, tm)}
	bad := cDown(t, sd, cOut(t, sd, one))
	if !slices.Equal(bad[:H*D], got[:H*D]) || slices.Equal(bad[H*D:2*H*D], got[H*D:2*H*D]) {
		t.Errorf("one-core matrix: user 0 equal %v (want true), user 1 equal %v (want false)",
			slices.Equal(bad[:H*D], got[:H*D]), slices.Equal(bad[H*D:2*H*D], got[H*D:2*H*D]))
	}
	var users []int
	for _, f := range sd.Findings() {
		if f.Class == TransMatOffCore {
			users = append(users, f.User)
		}
	}
	if !slices.Equal(users, []int{1, 2}) {
		t.Errorf("findings %v: want %s for users 1 and 2", sd.Findings(), TransMatOffCore)
	}
}

// An Allocating op's outputs come from the device's allocator at dispatch,
// inside a capture too (ttnn's create_output_tensors runs while the trace
// records): the captured program writes them on every replay, and the
// allocator hands out the next address after them.
func TestAllocatingOpInsideCapture(t *testing.T) {
	d := cDev(t, Options{Strict: true})
	r := rand.New(rand.NewPCG(45, 46))
	spec := cSpec(tt.BF16, tt.Tile, 1, 1, 4, 64)
	x := cUpload(t, d, spec, cRand(r, 4*64, false))
	w := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 1, 1, 2, 32), cRand(r, 64, false))
	op := tt.RMSNorm{Input: x, Weight: w, Epsilon: 1e-6}
	eager := cOut(t, d, op) // warm: the program is cached
	want := cDown(t, d, eager)
	id, err := d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	out := cOut(t, d, op)
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	if !out.Spec.Equal(spec) || out.Addr == eager.Addr {
		t.Fatalf("captured output %v, want a fresh tensor of spec %v", out, spec)
	}
	next := mustAlloc(t, d, spec)
	if next.Addr <= out.Addr {
		t.Fatalf("next allocation at %#x, not after the captured output at %#x (bottom-up DRAM)", next.Addr, out.Addr)
	}
	if err := d.Execute(id); err != nil {
		t.Fatal(err)
	}
	cSame(t, "replayed rms_norm output", cDown(t, d, out), want)
	if fs := d.Findings(); len(fs) != 0 {
		t.Fatalf("findings: %v", fs)
	}
}

// WIDTH_SHARDED (tt_metal/api/tt-metalium/buffer_types.hpp): tile (r, c) of
// a width-sharded TILE tensor lives on core FirstCore + c/(shard width/32),
// row-major inside its shard.
// A logical width short of the padded one (120 of 128) places the same.
func TestWidthShardedPlacement(t *testing.T) {
	for _, w := range []int{128, 120} {
		d := cDev(t, Options{})
		spec := tt.Spec{Shape: []int{1, 1, 64, w}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1WidthSharded(2, [2]int{64, 64})}
		x := mustAlloc(t, d, spec)
		b := d.bufs.at(x.ID)
		for p, want := range []struct{ core, slot int }{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}} {
			l := d.pageLoc(b, p)
			if l.Bank != want.core || l.Addr != x.Addr+uint64(want.slot)*b.aligned {
				t.Errorf("width %d: page %d at core %d %#x, want core %d slot %d", w, p, l.Bank, l.Addr, want.core, want.slot)
			}
		}
		v := cRand(rand.New(rand.NewPCG(47, 48)), 64*w, false)
		if err := d.WriteHost(x, tt.HostBF16(spec.Shape, tt.Tile, v)); err != nil {
			t.Fatal(err)
		}
		cSame(t, fmt.Sprintf("width-sharded round trip (width %d)", w), cDown(t, d, x), v)
	}
}

// tt.ShardSpec.GridWidth numbers a grid's cores row-major over the leftmost
// GridWidth columns (num_cores_to_corerangeset_in_subcoregrids over that
// rectangle, row-wise, its rows merged: tt_metal/common/work_split.cpp:
// 150-310): on Blackhole (13 wide) 16 users 8 wide are the one range
// (0,0)-(7,1), shard i on worker core (i/8)*13 + i%8; the whole-grid walk
// is a row and 3 cores. A width past the grid's, or a grid past the
// columns' cores, is refused. On Wormhole (8 wide) width 8 and width 0 are
// the same cores: one program-cache name, and to_memory_config between
// them returns its input.
func TestShardGridWidth(t *testing.T) {
	users := func(w int) tt.Spec {
		m := tt.L1HeightSharded(16, [2]int{32, 128})
		m.Shard.GridWidth = w
		return tt.Spec{Shape: []int{1, 16, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: m}
	}
	bh := cDev(t, Options{Arch: Blackhole})
	for _, c := range []struct {
		w    int
		want string
	}{{8, "{[0-0 - 7-1]}"}, {0, "{[0-0 - 12-0], [0-1 - 2-1]}"}} {
		if got := coreRangeSet(users(c.w).Memory.Shard, bh.gridX()); got != c.want {
			t.Errorf("width %d: grid %s, want %s", c.w, got, c.want)
		}
	}
	spec := users(8)
	x := mustAlloc(t, bh, spec)
	b := bh.bufs.at(x.ID)
	for shard, core := range map[int]int{0: 0, 7: 7, 8: 13, 15: 20} {
		for tile := range 4 {
			if l := bh.pageLoc(b, shard*4+tile); l.Bank != core || l.Addr != x.Addr+uint64(tile)*b.aligned {
				t.Errorf("shard %d tile %d at core %d %#x, want core %d slot %d", shard, tile, l.Bank, l.Addr, core, tile)
			}
		}
	}
	v := cRand(rand.New(rand.NewPCG(49, 50)), 16*32*128, false)
	if err := bh.WriteHost(x, tt.HostBF16(spec.Shape, tt.Tile, v)); err != nil {
		t.Fatal(err)
	}
	cSame(t, "8-wide round trip", cDown(t, bh, x), v)
	for _, c := range []struct {
		spec tt.Spec
		want string
	}{
		{users(14), "sim: shard grid width 14 exceeds the worker grid's 13 columns"},
		{tt.Spec{Shape: []int{1, 81, 32, 128}, DType: tt.BF16, Layout: tt.Tile,
			Memory: tt.MemoryConfig{Layout: tt.HeightSharded, Buffer: tt.L1, Shard: tt.ShardSpec{NumCores: 81, Shape: [2]int{32, 128}, GridWidth: 8}}},
			"sim: shard grid of 81 cores from core 0 exceeds the 80 cores of the leftmost 8 columns"},
	} {
		if _, err := bh.Allocate(c.spec); err == nil || err.Error() != c.want {
			t.Errorf("%s: got %v, want %q", c.spec, err, c.want)
		}
	}
	wh := cDev(t, Options{Arch: Wormhole})
	if k8, k0 := wh.specKey(users(8)), wh.specKey(users(0)); k8 != k0 {
		t.Errorf("Wormhole: width 8 named %q, width 0 %q: the same cores", k8, k0)
	}
	if k8, k0 := bh.specKey(users(8)), bh.specKey(users(0)); k8 == k0 {
		t.Errorf("Blackhole: width 8 and width 0 share the name %q", k8)
	}
	y := cUpload(t, wh, users(0), v)
	outs, err := wh.Run(tt.ToMemoryConfig{Input: y, Memory: users(8).Memory})
	if err != nil || len(outs) != 1 || outs[0].ID != y.ID {
		t.Fatalf("Wormhole: to_memory_config to width 8 from width 0: outs %v err %v, want the input", outs, err)
	}
}
