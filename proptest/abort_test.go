package proptest

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
)

// A run that cannot start for a reason that ends the campaign (an
// Aborting error: the engine failed its hello, offcard's environment
// failed) is not a finding: the case is an error, never a setup failure,
// and it is not shrunk (the factory is asked once). A campaign whose
// Abort says so starts no more cases and returns only those that ran.
func TestAbortingSetup(t *testing.T) {
	var calls atomic.Int64
	factory := func(Scenario) (SUT, error) {
		calls.Add(1)
		return nil, &SetupError{Err: errors.New("TMPDIR is gone")}
	}
	res := RunCase(3, CaseOptions{Base: Base{Device: "sim"}, Factory: factory})
	if res.Passed || res.Failure != nil || !strings.Contains(res.Error, "TMPDIR is gone") {
		t.Fatalf("passed %v, failure %v, error %q: want the setup error, no failure", res.Passed, res.Failure, res.Error)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the factory was asked %d times, want 1 (no shrinking on an aborting error)", n)
	}
	calls.Store(0)
	rs := Campaign(Options{Seed: 1, Cases: 50, Workers: 2, Base: Base{Device: "sim"}, Factory: factory,
		Abort: func() bool { return calls.Load() > 0 }})
	// Each case asks the factory at most once (the first asks what the
	// SUT serves, serve.go, and stops at its aborting error; a case
	// started beside it gets the same answer without asking).
	if len(rs) == 0 || len(rs) > 2 || calls.Load() < 1 || calls.Load() > int64(len(rs)) {
		t.Fatalf("%d results, %d factory calls for 50 cases aborted at the first: want at most the 2 running, at most one call each", len(rs), calls.Load())
	}
	for _, r := range rs {
		if r.Error == "" {
			t.Fatalf("case %d: %+v, want an error", r.Index, r)
		}
	}
	if !Aborting(&SetupError{}) || Aborting(errors.New("x")) {
		t.Fatal("Aborting")
	}
}
