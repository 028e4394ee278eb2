//go:build amd64 && !purego

package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// The AVX2 path equals the pure-Go path bit for bit on arbitrary bit
// patterns: denormals, infinities and NaNs included (NaNs compared as a
// class; their payloads are not part of the contract).
func TestFastPathEqualsPureGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(21, 22))
	gen := []func() bf16.BF16{
		func() bf16.BF16 { return bf16.BF16(rng.Uint32()) },                      // any pattern
		func() bf16.BF16 { return bf16.BF16(rng.Uint32() & 0x807F) },             // denormals and zeros
		func() bf16.BF16 { return bf16.FromFloat32(float32(rng.NormFloat64())) }, // typical
		func() bf16.BF16 { return bf16.BF16(rng.Uint32()&0x807F | 0x0080) },      // smallest normals
	}
	for trial := range 3000 {
		n := rng.IntN(300)
		if trial%100 == 0 {
			n = 3072 + rng.IntN(20)
		}
		ga, gb := gen[rng.IntN(len(gen))], gen[rng.IntN(len(gen))]
		a := make([]bf16.BF16, n)
		x := make([]float32, n)
		for i := range a {
			a[i] = ga()
			x[i] = gb().Float32()
		}
		fast := dotRow(a, x)
		slow := dotF(a, x)
		if !sameFloat(fast, slow) {
			t.Fatalf("trial %d n=%d: AVX2 %v (%#x), pure Go %v (%#x)", trial, n, fast, math.Float32bits(fast), slow, math.Float32bits(slow))
		}
	}
}

// The decoder's results do not depend on which path runs.
func TestDecoderFastPathInvariant(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2")
	}
	defer func(v bool) { useAVX2 = v }(useAVX2)
	useAVX2 = false
	slow, toks := goldenRun(t)
	useAVX2 = true
	fast, toks2 := goldenRun(t)
	if digest(slow) != digest(fast) || len(toks) != len(toks2) {
		t.Fatal("AVX2 and pure-Go decoders differ")
	}
}

func TestFastPathX4EqualsPureGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 1000 {
		n := rng.IntN(200)
		if trial%50 == 0 {
			n = 1024 + rng.IntN(40)
		}
		a := make([]bf16.BF16, n)
		for i := range a {
			if trial%2 == 0 {
				a[i] = bf16.BF16(rng.Uint32())
			} else {
				a[i] = bf16.FromFloat32(float32(rng.NormFloat64()))
			}
		}
		xs := make([][]float32, 4)
		for i := range xs {
			xs[i] = make([]float32, n)
			for j := range xs[i] {
				xs[i][j] = bf16.BF16(rng.Uint32()).Float32()
			}
		}
		var got [4]float32
		dotRowX4(a, xs, &got)
		for i := range got {
			if want := dotF(a, xs[i]); !sameFloat(got[i], want) {
				t.Fatalf("trial %d n=%d input %d: %v want %v", trial, n, i, got[i], want)
			}
		}
	}
}
