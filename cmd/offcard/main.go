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
	exitOK       = 0
	exitFound    = 1 // a check found a difference
	exitBad      = 2 // bad usage or bad input
	exitInternal = 3 // a bug of offcard itself (a recovered panic)
)

// badInput marks an error caused by the user's arguments or files: exit 2.
type badInput struct{ err error }

func (e badInput) Error() string { return e.err.Error() }
func (e badInput) Unwrap() error { return e.err }

func bad(format string, a ...any) error { return badInput{fmt.Errorf(format, a...)} }

// internalError marks a failure of offcard itself, not of the user's
// input nor a finding about the engine: exit 3.
type internalError struct{ err error }

func (e internalError) Error() string { return e.err.Error() }
func (e internalError) Unwrap() error { return e.err }

// errFound is returned by checks that found a difference (exit 1); the
// command has already reported what it found.
var errFound = errors.New("difference found")

func main() {
	if len(os.Args) > 1 && os.Args[1] == libProbeArg { // see probeLib
		os.Exit(libProbeMain(os.Args[2:], os.Stdout))
	}
	os.Exit(run(os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, stderrTTY: isTerminal(os.Stderr)}))
}

func run(args []string, e *env) (code int) {
	defer waitIfInterrupted() // (see interrupt)
	e.stdout, e.stderr = gated{e.stdout}, gated{e.stderr}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(e.stderr, "offcard: internal error (a bug of offcard, please report it): %v\n", r)
			code = exitInternal
		}
	}()
	switch {
	case len(args) == 0:
		usage(e.stderr)
		return exitBad
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help" && len(args) == 1:
		usage(e.stdout)
		return exitOK
	case args[0] == "help":
		// offcard help CMD is offcard CMD --help.
		if _, ok := commands[args[1]]; !ok || len(args) > 2 {
			fmt.Fprintf(e.stderr, "offcard help: no command %q (try offcard --help)\n", strings.Join(args[1:], " "))
			return exitBad
		}
		args = []string{args[1], "--help"}
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
	if errors.As(err, new(internalError)) {
		return exitInternal
	}
	return exitBad
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: offcard <command> [flags]   (offcard help <command>, or offcard <command> --help, for its flags)")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "exit codes: 0 ok, 1 a check found a difference, 2 bad usage or input, 3 an internal error of offcard, 130/143 interrupted (SIGINT/SIGTERM: engines ended, temporary files removed)")
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
	if err := f.parseFlags(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return bad("unexpected argument %q", f.Arg(0))
	}
	return nil
}

// parseOne parses args that hold one positional argument (what), before
// or after the flags, and returns it.
func (f *flags) parseOne(args []string, what string) (string, error) {
	var arg string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		arg, args = args[0], args[1:]
	}
	if err := f.parseFlags(args); err != nil {
		return "", err
	}
	rest := f.Args()
	if arg == "" && len(rest) > 0 {
		arg, rest = rest[0], rest[1:]
		if err := f.parseFlags(rest); err != nil {
			return "", err
		}
		rest = f.Args()
	}
	if len(rest) > 0 {
		return "", bad("unexpected argument %q", rest[0])
	}
	if arg == "" {
		return "", bad("need %s", what)
	}
	return arg, nil
}

// parseFlags parses the flags of args; --help prints the usage on stdout.
func (f *flags) parseFlags(args []string) error {
	if err := f.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(f.e.stdout, "usage: offcard %s %s\n", f.Name(), f.synopsis)
			f.SetOutput(f.e.stdout)
			f.PrintDefaults()
			return err
		}
		return badInput{err}
	}
	return nil
}

// flagSet reports whether the flag called name was given.
func flagSet(f *flags, name string) bool {
	set := false
	f.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
