package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/offcard/offcard/bf16"
)

// laneDot is the canonical order written as plainly as possible, on
// widened values: the specification Dot must equal.
func laneDot(a, b []float32) float32 {
	var acc [16]float32
	for j := range a {
		acc[j%16] += float32(a[j] * b[j])
	}
	for h := 8; h >= 1; h /= 2 {
		for l := 0; l < h; l++ {
			acc[l] += acc[l+h]
		}
	}
	return acc[0]
}

func widen(x []bf16.BF16) []float32 {
	out := make([]float32, len(x))
	bf16.ToFloat32s(out, x)
	return out
}

func randVec(rng *rand.Rand, n int, std float64) []bf16.BF16 {
	v := make([]bf16.BF16, n)
	for i := range v {
		v[i] = bf16.FromFloat32(float32(rng.NormFloat64() * std))
	}
	return v
}

// specials is a pool of awkward bf16 values: zeros, denormals, extremes,
// infinities and NaN.
var specials = []bf16.BF16{0, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, bf16.MaxValue,
	bf16.MaxValue | 0x8000, bf16.PosInf, bf16.NegInf, bf16.QuietNaN, 0xFFC1, bf16.One}

func sameFloat(a, b float32) bool {
	if a != a && b != b {
		return true // NaN payloads are not part of the contract
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func TestDotCanonicalOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lens := []int{0, 1, 7, 15, 16, 17, 31, 32, 33, 100, 128, 1024, 3072, 3077}
	for _, n := range lens {
		for trial := range 20 {
			a, b := randVec(rng, n, 1), randVec(rng, n, 1)
			if trial >= 10 { // sprinkle special values
				for i := range a {
					if rng.IntN(4) == 0 {
						a[i] = specials[rng.IntN(len(specials))]
					}
					if rng.IntN(4) == 0 {
						b[i] = specials[rng.IntN(len(specials))]
					}
				}
			}
			want := laneDot(widen(a), widen(b))
			if got := Dot(a, b); !sameFloat(got, want) {
				t.Fatalf("n=%d trial %d: Dot=%v (%#x), lane loop=%v (%#x)", n, trial, got, math.Float32bits(got), want, math.Float32bits(want))
			}
			if got := dotF(a, widen(b)); !sameFloat(got, want) {
				t.Fatalf("n=%d trial %d: dotF=%v, lane loop=%v", n, trial, got, want)
			}
			if got := dotRow(a, widen(b)); !sameFloat(got, want) {
				t.Fatalf("n=%d trial %d: dotRow=%v, lane loop=%v", n, trial, got, want)
			}
		}
	}
}

// The lane order is observable: a sequential float32 sum gives a
// different answer on a vector built to cancel catastrophically.
func TestDotOrderIsNotSequential(t *testing.T) {
	n := 32
	a := make([]bf16.BF16, n)
	b := make([]bf16.BF16, n)
	for i := range a {
		b[i] = bf16.One
		a[i] = bf16.FromFloat32(1)
	}
	a[0] = bf16.FromFloat32(1 << 24) // lane 0 swallows lane-0 ones only
	var seq float32
	for i := range a {
		seq += a[i].Float32() * b[i].Float32()
	}
	got := Dot(a, b)
	if got == seq {
		t.Fatalf("Dot equals the sequential sum %v; expected the lane order to differ", seq)
	}
	if want := laneDot(widen(a), widen(b)); got != want {
		t.Fatalf("Dot=%v, lane loop=%v", got, want)
	}
}

func TestDotCloseToFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{16, 1000, 3072} {
		a, b := randVec(rng, n, 1), randVec(rng, n, 1)
		var exact, mag float64
		for i := range a {
			p := float64(a[i].Float32()) * float64(b[i].Float32())
			exact += p
			mag += math.Abs(p)
		}
		got := float64(Dot(a, b))
		if math.Abs(got-exact) > 1e-6*mag {
			t.Errorf("n=%d: Dot=%v, float64 %v (Σ|p|=%v)", n, got, exact, mag)
		}
	}
}

func TestMatVecRowsEqualDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, sh := range []struct{ rows, cols int }{{1, 1}, {3, 17}, {64, 128}, {37, 1024}} {
		w := randVec(rng, sh.rows*sh.cols, 0.02)
		x := randVec(rng, sh.cols, 1)
		dst := make([]bf16.BF16, sh.rows)
		MatVec(dst, w, x)
		d2 := make([]bf16.BF16, sh.rows)
		matRowsF([][]bf16.BF16{d2}, w, [][]float32{widen(x)}, sh.cols, 0, sh.rows, false)
		for o := range dst {
			want := bf16.FromFloat32(laneDot(widen(w[o*sh.cols:(o+1)*sh.cols]), widen(x)))
			if dst[o] != want || d2[o] != want {
				t.Fatalf("%dx%d row %d: MatVec %#x, matRowsF %#x, want %#x", sh.rows, sh.cols, o, dst[o], d2[o], want)
			}
		}
	}
}

// MatRows is MatVec bit for bit for every input of a batch, at the batch
// sizes and widths of the simulator's linears and at awkward ones, with
// specials (NaN, infinities, denormals, zeros of both signs) in weights
// and inputs.
func TestMatRowsEqualsMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// 1030x128 is over n1SmallBytes: two or more inputs take the blocks of four
	// rows (the smaller whole matrices take each input in turn from four on).
	for _, sh := range []struct{ rows, cols int }{{256, 128}, {128, 256}, {512, 128}, {1030, 128}, {37, 48}, {9, 17}, {5, 1}} {
		for batch := 1; batch <= 10; batch++ {
			w := randVec(rng, sh.rows*sh.cols, 0.05)
			xs := make([][]bf16.BF16, batch)
			xf := make([][]float32, batch)
			dsts := make([][]bf16.BF16, batch)
			for b := range xs {
				xs[b] = randVec(rng, sh.cols, 1)
				if b%3 == 1 {
					for range 3 {
						xs[b][rng.IntN(sh.cols)] = specials[rng.IntN(len(specials))]
						w[rng.IntN(len(w))] = specials[rng.IntN(len(specials))]
					}
				}
				xf[b] = widen(xs[b])
				dsts[b] = make([]bf16.BF16, sh.rows)
			}
			MatRows(dsts, w, xf, sh.cols)
			want := make([]bf16.BF16, sh.rows)
			for b := range xs {
				MatVec(want, w, xs[b])
				for o := range want {
					if dsts[b][o] != want[o] {
						t.Fatalf("%dx%d batch %d input %d row %d: MatRows %#04x, MatVec %#04x", sh.rows, sh.cols, batch, b, o, dsts[b][o], want[o])
					}
				}
			}
		}
	}
}

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const eps = float32(1e-6)
	oneRoundingDiffers := false
	for _, n := range []int{32, 128, 1024} {
		for range 10 {
			x := randVec(rng, n, 1)
			w := make([]bf16.BF16, n)
			for i := range w {
				w[i] = bf16.FromFloat32(float32(1 + 0.05*rng.NormFloat64()))
			}
			got := make([]bf16.BF16, n)
			RMSNorm(got, x, w, eps)
			// The literal two-rounding formula.
			s := float32(1 / math.Sqrt(float64(laneDot(widen(x), widen(x))/float32(n)+eps)))
			// float64 reference, for closeness.
			var ss float64
			for _, v := range x {
				ss += float64(v.Float32()) * float64(v.Float32())
			}
			s64 := 1 / math.Sqrt(ss/float64(n)+1e-6)
			for i := range x {
				y := bf16.Round(x[i].Float32() * s)
				want := bf16.FromFloat32(w[i].Float32() * y)
				if got[i] != want {
					t.Fatalf("n=%d i=%d: got %#x want %#x", n, i, got[i], want)
				}
				if bf16.FromFloat32(w[i].Float32()*x[i].Float32()*s) != want {
					oneRoundingDiffers = true
				}
				f := bf16.FromFloat32(float32(float64(w[i].Float32()) * float64(x[i].Float32()) * s64))
				if bf16.Steps(f, got[i]) > 1 {
					t.Fatalf("n=%d i=%d: got %v, float64 %v", n, i, got[i].Float32(), f.Float32())
				}
			}
			// in place
			RMSNorm(x, x, w, eps)
			for i := range x {
				if x[i] != got[i] {
					t.Fatalf("in-place RMSNorm differs at %d", i)
				}
			}
		}
	}
	if !oneRoundingDiffers {
		t.Error("no input distinguished two roundings from one; the test cannot see a fused rounding")
	}
}

func TestRopeTable(t *testing.T) {
	for _, tc := range []struct {
		theta float64
		hd    int
		pos   int
	}{{1e6, 128, 0}, {1e6, 128, 1}, {1e6, 128, 31}, {1e6, 128, 4097}, {1e4, 32, 77}, {1e6, 32, 40000}} {
		cos := make([]bf16.BF16, tc.hd)
		sin := make([]bf16.BF16, tc.hd)
		RopeTable(tc.theta, tc.hd, tc.pos, cos, sin)
		half := tc.hd / 2
		for i := 0; i < half; i++ {
			if cos[i] != cos[i+half] || sin[i] != sin[i+half] {
				t.Fatalf("%+v: table not duplicated at %d", tc, i)
			}
			// Literal HF formula in float32.
			inv := 1 / float32(math.Pow(tc.theta, float64(float32(2*i)/float32(tc.hd))))
			f := float32(tc.pos) * inv
			if c := bf16.FromFloat32(float32(math.Cos(float64(f)))); c != cos[i] {
				t.Fatalf("%+v: cos[%d]=%#x want %#x", tc, i, cos[i], c)
			}
			// And close to the exact float64 angle when the angle is small
			// enough for float32 to hold it well.
			ang := float64(tc.pos) / math.Pow(tc.theta, float64(2*i)/float64(tc.hd))
			if ang < 100 {
				if bf16.Steps(bf16.FromFloat32(float32(math.Sin(ang))), sin[i]) > 2 && math.Abs(math.Sin(ang)) > 1e-2 {
					t.Fatalf("%+v: sin[%d]=%v, float64 %v", tc, i, sin[i].Float32(), math.Sin(ang))
				}
			}
		}
		if tc.pos == 0 {
			for i := range cos {
				if cos[i] != bf16.One || sin[i] != 0 {
					t.Fatalf("pos 0: cos/sin[%d] = %v/%v", i, cos[i].Float32(), sin[i].Float32())
				}
			}
		}
	}
}

func TestRopeRotateHalfLayout(t *testing.T) {
	const hd = 32
	half := hd / 2
	cos := make([]bf16.BF16, hd)
	sin := make([]bf16.BF16, hd)
	RopeTable(1e4, hd, 5, cos, sin)
	out := make([]bf16.BF16, hd)
	for i := 0; i < hd; i++ {
		x := make([]bf16.BF16, hd)
		x[i] = bf16.One
		Rope(out, x, cos, sin)
		for j := range out {
			var want bf16.BF16
			switch {
			case i < half && j == i:
				want = cos[i]
			case i < half && j == i+half:
				want = sin[i] // rot[i+half] = x[i]
			case i >= half && j == i:
				want = cos[i]
			case i >= half && j == i-half:
				want = sin[j] ^ 0x8000 // rot[j] = -x[j+half]
			}
			if out[j] != want && !(out[j]&0x7FFF == 0 && want&0x7FFF == 0) {
				t.Fatalf("unit %d: out[%d]=%v want %v", i, j, out[j].Float32(), want.Float32())
			}
		}
	}
	// Position 0 is the identity; three roundings otherwise.
	rng := rand.New(rand.NewPCG(9, 10))
	x := randVec(rng, hd, 1)
	RopeTable(1e6, hd, 0, cos, sin)
	Rope(out, x, cos, sin)
	for i := range x {
		if out[i] != x[i] {
			t.Fatalf("pos 0 rope changed x[%d]", i)
		}
	}
	RopeTable(1e6, hd, 123, cos, sin)
	Rope(out, x, cos, sin)
	for i := 0; i < half; i++ {
		want := bf16.FromFloat32(bf16.Round(x[i].Float32()*cos[i].Float32()) + bf16.Round(-x[i+half].Float32()*sin[i].Float32()))
		if out[i] != want {
			t.Fatalf("rope[%d]=%#x want %#x", i, out[i], want)
		}
	}
	Rope(x, x, cos, sin) // in place
	for i := range x {
		if x[i] != out[i] {
			t.Fatalf("in-place rope differs at %d", i)
		}
	}
}

func TestElementwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	n := 1000
	a, b := randVec(rng, n, 3), randVec(rng, n, 3)
	sum := make([]bf16.BF16, n)
	sm := make([]bf16.BF16, n)
	Add(sum, a, b)
	SiluMul(sm, a, b)
	for i := range a {
		x, y := float64(a[i].Float32()), float64(b[i].Float32())
		if want := bf16.FromFloat32(float32(x + y)); sum[i] != want {
			t.Fatalf("Add[%d]=%v want %v", i, sum[i].Float32(), want.Float32())
		}
		s := bf16.FromFloat32(float32(x / (1 + math.Exp(-x))))
		if bf16.Steps(s, bf16.FromFloat32(Silu(float32(x)))) > 1 {
			t.Fatalf("Silu(%v)=%v, float64 %v", x, Silu(float32(x)), s.Float32())
		}
		want := bf16.FromFloat32(bf16.Round(Silu(float32(x))) * float32(y))
		if sm[i] != want {
			t.Fatalf("SiluMul[%d]=%#x want %#x", i, sm[i], want)
		}
	}
	if Silu(0) != 0 || Silu(-200) != 0 || Silu(200) != 200 {
		t.Errorf("Silu edge values: %v %v %v", Silu(0), Silu(-200), Silu(200))
	}
}

// naiveAttend follows the Attend contract step by step on widened values.
func naiveAttend(q, k, v []bf16.BF16, n int, scale float32) []bf16.BF16 {
	hd := len(q)
	s := make([]float32, n)
	m := float32(math.Inf(-1))
	for t := range n {
		s[t] = bf16.Round(bf16.Round(laneDot(widen(q), widen(k[t*hd:(t+1)*hd]))) * scale)
		m = max(m, s[t])
	}
	e := make([]float32, n)
	ones := make([]float32, n)
	for t := range n {
		e[t] = float32(math.Exp(float64(s[t] - m)))
		ones[t] = 1
	}
	sum := laneDot(e, ones)
	p := make([]float32, n)
	for t := range n {
		p[t] = bf16.Round(e[t] / sum)
	}
	out := make([]bf16.BF16, hd)
	col := make([]float32, n)
	for d := range hd {
		for t := range n {
			col[t] = v[t*hd+d].Float32()
		}
		out[d] = bf16.FromFloat32(laneDot(p, col))
	}
	return out
}

func TestAttend(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, hd := range []int{32, 128, 12, 640} { // 640: past Attend's stack buffer for q
		scale := AttnScale(hd)
		for _, n := range []int{1, 2, 15, 16, 17, 33, 100, 300} {
			q := randVec(rng, hd, 1)
			k := randVec(rng, n*hd, 1)
			v := randVec(rng, n*hd, 1)
			dst := make([]bf16.BF16, hd)
			scratch := make([]float32, n)
			Attend(dst, q, k, v, n, scale, scratch)
			want := naiveAttend(q, k, v, n, scale)
			for d := range dst {
				if dst[d] != want[d] {
					t.Fatalf("hd=%d n=%d d=%d: %#x want %#x", hd, n, d, dst[d], want[d])
				}
			}
			var ps float64
			for _, p := range scratch[:n] {
				ps += float64(p)
			}
			if math.Abs(ps-1) > 0.004*math.Sqrt(float64(n))+0.004 {
				t.Fatalf("hd=%d n=%d: probabilities sum to %v", hd, n, ps)
			}
			if n == 1 {
				for d := range dst {
					if dst[d] != v[d] {
						t.Fatalf("n=1: attention must return v, got %v want %v", dst[d].Float32(), v[d].Float32())
					}
				}
			}
		}
	}
	if AttnScale(128) != float32(0.08838834764831845) {
		t.Errorf("AttnScale(128)=%v", AttnScale(128))
	}
}

func TestEmbedding(t *testing.T) {
	table := make([]bf16.BF16, 4*3)
	for i := range table {
		table[i] = bf16.BF16(i)
	}
	dst := make([]bf16.BF16, 3)
	Embedding(dst, table, 2)
	if dst[0] != 6 || dst[1] != 7 || dst[2] != 8 {
		t.Fatalf("Embedding row 2 = %v", dst)
	}
}

func TestKernelsDoNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x, y := randVec(rng, 128, 1), randVec(rng, 128, 1)
	w := randVec(rng, 64*128, 1)
	dst := make([]bf16.BF16, 128)
	k, v := randVec(rng, 50*32, 1), randVec(rng, 50*32, 1)
	scratch := make([]float32, 50)
	cos, sin := make([]bf16.BF16, 32), make([]bf16.BF16, 32)
	n := testing.AllocsPerRun(10, func() {
		Dot(x, y)
		MatVec(dst[:64], w, x)
		RMSNorm(dst, x, y, 1e-6)
		RopeTable(1e6, 32, 7, cos, sin)
		Rope(dst[:32], x[:32], cos, sin)
		Add(dst, x, y)
		SiluMul(dst, x, y)
		Attend(dst[:32], x[:32], k, v, 50, AttnScale(32), scratch)
	})
	if n != 0 {
		t.Fatalf("kernels allocate %v times per run", n)
	}
}

// TestKVStoreHoldsWrittenBlocks: the store holds memory for the blocks
// below the highest written one only (grown at least twofold), keeps what
// was written when it grows, and reads the blocks past it as zero.
func TestKVStoreHoldsWrittenBlocks(t *testing.T) {
	const layers, nb, bs, kvh, hd = 2, 256, 4, 2, 3
	s, err := NewKVStore(layers, nb, bs, kvh, hd)
	require.NoError(t, err)
	require.Equal(t, 0, s.Blocks())
	require.Equal(t, nb*kvh*bs*hd, s.LayerSize())
	row := func(seed int) []bf16.BF16 {
		r := make([]bf16.BF16, kvh*hd)
		for i := range r {
			r[i] = bf16.BF16(seed*16 + i + 1)
		}
		return r
	}
	// Blocks 0, 1, 5, 2 then 40: held 1, 2, 6, 6, 41.
	table := []int32{0, 1, 5, 2, 40}
	for i, want := range []int{1, 2, 6, 6, 41} {
		for l := range layers {
			require.NoError(t, s.Write(l, table, i*bs, row(10*i+l), row(10*i+l+5)))
		}
		require.Equal(t, want, s.Blocks(), "after writing block %d", table[i])
		k, v := s.Layer(1)
		require.Len(t, k, want*kvh*bs*hd)
		require.Len(t, v, want*kvh*bs*hd)
	}
	// Every write survived the growth, at its block; position 1 of each
	// block (never written) and block 3 (never named) read as zero.
	kd, vd := make([]bf16.BF16, 5*bs*hd), make([]bf16.BF16, 5*bs*hd)
	for l := range layers {
		for h := range kvh {
			for i := range kd {
				kd[i], vd[i] = 0x7FC1, 0x7FC1 // not zero: the gather must write every value
			}
			require.NoError(t, s.Gather(l, h, table, 5*bs, kd, vd))
			for i := range 5 {
				for p := range bs {
					for d := range hd {
						wk, wv := bf16.BF16(0), bf16.BF16(0)
						if p == 0 {
							wk, wv = row(10*i + l)[h*hd+d], row(10*i + l + 5)[h*hd+d]
						}
						at := (i*bs+p)*hd + d
						require.Equal(t, wk, kd[at], "layer %d head %d block %d row %d dim %d", l, h, table[i], p, d)
						require.Equal(t, wv, vd[at], "layer %d head %d block %d row %d dim %d", l, h, table[i], p, d)
					}
				}
			}
		}
	}
	// A gather through blocks no write reached reads zeros: one below the
	// held ones, the first past them (41) and one far past.
	for i := range kd {
		kd[i], vd[i] = 1, 1
	}
	require.NoError(t, s.Gather(0, 1, []int32{3, 41, 200}, 3*bs, kd, vd))
	for i := range 3 * bs * hd {
		require.Zero(t, kd[i])
		require.Zero(t, vd[i])
	}
}

func TestKVStore(t *testing.T) {
	const layers, nb, bs, kvh, hd = 2, 8, 4, 2, 3
	s, err := NewKVStore(layers, nb, bs, kvh, hd)
	if err != nil {
		t.Fatal(err)
	}
	table := []int32{5, 2, 7}
	for pos := range 10 {
		k := make([]bf16.BF16, kvh*hd)
		v := make([]bf16.BF16, kvh*hd)
		for i := range k {
			k[i] = bf16.BF16(1000*pos + i)
			v[i] = bf16.BF16(20000 + 1000*pos + i)
		}
		if err := s.Write(1, table, pos, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// Layout check: position 5 lives in block table[1]=2, row 1.
	kl, _ := s.Layer(1)
	off := ((2*kvh+1)*bs + 1) * hd
	if kl[off] != bf16.BF16(5000+hd) {
		t.Fatalf("layout: got %v at block 2 head 1 row 1, want %v", kl[off], 5000+hd)
	}
	kd := make([]bf16.BF16, 10*hd)
	vd := make([]bf16.BF16, 10*hd)
	if err := s.Gather(1, 1, table, 10, kd, vd); err != nil {
		t.Fatal(err)
	}
	for pos := range 10 {
		for d := range hd {
			if kd[pos*hd+d] != bf16.BF16(1000*pos+hd+d) || vd[pos*hd+d] != bf16.BF16(20000+1000*pos+hd+d) {
				t.Fatalf("gather pos %d d %d: %v %v", pos, d, kd[pos*hd+d], vd[pos*hd+d])
			}
		}
	}
	// Layer 0 untouched.
	k0, v0 := s.Layer(0)
	for i := range k0 {
		if k0[i] != 0 || v0[i] != 0 {
			t.Fatal("layer 0 was written")
		}
	}
	good := make([]bf16.BF16, kvh*hd)
	errCases := []struct {
		name string
		err  error
	}{
		{"block id too big", s.Write(0, []int32{8}, 0, good, good)},
		{"block id negative", s.Write(0, []int32{-1}, 0, good, good)},
		{"table too short", s.Write(0, []int32{1}, 4, good, good)},
		{"negative pos", s.Write(0, []int32{1}, -1, good, good)},
		{"bad layer", s.Write(2, []int32{1}, 0, good, good)},
		{"short k", s.Write(0, []int32{1}, 0, good[:1], good)},
		{"gather short table", s.Gather(0, 0, []int32{1}, 5, kd, vd)},
		{"gather bad block", s.Gather(0, 0, []int32{1, 99}, 5, kd, vd)},
		{"gather bad head", s.Gather(0, 2, []int32{1}, 1, kd, vd)},
		{"gather short dst", s.Gather(0, 0, []int32{1, 2, 3}, 10, kd[:3], vd)},
	}
	for _, c := range errCases {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	if _, err := NewKVStore(1, 0, 1, 1, 1); err == nil {
		t.Error("NewKVStore with 0 blocks: no error")
	}
}
