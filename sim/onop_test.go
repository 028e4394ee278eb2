package sim

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/offcard/offcard/tt"
)

// OnOpFilter passes OnOp the events of the ops it accepts, exactly as
// without a filter (same sequence numbers, arguments and touches), and no
// others.
func TestOnOpFilter(t *testing.T) {
	run := func(filter func(string) bool) []OpEvent {
		var evs []OpEvent
		d := cDev(t, Options{OnOp: func(e OpEvent) { evs = append(evs, e) }, OnOpFilter: filter})
		r := rand.New(rand.NewPCG(1, 2))
		s := cSpec(tt.BF16, tt.Tile, 1, 1, 4, 64)
		a, b := cUpload(t, d, s, cRand(r, 4*64, false)), cUpload(t, d, s, cRand(r, 4*64, false))
		w := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 64, 64), cRand(r, 64*64, false))
		out := cAlloc(t, d, s)
		for i := 0; i < 3; i++ {
			cRun(t, d, tt.Add{A: a, B: b, Output: out})
			cRun(t, d, tt.Linear{Input: out, Weight: w, Output: a, TransposeB: true})
		}
		return evs
	}
	all := run(nil)
	lin := run(func(op string) bool { return op == "linear" })
	var want []OpEvent
	for _, e := range all {
		if e.Op == "linear" {
			want = append(want, e)
		}
	}
	if len(all) != 6 || len(want) != 3 || !reflect.DeepEqual(lin, want) {
		t.Fatalf("filtered events %+v, want %+v (of %d)", lin, want, len(all))
	}
}
