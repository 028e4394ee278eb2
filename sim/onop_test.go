package sim

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/offcard/offcard/tt"
)

// OnOpBrief passes OnOp the same events without Args and Touched (same
// sequence numbers, ops and regimes); with LogOps the events stay whole.
func TestOnOpBrief(t *testing.T) {
	run := func(brief, logOps bool) []OpEvent {
		var evs []OpEvent
		d := cDev(t, Options{OnOp: func(e OpEvent) { evs = append(evs, e) }, OnOpBrief: brief, LogOps: logOps})
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
	full, brief := run(false, false), run(true, false)
	if len(full) != 6 || len(brief) != len(full) {
		t.Fatalf("%d events, brief %d", len(full), len(brief))
	}
	for i, e := range full {
		if len(e.Touched) == 0 {
			t.Fatalf("full event %+v lacks its touches", e)
		}
		e.Args, e.Touched = "", nil
		if !reflect.DeepEqual(brief[i], e) {
			t.Fatalf("brief event %+v, want %+v", brief[i], e)
		}
	}
	if logged := run(true, true); !reflect.DeepEqual(logged, full) {
		t.Fatalf("with LogOps the events are not whole: %+v", logged)
	}
}
