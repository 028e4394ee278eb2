package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

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
	device := fs.String("device", "", "run on this device instead of the script's device line: sim, or tt (the card, through --lib)")
	lib := fs.String("lib", "", "the offcard_tt C ABI library `PATH` (with --device tt)")
	helloTimeout := helloTimeoutFlag(fs)
	var engineF *proptest.EngineFactory
	asJSON := fs.Bool("json", false, "print one JSON document (the summary line then goes to stderr)")
	path, err := fs.parseOne(args, "a script FILE (e.g. proptest/testdata/regressions/NAME.script)")
	if err != nil {
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
	case "":
	case "sim":
		s.Scenario.Device = "sim"
	case "tt":
		if *lib == "" {
			return bad("--device tt needs --lib PATH")
		}
		return bad("--device tt is not available yet: the engine has no card factory (run with --device sim)")
	default:
		return bad("--device %q: want sim or tt", *device)
	}
	if *lib != "" && *device != "tt" {
		return bad("--lib goes with --device tt")
	}
	factory := checkFactory
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
	case s.Scenario.Device == proptest.EngineDevice:
		return bad("%s: a script saved from an engine: replay it with --engine 'CMD'", path)
	case s.Scenario.Device != "sim":
		return bad("%s: device %q: only sim is available yet", path, s.Scenario.Device)
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
		fmt.Fprintf(out, "offcard replay: %s, device %s, %d commands\n", path, s.Scenario.Device, len(s.Commands))
		if fail != nil {
			fmt.Fprintf(out, "FAIL %s\n", path)
			fmt.Fprintf(out, "  property: %s\n", fail.Property)
			if len(fail.Also) > 0 {
				fmt.Fprintf(out, "  also failed at that step: %s\n", strings.Join(fail.Also, ", "))
			}
			fmt.Fprintf(out, "  first failing step: %s\n", fail.Where())
			fmt.Fprintf(out, "  detail: %s\n", fail.Detail)
			if fail.Finding != "" {
				fmt.Fprintf(out, "  strict finding: %s\n", fail.Finding)
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
