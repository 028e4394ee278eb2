//go:build amd64 && !purego

package sim

import (
	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/ref"
	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2 lane kernel for linear's dot products.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func dotLanesBF16AVX2(a *bf16.BF16, x *float32, n int, acc *[ref.Lanes]float32)

// dotRowFast is dotRow (ref.Dot of a and the bf16 values x widens) bit for
// bit, with the 16-aligned prefix in AVX2.
func dotRowFast(a []bf16.BF16, x []float32) float32 {
	n := len(a)
	x = x[:n]
	n16 := n &^ (ref.Lanes - 1)
	if !useAVX2 || n16 == 0 {
		return dotRow(a, x)
	}
	var acc [ref.Lanes]float32
	dotLanesBF16AVX2(&a[0], &x[0], n16, &acc)
	for j, l := n16, 0; j < n; j, l = j+1, l+1 {
		acc[l] += float32(a[j].Float32() * x[j])
	}
	return reduceLanes(&acc)
}
