package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// DotWidened equals Dot bit for bit on every length (with and without the
// AVX2 path), denormals and signed zeros included; NaNs compare as a class.
func TestDotWidenedEqualsDot(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for n := 0; n < 300; n++ {
		for trial := range 20 {
			a, b := make([]bf16.BF16, n), make([]bf16.BF16, n)
			for i := range a {
				switch trial % 4 {
				case 0: // any pattern, NaN and Inf included
					a[i], b[i] = bf16.BF16(r.Uint32()), bf16.BF16(r.Uint32())
				case 1: // denormals and signed zeros
					a[i], b[i] = bf16.BF16(r.Uint32()&0x807F), bf16.BF16(r.Uint32()&0x807F)
				default:
					a[i], b[i] = bf16.FromFloat32(float32(r.NormFloat64())), bf16.FromFloat32(float32(r.NormFloat64()))
				}
			}
			x := make([]float32, n)
			bf16.ToFloat32s(x, b)
			want := Dot(a, b)
			got := DotWidened(a, x)
			if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
				t.Fatalf("n=%d trial %d: DotWidened %#x, Dot %#x (fast path %v)", n, trial, math.Float32bits(got), math.Float32bits(want), HasFastPath)
			}
		}
	}
}
