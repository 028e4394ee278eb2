//go:build amd64 && !purego

package ref

import (
	"fmt"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// BenchmarkRowKernels compares the row-kernel paths on one goroutine at the
// 0.6b lm_head shape (151936×1024, 311 MB): AVX2 (rows of four inputs) and
// AVX-512 (blocks of rows, groups of 8/4/1 inputs; at batch 1 the range
// kernel rowsN1x512, or with "blocks" the four-row kernel it replaced),
// with and without fused multiply-adds, at batch 1 and 8.
func BenchmarkRowKernels(b *testing.B) {
	w := weights06(b)
	cols := w.Config.HiddenSize
	rows := len(w.LMHead) / cols
	for _, batch := range []int{1, 8} {
		xs := make([][]float32, batch)
		dsts := make([][]bf16.BF16, batch)
		for i := range xs {
			xs[i] = make([]float32, cols)
			for j := range xs[i] {
				xs[i][j] = w.Norm[(j+i)%cols].Float32()
			}
			dsts[i] = make([]bf16.BF16, rows)
		}
		paths := []string{"avx2", "avx512", "avx512fma"}
		if batch == 1 {
			paths = append(paths, "avx512blocks", "avx512blocksfma")
		}
		for _, path := range paths {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, path), func(b *testing.B) {
				defer func(v, n1 bool) { useAVX512, useN1 = v, n1 }(useAVX512, useN1)
				if path != "avx2" && !useAVX512 {
					b.Skip("no AVX-512")
				}
				useAVX512 = path != "avx2"
				useN1 = !strings.HasPrefix(path, "avx512blocks")
				fma := strings.HasSuffix(path, "fma")
				for b.Loop() {
					matRowsF(dsts, w.LMHead, xs, cols, 0, rows, fma)
				}
				b.ReportMetric(float64(rows*cols*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
