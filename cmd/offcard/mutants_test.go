package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest/mutants"
)

func TestMutantsUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mutants", "--only", "nope"}, `no mutant "nope"`},
		{[]string{"mutants", "--cases", "-1"}, "--cases"},
		{[]string{"mutants", "stray"}, "unexpected argument"},
		{[]string{"mutants", "--repo", os.TempDir()}, "not inside the offcard source tree"},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != exitBad || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

// Outside the source tree (no --repo) the command says so and exits 2.
func TestMutantsOutsideTree(t *testing.T) {
	old := mutantsWorkDir
	defer func() { mutantsWorkDir = old }()
	dir := t.TempDir()
	mutantsWorkDir = func() (string, error) { return dir, nil }
	code, _, errs := runCLI(t, "mutants", "--only", "pt-one-column")
	if code != exitBad || !strings.Contains(errs, "--repo DIR") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// A mutant whose anchor no longer matches is an error naming the mutant
// (exit 2), reported before anything is built.
func TestMutantsStaleAnchor(t *testing.T) {
	old := mutants.Catalog
	defer func() { mutants.Catalog = old }()
	mutants.Catalog = append(append([]mutants.Mutant(nil), old...), mutants.Mutant{
		Name: "moved-away", Idea: "i", Expect: "e",
		Edits: []mutants.Edit{{File: "qwen3/engine_step.go", Old: "text the engine does not hold", New: "x"}},
	})
	code, out, errs := runCLI(t, "mutants")
	if code != exitBad || !strings.Contains(errs, "mutant moved-away") || !strings.Contains(errs, "occurs 0 times") || out != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestMutantsListAndOverlay(t *testing.T) {
	code, out, errs := runCLI(t, "mutants", "--list", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var ms []mutants.Mutant
	if err := json.Unmarshal([]byte(out), &ms); err != nil || len(ms) != len(mutants.Catalog) {
		t.Fatalf("list: %v, %d mutants", err, len(ms))
	}
	dir := t.TempDir()
	code, out, errs = runCLI(t, "mutants", "--only", "rope-not-advanced", "--overlay", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := filepath.Join(dir, "rope-not-advanced", "overlay.json")
	if out != "rope-not-advanced\t"+want+"\n" {
		t.Errorf("overlay output %q", out)
	}
	if _, err := os.Stat(want); err != nil {
		t.Error(err)
	}
}
