package ref

import (
	"fmt"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// BenchmarkMatRows is MatRows's kernel (matRowsF) at the tiny model's
// linear shapes (k inputs, n outputs), for 1 to 32 input rows, with and
// without fused multiply-adds; ns/row is per input row.
func BenchmarkMatRows(b *testing.B) {
	for _, sh := range [][2]int{{128, 256}, {128, 128}, {256, 128}, {128, 512}} {
		k, n := sh[0], sh[1]
		w := make([]bf16.BF16, n*k)
		for i := range w {
			w[i] = bf16.FromFloat32(float32(i%97-48) / 300)
		}
		for _, rows := range []int{1, 2, 3, 4, 8, 32} {
			xs := make([][]float32, rows)
			dsts := make([][]bf16.BF16, rows)
			for r := range xs {
				xs[r] = make([]float32, k)
				for i := range xs[r] {
					xs[r][i] = bf16.FromFloat32(float32((i*7+r)%31-15) / 10).Float32()
				}
				dsts[r] = make([]bf16.BF16, n)
			}
			for _, ex := range []bool{false, true} {
				b.Run(fmt.Sprintf("k%d_n%d_r%d_fma%v", k, n, rows, ex), func(b *testing.B) {
					for b.Loop() {
						matRowsF(dsts, w, xs, k, 0, n, ex)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
				})
			}
		}
	}
}
