package mutants_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest/mutants"
)

// Every simulator perturbation is caught by the simulator's own unit
// tests: sim's tests fail with the perturbation in (a test fails; the
// build succeeds); where the perturbation names the tests that catch it
// (CaughtBy), only those run. So an engine mutant that a perturbed
// simulator would hide (offcard mutants --perturb NAME) can only hide
// behind a simulator bug that the simulator's tests flag first.
//
// The perturbations that fold (BuildSchema) share one build of sim's test
// binary and are switched on one at a time through mutants.SwitchEnv; the
// same binary with the switch unset must pass the tests that catch them,
// so a failure is the perturbation's, not the schema's. The rest are built
// one by one under their own overlay.
func TestSimPerturbationsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the simulator's tests with the perturbations; skipped with -short")
	}
	root, err := mutants.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	s, err := mutants.BuildSchema(root, mutants.Perturbations)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ov, err := s.Overlay(root, dir)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sim.test")
	build := exec.Command("go", "test", "-c", "-vet=off", "-overlay", ov, "-o", bin, "./sim")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the schema build of sim's tests: %v\n%s", err, out)
	}
	var runs []string
	for _, p := range s.Folded {
		if run := mutants.CaughtBy(p.Name); run != "" {
			runs = append(runs, run)
		}
	}
	simDir := filepath.Join(root, "sim")
	schemaRun := func(switchTo, run string) ([]byte, error) {
		args := []string{"-test.count=1"}
		if run != "" {
			args = append(args, "-test.run", run)
		}
		cmd := exec.Command(bin, args...)
		cmd.Dir = simDir
		cmd.Env = append(os.Environ(), mutants.SwitchEnv+"="+switchTo)
		return cmd.CombinedOutput()
	}
	if len(s.Folded) > 0 {
		if out, err := schemaRun("", strings.Join(runs, "|")); err != nil {
			t.Fatalf("the schema build with no perturbation switched on fails the tests that catch them: %v\n%s", err, out)
		}
	}
	check := func(t *testing.T, name string, out []byte, err error) {
		switch {
		case err == nil:
			t.Errorf("perturbation %s: the simulator's tests pass on it", name)
		case !strings.Contains(string(out), "--- FAIL"):
			t.Errorf("perturbation %s: the tests failed without a failing test (does it build?):\n%s", name, out)
		default:
			first := ""
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "--- FAIL") {
					first = l
					break
				}
			}
			t.Logf("perturbation %s caught: %s", name, first)
		}
	}
	if len(s.Folded)+len(s.Rest) != len(mutants.Perturbations) {
		t.Fatalf("the schema holds %d folded and %d other perturbations, want %d in all", len(s.Folded), len(s.Rest), len(mutants.Perturbations))
	}
	for _, p := range s.Folded {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			out, err := schemaRun(p.Name, mutants.CaughtBy(p.Name))
			check(t, p.Name, out, err)
		})
	}
	// Two at a time (go test's -parallel is GOMAXPROCS): each builds and
	// links sim's tests under its overlay.
	for _, p := range s.Rest {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
			t.Logf("built on its own: %s", s.Why[p.Name])
			ov, err := p.Overlay(root, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"test", "-count=1", "-vet=off", "-overlay", ov}
			if run := mutants.CaughtBy(p.Name); run != "" {
				args = append(args, "-run", run)
			}
			cmd := exec.Command("go", append(args, "./sim")...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			check(t, p.Name, out, err)
		})
	}
}
