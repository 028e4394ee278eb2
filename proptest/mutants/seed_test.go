package mutants_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	dir := t.TempDir()
	sp := filepath.Join(dir, "seed.script")
	if err := os.WriteFile(sp, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"test", "-count=1", "-run", "^TestProbe$", "-v"}
	if m != "" {
		mu, ok := mutants.ByName(m)
		if !ok {
			t.Fatalf("no mutant %s", m)
		}
		ov, err := mu.Overlay(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		args = append(args, "-overlay", ov)
	}
	cmd := exec.Command(goTool(), append(args, "./proptest/mutants")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), probeEnv+"="+sp)
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
// The real engine is green on the same script. Each probe builds
// the test binary once (~10-20 s on 2 cores).
func TestSeedMutantsRedSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the engine with mutants (go test -overlay); skipped with -short")
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
		t.Skip("builds the engine with a mutant (go test -overlay); skipped with -short")
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
	if f.Seq != 0 || f.Pos != 64 || f.DeviceStep != 64 {
		t.Errorf("red at seq %d pos %d device step %d, want seq 0 pos 64 (step 64)", f.Seq, f.Pos, f.DeviceStep)
	}
	if !slices.Contains([]string{proptest.PropStrict, proptest.PropKVWrite, proptest.PropPageTable, proptest.PropLogits}, f.Property) {
		t.Errorf("property %s fired first", f.Property)
	}
}
