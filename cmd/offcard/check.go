package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/tthw"
)

func init() {
	commands["check"] = command{"run the property campaign: random schedules vs the ref oracle, shrunk failures", runCheck}
}

// checkReport is the --json document.
type checkReport struct {
	Device string                `json:"device"`
	Seed   uint64                `json:"seed"`
	Cases  int                   `json:"cases"`
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
	fs := newFlags(e, "check", "[--device sim|tt] [--lib PATH] [--engine 'CMD ARGS' [--timeout D]] [--cases N] [--seed S] [--json [--times]] [--save DIR]")
	device := fs.String("device", "sim", "device to run the engine on: sim, or tt (the card, through --lib)")
	engine := fs.String("engine", "", "run the tolerant mode against an engine process speaking the line protocol: `'CMD ARGS'`, split at spaces (no shell); a fresh process per schedule run")
	timeout := fs.Duration("timeout", 0, "with --engine: the longest a call may take before the engine counts as hung and is killed (default 10s; hello 60s)")
	lib := fs.String("lib", "", "the offcard_tt C ABI library `PATH` (with --device tt)")
	cases := fs.Int("cases", 200, "number of schedules")
	seed := fs.Uint64("seed", proptest.DefaultSeed, "campaign seed; case i runs with a seed derived from (S, i), case 0 with S itself")
	asJSON := fs.Bool("json", false, "print one JSON document (the summary line then goes to stderr)")
	times := fs.Bool("times", false, "with --json: add wall times (time_to_red_ns: campaign start to the first failing command, before shrinking; per case start_ns, elapsed_ns, time_to_red_ns)")
	save := fs.String("save", "", "write each failure's shrunk script into `DIR` (e.g. proptest/testdata/regressions)")
	if err := fs.parse(args); err != nil {
		return err
	}
	factory := checkFactory
	if *engine != "" {
		if *device != "sim" || *lib != "" {
			return bad("--engine runs the engine's own device: it goes without --device and --lib")
		}
		ef, err := engineFactory(*engine, *timeout)
		if err != nil {
			return err
		}
		defer ef.Close()
		factory, *device = ef.Factory, proptest.EngineDevice
	} else if *timeout != 0 {
		return bad("--timeout goes with --engine")
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
	if *times && !*asJSON {
		return bad("--times goes with --json")
	}
	opt := proptest.Options{Seed: *seed, Cases: *cases, Factory: factory, Base: proptest.Base{Device: *device}}
	if *device == proptest.CardDevice {
		opt.ReplayArgs = "--device tt --lib " + *lib
	}
	if *engine != "" {
		opt.ReplayArgs = fmt.Sprintf("--engine '%s'", *engine)
		if *timeout != 0 {
			opt.ReplayArgs += " --timeout " + timeout.String()
		}
	}
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
		var doc any = checkReport{Device: *device, Seed: *seed, Cases: *cases, Passed: passed, Failed: failed, Saved: saved, Result: rs}
		if *times {
			tr := timedReport{Device: *device, Seed: *seed, Cases: *cases, Passed: passed, Failed: failed, Saved: saved,
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
		if *engine != "" {
			fmt.Fprintf(out, "offcard check: engine %q (tolerant mode), seed %d, %d cases\n", *engine, *seed, *cases)
		} else {
			fmt.Fprintf(out, "offcard check: device %s, seed %d, %d cases\n", *device, *seed, *cases)
		}
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
	if failed > 0 {
		return errFound
	}
	return nil
}

// engineFactory is the factory of --engine CMD: a fresh process of CMD
// (split at spaces) per schedule run.
func engineFactory(cmd string, timeout time.Duration) (*proptest.EngineFactory, error) {
	argv := strings.Fields(cmd)
	if len(argv) == 0 {
		return nil, bad("--engine: empty command")
	}
	if timeout < 0 {
		return nil, bad("--timeout %v: want a positive duration", timeout)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, bad("--engine: %v", err)
	}
	return proptest.NewEngineFactory(proptest.EngineOptions{Command: argv, Timeout: timeout})
}

// cardFactory is the factory of --device tt --lib PATH: the engine on a
// fresh device of the library per schedule run, in the tolerant mode. The
// library is opened once here so that a bad path is a usage error.
func cardFactory(lib string) (proptest.Factory, error) {
	if lib == "" {
		return nil, bad("--device tt needs --lib PATH")
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
