package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

func init() { procTestMain() }

// procTestMain runs the test binary as something else when the
// environment says so (before TestMain):
//   - OFFCARD_TEST_MAIN=1: as offcard itself (main, with its signal
//     handling), on the test binary's arguments;
//   - OFFCARD_TEST_ENGINE=hello-hang, hello-exit, hello-garbage: an engine
//     that never answers hello, exits before answering it, or answers it
//     with garbage; bigerror: an engine whose admits answer with a 16 MB
//     error string; setsid: an ok engine that leaves a setsid
//     grandchild holding its stderr;
//   - every engine appends a line to OFFCARD_TEST_STARTS (when set) as it
//     starts, and with OFFCARD_TEST_PIDFILE writes its pid there and
//     starts a sleep in its process group (the signal test).
//
// It returns only when the test binary runs the tests.
func procTestMain() {
	wireProxyMain()
	if os.Getenv("OFFCARD_TEST_MAIN") != "" {
		os.Unsetenv("OFFCARD_TEST_MAIN") // the engines it starts are engines
		handleSignals()
		main()
		os.Exit(99) // not reached
	}
	mode := os.Getenv("OFFCARD_TEST_ENGINE")
	if mode == "" {
		return
	}
	if p := os.Getenv("OFFCARD_TEST_STARTS"); p != "" {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
	}
	if p := os.Getenv("OFFCARD_TEST_PIDFILE"); p != "" {
		if err := exec.Command("sleep", "60").Start(); err != nil {
			os.Exit(5)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
			os.Exit(5)
		}
	}
	switch mode {
	case "hello-hang":
		fmt.Fprintln(os.Stderr, "engine: loading weights")
		time.Sleep(time.Hour)
	case "hello-exit":
		fmt.Fprintln(os.Stderr, "engine: cannot open /dev/tenstorrent/0")
		os.Exit(1)
	case "hello-garbage":
		fmt.Fprintln(os.Stderr, "engine: importing ttnn")
		bufio.NewReader(os.Stdin).ReadString('\n')
		fmt.Println("Traceback (most recent call last):")
		time.Sleep(time.Hour)
	case "setsid":
		c := exec.Command("sleep", "10")
		c.Stderr = os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			os.Exit(5)
		}
		mode = "ok"
	case "bigerror":
		open := func(h wire.Hello) (wire.Engine, wire.Caps, error) {
			e, c, err := proptest.OpenSimEngine(h)
			if err != nil {
				return nil, c, err
			}
			return bigError{Engine: e, Observer: e.(wire.Observer)}, c, nil
		}
		if err := serveTestEngine(open); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Setenv("OFFCARD_TEST_ENGINE", mode)
}

// bigError is offcard's engine (with what it observes) whose admits
// answer a 16 MB error (wire's TestEngineTextBounded sends 50 MB; this
// one runs once per shrink run).
type bigError struct {
	wire.Engine
	wire.Observer
}

func (b bigError) Reset() error { return b.Engine.(wire.Resetter).Reset() }

func (bigError) Prefill(qwen3.Prefill) ([]qwen3.Output, error) {
	return nil, errors.New("device error: " + strings.Repeat("x", 16<<20))
}

// engineStarts is the number of engine processes started since the call
// (each appends to OFFCARD_TEST_STARTS).
func engineStarts(t *testing.T) func() int {
	p := filepath.Join(t.TempDir(), "starts")
	t.Setenv("OFFCARD_TEST_STARTS", p)
	return func() int {
		b, _ := os.ReadFile(p)
		return bytes.Count(b, []byte("\n"))
	}
}

// oneLine2 checks the outcome of a run that must end with exit 2, no
// output and one line on stderr.
func exit2OneLine(t *testing.T, code int, out, errs string, want ...string) {
	t.Helper()
	if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2, nothing on stdout, one line on stderr", code, out, errs)
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Fatalf("stderr %q: want %q in it", errs, w)
		}
	}
}

// An engine that never answers hello, exits before answering or answers
// with garbage ends the run at once: exit 2 and one line naming the
// command and the tail of its stderr, within the hello timeout plus a few
// seconds; no case is reported, nothing is shrunk, and no more engines
// are started than the cases running at once. replay says the same.
func TestEngineHelloFaultsEndRun(t *testing.T) {
	for _, tc := range []struct{ mode, detail, stderr string }{
		{"hello-hang", "engine hung answering hello: no answer within 1s", "engine: loading weights"},
		{"hello-exit", "engine crashed answering hello", "engine: cannot open /dev/tenstorrent/0"},
		{"hello-garbage", "engine malformed answering hello", "engine: importing ttnn"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			exe := testEngine(t, tc.mode)
			starts := engineStarts(t)
			t0 := time.Now()
			code, out, errs := runCLI(t, "check", "--engine", exe, "--cases", "20", "--hello-timeout", "1s")
			exit2OneLine(t, code, out, errs, fmt.Sprintf("offcard check: engine %q failed its hello: ", exe), tc.detail, "its stderr ends: "+tc.stderr)
			if d := time.Since(t0); d > 8*time.Second {
				t.Errorf("took %v with --hello-timeout 1s", d)
			}
			if n := starts(); n < 1 || n > runtime.GOMAXPROCS(0) {
				t.Errorf("%d engines started for 20 cases on %d workers", n, runtime.GOMAXPROCS(0))
			}
			script := filepath.Join(t.TempDir(), "s.script")
			if err := os.WriteFile(script, []byte("model tiny seed=1\ndevice sim\nengine block=32 blocks=8 capacity=2\nadmit seq=0 prompt=3\ndecode steps=2\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errs = runCLI(t, "replay", script, "--engine", exe, "--hello-timeout", "1s")
			exit2OneLine(t, code, out, errs, "offcard replay: engine", tc.detail)
		})
	}
}

// A hang at a call is one failure: the engine is started once, the case
// is not shrunk nor merged (each run would wait out the timeout again).
func TestEngineHangRunsOnce(t *testing.T) {
	exe := testEngine(t, "hang")
	starts := engineStarts(t)
	t0 := time.Now()
	code, out, errs := runCLI(t, "check", "--engine", exe, "--cases", "1", "--seed", "8", "--timeout", "1s")
	if code != 1 || !strings.Contains(out, "engine hung answering decode: no answer within 1s") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if n := starts(); n != 1 {
		t.Errorf("the hung case started %d engines, want 1", n)
	}
	if d := time.Since(t0); d > 8*time.Second {
		t.Errorf("took %v with --timeout 1s", d)
	}
}

// An empty or blank --engine is refused (a CI variable that is unset must
// not test offcard's own engine instead), as are non-positive timeouts
// and the engine flags without --engine.
func TestEngineFlagsRefused(t *testing.T) {
	exe := testEngine(t, "ok")
	for _, args := range [][]string{
		{"check", "--engine", ""},
		{"check", "--engine", "   "},
		{"check", "--engine=", "--cases", "1"},
		{"replay", "x.script", "--engine", ""},
		{"check", "--engine", exe, "--timeout", "0s"},
		{"check", "--engine", exe, "--hello-timeout", "0s"},
		{"check", "--engine", exe, "--hello-timeout", "-1s"},
		{"check", "--hello-timeout", "1s"},
		{"mutants", "--hello-timeout", "1s"},
		{"mutants", "--engine", "--timeout", "0s"},
	} {
		code, out, errs := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and one line", args, code, out, errs)
		}
	}
}

// offcard's own environment failing (TMPDIR missing: the weights cannot
// be exported for the engine) is exit 2 and one line, not a finding
// against the engine.
func TestEngineTmpdirMissing(t *testing.T) {
	exe := testEngine(t, "ok")
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	code, out, errs := runCLI(t, "check", "--engine", exe, "--cases", "5")
	exit2OneLine(t, code, out, errs, "offcard check: export the synthetic weights for the engine: ", "missing")
}

// A failure of offcard's own runner ("N cases did not run") is exit 3.
func TestRunnerFailureExit3(t *testing.T) {
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return panicky{s}, err
	}
	code, _, errs := runCLI(t, "check", "--cases", "1")
	if code != 3 || !strings.Contains(errs, "1 cases did not run") {
		t.Fatalf("exit %d, stderr %q; want 3", code, errs)
	}
}

// panicky is a SUT whose findings observer panics inside the runner.
type panicky struct{ proptest.SUT }

func (panicky) TakeFindings() []string { panic("runner bug") }

// A 16 MB error string from the engine does not make a 16 MB report: the
// whole report stays small.
func TestEngineBigErrorClipped(t *testing.T) {
	exe := testEngine(t, "bigerror")
	code, out, errs := runCLI(t, "check", "--engine", exe, "--cases", "1", "--seed", "8")
	if code != 1 || len(out)+len(errs) > 64<<10 {
		t.Fatalf("exit %d, a report of %d bytes:\n%.3000s%.3000s", code, len(out)+len(errs), out, errs)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 4000 {
			t.Fatalf("a report line of %d bytes: %.200s", len(l), l)
		}
	}
}

// An engine that leaves a setsid grandchild holding its stderr costs no
// seconds per case (cmd.WaitDelay): a few cases take about what they
// take without it.
func TestEngineGrandchildHoldsStderr(t *testing.T) {
	run := func(mode string) time.Duration {
		exe := testEngine(t, mode)
		t0 := time.Now()
		code, out, errs := runCLI(t, "check", "--engine", exe, "--cases", "4", "--seed", "3")
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", mode, code, out, errs)
		}
		return time.Since(t0)
	}
	ok, held := run("ok"), run("setsid")
	if held > 2*ok+4*time.Second { // without WaitDelay: about 7s more per case
		t.Errorf("4 cases: %v with a grandchild holding stderr, %v without", held, ok)
	}
}

// SIGTERM and SIGINT to a running `offcard check --engine`: exit 143 and
// 130 with one line, the engine's process group (the engine and what it
// started) gone, and nothing of offcard's left in TMPDIR (the exported
// weights) nor beside the --junit output (its temporary file).
func TestEngineSignal(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGTERM, 143}, {syscall.SIGINT, 130}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			checkWire(t, "hello")
			dir, tmp := t.TempDir(), t.TempDir()
			pidFile, junit := filepath.Join(dir, "pid"), filepath.Join(dir, "report.xml")
			cmd := exec.Command(exe, "check", "--engine", exe, "--cases", "1", "--seed", "8", "--timeout", "1h", "--junit", junit)
			cmd.Env = append(os.Environ(), "OFFCARD_TEST_MAIN=1", "OFFCARD_TEST_ENGINE=hang", "OFFCARD_TEST_PIDFILE="+pidFile, "TMPDIR="+tmp)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			pid := 0
			for t0 := time.Now(); pid == 0; time.Sleep(20 * time.Millisecond) {
				if b, err := os.ReadFile(pidFile); err == nil {
					fmt.Sscan(string(b), &pid)
				}
				if time.Since(t0) > 20*time.Second {
					t.Fatalf("the engine did not start: %s", stderr.String())
				}
			}
			if left, _ := os.ReadDir(tmp); len(left) == 0 {
				t.Fatal("no weights in TMPDIR while the engine runs: the test would prove nothing")
			}
			time.Sleep(200 * time.Millisecond) // into the session
			t0 := time.Now()
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("offcard did not exit within 15s of %v", tc.sig)
			}
			if code := cmd.ProcessState.ExitCode(); code != tc.code || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "offcard check: interrupted") {
				t.Fatalf("exit %d, stderr %q; want %d and one line", code, stderr.String(), tc.code)
			}
			if d := time.Since(t0); d > 5*time.Second {
				t.Errorf("exited %v after the signal", d)
			}
			gone := false
			for t1 := time.Now(); !gone && time.Since(t1) < 3*time.Second; time.Sleep(20 * time.Millisecond) {
				gone = errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
			}
			if !gone {
				syscall.Kill(-pid, syscall.SIGKILL)
				t.Errorf("the engine's process group %d outlived offcard", pid)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("TMPDIR holds %v after the signal", left)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*report.xml*")); len(left) != 0 {
				t.Errorf("the --junit output left %v", left)
			}
		})
	}
}
