package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/offcard/offcard/wire"
)

// An interrupted offcard (SIGINT: Ctrl-C; SIGTERM: a CI cancel) ends the
// engine processes it started (their process groups), runs every cleanup
// registered with atInterrupt (temporary directories such as the engine's
// exported weights, temporary output files, a mutants run's builds and
// checks), says so in one line on stderr, and exits 128+signal: 130 for
// SIGINT, 143 for SIGTERM. A second signal a second later exits at once.
var interrupt struct {
	sync.Mutex
	next int
	fns  map[int]func()
	sig  os.Signal // the signal received (nil: none yet)
}

// engineGrace is how long the engines get to end on SIGTERM before their
// process groups are killed.
const engineGrace = 2 * time.Second

// atInterrupt registers fn to run if offcard is interrupted; done
// unregisters it. Registered after the interrupt, fn runs at once.
func atInterrupt(fn func()) (done func()) {
	interrupt.Lock()
	if interrupt.sig != nil {
		interrupt.Unlock()
		fn()
		return func() {}
	}
	if interrupt.fns == nil {
		interrupt.fns = map[int]func(){}
	}
	id := interrupt.next
	interrupt.next++
	interrupt.fns[id] = fn
	interrupt.Unlock()
	return func() {
		interrupt.Lock()
		delete(interrupt.fns, id)
		interrupt.Unlock()
	}
}

// interrupted records sig and runs the cleanups, newest first, after the
// engines are ended. It returns false when an interrupt was already
// being handled.
func interrupted(sig os.Signal) bool {
	interrupt.Lock()
	if interrupt.sig != nil {
		interrupt.Unlock()
		return false
	}
	interrupt.sig = sig
	var ids []int
	for id := range interrupt.fns {
		ids = append(ids, id)
	}
	fns := interrupt.fns
	interrupt.fns = nil
	interrupt.Unlock()
	wire.Shutdown(engineGrace)
	for len(ids) > 0 {
		newest := 0
		for i, id := range ids {
			if id > ids[newest] {
				newest = i
			}
		}
		fns[ids[newest]]()
		ids = append(ids[:newest], ids[newest+1:]...)
	}
	return true
}

// signalCode is the exit code for an interrupt by sig: 128 + its number.
func signalCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

func init() { handleSignals() }

var handling sync.Once

// handleSignals makes SIGINT and SIGTERM interrupt offcard (see
// interrupt), from the start of the process.
func handleSignals() { handling.Do(func() { handleSignalsOn(os.Stderr) }) }

func handleSignalsOn(stderr io.Writer) {
	name := ""
	if len(os.Args) > 1 {
		name = os.Args[1] // the command, for the one line
	}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-ch
		code := signalCode(sig)
		t0 := time.Now()
		go func() {
			// A second signal exits at once, unless it is the same
			// interrupt delivered twice (the terminal's and a parent's).
			for range ch {
				if time.Since(t0) > time.Second {
					os.Exit(code)
				}
			}
		}()
		if !interrupted(sig) {
			return
		}
		fmt.Fprintf(stderr, "offcard %s: interrupted (%s): engines ended, temporary files removed\n", name, signalName(sig))
		os.Exit(code)
	}()
}

// waitIfInterrupted blocks a command that returns while its interrupt is
// handled: the handler exits when the cleanups are done.
func waitIfInterrupted() {
	for isInterrupted() {
		time.Sleep(time.Hour)
	}
}

// isInterrupted reports whether an interrupt is being handled.
func isInterrupted() bool {
	interrupt.Lock()
	defer interrupt.Unlock()
	return interrupt.sig != nil
}

// gated is a writer that drops everything once offcard is interrupted: a
// command whose engines were just killed does not report on them.
type gated struct{ w io.Writer }

func (g gated) Write(p []byte) (int, error) {
	if isInterrupted() {
		return len(p), nil
	}
	return g.w.Write(p)
}
