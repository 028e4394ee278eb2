//go:build amd64 && !purego

package ref

import (
	"math"
	"math/rand/v2"
	"testing"
)

// expSumCheck runs expSum512 over ds (m = +0, so p - m = d exactly) and
// wants float32(math.Exp(float64(d))) for every d it took, bit for bit,
// and the lanes Attend's loop would sum; it returns how many it took.
func expSumCheck(t *testing.T, ds []float32) int {
	t.Helper()
	p := append([]float32(nil), ds...)
	var acc, want [Lanes]float32
	done := expSum512(&p[0], 0, len(p), 0, &acc)
	for i := 0; i < done; i++ {
		e := float32(math.Exp(float64(ds[i] - 0)))
		if math.Float32bits(p[i]) != math.Float32bits(e) {
			t.Fatalf("d = %g (%#08x): exp %#08x, math.Exp %#08x", ds[i], math.Float32bits(ds[i]), math.Float32bits(p[i]), math.Float32bits(e))
		}
		want[i%Lanes] += e
	}
	if acc != want {
		t.Fatalf("lane sums %v, want %v", acc, want)
	}
	return done
}

// TestExpSum512: the vector exponential equals math.Exp (through float64,
// rounded to float32) on every difference Attend can form: a sweep of the
// float32 patterns from -0 to -110 (and on to -Inf, which give +0), every
// pattern near the edges (the float32 denormal range of the result near
// -87 and -104, the -110 cut, the smallest differences), random ones; a
// group of 16 holding a NaN or a positive difference is left to the
// caller, as are fewer than 16 left.
func TestExpSum512(t *testing.T) {
	need512(t)
	var ds []float32
	const lo, cut = 0x80000000, 0xC2DC0000 // -0, -110
	for u := uint32(lo); u <= cut; u += 4099 {
		ds = append(ds, math.Float32frombits(u))
	}
	for u := uint64(cut); u <= 0xFF800000; u += 65537 {
		ds = append(ds, math.Float32frombits(uint32(u)))
	}
	for _, edge := range []float32{-87.33655, -103.27893, -103.97208, -104.5, -110, -0x1p-126, -1e-30, -0.5, -1} {
		u := math.Float32bits(edge)
		for d := -2000; d <= 2000; d++ {
			if v := math.Float32frombits(uint32(int64(u) + int64(d))); v <= 0 {
				ds = append(ds, v)
			}
		}
	}
	for d := uint32(0); d < 4000; d++ {
		ds = append(ds, math.Float32frombits(lo|d))
	}
	ds = append(ds, float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0)
	r := rand.New(rand.NewPCG(5, 6))
	for range 200000 {
		ds = append(ds, -r.Float32()*120)
	}
	ds = ds[:len(ds)&^(Lanes-1)]
	if done := expSumCheck(t, ds); done != len(ds) {
		t.Fatalf("took %d of %d differences, all <= 0", done, len(ds))
	}
	// Stops: at the group with a NaN or a positive difference, and before
	// a tail of fewer than 16.
	for _, bad := range []float32{float32(math.NaN()), 0x1p-149, 1} {
		g := make([]float32, 4*Lanes+5)
		for i := range g {
			g[i] = -float32(i) / 8
		}
		g[2*Lanes+7] = bad
		if done := expSumCheck(t, g); done != 2*Lanes {
			t.Fatalf("with %g in the third group: took %d, want %d", bad, done, 2*Lanes)
		}
		g[2*Lanes+7] = -1
		if done := expSumCheck(t, g); done != 4*Lanes {
			t.Fatalf("took %d, want %d (the tail of 5 left)", done, 4*Lanes)
		}
	}
}
