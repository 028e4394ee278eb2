package mutants

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Status is a mutant's outcome.
type Status string

// Outcomes.
const (
	// Killed: `offcard check` found a failure (exit 1).
	Killed Status = "killed"
	// Survived: every case passed (exit 0).
	Survived Status = "survived"
	// Error: the mutant could not be applied, built or checked.
	Error Status = "error"
)

// Config configures a run of the catalog.
type Config struct {
	// Root is the offcard module's root (FindModuleRoot).
	Root string
	// Go is the go command (default: "go" on PATH, else GOROOT/bin/go).
	Go string
	// Mutants to run (default: the whole Catalog).
	Mutants []Mutant
	// Cases and Seed are passed to `offcard check` (0 / "": its defaults).
	Cases int
	Seed  string
	// Progress, when set, receives one line per mutant as it goes.
	Progress io.Writer
	// KeepDir, when set, keeps each mutant's overlay, build and check
	// output under KeepDir/<name> instead of a removed temporary directory.
	KeepDir string
	// CheckArgs are added to every `offcard check` (e.g. --device tt --lib
	// PATH).
	CheckArgs []string
	// Jobs is the number of mutants built and checked at once (0:
	// GOMAXPROCS). A build is mostly one compiler or linker process at a
	// time, so two cores take two mutants at once. Results do not depend
	// on it (the times do).
	Jobs int
	// Engine: build each mutant into cmd/offcard-engine (offcard's engine
	// behind the line protocol) instead of cmd/offcard, and kill it through
	// the protocol: `offcard check --engine MUTANT-ENGINE`, run by Checker.
	Engine bool
	// Checker is the unmutated offcard binary that checks an engine mutant
	// (default: Run builds one from Root, once).
	Checker string
	// CleanEngine is the unmutated offcard-engine that a Scheduler
	// mutant's checker runs against with Engine (default: Run builds one
	// from Root, once, when the run has such a mutant).
	CleanEngine string
	// Times, when set, is a file of the mutants' check times from earlier
	// runs (JSON: name → nanoseconds). Run starts the mutants that took
	// longest first (those it has no time for before all), so that a slow
	// one does not start last and run alone on an idle machine, and records
	// this run's times there. Only the order of the work changes: the
	// results are in the order of the mutants either way.
	Times string
}

// Result is one mutant's row of the report. Everything but the durations
// is deterministic for a given source, seed and case count.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Where the check went red (Killed only): the property that fired, the
	// first failing device step (0-based) and its one-line location, the
	// strict-mode finding, and the length (commands) of the shrunk script.
	Property  string `json:"property,omitempty"`
	Step      int    `json:"step"`
	Where     string `json:"where,omitempty"`
	Finding   string `json:"finding,omitempty"`
	ShrunkLen int    `json:"shrunk_len"`
	// OriginalLen is the failing schedule's length before shrinking, Runs
	// the schedule runs the case took (the original and the shrinking).
	OriginalLen int    `json:"original_len,omitempty"`
	Runs        int    `json:"runs,omitempty"`
	Script      string `json:"script,omitempty"`
	Replay      string `json:"replay,omitempty"`
	// Case is the index of the first failing case; Failed and Cases are
	// the failed and total case counts of the check run that went red
	// (it stops at the first failing case: Cases counts the cases up to it).
	Case   int `json:"case"`
	Failed int `json:"failed"`
	Cases  int `json:"cases"`
	// Error says why the mutant is an Error.
	Error string `json:"error,omitempty"`
	// Durations (not deterministic): the build; the time to red (the
	// check's own time_to_red_ns: from the start of its campaign until the
	// first failing command was observed, before any shrinking; the check's
	// whole wall time only for a check that does not report it); the check
	// run (shrinking included).
	BuildTime time.Duration `json:"build_ns"`
	// Schema: the mutant ran in the one schema build of the run's folded
	// mutants (BuildSchema), switched on by SwitchEnv; BuildTime is that
	// shared build's.
	Schema    bool          `json:"schema,omitempty"`
	TimeToRed time.Duration `json:"time_to_red_ns"`
	CheckTime time.Duration `json:"check_ns"`
	// Check is the check's JSON output, verbatim.
	Check json.RawMessage `json:"check,omitempty"`
}

// CheckAnchors applies every mutant of ms to the source under root and
// returns the first error (an *AnchorError names the mutant).
func CheckAnchors(root string, ms []Mutant) error {
	for _, m := range ms {
		if _, err := m.Apply(root); err != nil {
			return err
		}
	}
	return nil
}

func goCommand(c Config) string {
	if c.Go != "" {
		return c.Go
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if r := os.Getenv("GOROOT"); r != "" {
		return filepath.Join(r, "bin", "go")
	}
	return "go"
}

// Run checks every anchor first (an *AnchorError aborts the run before
// anything is built), then builds and checks the mutants, Jobs at a time;
// the results are in the order of the mutants. The
// error is non-nil only for a run that could not start; a mutant that
// fails to build or run is a Result with Status Error.
func Run(ctx context.Context, c Config) ([]Result, error) {
	if err := CheckModuleRoot(c.Root); err != nil {
		return nil, err
	}
	ms := c.Mutants
	if ms == nil {
		ms = Catalog
	}
	if err := CheckAnchors(c.Root, ms); err != nil {
		return nil, err
	}
	scheduler := false
	for _, m := range ms {
		scheduler = scheduler || m.Scheduler
	}
	if c.Engine && (c.Checker == "" || scheduler && c.CleanEngine == "") {
		d, err := os.MkdirTemp("", "offcard-mutants-checker-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		for _, b := range []struct {
			path *string
			name string
			need bool
		}{{&c.Checker, "offcard", true}, {&c.CleanEngine, "offcard-engine", scheduler}} {
			if *b.path != "" || !b.need {
				continue
			}
			*b.path = filepath.Join(d, b.name+exeSuffix())
			build := interruptible(exec.CommandContext(ctx, goCommand(c), "build", "-o", *b.path, "./cmd/"+b.name))
			build.Dir = c.Root
			build.Env = append(os.Environ(), "GOTMPDIR="+d, "TMPDIR="+d)
			if out, err := build.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("build the unmutated %s: %v: %s", b.name, err, lastLines(string(out), 5))
			}
		}
	}
	jobs := c.Jobs
	if jobs <= 0 {
		jobs = runtime.GOMAXPROCS(0)
	}
	jobs = max(1, min(jobs, len(ms)))

	// Fold what folds into one schema build, when that saves a build; the
	// rest are built one by one while the schema builds.
	var sch *Schema
	foldable := ms
	if c.Engine {
		// A scheduler mutant is built into the checker, not the engine.
		foldable = nil
		for _, m := range ms {
			if !m.Scheduler {
				foldable = append(foldable, m)
			}
		}
	}
	if len(foldable) > 1 {
		s, err := BuildSchema(c.Root, foldable)
		if err != nil {
			return nil, err
		}
		if len(s.Folded) > 1 {
			sch = s
		}
	}
	folded := map[string]bool{}
	if sch != nil {
		for _, m := range sch.Folded {
			folded[m.Name] = true
		}
	}
	order := startOrder(ms, readTimes(c.Times))
	type job struct {
		i      int
		schema bool // build the schema (i unused)
	}
	out := make([]Result, len(ms))
	next := make(chan job)
	done := make(chan int)
	built := make(chan schemaBuild, 1)
	var wg sync.WaitGroup
	var sb schemaBuild
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				switch {
				case j.schema:
					built <- buildSchema(ctx, c, sch)
					continue
				case folded[ms[j.i].Name]:
					out[j.i] = sb.check(ctx, c, ms[j.i])
				default:
					out[j.i] = RunOne(ctx, c, ms[j.i])
				}
				done <- j.i
			}
		}()
	}
	go func() {
		defer close(done)
		defer wg.Wait()
		defer close(next)
		send := func(j job) bool {
			select {
			case next <- j:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if sch != nil && !send(job{schema: true}) {
			return
		}
		for _, i := range order {
			if !folded[ms[i].Name] && !send(job{i: i}) {
				return
			}
		}
		if sch == nil {
			return
		}
		select {
		case sb = <-built:
		case <-ctx.Done():
			return
		}
		for _, i := range order {
			if folded[ms[i].Name] && !send(job{i: i}) {
				return
			}
		}
	}()
	n := 0
	defer func() {
		if sb.cleanup == nil { // interrupted before the schema build was taken
			select {
			case sb = <-built:
			default:
			}
		}
		if sb.cleanup != nil {
			sb.cleanup() // after done is closed: every check has finished
		}
	}()
	for i := range done {
		n++
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, "[%d/%d] %s: %s\n", n, len(ms), ms[i].Name, out[i].Summary())
		}
	}
	if err := ctx.Err(); err != nil {
		return out[:0], err
	}
	if c.Times != "" {
		writeTimes(c.Times, out)
	}
	return out, nil
}

// startOrder is the order in which Run starts ms: first the mutants with
// no recorded time, in their order, then the others by decreasing time
// (ties in their order).
func startOrder(ms []Mutant, times map[string]time.Duration) []int {
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	key := func(i int) time.Duration {
		if t, ok := times[ms[i].Name]; ok {
			return t
		}
		return math.MaxInt64
	}
	sort.SliceStable(order, func(a, b int) bool { return key(order[a]) > key(order[b]) })
	return order
}

// readTimes reads a Config.Times file; a missing or unreadable one is an
// empty record (it only orders work).
func readTimes(path string) map[string]time.Duration {
	times := map[string]time.Duration{}
	if path == "" {
		return times
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return times
	}
	var ns map[string]int64
	if json.Unmarshal(b, &ns) != nil {
		return times
	}
	for name, t := range ns {
		if t > 0 {
			times[name] = time.Duration(t)
		}
	}
	return times
}

// writeTimes merges the check times of rs (errors excluded) into the file
// at path, replacing it whole (a temporary file renamed over it). Failures
// are ignored: the file only orders work.
func writeTimes(path string, rs []Result) {
	times := readTimes(path)
	for _, r := range rs {
		if r.Status != Error && r.CheckTime > 0 {
			times[r.Name] = r.CheckTime
		}
	}
	ns := make(map[string]int64, len(times))
	for name, t := range times {
		ns[name] = int64(t)
	}
	b, err := json.MarshalIndent(ns, "", "  ")
	if err != nil {
		return
	}
	if os.MkdirAll(filepath.Dir(path), 0o755) != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".mutant-times-*")
	if err != nil {
		return
	}
	_, werr := f.Write(append(b, '\n'))
	if cerr := f.Close(); werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		os.Remove(f.Name())
	}
}

// schemaBuild is the one build of a Schema's folded mutants.
type schemaBuild struct {
	bin, dir string
	time     time.Duration
	err      error
	cleanup  func()
}

// SchemaDir is the KeepDir subdirectory of the schema build.
const SchemaDir = "_schema"

func buildSchema(ctx context.Context, c Config, s *Schema) schemaBuild {
	sb := schemaBuild{cleanup: func() {}}
	dir, cleanup, err := workDir(c, SchemaDir)
	if err != nil {
		sb.err = err
		return sb
	}
	sb.dir, sb.cleanup = dir, cleanup
	ov, err := s.Overlay(c.Root, dir)
	if err != nil {
		sb.err = err
		return sb
	}
	t0 := time.Now()
	sb.bin, sb.err = build(ctx, c, ov, dir)
	sb.time = time.Since(t0)
	return sb
}

// check runs the campaign against the schema binary with the
// switch set to m.
func (sb schemaBuild) check(ctx context.Context, c Config, m Mutant) Result {
	res := Result{Name: m.Name, Step: -1, ShrunkLen: -1, BuildTime: sb.time, Schema: true}
	if sb.err != nil {
		return res.failed("the schema build (the folded mutants' one build) fails: %v", sb.err)
	}
	dir := sb.dir
	if c.KeepDir != "" {
		d, cleanup, err := workDir(c, m.Name)
		if err != nil {
			return res.failed("%v", err)
		}
		defer cleanup()
		dir = d
	}
	return checkBuilt(ctx, c, res, sb.bin, dir, []string{SwitchEnv + "=" + m.Name})
}

// Summary is the result in a few words.
func (r Result) Summary() string {
	switch r.Status {
	case Killed:
		return fmt.Sprintf("killed by %s at step %d (shrunk to %d commands) in %v", r.Property, r.Step, r.ShrunkLen, r.TimeToRed.Round(time.Millisecond))
	case Survived:
		return fmt.Sprintf("SURVIVED %d cases", r.Cases)
	}
	return "ERROR " + r.Error
}

// DefaultCases is the campaign size when Config.Cases is 0 (offcard
// check's default).
const DefaultCases = 200

// RunOne builds and checks one mutant.
func RunOne(ctx context.Context, c Config, m Mutant) Result {
	res := Result{Name: m.Name, Step: -1, ShrunkLen: -1}
	dir, cleanup, err := workDir(c, m.Name)
	if err != nil {
		return res.failed("%v", err)
	}
	defer cleanup()
	ov, err := m.Overlay(c.Root, dir)
	if err != nil {
		return res.failed("%v", err)
	}
	t0 := time.Now()
	if c.Engine && m.Scheduler {
		// offcard's side of the protocol: the mutated checker runs the
		// unmutated engine.
		cc := c
		cc.Engine = false
		bin, err := build(ctx, cc, ov, dir)
		if err != nil {
			return res.failed("mutant %s does not build: %v", m.Name, err)
		}
		res.BuildTime = time.Since(t0)
		cc.Engine, cc.Checker = true, bin
		return checkBuilt(ctx, cc, res, c.CleanEngine, dir, nil)
	}
	bin, err := build(ctx, c, ov, dir)
	if err != nil {
		return res.failed("mutant %s does not build: %v", m.Name, err)
	}
	res.BuildTime = time.Since(t0)
	return checkBuilt(ctx, c, res, bin, dir, nil)
}

// EngineOfferEnv names the environment variable that restricts what
// offcard-engine offers (cmd/offcard-engine): a comma-separated list of
// observations (wire.Obs*), "page_pad" and "follows_hints", or "none";
// unset, it offers everything.
const EngineOfferEnv = "OFFCARD_ENGINE_OFFER"

// EngineOffer is what offcard-engine offers under EngineOfferEnv (all:
// the variable is unset or empty).
func EngineOffer() (offer []string, all bool) {
	v := strings.TrimSpace(os.Getenv(EngineOfferEnv))
	if v == "" {
		return nil, true
	}
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x != "" && x != "none" {
			offer = append(offer, x)
		}
	}
	return offer, false
}

// EngineLacks says which observation an engine offering offer lacks to
// show m (its SeenBy: one entry sufficing, an entry "a+b" needing both),
// or "" when it has one or m needs none.
func EngineLacks(m Mutant, offer []string) string {
	if len(m.SeenBy) == 0 {
		return ""
	}
	has := map[string]bool{}
	for _, x := range offer {
		has[x] = true
	}
	var missing []string
	for _, e := range m.SeenBy {
		var lack []string
		for _, o := range strings.Split(e, "+") {
			if !has[o] {
				lack = append(lack, o)
			}
		}
		if len(lack) == 0 {
			return ""
		}
		missing = append(missing, strings.Join(lack, "+"))
	}
	if len(missing) == 1 {
		return "lacks the observation " + missing[0]
	}
	return "lacks an observation: one of " + strings.Join(missing, ", ")
}

// failed is r as an Error with the formatted reason.
func (r Result) failed(format string, a ...any) Result {
	r.Status, r.Error = Error, oneLine(fmt.Sprintf(format, a...))
	return r
}

// workDir is the directory of one build's overlay, binary and outputs:
// KeepDir/name (emptied) when keeping, else a temporary directory that
// cleanup removes.
func workDir(c Config, name string) (dir string, cleanup func(), err error) {
	if c.KeepDir != "" {
		dir = filepath.Join(c.KeepDir, name)
		if err := os.RemoveAll(dir); err != nil {
			return "", nil, err
		}
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", "offcard-mutant-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}

// build builds cmd/offcard (cmd/offcard-engine with Config.Engine) with
// the overlay ov into dir and returns the binary's path.
func build(ctx context.Context, c Config, ov, dir string) (string, error) {
	name, pkg := "offcard", "./cmd/offcard"
	if c.Engine {
		name, pkg = "offcard-engine", "./cmd/offcard-engine"
	}
	bin := filepath.Join(dir, name+exeSuffix())
	// No VCS stamp (it runs git per build) and no symbol table or DWARF (a
	// shorter link): the binary only runs check (or serves the engine).
	cmd := interruptible(exec.CommandContext(ctx, goCommand(c), "build", "-buildvcs=false", "-ldflags=-s -w", "-overlay", ov, "-o", bin, pkg))
	cmd.Dir = c.Root
	cmd.Env = append(os.Environ(), "GOTMPDIR="+dir, "TMPDIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %s", err, lastLines(string(out), 5))
	}
	return bin, nil
}

// interruptible makes cmd end as on a Ctrl-C when its context is done:
// an interrupt to its own process group (a check then ends its engines and
// removes its temporary files; go build and its compilers die), a kill
// only if it has not exited after interruptDelay. (go build leaves its
// work directory on an interrupt, the linker its own: builds get GOTMPDIR
// and TMPDIR inside the work directories Run removes.)
func interruptible(cmd *exec.Cmd) *exec.Cmd {
	ownGroup(cmd)
	cmd.Cancel = func() error {
		if err := interrupt(cmd); err != nil {
			return cmd.Process.Kill()
		}
		return nil
	}
	cmd.WaitDelay = interruptDelay
	return cmd
}

const interruptDelay = 20 * time.Second

// checkBuilt runs the campaign against a built mutant binary, with env
// added to the check's environment (the schema switch), and writes the
// check's outputs into dir when keeping. The check runs with --fail-fast,
// stopping at the first failing case in case order (the full campaign's
// first failing case), and with GOMAXPROCS=1: its cases run one after the
// other (mutants run Jobs at a time instead), so a mutant killed by case 0
// costs one case and its shrinking, and a mutant with process-wide state
// (warm-pos-global's package variable) sees no case running beside it; the
// result does not depend on Jobs.
func checkBuilt(ctx context.Context, c Config, res Result, bin, dir string, env []string) Result {
	fail := res.failed
	total := c.Cases
	if total <= 0 {
		total = DefaultCases
	}
	args := []string{"check", "--json", "--times", "--fail-fast", "--cases", strconv.Itoa(total)}
	if c.Seed != "" {
		args = append(args, "--seed", c.Seed)
	}
	args = append(args, c.CheckArgs...)
	checker := bin
	if c.Engine {
		checker = c.Checker
		args = append(args, "--engine", bin)
	}
	chk := interruptible(exec.CommandContext(ctx, checker, args...))
	chk.Dir = c.Root
	chk.Env = append(append(os.Environ(), "GOMAXPROCS=1"), env...)
	var stdout, stderr bytes.Buffer
	chk.Stdout, chk.Stderr = &stdout, &stderr
	t1 := time.Now()
	err := chk.Run()
	res.CheckTime = time.Since(t1)
	if c.KeepDir != "" {
		_ = os.WriteFile(filepath.Join(dir, "check.json"), stdout.Bytes(), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "check.stderr"), stderr.Bytes(), 0o644)
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return fail("run check: %v", err)
		}
		code = ee.ExitCode()
	}
	if code != 0 && code != 1 {
		return fail("check --cases %d exited %d: %s", total, code, lastLines(stderr.String(), 3))
	}
	rep, err := ParseCheck(stdout.Bytes())
	if err != nil {
		return fail("check --cases %d (exit %d): %v", total, code, err)
	}
	raw := stdout.Bytes()
	res.TimeToRed = rep.TimeToRed
	if res.TimeToRed <= 0 {
		res.TimeToRed = res.CheckTime // a check that does not report it
	}
	res.Check = json.RawMessage(bytes.TrimSpace(raw))
	res.Cases, res.Failed = rep.Cases, rep.Failed
	switch {
	case code == 0 && rep.First == nil:
		res.Status = Survived
		res.TimeToRed = 0
	case code == 1 && rep.First != nil:
		f := rep.First
		res.Status = Killed
		res.Property, res.Step, res.Where, res.Finding = f.Property, f.Step, f.Where, f.Finding
		res.Script, res.ShrunkLen, res.Replay = f.Script, f.ShrunkLen, f.Replay
		res.Case, res.OriginalLen, res.Runs = f.Index, f.OriginalLen, f.Runs
	case code == 1:
		return fail("check exited 1 without a failing case in its JSON")
	default:
		return fail("check exited 0 with a failing case in its JSON")
	}
	return res
}

// CheckReport is what the runner reads from `offcard check --json`.
type CheckReport struct {
	Cases, Failed int
	// TimeToRed is the check's own time to its first failure, when given.
	TimeToRed time.Duration
	// First is the first failing case in case order, nil when all passed.
	First *CheckFailure
}

// CheckFailure is a failing case as the runner reports it.
type CheckFailure struct {
	Index     int // the case's index in the campaign
	Seed      string
	Replay    string
	Property  string
	Step      int // the failing device step (0-based), -1 if not given
	Seq, Pos  int // -1 if not given
	Regime    string
	Where     string
	Finding   string
	Detail    string
	Script    string
	ShrunkLen int // commands in Script, -1 if no script
	// OriginalLen and Runs: the unshrunk schedule's length and the
	// schedule runs of the case (0 when not given).
	OriginalLen, Runs int
}

// ParseCheck reads the JSON that `offcard check --json` prints: an object
// with the case results under "cases" (each a proptest.CaseResult:
// "passed", "seed", "failure", "script"), or a bare array of them, plus
// optional counts ("passed", "failed") and an optional "time_to_red_ns" /
// "time_to_red_ms". Keys it does not know are ignored.
func ParseCheck(b []byte) (CheckReport, error) {
	var rep CheckReport
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return rep, errors.New("check printed no JSON")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return rep, fmt.Errorf("check's JSON: %w", err)
	}
	var cases []any
	switch t := v.(type) {
	case []any:
		cases = t
	case map[string]any:
		for _, k := range []string{"cases", "results"} {
			if a, ok := t[k].([]any); ok {
				cases = a
				break
			}
		}
		if n, ok := num(t["time_to_red_ns"]); ok {
			rep.TimeToRed = time.Duration(n)
		} else if n, ok := num(t["time_to_red_ms"]); ok {
			rep.TimeToRed = time.Duration(n) * time.Millisecond
		}
		if cases == nil {
			// A report of one failure at top level.
			if _, ok := t["failure"]; ok {
				cases = []any{t}
			}
		}
		p, okp := num(t["passed"])
		f, okf := num(t["failed"])
		if okp && okf {
			rep.Cases, rep.Failed = int(p+f), int(f)
		}
		if a, ok := t["failures"].([]any); ok && cases == nil {
			cases = a
		}
	default:
		return rep, errors.New("check's JSON is neither an object nor an array")
	}
	failed := 0
	for _, c := range cases {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if p, ok := m["passed"].(bool); ok && p {
			continue
		}
		if f, ok := m["failure"]; (!ok || f == nil) && str(m["error"]) != "" {
			// offcard's runner failed on this case: not a kill.
			continue
		}
		failed++
		if rep.First == nil {
			rep.First = parseFailure(m)
			if n, ok := num(m["time_to_red_ns"]); ok && rep.TimeToRed == 0 {
				rep.TimeToRed = time.Duration(n)
			}
		}
	}
	if rep.Cases == 0 {
		rep.Cases, rep.Failed = len(cases), failed
	}
	return rep, nil
}

func parseFailure(m map[string]any) *CheckFailure {
	f := &CheckFailure{Step: -1, Seq: -1, Pos: -1, ShrunkLen: -1}
	if n, ok := num(m["index"]); ok {
		f.Index = int(n)
	}
	if n, ok := num(m["original_commands"]); ok {
		f.OriginalLen = int(n)
	}
	if n, ok := num(m["runs"]); ok {
		f.Runs = int(n)
	}
	f.Seed = str(m["seed"])
	f.Replay = str(m["replay"])
	if f.Replay == "" && f.Seed != "" {
		f.Replay = "offcard check --seed " + f.Seed + " --cases 1"
	}
	if e := str(m["error"]); e != "" {
		f.Property, f.Detail = "error", e
	}
	fm, _ := m["failure"].(map[string]any)
	if fm != nil {
		f.Property = str(fm["property"])
		if n, ok := num(fm["device_step"]); ok {
			f.Step = int(n)
		} else if n, ok := num(fm["step"]); ok {
			f.Step = int(n)
		}
		if n, ok := num(fm["seq"]); ok {
			f.Seq = int(n)
		}
		if n, ok := num(fm["pos"]); ok {
			f.Pos = int(n)
		}
		f.Regime = str(fm["regime"])
		f.Finding = oneLine(str(fm["finding"]))
		f.Detail = oneLine(str(fm["detail"]))
		f.Where = str(fm["where"])
		if f.Where == "" {
			f.Where = where(fm)
		}
	}
	if s := str(m["script"]); s != "" {
		f.Script = s
		f.ShrunkLen = ScriptLen(s)
	}
	return f
}

// where renders a proptest.Failure's location like Failure.Where.
func where(fm map[string]any) string {
	var b strings.Builder
	if n, ok := num(fm["command"]); ok {
		fmt.Fprintf(&b, "command %d `%s`", n, str(fm["cmd"]))
	}
	if n, ok := num(fm["sub_step"]); ok && n > 0 {
		fmt.Fprintf(&b, ", decode step %d", n)
	}
	if n, ok := num(fm["device_step"]); ok {
		fmt.Fprintf(&b, ", device step %d", n)
	}
	if n, ok := num(fm["seq"]); ok && n >= 0 {
		fmt.Fprintf(&b, ", seq %d", n)
	}
	if n, ok := num(fm["pos"]); ok && n >= 0 {
		fmt.Fprintf(&b, " pos %d", n)
	}
	if r := str(fm["regime"]); r != "" {
		w, _ := num(fm["width"])
		fmt.Fprintf(&b, " (regime %s, width %d)", r, w)
	}
	return strings.TrimPrefix(b.String(), ", ")
}

// ScriptLen counts a script's commands: the lines that are not blank,
// comments or the model/device/engine header.
func ScriptLen(s string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "model", "device", "engine":
			continue
		}
		n++
	}
	return n
}

func str(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func num(v any) (int64, bool) {
	switch t := v.(type) {
	case json.Number:
		n, err := t.Int64()
		if err != nil {
			f, err := t.Float64()
			return int64(f), err == nil
		}
		return n, true
	case float64:
		return int64(t), true
	}
	return 0, false
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// AllKilled reports whether every result is Killed.
func AllKilled(rs []Result) bool {
	for _, r := range rs {
		if r.Status != Killed {
			return false
		}
	}
	return true
}

// Counts tallies the results by status.
func Counts(rs []Result) map[Status]int {
	c := map[Status]int{}
	for _, r := range rs {
		c[r.Status]++
	}
	return c
}

// WriteTable prints the results as an aligned table: mutant, status,
// first red step, property, time to red, shrunk length, finding. The time
// column is the only one that varies between runs of the same source and
// seed.
func WriteTable(w io.Writer, rs []Result) error {
	rows := [][]string{{"MUTANT", "STATUS", "STEP", "PROPERTY", "SHRUNK", "TIME", "FINDING"}}
	for _, r := range rs {
		step, shrunk, tm, prop, find := "-", "-", "-", "-", "-"
		if r.Status == Killed {
			if r.Step >= 0 {
				step = strconv.Itoa(r.Step)
			}
			if r.ShrunkLen >= 0 {
				shrunk = strconv.Itoa(r.ShrunkLen)
			}
			tm = r.TimeToRed.Round(10 * time.Millisecond).String()
			prop = r.Property
			if r.Finding != "" {
				find = r.Finding
			}
		}
		if r.Status == Error {
			find = r.Error
		}
		rows = append(rows, []string{r.Name, string(r.Status), step, prop, shrunk, tm, find})
	}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row[:len(row)-1] {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, row := range rows {
		for i, c := range row {
			if i == len(row)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", width[i]-len(c)+2))
		}
		b.WriteString("\n")
	}
	c := Counts(rs)
	mutant, errs := "mutants", "errors"
	if len(rs) == 1 {
		mutant = "mutant"
	}
	if c[Error] == 1 {
		errs = "error"
	}
	fmt.Fprintf(&b, "%d %s: %d killed, %d survived, %d %s\n", len(rs), mutant, c[Killed], c[Survived], c[Error], errs)
	_, err := io.WriteString(w, b.String())
	return err
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}
