package proptest

import (
	"errors"
	"fmt"
	"slices"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// RunStats counts what a run did.
type RunStats struct {
	Commands    int // commands executed
	DeviceSteps int // prefill positions + decode batches
}

// runner plays one schedule on ref (the oracle), the host's kvpage truth,
// and a SUT, and checks every property after every Decoder call.
type runner struct {
	sc   Scenario
	cfg  qwen3.Config
	m    model
	ref  *oracle
	sut  SUT
	dec  qwen3.Decoder
	pool *kvpage.Pool
	tabs [MaxSeqs]*kvpage.Table
	next [MaxSeqs]int32 // next token to feed (ref's last output)

	steps      int     // device steps so far
	traceWidth int     // width of the live trace (captured), -1: none
	ptWant     []int32 // the device page table after the last step, nil: unknown
	ptWidth    int
	cmds       int
	fail       *Failure
	off        bool // a runner past the shrink budget: every command passes

	tap        *Tap // the SUT's device tap, nil without one
	persistent int  // tensors the engine holds after construction
	regime     regimeModel
	prev       map[int]stepState // the last device step, by slot; nil: unknown
	reach      Reach
	runnerErr  string // the runner itself failed (not the SUT)
	closed     bool
	// checkWrites' grouping of the KV writes, reused from call to call.
	wkeys   map[wkey]int
	wgroups [][]KVWrite
	worder  []wkey
	tm      TapMemory  // checkMem's, reused
	wj      *wireJudge // an engine process's judge state (wireobs.go), nil until used

	// The serving actions' state, by sequence (live and preempted): the
	// token fed at each position (-1: a position jump's gap), the hash of
	// the SUT's output at each position when first computed (recompute),
	// and the rollback window [accepted, verify end) of a sequence whose
	// rejected rows are not all rewritten yet (rollback).
	hist   [MaxSeqs][]int32
	outh   [MaxSeqs][]uint64
	rolled [MaxSeqs][2]int
	w      *qwen3.Weights
	cold   *ref.Decoder // the prefix-hit property's cold runs, nil until used
}

func newRunner(sc Scenario, f Factory) (*runner, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	w, err := ModelWeights(sc)
	if err != nil {
		return nil, err
	}
	r := &runner{sc: sc, cfg: w.Config, traceWidth: -1, w: w}
	r.m = newModel(&r.sc, sc.MaxLen(w.Config))
	if r.pool, err = kvpage.NewPool(sc.NumBlocks, sc.BlockSize); err != nil {
		return nil, err
	}
	if r.ref, err = newOracle(w, ref.Options{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Threads: 1}); err != nil {
		return nil, err
	}
	r.ref.padTiles = sc.Prefill == qwen3.PrefillProgram
	if r.sut, err = f(sc); err != nil {
		r.ref.Close()
		return nil, err
	}
	r.dec = r.sut.Decoder()
	r.m.serve = ServingOf(r.dec)
	if s, ok := r.sut.(*SimSUT); ok && shareRows {
		r.ref.share = (&rowShare{dev: s.Dev}).products // ref's rows, to the device (rowshare.go)
	}
	r.regime = newRegimeModel()
	if dt, ok := r.sut.(DeviceTapper); ok && dt.DeviceTap() != nil {
		r.tap = dt.DeviceTap()
		r.persistent = r.tap.Memory().Persistent
		r.tap.TakeEvents()
	}
	if sc.Strict {
		r.reach.add(ReachStrict)
	} else {
		r.reach.add(ReachFaithful)
	}
	return r, nil
}

// close closes ref and the SUT once, and checks what Close left: an error
// from Close and anything still on the device fail the run (unless an
// earlier command failed it already).
func (r *runner) close() *Failure {
	if r.closed {
		return nil
	}
	r.closed = true
	defer r.recycle()
	if r.ref != nil {
		r.ref.Close()
	}
	if r.cold != nil {
		r.cold.Close()
	}
	if r.sut == nil {
		return nil
	}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic in Close: %v", p)
			}
		}()
		err = r.sut.Close()
	}()
	if r.fail != nil || r.off || r.runnerErr != "" {
		return nil
	}
	var ps []problem
	if err != nil {
		ps = append(ps, problem{prop: PropClose, seq: -1, pos: -1, detail: "Close: " + err.Error()})
	}
	if e, ok := r.sut.(*EngineSUT); ok {
		if d := e.closedMemory(); d != "" {
			ps = append(ps, problem{prop: PropMemory, seq: -1, pos: -1, detail: d})
		}
	}
	if r.tap != nil {
		if d := checkClosed(r.tap.Memory()); d != "" {
			ps = append(ps, problem{prop: PropMemory, seq: -1, pos: -1, detail: d})
		}
		if ev := r.tap.TakeEvents(); len(ev.Misuse) > 0 {
			ps = append(ps, problem{prop: PropMemory, seq: -1, pos: -1, detail: "Close: " + ev.Misuse[0]})
		}
	}
	r.fail = r.failure(call{c: Cmd{Kind: closeKind}}, ps, "", StepInfo{})
	return r.fail
}

// recycle hands the SUT's device memory to later cases (Recycler) once the
// run has read all it reads of it.
func (r *runner) recycle() {
	if s, ok := r.sut.(*SimSUT); ok {
		c, f := s.Dev.LinearRows()
		linComputed.Add(int64(c))
		linFound.Add(int64(f))
	}
	if rc, ok := r.sut.(Recycler); ok {
		rc.Recycle()
	}
}

// exec runs one command (its precondition already checked) and returns
// the failure it caused, or nil. After a failure every later command is a
// no-op.
func (r *runner) exec(c Cmd) (fail *Failure) {
	if r.fail != nil || r.off {
		return nil
	}
	r.cmds++
	defer func() {
		if p := recover(); p != nil {
			if sp, ok := p.(sutPanic); ok {
				fail = &Failure{Property: PropPanic, Command: r.cmds, Cmd: c.String(), DeviceStep: r.steps,
					Seq: -1, Pos: -1, Detail: fmt.Sprint(sp.v)}
			} else {
				// The runner itself failed: not a property of the SUT.
				r.runnerErr = fmt.Sprintf("runner failed at command %d `%s`: %v", r.cmds, c, p)
				r.off = true
				fail = nil
			}
		}
		r.fail = fail
	}()
	if err := r.m.check(c); err != nil {
		// The generator and the shrinker check first; a script is checked
		// by RunScript. Reaching here is a bug of the runner.
		panic(fmt.Sprintf("invalid command %q: %v", c, err))
	}
	switch c.Kind {
	case Admit:
		fail = r.admit(c)
	case Decode:
		fail = r.decode(c)
	case Finish:
		fail = r.finish(c)
	case Recapture:
		fail = r.recapture(c)
	case Share:
		fail = r.share(c)
	case Verify:
		fail = r.verify(c)
	case Fork:
		fail = r.fork(c)
	case Preempt:
		fail = r.preempt(c)
	case Readmit:
		fail = r.readmit(c)
	}
	if fail == nil {
		r.m = r.m.apply(c)
	}
	return fail
}

// active is one slot's part of a Decoder call, as the host expects it.
type active struct {
	seq, slot int
	pos       []int // positions written by the call, in order
	blocks    []int32
}

// call is one Decoder call to check.
type call struct {
	c       Cmd
	subStep int
	decode  bool
	act     []active
	got     []qwen3.Output
	want    []qwen3.Output
	err     error
	steady  bool // a steady-state decode step (see steady)
	// from: a PrefillFrom call (no tile padding past the chunk); verify:
	// a verify step (each act entry's k positions); copies: a CopyBlocks
	// call (no act).
	from   bool
	verify bool
	copies []qwen3.BlockCopy
	// cold: the cold run's outputs for want's positions (prefix-hit);
	// first: the hashes of the SUT's first-run outputs at want's positions
	// (recompute). nil: not checked.
	cold  []qwen3.Output
	first []uint64
}

// sutPanic carries a panic of the SUT (as opposed to one of the runner).
type sutPanic struct{ v any }

// sutDo calls the SUT, marking a panic as the SUT's.
func sutDo[T any](f func() (T, error)) (T, error) {
	defer func() {
		if p := recover(); p != nil {
			panic(sutPanic{p})
		}
	}()
	return f()
}

// check checks every property after one Decoder call.
func (r *runner) check(k call) *Failure {
	if tol, ok := r.tolerant(); ok {
		return r.checkTolerant(k, tol)
	}
	var ps []problem
	if k.err != nil {
		ps = append(ps, problem{prop: errProp(k.err), seq: -1, pos: -1, detail: k.err.Error(), callErr: true})
	}
	finding := r.findings(&ps)
	bs := r.sc.BlockSize
	var logged []KVWrite // the call's KV writes, for the failure's grids
	haveLog := false
	slotSeq := map[int]int{}
	for _, a := range k.act {
		slotSeq[a.slot] = a.seq
	}

	// Properties 2 and 3 from the device's own KV write log: every write
	// at table[pos/bs] row pos%bs, at the host's position, exactly once.
	if kv, ok := r.sut.(KVObserver); ok {
		var uc []int
		if u, ok := r.sut.(interface{ UpdateCacheSeqs() []int }); ok {
			uc = slices.Clone(u.UpdateCacheSeqs())
		}
		ws, err := kv.TakeKVWrites()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "KV log: " + err.Error()})
		} else {
			n := len(ps)
			logged, haveLog = r.dropPromptPadding(ws, k), true
			r.checkSharedLog(&ps, ws, slotSeq)
			r.checkWrites(&ps, k, logged, slotSeq)
			// Place the log's problems at the step's first cache update.
			if per := len(uc) / max(1, len(k.act[0].pos)); len(uc) > 0 {
				for i := n; i < len(ps); i++ {
					ps[i].op = uc[min(ps[i].offset*per, len(uc)-1)]
				}
			}
		}
	}
	// Property 3 at every op that reads cur_pos: active slots hold the
	// position being decoded, every other slot -1.
	if oo, ok := r.sut.(OpPosObserver); ok {
		obs, err := oo.TakeOpPos()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "observe cur_pos: " + err.Error()})
		} else {
			if !k.verify { // a verify's ops: no contract yet for cur_pos op by op
				r.checkOpPos(&ps, k, obs, slotSeq)
			}
		}
	}
	// Property 3 after the step: active slots hold their position + 1,
	// every other slot -1.
	if k.err == nil {
		r.checkCurPosAfter(&ps, k, slotSeq)
	}
	// The device page table holds the host's rows for the last step. A
	// PrefillFrom's chunk reads page-table slices of its own and need not
	// touch the decode table: the next decode step's table is checked.
	if k.err == nil && !k.from {
		r.checkPageTable(&ps, k, slotSeq)
	} else {
		r.ptWant = nil
	}
	// Regime, host writes and memory from the device's own events.
	if r.tap != nil {
		r.checkTap(&ps, k)
	} else {
		r.reachWidth(k)
	}
	// Property 2 from the cache bytes.
	if _, ok := r.sut.(KVPeeker); ok {
		r.diffCache(&ps, k)
	}
	// Property 4: no replay across a width change, after a reset, or in
	// eager mode.
	var si StepInfo
	if so, ok := r.sut.(StepObserver); ok && k.err == nil {
		si = so.LastStep()
		if k.decode && r.tap == nil {
			// Without device events, the engine's own report.
			r.checkRegime(&ps, si)
		}
	}
	// Properties 1, 4, 6: outputs equal ref's bit for bit.
	if k.err == nil {
		r.checkOutputs(&ps, k, bs)
		r.checkColdRun(&ps, k)
		r.checkRecompute(&ps, k)
	}
	f := r.failure(k, ps, finding, si)
	if f != nil {
		f.Grids = r.grids(k, logged, haveLog)
	}
	return f
}

// RunScript replays a script on a SUT from f. It returns the first failure
// (nil when every property holds) and an error when the script itself is
// invalid (a command whose precondition fails) or the SUT cannot be built
// for another reason than a property.
func RunScript(s Script, f Factory) (*Failure, RunStats, error) {
	r, err := newRunner(s.Scenario, f)
	if err != nil {
		return nil, RunStats{}, fmt.Errorf("setup: %w", err)
	}
	defer r.close()
	for i, c := range s.Commands {
		if err := r.m.check(c); err != nil {
			return nil, r.stats(), fmt.Errorf("command %d `%s`: %w", i+1, c, err)
		}
		if fail := r.exec(c); fail != nil {
			return fail, r.stats(), nil
		}
		if r.runnerErr != "" {
			return nil, r.stats(), errors.New(r.runnerErr)
		}
	}
	return r.close(), r.stats(), nil
}

func (r *runner) stats() RunStats { return RunStats{Commands: r.cmds, DeviceSteps: r.steps} }
