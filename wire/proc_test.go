package wire_test

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

// shEngine is an engine written in sh: script runs with sh -c.
func shEngine(t *testing.T, script string) []string {
	t.Helper()
	return []string{"sh", "-c", script}
}

// helloOK is a hello reply the client accepts.
var helloOK = fmt.Sprintf(`{"ok":true,"version":%d,"engine":"sh"}`, wire.Version)

// groupGone waits up to 3s for process group pgid to be empty.
func groupGone(pgid int) bool {
	for t0 := time.Now(); time.Since(t0) < 3*time.Second; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
	}
	return false
}

// An engine that never answers hello, exits before answering it, or
// writes garbage instead is a *StartError naming the command and the tail
// of its stderr, within the hello timeout plus a little, and its process
// group (with what it started) is gone.
func TestHelloFaults(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name, script, kind, detail, stderr string
	}{
		{"never answers", "echo loading weights >&2; sleep 3600 & sleep 3600", wire.Hung, "no answer within 500ms (killed, the hello timeout)", "loading weights"},
		{"exits", "echo cannot open /dev/tenstorrent/0 >&2; exit 4", wire.Crashed, "exit status 4", "cannot open /dev/tenstorrent/0"},
		{"garbage", "echo importing ttnn >&2; read l; echo 'Traceback (most recent call last):'; sleep 3600", wire.Malformed, "Traceback", "importing ttnn"},
		{"refuses", `echo no card >&2; read l; echo '{"ok":false,"error":"no card found"}'; sleep 3600`, "", "engine refused hello: no card found", "no card"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := shEngine(t, tc.script)
			t0 := time.Now()
			c, err := wire.Start(wire.Options{Command: cmd, HelloTimeout: timeout}, hello(t))
			took := time.Since(t0)
			if c != nil {
				c.Close()
				t.Fatal("Start succeeded")
			}
			var se *wire.StartError
			check(t, errors.As(err, &se) && se.Started, "%v: want a StartError of a started engine", err)
			msg := err.Error()
			check(t, strings.HasPrefix(msg, fmt.Sprintf("engine %q failed its hello: ", strings.Join(cmd, " "))), "%q: names the command", msg)
			check(t, strings.Contains(msg, tc.detail) && strings.Contains(msg, "its stderr ends: "+tc.stderr), "%q: want %q and the stderr tail %q", msg, tc.detail, tc.stderr)
			check(t, strings.Count(msg, "its stderr ends") == 1 && !strings.Contains(msg, "\n"), "%q: one line, the stderr tail once", msg)
			var f *wire.FaultError
			if tc.kind != "" {
				check(t, errors.As(err, &f) && f.Kind == tc.kind && f.Op == wire.OpHello, "%v: want a %s fault at hello", err, tc.kind)
			}
			check(t, took < timeout+3*time.Second, "took %v (hello timeout %v)", took, timeout)
		})
	}
}

// The process group of an engine that hung at hello is gone after Start
// returns: the sleep it started in the background too.
func TestHelloHangKillsGroup(t *testing.T) {
	pidFile := t.TempDir() + "/pid"
	_, err := wire.Start(wire.Options{Command: shEngine(t, "echo $$ > "+pidFile+"; sleep 3600 & sleep 3600"), HelloTimeout: 300 * time.Millisecond}, hello(t))
	check(t, err != nil, "Start succeeded")
	b, err := os.ReadFile(pidFile)
	must(t, err)
	var pid int
	_, err = fmt.Sscan(string(b), &pid)
	must(t, err)
	check(t, groupGone(pid), "process group %d still has processes", pid)
}

// A grandchild that keeps the engine's stderr (and stdout) open after
// setsid does not hold the session: Close returns within WaitDelay and
// the bye, not after the kill timeouts (7s before WaitDelay).
func TestGrandchildHoldsStderr(t *testing.T) {
	exe, err := os.Executable()
	must(t, err)
	t.Setenv("OFFCARD_WIRE_TEST_ENGINE", "ok")
	for _, hold := range []string{"setsid sleep 5 >/dev/null &", "setsid sleep 5 &"} {
		t.Run(hold, func(t *testing.T) {
			c, err := wire.Start(wire.Options{Command: []string{"sh", "-c", hold + ` exec "$0"`, exe}}, hello(t))
			must(t, err)
			_, err = schedule(c, 2)
			must(t, err)
			t0 := time.Now()
			must(t, c.Close())
			check(t, time.Since(t0) < 1500*time.Millisecond, "Close took %v", time.Since(t0))
		})
	}
}

// An engine that exits while a grandchild holds its stdout is a crash
// (seen by its exit), not a hang waiting out the timeout.
func TestCrashWithStdoutHeld(t *testing.T) {
	c, err := wire.Start(wire.Options{Command: shEngine(t, "setsid sleep 5 & read l; echo '"+helloOK+"'; read l; echo dying >&2; exit 7"), Timeout: time.Minute}, hello(t))
	must(t, err)
	defer c.Close()
	t0 := time.Now()
	_, err = c.Decode([]qwen3.Step{{Seq: 1, Token: 1, Pos: 0, Blocks: []int32{0}}})
	var f *wire.FaultError
	check(t, errors.As(err, &f) && f.Kind == wire.Crashed && strings.Contains(f.Detail, "exit status 7"), "%v: want a crash with exit status 7", err)
	check(t, time.Since(t0) < 3*time.Second, "took %v", time.Since(t0))
}

// Every text an engine sends is clipped in what the client reports, and
// a reply line far past what the call can need is not read whole: a
// 50 MB error string is a malformed reply after ~8 MB read, and the
// client allocates a bounded amount for it; a 2 MB one is a refusal with
// its text clipped.
func TestEngineTextBounded(t *testing.T) {
	big := func(n int) string {
		return fmt.Sprintf(`read l; echo '%s'; read l; printf '{"ok":false,"error":"'; head -c %d /dev/zero | tr '\0' x; printf '"}\n'; sleep 3600`, helloOK, n)
	}
	step := []qwen3.Step{{Seq: 1, Token: 1, Pos: 0, Blocks: []int32{0}}}

	c, err := wire.Start(wire.Options{Command: shEngine(t, big(50<<20)), Timeout: 20 * time.Second}, hello(t))
	must(t, err)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err = c.Decode(step)
	runtime.ReadMemStats(&m1)
	c.Close()
	var f *wire.FaultError
	check(t, errors.As(err, &f) && f.Kind == wire.Malformed && strings.Contains(f.Detail, "not read further"), "%v: want a malformed reply", err)
	check(t, len(err.Error()) < 4000, "a report of %d bytes", len(err.Error()))
	alloc := m1.TotalAlloc - m0.TotalAlloc
	check(t, alloc < 40<<20, "the client allocated %d MB for a 50 MB line", alloc>>20)
	t.Logf("the client allocated %d MB for a 50 MB line", alloc>>20)

	c, err = wire.Start(wire.Options{Command: shEngine(t, big(2<<20)), Timeout: 20 * time.Second}, hello(t))
	must(t, err)
	defer c.Close()
	_, err = c.Decode(step)
	var r *wire.RefusedError
	check(t, errors.As(err, &r), "%v: want a refusal", err)
	check(t, len(r.Msg) < 1100 && strings.HasSuffix(r.Msg, fmt.Sprintf("... (%d bytes)", 2<<20)), "refusal text of %d bytes: %.80q", len(r.Msg), r.Msg)
	check(t, len(err.Error()) < 1200, "a report of %d bytes", len(err.Error()))
}

// An empty or blank command is refused before anything starts.
func TestEmptyCommand(t *testing.T) {
	for _, cmd := range [][]string{nil, {""}, {"  "}} {
		_, err := wire.Start(wire.Options{Command: cmd}, hello(t))
		check(t, err != nil, "%q: started", cmd)
	}
}

// A hello answered with a 3 MB unknown field, after 100 KB of stderr: the
// one line stays short and still ends with the stderr's last words.
func TestHelloTextBounded(t *testing.T) {
	script := `head -c 100000 /dev/zero | tr '\0' e >&2; echo last words >&2; read l; printf '{"ok":true,"'; head -c 3000000 /dev/zero | tr '\0' f; printf '":1}\n'; sleep 3600`
	_, err := wire.Start(wire.Options{Command: shEngine(t, script), HelloTimeout: 10 * time.Second}, hello(t))
	var f *wire.FaultError
	check(t, errors.As(err, &f) && f.Kind == wire.Malformed, "%.300v: want a malformed hello", err)
	msg := err.Error()
	check(t, len(msg) < 4000 && strings.HasSuffix(msg, "elast words") && !strings.Contains(msg, "\n"), "%d bytes: %.200q ... %.200q", len(msg), msg, msg[max(0, len(msg)-200):])
}
