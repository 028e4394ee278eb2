package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/offcard/offcard/proptest/mutants"
)

func init() {
	commands["mutants"] = command{"build each catalog mutant of the engine and check that the property suite kills it", runMutants}
}

// mutantsWorkDir is where the mutants command looks for the source tree
// when --repo is not given; tests replace it.
var mutantsWorkDir = os.Getwd

func runMutants(e *env, args []string) error {
	fs := newFlags(e, "mutants", "[--only NAME[,NAME]] [--device sim|tt --lib PATH | --engine [--timeout D] [--hello-timeout D]] [--json] [--cases N] [--seed S] [--repo DIR] [--keep DIR] [--list] [--overlay DIR] [--perturb NAME] [--junit OUT.xml]")
	engine := fs.Bool("engine", false, "build each mutant into cmd/offcard-engine and kill it through the line protocol (offcard check --engine)")
	timeout := fs.Duration("timeout", 0, "with --engine: check's --timeout (a call but hello)")
	helloTimeout := fs.Duration("hello-timeout", 0, "with --engine: check's --hello-timeout")
	only := fs.String("only", "", "run only these mutants (comma-separated `NAMES`)")
	asJSON := fs.Bool("json", false, "print the results as JSON")
	cases := fs.Int("cases", 0, "`N` cases for each mutant's offcard check (default: check's)")
	seed := fs.String("seed", "", "campaign seed `S` for offcard check (default: check's)")
	repo := fs.String("repo", "", "the offcard source tree `DIR` (default: the module root above the working directory)")
	keep := fs.String("keep", "", "keep each mutant's overlay, binary and check output under `DIR`/NAME")
	list := fs.Bool("list", false, "list the catalog (name, idea, expected red) and exit")
	device := fs.String("device", "sim", "run each mutant's check on `DEVICE`: sim, or tt (a device library, --lib; mutants the catalog marks as needing sim are skipped)")
	lib := fs.String("lib", "", "the offcard_tt C ABI library `PATH` (with --device tt)")
	overlayDir := fs.String("overlay", "", "only write each mutant's overlay under `DIR`/NAME (for go test -overlay) and print their paths")
	perturb := fs.String("perturb", "", "run every mutant on the simulator perturbed by `NAME` (a simulator bug: which mutants would it hide?)")
	junitPath := fs.String("junit", "", "also write a JUnit XML report, one test case per mutant (killed passes), to `OUT.xml`")
	if err := fs.parse(args); err != nil {
		return err
	}
	// Usage is checked before anything is built.
	if *cases < 0 || *cases == 0 && flagSet(fs, "cases") {
		return bad("--cases %d: want at least 1 (leave it out for check's default)", *cases)
	}
	if *seed != "" {
		if _, err := strconv.ParseUint(*seed, 10, 64); err != nil {
			return bad("--seed %q: want an unsigned 64-bit integer", *seed)
		}
	}
	for _, o := range []struct{ flag, dir string }{{"--keep", *keep}, {"--overlay", *overlayDir}} {
		if o.dir != "" {
			if err := checkOutputDir(o.flag, o.dir); err != nil {
				return err
			}
		}
	}
	ms := append([]mutants.Mutant(nil), mutants.Catalog...)
	if *only != "" {
		ms = nil
		for _, n := range strings.Split(*only, ",") {
			m, ok := mutants.ByName(strings.TrimSpace(n))
			if !ok {
				return bad("--only: no mutant %q (have %s)", n, strings.Join(mutants.Names(), ", "))
			}
			ms = append(ms, m)
		}
	}
	var checkArgs []string
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"timeout", *timeout}, {"hello-timeout", *helloTimeout}} {
		switch {
		case !flagSet(fs, d.name):
		case !*engine:
			return bad("--%s goes with --engine", d.name)
		case d.v <= 0:
			return bad("--%s %v: want a positive duration", d.name, d.v)
		default:
			checkArgs = append(checkArgs, "--"+d.name, d.v.String())
		}
	}
	switch *device {
	case "sim":
		if *lib != "" {
			return bad("--lib goes with --device tt")
		}
	case "tt":
		if *engine {
			return bad("--engine runs the engine's own device: it goes without --device tt")
		}
		if _, err := cardFactory(*lib); err != nil {
			return err
		}
		abs, err := filepath.Abs(*lib)
		if err != nil {
			return badInput{err}
		}
		checkArgs = []string{"--device", "tt", "--lib", abs}
		var run []mutants.Mutant
		for _, m := range ms {
			if m.NeedsSim != "" {
				if !*asJSON && !*list {
					fmt.Fprintf(e.stdout, "skip %s: needs sim: %s\n", m.Name, m.NeedsSim)
				}
				continue
			}
			run = append(run, m)
		}
		ms = run
	default:
		return bad("--device %q: want sim or tt", *device)
	}
	if offer, all := mutants.EngineOffer(); *engine && !all {
		// offcard-engine offers less (OFFCARD_ENGINE_OFFER): a mutant only
		// an observation it withholds shows is named with that observation.
		var run []mutants.Mutant
		for _, m := range ms {
			if why := mutants.EngineLacks(m, offer); why != "" {
				if !*asJSON {
					fmt.Fprintf(e.stdout, "skip %s: %s (%s=%s)\n", m.Name, why, mutants.EngineOfferEnv, os.Getenv(mutants.EngineOfferEnv))
				}
				continue
			}
			run = append(run, m)
		}
		ms = run
	}
	if *perturb != "" {
		p, ok := mutants.PerturbationByName(*perturb)
		if !ok {
			return bad("--perturb: no perturbation %q", *perturb)
		}
		for i := range ms {
			ms[i] = mutants.Perturbed(ms[i], p)
		}
	}
	if *list {
		return listMutants(e.stdout, ms, *asJSON)
	}
	root := *repo
	if root == "" {
		wd, err := mutantsWorkDir()
		if err != nil {
			return err
		}
		if root, err = mutants.FindModuleRoot(wd); err != nil {
			return badInput{err}
		}
	} else if err := mutants.CheckModuleRoot(root); err != nil {
		return badInput{err}
	}
	// Anchors first: a mutant whose edit no longer applies is an error of
	// the catalog (exit 2), found before anything is built.
	if err := mutants.CheckAnchors(root, ms); err != nil {
		return badInput{err}
	}
	if *overlayDir != "" {
		for _, m := range ms {
			p, err := m.Overlay(root, filepath.Join(*overlayDir, m.Name))
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\t%s\n", m.Name, p)
		}
		return nil
	}
	junit, err := openJUnit(*junitPath)
	if err != nil {
		return err
	}
	if junit != nil {
		defer junit.Abort()
	}
	cfg := mutants.Config{Root: root, Mutants: ms, Cases: *cases, Seed: *seed, KeepDir: *keep, Engine: *engine, CheckArgs: checkArgs}
	if e.stderrTTY {
		cfg.Progress = e.stderr
	}
	if d, err := os.UserCacheDir(); err == nil {
		// The last run's check times: the slowest mutants start first.
		cfg.Times = filepath.Join(d, "offcard", "mutant-times.json")
	}
	t0 := time.Now()
	// Interrupted: the builds and checks are stopped (each check ends its
	// engines and removes its files) and the work directories removed
	// before offcard exits.
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	defer atInterrupt(func() {
		cancel()
		select {
		case <-ran:
		case <-time.After(30 * time.Second):
		}
	})()
	rs, err := mutants.Run(ctx, cfg)
	close(ran)
	cancel()
	if err != nil {
		return err
	}
	if junit != nil {
		if err := writeJUnit(junit, mutantsJUnit(t0, time.Since(t0), rs)); err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(mutantsReport(rs)); err != nil {
			return err
		}
	} else if err := mutants.WriteTable(e.stdout, rs); err != nil {
		return err
	}
	c := mutants.Counts(rs)
	switch {
	case c[mutants.Error] > 0:
		var names []string
		for _, r := range rs {
			if r.Status == mutants.Error {
				names = append(names, r.Name+": "+r.Error)
			}
		}
		return errors.New("mutant errors: " + strings.Join(names, "; "))
	case c[mutants.Survived] > 0:
		return errFound
	}
	return nil
}

type mutantsJSON struct {
	Mutants  []mutants.Result `json:"mutants"`
	Killed   int              `json:"killed"`
	Survived int              `json:"survived"`
	Errors   int              `json:"errors"`
}

func mutantsReport(rs []mutants.Result) mutantsJSON {
	c := mutants.Counts(rs)
	return mutantsJSON{Mutants: rs, Killed: c[mutants.Killed], Survived: c[mutants.Survived], Errors: c[mutants.Error]}
}

func listMutants(w io.Writer, ms []mutants.Mutant, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(ms)
	}
	for _, m := range ms {
		fmt.Fprintf(w, "%s\n  idea:   %s\n  expect: %s\n  killed: %s\n  edits:  %d in %s\n", m.Name, m.Idea, m.Expect, orDash(m.Prop), len(m.Edits), strings.Join(m.Files(), ", "))
	}
	return nil
}

// mutantsJUnit is the catalog run as a JUnit report: one test case per
// mutant, passing when the property suite killed it (where and how is its
// system-out), failing when it survived, an error when it could not be
// built or checked.
func mutantsJUnit(start time.Time, elapsed time.Duration, rs []mutants.Result) junitSuites {
	cases := make([]junitCase, len(rs))
	for i, r := range rs {
		c := junitCase{Name: r.Name, Classname: "offcard.mutants", Time: junitSeconds(r.BuildTime + r.CheckTime)}
		switch r.Status {
		case mutants.Killed:
			c.SystemOut = r.Summary() + "\n" + r.Where + "\n" + r.Script
		case mutants.Survived:
			c.Failure = &junitProblem{Message: r.Summary(), Type: "survived",
				Text: fmt.Sprintf("mutant %s survived %d cases of offcard check: no property fired", r.Name, r.Cases)}
		default:
			c.Error = &junitProblem{Message: r.Error, Type: "error", Text: r.Error}
		}
		cases[i] = c
	}
	return newJUnit("offcard mutants", start, elapsed, nil, cases)
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
