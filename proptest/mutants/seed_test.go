package mutants_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/proptest/mutants"
)

// The probe: when OFFCARD_MUTANT_PROBE names a script file, TestProbe
// replays it on the engine on sim (whatever engine this test binary was
// built with: the outer test builds it with a mutant's overlay) and prints
// the first failure as one line "PROBE {json}" ("PROBE null": all green).
const probeEnv = "OFFCARD_MUTANT_PROBE"

// probeBin is this package's test binary built over the schema of the
// whole catalog (the build TestCatalogKilled makes, so its packages come
// from the build cache); OFFCARD_MUTANT picks each probe's mutant.
var probeBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func probeBinary(t *testing.T, root string) string {
	t.Helper()
	probeBin.once.Do(func() {
		s, err := mutants.BuildSchema(root, mutants.Catalog)
		if err != nil {
			probeBin.err = err
			return
		}
		for _, m := range []string{"pt-one-column", "warm-pos-global"} {
			if !slices.ContainsFunc(s.Folded, func(f mutants.Mutant) bool { return f.Name == m }) {
				probeBin.err = fmt.Errorf("the probes need %s in the schema build: %s", m, s.Why[m])
				return
			}
		}
		if probeBin.dir, err = os.MkdirTemp("", "offcard-probe-"); err != nil {
			probeBin.err = err
			return
		}
		ov, err := s.Overlay(root, probeBin.dir)
		if err != nil {
			probeBin.err = err
			return
		}
		probeBin.path = filepath.Join(probeBin.dir, "probe.test")
		cmd := exec.Command(goTool(), "test", "-c", "-vet=off", "-overlay", ov, "-o", probeBin.path, "./proptest/mutants")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			probeBin.err = fmt.Errorf("build the probe binary: %v\n%s", err, out)
		}
	})
	if probeBin.err != nil {
		t.Fatal(probeBin.err)
	}
	return probeBin.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if probeBin.dir != "" {
		os.RemoveAll(probeBin.dir)
	}
	os.Exit(code)
}

func TestProbe(t *testing.T) {
	path := os.Getenv(probeEnv)
	if path == "" {
		t.Skip(probeEnv + " not set (the probe runs inside TestSeedMutantsRedSteps)")
	}
	if spec, ok := strings.CutPrefix(path, "campaign:"); ok {
		// campaign:SEED:CASES — the first failing case of a campaign.
		seed, cases, _ := strings.Cut(spec, ":")
		sd, err1 := strconv.ParseUint(seed, 10, 64)
		n, err2 := strconv.Atoi(cases)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad probe %q", path)
		}
		t0 := time.Now()
		rs := proptest.Campaign(proptest.Options{Seed: sd, Cases: n, Factory: proptest.SimFactory})
		for _, r := range rs {
			if !r.Passed {
				b, _ := json.Marshal(r)
				t.Logf("PROBE %s", b)
				t.Logf("took %v", time.Since(t0))
				return
			}
		}
		t.Logf("PROBE null")
		t.Logf("took %v", time.Since(t0))
		return
	}
	s, err := proptest.ReadScriptFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := proptest.RunScript(s, proptest.SimFactory)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PROBE %s", b)
}

// seedScript is the seed's gate (seed-fix-1498) as a script: one sequence
// through two 32-token block boundaries, captured, re-capturing every 8
// steps, dynamic width (so a boundary means a new page table, a released
// trace, a cold eager step and a re-capture), strict sanitizer on.
const seedScript = `# the seed's gate: captured, recapture every 8, one sequence through two block boundaries
model tiny seed=1
device sim arch=wormhole strict
engine block=32 blocks=8 width=dynamic capacity=1 mode=captured recapture=8
admit seq=0 prompt=5
decode steps=60
`

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if r := os.Getenv("GOROOT"); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return "go"
}

// probe replays script on the engine with mutant m applied ("" for none)
// and returns the first failure (nil: green).
func probe(t *testing.T, m string, script string) *proptest.Failure {
	t.Helper()
	root, err := mutants.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if m != "" {
		if _, ok := mutants.ByName(m); !ok {
			t.Fatalf("no mutant %s", m)
		}
	}
	bin := probeBinary(t, root)
	dir := t.TempDir()
	sp := filepath.Join(dir, "seed.script")
	if err := os.WriteFile(sp, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.count=1", "-test.run", "^TestProbe$", "-test.v")
	cmd.Dir = filepath.Join(root, "proptest", "mutants")
	cmd.Env = append(os.Environ(), probeEnv+"="+sp, mutants.SwitchEnv+"="+m)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe of %q: %v\n%s", m, err, out)
	}
	i := strings.Index(string(out), "PROBE ")
	if i < 0 {
		t.Fatalf("probe of %q printed no PROBE line:\n%s", m, out)
	}
	line := string(out[i+len("PROBE "):])
	line = line[:strings.IndexByte(line+"\n", '\n')]
	var f *proptest.Failure
	if err := json.Unmarshal([]byte(line), &f); err != nil {
		t.Fatalf("probe line %q: %v", line, err)
	}
	return f
}

// The seed's two bugs go red at the step that causes them: the [C,1]
// page table at the first step past the first block boundary (position 32),
// the global warm-position skip at the boundary's cold eager step
// (position 32, regime cold), whose cur_pos advance it skipped; the
// property suite reads cur_pos after every step, so it fires one step
// before the seed's gate saw wrong logits (position 33, the re-capture).
// The real engine is green on the same script. The probes run this
// package's test binary, built once over the catalog's schema.
func TestSeedMutantsRedSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the catalog's schema; skipped with -short")
	}
	if f := probe(t, "", seedScript); f != nil {
		t.Fatalf("the real engine fails the seed script: %s", f)
	}
	for _, tc := range []struct {
		mutant string
		pos    int
		regime string
		props  []string // the property that fires first, one of
	}{
		// the KV-update reader walks the stick past the one-column row
		{"pt-one-column", 32, "", []string{proptest.PropStrict, proptest.PropKVWrite, proptest.PropLogits}},
		// the cold step of the boundary's re-capture did not advance
		// cur_pos (the seed's gate saw the logits go wrong one step later,
		// at the re-capture, position 33)
		{"warm-pos-global", 32, "cold", []string{proptest.PropCurPos}},
	} {
		t.Run(tc.mutant, func(t *testing.T) {
			f := probe(t, tc.mutant, seedScript)
			if f == nil {
				t.Fatalf("%s survives the seed script", tc.mutant)
			}
			t.Logf("%s: %s", tc.mutant, f)
			// One sequence whose prompt starts at position 0: device step
			// = position.
			if f.Seq != 0 || f.Pos != tc.pos || f.DeviceStep != tc.pos {
				t.Errorf("%s: first red at seq %d pos %d device step %d, want seq 0 pos %d (step %d)",
					tc.mutant, f.Seq, f.Pos, f.DeviceStep, tc.pos, tc.pos)
			}
			if !slices.Contains(tc.props, f.Property) {
				t.Errorf("%s: property %s fired first, want one of %v", tc.mutant, f.Property, tc.props)
			}
			if tc.regime != "" && f.Regime != tc.regime {
				t.Errorf("%s: red in regime %q, want %q", tc.mutant, f.Regime, tc.regime)
			}
			if tc.pos%32 == 0 && f.Pos%32 != 0 {
				t.Errorf("%s: red at pos %d, not the first position of a block", tc.mutant, f.Pos)
			}
		})
	}
}

// Every catalog mutant is killed by offcard check (OFFCARD_MUTANT_CASES
// cases at most, default 200, --fail-fast), and all but the few that do
// not fold run in the one schema build; skipped with -short.
func TestCatalogKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds offcard once per mutant; skipped with -short")
	}
	root, err := mutants.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	cases, _ := strconv.Atoi(os.Getenv("OFFCARD_MUTANT_CASES"))
	rs, err := mutants.Run(context.Background(), mutants.Config{Root: root, Cases: cases})
	if err != nil {
		t.Fatal(err)
	}
	s, err := mutants.BuildSchema(root, mutants.Catalog)
	if err != nil {
		t.Fatal(err)
	}
	schema := 0
	for _, r := range rs {
		t.Logf("%-28s %s", r.Name, r.Summary())
		if r.Status != mutants.Killed {
			t.Errorf("mutant %s %s", r.Name, r.Summary())
		}
		if m, _ := mutants.ByName(r.Name); r.Status == mutants.Killed && r.Property != m.Prop {
			t.Errorf("mutant %s is killed by %s, its catalog entry says %s (Prop)", r.Name, r.Property, m.Prop)
		}
		if r.Schema {
			schema++
		}
	}
	if schema != len(s.Folded) {
		t.Errorf("%d mutants ran in the schema build, want the %d that fold", schema, len(s.Folded))
	}
}

// The saved shrunk reproduction of pt-one-column replays red on the mutant,
// at the first position past its 64-token block (TestRegressions replays
// it green on the real engine).
func TestSavedPTOneColumnScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the catalog's schema; skipped with -short")
	}
	root, err := mutants.FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "proptest", "testdata", "regressions", "pt-one-column-seed1.script")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := proptest.ReadScriptFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Commands); n > 10 {
		t.Errorf("the saved reproduction has %d commands, want at most 10", n)
	}
	f := probe(t, "pt-one-column", string(b))
	if f == nil {
		t.Fatal("pt-one-column survives its saved reproduction")
	}
	t.Logf("pt-one-column: %s", f)
	if f.Property != proptest.PropStrict || f.Seq != 0 || f.Pos != 64 || f.DeviceStep != 64 { // as the script's header says
		t.Errorf("red at seq %d pos %d device step %d, want seq 0 pos 64 (step 64)", f.Seq, f.Pos, f.DeviceStep)
	}
	if !slices.Contains([]string{proptest.PropStrict, proptest.PropKVWrite, proptest.PropPageTable, proptest.PropLogits}, f.Property) {
		t.Errorf("property %s fired first", f.Property)
	}
}
