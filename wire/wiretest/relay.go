package wiretest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
)

// A Checked is told about each line Relay forwarded: the request's op (as
// far as the line says one) and whether it and its reply validated
// (Request and Reply nil when they did; Reply is also nil when no reply
// came: the engine closed its stdout first).
type Checked func(op string, request, reply error)

// Relay forwards protocol lines between offcard and an engine, unchanged:
// each request line read from requests is written to engineIn, then one
// reply line read from engineOut is written to replies. Every request is
// validated (ValidateRequest), and every reply against the op it answers
// (ValidateReply); each pair is reported to checked, which may be nil.
// Relay returns when requests ends (then it closes engineIn) or the engine
// closes its stdout, with the error of a failed read or write (nil at an
// end of file).
func Relay(requests io.Reader, replies io.Writer, engineIn io.WriteCloser, engineOut io.Reader, checked Checked) error {
	defer engineIn.Close()
	in := bufio.NewReaderSize(requests, 1<<16)
	out := bufio.NewReaderSize(engineOut, 1<<16)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) == 0 {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		}
		op, reqErr := ValidateRequest(line)
		if reqErr != nil {
			var r struct{ Op string }
			if json.Unmarshal(line, &r) == nil {
				op = r.Op
			}
			reqErr = fmt.Errorf("request %s: %w", clip(line), reqErr)
		}
		if _, err := engineIn.Write(line); err != nil {
			report(checked, op, reqErr, nil)
			return err
		}
		rep, err := out.ReadBytes('\n')
		if len(rep) == 0 {
			report(checked, op, reqErr, nil)
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return err
		}
		var repErr error
		if slices.Contains(Defs, op+"_reply") {
			repErr = ValidateReply(op, rep)
		} else { // a request that names no op of the protocol: any reply
			repErr = Validate("reply", rep)
		}
		if repErr != nil {
			repErr = fmt.Errorf("reply %s to %s: %w", clip(rep), op, repErr)
		}
		report(checked, op, reqErr, repErr)
		if _, err := replies.Write(rep); err != nil {
			return err
		}
	}
}

func report(c Checked, op string, req, rep error) {
	if c != nil {
		c(op, req, rep)
	}
}

// Proxy runs argv (an engine's command) as a child with the caller's
// stderr and environment, and relays the caller's stdin and stdout to it
// through Relay: a validating proxy to put between offcard and an engine
// written in any language. The child stays in the caller's process group,
// so a kill of the group (offcard's timeout, SIGINT) reaches it. Proxy
// returns the child's exit code (1 when a signal ended it, 127 when it
// could not start), after the child ended.
func Proxy(argv []string, checked Checked) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "wiretest proxy: no engine command")
		return 127
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stderr = os.Stderr
	in, err := c.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wiretest proxy:", err)
		return 127
	}
	out, err := c.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wiretest proxy:", err)
		return 127
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "wiretest proxy:", err)
		return 127
	}
	if err := Relay(os.Stdin, os.Stdout, in, out, checked); err != nil {
		fmt.Fprintln(os.Stderr, "wiretest proxy:", err)
	}
	err = c.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return ee.ExitCode()
	default: // a signal ended it
		fmt.Fprintln(os.Stderr, "wiretest proxy:", err)
		return 1
	}
}
