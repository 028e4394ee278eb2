package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/offcard/offcard/proptest"
)

func init() {
	commands["check"] = command{"run the property campaign: random schedules vs the ref oracle, shrunk failures", runCheck}
}

// checkReport is the --json document.
type checkReport struct {
	Device string                `json:"device"`
	Seed   uint64                `json:"seed"`
	Cases  int                   `json:"cases"`
	Shard  string                `json:"shard,omitempty"`
	Passed int                   `json:"passed"`
	Failed int                   `json:"failed"`
	Saved  []string              `json:"saved,omitempty"`
	Result []proptest.CaseResult `json:"results"`
}

// timedCase is a case result with its wall times (--json --times).
type timedCase struct {
	proptest.CaseResult
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
	Device    string      `json:"device"`
	Seed      uint64      `json:"seed"`
	Cases     int         `json:"cases"`
	Shard     string      `json:"shard,omitempty"`
	Passed    int         `json:"passed"`
	Failed    int         `json:"failed"`
	Saved     []string    `json:"saved,omitempty"`
	TimeToRed int64       `json:"time_to_red_ns,omitempty"`
	Elapsed   int64       `json:"elapsed_ns"`
	Result    []timedCase `json:"results"`
}

// checkFactory builds the SUT of --device sim; tests replace it.
var checkFactory proptest.Factory = proptest.SimFactory

func runCheck(e *env, args []string) error {
	fs := newFlags(e, "check", "[--device sim|tt] [--lib PATH] [--cases N] [--seed S] [--shard K/N] [--json [--times]] [--junit OUT.xml] [--save DIR]")
	device := fs.String("device", "sim", "device to run the engine on: sim, or tt (the card, through --lib)")
	lib := fs.String("lib", "", "the offcard_tt C ABI library `PATH` (with --device tt)")
	cases := fs.Int("cases", 200, "number of schedules")
	seed := fs.Uint64("seed", proptest.DefaultSeed, "campaign seed; case i runs with a seed derived from (S, i), case 0 with S itself")
	asJSON := fs.Bool("json", false, "print one JSON document (the summary line then goes to stderr)")
	times := fs.Bool("times", false, "with --json: add wall times (time_to_red_ns: campaign start to the first failing command, before shrinking; per case start_ns, elapsed_ns, time_to_red_ns)")
	shardFlag := fs.String("shard", "", "run only shard `K/N` of the cases (case i when i mod N = K-1; the N shards together are the whole campaign, case for case)")
	junitPath := fs.String("junit", "", "also write a JUnit XML report, one test case per case, to `OUT.xml`")
	save := fs.String("save", "", "write each failure's shrunk script into `DIR` (e.g. proptest/testdata/regressions)")
	if err := fs.parse(args); err != nil {
		return err
	}
	switch *device {
	case "sim":
		if *lib != "" {
			return bad("--lib goes with --device tt")
		}
	case "tt":
		if *lib == "" {
			return bad("--device tt needs --lib PATH")
		}
		return bad("--device tt is not available yet: the engine has no card factory (run with --device sim)")
	default:
		return bad("--device %q: want sim or tt", *device)
	}
	if *cases < 1 {
		return bad("--cases %d: want at least 1", *cases)
	}
	if *times && !*asJSON {
		return bad("--times goes with --json")
	}
	var shard proptest.Shard
	if *shardFlag != "" {
		s, err := proptest.ParseShard(*shardFlag)
		if err != nil {
			return bad("--shard: %v", err)
		}
		shard = s
	}
	junit, err := openJUnit(*junitPath)
	if err != nil {
		return err
	}
	if junit != nil {
		defer junit.Abort()
	}
	opt := proptest.Options{Seed: *seed, Cases: *cases, Shard: shard, Factory: checkFactory, Base: proptest.Base{Device: *device}}
	if e.stderrTTY {
		opt.Progress = func(done, failed, total int) {
			fmt.Fprintf(e.stderr, "\rcheck: %d/%d cases, %d failed", done, total, failed)
			if done == total {
				fmt.Fprint(e.stderr, "\r\033[K")
			}
		}
	}
	t0 := time.Now()
	rs := proptest.Campaign(opt)
	elapsed := time.Since(t0)
	shardName := ""
	if !shard.Whole() {
		shardName = shard.String()
	}
	passed, failed := proptest.Summary(rs)
	var saved []string
	if *save != "" {
		for _, r := range rs {
			if r.Passed || r.Script == nil {
				continue
			}
			p, err := r.Save(*save)
			if err != nil {
				return fmt.Errorf("save: %w", err)
			}
			saved = append(saved, p)
		}
	}
	out := bufio.NewWriter(e.stdout)
	summary := fmt.Sprintf("%d passed, %d failed", passed, failed)
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		var doc any = checkReport{Device: *device, Seed: *seed, Cases: *cases, Shard: shardName, Passed: passed, Failed: failed, Saved: saved, Result: rs}
		if *times {
			tr := timedReport{Device: *device, Seed: *seed, Cases: *cases, Shard: shardName, Passed: passed, Failed: failed, Saved: saved,
				Elapsed: elapsed.Nanoseconds(), Result: make([]timedCase, len(rs))}
			if t, ok := proptest.TimeToRed(rs); ok {
				tr.TimeToRed = max(t.Nanoseconds(), 1)
			}
			for i, r := range rs {
				tr.Result[i] = timedCase{CaseResult: r, TimeToRed: r.TimeToFail.Nanoseconds(), Start: r.Start.Nanoseconds(), Elapsed: r.Elapsed.Nanoseconds()}
			}
			doc = tr
		}
		if err := enc.Encode(doc); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, summary)
	} else {
		fmt.Fprintf(out, "offcard check: device %s, seed %d, %d cases", *device, *seed, *cases)
		if shardName != "" {
			fmt.Fprintf(out, ", shard %s (%d cases)", shardName, len(rs))
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
	if failed > 0 {
		return errFound
	}
	return nil
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
