//go:build amd64 && !purego

package ref

import (
	"github.com/offcard/offcard/bf16"
	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2 kernel. Tests flip it to compare both paths.
var useAVX2 = cpu.X86.HasAVX2

// HasFastPath reports whether dotRow uses an assembly kernel.
var HasFastPath = useAVX2

// dotLanesAVX2 accumulates the first n (a multiple of 16, > 0) products
// a[j]·x[j] into acc[j%16], j increasing: lanes 0-7 in one YMM register and
// 8-15 in another, a multiply then a separate add (no FMA), so each lane
// sees exactly the float32 operations of the pure-Go loop.
//
//go:noescape
func dotLanesAVX2(a *bf16.BF16, x *float32, n int, acc *[Lanes]float32)

// dotRow is the matvec inner product used by the decoder's hot loop: dotF
// (and so Dot) bit for bit, with the 16-aligned prefix in AVX2.
func dotRow(a []bf16.BF16, xf []float32) float32 {
	n := len(a)
	xf = xf[:n]
	n16 := n &^ (Lanes - 1)
	if !useAVX2 || n16 == 0 {
		return dotF(a, xf)
	}
	var acc [Lanes]float32
	dotLanesAVX2(&a[0], &xf[0], n16, &acc)
	for j, l := n16, 0; j < n; j, l = j+1, l+1 {
		acc[l] += float32(a[j].Float32() * xf[j])
	}
	return reduceLanes(&acc)
}

//go:noescape
func dotLanesX4AVX2(a *bf16.BF16, x *[4]*float32, n int, acc *[4][Lanes]float32)

// dotRowX4 computes out[i] = dotRow(a, xs[i]) for i < 4, bit for bit,
// reading the row once.
func dotRowX4(a []bf16.BF16, xs [][]float32, out *[4]float32) {
	n := len(a)
	n16 := n &^ (Lanes - 1)
	xs = xs[:4]
	if !useAVX2 || n16 == 0 {
		for i := range out {
			out[i] = dotF(a, xs[i])
		}
		return
	}
	var ptrs [4]*float32
	for i := range ptrs {
		ptrs[i] = &xs[i][:n][0]
	}
	var acc [4][Lanes]float32
	dotLanesX4AVX2(&a[0], &ptrs, n16, &acc)
	for i := range out {
		x := xs[i][:n]
		ac := &acc[i]
		for j, l := n16, 0; j < n; j, l = j+1, l+1 {
			ac[l] += float32(a[j].Float32() * x[j])
		}
		out[i] = reduceLanes(ac)
	}
}
