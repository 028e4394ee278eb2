package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/wire"
	"github.com/offcard/offcard/wire/wiretest"
)

// Every protocol line a test of this package exchanges with an engine is
// checked against the protocol's schema (wire/protocol.schema.json), both
// ways, on the pipe itself:
//   - the Go test engines (the test binary with OFFCARD_TEST_ENGINE) serve
//     through wiretest.Relay in their own process (serveTestEngine);
//   - an engine in another language runs behind the test binary as a
//     validating proxy (proxied: `TESTBINARY -offcard-wire-proxy CMD...`,
//     wiretest.Proxy), in the engine's process group, with its stderr.
//
// Each checked request/reply pair appends a line to $OFFCARD_WIRE_LOG:
// "ok OP", or "bad OP: what broke". checkWire points the variable at a
// file of the test's and, when the test ends, fails it on any "bad" line
// and on any op it needs that no line showed (so that a check that never
// ran cannot pass).

const (
	wireProxyArg = "-offcard-wire-proxy"
	wireLogEnv   = "OFFCARD_WIRE_LOG"
)

// wireProxyMain runs the test binary as the validating proxy when its
// first argument says so (before TestMain).
func wireProxyMain() {
	if len(os.Args) > 1 && os.Args[1] == wireProxyArg {
		os.Exit(wiretest.Proxy(os.Args[2:], wireLogger()))
	}
}

// wireLogger appends each checked pair to $OFFCARD_WIRE_LOG (nil when it
// is not set). One write per line, O_APPEND: the engines of a campaign
// run in parallel.
func wireLogger() wiretest.Checked {
	p := os.Getenv(wireLogEnv)
	if p == "" {
		return nil
	}
	return func(op string, req, rep error) {
		line := "ok " + op + "\n"
		if errs := joinErrs(req, rep); errs != "" {
			line = "bad " + op + ": " + errs + "\n"
		}
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "wire log:", err)
			os.Exit(4)
		}
		defer f.Close()
		if _, err := f.WriteString(line); err != nil {
			fmt.Fprintln(os.Stderr, "wire log:", err)
			os.Exit(4)
		}
	}
}

func joinErrs(errs ...error) string {
	var s []string
	for _, e := range errs {
		if e != nil {
			s = append(s, strings.ReplaceAll(e.Error(), "\n", " "))
		}
	}
	return strings.Join(s, "; ")
}

// serveTestEngine is wire.Serve on stdin/stdout, relayed through
// wiretest.Relay when $OFFCARD_WIRE_LOG is set.
func serveTestEngine(open wire.Open) error {
	checked := wireLogger()
	if checked == nil {
		return wire.Serve(os.Stdin, os.Stdout, open)
	}
	reqR, reqW := io.Pipe()
	repR, repW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := wire.Serve(reqR, repW, open)
		repW.Close()
		served <- err
	}()
	err := wiretest.Relay(os.Stdin, os.Stdout, reqW, repR, checked)
	repR.CloseWithError(io.ErrClosedPipe) // a reply nobody reads fails, never blocks
	if serr := <-served; serr != nil {
		return serr
	}
	return err
}

// proxied is cmd (an --engine command) behind the validating proxy.
func proxied(t *testing.T, cmd string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe + " " + wireProxyArg + " " + cmd
}

// checkWire logs the protocol lines of the engines the test starts (see
// above) and, at the test's end, fails it on a line that broke the schema
// or on an op of need that no checked line showed.
func checkWire(t *testing.T, need ...string) {
	t.Helper()
	p := t.TempDir() + "/wire.log"
	t.Setenv(wireLogEnv, p)
	t.Cleanup(func() {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		seen := map[string]int{}
		var bad []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			switch {
			case strings.HasPrefix(l, "ok "):
				seen[l[3:]]++
			case l != "":
				bad = append(bad, l)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%d protocol lines break wire/protocol.schema.json, the first: %s", len(bad), bad[0])
		}
		for _, op := range need {
			if seen[op] == 0 {
				t.Errorf("no %s request and reply were checked against the schema (checked: %v)", op, seen)
			}
		}
		if t.Failed() {
			ops := make([]string, 0, len(seen))
			for op, n := range seen {
				ops = append(ops, fmt.Sprintf("%s %d", op, n))
			}
			slices.Sort(ops)
			t.Logf("schema-checked pairs: %s", strings.Join(ops, ", "))
		}
	})
}

// The proxy in the path is shown red: an engine (a shell script) whose
// hello reply breaks the schema — a version 2 observation offered in
// version 1 — gets a "bad hello" line in the log naming the reply, what
// the schema rejects. (Relay's own table, wire/wiretest, has a malformed
// line of each direction.)
func TestWireProxyCatchesBadReply(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "engine.sh")
	if err := os.WriteFile(script, []byte(`read line; echo '{"ok":true,"version":1,"observes":["regime"]}'; while read line; do echo '{"ok":true}'; done`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "wire.log")
	t.Setenv(wireLogEnv, log)
	runCLI(t, "check", "--engine", proxied(t, sh+" "+script), "--cases", "1", "--hello-timeout", "10s")
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if l := strings.SplitN(string(b), "\n", 2)[0]; !strings.HasPrefix(l, `bad hello: reply "{\"ok\":true,\"version\":1,\"observes\":[\"regime\"]}" to hello: hello_reply:`) {
		t.Fatalf("wire log %q: want its first line to name the bad hello reply", b)
	}
}
