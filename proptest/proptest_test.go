package proptest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
	"github.com/offcard/offcard/tt"
)

// campaignParams reads PROPTEST_SEED / PROPTEST_CASES (to replay a case:
// PROPTEST_SEED=D PROPTEST_CASES=1 go test -run TestCampaign ./proptest).
func campaignParams(t testing.TB) (uint64, int) {
	seed, cases := DefaultSeed, 200
	if v := os.Getenv("PROPTEST_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PROPTEST_SEED: %v", err)
		}
		seed = s
	}
	if v := os.Getenv("PROPTEST_CASES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("PROPTEST_CASES: %v", err)
		}
		cases = n
	}
	if testing.Short() && os.Getenv("PROPTEST_CASES") == "" {
		cases = 40
	}
	return seed, cases
}

// campaignShard reads PROPTEST_SHARD=K/N (see Shard): TestCampaign runs
// only that shard of the campaign.
func campaignShard(t testing.TB) Shard {
	v := os.Getenv("PROPTEST_SHARD")
	if v == "" {
		return Shard{}
	}
	s, err := ParseShard(v)
	if err != nil {
		t.Fatalf("PROPTEST_SHARD: %v", err)
	}
	return s
}

// TestCampaign runs the default campaign (200 schedules) on the engine on
// sim. With PROPTEST_SAVE=1 failing cases' shrunk scripts are written to
// testdata/regressions.
func TestCampaign(t *testing.T) {
	seed, cases := campaignParams(t)
	start := time.Now()
	rs := Campaign(Options{Seed: seed, Cases: cases, Shard: campaignShard(t), Factory: SimFactory})
	steps := 0
	for _, r := range rs {
		steps += r.DeviceSteps
		if r.Passed {
			continue
		}
		t.Error(r.Report())
		if os.Getenv("PROPTEST_SAVE") != "" && r.Script != nil {
			p, err := r.Save(filepath.Join("testdata", "regressions"))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("saved %s", p)
		}
	}
	p, f := Summary(rs)
	el := time.Since(start)
	t.Logf("seed %d: %d passed, %d failed; %d device steps in %v (%.1f schedules/s, %.0f steps/s)",
		seed, p, f, steps, el.Round(time.Millisecond), float64(len(rs))/el.Seconds(), float64(steps)/el.Seconds())
}

// TestRegressions replays every saved script; each must pass on the real
// engine.
func TestRegressions(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "regressions", "*.script"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("want at least two regression scripts, found %d", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".script"), func(t *testing.T) {
			t.Parallel()
			s, err := ReadScriptFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fail, st, err := RunScript(s, SimFactory)
			if err != nil {
				t.Fatal(err)
			}
			if fail != nil {
				t.Fatalf("%v\nscript:\n%s", fail, s)
			}
			if st.Commands != len(s.Commands) {
				t.Fatalf("ran %d of %d commands", st.Commands, len(s.Commands))
			}
		})
	}
}

func TestScriptRoundTrip(t *testing.T) {
	text := `# a comment
model tiny seed=3
device sim arch=blackhole l1=zero strict
engine block=64 blocks=12 width=fixed:2 capacity=3 mode=captured recapture=5 verify
admit seq=2 prompt=63 salt=4
decode steps=3
decode steps=2 seqs=2
# interleaved comments are dropped
finish seq=2
recapture
admit seq=0 prompt=40 chunk=31
share seq=1 from=0 len=33 prompt=64 salt=2 chunk=32
verify seqs=0,1 k=4,8 accept=2,8 draft=7
fork seq=3 from=1 salt=1
preempt seq=0
readmit seq=0 chunk=33
`
	s, err := ParseScript(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(text, "# interleaved comments are dropped\n", "", 1)
	if got := s.String(); got != want {
		t.Fatalf("round trip:\n%s\nwant:\n%s", got, want)
	}
	for _, bad := range []string{
		"model tiny seed=1\ndevice sim arch=wormhole\n",                                              // no engine
		"model tiny seed=1\ndevice sim arch=wormhole\nengine block=30\n",                             // block size
		"model tiny seed=1\ndevice sim arch=wormhole\nengine width=fixed:9 blocks=8\n",               // width > blocks
		"model tiny seed=1\ndevice sim arch=wormhole\nengine mode=eager recapture=2\n",               // recapture in eager
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nadmit seq=0\n",                         // no prompt
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\ndecode steps=1 seqs=2,1\n",             // unsorted
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nfinish seq=0 now\n",                    // stray word
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nadmit seq=0 prompt=1\nengine block=32", // header late
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\njump\n",                                // unknown
		"model tiny seed=1\ndevice sim arch=wormhole l1=random\nengine\n",                            // L1 mode
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nshare seq=1 from=1 len=2 prompt=3\n",   // self share
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nshare seq=1 from=0 len=3 prompt=3\n",   // no own token
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nverify seqs=0 k=9 accept=1\n",          // k > 8
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nverify seqs=0 k=2 accept=3\n",          // accept > k
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nverify seqs=0,1 k=2 accept=1\n",        // list lengths
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nfork seq=2\n",                          // no parent
		"model tiny seed=1\ndevice sim arch=wormhole\nengine\nreadmit seq=2 chunk=-1\n",              // chunk
	} {
		if _, err := ParseScript(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

// An invalid schedule is an error of the script, never a failure.
func TestRunScriptRejectsInvalid(t *testing.T) {
	head := "model tiny seed=1\ndevice sim arch=wormhole strict\nengine block=32 blocks=4 width=dynamic capacity=1 mode=eager\n"
	for _, body := range []string{
		"decode steps=1\n", // nothing live
		"admit seq=0 prompt=1\nadmit seq=1 prompt=1\n",                                     // no free slot
		"admit seq=0 prompt=129\n",                                                         // past the cache
		"finish seq=0\n",                                                                   // not live
		"admit seq=0 prompt=100\ndecode steps=40\n",                                        // past the cache
		"admit seq=0 prompt=1\ndecode steps=1 seqs=0,1\n",                                  // seq 1 not live
		"admit seq=0 prompt=5\nfinish seq=0\nfinish seq=0\n",                               // twice
		"admit seq=0 prompt=5\nadmit seq=0 prompt=5\n",                                     // live already
		"admit seq=0 prompt=5\ndecode steps=1 seqs=0\nrecapture\ndecode steps=300\n",       // too many steps
		"share seq=1 from=0 len=2 prompt=4\n",                                              // donor not live
		"admit seq=0 prompt=5\nshare seq=1 from=0 len=6 prompt=8\n",                        // prefix past the donor
		"admit seq=0 prompt=5\ndecode steps=1 skip=3\nshare seq=1 from=0 len=7 prompt=9\n", // prefix over a gap
		"fork seq=1 from=0\n",                                                              // parent not live
		"admit seq=0 prompt=5\nreadmit seq=0\n",                                            // not preempted
		"admit seq=0 prompt=5\ndecode steps=1 skip=3\npreempt seq=0\n",                     // a gap: no recompute
		"verify seqs=0 k=2 accept=1\n",                                                     // nothing live
	} {
		s, err := ParseScript(strings.NewReader(head + body))
		if err != nil {
			continue // rejected by the parser: fine too
		}
		fail, _, err := RunScript(s, SimFactory)
		if err == nil {
			t.Errorf("accepted %q (failure %v)", body, fail)
		}
	}
}

func TestCaseSeed(t *testing.T) {
	for _, s := range []uint64{0, 1, 42, math.MaxUint64} {
		if CaseSeed(s, 0) != s {
			t.Fatalf("CaseSeed(%d, 0) = %d", s, CaseSeed(s, 0))
		}
		seen := map[uint64]bool{}
		for i := 0; i < 1000; i++ {
			seen[CaseSeed(s, i)] = true
		}
		if len(seen) != 1000 {
			t.Fatalf("seed %d: %d distinct case seeds of 1000", s, len(seen))
		}
	}
}

// The default seed is pinned: the documented command line depends on it.
func TestDefaultSeed(t *testing.T) {
	if DefaultSeed != 1 {
		t.Fatalf("DefaultSeed = %d; the docs and `offcard check` say 1", DefaultSeed)
	}
}

// Generated schedules hit the boundary regions the generator promises.
func TestGeneratorCoverage(t *testing.T) {
	prompts := map[string]int{}
	kinds := map[CmdKind]int{}
	modes := map[string]int{}
	for i := 0; i < 300; i++ {
		s, ok := GenerateScript(CaseSeed(DefaultSeed, i), Base{})
		if !ok {
			t.Fatalf("case %d: no script", i)
		}
		modes[s.Scenario.Mode.String()+"/"+s.Scenario.Width.String()[:5]]++
		for _, c := range s.Commands {
			kinds[c.Kind]++
			if c.Kind == Admit {
				switch c.Prompt % s.Scenario.BlockSize {
				case s.Scenario.BlockSize - 1:
					prompts["k*bs-1"]++
				case 0:
					prompts["k*bs"]++
				case 1:
					prompts["k*bs+1"]++
				}
			}
		}
	}
	t.Logf("prompts %v, commands %v, scenarios %v", prompts, kinds, modes)
	for _, k := range []string{"k*bs-1", "k*bs", "k*bs+1"} {
		if prompts[k] < 20 {
			t.Errorf("only %d prompts at %s", prompts[k], k)
		}
	}
	for _, k := range []CmdKind{Admit, Decode, Finish, Recapture} {
		if kinds[k] < 50 {
			t.Errorf("only %d %v commands", kinds[k], k)
		}
	}
}

// Same seed, same results, whatever the number of workers.
func TestCampaignDeterministic(t *testing.T) {
	n := 16
	if testing.Short() {
		n = 6
	}
	enc := func(rs []CaseResult) string {
		b, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a := enc(Campaign(Options{Seed: 7, Cases: n, Factory: SimFactory, Workers: 1}))
	b := enc(Campaign(Options{Seed: 7, Cases: n, Factory: SimFactory, Workers: 3}))
	if a != b {
		t.Fatalf("workers 1 and 3 differ:\n%s\n%s", a, b)
	}
}

// corruptSUT plants a bug in front of a correct SUT: a logit of every
// output at a position that starts a block (other than 0) is changed. The
// suite must find it, shrink it to a short script across a boundary, and
// replay it alone from its seed and from its saved script.
type corruptSUT struct {
	SUT
	bs int
}

type corruptDecoder struct {
	qwen3.Decoder
	bs int
}

func (c corruptSUT) Decoder() qwen3.Decoder { return corruptDecoder{c.SUT.Decoder(), c.bs} }

func (d corruptDecoder) fix(o []qwen3.Output) []qwen3.Output {
	for i := range o {
		if o[i].Pos > 0 && o[i].Pos%d.bs == 0 {
			o[i].Logits[7] += 1
		}
	}
	return o
}

func (d corruptDecoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	o, err := d.Decoder.Prefill(p)
	return d.fix(o), err
}

func (d corruptDecoder) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	o, err := d.Decoder.Decode(b)
	return d.fix(o), err
}

func corruptFactory(sc Scenario) (SUT, error) {
	s, err := SimFactory(sc)
	if err != nil {
		return nil, err
	}
	return corruptSUT{s, sc.BlockSize}, nil
}

func TestPlantedBugIsFoundShrunkAndReplayed(t *testing.T) {
	rs := Campaign(Options{Seed: 3, Cases: 6, Factory: corruptFactory})
	var bad *CaseResult
	for i := range rs {
		if !rs[i].Passed {
			bad = &rs[i]
			break
		}
	}
	if bad == nil {
		t.Fatal("the planted bug survived 6 cases")
	}
	rep := bad.Report()
	t.Log(rep)
	f := bad.Failure
	if f.Property != PropLogits || f.Pos%bad.Script.Scenario.BlockSize != 0 {
		t.Fatalf("want a logits failure at a block start, got %v", f)
	}
	if n := len(bad.Script.Commands); n > 3 {
		t.Errorf("shrunk to %d commands, want at most 3", n)
	}
	for _, want := range []string{"seed " + strconv.FormatUint(bad.Seed, 10), bad.ReplayCommand(), "property: logits", "first failing step: command", "engine block="} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Alone, from its seed.
	alone := Campaign(Options{Seed: bad.Seed, Cases: 1, Factory: corruptFactory})[0]
	alone.Index = bad.Index
	if alone.Report() != rep {
		t.Fatalf("replayed alone:\n%s\nin the campaign:\n%s", alone.Report(), rep)
	}
	// From its saved script: red on the bug, green on the engine.
	dir := t.TempDir()
	path, err := bad.Save(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ReadScriptFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fail, _, err := RunScript(s, corruptFactory); err != nil || fail == nil || fail.String() != f.String() {
		t.Fatalf("saved script on the bug: %v, %v; want %v", fail, err, f)
	}
	if fail, _, err := RunScript(s, SimFactory); err != nil || fail != nil {
		t.Fatalf("saved script on the engine: %v, %v", fail, err)
	}
}

func TestSetupFailureIsReported(t *testing.T) {
	r := RunCase(5, CaseOptions{Factory: func(Scenario) (SUT, error) { return nil, fmt.Errorf("no device here") }})
	if r.Passed || r.Failure == nil || r.Failure.Property != PropSetup || len(r.Script.Commands) != 1 {
		t.Fatalf("%+v", r)
	}
}

// BenchmarkCampaign measures schedules/s, simulated device steps/s and
// the process's CPU seconds (cpu-s/op) of the default campaign (what offcard check runs: 200 cases of seed 1). An
// op is the whole campaign; the process-wide memos are warm from the
// second op on (-benchtime 1x measures a cold process, as the CLI runs).
func BenchmarkCampaign(b *testing.B) {
	const cases = 200
	steps := 0
	cpu0 := cpuTime(0)
	sys0, _ := sysAndPeak()
	c0, _ := linRows()
	for i := 0; i < b.N; i++ {
		for _, r := range Campaign(Options{Seed: DefaultSeed, Cases: cases, Factory: SimFactory}) {
			steps += r.DeviceSteps
			if !r.Passed {
				b.Fatal(r.Report())
			}
		}
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(cases*b.N)/s, "schedules/s")
	b.ReportMetric(float64(steps)/s, "steps/s")
	// CPU of the process per campaign: on a loaded or throttled machine it
	// varies less than wall time, and it bounds what the cores can give
	// (2 cores: wall time >= cpu-s/2).
	if d := cpuTime(0) - cpu0; d > 0 {
		b.ReportMetric(d.Seconds()/float64(b.N), "cpu-s/op")
	}
	// The system part, mostly the kernel zeroing fresh pages: on a VM
	// whose host backs memory lazily it follows peak-MB (the process's
	// peak resident memory) and whether the host still backs the pages
	// the kernel hands out (fast right after another process freed
	// them, slow a few seconds later).
	sys, peak := sysAndPeak()
	if d := sys - sys0; d > 0 {
		b.ReportMetric(d.Seconds()/float64(b.N), "sys-s/op")
	}
	if peak > 0 {
		b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	}
	if h, m := memoStats(); h+m > 0 {
		b.ReportMetric(100*float64(h)/float64(h+m), "oracle-memo-%")
	}
	if c, f := linRows(); c+f > 0 {
		b.ReportMetric(float64(c-c0)/float64(b.N), "rows-computed/op")
	}
}

// staleRowSUT reports the device page table with a stale block id left in
// the last column of every row but the first (a stale tail, or an
// inactive row not cleared).
type staleRowSUT struct{ *SimSUT }

func (s staleRowSUT) DevicePageTable() ([]int32, int, bool, error) {
	t, w, ok, err := s.SimSUT.DevicePageTable()
	if err == nil && ok {
		for r := 1; r*w < len(t); r++ {
			t[r*w+w-1] = 5
		}
	}
	return t, w, ok, err
}

func TestPageTableProperty(t *testing.T) {
	script := `model tiny seed=1
device sim arch=wormhole strict
engine block=32 blocks=8 width=fixed:3 capacity=2 mode=captured recapture=2
admit seq=0 prompt=33
decode steps=2
finish seq=0
recapture
admit seq=1 prompt=3
decode steps=1
`
	s, err := ParseScript(strings.NewReader(script))
	if err != nil {
		t.Fatal(err)
	}
	if f, _, err := RunScript(s, SimFactory); err != nil || f != nil {
		t.Fatalf("real engine: %v, %v", f, err)
	}
	stale := func(sc Scenario) (SUT, error) {
		s, err := SimFactory(sc)
		if err != nil {
			return nil, err
		}
		return staleRowSUT{s.(*SimSUT)}, nil
	}
	f, _, err := RunScript(s, stale)
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || f.Property != PropPageTable || f.Command != 1 || f.DeviceStep != 32 ||
		!strings.Contains(f.Detail, "row 1 is [0 0 5]") || !strings.Contains(f.Detail, "slot 1 is inactive") {
		t.Fatalf("want a page-table failure at the prefill's last step (row 1 stale), got %v", f)
	}
	for _, tc := range []struct {
		in   []int32
		want string
	}{
		{[]int32{3, 0, 0}, "[3 0 0]"},
		{[]int32{3, 7, 0, 0, 0, 0, 0}, "[3 7 ...5×0]"},
		{make([]int32, 256), "[...256×0]"},
	} {
		if got := fmtRow(tc.in); got != tc.want {
			t.Errorf("fmtRow(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The oracle's trajectory memo changes nothing: a campaign with it and one
// computing every position with ref give the same results, byte for byte,
// and the memo answers most positions.
func TestOracleMemoChangesNothing(t *testing.T) {
	n := 8
	enc := func(rs []CaseResult) string {
		b, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	useOracleMemo = false
	off := enc(Campaign(Options{Seed: 5, Cases: n, Factory: SimFactory}))
	useOracleMemo = true
	hits0, miss0 := memoStats()
	on := enc(Campaign(Options{Seed: 5, Cases: n, Factory: SimFactory}))
	if on != off {
		t.Fatalf("with the memo:\n%s\nwithout:\n%s", on, off)
	}
	hits, miss := memoStats()
	hits, miss = hits-hits0, miss-miss0
	t.Logf("memo: %d positions answered, %d computed", hits, miss)
	if hits == 0 || miss == 0 {
		t.Fatalf("memo answered %d positions and computed %d: want both", hits, miss)
	}
}

// Handing ref's rows to the simulated device changes nothing: a campaign
// with it and one without give the same results, byte for byte, and the
// devices compute fewer rows with it (they find ref's).
func TestRowSharingChangesNothing(t *testing.T) {
	enc := func(rs []CaseResult) string {
		b, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// Both runs start with empty row memos, and ref computes every
	// position (the trajectory memo would answer the second run's).
	defer func(v bool) { useOracleMemo = v }(useOracleMemo)
	useOracleMemo = false
	run := func(share bool) (string, int64, int64) {
		defer func(v bool) { shareRows = v }(shareRows)
		shareRows = share
		sim.DropRowMemos()
		c0, f0 := linRows()
		out := enc(Campaign(Options{Seed: 77, Cases: 8, Factory: SimFactory}))
		c, f := linRows()
		return out, c - c0, f - f0
	}
	off, cOff, fOff := run(false)
	on, cOn, fOn := run(true)
	if on != off {
		t.Fatalf("with row sharing:\n%s\nwithout:\n%s", on, off)
	}
	t.Logf("rows computed %d -> %d, found %d -> %d", cOff, cOn, fOff, fOn)
	// ref computes every position before the engine does, so the devices
	// find nearly every row: what they compute is the rows of their own
	// (those of inactive slots, of a prefill program's padding): under 1%.
	// Without the fused q|k|v rows they computed 17% as many as without
	// sharing, without the others 78%.
	if cOn+fOn != cOff+fOff || cOn*20 > cOff {
		t.Fatalf("rows computed %d -> %d, found %d -> %d: want as many rows, at most 5%% as many computed", cOff, cOn, fOff, fOn)
	}
}

// The generator reaches the states issue 9 found unvisited: decodes that
// start sequences (several at once), teacher forcing, position jumps,
// schedules that fill the pool, a prefill between two decodes of one
// batch, faithful scenarios, page tables as wide as the cache.
func TestGeneratorReach(t *testing.T) {
	got := map[string]int{}
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i++ {
		s, ok := GenerateScript(CaseSeed(DefaultSeed, i), Base{})
		if !ok {
			t.Fatalf("case %d: no script", i)
		}
		sc := s.Scenario
		if !sc.Strict {
			got["faithful"]++
		}
		if sc.Prefill == qwen3.PrefillDecode {
			got["prefill-by-decode"]++
		}
		m := newModel(&sc, sc.MaxLen(cfg))
		var prev, prev2 *Cmd
		for j := range s.Commands {
			c := s.Commands[j]
			if err := m.check(c); err != nil {
				t.Fatalf("case %d command %d %q: %v", i, j, c, err)
			}
			if c.Kind == Decode {
				if len(c.Start) > 0 {
					got["start"]++
				}
				if len(c.Start) > 1 {
					got["start-several"]++
				}
				if c.Force > 0 {
					got["force"]++
				}
				if c.Skip > 0 {
					got["skip"]++
				}
				if prev != nil && prev.Kind == Admit && prev2 != nil && prev2.Kind == Decode && c.Seqs != nil {
					got["prefill-between"]++
				}
			}
			m = m.apply(c)
			if m.blocksInUse() == sc.NumBlocks {
				got["pool-full"]++
				if m.nLive() == 1 {
					got["one-seq-fills-pool"]++
				}
			}
			for q, l := range m.live {
				if l && sc.contractWidth(blocksFor(m.length[q], sc.BlockSize)) == sc.NumBlocks {
					got["width-full-cache"]++
					break
				}
			}
			prev2, prev = prev, &s.Commands[j]
		}
	}
	t.Logf("reach over 300 generated schedules: %v", got)
	for _, k := range []string{"faithful", "prefill-by-decode", "start", "start-several", "force", "skip", "prefill-between", "pool-full", "one-seq-fills-pool", "width-full-cache"} {
		if got[k] < 10 {
			t.Errorf("only %d schedules' commands reach %s", got[k], k)
		}
	}
}

// leakSUT allocates a stray tensor on its device after the n-th decode
// and returns an error from Close: the device-memory and close properties
// must name each.
type leakSUT struct {
	*SimSUT
	n        int
	closeErr error
}

type leakDecoder struct {
	qwen3.Decoder
	s *leakSUT
}

func (s *leakSUT) Decoder() qwen3.Decoder { return leakDecoder{s.SimSUT.Decoder(), s} }

func (s *leakSUT) Close() error { return errors.Join(s.SimSUT.Close(), s.closeErr) }

func (d leakDecoder) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	o, err := d.Decoder.Decode(b)
	if d.s.n--; d.s.n == 0 {
		if _, err := d.s.Tap.Allocate(tt.Spec{Shape: []int{32}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}); err != nil {
			panic(err)
		}
	}
	return o, err
}

func TestMemoryAndCloseProperties(t *testing.T) {
	s, err := ParseScript(strings.NewReader(`model tiny seed=1
device sim arch=wormhole strict
engine block=32 blocks=8 width=dynamic capacity=3 mode=captured recapture=2
admit seq=0 prompt=3
decode steps=3
decode steps=2 start=1,2 force=5
decode steps=1 skip=3
`))
	if err != nil {
		t.Fatal(err)
	}
	if f, _, err := RunScript(s, SimFactory); err != nil || f != nil {
		t.Fatalf("real engine: %v, %v", f, err)
	}
	leaky := func(n int, closeErr error) Factory {
		return func(sc Scenario) (SUT, error) {
			x, err := SimFactory(sc)
			if err != nil {
				return nil, err
			}
			return &leakSUT{SimSUT: x.(*SimSUT), n: n, closeErr: closeErr}, nil
		}
	}
	f, _, err := RunScript(s, leaky(2, nil))
	if err != nil || f == nil || f.Property != PropMemory || f.Command != 2 || f.SubStep != 2 {
		t.Fatalf("a tensor leaked at the second decode step: want device-memory at command 2 step 2, got %v, %v", f, err)
	}
	f, _, err = RunScript(s, leaky(-1, errors.New("boom")))
	if err != nil || f == nil || f.Property != PropClose || f.Cmd != "(close)" || !strings.Contains(f.Detail, "boom") {
		t.Fatalf("Close failed: want the close property, got %v, %v", f, err)
	}
	// Two slots free, three started: an error of the script, not the SUT.
	bad := s
	bad.Commands = append(slices.Clone(s.Commands[:2]), Cmd{Kind: Decode, Steps: 1, Start: []int{1, 2, 3}})
	if _, _, err := RunScript(bad, SimFactory); err == nil {
		t.Fatal("three starts with two free slots: want a script error")
	}
}

// mostSteps finds what trying most, most-1, ... finds, at every decode of
// generated schedules, for every bound up to MaxDecodeSteps, with the
// command's starts and jump and without them.
func TestMostStepsIsTheLinearScan(t *testing.T) {
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	linear := func(m *model, c Cmd, most int) int {
		for ; most > 0; most-- {
			if c.Steps = most; m.check(c) == nil {
				break
			}
		}
		return max(most, 0)
	}
	tried, short := 0, 0
	for i := 0; i < 30; i++ {
		s, ok := GenerateScript(CaseSeed(DefaultSeed, i), Base{})
		if !ok {
			t.Fatalf("case %d: no script", i)
		}
		m := newModel(&s.Scenario, s.Scenario.MaxLen(cfg))
		for _, c := range s.Commands {
			if c.Kind == Decode {
				plain := c
				plain.Start, plain.Skip = nil, 0
				for _, d := range []Cmd{c, plain} {
					for most := -1; most <= MaxDecodeSteps; most++ {
						want := linear(&m, d, most)
						if got := mostSteps(&m, d, most); got != want {
							t.Fatalf("case %d %q, most %d: mostSteps %d, the scan %d", i, d, most, got, want)
						}
						tried++
						if want > 0 && want < most {
							short++
						}
					}
				}
			}
			m = m.apply(c)
		}
	}
	if short == 0 {
		t.Fatalf("none of %d tries was cut short by the pool or a limit: the bisection is not tested", tried)
	}
}
