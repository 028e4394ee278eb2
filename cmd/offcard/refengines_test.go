package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The reference engines under examples/ are run by make test with a short
// campaign whose seed is drawn per run (not hand-picked cases):
// $OFFCARD_ENGINE_SEED replays one. Their 200-case campaigns are measured
// by hand (README, "Reference engines"). The timeout is far above the
// default 30 s: make test runs packages in parallel, and on a 2-core
// machine at a load average of 30 to 40 an engine got under a tenth of a
// core (a numpy case of 0.8 s of CPU ran past 30 s); a hang still ends.

// refEngineCases is the campaign's size; the Python engine's stdlib back
// end (about 27 ms of CPU a token on the tiny model) runs stdlibCases.
const refEngineCases, stdlibCases = "6", "3"

func refEngineSeed(t *testing.T) string {
	t.Helper()
	if s := os.Getenv("OFFCARD_ENGINE_SEED"); s != "" {
		if _, err := strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("OFFCARD_ENGINE_SEED=%q: %v", s, err)
		}
		return s
	}
	return strconv.FormatUint(uint64(time.Now().UnixNano())%1_000_000_007, 10)
}

// campaignRefEngine runs a short random campaign against cmd and fails
// with the seed and the command that replays it; then it replays the
// hand-written scripts of examples/scripts (what rows an engine reads
// where its sequence never wrote: after a position jump, the prompt tile's
// padding and a finished sequence's rows; and every serving call of
// protocol version 3 at block boundaries), which a short campaign may not
// draw.
func campaignRefEngine(t *testing.T, cmd, cases string) {
	t.Helper()
	checkWire(t, "hello", "admit", "decode", "finish", "bye", "prefill_from", "verify", "copy_blocks")
	cmd = proxied(t, cmd)
	scripts, err := filepath.Glob("../../examples/scripts/*.script")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts in examples/scripts: %v", err)
	}
	for _, s := range scripts {
		if code, out, errs := runCLI(t, "replay", s, "--engine", cmd, "--timeout", "5m"); code != 0 || !strings.HasSuffix(out, "1 passed, 0 failed\n") {
			t.Fatalf("replay %s: exit %d\n%s%s", s, code, out, errs)
		}
	}
	seed := refEngineSeed(t)
	t0 := time.Now()
	code, out, errs := runCLI(t, "check", "--engine", cmd, "--cases", cases, "--seed", seed, "--timeout", "5m")
	t.Logf("%s: seed %s, %s cases in %v", cmd, seed, cases, time.Since(t0).Round(time.Millisecond))
	if code != 0 || !strings.HasSuffix(out, cases+" passed, 0 failed\n") {
		t.Fatalf("exit %d (replay: OFFCARD_ENGINE_SEED=%s go test -run '%s' ./cmd/offcard)\n%s%s", code, seed, t.Name(), out, errs)
	}
}

// needTool fails, or skips outside CI, when a tool a reference engine needs
// is missing (.ci/run installs them).
func needTool(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing (.ci/run installs it)", what)
	}
	t.Skipf("%s is missing (CI installs it; see .ci/run)", what)
}

// TestPythonEngine: the README's Python engine (examples/python-engine)
// negotiates versions 1 to 3 (serving calls in 3) and passes a short
// random campaign on both its back ends: the standard library (--stdlib)
// and numpy (an interpreter that imports it: python3, or Debian's
// /usr/bin/python3 with python3-numpy).
func TestPythonEngine(t *testing.T) {
	script, err := filepath.Abs("../../examples/python-engine/engine.py")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("stdlib", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err != nil {
			t.Fatal("python3 is not on PATH: the Python engine test needs it")
		}
		h, _ := servingHello(t)
		checkServes(t, []string{py, script, "--stdlib"}, h)
		campaignRefEngine(t, py+" "+script+" --stdlib", stdlibCases)
	})
	t.Run("numpy", func(t *testing.T) {
		for _, py := range []string{"python3", "/usr/bin/python3"} {
			if p, err := exec.LookPath(py); err == nil && exec.Command(p, "-c", "import numpy").Run() == nil {
				h, _ := servingHello(t)
				checkServes(t, []string{p, script}, h)
				campaignRefEngine(t, p+" "+script, refEngineCases)
				return
			}
		}
		needTool(t, "a python3 with numpy (Debian: python3-numpy)")
	})
}

// cppEngine is the C++ reference engine: $OFFCARD_CPP_ENGINE (make test
// builds build/cpp-engine and sets it), or one built here with g++ from
// this checkout's sources (cached in TMPDIR by their hash).
func cppEngine(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OFFCARD_CPP_ENGINE"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("OFFCARD_CPP_ENGINE=%s: %v", p, err)
		}
		return p
	}
	gxx, err := exec.LookPath("g++")
	if err != nil {
		needTool(t, "g++")
	}
	if _, err := os.Stat("/usr/include/nlohmann/json.hpp"); err != nil {
		needTool(t, "nlohmann/json.hpp (Debian: nlohmann-json3-dev)")
	}
	src, err := filepath.Abs("../../examples/cpp-engine")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(src, "*.[ch]pp"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no C++ sources in %s: %v", src, err)
	}
	h := sha256.New()
	var cpps []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
		if strings.HasSuffix(f, ".cpp") {
			cpps = append(cpps, f)
		}
	}
	out := filepath.Join(os.TempDir(), "offcard-cpp-engine-"+hex.EncodeToString(h.Sum(nil))[:16])
	if _, err := os.Stat(out); err == nil {
		return out
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	args := append([]string{"-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-o", tmp}, cpps...)
	if b, err := exec.Command(gxx, args...).CombinedOutput(); err != nil {
		t.Fatalf("g++ %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCppEngine: the C++ reference engine (examples/cpp-engine) passes a
// short random campaign claiming bit-exactness (--exact: full rows compared
// bit for bit with the oracle).
func TestCppEngine(t *testing.T) {
	campaignRefEngine(t, cppEngine(t)+" --exact", refEngineCases)
}
