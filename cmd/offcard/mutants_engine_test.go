package main

import (
	"strings"
	"testing"
)

// With offcard-engine offering less (OFFCARD_ENGINE_OFFER), mutants
// --engine names each mutant it cannot show with the observation it
// lacks, and runs the others.
func TestMutantsEngineLacks(t *testing.T) {
	t.Setenv("OFFCARD_ENGINE_OFFER", "memory,cur_pos")
	code, out, errs := runCLI(t, "mutants", "--engine", "--list", "--only", "close-keeps-trace,leak-pt-on-width-change,recapture-one-late,rope-not-advanced")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"skip close-keeps-trace: lacks the observation close (OFFCARD_ENGINE_OFFER=memory,cur_pos)",
		"skip recapture-one-late: lacks the observation regime+follows_hints",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	for _, name := range []string{"leak-pt-on-width-change", "rope-not-advanced"} {
		if strings.Contains(out, "skip "+name) || !strings.Contains(out, name) {
			t.Errorf("%s should be listed, not skipped:\n%s", name, out)
		}
	}
}
