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
	withEachPath(t, testFastPathEqualsPureGo)
}

func testFastPathEqualsPureGo(t *testing.T) {
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
			t.Fatalf("trial %d n=%d: fast path %v (%#x), pure Go %v (%#x)", trial, n, fast, math.Float32bits(fast), slow, math.Float32bits(slow))
		}
	}
}

// The decoder's results do not depend on which path runs (pure Go, AVX2,
// AVX-512 with its batch kernels and fused multiply-adds where guarded).
func TestDecoderFastPathInvariant(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2")
	}
	defer func(v2, v512 bool) { useAVX2, useAVX512 = v2, v512 }(useAVX2, useAVX512)
	has512 := useAVX512
	useAVX2, useAVX512 = false, false
	slow, toks := goldenRun(t)
	useAVX2 = true
	fast, toks2 := goldenRun(t)
	if digest(slow) != digest(fast) || len(toks) != len(toks2) {
		t.Fatal("AVX2 and pure-Go decoders differ")
	}
	if has512 {
		useAVX512 = true
		fast, toks2 = goldenRun(t)
		if digest(slow) != digest(fast) || len(toks) != len(toks2) {
			t.Fatal("AVX-512 and pure-Go decoders differ")
		}
	}
}

// withEachPath runs f once per available row-kernel path: AVX-512, then
// AVX2 alone.
func withEachPath(t *testing.T, f func(t *testing.T)) {
	defer func(v bool) { useAVX512 = v }(useAVX512)
	if useAVX512 {
		t.Run("avx512", f)
	}
	useAVX512 = false
	t.Run("avx2", f)
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

// TestPerInputN1 pins MatRows's choice of kernel, which no bit-identity
// test sees (every path gives the same bits): one input always streams
// through the single-input kernel (the batch-1 decode's fastest path: in
// its absence qwen3-0.6b on two threads fell from 33 to 26 tok/s), two or
// three only over a part that stays in cache, more only over a whole small
// matrix.
func TestPerInputN1(t *testing.T) {
	for _, c := range []struct {
		n, cols, lo, hi int
		whole           bool
		want            bool
	}{
		{1, 1024, 0, 151936, true, true}, // qwen3-0.6b's lm_head
		{1, 1024, 0, 9472, false, true},  // a chunk of it
		{1, 128, 0, 4, true, true},
		{2, 128, 0, 512, true, true},    // the tiny model's gate and up
		{3, 256, 0, 128, true, true},    // its down
		{2, 1024, 0, 128, false, true},  // 256 KiB: at the bound
		{2, 1024, 0, 132, false, false}, // past it
		{3, 1024, 256, 2304, false, false},
		{4, 128, 0, 64, false, false},     // four inputs over a part take the blocked kernels
		{8, 1024, 128, 256, false, false}, // qwen3-0.6b's q_proj at batch 8 on two threads: a chunk
		{8, 128, 0, 512, true, true},      // the tiny model's lm_head at batch 8: whole and small
		{32, 256, 0, 128, true, true},     // its down, a prefill's 32 rows
		{8, 1024, 0, 1024, true, false},   // a whole matrix past the bound
	} {
		if got := perInputN1(c.n, c.cols, c.lo, c.hi, c.whole); got != c.want {
			t.Errorf("perInputN1(%d inputs, %d cols, rows %d..%d, whole %v) = %v, want %v", c.n, c.cols, c.lo, c.hi, c.whole, got, c.want)
		}
	}
}
