package qwen3

import (
	"slices"
	"testing"
)

// ropeTables shares its tables across engines: whatever was asked before,
// every answer equals a fresh build for its own theta, d and n, and has no
// room to append into the shared table.
func TestRopeTablesMemoFresh(t *testing.T) {
	calls := []struct {
		theta float64
		d, n  int
	}{
		{1e6, 64, 64}, {1e6, 64, 256}, {1e6, 64, 32}, // widen, then a prefix
		{1e4, 64, 128}, {1e6, 64, 256}, // another theta, same d
		{1e6, 128, 64}, {1e6, 64, 1}, // another d, same theta
		{1e6, 64, 0},
	}
	for _, c := range calls {
		cos, sin := ropeTables(c.theta, c.d, c.n)
		wc, ws := buildRopeTables(c.theta, c.d, c.n)
		if !slices.Equal(cos, wc) || !slices.Equal(sin, ws) {
			t.Fatalf("theta %g d %d n %d: memoized tables differ from a fresh build", c.theta, c.d, c.n)
		}
		if cap(cos) != len(cos) || cap(sin) != len(sin) {
			t.Fatalf("theta %g d %d n %d: cap %d/%d beyond len %d", c.theta, c.d, c.n, cap(cos), cap(sin), len(cos))
		}
	}
}
