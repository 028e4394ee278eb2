package mutants_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest/mutants"
)

// Every simulator perturbation is caught by the simulator's own unit
// tests: `go test ./sim` with the perturbation's overlay fails (a test
// fails; the build succeeds); where the perturbation names the tests that
// catch it (CaughtBy), only those run. So an engine mutant that a perturbed
// simulator would hide (offcard mutants --perturb NAME) can only hide
// behind a simulator bug that the simulator's tests flag first.
func TestSimPerturbationsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the simulator's tests once per perturbation; skipped with -short")
	}
	root, err := mutants.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	// Two at a time (go test's -parallel is GOMAXPROCS): each builds and
	// links sim's tests under its overlay.
	for _, p := range mutants.Perturbations {
		t.Run(p.Name, func(t *testing.T) {
			t.Parallel()
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
			switch {
			case err == nil:
				t.Errorf("perturbation %s: the simulator's tests pass on it", p.Name)
			case !strings.Contains(string(out), "--- FAIL"):
				t.Errorf("perturbation %s: go test failed without a failing test (does it build?):\n%s", p.Name, out)
			default:
				first := ""
				for _, l := range strings.Split(string(out), "\n") {
					if strings.HasPrefix(l, "--- FAIL") {
						first = l
						break
					}
				}
				t.Logf("perturbation %s caught: %s", p.Name, first)
			}
		})
	}
}
