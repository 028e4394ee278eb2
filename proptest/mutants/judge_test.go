package mutants_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/offcard/offcard/proptest/mutants"
)

// Every judge mutant applies, names a killer and folds into the schema
// (one build serves the whole judge catalog).
func TestJudgeAnchorsApply(t *testing.T) {
	root, err := mutants.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range mutants.JudgeCatalog {
		if seen[m.Name] || m.Name == "" || m.Idea == "" || m.Killer == "" {
			t.Errorf("judge mutant %q: needs a unique name, an idea and a killer", m.Name)
		}
		seen[m.Name] = true
		files, err := m.Apply(root)
		if err != nil {
			t.Error(err)
			continue
		}
		for rel, src := range files {
			if _, err := parser.ParseFile(token.NewFileSet(), rel, src, parser.SkipObjectResolution); err != nil {
				t.Errorf("judge mutant %s: %s does not parse after the edit: %v", m.Name, rel, err)
			}
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("catalog of %d judge-side mutants", len(mutants.JudgeCatalog)); !strings.Contains(strings.Join(strings.Fields(string(readme)), " "), want) {
		t.Errorf("the README does not say %q", want)
	}
	s, err := mutants.BuildSchema(root, mutants.JudgeCatalog)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range s.Rest {
		t.Errorf("judge mutant %s does not fold into the schema: %s", m.Name, s.Why[m.Name])
	}
}

// The panel binary: proptest's test binary built once over the judge
// catalog's schema.
var panelBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func panelBinary(t *testing.T, root string) string {
	t.Helper()
	panelBin.once.Do(func() {
		s, err := mutants.BuildSchema(root, mutants.JudgeCatalog)
		if err != nil {
			panelBin.err = err
			return
		}
		if panelBin.dir, err = os.MkdirTemp("", "offcard-panel-"); err != nil {
			panelBin.err = err
			return
		}
		ov, err := s.Overlay(root, panelBin.dir)
		if err != nil {
			panelBin.err = err
			return
		}
		panelBin.path = filepath.Join(panelBin.dir, "panel.test")
		cmd := exec.Command(goTool(), "test", "-c", "-vet=off", "-overlay", ov, "-o", panelBin.path, "./proptest")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			panelBin.err = &buildError{err: err, out: string(out)}
		}
	})
	if panelBin.err != nil {
		t.Fatal(panelBin.err)
	}
	return panelBin.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "build the panel binary: " + e.err.Error() + "\n" + e.out }

// runPanel runs the panel's subtests matching run with mutant m ("" for
// none) and returns whether they passed and the names of the failing ones.
func runPanel(t *testing.T, root, m, run string) (bool, []string, string) {
	t.Helper()
	cmd := exec.Command(panelBinary(t, root), "-test.count=1", "-test.run", run, "-test.v")
	cmd.Dir = filepath.Join(root, "proptest")
	cmd.Env = append(os.Environ(), mutants.SwitchEnv+"="+m)
	out, err := cmd.CombinedOutput()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run the panel with %q: %v", m, err)
	}
	var failed []string
	for _, g := range regexp.MustCompile(`--- FAIL: (TestPanel|TestServingPlantsRed|TestJudgeTokenBand|TestRegressions)/(\S+)`).FindAllStringSubmatch(string(out), -1) {
		if g[1] == "TestPanel" {
			failed = append(failed, g[2])
		} else {
			failed = append(failed, g[1]+"/"+g[2])
		}
	}
	return err == nil, failed, string(out)
}

// TestJudgeCatalogKilled: without a mutant every plant of the panel gets
// its verdict; each judge mutant turns its killer's verdict. Skipped with
// -short (it builds proptest's test binary over the schema).
func TestJudgeCatalogKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds proptest's test binary over the judge catalog; skipped with -short")
	}
	root, err := mutants.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if panelBin.dir != "" {
			os.RemoveAll(panelBin.dir)
		}
	})
	if ok, failed, out := runPanel(t, root, "", "^(TestPanel|TestServingPlantsRed|TestJudgeTokenBand)$"); !ok {
		t.Fatalf("the unmutated panel fails (%s):\n%s", strings.Join(failed, ", "), tail(out, 40))
	}
	for _, m := range mutants.JudgeCatalog {
		test, plant := "TestPanel", m.Killer
		if i := strings.Index(m.Killer, "/"); i >= 0 {
			test, plant = m.Killer[:i], m.Killer[i+1:]
		}
		ok, failed, out := runPanel(t, root, m.Name, "^"+test+"$/^"+regexp.QuoteMeta(plant)+"$")
		if ok || len(failed) == 0 {
			t.Errorf("judge mutant %s survives its killer %s:\n%s", m.Name, m.Killer, tail(out, 12))
			continue
		}
		t.Logf("%-30s killed by %s", m.Name, strings.Join(failed, ", "))
	}
}

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
