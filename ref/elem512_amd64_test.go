//go:build amd64 && !purego

package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// The elementwise AVX-512 kernels (elem512_amd64.s) against their pure-Go
// twins, bit for bit (every NaN result is bf16.QuietNaN on both sides, so
// outputs compare exactly), on lengths 1..300 and on awkward values.

// awkward returns a generator of bf16 patterns from every corner: NaNs
// (random payloads, both signs), ±Inf, denormals, ±0, values near the
// largest finite one (whose products and sums round up to Inf), the
// smallest normals, typical values and any pattern at all.
func awkward(rng *rand.Rand) func() bf16.BF16 {
	return func() bf16.BF16 {
		sign := bf16.BF16(rng.Uint32() & 0x8000)
		switch rng.IntN(10) {
		case 0:
			return sign | 0x7F80 | bf16.BF16(1+rng.IntN(0x7F)) // NaN
		case 1:
			return sign | 0x7F80 // Inf
		case 2:
			return sign | bf16.BF16(rng.IntN(0x80)) // denormal or zero
		case 3:
			return sign // ±0
		case 4:
			return sign | 0x7F70 | bf16.BF16(rng.IntN(16)) // near MaxValue
		case 5:
			return sign | 0x0080 | bf16.BF16(rng.IntN(0x180)) // smallest normals
		case 6, 7:
			return bf16.FromFloat32(float32(rng.NormFloat64()))
		default:
			return bf16.BF16(rng.Uint32())
		}
	}
}

// scaledGen returns typical values (normal, standard deviation std).
func scaledGen(rng *rand.Rand, std float64) func() bf16.BF16 {
	return func() bf16.BF16 { return bf16.FromFloat32(float32(rng.NormFloat64() * std)) }
}

// sprinkled returns values from base with one in k taken from awkward.
func sprinkled(rng *rand.Rand, base func() bf16.BF16, k int) func() bf16.BF16 {
	aw := awkward(rng)
	return func() bf16.BF16 {
		if rng.IntN(k) == 0 {
			return aw()
		}
		return base()
	}
}

// rowGen picks a value generator for one row: typical values at a scale
// from 1e-25 to 1e25 (products that underflow to denormals or overflow),
// typical values with awkward ones sprinkled in, or awkward values only.
func rowGen(rng *rand.Rand) func() bf16.BF16 {
	std := math.Pow(10, float64(rng.IntN(51)-25))
	if rng.IntN(2) == 0 {
		std = 1
	}
	switch rng.IntN(4) {
	case 0, 1:
		return scaledGen(rng, std)
	case 2:
		return sprinkled(rng, scaledGen(rng, std), 8)
	default:
		return awkward(rng)
	}
}

func fill(v []bf16.BF16, gen func() bf16.BF16) []bf16.BF16 {
	for i := range v {
		v[i] = gen()
	}
	return v
}

// guarded returns a slice of length n whose backing array holds guard
// sentinel values past n, for checkGuard to verify after a kernel ran.
func guarded(n int) []bf16.BF16 {
	v := make([]bf16.BF16, n+40)
	for i := range v {
		v[i] = 0x1234
	}
	return v[:n]
}

func checkGuard(t *testing.T, what string, v []bf16.BF16) {
	t.Helper()
	for i, g := range v[len(v):cap(v)] {
		if g != 0x1234 {
			t.Fatalf("%s: wrote past the end (element %d of %d = %#04x)", what, len(v)+i, len(v), uint16(g))
		}
	}
}

func firstDiff(a, b []bf16.BF16) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// tieClass classifies the low 16 bits of a float32 about to be rounded to
// bf16: 0 exact tie, -1 and +1 one below and above a tie, 2 otherwise.
func tieClass(f float32) int {
	switch math.Float32bits(f) & 0xFFFF {
	case 0x8000:
		return 0
	case 0x7FFF:
		return -1
	case 0x8001:
		return 1
	}
	return 2
}

// rmsScale is RMSNorm's s for x and eps, as rmsNormGo computes it.
func rmsScale(x []bf16.BF16, eps float32) float32 { return rmsInvScale(Dot(x, x), len(x), eps) }

// sumSquares512 is Dot(x, x) bit for bit (NaN as a class: the lanes add
// NaNs in another order than Go's scalar code, so payloads may differ), on
// every length 1..300 and on rows whose sums are inexact (many lanes,
// mixed magnitudes) or whose squares underflow (where a fused
// multiply-add would keep bits the separate multiply drops).
func TestSumSquares512EqualsDot(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(63, 64))
	for trial := range 6000 {
		n := 1 + trial%300
		gen := rowGen(rng)
		if trial%3 == 0 {
			gen = scaledGen(rng, math.Pow(2, float64(rng.IntN(20)-70))) // squares near and below the denormal range
		}
		x := fill(make([]bf16.BF16, n), gen)
		got, want := sumSquares512(&x[0], n), Dot(x, x)
		if !sameFloat(got, want) {
			t.Fatalf("trial %d n=%d: %v (%#x), Dot %v (%#x)", trial, n, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// tieEps searches an eps for which RMSNorm of a row of ±1 has an s
// (= x·s, exactly) whose low 16 bits are low and whose bf16 lsb is lsb:
// the rounding of x·s then meets that exact case (a tie, or one off a
// tie, with an even or odd lower neighbour).
func tieEps(rng *rand.Rand, low, lsb uint32) float32 {
	one := []bf16.BF16{bf16.One}
	for {
		eps := float32(rng.Float64())
		u := math.Float32bits(rmsScale(one, eps))
		if u&0xFFFF == low && (u>>16)&1 == lsb {
			return eps
		}
	}
}

func TestRMSNorm512EqualsPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(61, 62))
	var tieEpss []float32
	for _, low := range []uint32{0x7FFF, 0x8000, 0x8001} {
		for lsb := range uint32(2) {
			tieEpss = append(tieEpss, tieEps(rng, low, lsb))
		}
	}
	var ties [3]int // rounding of x·s: one below a tie, a tie, one above
	toInf, nans := 0, 0
	for trial := range 6000 {
		n := 1 + trial%300
		if trial%7 == 0 {
			n = 1 + rng.IntN(40)
		}
		x := fill(make([]bf16.BF16, n), rowGen(rng))
		w := fill(make([]bf16.BF16, n), sprinkled(rng, scaledGen(rng, 1), 6))
		eps := float32(1e-6)
		switch rng.IntN(5) {
		case 0:
			eps = math.Float32frombits(rng.Uint32() & 0x3FFFFFFF) // any non-negative, up to 2
		case 2:
			// Zero or denormal: the sum of squares of a row of tiny values
			// (products that underflow) is not swamped by eps.
			eps = math.Float32frombits(rng.Uint32() & 0xF)
		case 1:
			// Rows of ±1 whose x·s meets a tie or a neighbour of one.
			eps = tieEpss[rng.IntN(len(tieEpss))]
			for i := range x {
				x[i] = bf16.One | bf16.BF16(rng.Uint32()&0x8000)
			}
		}
		want := make([]bf16.BF16, n)
		rmsNormGo(want, x, w, eps)
		got := guarded(n)
		// Every length, below rmsNormMin too.
		rmsScale512(&got[0], &x[0], &w[0], n, rmsInvScale(sumSquares512(&x[0], n), n, eps))
		checkGuard(t, "rmsScale512", got)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("trial %d n=%d eps=%#x: dst[%d] = %#04x, pure Go %#04x (x=%#04x w=%#04x)",
				trial, n, math.Float32bits(eps), i, uint16(got[i]), uint16(want[i]), uint16(x[i]), uint16(w[i]))
		}
		// In place (dst is x).
		xx := append([]bf16.BF16(nil), x...)
		RMSNorm(xx, xx, w, eps)
		if i := firstDiff(xx, want); i >= 0 {
			t.Fatalf("trial %d n=%d in place: dst[%d] = %#04x, pure Go %#04x", trial, n, i, uint16(xx[i]), uint16(want[i]))
		}
		s := rmsScale(x, eps)
		for i := range x {
			if c := tieClass(x[i].Float32() * s); c < 2 {
				ties[c+1]++
			}
			if want[i]&0x7FFF == 0x7F80 && x[i]&0x7FFF < 0x7F80 && w[i]&0x7FFF < 0x7F80 && s < float32(math.Inf(1)) {
				toInf++
			}
			if want[i].IsNaN() {
				nans++
			}
		}
	}
	if ties[0] == 0 || ties[1] == 0 || ties[2] == 0 || toInf == 0 || nans == 0 {
		t.Fatalf("coverage: ties (below, at, above) %v, rounded up to Inf %d, NaN %d", ties, toInf, nans)
	}
	t.Logf("ties (below, at, above) %v, rounded up to Inf %d, NaN %d", ties, toInf, nans)
}

// partner returns, for a value a, a value whose sum with a is awkward to
// round: a scaled by 2^-k (k from 0 to 26, random sign and mantissa: exact
// ties, sticky bits, cancellation), exactly -a, or an awkward value.
func partner(rng *rand.Rand) func(a bf16.BF16) bf16.BF16 {
	aw := awkward(rng)
	return func(a bf16.BF16) bf16.BF16 {
		switch rng.IntN(4) {
		case 0:
			return a ^ 0x8000
		case 1:
			return aw()
		}
		e := int(a>>7&0xFF) - rng.IntN(27)
		if e < 0 {
			e = 0
		}
		return bf16.BF16(rng.Uint32()&0x807F) | bf16.BF16(e)<<7
	}
}

// elemCoverage counts the cases the elementwise tests must have met.
type elemCoverage struct{ ties, toInf, nans, denormals, negZeros int }

// note records the float32 f about to be rounded to out.
func (c *elemCoverage) note(f float32, out bf16.BF16) {
	if tieClass(f) == 0 {
		c.ties++
	}
	u := math.Float32bits(f) & 0x7FFFFFFF
	switch {
	case out&0x7FFF == 0x7F80 && u < 0x7F800000:
		c.toInf++
	case out == bf16.QuietNaN:
		c.nans++
	case out&0x7FFF != 0 && out&0x7F80 == 0:
		c.denormals++
	case out == 0x8000:
		c.negZeros++
	}
}

func (c *elemCoverage) check(t *testing.T) {
	t.Helper()
	if c.ties == 0 || c.toInf == 0 || c.nans == 0 || c.denormals == 0 || c.negZeros == 0 {
		t.Fatalf("coverage: %+v", *c)
	}
	t.Logf("coverage: %+v", *c)
}

func TestAdd512EqualsPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(65, 66))
	var cov elemCoverage
	for trial := range 6000 {
		n := 1 + trial%300
		a := fill(make([]bf16.BF16, n), rowGen(rng))
		b := make([]bf16.BF16, n)
		if trial%2 == 0 {
			fill(b, rowGen(rng))
		} else {
			p := partner(rng)
			for i := range b {
				b[i] = p(a[i])
			}
		}
		want := make([]bf16.BF16, n)
		addGo(want, a, b)
		got := guarded(n)
		add512(&got[0], &a[0], &b[0], n) // every length, below elemMin too
		checkGuard(t, "add512", got)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("trial %d n=%d: dst[%d] = %#04x, pure Go %#04x (a=%#04x b=%#04x)",
				trial, n, i, uint16(got[i]), uint16(want[i]), uint16(a[i]), uint16(b[i]))
		}
		// dst aliasing a, then b.
		aa, bb := append([]bf16.BF16(nil), a...), append([]bf16.BF16(nil), b...)
		add512(&aa[0], &aa[0], &b[0], n)
		add512(&bb[0], &a[0], &bb[0], n)
		if firstDiff(aa, want) >= 0 || firstDiff(bb, want) >= 0 {
			t.Fatalf("trial %d n=%d: in place differs", trial, n)
		}
		for i := range a {
			cov.note(a[i].Float32()+b[i].Float32(), want[i])
		}
	}
	cov.check(t)
}

func TestSiluMul512EqualsPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(67, 68))
	tab := siluTable()
	var cov elemCoverage
	for trial := range 6000 {
		n := 1 + trial%300
		gate := make([]bf16.BF16, n)
		if trial%2 == 0 {
			fill(gate, func() bf16.BF16 { return bf16.BF16(rng.Uint32()) }) // every pattern: the whole table
		} else {
			fill(gate, rowGen(rng))
		}
		up := fill(make([]bf16.BF16, n), rowGen(rng))
		want := make([]bf16.BF16, n)
		siluMulGo(want, gate, up, tab)
		got := guarded(n)
		siluMul512(&got[0], &gate[0], &up[0], n, tab)
		checkGuard(t, "siluMul512", got)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("trial %d n=%d: dst[%d] = %#04x, pure Go %#04x (gate=%#04x up=%#04x)",
				trial, n, i, uint16(got[i]), uint16(want[i]), uint16(gate[i]), uint16(up[i]))
		}
		gg, uu := append([]bf16.BF16(nil), gate...), append([]bf16.BF16(nil), up...)
		siluMul512(&gg[0], &gg[0], &up[0], n, tab)
		siluMul512(&uu[0], &gate[0], &uu[0], n, tab)
		if firstDiff(gg, want) >= 0 || firstDiff(uu, want) >= 0 {
			t.Fatalf("trial %d n=%d: in place differs", trial, n)
		}
		for i := range gate {
			cov.note(tab[gate[i]]*up[i].Float32(), want[i])
		}
	}
	cov.check(t)
}

// Rope on heads of 2..300 elements (odd ones leave their last element
// alone), with real tables (RopeTable at random positions) and with
// awkward cos/sin values.
func TestRope512EqualsPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(69, 70))
	var cov elemCoverage
	for trial := range 6000 {
		n := 2 + trial%299
		x := fill(make([]bf16.BF16, n), rowGen(rng))
		cos, sin := make([]bf16.BF16, n), make([]bf16.BF16, n)
		if trial%2 == 0 {
			RopeTable(1e6, n&^1, rng.IntN(100000), cos, sin)
			if n%2 == 1 {
				cos[n-1], sin[n-1] = 0x3C00, 0x3C00
			}
		} else {
			fill(cos, sprinkled(rng, scaledGen(rng, 1), 4))
			fill(sin, sprinkled(rng, scaledGen(rng, 1), 4))
		}
		want := guarded(n)
		ropeGo(want, x, cos, sin)
		got := guarded(n)
		rope512(&got[0], &x[0], &cos[0], &sin[0], n/2) // every length, below ropeMin too
		checkGuard(t, "rope512", got)
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("trial %d n=%d: dst[%d] = %#04x, pure Go %#04x", trial, n, i, uint16(got[i]), uint16(want[i]))
		}
		xx := append([]bf16.BF16(nil), x...)
		ropeGo(xx, xx, cos, sin)
		xa := append([]bf16.BF16(nil), x...)
		rope512(&xa[0], &xa[0], &cos[0], &sin[0], n/2)
		if i := firstDiff(xa, xx); i >= 0 {
			t.Fatalf("trial %d n=%d in place: dst[%d] = %#04x, pure Go %#04x", trial, n, i, uint16(xa[i]), uint16(xx[i]))
		}
		half := n / 2
		for i := range half {
			x0, x1 := x[i].Float32(), x[i+half].Float32()
			cov.note(r(x0*cos[i].Float32())+r(-x1*sin[i].Float32()), want[i])
			cov.note(r(x1*cos[i+half].Float32())+r(x0*sin[i+half].Float32()), want[i+half])
		}
	}
	cov.check(t)
}

// The exported kernels give the same bits with the AVX-512 paths on and
// off, at every length on both sides of the thresholds (the dispatch: the
// slicing, the thresholds, which kernel gets which argument).
func TestElemDispatchEqualsPureGo(t *testing.T) {
	need512(t)
	defer func(v bool) { useAVX512 = v }(useAVX512)
	rng := rand.New(rand.NewPCG(71, 72))
	for trial := range 1500 {
		n := 1 + trial%150
		a := fill(make([]bf16.BF16, n), sprinkled(rng, scaledGen(rng, 1), 10))
		b := fill(make([]bf16.BF16, n), sprinkled(rng, scaledGen(rng, 1), 10))
		c := fill(make([]bf16.BF16, n), sprinkled(rng, scaledGen(rng, 1), 10))
		var outs [2][4][]bf16.BF16
		for k, fast := range []bool{false, true} {
			useAVX512 = fast
			for j := range outs[k] {
				outs[k][j] = make([]bf16.BF16, n)
			}
			RMSNorm(outs[k][0], a, b, 1e-6)
			Rope(outs[k][1], a, b, c)
			Add(outs[k][2], a, b)
			SiluMul(outs[k][3], a, b)
		}
		for j, name := range []string{"RMSNorm", "Rope", "Add", "SiluMul"} {
			if i := firstDiff(outs[1][j], outs[0][j]); i >= 0 {
				t.Fatalf("%s n=%d: [%d] = %#04x with AVX-512, %#04x without", name, n, i, uint16(outs[1][j][i]), uint16(outs[0][j][i]))
			}
		}
	}
}

// BenchmarkElem compares the elementwise kernels' pure-Go twins ("go") with
// the exported kernels ("avx512": the AVX-512 path, or the pure-Go loop
// below its threshold) at the row lengths of the simulator.
func BenchmarkElem(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 4, 8, 16, 32, 64, 128, 256} {
		x := fill(make([]bf16.BF16, n), scaledGen(rng, 1))
		y := fill(make([]bf16.BF16, n), scaledGen(rng, 1))
		z := fill(make([]bf16.BF16, n), scaledGen(rng, 1))
		dst := make([]bf16.BF16, n)
		kernels := []struct {
			name     string
			pure, as func()
		}{
			{"RMSNorm", func() { rmsNormGo(dst, x, y, 1e-6) }, func() { RMSNorm(dst, x, y, 1e-6) }},
			{"Rope", func() { ropeGo(dst, x, y, z) }, func() { Rope(dst, x, y, z) }},
			{"Add", func() { addGo(dst, x, y) }, func() { Add(dst, x, y) }},
			{"SiluMul", func() { siluMulGo(dst, x, y, siluTable()) }, func() { SiluMul(dst, x, y) }},
		}
		for _, k := range kernels {
			b.Run(k.name+"/n="+itoa(n)+"/go", func(b *testing.B) {
				for b.Loop() {
					k.pure()
				}
			})
			b.Run(k.name+"/n="+itoa(n)+"/avx512", func(b *testing.B) {
				if !useAVX512 {
					b.Skip("no AVX-512")
				}
				for b.Loop() {
					k.as()
				}
			})
		}
	}
}

func itoa(n int) string { return fmt.Sprint(n) }

// round512 rounds as bf16.FromFloat32 over a sweep of every float32
// pattern (a stride, and every pattern whose low 16 bits are a rounding
// edge: 0x7FFF, 0x8000, 0x8001, with even and odd upper halves), NaN
// payloads of both signs, and every length 1..40 (the masked tail); the
// elements past n are left as they were.
func TestRound512(t *testing.T) {
	need512(t)
	var src []float32
	for u := uint64(0); u < 1<<32; u += 65521 {
		src = append(src, math.Float32frombits(uint32(u)))
		hi := uint32(u) &^ 0xFFFF
		for _, lo := range []uint32{0x7FFF, 0x8000, 0x8001, 0x17FFF, 0x18000, 0x18001} {
			src = append(src, math.Float32frombits(hi+lo))
		}
	}
	for _, u := range []uint32{0x7F7F7FFF, 0x7F7F8000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00001, 0x7FBFFFFF, 0x00000001, 0x807FFFFF, 0x80000000} {
		src = append(src, math.Float32frombits(u))
	}
	dst := make([]bf16.BF16, len(src)+1)
	dst[len(src)] = 0x1234
	round512(&dst[0], &src[0], len(src))
	for i, f := range src {
		if want := bf16.FromFloat32(f); dst[i] != want {
			t.Fatalf("%#08x: round512 %#04x, FromFloat32 %#04x", math.Float32bits(f), dst[i], want)
		}
	}
	if dst[len(src)] != 0x1234 {
		t.Fatal("round512 wrote past n")
	}
	for n := 1; n <= 40; n++ {
		d := make([]bf16.BF16, n+16)
		for i := range d {
			d[i] = 0x1234
		}
		round512(&d[0], &src[len(src)-n-7], n)
		for i := range d {
			want := bf16.BF16(0x1234)
			if i < n {
				want = bf16.FromFloat32(src[len(src)-n-7+i])
			}
			if d[i] != want {
				t.Fatalf("n %d: element %d is %#04x, want %#04x", n, i, d[i], want)
			}
		}
	}
}
