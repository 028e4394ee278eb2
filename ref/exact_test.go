package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// The guard is sound: for every pair of exponent fields (and random signs
// and mantissas), when exactProducts admits two values, their float32
// product is the exact product.
func TestExactProductsGuard(t *testing.T) {
	rng := rand.New(rand.NewPCG(57, 58))
	admitted := 0
	for ea := 0; ea < 256; ea++ {
		for ex := 0; ex < 256; ex++ {
			for range 3 {
				a := bf16.BF16(uint16(rng.Uint32())&0x807F | uint16(ea)<<7)
				x := bf16.BF16(uint16(rng.Uint32())&0x807F | uint16(ex)<<7)
				ok := exactProducts(bf16Range([]bf16.BF16{a}), f32Range([]float32{x.Float32()}))
				if !ok {
					continue
				}
				admitted++
				p := a.Float32() * x.Float32()
				exact := float64(a.Float32()) * float64(x.Float32())
				if float64(p) != exact {
					t.Fatalf("guard admits %#04x·%#04x (exponents %d+%d) but float32 gives %g, exact %g", uint16(a), uint16(x), ea, ex, p, exact)
				}
			}
		}
	}
	if admitted < 100000 {
		t.Fatalf("guard admitted only %d pairs", admitted)
	}
	// Not widened bf16, denormals, Inf and NaN are refused.
	one := bf16Range([]bf16.BF16{bf16.One})
	for _, f := range []float32{1 + 1.0/(1<<20), math.Float32frombits(1), float32(math.Inf(1)), float32(math.NaN())} {
		if exactProducts(one, f32Range([]float32{1, f})) {
			t.Errorf("guard admits input %g (%#x)", f, math.Float32bits(f))
		}
	}
	for _, b := range []bf16.BF16{0x0001, bf16.PosInf, bf16.QuietNaN} {
		if exactProducts(bf16Range([]bf16.BF16{bf16.One, b}), f32Range([]float32{1})) {
			t.Errorf("guard admits weight %#04x", uint16(b))
		}
	}
	// All-zero weights give exact (zero) products against any finite input.
	if !exactProducts(bf16Range([]bf16.BF16{0, 0x8000}), f32Range([]float32{3, bf16.MaxValue.Float32()})) {
		t.Error("guard refuses zero weights")
	}
}

// bf16RangeRef is bf16Range written plainly.
func bf16RangeRef(v []bf16.BF16) expRange {
	r := emptyRange
	for _, b := range v {
		m := uint16(b) & 0x7FFF
		if m == 0 {
			continue
		}
		e := int(m >> 7)
		r.lo, r.hi = min(r.lo, e), max(r.hi, e)
		if e == 0 || e == 0xFF {
			r.bad = true
		}
	}
	return r
}

// bf16Range (with its assembly prefix where there is one) equals the
// plain loop on vectors of every kind: empty, all zero, signed zeros,
// denormals, Inf and NaN, typical values, at lengths around multiples of 32.
func TestBF16RangeEqualsPlainLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(59, 60))
	gens := []func() bf16.BF16{
		func() bf16.BF16 { return bf16.BF16(rng.Uint32()) },
		func() bf16.BF16 { return bf16.BF16(rng.Uint32() & 0x8000) },
		func() bf16.BF16 { return bf16.BF16(rng.Uint32() & 0x807F) },
		func() bf16.BF16 { return bf16.FromFloat32(float32(rng.NormFloat64() * 0.02)) },
		func() bf16.BF16 { return bf16.BF16(uint16(rng.Uint32())&0x807F | uint16(100+rng.IntN(40))<<7) },
	}
	for trial := range 2000 {
		n := rng.IntN(200)
		if trial%100 == 0 {
			n = 4096 + rng.IntN(64)
		}
		g := gens[trial%len(gens)]
		v := make([]bf16.BF16, n)
		for i := range v {
			v[i] = g()
			if trial%7 == 0 && rng.IntN(8) != 0 {
				v[i] &= 0x8000 // mostly zeros
			}
		}
		if got, want := bf16Range(v), bf16RangeRef(v); got != want {
			t.Fatalf("trial %d n=%d (seed 59,60): bf16Range %+v, plain loop %+v", trial, n, got, want)
		}
	}
}
