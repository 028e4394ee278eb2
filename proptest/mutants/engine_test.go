package mutants

import (
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/wire"
)

// The catalog's protocol fields name what exists: SeenBy entries are the
// protocol's observations (or page_pad, follows_hints), and a scheduler
// mutant edits only the runner's block pool and its tables (offcard's
// side of the protocol).
func TestEngineFields(t *testing.T) {
	known := append(wire.Observes(wire.Version), "page_pad", "follows_hints")
	for _, m := range Catalog {
		for _, e := range m.SeenBy {
			for _, o := range strings.Split(e, "+") {
				if !slices.Contains(known, o) {
					t.Errorf("%s: SeenBy %q: %q is none of %v", m.Name, e, o, known)
				}
			}
		}
		if m.Scheduler && slices.ContainsFunc(m.Files(), func(f string) bool { return f != kvpagePool && f != kvShare && f != kvTable }) {
			t.Errorf("%s: a scheduler mutant edits %v, not the block pool and its tables", m.Name, m.Files())
		}
	}
}

func TestEngineLacks(t *testing.T) {
	m := Mutant{Name: "x", SeenBy: []string{"memory", "close"}}
	for _, tc := range []struct {
		offer []string
		want  string
	}{
		{nil, "lacks an observation: one of memory, close"},
		{[]string{"cur_pos"}, "lacks an observation: one of memory, close"},
		{[]string{"close"}, ""},
		{[]string{"memory", "cur_pos"}, ""},
	} {
		if got := EngineLacks(m, tc.offer); got != tc.want {
			t.Errorf("offer %v: %q, want %q", tc.offer, got, tc.want)
		}
	}
	both := Mutant{SeenBy: []string{"regime+follows_hints"}}
	if got := EngineLacks(both, []string{"regime"}); got != "lacks the observation follows_hints" {
		t.Errorf("regime alone: %q", got)
	}
	if got := EngineLacks(both, []string{"follows_hints", "regime"}); got != "" {
		t.Errorf("both: %q", got)
	}
	if got := EngineLacks(Mutant{}, nil); got != "" {
		t.Errorf("a mutant the outputs show: %q", got)
	}
}
