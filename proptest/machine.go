package proptest

import (
	"fmt"
	"math/rand"
	"slices"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
)

// The gopter state machine. Its State is the model (the host's truth: live
// sequences, lengths, slots, hence block counts); its SystemUnderTest is a
// caseRun, which drives ref, the host's kvpage tables and the SUT together
// and checks every property after every Decoder call. Commands are Cmd
// values: Run plays one on the caseRun, NextState applies it to the model,
// PreCondition checks every argument against the model (so shrinking never
// produces an invalid schedule), PostCondition fails with the runner's
// Failure.

// Run implements commands.Command.
func (c Cmd) Run(sut commands.SystemUnderTest) commands.Result {
	return sut.(*caseRun).run(c)
}

// NextState implements commands.Command.
func (c Cmd) NextState(st commands.State) commands.State {
	return st.(model).apply(c)
}

// PreCondition implements commands.Command.
func (c Cmd) PreCondition(st commands.State) bool {
	m := st.(model)
	return m.check(c) == nil
}

// PostCondition implements commands.Command.
func (c Cmd) PostCondition(_ commands.State, res commands.Result) *gopter.PropResult {
	if f, ok := res.(*Failure); ok && f != nil {
		return &gopter.PropResult{Status: gopter.PropFalse, Labels: []string{f.String()}}
	}
	return &gopter.PropResult{Status: gopter.PropTrue}
}

var _ commands.Command = Cmd{}

// caseRun is one execution of a schedule (gopter runs the original and
// every shrink candidate on a fresh one).
type caseRun struct {
	rec  *recorder
	r    *runner
	err  error // the SUT could not be built
	sc   Scenario
	cmds []Cmd
}

func (cr *caseRun) run(c Cmd) *Failure {
	cr.cmds = append(cr.cmds, c)
	var f *Failure
	switch {
	case cr.err != nil:
		if len(cr.cmds) > 1 {
			return nil
		}
		if Aborting(cr.err) {
			// Not a finding: the campaign ends (no shrinking either).
			cr.rec.aborted, cr.rec.budget = cr.err.Error(), cr.rec.runs
			return nil
		}
		f = &Failure{Property: PropSetup, Command: 1, Cmd: c.String(), Seq: -1, Pos: -1, Detail: cr.err.Error()}
	case cr.r == nil:
		return nil
	default:
		f = cr.r.exec(c)
	}
	if f != nil {
		cr.rec.failed(cr.sc, cr.cmds, f)
	}
	return f
}

// recorder keeps, for one case, the first failing run (the original
// schedule) and the last (gopter adopts every failing shrink candidate, so
// the last failing run is the shrunk schedule). It also bounds the runs a
// shrink may take: past the budget every run passes, which ends shrinking
// deterministically.
type recorder struct {
	factory  Factory
	budget   int
	runs     int
	first    *Script
	firstF   *Failure
	last     *Script
	lastF    *Failure
	fails    int
	refails  int       // failing runs after the first (shrink candidates)
	stats    RunStats  // the first run's
	scenario *Scenario // the case's
	schedule []Cmd     // the first run's commands
	start    time.Time // when the case started
	firstAt  time.Duration
	reach    map[string]int // the first run's
	// runnerErr: the runner itself failed in the first run.
	runnerErr string
	failing   func()      // CaseOptions.Failing
	stop      func() bool // CaseOptions.Stop

	// aborted: a run could not start for a reason that ends the campaign
	// (Aborting).
	aborted string
}

// over reports whether the shrink budget is spent or the case is given up.
func (rec *recorder) over(runs int) bool {
	return runs > rec.budget || runs > 1 && rec.stop != nil && rec.stop()
}

func (rec *recorder) failed(sc Scenario, cmds []Cmd, f *Failure) {
	s := &Script{Scenario: sc, Commands: slices.Clone(cmds)}
	if rec.first == nil {
		rec.first, rec.firstF = s, f
		rec.firstAt = time.Since(rec.start)
		if rec.failing != nil {
			rec.failing()
		}
	}
	rec.last, rec.lastF = s, f
	rec.fails++
	if rec.runs > 1 {
		rec.refails++
	}
	if hung(f) {
		rec.budget = rec.runs // each shrink run would wait out the timeout again
	}
}

// machine is the commands.Commands of one case.
func (rec *recorder) machine(b Base) commands.Commands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(st commands.State) commands.SystemUnderTest {
			m := st.(model)
			cr := &caseRun{rec: rec, sc: *m.sc}
			rec.runs++
			if rec.scenario == nil {
				sc := *m.sc
				rec.scenario = &sc
			}
			if rec.over(rec.runs) {
				return cr // past the budget: nothing runs, everything passes
			}
			cr.r, cr.err = newRunner(*m.sc, rec.factory)
			return cr
		},
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) {
			cr := sut.(*caseRun)
			if rec.runs == 1 {
				rec.schedule = slices.Clone(cr.cmds)
			}
			if cr.r == nil {
				return
			}
			// Close is checked like a command (its error, what it left on
			// the device); gopter does not see it, so a failure here is
			// recorded for the original run (RunCase shrinks it with
			// shrinkScript); in a shrink candidate gopter did not adopt it.
			if f := cr.r.close(); f != nil && rec.runs == 1 {
				rec.failed(cr.sc, cr.cmds, f)
			}
			if rec.runs == 1 {
				rec.stats = cr.r.stats()
				rec.reach = cr.r.reach.Counts()
				rec.runnerErr = cr.r.runnerErr
			}
		},
		InitialStateGen: GenScenario(b).Map(func(sc Scenario) model {
			cfg, err := ModelConfig(sc)
			if err != nil {
				panic(err)
			}
			s := sc
			m := newModel(&s, sc.MaxLen(cfg))
			if b.Serve != nil {
				m.serve = *b.Serve
			}
			return m
		}),
		GenCommandFunc: func(st commands.State) gopter.Gen {
			return genCommand(st.(model))
		},
	}
}

// CaseResult is the outcome of one case of a campaign.
type CaseResult struct {
	Index int    `json:"index"`
	Seed  uint64 `json:"seed,string"`
	// Scenario is the case's scenario (the script's header lines).
	Scenario string `json:"scenario"`
	Passed   bool   `json:"passed"`
	// Commands and DeviceSteps are the original schedule's size (of the
	// run up to its failure, for a failing case).
	Commands    int `json:"commands"`
	DeviceSteps int `json:"device_steps"`
	// For a failing case: the failure of the shrunk schedule, the shrunk
	// script, the original failure, and the shrinking effort.
	Failure         *Failure `json:"failure,omitempty"`
	Script          *Script  `json:"-"`
	ScriptText      string   `json:"script,omitempty"`
	OriginalFailure *Failure `json:"original_failure,omitempty"`
	OriginalLen     int      `json:"original_commands,omitempty"`
	Shrinks         int      `json:"shrinks,omitempty"`
	Runs            int      `json:"runs,omitempty"`
	// NotReproduced: no run of the case after the first failed with the
	// failure's property, not even the script run once more: the
	// failure (a crash, often) did not recur, and the script may pass.
	NotReproduced bool `json:"not_reproduced,omitempty"`
	// Error is set when the case could not be generated or run at all,
	// or the runner itself failed (not a failure of the SUT).
	Error string `json:"error,omitempty"`
	// Reach counts the states the original schedule visited, by kind
	// (see ReachTotals).
	Reach map[string]int `json:"reach,omitempty"`

	// Wall times (the only non-deterministic part of a result, so not in
	// its JSON): TimeToFail is the time from the case's start until its
	// first failing command was observed (before shrinking; 0 for a
	// passing case); Elapsed is the whole case, shrinking included; Start
	// is when the case started, from the start of its Campaign.
	TimeToFail time.Duration `json:"-"`
	Elapsed    time.Duration `json:"-"`
	Start      time.Duration `json:"-"`
	// ReplayArgs: see Options.ReplayArgs.
	ReplayArgs string `json:"-"`
}

// CaseOptions tune one case.
type CaseOptions struct {
	Base    Base
	Factory Factory
	// MaxShrinks bounds the shrink steps gopter adopts (default 200);
	// ShrinkRuns bounds the schedule runs of one case, the original
	// included (default 600).
	MaxShrinks int
	ShrinkRuns int
	// Failing, when set, is called once when the case's first failing
	// run is observed (before shrinking); Stop, when set, is asked before
	// each shrink run, and true ends shrinking there (a campaign that will
	// discard the case: Options.FailFast).
	Failing func()
	Stop    func() bool
	// probe, when set, answers what the SUT serves (Campaign's, shared by
	// its cases) when Base.Serve is nil.
	probe *prober
}

// DefaultSeed is the campaign seed when none is given: fixed, so a
// campaign's output is the same on every run.
const DefaultSeed uint64 = 1

// CaseSeed is the seed of case i of the campaign with seed s. Case 0's seed
// is s itself, so case i replays alone as the one-case campaign with seed
// CaseSeed(s, i); the others are SplitMix64 mixes of (s, i).
func CaseSeed(s uint64, i int) uint64 {
	if i == 0 {
		return s
	}
	return splitmix64(s ^ splitmix64(uint64(i)))
}

// caseLen is the number of commands of the case with seed s: 3..16.
func caseLen(rng *rand.Rand) int { return 3 + rng.Intn(14) }

// RunCase generates the case with seed s (its scenario and schedule,
// gopter-generated), runs it on a SUT from o.Factory, and on failure
// shrinks it with gopter's shrinker.
func RunCase(s uint64, o CaseOptions) (res CaseResult) {
	if o.MaxShrinks == 0 {
		o.MaxShrinks = 200
	}
	if o.ShrinkRuns == 0 {
		o.ShrinkRuns = 600
	}
	res = CaseResult{Seed: s}
	if o.Base.Serve == nil {
		p := o.probe
		if p == nil {
			p = newProber(o.Factory, o.Base)
			defer p.close()
		}
		sv, err := p.probe(s)
		if Aborting(err) {
			res.Error = err.Error() // no case: the campaign ends
			return res
		}
		o.Base.Serve = &sv
		if o.Factory != nil {
			o.Factory = p.factory
		}
	}
	rng := rand.New(rand.NewSource(int64(s)))
	n := caseLen(rng)
	rec := &recorder{factory: o.Factory, budget: o.ShrinkRuns, start: time.Now(), failing: o.Failing, stop: o.Stop}
	defer func() { res.Elapsed = time.Since(rec.start) }()
	prop := commands.Prop(rec.machine(o.Base))
	gp := &gopter.GenParameters{MinSize: 0, MaxSize: n, MaxShrinkCount: o.MaxShrinks, Rng: rng}
	pr := prop(gp)
	res.Runs = rec.runs
	if len(pr.Args) > 0 {
		res.Shrinks = pr.Args[0].Shrinks
	}
	res.Reach = rec.reach
	switch {
	case rec.aborted != "":
		res.Error = rec.aborted
	case rec.runnerErr != "":
		res.Error = rec.runnerErr
	case pr.Status == gopter.PropTrue && rec.first == nil:
		res.Passed = true
		res.Commands = n
		res.DeviceSteps = rec.stats.DeviceSteps
	case rec.first != nil:
		res.TimeToFail = rec.firstAt
		res.Commands = len(rec.first.Commands)
		res.DeviceSteps = rec.stats.DeviceSteps
		res.OriginalLen = len(rec.first.Commands)
		res.OriginalFailure = rec.firstF
		res.Failure = rec.lastF
		sh := *rec.last
		// Adjacent decodes of the same batch are one decode: merge them
		// when the merged script fails the same way (it makes the same
		// Decoder calls, so it does unless the SUT is not deterministic).
		given := o.Stop != nil && o.Stop() // the campaign discards this case
		if m, ok := mergeDecodes(sh); ok && !hung(res.Failure) && !given {
			if f, _, err := RunScript(m, o.Factory); err == nil && f != nil && f.Property == res.Failure.Property {
				sh, res.Failure = m, f
			}
		}
		// gopter shrinks the schedule only: drop commands it could not
		// (a failure at Close is invisible to it) and simplify the
		// scenario, keeping every step that fails the same way.
		// seen: a run after the first failed again.
		seen := rec.refails > 0 || res.Failure != rec.lastF
		if !hung(res.Failure) && !given { // a hung engine: each run waits out the timeout
			before := res.Failure
			sh, res.Failure, res.Runs = shrinkScript(sh, res.Failure, o.Factory, res.Runs, o.ShrinkRuns+shrinkExtraRuns)
			seen = seen || res.Failure != before
			if !seen {
				// No run after the first failed: run the script once more,
				// so a failure that does not recur (a crash that depends on
				// timing, memory or the machine) is not reported as if it
				// were a reproduction.
				res.Runs++
				f, _, err := RunScript(sh, o.Factory)
				seen = err == nil && f != nil && f.Property == res.Failure.Property
			}
			res.NotReproduced = !seen
		}
		res.Script = &sh
		res.ScriptText = sh.String()
	case pr.Error != nil:
		res.Error = pr.Error.Error()
	default:
		res.Error = fmt.Sprintf("gopter status %v without a recorded failure", pr.Status)
	}
	if rec.scenario != nil {
		res.Scenario = rec.scenario.String()
	}
	return res
}

// GenerateScript returns the script of the case with seed s (as RunCase
// generates it) without running it.
func GenerateScript(s uint64, b Base) (Script, bool) {
	rng := rand.New(rand.NewSource(int64(s)))
	n := caseLen(rng)
	rec := &recorder{budget: 0}
	prop := commands.Prop(rec.machine(b))
	pr := prop(&gopter.GenParameters{MaxSize: n, MaxShrinkCount: 0, Rng: rng})
	if pr.Status != gopter.PropTrue || rec.scenario == nil {
		return Script{}, false
	}
	return Script{Scenario: *rec.scenario, Commands: rec.schedule}, true
}

// mergeDecodes joins adjacent decode commands of the same batch.
func mergeDecodes(s Script) (Script, bool) {
	var out []Cmd
	merged := false
	for _, c := range s.Commands {
		if n := len(out); n > 0 && c.Kind == Decode && out[n-1].Kind == Decode &&
			slices.Equal(c.Seqs, out[n-1].Seqs) && (c.Seqs == nil) == (out[n-1].Seqs == nil) &&
			c.Start == nil && out[n-1].Start == nil && c.Skip == 0 && c.Force == out[n-1].Force &&
			out[n-1].Steps+c.Steps <= MaxDecodeSteps {
			out[n-1].Steps += c.Steps
			merged = true
			continue
		}
		out = append(out, c)
	}
	s.Commands = out
	return s, merged
}

// shrinkExtraRuns bounds the script runs of shrinkScript beyond the case's
// ShrinkRuns.
const shrinkExtraRuns = 60

// shrinkScript shrinks a failing script further than gopter can: it drops
// single commands (the script must stay valid) and simplifies the scenario
// (capacity, blocks, verify, recapture_every, arch, model seed), keeping
// each change after which the script still fails with the same property.
// runs counts schedule runs, up to budget.
func shrinkScript(s Script, f *Failure, fac Factory, runs, budget int) (Script, *Failure, int) {
	try := func(c Script) bool {
		if runs >= budget || c.Scenario.Validate() != nil {
			return false
		}
		runs++
		g, _, err := RunScript(c, fac)
		if err != nil || g == nil || g.Property != f.Property {
			return false
		}
		s, f = c, g
		return true
	}
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(s.Commands); i++ {
			c := s
			c.Commands = append(slices.Clone(s.Commands[:i]), s.Commands[i+1:]...)
			if len(c.Commands) > 0 && try(c) {
				changed = true
				i--
			}
		}
		for _, simplify := range []func(*Scenario) bool{
			func(sc *Scenario) bool { sc.Capacity--; return sc.Capacity >= 1 },
			func(sc *Scenario) bool { v := sc.Verify; sc.Verify = false; return v },
			func(sc *Scenario) bool { v := sc.RecaptureEvery; sc.RecaptureEvery = 0; return v > 0 },
			func(sc *Scenario) bool { v := sc.Arch; sc.Arch = "wormhole"; return v != "wormhole" },
			func(sc *Scenario) bool { v := sc.ModelSeed; sc.ModelSeed = 1; return sc.ModelDir == "" && v != 1 },
			func(sc *Scenario) bool {
				if _, fixed := sc.Width.FixedWidth(); fixed && sc.NumBlocks == 256 {
					return false
				}
				n := sc.NumBlocks
				sc.NumBlocks = n / 2
				return sc.NumBlocks >= 1
			},
		} {
			c := s
			if simplify(&c.Scenario) && try(c) {
				changed = true
			}
		}
	}
	return s, f, runs
}
