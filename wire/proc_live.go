package wire

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// StartError is an engine that could not be started or did not complete
// its hello: it could not be executed, exited before answering, hung past
// the hello timeout, wrote a line that is not a reply, refused the hello
// or disagreed on the protocol. It is a broken setup, not a finding about
// a schedule: a campaign stops at it. The process is gone.
type StartError struct {
	Command []string
	// Started: the process ran (false: it could not be executed).
	Started bool
	Err     error
	// Stderr is the tail of the engine's stderr (clipped).
	Stderr string
}

func (e *StartError) Error() string {
	cmd := strings.Join(e.Command, " ")
	if !e.Started {
		return fmt.Sprintf("engine %q could not be started: %v", cmd, e.Err)
	}
	detail, stderr := e.Err.Error(), e.Stderr
	var f *FaultError
	if errors.As(e.Err, &f) {
		detail, stderr = fmt.Sprintf("engine %s answering %s: %s", f.Kind, f.Op, f.Detail), f.Stderr
	}
	s := fmt.Sprintf("engine %q failed its hello: %s", cmd, clipText(detail, maxErrorText))
	if stderr != "" {
		s += "; its stderr ends: " + stderr // a clipped tail
	}
	return s
}

func (e *StartError) Unwrap() error { return e.Err }

// Bounds of what the client keeps of the engine's text.
const (
	// maxErrorText bounds any text of the engine in an error (an error
	// reply, a fault's detail, a hello error).
	maxErrorText = 1000
	// waitDelay bounds the wait for the engine's stderr to close after it
	// exited (exec.Cmd.WaitDelay): a grandchild that keeps it open (a
	// daemon started with setsid) does not hold the session.
	waitDelay = 200 * time.Millisecond
	// exitGrace is how long a call waits for the replies still in the pipe
	// once the engine exited (its stdout may be held open by a grandchild,
	// so end of file is not waited for).
	exitGrace = 500 * time.Millisecond
	// replyBase and replyPerOutput bound one reply line: replyBase plus,
	// per output the request asks for, replyPerOutput plus three bytes per
	// vocabulary entry (a full row in base64 is 8/3 bytes per entry). A
	// longer line is Malformed and is not read further, so an engine's
	// text cannot take the client's memory (a 50 MB error string).
	replyBase      = 8 << 20
	replyPerOutput = 64 << 10
)

// clipText is s on one line of valid UTF-8, at most max bytes (then ended
// by "... (N bytes)").
func clipText(s string, max int) string {
	n := len(s)
	if n > max {
		i := max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i]
	}
	s = strings.ToValidUTF8(s, "?")
	s = strings.Join(strings.Fields(s), " ")
	if n > max {
		s += fmt.Sprintf("... (%d bytes)", n)
	}
	return s
}

// live is every engine process started and not yet ended, for Shutdown.
var live struct {
	sync.Mutex
	clients map[*Client]struct{}
	down    bool
}

// errShutdown is Start's error once Shutdown ran.
var errShutdown = errors.New("offcard is shutting down")

// track adds c to the live set; false (and nothing added) after Shutdown.
func track(c *Client) bool {
	live.Lock()
	defer live.Unlock()
	if live.down {
		return false
	}
	if live.clients == nil {
		live.clients = map[*Client]struct{}{}
	}
	live.clients[c] = struct{}{}
	return true
}

func untrack(c *Client) {
	live.Lock()
	delete(live.clients, c)
	live.Unlock()
}

// Shutdown ends every engine process started by Start that still runs,
// for a command that was interrupted (SIGINT, SIGTERM): each process group
// is asked to terminate (SIGTERM), and after grace, or as soon as every
// engine has exited, killed (SIGKILL). Start fails from then on. It
// returns when the engines are gone (or after a few seconds more at most).
func Shutdown(grace time.Duration) {
	live.Lock()
	live.down = true
	cs := make([]*Client, 0, len(live.clients))
	for c := range live.clients {
		cs = append(cs, c)
	}
	live.Unlock()
	for _, c := range cs {
		terminateProcess(c.cmd)
	}
	deadline := time.After(grace)
	for _, c := range cs {
		select {
		case <-c.exited:
		case <-deadline:
		}
	}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); c.kill() }()
	}
	wg.Wait()
}
