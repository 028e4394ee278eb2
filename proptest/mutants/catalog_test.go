package mutants

import (
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Every anchor of the catalog occurs exactly once in the current source,
// every mutated file still parses, and names are unique and well formed.
func TestAnchorsApply(t *testing.T) {
	r := root(t)
	seen := map[string]bool{}
	for _, m := range append(Catalog[:len(Catalog):len(Catalog)], Candidates...) {
		if seen[m.Name] {
			t.Errorf("duplicate mutant name %s", m.Name)
		}
		seen[m.Name] = true
		if m.Name == "" || strings.ContainsAny(m.Name, " \t,") || m.Idea == "" || m.Expect == "" {
			t.Errorf("mutant %q: needs a one-word name, an idea and an expectation", m.Name)
		}
		// An Expect that names the killing property in parentheses names
		// the one the catalog records (TestCatalogKilled holds Prop to a run).
		for _, p := range []string{"logits", "kv-write", "kv-cache", "cur-pos", "page-table", "replay", "host-writes", "device-memory", "close", "strict", "sut-error"} {
			if m.Prop != "" && p != m.Prop && strings.Contains(m.Expect, "red ("+p+")") {
				t.Errorf("mutant %s: its expectation says red (%s), it is killed by %s", m.Name, p, m.Prop)
			}
		}
		files, err := m.Apply(r)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for rel, src := range files {
			if _, err := parser.ParseFile(token.NewFileSet(), rel, src, parser.SkipObjectResolution); err != nil {
				t.Errorf("mutant %s: %s does not parse after the edit: %v", m.Name, rel, err)
			}
		}
	}
}

func TestDesignMutantsPresent(t *testing.T) {
	for _, n := range []string{"pt-one-column", "warm-pos-global", "free-not-retire", "width-grow-only",
		"plus-one-no-skip", "stale-tail", "reseed-off-by-one", "rope-not-advanced", "refresh-never",
		"alloc-after-capture"} {
		if _, ok := ByName(n); !ok {
			t.Errorf("design mutant %s missing from the catalog", n)
		}
	}
}

func TestAnchorErrors(t *testing.T) {
	r := root(t)
	for _, tc := range []struct {
		old  string
		want int
	}{
		{"this text is not in the engine", 0},
		{"\treturn nil", -1}, // many
	} {
		m := Mutant{Name: "x", Edits: []Edit{{File: "qwen3/engine_step.go", Old: tc.old, New: "y"}}}
		_, err := m.Apply(r)
		var ae *AnchorError
		if !errors.As(err, &ae) {
			t.Fatalf("%q: want an AnchorError, got %v", tc.old, err)
		}
		if tc.want >= 0 && ae.Count != tc.want || tc.want < 0 && ae.Count < 2 {
			t.Errorf("%q: count %d", tc.old, ae.Count)
		}
		if !strings.Contains(ae.Error(), "mutant x") {
			t.Errorf("error does not name the mutant: %v", ae)
		}
	}
}

func TestOverlayFiles(t *testing.T) {
	r := root(t)
	m, _ := ByName("warm-pos-global")
	dir := t.TempDir()
	ov, err := m.Overlay(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(ov)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(r, "qwen3", "engine_step.go")
	if !strings.Contains(string(b), want) {
		t.Errorf("overlay does not replace %s:\n%s", want, b)
	}
	got, err := os.ReadFile(filepath.Join(dir, "src", "qwen3", "engine_step.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "seedEagerNoPlusOne") {
		t.Error("mutated file lacks the edit")
	}
}

func TestFindModuleRoot(t *testing.T) {
	r := root(t)
	if err := CheckModuleRoot(r); err != nil {
		t.Fatal(err)
	}
	if _, err := FindModuleRoot(t.TempDir()); !errors.Is(err, ErrNotInModule) {
		t.Errorf("outside the tree: %v", err)
	}
}
