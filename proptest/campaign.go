package proptest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/offcard/offcard/internal/hugeheap"
)

// Options configure a campaign.
type Options struct {
	// Seed is the campaign seed (DefaultSeed when 0 is meant, pass it
	// explicitly); case i runs with CaseSeed(Seed, i).
	Seed uint64
	// Cases is the number of cases (schedules).
	Cases int
	// Shard, when set, runs only its slice of the Cases cases (each with
	// its campaign index and seed, exactly as the whole campaign runs it).
	Shard Shard
	// Factory builds the SUT (SimFactory for the engine on sim).
	Factory Factory
	// Base fixes the device name and strictness of every scenario.
	Base Base
	// Workers run cases in parallel (0: GOMAXPROCS). Results do not depend
	// on it.
	Workers int
	// MaxShrinks and ShrinkRuns bound shrinking (see CaseOptions).
	MaxShrinks, ShrinkRuns int
	// ReplayArgs are appended to each failing case's replay command (the
	// flags that name the SUT, e.g. --engine 'CMD').
	ReplayArgs string
	// FailFast stops the campaign at its first failing case in case
	// order: no case after it is started once it is known, and Campaign
	// returns the results up to and including it (a prefix of the whole
	// campaign's, at any Workers). A case that failed is one not Passed.
	FailFast bool
	// Abort, when set, is asked before each case is started: true starts
	// no more cases, and Campaign returns the results of the cases that
	// ran (an EngineFactory that failed: its Failed).
	Abort func() bool
	// Progress, when set, is called after each case completes (from the
	// goroutine of the caller of Campaign), with the number done and
	// failed so far.
	Progress func(done, failed, total int)
	// CaseDone, when set, is called with each case's result as it
	// completes (before Progress, from the same goroutine).
	CaseDone func(CaseResult)
	// Served, when set, is told what the SUT serves (the serving calls
	// the schedules could draw) before Campaign returns, once asked.
	Served func(Serving)
}

// A campaign reads its simulated devices, caches and memos all over the
// heap: the first one in a process advises the heap for huge pages
// (hugeheap), reserving heapReserve bytes of address space, twice the
// default campaign's peak heap on two cores. The advice only changes
// speed; where it cannot be given, campaigns run as they are.
var adviseHeap sync.Once

const heapReserve = 512 << 20

// Campaign runs o.Cases cases (those of o.Shard) and returns their results
// in case order (with FailFast, up to the first failing case). Cases run in
// parallel; each is deterministic in its seed alone, so the results (and
// any report made from them) do not depend on Workers or GOMAXPROCS.
func Campaign(o Options) []CaseResult {
	adviseHeap.Do(func() { _, _ = hugeheap.Advise(heapReserve) })
	idx := o.Shard.Cases(o.Cases)
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, len(idx)))
	res := make([]CaseResult, len(idx))
	ran := make([]bool, len(idx))
	co := CaseOptions{Base: o.Base, Factory: o.Factory, MaxShrinks: o.MaxShrinks, ShrinkRuns: o.ShrinkRuns}
	if o.Base.Serve == nil {
		// What the SUT serves, asked once for all cases, by the first
		// case that runs (so an Abort before any case asks nothing), with
		// the SUT of its first run.
		p := newProber(o.Factory, o.Base)
		co.probe = p
		defer func() {
			p.close()
			if o.Served != nil && p.done {
				o.Served(p.sv)
			}
		}()
	} else if o.Served != nil {
		defer o.Served(*o.Base.Serve)
	}
	jobs := make(chan int)
	done := make(chan int)
	// first is the position of the first failing case known so far
	// (len(idx): none), lowered as soon as a case's first run fails; with
	// FailFast no later case is started, and a later one running gives up
	// its shrinking.
	var first atomic.Int64
	first.Store(int64(len(idx)))
	t0 := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if o.Abort != nil && o.Abort() {
					continue
				}
				ran[j] = true
				start := time.Since(t0)
				co := co
				if o.FailFast {
					co.Failing = func() { lower(&first, int64(j)) }
					co.Stop = func() bool { return first.Load() < int64(j) }
				}
				r := RunCase(CaseSeed(o.Seed, idx[j]), co)
				r.Index, r.Start, r.ReplayArgs = idx[j], start, o.ReplayArgs
				res[j] = r
				done <- j
			}
		}()
	}
	go func() {
		for j := range idx {
			if o.FailFast && int64(j) > first.Load() || o.Abort != nil && o.Abort() {
				break
			}
			jobs <- j
		}
		close(jobs)
		wg.Wait()
		close(done)
	}()
	n, failed := 0, 0
	for i := range done {
		n++
		if !res[i].Passed {
			failed++
			lower(&first, int64(i))
		}
		if o.CaseDone != nil {
			o.CaseDone(res[i])
		}
		if o.Progress != nil {
			o.Progress(n, failed, len(idx))
		}
	}
	if f := int(first.Load()); o.FailFast && f < len(idx) {
		return res[:f+1]
	}
	if o.Abort != nil && o.Abort() {
		var out []CaseResult
		for j, r := range res {
			if ran[j] {
				out = append(out, r)
			}
		}
		return out
	}
	return res
}

// lower sets v to x when x is smaller.
func lower(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if x >= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

// TimeToRed is the wall time from the start of the campaign whose results
// rs are until its first failing command was observed, in any case (before
// any shrinking); false when every case passed.
func TimeToRed(rs []CaseResult) (time.Duration, bool) {
	var best time.Duration
	found := false
	for _, r := range rs {
		if r.Passed || r.Error != "" && r.Failure == nil {
			continue
		}
		if t := r.Start + r.TimeToFail; !found || t < best {
			best, found = t, true
		}
	}
	return best, found
}

// Summary counts passed and failed cases. A case that could not run, or
// whose runner failed (CaseResult.Error), is neither: see Errored.
func Summary(rs []CaseResult) (passed, failed int) {
	for _, r := range rs {
		switch {
		case r.Passed:
			passed++
		case r.Error == "":
			failed++
		}
	}
	return
}

// Errored counts the cases that could not run or whose runner failed:
// failures of offcard, not findings about the SUT.
func Errored(rs []CaseResult) int {
	n := 0
	for _, r := range rs {
		if !r.Passed && r.Error != "" {
			n++
		}
	}
	return n
}

// ReplayCommand is the command line that replays case r alone.
func (r CaseResult) ReplayCommand() string {
	if r.ReplayArgs != "" {
		return fmt.Sprintf("offcard check %s --seed %d --cases 1", r.ReplayArgs, r.Seed)
	}
	return fmt.Sprintf("offcard check --seed %d --cases 1", r.Seed)
}

// Report is a failing case's report for a person: the seed and how to
// replay it, the first failing step and property, the strict finding, and
// the shrunk schedule as a script. A passing case reports nothing.
func (r CaseResult) Report() string {
	if r.Passed {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "FAIL case %d, seed %d\n", r.Index, r.Seed)
	if r.NotReproduced {
		fmt.Fprintf(&b, "  NOT REPRODUCED: the failure never recurred in %d more runs (shrinking, then the script once more); the schedule below is the original, unshrunk, and may pass when replayed\n", max(r.Runs-1, 1))
	}
	fmt.Fprintf(&b, "  replay: %s\n", r.ReplayCommand())
	if r.Error != "" {
		fmt.Fprintf(&b, "  error (offcard's runner, not a finding about the engine): %s\n", r.Error)
		return b.String()
	}
	f := r.Failure
	fmt.Fprintf(&b, "  property: %s\n", f.Property)
	for _, a := range f.AlsoLines() {
		fmt.Fprintf(&b, "  also failed at that step: %s\n", a)
	}
	fmt.Fprintf(&b, "  first failing step: %s\n", f.Where())
	fmt.Fprintf(&b, "  detail: %s\n", f.Detail)
	if f.Finding != "" {
		fmt.Fprintf(&b, "  strict finding: %s\n", f.Finding)
	}
	for _, l := range strings.Split(strings.TrimRight(f.Grids, "\n"), "\n") {
		if l != "" {
			b.WriteString("  " + l + "\n")
		}
	}
	if o := r.OriginalFailure; o != nil {
		fmt.Fprintf(&b, "  original: %d commands, %s at %s\n", r.OriginalLen, o.Property, o.Where())
	}
	fmt.Fprintf(&b, "  shrunk schedule (%d commands, %d shrink steps, %d runs):\n", len(r.Script.Commands), r.Shrinks, r.Runs)
	for _, line := range strings.Split(strings.TrimRight(r.Script.String(), "\n"), "\n") {
		b.WriteString("    " + line + "\n")
	}
	return b.String()
}

// RegressionScript is a failing case's shrunk script with comments that
// say where it came from and what it caught.
func (r CaseResult) RegressionScript() Script {
	s := *r.Script
	s.Comments = []string{
		fmt.Sprintf("found by: %s (case %d)", r.ReplayCommand(), r.Index),
		fmt.Sprintf("caught: %s at %s", r.Failure.Property, r.Failure.Where()),
		"detail: " + oneLine(r.Failure.Detail),
	}
	if r.Failure.Finding != "" {
		s.Comments = append(s.Comments, "strict finding: "+oneLine(r.Failure.Finding))
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Save writes a failing case's shrunk script into dir as
// <property>-<seed>.script (dir is created if needed) and returns the
// path. Scripts saved under testdata/regressions run in TestRegressions.
func (r CaseResult) Save(dir string) (string, error) {
	if r.Script == nil {
		return "", fmt.Errorf("case %d has no failing script", r.Index)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.script", r.Failure.Property, r.Seed))
	if err := os.WriteFile(path, []byte(r.RegressionScript().String()), 0o644); err != nil {
		return "", err
	}
	return path, nil
}
