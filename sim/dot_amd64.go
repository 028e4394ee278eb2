//go:build amd64 && !purego

package sim

import (
	"github.com/offcard/offcard/ref"
	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2 lane kernel for linear's dot products. Tests flip
// it to compare both paths.
var useAVX2 = cpu.X86.HasAVX2

//go:noescape
func dotLanesAVX2(a, b *float32, n int, acc *[ref.Lanes]float32)

// dotFast is dotWide bit for bit: the 16-aligned prefix in AVX2 (one
// multiply and one add per element and lane, as the scalar loop), the tail
// and the lane tree in Go.
func dotFast(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	n16 := n &^ (ref.Lanes - 1)
	if !useAVX2 || n16 == 0 {
		return dotWide(a, b)
	}
	var acc [ref.Lanes]float32
	dotLanesAVX2(&a[0], &b[0], n16, &acc)
	for j, l := n16, 0; j < n; j, l = j+1, l+1 {
		acc[l] += float32(a[j] * b[j])
	}
	return reduceLanes(&acc)
}
