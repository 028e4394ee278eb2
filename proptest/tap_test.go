package proptest

import (
	"slices"
	"testing"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
	"github.com/offcard/offcard/tt"
)

// The tap takes the current page table from every paged op, passed as a
// value or as a pointer (qwen3.Engine passes pointers to the ops it
// reuses), and from no other op.
func TestPageTableOf(t *testing.T) {
	pt := tt.Tensor{ID: 7}
	ops := []tt.Op{
		tt.PagedUpdateCache{PageTable: &pt},
		tt.PagedFusedUpdateCache{PageTable: &pt},
		tt.PagedSDPADecode{PageTable: pt},
		tt.PagedFillCache{PageTable: pt},
	}
	for _, op := range ops {
		for _, form := range []tt.Op{op, tt.Ptr(op)} {
			if id, ok := pageTableOf(form); !ok || id != pt.ID {
				t.Errorf("%T: page table %v %v, want %v", form, id, ok, pt.ID)
			}
		}
	}
	for _, op := range []tt.Op{tt.PagedUpdateCache{}, &tt.PagedUpdateCache{}, tt.Linear{}, &tt.Linear{}} {
		if id, ok := pageTableOf(op); ok {
			t.Errorf("%T: page table %v from an op without one", op, id)
		}
	}
}

// The runner's reused memory report (memoryInto) equals a fresh Memory
// at every call: no tensor of an earlier report stays in Later or InTrace.
func TestMemoryIntoIsMemory(t *testing.T) {
	dev, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tap := NewTap(dev)
	spec := tt.Spec{Shape: []int{1, 1, 32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	alloc := func() tt.Tensor {
		x, err := tap.Allocate(spec)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	alloc() // persistent
	tap.MarkBaseline()
	var m TapMemory
	check := func(what string) {
		t.Helper()
		tap.memoryInto(&m)
		want := tap.Memory()
		if m.Persistent != want.Persistent || m.Traces != want.Traces || len(m.InTrace) != len(want.InTrace) ||
			!slices.EqualFunc(m.Later, want.Later, func(x, y tt.Tensor) bool { return x.ID == y.ID }) {
			t.Fatalf("%s: reused report %+v, fresh %+v", what, m, want)
		}
		for id := range want.InTrace {
			if !m.InTrace[id] {
				t.Fatalf("%s: t%d missing from the reused InTrace", what, id)
			}
		}
	}
	a, b := alloc(), alloc()
	tap.traces[1] = map[tt.TensorID]bool{a.ID: true, b.ID: true} // as a capture would record them
	check("two tensors in a trace")
	delete(tap.traces, 1) // the trace released
	check("the trace released")
	if err := tap.Free(a); err != nil {
		t.Fatal(err)
	}
	check("one freed")
	c := alloc()
	tap.traces[2] = map[tt.TensorID]bool{c.ID: true}
	check("a new one in a new trace")
}

// The cadence after a refused capture: the refused step is eager, so is
// every later one, and a capture tried again (refused again) is a
// finding, since the refused bytes stay counted and no capture can fit.
func TestRegimeModelRefusal(t *testing.T) {
	sc := Scenario{Mode: qwen3.ModeCaptured}
	m := newRegimeModel()
	var act [MaxCapacity]bool
	act[0] = true
	eager := TapEvents{EagerOps: 9}
	refused := TapEvents{EagerOps: 9, Refused: 1}
	for i, st := range []struct {
		ev       TapEvents
		want     string
		mismatch bool
	}{
		{eager, "eager", false},   // cold: compiles the width
		{refused, "eager", false}, // the capture the cadence wants, refused
		{eager, "eager", false},   // eager from then on
		{refused, "eager", true},  // tried again
	} {
		obs, want, why := m.decode(&sc, 1, act, st.ev)
		if want != st.want || (obs != want) != st.mismatch {
			t.Fatalf("step %d: observed %q, want %q (%s); want a mismatch: %v", i, obs, want, why, st.mismatch)
		}
	}
}
