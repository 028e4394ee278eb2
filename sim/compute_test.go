package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
	"github.com/stretchr/testify/require"
)

// ---- helpers (prefixed c* so they never clash with other test files) ----

func cDev(t testing.TB, o Options) *Device {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func cSpec(dt tt.DType, l tt.Layout, shape ...int) tt.Spec {
	return tt.Spec{Shape: shape, DType: dt, Layout: l, Memory: tt.DRAMInterleaved}
}

func cAlloc(t testing.TB, d *Device, s tt.Spec) tt.Tensor {
	t.Helper()
	x, err := d.Allocate(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func cUpload(t testing.TB, d *Device, s tt.Spec, v []bf16.BF16) tt.Tensor {
	t.Helper()
	x := cAlloc(t, d, s)
	if err := d.WriteHost(x, tt.HostBF16(s.Shape, s.Layout, v)); err != nil {
		t.Fatal(err)
	}
	return x
}

func cUploadI32(t testing.TB, d *Device, s tt.Spec, v []int32) tt.Tensor {
	t.Helper()
	x := cAlloc(t, d, s)
	h := tt.HostInt32(s.Shape, s.Layout, v)
	h.DType = s.DType
	if err := d.WriteHost(x, h); err != nil {
		t.Fatal(err)
	}
	return x
}

func cDown(t testing.TB, d *Device, x tt.Tensor) []bf16.BF16 {
	t.Helper()
	h, err := d.ReadHost(x)
	if err != nil {
		t.Fatal(err)
	}
	return h.BF16s()
}

func cDownI32(t testing.TB, d *Device, x tt.Tensor) []int32 {
	t.Helper()
	h, err := d.ReadHost(x)
	if err != nil {
		t.Fatal(err)
	}
	return h.Int32s()
}

// cOut runs an Allocating op that has one output and returns it.
func cOut(t testing.TB, d *Device, op tt.Op) tt.Tensor {
	t.Helper()
	outs, err := d.Run(op)
	if err != nil {
		t.Fatalf("%s: %v", op.Name(), err)
	}
	if len(outs) != 1 {
		t.Fatalf("%s: %d outputs, want 1", op.Name(), len(outs))
	}
	return outs[0]
}

func cRun(t testing.TB, d *Device, op tt.Op) {
	t.Helper()
	if err := run1(d, op); err != nil {
		t.Fatalf("%s: %v", op.Name(), err)
	}
}

// cRand draws bf16 values of mixed magnitudes and signs; with specials, a
// few NaN/Inf too.
func cRand(r *rand.Rand, n int, specials bool) []bf16.BF16 {
	v := make([]bf16.BF16, n)
	for i := range v {
		scale := []float64{0.02, 1, 1, 30, 1e4}[r.IntN(5)]
		v[i] = bf16.FromFloat32(float32(r.NormFloat64() * scale))
		if specials && r.IntN(40) == 0 {
			v[i] = []bf16.BF16{bf16.QuietNaN, bf16.PosInf, bf16.NegInf, 0x8000, bf16.MaxValue}[r.IntN(5)]
		}
	}
	return v
}

func cSame(t testing.TB, what string, got, want []bf16.BF16) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: element %d = %#04x, want %#04x", what, i, uint16(got[i]), uint16(want[i]))
		}
	}
}

// ---- ops vs ref ----

// TestEmbeddingMatchesRef: a ROW_MAJOR output holds the rows for any id
// count; a TILE output holds them when the ids are padded to whole tiles
// (ttnn's fused kernel, embedding.cpp:46-58 at 622c6fb9), the padding ids
// filling the padding rows: [1,1,B,h] from 32 ids, and [1,B,1,h] from 32
// copies of each id (one tile row a user, as qwen3.Engine embeds cos/sin).
func TestEmbeddingMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	d := cDev(t, Options{})
	const vocab, hidden, B = 100, 96, 7
	table := cRand(r, vocab*hidden, true)
	w := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, vocab, hidden), table)
	ids := make([]int32, B)
	for i := range ids {
		ids[i] = int32(r.IntN(vocab))
	}
	ids[3] = vocab - 1
	want := make([]bf16.BF16, B*hidden)
	for i, id := range ids {
		ref.Embedding(want[i*hidden:(i+1)*hidden], table, int(id))
	}
	padded := append(append([]int32(nil), ids...), make([]int32, tt.TileSize-B)...)
	var perUser []int32
	for _, id := range ids {
		for range tt.TileSize {
			perUser = append(perUser, id)
		}
	}
	for _, dt := range []tt.DType{tt.UINT32, tt.BF16} {
		up := func(v []int32) tt.Tensor {
			s := cSpec(dt, tt.RowMajor, 1, 1, 1, len(v))
			if dt == tt.BF16 { // ids as bf16 values (exact below 256)
				f := make([]bf16.BF16, len(v))
				for i, id := range v {
					f[i] = bf16.FromFloat32(float32(id))
				}
				return cUpload(t, d, s, f)
			}
			return cUploadI32(t, d, s, v)
		}
		for _, c := range []struct {
			ids []int32
			out tt.Spec
		}{
			{ids, cSpec(tt.BF16, tt.RowMajor, 1, 1, B, hidden)},
			{padded, cSpec(tt.BF16, tt.Tile, 1, 1, B, hidden)},
			{perUser, cSpec(tt.BF16, tt.Tile, 1, B, 1, hidden)},
		} {
			out := cAlloc(t, d, c.out)
			cRun(t, d, tt.Embedding{Input: up(c.ids), Weight: w, Output: out})
			cSame(t, "embedding "+c.out.String(), cDown(t, d, out), want)
		}
	}
}

// TestEmbeddingIntoTileUnpaddedWritesSticks: with fewer ids than a tile,
// ttnn.embedding into a TILE output takes the row-major kernel
// (embedding.cpp:46-58; embeddings_rm_program_factory.cpp), which writes
// row i as one stick at tile page i: the first 16 values of logical row r
// of tile i are table row ids[i]'s values 16r..16r+15 (face 0 holds the
// stick's first 256 bytes), not the tilized rows.
func TestEmbeddingIntoTileUnpaddedWritesSticks(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	d := cDev(t, Options{})
	const vocab, hidden, B = 50, 128, 4
	table := cRand(r, vocab*hidden, true)
	w := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, vocab, hidden), table)
	ids := []int32{5, 17, 0, 49}
	in := cUploadI32(t, d, cSpec(tt.UINT32, tt.RowMajor, 1, 1, 1, B), ids)
	out := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, B, hidden))
	cRun(t, d, tt.Embedding{Input: in, Weight: w, Output: out})
	got := cDown(t, d, out)
	tilized := true
	for i, id := range ids {
		for row := range B {
			for c := range tt.FaceSize {
				g := got[row*hidden+i*tt.TileSize+c]
				if want := table[int(id)*hidden+row*tt.FaceSize+c]; g != want {
					t.Fatalf("tile %d row %d col %d = %#04x, want the stick's value %#04x", i, row, c, uint16(g), uint16(want))
				}
				if g != table[int(ids[row])*hidden+i*tt.TileSize+c] {
					tilized = false
				}
			}
		}
	}
	if tilized {
		t.Fatal("the output holds the tilized rows; the row-major kernel writes sticks")
	}
}

func TestRMSNormMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	d := cDev(t, Options{})
	for _, c := range []struct {
		shape []int
		n     int
	}{{[]int{1, 1, 5, 128}, 128}, {[]int{1, 3, 4, 32}, 32}, {[]int{1, 1, 32, 64}, 64}, {[]int{1, 2, 3, 48}, 48}} {
		vol := 1
		for _, x := range c.shape {
			vol *= x
		}
		for _, specials := range []bool{false, true} {
			x := cRand(r, vol, specials)
			wv := cRand(r, c.n, false)
			in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, c.shape...), x)
			// ttnn's gamma layout: tile-wide rows covering the input's
			// padded width (the padding columns' weights are not used)
			np := (c.n + 31) / 32
			w := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 1, 1, np, 32), append(slices.Clone(wv), make([]bf16.BF16, np*32-c.n)...))
			const eps = 1e-6
			out := cOut(t, d, tt.RMSNorm{Input: in, Weight: w, Epsilon: eps})
			want := make([]bf16.BF16, vol)
			for i := 0; i < vol; i += c.n {
				ref.RMSNorm(want[i:i+c.n], x[i:i+c.n], wv, eps)
			}
			cSame(t, "rms_norm", cDown(t, d, out), want)
			if !out.Spec.Equal(in.Spec) || out.Addr == in.Addr {
				t.Fatalf("rms_norm output %v, want a new tensor with the input's spec %v", out, in.Spec)
			}
		}
	}
}

func TestLinearMatchesMatVec(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	d := cDev(t, Options{})
	for _, c := range []struct{ m, k, n int }{{1, 128, 256}, {8, 128, 128}, {5, 256, 128}, {3, 48, 80}, {32, 64, 512}} {
		for _, specials := range []bool{false, true} {
			x := cRand(r, c.m*c.k, specials)
			hf := cRand(r, c.n*c.k, specials) // [out, in]
			want := make([]bf16.BF16, c.m*c.n)
			for m := 0; m < c.m; m++ {
				ref.MatVec(want[m*c.n:(m+1)*c.n], hf, x[m*c.k:(m+1)*c.k])
			}
			in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, c.m, c.k), x)
			wT := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, c.n, c.k), hf)
			kn := make([]bf16.BF16, c.k*c.n)
			for o := 0; o < c.n; o++ {
				for i := 0; i < c.k; i++ {
					kn[i*c.n+o] = hf[o*c.k+i]
				}
			}
			wKN := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, c.k, c.n), kn)
			out := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, c.m, c.n))
			cRun(t, d, tt.Linear{Input: in, Weight: wT, Output: out, TransposeB: true})
			cSame(t, "linear transpose_b", cDown(t, d, out), want)
			out2 := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, c.m, c.n))
			cRun(t, d, tt.Linear{Input: in, Weight: wKN, Output: out2})
			cSame(t, "linear [K,N]", cDown(t, d, out2), want)
			// Bias: R(Dot + b).
			bv := cRand(r, c.n, false)
			bias := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 1, 1, 1, c.n), bv)
			cRun(t, d, tt.Linear{Input: in, Weight: wT, Bias: &bias, Output: out, TransposeB: true})
			for m := 0; m < c.m; m++ {
				for o := 0; o < c.n; o++ {
					want[m*c.n+o] = bf16.FromFloat32(ref.Dot(hf[o*c.k:(o+1)*c.k], x[m*c.k:(m+1)*c.k]) + bv[o].Float32())
				}
			}
			cSame(t, "linear bias", cDown(t, d, out), want)
		}
	}
}

func TestHeadsRotaryConcatMatchRef(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	d := cDev(t, Options{})
	const B, H, KV, D = 5, 4, 2, 32
	w := (H + 2*KV) * D
	qkv := cRand(r, B*w, true)
	in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, B, w), qkv)
	for _, qh := range []int{H} {
		outs, err := d.Run(tt.NLPCreateQKVHeadsDecode{Input: in, NumHeads: H, NumKVHeads: KV})
		if err != nil {
			t.Fatal(err)
		}
		q, k, v := outs[0], outs[1], outs[2]
		if want := tt.L1HeightSharded(B, [2]int{32, D}); k.Spec.Memory != want || q.Spec.Memory != want {
			t.Fatalf("heads memory %v / %v, want %v", q.Spec.Memory, k.Spec.Memory, want)
		}
		gq, gk, gv := cDown(t, d, q), cDown(t, d, k), cDown(t, d, v)
		for b := 0; b < B; b++ {
			row := qkv[b*w : (b+1)*w]
			for h := 0; h < qh; h++ {
				want := make([]bf16.BF16, D)
				if h < H {
					copy(want, row[h*D:])
				}
				cSame(t, "q head", gq[(b*qh+h)*D:(b*qh+h+1)*D], want)
			}
			for h := 0; h < KV; h++ {
				cSame(t, "k head", gk[(b*KV+h)*D:(b*KV+h+1)*D], row[(H+h)*D:(H+h+1)*D])
				cSame(t, "v head", gv[(b*KV+h)*D:(b*KV+h+1)*D], row[(H+KV+h)*D:(H+KV+h+1)*D])
			}
		}
		// Rotary with per-user cos/sin rows from the rope table.
		cos, sin := make([]bf16.BF16, B*D), make([]bf16.BF16, B*D)
		for b := 0; b < B; b++ {
			ref.RopeTable(1e6, D, r.IntN(5000), cos[b*D:(b+1)*D], sin[b*D:(b+1)*D])
		}
		rows := tt.Spec{Shape: []int{1, B, 1, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})}
		ct := cUpload(t, d, rows, cos)
		st := cUpload(t, d, rows, sin)
		qo := cOut(t, d, tt.RotaryEmbeddingHF{Input: q, Cos: ct, Sin: st})
		got := cDown(t, d, qo)
		for b := 0; b < B; b++ {
			for h := 0; h < qh; h++ {
				want := make([]bf16.BF16, D)
				ref.Rope(want, gq[(b*qh+h)*D:(b*qh+h+1)*D], cos[b*D:(b+1)*D], sin[b*D:(b+1)*D])
				cSame(t, "rotary", got[(b*qh+h)*D:(b*qh+h+1)*D], want)
			}
		}
		// Concat heads.
		cat := cAlloc(t, d, tt.Spec{Shape: []int{1, 1, B, H * D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1WidthSharded(H, [2]int{32, D})})
		cRun(t, d, tt.ConcatHeads{Input: qo, Output: cat, NumHeads: H})
		gc := cDown(t, d, cat)
		for b := 0; b < B; b++ {
			for h := 0; h < H; h++ {
				cSame(t, "concat", gc[b*H*D+h*D:b*H*D+(h+1)*D], got[(b*qh+h)*D:(b*qh+h+1)*D])
			}
		}
	}
}

func TestEltwiseMatchesRef(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	d := cDev(t, Options{})
	// TILE only: ttnn refuses two ROW_MAJOR operands with an output
	// (ttnn/cpp/ttnn/operations/eltwise/binary/binary.cpp:531-535; the checks table's binary.14).
	for _, l := range []tt.Layout{tt.Tile} {
		shape := []int{1, 1, 7, 256}
		n := 7 * 256
		a, b := cRand(r, n, true), cRand(r, n, true)
		ta := cUpload(t, d, cSpec(tt.BF16, l, shape...), a)
		tb := cUpload(t, d, cSpec(tt.BF16, l, shape...), b)
		out := cAlloc(t, d, cSpec(tt.BF16, l, shape...))
		cRun(t, d, tt.Add{A: ta, B: tb, Output: out})
		want := make([]bf16.BF16, n)
		ref.Add(want, a, b)
		cSame(t, "add", cDown(t, d, out), want)
		cRun(t, d, tt.SiluMul{Gate: ta, Up: tb, Output: out})
		ref.SiluMul(want, a, b)
		cSame(t, "silu mul", cDown(t, d, out), want)
		// In place: a = a + b.
		cRun(t, d, tt.Add{A: ta, B: tb, Output: ta})
		ref.Add(want, a, b)
		cSame(t, "add in place", cDown(t, d, ta), want)
	}
}

// TestTilePaddingWrittenZero: ops that write only their logical rows
// (writeRows) still write every padding element of a tile page as zero,
// though the scratch buffers they reuse hold another launch's values (a
// launch on whole tiles runs first).
func TestTilePaddingWrittenZero(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	d := cDev(t, Options{})
	type dims struct{ k, n int } // input width, linear output width
	wide, narrow := dims{64, 64}, dims{48, 40}
	norms, weights := map[dims]tt.Tensor{}, map[dims]tt.Tensor{}
	for _, w := range []dims{wide, narrow} {
		// ttnn's gamma: tile-wide rows covering the input's padded width
		kp := (w.k + 31) / 32
		norms[w] = cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 1, 1, kp, 32), cRand(r, kp*32, false))
		weights[w] = cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, w.n, w.k), cRand(r, w.n*w.k, false))
	}
	ops := []struct {
		name string
		out  func(rows []int, w dims) []int
		op   func(in, out tt.Tensor, w dims) tt.Op
	}{
		{"rms_norm", func(rows []int, w dims) []int { return append(rows, w.k) },
			func(in, out tt.Tensor, w dims) tt.Op { return tt.RMSNorm{Input: in, Weight: norms[w], Epsilon: 1e-6} }},
		{"linear", func(rows []int, w dims) []int { return []int{1, 1, rows[0] * rows[1] * rows[2], w.n} },
			func(in, out tt.Tensor, w dims) tt.Op {
				return tt.Linear{Input: in, Weight: weights[w], Output: out, TransposeB: true}
			}},
	}
	for _, o := range ops {
		for _, rows := range [][]int{{1, 1, 5}, {1, 3, 5}, {1, 1, 40}} {
			if o.name == "linear" && rows[1] > 1 {
				continue // linear takes [1,1,M,K]
			}
			for _, c := range []struct {
				rows []int
				w    dims
			}{{[]int{1, 1, 64}, wide}, {rows, narrow}} {
				shape := append(slices.Clone(c.rows), c.w.k)
				in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, shape...), cRand(r, shape[0]*shape[1]*shape[2]*c.w.k, false))
				out := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, o.out(c.rows, c.w)...))
				op := o.op(in, out, c.w)
				if _, ok := op.(tt.Allocating); ok {
					out = cOut(t, d, op)
				} else {
					cRun(t, d, op)
				}
				cPaddingZero(t, d, o.name, out)
			}
		}
	}
}

// cPaddingZero fails unless every padding element of a TILE tensor's
// pages is +0.
func cPaddingZero(t *testing.T, d *Device, what string, x tt.Tensor) {
	t.Helper()
	b := d.bufs.at(x.ID)
	g := geomOf(b.spec)
	wt := g.wp / tt.TileSize
	page := make([]byte, b.pageSize)
	for p := 0; p < b.numPages; p++ {
		m, a := d.memAt(d.pageLoc(b, p))
		m.read(a, page)
		v := bf16.FromBytes(page)
		tr, tc := p/wt, p%wt
		for i := 0; i < tt.TileSize; i++ {
			for j := 0; j < tt.TileSize; j++ {
				row, col := tr*tt.TileSize+i, tc*tt.TileSize+j
				if (row%g.hp >= g.h || col >= g.w) && v[TileElem(i, j)] != 0 {
					t.Fatalf("%s %v: padding element (%d, %d) of the padded view = %#04x", what, x.Spec.Shape, row, col, uint16(v[TileElem(i, j)]))
				}
			}
		}
	}
}

// TestEltwisePageZeroRuns: eltwisePage (Add or SiluMul, with its +0
// shortcut past a tile's used rows) gives the kernels' bits on pages mixing
// runs of +0, -0, one nonzero side and random values: tile pages with every
// count of used rows (the count only splits the work: padding that is not
// +0 in both inputs is computed), and pages of other lengths.
func TestEltwisePageZeroRuns(t *testing.T) {
	const face = tt.FaceSize * tt.FaceSize
	r := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 400; trial++ {
		n := tt.TileSize * tt.TileSize
		if trial%3 == 0 {
			n = 1 + r.IntN(3*face)
		}
		used := r.IntN(tt.TileSize + 1)
		a, b := cRand(r, n, true), cRand(r, n, true)
		for i := 0; i < n; {
			run := tt.FaceSize
			if r.IntN(3) == 0 {
				run = face - i%face // to the end of a face
			}
			e := min(i+run, n)
			switch r.IntN(6) {
			case 0, 5: // both +0
				clear(a[i:e])
				clear(b[i:e])
			case 1: // +0 and -0
				clear(a[i:e])
				for j := i; j < e; j++ {
					b[j] = 0x8000
				}
			case 2: // only a zero
				clear(a[i:e])
			case 3: // only b zero
				clear(b[i:e])
			case 4: // +0 but one element of a or b
				clear(a[i:e])
				clear(b[i:e])
				j := i + r.IntN(e-i)
				if r.IntN(2) == 0 {
					a[j] = 0x8000 // -0: not the +0 pattern
				} else {
					b[j] = bf16.BF16(1 + r.IntN(0xFFFF))
				}
			}
			i = e
		}
		for _, silu := range []bool{false, true} {
			want, got := make([]bf16.BF16, n), make([]bf16.BF16, n)
			for i := range got {
				got[i] = 0x7FC1 // what the shortcut must overwrite
			}
			if silu {
				ref.SiluMul(want, a, b)
			} else {
				ref.Add(want, a, b)
			}
			eltwisePage(got, bf16.Bytes(a), bf16.Bytes(b), silu, used)
			cSame(t, fmt.Sprintf("eltwisePage (%d elements, %d rows used, silu %v)", n, used, silu), got, want)
		}
	}
}

// argmaxBF16 is qwen3.Argmax over the widened values, on random rows of
// every bit pattern and of the edge values (±0, ±Inf, NaNs of both signs,
// the smallest subnormals).
func TestArgmaxBF16IsQwen3Argmax(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	edges := []bf16.BF16{0, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0xFFC1, 0x7F81, 1, 0x8001}
	for trial := 0; trial < 100000; trial++ {
		v := make([]bf16.BF16, 1+r.IntN(40))
		for i := range v {
			switch r.IntN(5) {
			case 0:
				v[i] = bf16.BF16(r.IntN(1 << 16))
			case 1:
				v[i] = edges[r.IntN(len(edges))]
			default:
				v[i] = bf16.FromFloat32(float32(r.NormFloat64()))
			}
		}
		f := make([]float32, len(v))
		bf16.ToFloat32s(f, v)
		if got, want := argmaxBF16(v), qwen3.Argmax(f); int32(got) != want {
			t.Fatalf("%#04x: argmaxBF16 %d, qwen3.Argmax %d", v, got, want)
		}
	}
}

func TestArgmaxFirstMaxNaNNeverWins(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	d := cDev(t, Options{})
	const B, V = 6, 512
	x := cRand(r, B*V, true)
	// Row 1: a tie, the first wins. Row 2: all NaN -> 0. Row 3: NaN then
	// values. Row 4: +Inf wins. Row 5: -0 and +0 only, the first wins.
	for i := 0; i < V; i++ {
		x[1*V+i] = bf16.FromFloat32(1)
		x[2*V+i] = bf16.QuietNaN
		x[5*V+i] = 0
		x[4*V+i] = bf16.FromFloat32(float32(i % 7))
	}
	x[1*V+17], x[1*V+300] = bf16.FromFloat32(5), bf16.FromFloat32(5)
	x[3*V] = bf16.QuietNaN
	x[4*V+200] = bf16.PosInf
	x[5*V+3] = 0x8000
	in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, B, V), x)
	out := cUploadI32(t, d, cSpec(tt.UINT32, tt.RowMajor, 1, 1, 1, 8), []int32{9, 9, 9, 9, 9, 9, 77, 78})
	cRun(t, d, tt.Argmax{Input: in, Output: out})
	got := cDownI32(t, d, out)
	for b := 0; b < B; b++ {
		f := make([]float32, V)
		bf16.ToFloat32s(f, x[b*V:(b+1)*V])
		want := int32(-1)
		for i, v := range f { // qwen3.Argmax
			if v != v {
				continue
			}
			if want < 0 || v > f[want] {
				want = int32(i)
			}
		}
		want = max(want, 0)
		if got[b] != want {
			t.Fatalf("row %d: argmax %d, want %d", b, got[b], want)
		}
	}
	if got[1] != 17 || got[2] != 0 || got[4] != 200 || got[5] != 0 {
		t.Fatalf("special rows: %v", got[:B])
	}
	if got[6] != 77 || got[7] != 78 {
		t.Fatalf("entries past the batch changed: %v", got)
	}
}

func TestPlusOne(t *testing.T) {
	d := cDev(t, Options{})
	vals := []int32{0, 5, -1, math.MaxInt32, -7, 31, 32, 63}
	for _, skip := range []bool{false, true} {
		for _, dt := range []tt.DType{tt.INT32, tt.UINT32} {
			x := cUploadI32(t, d, cSpec(dt, tt.RowMajor, 2, 8), append(slices.Clone(vals), vals...))
			cRun(t, d, tt.PlusOne{Input: x, SkipNegativeEntries: skip})
			got := cDownI32(t, d, x)
			for i, v := range append(slices.Clone(vals), vals...) {
				want := v + 1
				if v == math.MaxInt32 {
					want = math.MinInt32
				}
				if skip && (v < 0 || v == math.MaxInt32) {
					want = v
				}
				if got[i] != want {
					t.Fatalf("skip=%t %v: %d -> %d, want %d", skip, dt, v, got[i], want)
				}
			}
		}
	}
	bad := cAlloc(t, d, cSpec(tt.BF16, tt.RowMajor, 8))
	if err := run1(d, tt.PlusOne{Input: bad}); !tt.HasMsg(err, tt.MsgPlusOneDType) {
		t.Fatalf("bf16 plus_one: %v, want %q", err, tt.MsgPlusOneDType)
	}
}

// ---- paged_fill_cache ----

func TestPagedFillCacheSkipsMinusOne(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, bs := range []int{32, 64} {
		d := cDev(t, Options{})
		const blocks, KV, D, W = 12, 2, 64, 4
		cache0 := cRand(r, blocks*KV*bs*D, false)
		cache := cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, KV, bs, D), cache0)
		table := []int32{
			3, 7, 1, 0,
			9, -1, 4, 11,
			2, 5, -1, -1,
		}
		pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 3, W), table)
		for _, c := range []struct {
			batch int
			s     int
			bidx  bool
		}{{1, 3*bs + 5, false}, {0, bs, true}, {2, 2 * bs, false}} {
			in0 := cRand(r, KV*c.s*D, true)
			in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, KV, c.s, D), in0)
			op := tt.PagedFillCache{Cache: cache, Input: in, PageTable: pt, BatchIdx: c.batch}
			if c.bidx {
				bi := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1), []int32{int32(c.batch)})
				op.BatchIdx = 0 // the fallback, checked against the table's rows even with the tensor
				op.BatchIdxTensor = &bi
			}
			before := cDown(t, d, cache)
			cRun(t, d, op)
			want := slices.Clone(before)
			sp := (c.s + 31) / 32 * 32 // tiles are copied whole: padding rows too
			for h := 0; h < KV; h++ {
				for p := 0; p < sp; p++ {
					blk := table[c.batch*W+p/bs]
					if blk == -1 {
						continue
					}
					for e := 0; e < D; e++ {
						var v bf16.BF16
						if p < c.s {
							v = in0[(h*c.s+p)*D+e]
						}
						want[((int(blk)*KV+h)*bs+p%bs)*D+e] = v
					}
				}
			}
			cSame(t, "fill cache", cDown(t, d, cache), want)
		}
		// dtype mismatch is rejected.
		in32 := cAlloc(t, d, cSpec(tt.FP32, tt.Tile, 1, KV, 32, D))
		if err := run1(d, tt.PagedFillCache{Cache: cache, Input: in32, PageTable: pt}); err == nil {
			t.Fatal("fp32 input into a bf16 cache accepted")
		}
	}
}

// ---- paged SDPA decode ----

type sdpaCase struct {
	bs, blocks, kvh, heads, D, W, kchunk int
	pos                                  []int32
}

// sdpaWant is ref: per user, per head, gather 0..pos through the table and
// ref.Attend.
func sdpaWant(c sdpaCase, table []int32, q, k, v []bf16.BF16, scale float32, prev []bf16.BF16) []bf16.BF16 {
	out := slices.Clone(prev)
	group := c.heads / c.kvh
	for b, p := range c.pos {
		if p == -1 {
			continue
		}
		n := int(p) + 1
		for h := 0; h < c.heads; h++ {
			kh := h / group
			kb, vb := make([]bf16.BF16, n*c.D), make([]bf16.BF16, n*c.D)
			for t := 0; t < n; t++ {
				blk := int(table[b*c.W+t/c.bs])
				off := ((blk*c.kvh+kh)*c.bs + t%c.bs) * c.D
				copy(kb[t*c.D:], k[off:off+c.D])
				copy(vb[t*c.D:], v[off:off+c.D])
			}
			ref.Attend(out[(b*c.heads+h)*c.D:(b*c.heads+h+1)*c.D], q[(b*c.heads+h)*c.D:(b*c.heads+h+1)*c.D], kb, vb, n, scale, make([]float32, n))
		}
	}
	return out
}

func runSDPACase(t *testing.T, r *rand.Rand, c sdpaCase, o Options, scale float32) *Device {
	t.Helper()
	d := cDev(t, o)
	B := len(c.pos)
	k := cRand(r, c.blocks*c.kvh*c.bs*c.D, false)
	v := cRand(r, c.blocks*c.kvh*c.bs*c.D, false)
	q := cRand(r, B*c.heads*c.D, false)
	kt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, c.blocks, c.kvh, c.bs, c.D), k)
	vt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, c.blocks, c.kvh, c.bs, c.D), v)
	qt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, B, c.heads, c.D), q)
	// Random permuted page table: distinct blocks across users.
	perm := r.Perm(c.blocks)
	table := make([]int32, B*c.W)
	for i := range table {
		table[i] = int32(perm[i%c.blocks])
	}
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B, c.W), table)
	cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, B), c.pos)
	// A skipped user's rows of the fresh output are not written: they keep
	// the fresh memory's bytes (the Poison pattern on a fresh device).
	prev := make([]bf16.BF16, B*c.heads*c.D)
	for i := range prev {
		prev[i] = bf16.BF16(uint16(Poison(1))<<8 | uint16(Poison(0)))
	}
	out := cOut(t, d, tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: pt, CurPos: cp, Scale: scale, KChunkSize: c.kchunk})
	s := scale
	if s == 0 {
		s = ref.AttnScale(c.D)
	}
	got, err := d.Peek(out) // skipped users' rows were never written: not a host read
	if err != nil {
		t.Fatal(err)
	}
	cSame(t, "sdpa", got.BF16s(), sdpaWant(c, table, q, k, v, s, prev))
	return d
}

func TestPagedSDPADecodeMatchesAttend(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, bs := range []int{32, 64} {
		for _, kc := range []int{0, 32, bs, 128} {
			var pos []int32
			for k := 1; k <= 3; k++ {
				pos = append(pos, int32(k*bs-1), int32(k*bs), int32(k*bs+1))
			}
			pos = append(pos, 0, -1, 1, -1)
			c := sdpaCase{bs: bs, blocks: 64, kvh: 2, heads: 4, D: 32, W: 5, kchunk: kc, pos: pos}
			runSDPACase(t, r, c, Options{}, 0)
		}
	}
	// GQA 8:2, head_dim 64, an explicit scale, Blackhole.
	c := sdpaCase{bs: 32, blocks: 40, kvh: 2, heads: 8, D: 64, W: 6, kchunk: 64, pos: []int32{100, -1, 31, 32, 159}}
	runSDPACase(t, r, c, Options{Arch: Blackhole}, 0.125)
	// MHA.
	// (W 4: the dynamic chunk for 191 is 8 tiles, 4 blocks of 64, and the
	// card fetches the masked tiles of the last chunk through their entries.)
	c = sdpaCase{bs: 64, blocks: 16, kvh: 4, heads: 4, D: 32, W: 4, kchunk: 0, pos: []int32{5, 127, 128, 191}}
	runSDPACase(t, r, c, Options{}, 0)
}

// The chunked reader reads page-table entries past the cur_pos block: with
// k_chunk 128 and block size 32, cur_pos 33 touches entries 0..3. A row of
// width 2 makes entries 2 and 3 come from the slot padding: strict mode says
// so; the output (masked positions) is still exact. The card fetches the
// masked tiles through those entries (sdpa_decode reader_decode_all.cpp):
// with the padding written as zeros (Options.L1 zero) they are block 0, a
// real block; with poison padding the fetch faults (below).
func TestPagedSDPAChunkReadsPastRow(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	c := sdpaCase{bs: 32, blocks: 8, kvh: 2, heads: 4, D: 32, W: 2, kchunk: 128, pos: []int32{33, -1}}
	d := runSDPACase(t, r, c, Options{Strict: true, L1: L1Zero}, 0)
	var past []int64
	for _, f := range d.Findings() {
		if f.Op == opSDPA && f.Class == PTReadPastRow {
			past = append(past, f.Index)
		}
	}
	if !slices.Equal(past, []int64{2, 3}) {
		t.Fatalf("past-row findings at %v, want [2 3]; all: %v", past, d.Findings())
	}
	// A fitting chunk reads no entry past the row.
	c.kchunk = 32
	d = runSDPACase(t, r, c, Options{Strict: true}, 0)
	for _, f := range d.Findings() {
		t.Errorf("unexpected finding: %v", f)
	}
}

// Garbage block ids are used as they are: a -1 entry in the used range is a
// strict finding (SDPA does not skip it).
func TestPagedSDPAMinusOneEntryFinding(t *testing.T) {
	d := cDev(t, Options{Strict: true, DRAMBankSize: 1 << 26})
	const bs, D = 32, 32
	r := rand.New(rand.NewPCG(19, 20))
	kt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, bs, D), cRand(r, 4*bs*D, false))
	vt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, bs, D), cRand(r, 4*bs*D, false))
	qt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 1, D), cRand(r, D, false))
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1, 2), []int32{1, -1})
	cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1), []int32{40})
	err := run1(d, tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: pt, CurPos: cp, KChunkSize: 32})
	var fault *Fault
	if err == nil || !asFault(err, &fault) {
		t.Fatalf("block 0xffffffff: err %v, want a Fault", err)
	}
	found := false
	for _, f := range d.Findings() {
		found = found || (f.Class == MinusOneNotSkipped && f.Index == 1)
	}
	if !found {
		t.Fatalf("no minus-one finding: %v", d.Findings())
	}
}

func asFault(err error, f **Fault) bool {
	x, ok := err.(*Fault)
	if ok {
		*f = x
	}
	return ok
}

func TestPagedSDPAValidation(t *testing.T) {
	d := cDev(t, Options{})
	kt := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, 32, 32))
	vt := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, 32, 32))
	qt := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 2, 1, 32))
	pt := cAlloc(t, d, cSpec(tt.INT32, tt.RowMajor, 2, 2))
	cpBad := cAlloc(t, d, cSpec(tt.UINT32, tt.RowMajor, 2))
	err := run1(d, tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: pt, CurPos: cpBad})
	if !tt.HasMsg(err, "Expect cur_pos to be INT32, got DataType::UINT32") {
		t.Fatalf("uint32 cur_pos: %v", err)
	}
	pt3 := cAlloc(t, d, cSpec(tt.INT32, tt.RowMajor, 3, 2))
	cp3 := cAlloc(t, d, cSpec(tt.INT32, tt.RowMajor, 3))
	err = run1(d, tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: pt3, CurPos: cp3})
	if !tt.HasMsg(err, "cur_pos must have batch size equal to Q, got 3 and 2") {
		t.Fatalf("batch mismatch: %v", err)
	}
	ptU := cAlloc(t, d, cSpec(tt.UINT32, tt.RowMajor, 2, 2))
	cp := cAlloc(t, d, cSpec(tt.INT32, tt.RowMajor, 2))
	err = run1(d, tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: ptU, CurPos: cp})
	if !tt.HasMsg(err, "Error: SDPA currently only supports INT32 datatype") {
		t.Fatalf("uint32 page table: %v", err)
	}
}

// Same seed, same bytes: two devices running the same ops end with the same
// output bytes.
func TestComputeDeterministic(t *testing.T) {
	run := func() []byte {
		r := rand.New(rand.NewPCG(21, 22))
		c := sdpaCase{bs: 32, blocks: 16, kvh: 2, heads: 4, D: 32, W: 4, kchunk: 0, pos: []int32{70, -1, 31}}
		d := runSDPACase(t, r, c, Options{}, 0)
		var all []byte
		for id := tt.TensorID(1); id < d.nextID; id++ {
			if b, ok := d.bufs.get(id); ok {
				h, err := d.ReadHost(tt.Tensor{ID: id, Spec: b.spec, Addr: b.addr})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, h.Data...)
			}
		}
		return all
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Fatal("same seed, different bytes")
	}
}

// A [B,1] page table with cur_pos in the 10th block: entries 1..7 come from
// the DRAM padding of the row's 32 B slot, entries 8.. from L1 past the
// page-table CB. Strict mode names each; the kernel uses them as they are.
func TestPagedSDPAOneColumnTable(t *testing.T) {
	d := cDev(t, Options{Strict: true})
	r := rand.New(rand.NewPCG(25, 26))
	const bs, D, blocks = 32, 32, 16
	kt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, 1, bs, D), cRand(r, blocks*bs*D, false))
	vt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, 1, bs, D), cRand(r, blocks*bs*D, false))
	qt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 1, D), cRand(r, D, false))
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1, 1), []int32{3})
	cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1), []int32{300})
	err := run1(d, tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: pt, CurPos: cp, KChunkSize: 32})
	var fault *Fault
	if err != nil && !asFault(err, &fault) {
		t.Fatal(err)
	}
	classes := map[int64]FindingClass{}
	for _, f := range d.Findings() {
		if f.Class == PTReadPastRow || f.Class == PTReadPastCB {
			classes[f.Index] = f.Class
		}
	}
	for vb := int64(1); vb <= 9; vb++ {
		want := PTReadPastRow
		if vb >= 8 {
			want = PTReadPastCB
		}
		if classes[vb] != want {
			t.Fatalf("entry %d: %q, want %q (findings %v)", vb, classes[vb], want, d.Findings())
		}
	}
}

// A garbage cur_pos (here INT32_MAX) is an error, not an out-of-memory crash.
func TestPagedSDPAGarbagePosition(t *testing.T) {
	d := cDev(t, Options{})
	kt := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, 32, 32))
	vt := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 4, 1, 32, 32))
	qt := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 1, 32))
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1, 2), []int32{0, 1})
	cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1), []int32{math.MaxInt32})
	if err := run1(d, tt.PagedSDPADecode{Q: qt, K: kt, V: vt, PageTable: pt, CurPos: cp}); err == nil {
		t.Fatal("cur_pos INT32_MAX accepted")
	}
}

// run1 runs an op and returns its error (outputs the device allocated, if
// any, are left allocated).
func run1(d *Device, op tt.Op) error {
	_, err := d.Run(op)
	return err
}

// A to_memory_config into a config its tensor cannot have fails as the
// op (its name on the error) and allocates nothing: the next output lands
// where it does on a device that never ran the failed op.
func TestToMemoryConfigRefusesBadTarget(t *testing.T) {
	spec := tt.Spec{Shape: []int{1, 1, 32, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	var addrs []uint64
	for _, fail := range []bool{true, false} {
		d := newDev(t, Options{Arch: Wormhole})
		x := mustAlloc(t, d, spec)
		if fail {
			_, err := d.Run(tt.ToMemoryConfig{Input: x, Memory: tt.L1HeightSharded(1, [2]int{32, 32})}) // shard width 32, tensor 64
			var te *tt.Error
			require.ErrorAs(t, err, &te)
			require.Equal(t, "to_memory_config", te.Op)
			require.Contains(t, te.Msg, "shard width 32 != tensor width 64")
		}
		outs, err := d.Run(tt.ToMemoryConfig{Input: x, Memory: tt.L1Interleaved})
		require.NoError(t, err)
		addrs = append(addrs, outs[0].Addr)
	}
	require.Equal(t, addrs[1], addrs[0])
}
