package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/offcard/offcard/tt"
	"github.com/offcard/offcard/tthw"
)

// A --lib library is code offcard runs: its constructors run at load, its
// open may crash, exit the process or never return. So before offcard
// loads a library into its own process it loads and opens it in a probe
// process: offcard itself, re-executed with the hidden argument
// libProbeArg, which opens the device, provokes one error (so the
// library's last-error text is read once), closes the device and prints
// libProbeOK. Anything else (a crash, an exit before the answer, no answer
// within libProbeTimeout) refuses the library with one line, exit 2.
const (
	libProbeArg = "__offcard-lib-probe"
	libProbeOK  = "offcard-lib-probe: ok"
	libProbeErr = "offcard-lib-probe: error: "
)

// libProbeTimeout bounds the probe: loading the library and opening its
// device (a card's firmware load and device open take seconds to a
// minute); tests shorten it.
var libProbeTimeout = 120 * time.Second

// probeLib runs the probe process on lib and returns nil when it answered
// cleanly, else a bad-input error naming lib and what the probe saw.
func probeLib(lib string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--lib: cannot re-execute offcard to probe the library: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), libProbeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, libProbeArg, lib)
	cmd.Env = os.Environ()
	var out, errb probeOutput
	cmd.Stdout, cmd.Stderr = &out, &errb
	// The probe and whatever the library starts are one process group,
	// killed together; WaitDelay: a grandchild holding the pipes open
	// does not keep offcard waiting.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group
	}
	answer := strings.TrimSpace(out.String())
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return bad("--lib %s: loading and opening the library did not finish within %v in a probe process (killed): it hangs", lib, libProbeTimeout)
	case err == nil && answer == libProbeOK:
		return nil
	case strings.HasPrefix(answer, libProbeErr):
		return bad("--lib: %s", strings.TrimPrefix(answer, libProbeErr))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return bad("--lib %s: loading or opening the library killed a probe process (%v)%s", lib, ws.Signal(), crashLine(errb.String()))
		}
	}
	if err == nil {
		return bad("--lib %s: a probe process that loaded the library ended (exit 0) before it could answer: the library's constructor or open exits the process", lib)
	}
	return bad("--lib %s: loading or opening the library crashed a probe process (%v)%s", lib, err, crashLine(errb.String()))
}

// crashLine is the telling line of a crashed probe's stderr (the Go
// runtime's "SIGABRT: abort" or "[signal SIGSEGV: ...]", else its "fatal
// error: ..."), else its last line; "" when it wrote nothing.
func crashLine(stderr string) string {
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	for _, prefixes := range [][]string{{"SIG", "[signal SIG", "signal SIG"}, {"fatal error:"}} {
		for _, l := range lines {
			for _, p := range prefixes {
				if strings.HasPrefix(l, p) {
					return ": " + shortLine(strings.Trim(l, "[]"))
				}
			}
		}
	}
	if l := lines[len(lines)-1]; l != "" {
		return ": " + shortLine(l)
	}
	return ""
}

// shortLine is s on one line, cut to about 200 bytes (at a rune start).
func shortLine(s string) string {
	s = oneLine(s)
	if len(s) <= 200 {
		return s
	}
	i := 200
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// probeOutput keeps the first 64 KiB written to it (a probe's answer is
// one line; a hostile library may write without end).
type probeOutput struct{ b bytes.Buffer }

func (t *probeOutput) Write(p []byte) (int, error) {
	if room := 64<<10 - t.b.Len(); room > 0 {
		t.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (t *probeOutput) String() string { return t.b.String() }

// libProbeMain is the probe process: open lib's device, provoke an error,
// close, answer on stdout. It returns the exit code.
func libProbeMain(args []string, stdout io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stdout, libProbeErr+"probe: want one library path")
		return exitBad
	}
	lib := args[0]
	fail := func(err error) int {
		fmt.Fprintln(stdout, libProbeErr+oneLine(err.Error()))
		return exitBad
	}
	d, err := tthw.Open(lib, tthw.Options{})
	if err != nil {
		return fail(err)
	}
	// Freeing a tensor that was never allocated is refused: the library
	// reports it through its last error, which is read once here.
	if err := d.Free(tt.Tensor{ID: ^tt.TensorID(0)}); err == nil {
		_, _ = d.Close()
		return fail(fmt.Errorf("%s: freeing a tensor that was never allocated succeeded", lib))
	} else if strings.Contains(err.Error(), "unreadable pointer") {
		_, _ = d.Close()
		return fail(err)
	}
	if _, err := d.Close(); err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, libProbeOK)
	return exitOK
}
