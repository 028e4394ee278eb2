package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// A command is one offcard subcommand.
type command struct {
	summary string
	run     func(env *env, args []string) error
}

var commands = map[string]command{
	"generate": {"run the ref oracle on a prompt and print the greedy continuation", runGenerate},
	"export":   {"write a synthetic model as config.json + model.safetensors", runExport},
}

// env is what a command may touch: its streams. Tests run commands in-process.
type env struct {
	stdout, stderr io.Writer
	// stderrTTY is true when progress may be drawn on stderr.
	stderrTTY bool
}

// Exit codes of the command-line contract.
const (
	exitOK    = 0
	exitFound = 1 // a check found a difference
	exitBad   = 2 // bad usage or bad input
)

// badInput marks an error caused by the user's arguments or files: exit 2.
type badInput struct{ err error }

func (e badInput) Error() string { return e.err.Error() }
func (e badInput) Unwrap() error { return e.err }

func bad(format string, a ...any) error { return badInput{fmt.Errorf(format, a...)} }

// errFound is returned by checks that found a difference (exit 1); the
// command has already reported what it found.
var errFound = errors.New("difference found")

func main() {
	os.Exit(run(os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, stderrTTY: isTerminal(os.Stderr)}))
}

func run(args []string, e *env) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(e.stderr, "offcard: internal error: %v\n", r)
			code = 3
		}
	}()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stderr)
		if len(args) == 0 {
			return exitBad
		}
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "offcard: unknown command %q (try offcard --help)\n", args[0])
		return exitBad
	}
	err := cmd.run(e, args[1:])
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFound):
		return exitFound
	}
	fmt.Fprintf(e.stderr, "offcard %s: %s\n", args[0], oneLine(err.Error()))
	return exitBad
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: offcard <command> [flags]   (offcard <command> --help for its flags)")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

// flags is a command's flag set. Parse errors become one line printed by
// run; --help prints the usage.
type flags struct {
	*flag.FlagSet
	e        *env
	synopsis string
}

func newFlags(e *env, name, synopsis string) *flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flags{fs, e, synopsis}
}

// parse parses args and rejects stray positional arguments.
func (f *flags) parse(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(f.e.stderr, "usage: offcard %s %s\n", f.Name(), f.synopsis)
			f.SetOutput(f.e.stderr)
			f.PrintDefaults()
			return err
		}
		return badInput{err}
	}
	if f.NArg() > 0 {
		return bad("unexpected argument %q", f.Arg(0))
	}
	return nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
