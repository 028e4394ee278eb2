//go:build !amd64 || purego

package ref

import "github.com/offcard/offcard/bf16"

// dotRow is the matvec inner product used by the decoder's hot loop. It is
// dotF (and so Dot) bit for bit.
func dotRow(a []bf16.BF16, xf []float32) float32 { return dotF(a, xf) }

// HasFastPath reports whether dotRow uses an assembly kernel.
var HasFastPath = false

// dotRowX4 computes out[i] = dotRow(a, xs[i]) for i < 4.
func dotRowX4(a []bf16.BF16, xs [][]float32, out *[4]float32) {
	for i := range out {
		out[i] = dotF(a, xs[i])
	}
}

// matRowsFast is the assembly batch path; there is none here.
func matRowsFast(dsts [][]bf16.BF16, w []bf16.BF16, xs [][]float32, cols, lo, hi int, exact bool) bool {
	return false
}

// minMaxFast is bf16Range's assembly prefix; there is none here.
func minMaxFast(v []bf16.BF16) (lo1, hi uint16, done int) { return 0xFFFF, 0, 0 }

// attendOutFast is attendOut's assembly path; there is none here.
func attendOutFast(dst []bf16.BF16, p []float32, v []bf16.BF16, n, hd int) bool { return false }

// dotRowsFast is Attend's assembly score path; there is none here.
func dotRowsFast(out []float32, k []bf16.BF16, xf []float32, hd, n int) int { return 0 }

// rmsNormFast is RMSNorm's assembly path; there is none here.
func rmsNormFast(dst, x, weight []bf16.BF16, eps float32) bool { return false }

// addFast, siluMulFast and ropeFast are the elementwise assembly paths;
// there are none here.
func addFast(dst, a, b []bf16.BF16) bool                              { return false }
func siluMulFast(dst, gate, up []bf16.BF16, t *[1 << 16]float32) bool { return false }
func ropeFast(dst, x, cos, sin []bf16.BF16) bool                      { return false }

// scoresFast, expSumFast and normFast are Attend's softmax loops in
// assembly; there are none here.
func scoresFast(p []float32, scale float32) (float32, bool)             { return 0, false }
func expSumFast(p []float32, t int, m float32, acc *[Lanes]float32) int { return t }
func normFast(p []float32, sum float32) bool                            { return false }
