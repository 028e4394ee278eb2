package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/tthw/tthwtest"
)

// ccLib compiles a small C library from src with cc.
func ccLib(t *testing.T, name, src string) string {
	t.Helper()
	dir := t.TempDir()
	c := filepath.Join(dir, name+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, name+".so")
	if b, err := exec.Command("cc", "-shared", "-fPIC", "-O0", "-o", so, c).CombinedOutput(); err != nil {
		t.Skipf("cc: %v\n%s", err, b)
	}
	return so
}

// hostileLoopback is the loopback with edits (all ABI symbols present).
func hostileLoopback(t *testing.T, name string, edits ...tthwtest.Edit) string {
	t.Helper()
	so, err := tthwtest.Build(filepath.Join(t.TempDir(), name+".so"), edits...)
	if err != nil {
		t.Skipf("building the loopback: %v", err)
	}
	return so
}

// A hostile --lib never runs inside offcard's process first (issue 33
// point 9): it is loaded and opened in a probe process, and a library
// whose probe does not answer cleanly is refused with one line, exit 2,
// within the probe's timeout plus a few seconds. The hostile sweep's
// command (check --device tt --lib L) is each case; replay, mutants and
// conform take the same path.
func TestHostileLib(t *testing.T) {
	defer func(d time.Duration) { libProbeTimeout = d }(libProbeTimeout)
	libProbeTimeout = 2 * time.Second
	// One loopback, hostile as OFFCARD_TEST_HOSTILE says (the probe
	// process inherits the variable).
	hostile := hostileLoopback(t, "hostile", tthwtest.Edit{File: "loopback.c",
		Old: "int32_t offcard_tt_open(uint32_t abi_version, const char *options, offcard_tt_device **out) {\n",
		New: `int32_t offcard_tt_open(uint32_t abi_version, const char *options, offcard_tt_device **out) {
  const char *h = getenv("OFFCARD_TEST_HOSTILE");
  if (h && !strcmp(h, "open never returns")) for (;;) {}
  if (h && !strcmp(h, "open segfaults")) *(volatile int *)out = *(volatile int *)8;
`}, tthwtest.Edit{File: "loopback.c",
		Old: "const char *offcard_tt_last_error(void) { return err_msg; }",
		New: `const char *offcard_tt_last_error(void) {
  const char *h = getenv("OFFCARD_TEST_HOSTILE");
  return h && !strcmp(h, "garbage last_error") ? (const char *)0xdeadbeef0 : err_msg;
}`})
	libs := []struct {
		name, lib, want string
	}{
		{"constructor segfault", ccLib(t, "segv", "__attribute__((constructor)) static void boom(void) { *(volatile int *)16 = 1; }\n"), "SIGSEGV"},
		{"constructor exit(0)", ccLib(t, "exit0", "#include <stdlib.h>\n__attribute__((constructor)) static void bye(void) { exit(0); }\n"), "exits the process"},
		{"constructor abort", ccLib(t, "abort", "#include <stdlib.h>\n__attribute__((constructor)) static void bye(void) { abort(); }\n"), "SIGABRT"},
		{"open never returns", hostile, "did not finish within 2s"},
		{"open segfaults", hostile, "SIGSEGV"},
		{"garbage last_error", hostile, "unreadable pointer"},
		{"not a library", ccLib(t, "empty", "int x;\n"), "does not export"},
	}
	for _, l := range libs {
		t.Setenv("OFFCARD_TEST_HOSTILE", l.name)
		for _, args := range [][]string{
			{"check", "--device", "tt", "--lib", l.lib, "--cases", "1"},
			{"conform", "--lib", l.lib},
		} {
			if l.name == "open never returns" && args[0] == "conform" {
				continue // the same probe; its timeout once is enough
			}
			t0 := time.Now()
			code, out, errs := runCLI(t, args...)
			el := time.Since(t0)
			if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, l.want) {
				t.Errorf("%s: %v: exit %d, want 2 and one line with %q\nstdout: %q\nstderr: %q", l.name, args[0], code, l.want, out, errs)
			}
			t.Logf("%s: %v: %v: %s", l.name, args[0], el.Round(time.Millisecond), strings.TrimSpace(errs))
			if el > libProbeTimeout+5*time.Second {
				t.Errorf("%s: %v took %v", l.name, args[0], el)
			}
		}
	}
	t.Setenv("OFFCARD_TEST_HOSTILE", "")
	if err := probeLib(hostile); err != nil {
		t.Errorf("the hostile loopback, not hostile: %v", err)
	}
	// The loopback itself passes the probe.
	if err := probeLib(tthwtest.Loopback(t)); err != nil {
		t.Errorf("the loopback: %v", err)
	}
}
