package ref

import (
	"math"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// siluMulDirect is SiluMul without the table: the expression the table is
// built from, evaluated per element.
func siluMulDirect(dst, gate, up []bf16.BF16) {
	for i := range dst {
		s := r(Silu(gate[i].Float32()))
		dst[i] = bf16.FromFloat32(s * up[i].Float32())
	}
}

// TestSiluTable checks SiluMul against the direct expression for every one
// of the 65536 gate patterns (NaNs, infinities, denormals included), each
// with up values that keep the product exact, round it, overflow it,
// underflow it, or are themselves special.
func TestSiluTable(t *testing.T) {
	ups := []float32{1, -1, 0, float32(math.Copysign(0, -1)), 3.140625, -0.0078125, 1e38, 1e-38,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.SmallestNonzeroFloat32 * 8}
	gate := make([]bf16.BF16, 1<<16)
	for g := range gate {
		gate[g] = bf16.BF16(g)
	}
	up := make([]bf16.BF16, len(gate))
	got, want := make([]bf16.BF16, len(gate)), make([]bf16.BF16, len(gate))
	for _, u := range ups {
		for i := range up {
			up[i] = bf16.FromFloat32(u)
		}
		SiluMul(got, gate, up)
		siluMulDirect(want, gate, up)
		for g := range got {
			if got[g] != want[g] {
				t.Fatalf("gate %#04x, up %v: SiluMul %#04x, direct %#04x", g, u, uint16(got[g]), uint16(want[g]))
			}
		}
	}
	// The gate patterns against varied up patterns too (up = bit-reversed
	// gate covers every up pattern once).
	for i := range up {
		up[i] = bf16.BF16(reverse16(uint16(i)))
	}
	SiluMul(got, gate, up)
	siluMulDirect(want, gate, up)
	for g := range got {
		if got[g] != want[g] {
			t.Fatalf("gate %#04x, up %#04x: SiluMul %#04x, direct %#04x", g, uint16(up[g]), uint16(got[g]), uint16(want[g]))
		}
	}
}

func reverse16(x uint16) uint16 {
	var y uint16
	for i := 0; i < 16; i++ {
		y = y<<1 | x&1
		x >>= 1
	}
	return y
}
