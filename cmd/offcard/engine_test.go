package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

// The test binary doubles as offcard-engine: with OFFCARD_TEST_ENGINE set
// it serves proptest.OpenSimEngine, faulting at its second decode as the
// variable says: crash, hang, garbage ("ok": no fault).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == libProbeArg { // the --lib probe process
		os.Exit(libProbeMain(os.Args[2:], os.Stdout))
	}
	if mode := os.Getenv("OFFCARD_TEST_ENGINE"); mode != "" {
		open := func(h wire.Hello) (wire.Engine, wire.Caps, error) {
			e, c, err := proptest.OpenSimEngine(h)
			if err != nil {
				return nil, c, err
			}
			return &faulty{Engine: e, Observer: e.(wire.Observer), mode: mode}, c, nil
		}
		if err := serveTestEngine(open); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type faulty struct {
	wire.Engine
	wire.Observer
	mode string
	n    int
}

func (f *faulty) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	if f.n++; f.n == 2 {
		switch f.mode {
		case "crash":
			fmt.Fprintln(os.Stderr, "engine: device timeout, aborting")
			os.Exit(3)
		case "hang":
			time.Sleep(time.Hour)
		case "garbage":
			fmt.Println("{\"ok\": tru")
		}
	}
	return f.Engine.Decode(b)
}

func (f *faulty) Reset() error { return f.Engine.(wire.Resetter).Reset() }

// testEngine is the test binary as an engine of mode, every protocol line
// of its sessions checked against the schema (checkWire).
func testEngine(t *testing.T, mode string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OFFCARD_TEST_ENGINE", mode)
	checkWire(t)
	return exe
}

func TestCheckEngine(t *testing.T) {
	exe := testEngine(t, "ok")
	checkWire(t, "hello", "admit", "decode", "finish", "bye")
	code, out, errs := runCLI(t, "check", "--engine", exe, "--cases", "3", "--seed", "7")
	if code != 0 || !strings.Contains(out, "(tolerant mode), seed 7, 3 cases") || !strings.HasSuffix(out, "3 passed, 0 failed\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

// A crash and a hang each fail the check (exit 1) with a clear report: the
// property engine, the call, the (shrunk) schedule up to it, a replay
// command naming the engine; never a hang of offcard. The saved script
// replays red against the same command. (A garbage line: proptest's
// TestEngineFaultsAndLies.)
func TestCheckEngineFaults(t *testing.T) {
	for _, tc := range []struct{ mode, timeout, detail string }{
		{"crash", "10s", "engine crashed answering decode: the engine closed its stdout (exit status 3); its stderr ends: engine: device timeout, aborting"},
		{"hang", "3s", "engine hung answering decode: no answer within 3s (killed)"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			exe := testEngine(t, tc.mode)
			dir := t.TempDir()
			t0 := time.Now()
			code, out, errs := runCLI(t, "check", "--engine", exe, "--cases", "1", "--seed", "8", "--timeout", tc.timeout, "--save", dir)
			if code != 1 || !strings.Contains(out, "property: engine") || !strings.Contains(out, tc.detail) ||
				!strings.Contains(out, fmt.Sprintf("replay: offcard check --engine '%s' --timeout %s --seed 8 --cases 1", exe, tc.timeout)) ||
				!strings.Contains(out, "shrunk schedule") {
				t.Fatalf("exit %d\n%s%s", code, out, errs)
			}
			if d := time.Since(t0); d > 30*time.Second {
				t.Fatalf("took %v", d)
			}
			saved, _ := filepath.Glob(filepath.Join(dir, "engine-8.script"))
			if len(saved) != 1 {
				t.Fatalf("saved %v", saved)
			}
			code, out, errs = runCLI(t, "replay", saved[0], "--engine", exe, "--timeout", tc.timeout)
			if code != 1 || !strings.Contains(out, "property: engine") {
				t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
			}
		})
	}
}

func TestCheckEngineUsage(t *testing.T) {
	exe := testEngine(t, "ok")
	for _, args := range [][]string{
		{"check", "--engine", "/nonexistent/engine"},
		{"check", "--engine", exe, "--device", "tt", "--lib", "x.so"},
		{"check", "--timeout", "1s"},
		{"check", "--engine", exe, "--timeout", "-1s"},
		{"replay", "x.script", "--engine", exe, "--device", "sim"},
	} {
		code, _, errs := runCLI(t, args...)
		if code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, errs)
		}
	}
}
