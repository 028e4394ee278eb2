package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/offcard/offcard/proptest"
)

func init() {
	commands["replay"] = command{"run a saved script (what check --save writes) and report like check", runReplay}
}

// replayReport is the --json document of offcard replay.
type replayReport struct {
	Script      string            `json:"script"`
	Device      string            `json:"device"`
	Passed      bool              `json:"passed"`
	Commands    int               `json:"commands"`
	DeviceSteps int               `json:"device_steps"`
	Failure     *proptest.Failure `json:"failure,omitempty"`
}

func runReplay(e *env, args []string) error {
	fs := newFlags(e, "replay", "FILE.script [--device sim|tt --lib PATH | --engine 'CMD ARGS' [--timeout D] [--hello-timeout D]] [--json]")
	engine := fs.String("engine", "", "replay against an engine process speaking the line protocol (tolerant mode): `'CMD ARGS'`, as check --engine")
	timeout := fs.Duration("timeout", 0, "with --engine: the longest a call may take (default 30s)")
	device := fs.String("device", "", "run on this device instead of the script's device line: sim, or tt (the card, through --lib; --lib alone runs a script saved by check --device tt on the card, and without --lib such a script runs on sim)")
	lib := fs.String("lib", "", "the offcard_tt C ABI library `PATH` (with --device tt)")
	helloTimeout := helloTimeoutFlag(fs)
	var engineF *proptest.EngineFactory
	asJSON := fs.Bool("json", false, "print one JSON document (the summary line then goes to stderr)")
	path, err := fs.parseOne(args, "a script FILE (e.g. proptest/testdata/regressions/NAME.script)")
	if err != nil {
		return err
	}
	if err := positiveTimeout(fs, *timeout); err != nil {
		return err
	}
	s, err := proptest.ReadScriptFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return bad("%s: no such file", path)
		}
		return badInput{err}
	}
	switch *device {
	case "", "sim", "tt":
	default:
		return bad("--device %q: want sim or tt", *device)
	}
	factory := checkFactory
	note := ""
	switch {
	case flagSet(fs, "engine"):
		if *device != "" || *lib != "" {
			return bad("--engine goes without --device and --lib")
		}
		ef := engineFlags{fs: fs, timeout: timeout, helloTimeout: helloTimeout}
		if engineF, err = ef.factory(*engine); err != nil {
			return err
		}
		defer atInterrupt(func() { engineF.Close() })()
		defer engineF.Close()
		factory, s.Scenario.Device = engineF.Factory, proptest.EngineDevice
	case *timeout != 0:
		return bad("--timeout goes with --engine")
	case *device == "tt" || *device == "" && *lib != "":
		if *lib == "" {
			return bad("--device tt needs --lib PATH")
		}
		if s.Scenario.Device != proptest.CardDevice && s.Scenario.Device != "sim" {
			return bad("%s: a script saved from an engine: replay it with --engine 'CMD'", path)
		}
		f, err := cardFactory(*lib)
		if err != nil {
			return err
		}
		factory, s.Scenario.Device = f, proptest.CardDevice
	case *lib != "":
		return bad("--lib goes with --device tt")
	case *device == "sim":
		s.Scenario.Device = "sim"
	case s.Scenario.Device == proptest.EngineDevice:
		return bad("%s: a script saved from an engine: replay it with --engine 'CMD'", path)
	case s.Scenario.Device == proptest.CardDevice:
		// No library: the engine on the simulator (exact mode) runs the
		// same schedule; the card needs --lib.
		s.Scenario.Device = "sim"
		note = " (saved from --device tt; replayed on sim: add --device tt --lib PATH to run it on the card)"
	case s.Scenario.Device != "sim":
		return bad("%s: device %q: want sim or tt", path, s.Scenario.Device)
	}
	if engineF == nil && flagSet(fs, "hello-timeout") {
		return bad("--hello-timeout goes with --engine")
	}
	fail, stats, err := proptest.RunScript(s, factory)
	if engineF != nil && engineF.Failed() != nil {
		return engineSetupErr(engineF.Failed())
	}
	if err != nil {
		// The script itself is invalid (a command whose precondition
		// fails): bad input, not a finding.
		return badInput{fmt.Errorf("%s: %w", path, err)}
	}
	out := bufio.NewWriter(e.stdout)
	summary := "1 passed, 0 failed"
	if fail != nil {
		summary = "0 passed, 1 failed"
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(replayReport{Script: path, Device: s.Scenario.Device, Passed: fail == nil,
			Commands: stats.Commands, DeviceSteps: stats.DeviceSteps, Failure: fail}); err != nil {
			return err
		}
		fmt.Fprintln(e.stderr, summary)
	} else {
		fmt.Fprintf(out, "offcard replay: %s, device %s, %d %s%s\n", path, s.Scenario.Device, len(s.Commands), plural(len(s.Commands), "command"), note)
		if fail != nil {
			fmt.Fprintf(out, "FAIL %s\n", path)
			fmt.Fprintf(out, "  property: %s\n", fail.Property)
			for _, a := range fail.AlsoLines() {
				fmt.Fprintf(out, "  also failed at that step: %s\n", a)
			}
			fmt.Fprintf(out, "  first failing step: %s\n", fail.Where())
			fmt.Fprintf(out, "  detail: %s\n", fail.Detail)
			if fail.Finding != "" {
				fmt.Fprintf(out, "  strict finding: %s\n", fail.Finding)
			}
			if fail.Grids != "" {
				fmt.Fprint(out, indent(fail.Grids)+"\n")
			}
		}
		fmt.Fprintln(out, summary)
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if fail != nil {
		return errFound
	}
	return nil
}
