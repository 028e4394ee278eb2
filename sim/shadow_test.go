package sim

import (
	"math/rand/v2"
	"testing"
)

// The strict shadow (mark, unwritten) agrees with a byte-per-byte model
// over random writes and queries, chunk borders, word borders and whole
// stripes included.
func TestShadowMatchesByteModel(t *testing.T) {
	const size = 3 * chunkSize
	m := newMem(size, true)
	written := make([]bool, size)
	r := rand.New(rand.NewPCG(3, 4))
	span := func() (uint64, uint64) {
		n := uint64(1 + r.IntN([]int{3, 70, 300, 5000}[r.IntN(4)]))
		a := uint64(r.IntN(size - int(n)))
		switch r.IntN(4) {
		case 0:
			a = uint64(chunkSize) - n/2 // across a chunk border
		case 1: // whole stripes, as op outputs write them
			n = uint64(1+r.IntN(12)) * stripeSize
			a = uint64(r.IntN((size-int(n))/stripeSize)) * stripeSize
		}
		return a, n
	}
	for it := 0; it < 3000; it++ {
		if it%3 == 0 {
			a, n := span()
			m.write(a, make([]byte, n))
			for i := a; i < a+n; i++ {
				written[i] = true
			}
		}
		a, n := span()
		want, wantBad := uint64(0), false
		for i := a; i < a+n; i++ {
			if !written[i] {
				want, wantBad = i, true
				break
			}
		}
		if got, bad := m.unwritten(a, n); bad != wantBad || got != want {
			t.Fatalf("iteration %d: unwritten(%d, %d) = %d, %v; want %d, %v", it, a, n, got, bad, want, wantBad)
		}
		if it%300 == 299 { // every byte: nothing marked that was not written
			for i := range written {
				if _, bad := m.unwritten(uint64(i), 1); bad == written[i] {
					t.Fatalf("iteration %d: byte %d written %v, shadow says %v", it, i, written[i], !bad)
				}
			}
		}
	}
}
