package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/tthw"
	"github.com/offcard/offcard/wire"
)

func init() {
	commands["check"] = command{"run the property campaign: random schedules vs the ref oracle, shrunk failures", runCheck}
}

// checkReport is the --json document. Seeds are strings (a uint64 past
// 2^53 does not survive a JSON number in jq or JavaScript); each case
// carries its replay command.
type checkReport struct {
	checkSummary
	Result []caseJSON `json:"results"`
}

// checkSummary is what both --json documents say before their results.
type checkSummary struct {
	Device     string                `json:"device"`
	Seed       uint64                `json:"seed,string"`
	Cases      int                   `json:"cases"`
	Shard      string                `json:"shard,omitempty"`
	Passed     int                   `json:"passed"`
	Failed     int                   `json:"failed"`
	Saved      []string              `json:"saved,omitempty"`
	SaveErrors []string              `json:"save_errors,omitempty"`
	Errors     int                   `json:"errors,omitempty"`
	Reach      []proptest.ReachTotal `json:"reach"`
	// NotServed lists the serving calls the SUT does not serve: the
	// actions that need them were not drawn.
	NotServed []string `json:"not_served,omitempty"`
}

// caseJSON is one case of the --json document.
type caseJSON struct {
	proptest.CaseResult
	Replay string `json:"replay"`
}

func casesJSON(rs []proptest.CaseResult) []caseJSON {
	cs := make([]caseJSON, len(rs))
	for i, r := range rs {
		cs[i] = caseJSON{CaseResult: r, Replay: r.ReplayCommand()}
	}
	return cs
}

// timedCase is a case result with its wall times (--json --times).
type timedCase struct {
	caseJSON
	TimeToRed int64 `json:"time_to_red_ns,omitempty"`
	Start     int64 `json:"start_ns"`
	Elapsed   int64 `json:"elapsed_ns"`
}

// timedReport is the --json --times document: the --json one plus wall
// times (which differ between runs; without --times the document is the
// same, byte for byte, for the same seed and case count). time_to_red_ns
// is the time from the start of the campaign until the first failing
// command was observed, before any shrinking (absent when all passed).
type timedReport struct {
	checkSummary
	TimeToRed int64       `json:"time_to_red_ns,omitempty"`
	Elapsed   int64       `json:"elapsed_ns"`
	Result    []timedCase `json:"results"`
}

// checkFactory builds the SUT of --device sim; tests replace it.
var checkFactory proptest.Factory = proptest.SimFactory

func runCheck(e *env, args []string) error {
	fs := newFlags(e, "check", "[--device sim|tt] [--lib PATH] [--engine 'CMD ARGS' [--timeout D] [--hello-timeout D]] [--preset tiny|qwen3-0.6b | --model DIR] [--cases N] [--seed S] [--shard K/N] [--json [--times]] [--junit OUT.xml] [--save DIR] [--dump FILE.jsonl]")
	device := fs.String("device", "sim", "device to run the engine on: sim, or tt (the card, through --lib)")
	engine := fs.String("engine", "", "run the tolerant mode against an engine process speaking the line protocol: `'CMD ARGS'`, split at spaces (no shell); a fresh process per schedule run")
	timeout := fs.Duration("timeout", 0, timeoutHelp)
	helloTimeout := helloTimeoutFlag(fs)
	lib := fs.String("lib", "", "the offcard_tt C ABI library `PATH` (with --device tt)")
	cases := fs.Int("cases", 200, "number of schedules")
	seed := fs.Uint64("seed", proptest.DefaultSeed, "campaign seed; case i runs with a seed derived from (S, i), case 0 with S itself")
	asJSON := fs.Bool("json", false, "print one JSON document (the summary line then goes to stderr)")
	times := fs.Bool("times", false, "with --json: add wall times (time_to_red_ns: campaign start to the first failing command, before shrinking; per case start_ns, elapsed_ns, time_to_red_ns)")
	dumpPath := fs.String("dump", "", "run the first failing case's shrunk script once more and write the engine's tokens to `FILE.jsonl` (for offcard adjudicate; nothing is written when every case passes)")
	shardFlag := fs.String("shard", "", "run only shard `K/N` of the cases (case i when i mod N = K-1; the N shards together are the whole campaign, case for case)")
	junitPath := fs.String("junit", "", "also write a JUnit XML report, one test case per case, to `OUT.xml`")
	failFast := fs.Bool("fail-fast", false, "stop at the first failing case in case order: later cases are not started, and the report covers the cases up to it (what offcard mutants runs)")
	save := fs.String("save", "", "write each failure's shrunk script into `DIR` (e.g. proptest/testdata/regressions)")
	preset := fs.String("preset", "", "the model: a synthetic preset, `NAME` tiny (the default; Synth seeds 1-3) or qwen3-0.6b (the real Qwen3-0.6B shape, Synth seed 1, made once; schedules scaled to it)")
	modelDir := fs.String("model", "", "the model: a Hugging Face checkpoint `DIR` (config.json + model.safetensors), loaded once; an --engine's hello names DIR as its weights")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := positiveTimeout(fs, *timeout); err != nil {
		return err
	}
	cm, err := parseCampaignModel(*preset, *modelDir)
	if err != nil {
		return err
	}
	if g := cm.gcPercent(os.Getenv("GOGC")); g > 0 {
		debug.SetGCPercent(g)
	}
	factory := checkFactory
	var engineF *proptest.EngineFactory
	ef := engineFlags{fs: fs, timeout: timeout, helloTimeout: helloTimeout}
	if flagSet(fs, "engine") && !flagSet(fs, "timeout") && cm.large() {
		// A call of a real-size model takes seconds of CPU per prompt
		// position on a CPU engine (offcard-engine on sim: about 0.3 s at
		// the 0.6B shape), so a 65-token admit does not fit 30s.
		*timeout, ef.scaled = largeModelTimeout, true
	}
	if flagSet(fs, "engine") {
		if *device != "sim" || *lib != "" {
			return bad("--engine runs the engine's own device: it goes without --device and --lib")
		}
		var err error
		if engineF, err = ef.factory(*engine); err != nil {
			return err
		}
		defer atInterrupt(func() { engineF.Close() })()
		defer engineF.Close()
		factory, *device = engineF.Factory, proptest.EngineDevice
	} else if err := ef.without(); err != nil {
		return err
	}
	switch *device {
	case proptest.EngineDevice:
	case "sim":
		if *lib != "" {
			return bad("--lib goes with --device tt")
		}
	case "tt":
		f, err := cardFactory(*lib)
		if err != nil {
			return err
		}
		factory = f
	default:
		return bad("--device %q: want sim or tt", *device)
	}
	if *cases < 1 {
		return bad("--cases %d: want at least 1", *cases)
	}
	if *cases > proptest.MaxCases {
		return bad("--cases %d: at most %d (a campaign keeps every case's result until its report)", *cases, proptest.MaxCases)
	}
	if *times && !*asJSON {
		return bad("--times goes with --json")
	}
	// --save and --dump are checked before the campaign: a directory
	// (created if missing) that a script can be written into, a file that
	// can be created.
	if *save != "" {
		if err := checkOutputDir("--save", *save); err != nil {
			return err
		}
	}
	if *dumpPath != "" {
		probe, err := createAtomic(*dumpPath)
		if err != nil {
			return bad("--dump: %v", err)
		}
		probe.Abort()
	}
	var shard proptest.Shard
	if *shardFlag != "" {
		s, err := proptest.ParseShard(*shardFlag)
		if err != nil {
			return bad("--shard: %v", err)
		}
		shard = s
		if len(shard.Cases(*cases)) == 0 {
			return bad("--shard %s of %d %s holds no case: want --cases of at least %d", s, *cases, plural(*cases, "case"), s.K)
		}
	}
	junit, err := openJUnit(*junitPath)
	if err != nil {
		return err
	}
	if junit != nil {
		defer junit.Abort()
	}
	opt := proptest.Options{Seed: *seed, Cases: *cases, Shard: shard, Factory: factory, Base: cm.base(proptest.Base{Device: *device}), FailFast: *failFast}
	if *device == proptest.CardDevice {
		opt.ReplayArgs = "--device tt --lib " + *lib
	}
	if engineF != nil {
		opt.ReplayArgs = fmt.Sprintf("--engine '%s'", *engine) + ef.replayArgs()
		opt.Abort = func() bool { return engineF.Failed() != nil }
	}
	if a := cm.replayArgs(); a != "" {
		opt.ReplayArgs = strings.TrimSpace(a + " " + opt.ReplayArgs)
	}
	if err := cm.prepare(e); err != nil {
		return err
	}
	var serve proptest.Serving
	opt.Served = func(s proptest.Serving) { serve = s }
	prog := startCampaignProgress(e.stderr, e.stderrTTY, len(shard.Cases(*cases)))
	opt.CaseDone = prog.caseDone
	t0 := time.Now()
	rs := proptest.Campaign(opt)
	prog.Stop()
	elapsed := time.Since(t0)
	if engineF != nil && engineF.Failed() != nil {
		return engineSetupErr(engineF.Failed())
	}
	shardName := ""
	if !shard.Whole() {
		shardName = shard.String()
	}
	passed, failed := proptest.Summary(rs)
	errored := proptest.Errored(rs)
	reach := proptest.ReachTotals(rs)
	// A failed save is reported after the verdict and never hides it.
	var saved, saveErrs []string
	if *save != "" {
		saved, saveErrs = saveScripts(*save, rs)
	}
	var dumped string
	if *dumpPath != "" {
		for _, r := range rs {
			if r.Passed || r.Script == nil {
				continue
			}
			cmd, err := dumpCase(*dumpPath, *r.Script, factory)
			if errors.Is(err, errEmptyDump) {
				dumped = fmt.Sprintf("case %d's shrunk script fails before the engine produced any token: no dump written", r.Index)
				break
			}
			if err != nil {
				saveErrs = append(saveErrs, "dump: "+oneLine(err.Error()))
				break
			}
			dumped = fmt.Sprintf("dumped case %d's shrunk script to %s; judge it: %s", r.Index, *dumpPath, cmd)
			break
		}
		if dumped == "" {
			dumped = "every case passed: no dump written"
		}
	}
	out := bufio.NewWriter(e.stdout)
	summary := fmt.Sprintf("%d passed, %d failed", passed, failed)
	if n := notReproduced(rs); n > 0 {
		summary += fmt.Sprintf(" (%d of them not reproduced while shrinking)", n)
	}
	if errored > 0 {
		summary += fmt.Sprintf(", %d not run (offcard's runner failed: not findings)", errored)
	}
	if n := len(shard.Cases(*cases)) - len(rs); n > 0 {
		summary += fmt.Sprintf(", %d not started (--fail-fast)", n)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		sum := checkSummary{Device: *device, Seed: *seed, Cases: *cases, Shard: shardName, Passed: passed, Failed: failed,
			Saved: saved, SaveErrors: saveErrs, Errors: errored, Reach: reach, NotServed: serve.Missing()}
		var doc any = checkReport{checkSummary: sum, Result: casesJSON(rs)}
		if *times {
			tr := timedReport{checkSummary: sum, Elapsed: elapsed.Nanoseconds(), Result: make([]timedCase, len(rs))}
			if t, ok := proptest.TimeToRed(rs); ok {
				tr.TimeToRed = max(t.Nanoseconds(), 1)
			}
			for i, r := range casesJSON(rs) {
				tr.Result[i] = timedCase{caseJSON: r, TimeToRed: r.TimeToFail.Nanoseconds(), Start: r.Start.Nanoseconds(), Elapsed: r.Elapsed.Nanoseconds()}
			}
			doc = tr
		}
		if err := enc.Encode(doc); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, summary)
		if dumped != "" {
			fmt.Fprintln(e.stderr, dumped)
		}
	} else {
		if *engine != "" {
			fmt.Fprintf(out, "offcard check: engine %q (tolerant mode), seed %d, %d %s", *engine, *seed, *cases, plural(*cases, "case"))
		} else {
			fmt.Fprintf(out, "offcard check: device %s, seed %d, %d %s", *device, *seed, *cases, plural(*cases, "case"))
		}
		if shardName != "" {
			fmt.Fprintf(out, ", shard %s (%d %s)", shardName, len(rs), plural(len(rs), "case"))
		}
		fmt.Fprintln(out)
		for _, r := range rs {
			if !r.Passed {
				fmt.Fprint(out, r.Report())
			}
		}
		for _, p := range saved {
			fmt.Fprintf(out, "saved %s\n", p)
		}
		if dumped != "" {
			fmt.Fprintln(out, dumped)
		}
		writeTally(out, rs)
		writeReach(out, reach)
		if m := serve.Missing(); len(m) > 0 {
			fmt.Fprintf(out, "not exercised: the SUT does not serve %s (the serving actions that need them were not drawn)\n", strings.Join(m, ", "))
		}
		fmt.Fprintln(out, summary)
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if junit != nil {
		if err := writeJUnit(junit, checkJUnit(*device, *seed, shardName, t0, elapsed, rs)); err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	for _, m := range saveErrs {
		fmt.Fprintf(e.stderr, "offcard check: %s\n", m)
	}
	if failed > 0 {
		return errFound
	}
	if errored > 0 {
		return internalError{fmt.Errorf("%d cases did not run: offcard's runner failed (see the report)", errored)}
	}
	return nil
}

// engineFlags are the flags of an engine process beside --engine
// (check, replay).
type engineFlags struct {
	fs                    *flags
	timeout, helloTimeout *time.Duration
	// scaled: the timeout is largeModelTimeout, not the flag's.
	scaled bool
}

// largeModelTimeout is --timeout's default for a model larger than tiny.
const largeModelTimeout = 5 * time.Minute

const timeoutHelp = "with --engine: the longest a call but hello may take before the engine counts as hung and is killed (default 30s; 5m with --preset qwen3-0.6b or --model)"

// helloTimeoutFlag defines --hello-timeout.
func helloTimeoutFlag(fs *flags) *time.Duration {
	return fs.Duration("hello-timeout", 0, "with --engine: the longest the hello may take (the engine opens its device, loads the model, compiles its programs) "+
		"before the engine counts as hung; a hung, crashed or garbled hello ends the run with exit 2 (default 10m, or --timeout when longer)")
}

// without checks that no engine flag is given without --engine.
func (ef *engineFlags) without() error {
	for _, n := range []string{"timeout", "hello-timeout"} {
		if flagSet(ef.fs, n) {
			return bad("--%s goes with --engine", n)
		}
	}
	return nil
}

// factory is the factory of --engine CMD: a fresh process of CMD (split
// at spaces) per schedule run.
func (ef *engineFlags) factory(cmd string) (*proptest.EngineFactory, error) {
	argv := strings.Fields(cmd)
	if len(argv) == 0 {
		return nil, bad("--engine %q: an empty command (is a variable unset?)", cmd)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", *ef.timeout}, {"hello-timeout", *ef.helloTimeout}} {
		if d.v <= 0 && flagSet(ef.fs, d.name) {
			return nil, bad("--%s %v: want a positive duration", d.name, d.v)
		}
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, bad("--engine: %v", err)
	}
	hello := *ef.helloTimeout
	if hello == 0 {
		hello = max(wire.DefaultHelloTimeout, *ef.timeout)
	}
	return proptest.NewEngineFactory(proptest.EngineOptions{Command: argv, Timeout: *ef.timeout, HelloTimeout: hello})
}

// replayArgs are the engine flags given, for a replay command.
func (ef *engineFlags) replayArgs() string {
	s := ""
	if flagSet(ef.fs, "timeout") || ef.scaled {
		s += " --timeout " + ef.timeout.String()
	}
	if flagSet(ef.fs, "hello-timeout") {
		s += " --hello-timeout " + ef.helloTimeout.String()
	}
	return s
}

// engineSetupErr is the one line of a run whose engine failed its hello
// (or whose weights could not be exported): exit 2, not a finding.
func engineSetupErr(err error) error { return badInput{err} }

// cardFactory is the factory of --device tt --lib PATH: the engine on a
// fresh device of the library per schedule run, in the tolerant mode. The
// library is opened once here so that a bad path is a usage error.
func cardFactory(lib string) (proptest.Factory, error) {
	if lib == "" {
		return nil, bad("--device tt needs --lib PATH")
	}
	if err := probeLib(lib); err != nil {
		return nil, err
	}
	d, err := tthw.Open(lib, tthw.Options{})
	if err != nil {
		return nil, bad("--lib: %v", err)
	}
	if _, err := d.Close(); err != nil {
		return nil, bad("--lib: %v", err)
	}
	return proptest.CardFactory(lib, proptest.Tolerance{}), nil
}

// saveScripts writes each failing case's shrunk script into dir as
// <property>-<seed>.script and returns the paths written and the errors.
func saveScripts(dir string, rs []proptest.CaseResult) (saved, errs []string) {
	for _, r := range rs {
		if r.Passed || r.Script == nil || r.Failure == nil {
			continue
		}
		p := filepath.Join(dir, fmt.Sprintf("%s-%d.script", r.Failure.Property, r.Seed))
		if err := writeFileAtomic(p, []byte(r.RegressionScript().String())); err != nil {
			errs = append(errs, "save: "+oneLine(err.Error()))
			continue
		}
		saved = append(saved, p)
	}
	return saved, errs
}

// checkJUnit is the campaign as a JUnit report: one test case per case,
// named by its index and seed; a failing case's failure carries its whole
// report (seed, replay command, property, shrunk script).
func checkJUnit(device string, seed uint64, shard string, start time.Time, elapsed time.Duration, rs []proptest.CaseResult) junitSuites {
	name := fmt.Sprintf("offcard check --device %s --seed %d", device, seed)
	props := []junitProperty{{"device", device}, {"seed", strconv.FormatUint(seed, 10)}}
	if shard != "" {
		name += " --shard " + shard
		props = append(props, junitProperty{"shard", shard})
	}
	cases := make([]junitCase, len(rs))
	for i, r := range rs {
		c := junitCase{Name: fmt.Sprintf("case %d seed %d", r.Index, r.Seed), Classname: "offcard.check." + device,
			Time: junitSeconds(r.Elapsed), SystemOut: r.Scenario}
		switch {
		case r.Passed:
		case r.Failure != nil:
			c.Failure = &junitProblem{Message: r.Failure.String(), Type: r.Failure.Property, Text: r.Report()}
		default:
			c.Error = &junitProblem{Message: r.Error, Type: "error", Text: r.Report()}
		}
		cases[i] = c
	}
	return newJUnit(name, start, elapsed, props, cases)
}

// notReproduced counts the failing cases whose failure never recurred.
func notReproduced(rs []proptest.CaseResult) int {
	n := 0
	for _, r := range rs {
		if r.NotReproduced {
			n++
		}
	}
	return n
}

// writeTally is the per-property tally of the failing cases (by the
// property each case failed on first).
func writeTally(w io.Writer, rs []proptest.CaseResult) {
	n := map[string]int{}
	var props []string
	for _, r := range rs {
		if r.Failure == nil {
			continue
		}
		if n[r.Failure.Property] == 0 {
			props = append(props, r.Failure.Property)
		}
		n[r.Failure.Property]++
	}
	if len(props) == 0 {
		fmt.Fprintln(w, "by property: every property held in every case")
		return
	}
	slices.SortFunc(props, func(a, b string) int { return n[b] - n[a] })
	parts := make([]string, len(props))
	for i, p := range props {
		parts[i] = fmt.Sprintf("%s %d %s", p, n[p], plural(n[p], "case"))
	}
	fmt.Fprintf(w, "by property: %s\n", strings.Join(parts, ", "))
}

// writeReach is the reach table of --json as text, two kinds a row:
// how many cases visited each state kind, and how often (a kind no case
// reached is marked).
func writeReach(w io.Writer, reach []proptest.ReachTotal) {
	fmt.Fprintln(w, "reach (cases that reached it, visits):")
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	half := (len(reach) + 1) / 2
	cell := func(t proptest.ReachTotal) string {
		mark := ""
		if t.Cases == 0 {
			mark = "never"
		}
		return fmt.Sprintf("%s\t%d\t%d\t%s", t.Kind, t.Cases, t.Visits, mark)
	}
	for i := range half {
		fmt.Fprint(tw, "  "+cell(reach[i]))
		if j := i + half; j < len(reach) {
			fmt.Fprint(tw, "\t  "+cell(reach[j]))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		fmt.Fprint(w, strings.TrimRight(l, " \n")+strings.Repeat("\n", strings.Count(l, "\n")))
	}
}
