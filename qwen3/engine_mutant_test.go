package qwen3_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
)

// The seed schedules: what the seed's gate ran (one sequence through block
// boundaries, captured, re-capturing every 8 steps, dynamic width so a
// boundary means a new page table, a cold eager step and a re-capture),
// and the same with a second sequence admitted mid-run. Both must equal
// ref on the real engine; the mutant runner below replays them with the
// seed's bugs put back into a copy of the engine.
func seedSchedule(t *testing.T, strict bool, plan []seqPlan) {
	h := newHarness(t, sim.Options{Strict: strict}, qwen3.EngineOptions{
		Capacity: len(plan), BlockSize: 32, NumBlocks: 64, Width: kvpage.Dynamic(),
		Mode: qwen3.ModeCaptured, RecaptureEvery: 8})
	h.findingsEachStep = strict
	h.run(plan)
	h.noFindings()
}

var (
	seedSingle = []seqPlan{{admit: 0, prompt: 5, gen: 60}}
	seedAdmit  = []seqPlan{{admit: 0, prompt: 5, gen: 60}, {admit: 12, prompt: 3, gen: 30}}
)

func TestEngineSeedScheduleSingle(t *testing.T)       { seedSchedule(t, false, seedSingle) }
func TestEngineSeedScheduleSingleStrict(t *testing.T) { seedSchedule(t, true, seedSingle) }
func TestEngineSeedScheduleAdmit(t *testing.T)        { seedSchedule(t, false, seedAdmit) }
func TestEngineSeedScheduleAdmitStrict(t *testing.T)  { seedSchedule(t, true, seedAdmit) }

// edit is one textual replacement in engine_step.go; old must occur once.
type edit struct{ old, new string }

// seedMutants re-create the seed's two bugs (seed-fix-1498) in a copy of
// the engine, applied with go test -overlay (no switch in the engine).
var seedMutants = []struct {
	name  string
	edits []edit
}{
	// Bug 1: the page table is [C,1] and never refreshed after it was
	// first written.
	{"pt-one-column", []edit{
		{"w, err := kvpage.Width(e.opt.Width, longest)", "w, err := 1, error(nil)"},
		{"kvpage.PadRow(row, r.blocks, PagePad)", "kvpage.PadRow(row, r.blocks[:min(len(r.blocks), len(row))], PagePad)"},
		{"if e.ptHost == nil || !slices.Equal(table, e.ptHost) {", "if e.ptHost == nil {"},
	}},
	// Bug 2, as the brief states it: non-replay steps skip the re-seed of
	// cur_pos and the rope index whenever any capture ever happened (the
	// engine's own counter standing in for the process-wide one).
	{"warm-pos-global", []edit{
		{"if st.Regime != RegimeReplay || posDiffers {", "if (st.Regime != RegimeReplay && e.stats.Captures == 0) || (st.Regime == RegimeReplay && posDiffers) {"},
	}},
	// Bug 2 with the seed's eager semantics as well: its eager steps ran no
	// plus_one, so device cur_pos stays at the step's position after an
	// eager step (modelled by writing it back).
	{"warm-pos-global-seed-eager", []edit{
		{"if st.Regime != RegimeReplay || posDiffers {", "if (st.Regime != RegimeReplay && e.stats.Captures == 0) || (st.Regime == RegimeReplay && posDiffers) {"},
		{"e.warm[e.ptW] = true", `e.warm[e.ptW] = true
		if err := e.dev.WriteHost(e.a.curPos, tt.HostInt32([]int{e.opt.Capacity}, tt.RowMajor, slices.Clone(e.devPos))); err != nil {
			return err
		}
		for s := range e.devPos {
			if e.devPos[s] >= 0 {
				e.devPos[s]--
			}
		}`},
	}},
}

var divergeRE = regexp.MustCompile(`(?:DIVERGE|RED) step=(\d+) seq=(-?\d+) pos=(-?\d+): ([^\n]*)`)
var findingRE = regexp.MustCompile(`FINDING step=(\d+) seq=-?\d+ pos=-?\d+: ([^\n]*)`)

func goTool(t *testing.T) string {
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	return p
}

// runMutant runs the named tests of this package with the mutant applied
// and returns the output and whether the run failed.
func runMutant(t *testing.T, edits []edit, run string) (string, bool) {
	src, err := os.ReadFile("engine_step.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, e := range edits {
		if n := strings.Count(s, e.old); n != 1 {
			t.Fatalf("mutant anchor %q occurs %d times in engine_step.go", e.old, n)
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	dir := t.TempDir()
	mut := filepath.Join(dir, "engine_step.go")
	if err := os.WriteFile(mut, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("engine_step.go")
	if err != nil {
		t.Fatal(err)
	}
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: mut}})
	ovf := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovf, ov, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool(t), "test", "-overlay", ovf, "-count=1", "-run", run, ".")
	out, err := cmd.CombinedOutput()
	if strings.Contains(string(out), "[build failed]") || strings.Contains(string(out), "[setup failed]") {
		t.Fatalf("mutant does not build:\n%s", out)
	}
	return string(out), err != nil
}

// The seed's two bugs, put back by hand into a copy of the engine, are
// caught: the [C,1] page table at the first step past the first block
// boundary, the skipped re-seed at the first step after a (re-)capture
// that needs the host's positions.
func TestEngineSeedBugsCaught(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on mutated copies")
	}
	for _, m := range seedMutants {
		t.Run(m.name, func(t *testing.T) {
			killed := false
			for _, sched := range []string{"Single", "Admit"} {
				name := "TestEngineSeedSchedule" + sched
				out, red := runMutant(t, m.edits, "^"+name+"$")
				outS, redS := runMutant(t, m.edits, "^"+name+"Strict$")
				d := divergeRE.FindStringSubmatch(out)
				f := findingRE.FindStringSubmatch(outS)
				if red && d == nil {
					t.Fatalf("%s failed without a red-step line:\n%s", name, out)
				}
				first, step := "survived", -1
				if d != nil {
					killed = true
					step, _ = strconv.Atoi(d[1])
					first = "step " + d[1] + " (seq " + d[2] + ", pos " + d[3] + "): " + d[4]
				}
				fnd := "none"
				if f != nil {
					fnd = "step " + f[1] + ": " + f[2]
				} else if redS {
					if ds := divergeRE.FindStringSubmatch(outS); ds != nil {
						fnd = "none before the red step " + ds[1]
					}
				}
				t.Logf("%s on %s: first red %s; first strict finding %s", m.name, sched, first, fnd)
				if want, ok := expectedFirstRed[m.name+"/"+sched]; ok && step != want {
					t.Errorf("%s on %s: first red step %d, want %d", m.name, sched, step, want)
				}
			}
			if !killed {
				t.Errorf("mutant %s survived every seed schedule", m.name)
			}
		})
	}
}

// expectedFirstRed pins the first red step of each mutant per schedule
// (-1: survives that schedule; absent: not pinned). A mutant must die on at
// least one schedule.
// Decode step k of seq 0 decodes position k+5.
var expectedFirstRed = map[string]int{
	// position 32: the first position past the first 32-token block
	"pt-one-column/Single": 27,
	// the admitted sequence's row is never written (not refreshed): its
	// prefill writes through the stale pad entry 0, i.e. into block 0 of
	// sequence 0, whose next step then reads clobbered rows
	"pt-one-column/Admit": 12,
	// the prefill of the admitted sequence is the first non-replay step
	// after a capture whose positions the device does not already hold
	"warm-pos-global/Admit": 12,
	// the engine's eager steps run plus_one too, so a skipped re-seed is
	// harmless until the host has to move a position it did not advance
	"warm-pos-global/Single": -1,
	// position 33: the capture right after the cold eager step of the
	// boundary's new page-table width
	"warm-pos-global-seed-eager/Single": 28,
}
