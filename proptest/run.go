package proptest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// Property names, as failures report them. In the order the runner ranks
// them when several fail at one step (the likeliest cause first).
const (
	// PropSetup: the SUT could not be built for the scenario.
	PropSetup = "setup"
	// PropPanic: the SUT (or the runner) panicked.
	PropPanic = "panic"
	// PropStrict: the simulator's sanitizer reported a hazard (property 5).
	PropStrict = "strict"
	// PropCurPos: the device's cur_pos at a paged_update_cache, or after the
	// step, is not the host's seq_len-1 (resp. seq_len), or an inactive
	// slot's is not -1 (property 3).
	PropCurPos = "cur-pos"
	// PropKVWrite: a KV write landed elsewhere than table[pos/bs], row
	// pos%bs, or one is missing or extra (property 2).
	PropKVWrite = "kv-write"
	// PropPageTable: the device page table differs from the host's rows
	// (each active slot's blocks for its position, then the pad 0;
	// every other row PagePad; the width the policy gives), or a command
	// that runs no step changed it.
	PropPageTable = "page-table"
	// PropSUTError: the SUT refused a valid call.
	PropSUTError = "sut-error"
	// PropReplay: a trace was replayed where it must not be: across a
	// page-table width change, after a reset, or in eager mode (property 4).
	PropReplay = "replay"
	// PropLogits: a token or a logit differs from ref, bit for bit
	// (properties 1, 4 and 6).
	PropLogits = "logits"
	// PropKVCache: the device's KV cache differs from ref's (nothing else
	// in the cache changed, property 2).
	PropKVCache = "kv-cache"
	// PropHostWrites: a steady-state replay (the same slots and sequences
	// as the previous step, each one position on inside its block, fed the
	// token that step produced) made host writes (design: "in steady state
	// a replay needs no host write at all"), whatever the options.
	PropHostWrites = "host-writes"
	// PropMemory: after a call the device holds more than the engine's
	// persistent tensors, its current page table and the tables a live
	// trace still records (a leak), or fewer persistent tensors; after
	// Close it holds anything at all.
	PropMemory = "device-memory"
	// PropClose: Close returned an error.
	PropClose = "close"
)

var propRank = []string{PropSetup, PropEngine, PropPanic, PropStrict, PropCurPos, PropKVWrite, PropPageTable, PropSUTError, PropReplay, PropHostWrites, PropMemory, PropLogits, PropKVCache, PropClose}

// Failure is the first failing step of a schedule run.
type Failure struct {
	// Property is the property that fired (Prop*); Also lists the others
	// that fired at the same step.
	Property string   `json:"property"`
	Also     []string `json:"also,omitempty"`
	// AlsoDetail says, for each property of Also in its order, what
	// differed ("PROP: detail"), so a second cause (an engine's own
	// error beside a KV-write finding) is never a bare name.
	AlsoDetail []string `json:"also_detail,omitempty"`
	// Command is the 1-based index of the failing command in the schedule,
	// Cmd its script line; SubStep the 1-based decode step inside a decode
	// command (0 otherwise).
	Command int    `json:"command"`
	Cmd     string `json:"cmd"`
	SubStep int    `json:"sub_step,omitempty"`
	// DeviceStep is the 0-based index of the failing device step in the
	// run: every prefill position and every decode batch is one step.
	DeviceStep int `json:"device_step"`
	// Seq and Pos locate the failure (-1 when not one sequence's).
	Seq int `json:"seq"`
	Pos int `json:"pos"`
	// Regime and Width are what the engine's failing step did, when the
	// SUT reports it.
	Regime string `json:"regime,omitempty"`
	Width  int    `json:"width,omitempty"`
	// Detail says what differed; Finding is the first strict finding of
	// the step, if any.
	Detail  string `json:"detail"`
	Finding string `json:"finding,omitempty"`
	// Grids pictures the failing step in text: the device page table
	// beside the host's and a block × row map of the step's KV writes
	// (as far as the SUT shows them).
	Grids string `json:"grids,omitempty"`
}

// Where is the failure's location in one line.
func (f *Failure) Where() string {
	var b strings.Builder
	fmt.Fprintf(&b, "command %d `%s`", f.Command, f.Cmd)
	if f.SubStep > 0 {
		fmt.Fprintf(&b, ", decode step %d", f.SubStep)
	}
	fmt.Fprintf(&b, ", device step %d", f.DeviceStep)
	if f.Seq >= 0 {
		fmt.Fprintf(&b, ", seq %d", f.Seq)
	}
	if f.Pos >= 0 {
		fmt.Fprintf(&b, " pos %d", f.Pos)
	}
	if f.Regime != "" {
		fmt.Fprintf(&b, " (regime %s, width %d)", f.Regime, f.Width)
	}
	return b.String()
}

// AlsoLines are the other properties that fired at the failing step, one
// line each with what differed ("PROP: detail"; a bare name in a failure
// decoded from JSON written before AlsoDetail existed).
func (f *Failure) AlsoLines() []string {
	if len(f.AlsoDetail) == len(f.Also) {
		return f.AlsoDetail
	}
	return f.Also
}

// String is the failure in one line.
func (f *Failure) String() string {
	s := fmt.Sprintf("%s at %s: %s", f.Property, f.Where(), f.Detail)
	if len(f.Also) > 0 {
		s += " (also " + strings.Join(f.Also, ", ") + ")"
	}
	return s
}

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
}

func newRunner(sc Scenario, f Factory) (*runner, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	w, err := ModelWeights(sc)
	if err != nil {
		return nil, err
	}
	r := &runner{sc: sc, cfg: w.Config, traceWidth: -1}
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
	}
	if fail == nil {
		r.m = r.m.apply(c)
	}
	return fail
}

// promptTokens is the prompt of an admit: token i is
// splitmix64(splitmix64(splitmix64(seq) + salt) + i) mod vocab.
func promptTokens(seq, salt, n, vocab int) []int32 {
	t := make([]int32, n)
	base := splitmix64(splitmix64(uint64(seq)) + uint64(salt))
	for i := range t {
		t[i] = int32(splitmix64(base+uint64(i)) % uint64(vocab))
	}
	return t
}

// splitmix64 is Steele, Lea and Flood's SplitMix64 finaliser of x+γ.
func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
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
}

type problem struct {
	prop     string
	seq, pos int
	offset   int  // device steps into the call (prefill position)
	located  bool // offset (and seq, pos) are known
	detail   string
	// op is the device op (OpPos.Seq order) at which the problem arose, 0
	// when unknown; observations made after the call have none.
	op int
	// callErr marks the error the call itself returned; missing marks a
	// KV write that never happened (the effect of such an error, when
	// the call returned one).
	callErr, missing bool
}

// maxAlsoDetail bounds the text of each AlsoDetail entry.
const maxAlsoDetail = 400

// clipDetail cuts s to at most n bytes (at a rune boundary), marking the cut.
func clipDetail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("… (%d bytes more)", len(s)-i)
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

// streamToken is token pos of the token stream (seq, salt): a prompt's
// token pos, a teacher-forced token, a started sequence's first token.
func streamToken(seq, salt, pos, vocab int) int32 {
	base := splitmix64(splitmix64(uint64(seq)) + uint64(salt))
	return int32(splitmix64(base+uint64(pos)) % uint64(vocab))
}

func (r *runner) admit(c Cmd) *Failure {
	tab := r.pool.NewTable()
	if err := tab.Grow(c.Prompt); err != nil {
		panic(fmt.Sprintf("host pool: %v", err))
	}
	r.tabs[c.Seq] = tab
	p := qwen3.Prefill{Seq: qwen3.SeqID(c.Seq), Tokens: promptTokens(c.Seq, c.Salt, c.Prompt, r.cfg.VocabSize), Blocks: tab.Blocks()}
	want, err := r.ref.Prefill(p)
	if err != nil {
		panic(fmt.Sprintf("ref prefill: %v", err))
	}
	got, gerr := sutDo(func() ([]qwen3.Output, error) { return r.dec.Prefill(p) })
	a := active{seq: c.Seq, slot: r.m.freeSlot(), blocks: p.Blocks}
	for i := 0; i < c.Prompt; i++ {
		a.pos = append(a.pos, i)
	}
	f := r.check(call{c: c, act: []active{a}, got: got, want: want, err: gerr})
	r.steps += c.Prompt
	r.next[c.Seq] = want[len(want)-1].Token
	if _, ok := r.tolerant(); ok && len(got) > 0 && f == nil {
		r.next[c.Seq] = got[len(got)-1].Token // teacher forcing
	}
	r.prev = map[int]stepState{a.slot: {seq: c.Seq, pos: c.Prompt - 1, token: want[len(want)-1].Token}}
	r.reach.add(ReachAdmit)
	if r.sc.Prefill == qwen3.PrefillDecode {
		r.reach.add(ReachPrefillByDecode)
	}
	if r.reach.afterReplay {
		r.reach.prefillAfterReplay = true
	}
	return f
}

func (r *runner) decode(c Cmd) *Failure {
	seqs := r.m.batch(c)
	starts := r.m.startSlots(c)
	first := map[int]int{}
	for _, q := range seqs {
		first[q] = r.m.firstPos(c, q)
		if _, ok := starts[q]; ok {
			r.tabs[q] = r.pool.NewTable()
		}
	}
	r.reach.decodeCmd(c)
	for k := 1; k <= c.Steps; k++ {
		batch := make([]qwen3.Step, len(seqs))
		act := make([]active, len(seqs))
		fed := map[int]int32{}
		for i, q := range seqs {
			pos := first[q] + k - 1
			tab := r.tabs[q]
			if err := tab.Grow(pos + 1); err != nil {
				panic(fmt.Sprintf("host pool: %v", err))
			}
			tok := r.next[q]
			_, started := starts[q]
			switch {
			case c.Force > 0:
				tok = streamToken(q, c.Force, pos, r.cfg.VocabSize)
			case k == 1 && started:
				tok = streamToken(q, 0, 0, r.cfg.VocabSize)
			}
			fed[q] = tok
			slot, ok := starts[q]
			if !ok {
				slot = r.m.slot[q]
			}
			batch[i] = qwen3.Step{Seq: qwen3.SeqID(q), Token: tok, Pos: pos, Blocks: tab.Blocks()}
			act[i] = active{seq: q, slot: slot, pos: []int{pos}, blocks: batch[i].Blocks}
		}
		want, err := r.ref.Decode(batch)
		if err != nil {
			panic(fmt.Sprintf("ref decode: %v", err))
		}
		steadyStep := steady(r.prev, act, fed, r.sc.BlockSize)
		got, gerr := sutDo(func() ([]qwen3.Output, error) { return r.dec.Decode(batch) })
		if f := r.check(call{c: c, subStep: k, decode: true, act: act, got: got, want: want, err: gerr, steady: steadyStep}); f != nil {
			return f
		}
		r.steps++
		r.prev = map[int]stepState{}
		for i, q := range seqs {
			r.next[q] = r.fed(got, want, i)
			r.prev[act[i].slot] = stepState{seq: q, pos: act[i].pos[0], token: want[i].Token}
		}
		r.reach.poolFull(r.pool.NumFree() == 0)
	}
	return nil
}

func (r *runner) finish(c Cmd) *Failure {
	if err := r.ref.Finish(qwen3.SeqID(c.Seq)); err != nil {
		panic(fmt.Sprintf("ref finish: %v", err))
	}
	_, err := sutDo(func() (struct{}, error) { return struct{}{}, r.dec.Finish(qwen3.SeqID(c.Seq)) })
	r.tabs[c.Seq].Release()
	r.tabs[c.Seq] = nil
	r.prev = nil
	r.reach.add(ReachFinish)
	return r.checkQuiet(c, err)
}

func (r *runner) recapture(c Cmd) *Failure {
	rs, ok := r.sut.(Resetter)
	if !ok {
		return nil
	}
	_, err := sutDo(func() (struct{}, error) { return struct{}{}, rs.Reset() })
	r.traceWidth = -1
	r.regime.reset()
	r.prev = nil
	r.reach.add(ReachReset)
	return r.checkQuiet(c, err)
}

// checkQuiet checks a command that runs no step: no error, no finding, no
// KV write.
func (r *runner) checkQuiet(c Cmd, err error) *Failure {
	var ps []problem
	if err != nil {
		ps = append(ps, problem{prop: errProp(err), seq: -1, pos: -1, detail: err.Error()})
	}
	finding := r.findings(&ps)
	if e, ok := r.sut.(*EngineSUT); ok {
		r.checkWireQuiet(&ps, c, e)
	} else if kv, ok := r.sut.(KVObserver); ok {
		ws, err := kv.TakeKVWrites()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "KV log: " + err.Error()})
		} else if len(ws) > 0 {
			ps = append(ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("%d KV writes by a command that runs no step, first: %v", len(ws), ws[0])})
		}
	}
	if r.tap != nil {
		ev := r.tap.TakeEvents()
		if ev.EagerOps+ev.Captures+ev.Executes > 0 {
			ps = append(ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: fmt.Sprintf("a command that runs no step ran %d ops, %d captures, %d trace executions on the device", ev.EagerOps, ev.Captures, ev.Executes)})
		}
		r.checkMem(&ps, ev)
	}
	if _, ok := r.sut.(KVPeeker); ok {
		r.diffCache(&ps, call{c: c})
	} else if c.Kind == Finish && r.sc.NumBlocks <= auditMaxBlocks {
		r.auditCache(&ps)
	}
	r.checkPageTableKept(&ps)
	return r.failure(call{c: c}, ps, finding, StepInfo{})
}

func (r *runner) findings(ps *[]problem) string {
	fo, ok := r.sut.(FindingObserver)
	if !ok {
		return ""
	}
	fs := fo.TakeFindings()
	var seqs []int
	if fsq, ok := r.sut.(FindingSeqs); ok {
		seqs = fsq.FindingSeqs()
	}
	if len(fs) == 0 {
		return ""
	}
	op := 0
	if len(seqs) > 0 {
		op = seqs[0]
	}
	d := fs[0]
	if len(fs) > 1 {
		d += fmt.Sprintf(" (and %d more)", len(fs)-1)
	}
	*ps = append(*ps, problem{prop: PropStrict, seq: -1, pos: -1, detail: d, op: op})
	return fs[0]
}

// checkMem checks the device memory after a call (see checkMemory) and
// the calls the tap flagged.
func (r *runner) checkMem(ps *[]problem, ev TapEvents) {
	if len(ev.Misuse) > 0 {
		*ps = append(*ps, problem{prop: PropMemory, seq: -1, pos: -1, detail: ev.Misuse[0]})
		return
	}
	r.tap.memoryInto(&r.tm)
	if d := checkMemory(r.tm, r.persistent); d != "" {
		*ps = append(*ps, problem{prop: PropMemory, seq: -1, pos: -1, detail: d})
	}
}

// checkTap checks a Decoder call against the device's events: the regime
// cadence (captured engines) or no trace at all (eager engines and
// prefills), zero host writes in a steady-state replay, and the memory
// the engine holds afterwards.
func (r *runner) checkTap(ps *[]problem, k call) {
	ev := r.tap.TakeEvents()
	longest := 0
	for _, a := range k.act {
		longest = max(longest, a.pos[len(a.pos)-1]/r.sc.BlockSize+1)
	}
	w := r.sc.contractWidth(longest)
	r.reach.width(w, r.sc.NumBlocks)
	if !k.decode {
		if ev.Captures+ev.Executes > 0 {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1,
				detail: fmt.Sprintf("a prefill captured %d and executed %d traces on the device", ev.Captures, ev.Executes)})
		}
		r.regime.prefill(w, r.sc.Prefill)
	} else if k.err == nil {
		obs, want, why := r.regime.decode(&r.sc, w, activeSlots(k.act), ev)
		if obs != want {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, located: true,
				detail: fmt.Sprintf("the device ran a %s step (%d captures, %d trace executions, %d eager ops), the contract's cadence wants %s: %s (slots %v, width %d, mode %v, recapture_every %d)",
					obs, ev.Captures, ev.Executes, ev.EagerOps, want, why, sortedSlots(k.act), w, r.sc.Mode, r.sc.RecaptureEvery)})
		}
		r.reach.regime(obs, k.steady)
		if obs == "replay" && k.steady {
			if ev.HostWrites > 0 {
				*ps = append(*ps, problem{prop: PropHostWrites, seq: -1, pos: -1, located: true,
					detail: fmt.Sprintf("a steady-state replay (same slots %v, each one position on inside its block, fed the previous step's tokens) made %d host writes, want 0", sortedSlots(k.act), ev.HostWrites)})
			}
		}
	}
	r.checkMem(ps, ev)
}

// diffCache compares the SUT's whole KV cache with ref's after a call:
// ref wrote each position of the call at the host table's block, row
// pos%bs, so a row that differs is a write that went elsewhere (a row the
// call should have written does not hold its values) or a write where
// none belongs (any other row changed). The cache is read where the
// kernel really wrote, not from any log.
func (r *runner) diffCache(ps *[]problem, k call) {
	kp := r.sut.(KVPeeker)
	kvh, hd, bs := r.cfg.NumKeyValueHeads, r.cfg.HeadDim, r.sc.BlockSize
	rows := expectedRows(k.act, bs)
	// The caches were equal after the previous call (before the first
	// one both held +0, as PeekKV's ranges count from): only what the
	// device or ref wrote since can differ.
	var refRows [][2]int
	for _, slot := range r.ref.takeWritten() {
		blk, row := slot/bs, slot%bs
		for h := 0; h < kvh; h++ {
			lo := ((blk*kvh+h)*bs + row) * hd
			refRows = append(refRows, [2]int{lo, lo + hd})
		}
	}
	for l := 0; l < r.cfg.NumHiddenLayers; l++ {
		dk, dv, changed, err := kp.PeekKV(l)
		if err != nil {
			*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "peek KV cache: " + err.Error()})
			return
		}
		value, i, ok := r.firstCacheDiff(ps, l, dk, dv, mergeSpans(append(changed, refRows...))) // changed is ours until the next PeekKV
		if !ok {
			return
		}
		if i < 0 {
			continue
		}
		blk, row, head, dim := r.cacheCoord(i)
		dev, oracl := r.cacheBits(l, value, i, dk, dv)
		where := fmt.Sprintf("layer %d %s cache block %d row %d (head %d dim %d): device bits %#04x, ref %#04x", l, kvName(value), blk, row, head, dim, dev, oracl)
		if sp, ok := rows[[2]int{blk, row}]; ok {
			*ps = append(*ps, problem{prop: PropKVWrite, seq: sp[0], pos: sp[1], detail: fmt.Sprintf("seq %d pos %d: the cache row the host table names does not hold ref's values (the write went elsewhere, was dropped, or wrote other values): %s", sp[0], sp[1], where)})
		} else {
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: "a cache row no position of the call maps to differs from ref's (a stray write): " + where})
		}
		return
	}
}

// firstCacheDiff is the first element, K before V, where layer l's device
// caches dk and dv differ from ref's, looking only inside spans (sorted
// and disjoint; allSpans: everywhere); i is -1 when they agree. ok is false
// when the sizes differ (a problem is added). ref holds the memory of its
// first blocks only (ref.KVStore.Layer): past them its values are +0.
func (r *runner) firstCacheDiff(ps *[]problem, l int, dk, dv []bf16.BF16, spans [][2]int) (value bool, i int, ok bool) {
	rk, rv := r.ref.KV().Layer(l)
	size := r.ref.KV().LayerSize()
	for _, x := range []struct {
		value      bool
		dev, oracl []bf16.BF16
	}{{false, dk, rk}, {true, dv, rv}} {
		if len(x.dev) != size {
			*ps = append(*ps, problem{prop: PropKVCache, seq: -1, pos: -1, detail: fmt.Sprintf("device cache has %d values, ref %d", len(x.dev), size)})
			return false, -1, false
		}
		held := len(x.oracl)
		for _, sp := range spans {
			lo, hi := sp[0], min(sp[1], size)
			if m := min(hi, held); lo < m {
				if j := firstDiff(x.dev[lo:m], x.oracl[lo:m]); j >= 0 {
					return x.value, lo + j, true
				}
			}
			if lo = max(lo, held); lo < hi {
				if j := firstNonZero(x.dev[lo:hi]); j >= 0 {
					return x.value, lo + j, true
				}
			}
		}
	}
	return false, -1, true
}

// firstNonZero is the index of the first value of a whose bits are not
// +0's, or -1.
func firstNonZero(a []bf16.BF16) int {
	for i, x := range a {
		if x != 0 {
			return i
		}
	}
	return -1
}

// allSpans is the one span that covers a whole cache.
var allSpans = [][2]int{{0, math.MaxInt}}

// cacheCoord is element i of a layer's cache in ref's layout
// [block][kvHead][row][headDim].
func (r *runner) cacheCoord(i int) (blk, row, head, dim int) {
	kvh, hd, bs := r.cfg.NumKeyValueHeads, r.cfg.HeadDim, r.sc.BlockSize
	return i / hd / bs / kvh, i / hd % bs, i / hd / bs % kvh, i % hd
}

// cacheBits are element i of layer l's K (or V) cache on the device and
// in ref.
func (r *runner) cacheBits(l int, value bool, i int, dk, dv []bf16.BF16) (dev, oracl uint16) {
	rk, rv := r.ref.KV().Layer(l)
	d, o := dk, rk
	if value {
		d, o = dv, rv
	}
	if i < len(o) { // past ref's held blocks: +0
		oracl = uint16(o[i])
	}
	return uint16(d[i]), oracl
}

// mergeSpans sorts the ranges [lo, hi) and merges those that overlap or
// touch, so the first difference found scanning them in order is the
// lowest index.
func mergeSpans(s [][2]int) [][2]int {
	slices.SortFunc(s, func(a, b [2]int) int { return a[0] - b[0] })
	out := s[:0]
	for _, x := range s {
		if n := len(out); n > 0 && x[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []bf16.BF16) int {
	if bf16.Equal(a[:len(b)], b) { // the common case, compared at once
		return -1
	}
	for i := range b {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
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
			r.checkOpPos(&ps, k, obs, slotSeq)
		}
	}
	// Property 3 after the step: active slots hold their position + 1,
	// every other slot -1.
	if po, ok := r.sut.(PosObserver); ok && k.err == nil {
		dev, err := po.DeviceCurPos()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read cur_pos: " + err.Error()})
		} else {
			want := make([]int32, r.sc.Capacity)
			for i := range want {
				want[i] = -1
			}
			for _, a := range k.act {
				want[a.slot] = int32(a.pos[len(a.pos)-1] + 1)
			}
			if !slices.Equal(dev, want) {
				seq, pos := -1, -1
				for s := range want {
					if s < len(dev) && dev[s] != want[s] {
						if q, ok := slotSeq[s]; ok {
							seq, pos = q, int(want[s])-1
						}
						break
					}
				}
				ps = append(ps, problem{prop: PropCurPos, seq: seq, pos: pos, located: true, offset: len(k.act[0].pos) - 1,
					detail: fmt.Sprintf("after the step the device cur_pos is %v, the host expects %v (seq_len per active slot, -1 for the others)", dev, want)})
			}
		}
	}
	// The device page table holds the host's rows for the last step.
	if k.err == nil {
		r.checkPageTable(&ps, k, slotSeq)
	} else {
		r.ptWant = nil
	}
	// Regime, host writes and memory from the device's own events.
	if r.tap != nil {
		r.checkTap(&ps, k)
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
	}
	f := r.failure(k, ps, finding, si)
	if f != nil {
		f.Grids = r.grids(k, logged, haveLog)
	}
	return f
}

// errProp is the property a SUT error stands for: the engine's own
// read-back check (EngineOptions.Verify) failing on cur_pos or the rope
// index is property 3; anything else is a refused call.
func errProp(err error) string {
	if p := engineProp(err); p != "" {
		return p
	}
	m := err.Error()
	if strings.Contains(m, "verify: device cur_pos") || strings.Contains(m, "verify: device rope index") {
		return PropCurPos
	}
	return PropSUTError
}

func (r *runner) checkRegime(ps *[]problem, si StepInfo) {
	switch si.Regime {
	case "replay":
		switch {
		case r.sc.Mode == qwen3.ModeEager:
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: "an eager engine replayed a trace"})
		case r.traceWidth < 0:
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: "replay with no capture since the engine was reset"})
		case si.Width != r.traceWidth:
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: fmt.Sprintf("replayed a trace captured with a width-%d page table at width %d (a width change must force a re-capture)", r.traceWidth, si.Width)})
		}
	case "capture":
		if r.sc.Mode == qwen3.ModeEager {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: "an eager engine captured a trace"})
		}
		r.traceWidth = si.Width
	default:
		r.traceWidth = -1
	}
}

// checkPageTable compares the device page table after a Decoder call with
// the rows the engine documents (qwen3.Engine, "Page table"): row s of an
// active slot of the call's last step holds Blocks[:Pos/BlockSize+1] of
// that step, then the contract's pad 0; every other row is all pad; the width
// is the width policy over the active rows' block counts. The table is
// read after the call, so inside a prefill only its last step's table is
// seen.
func (r *runner) checkPageTable(ps *[]problem, k call, slotSeq map[int]int) {
	po, ok := r.sut.(PageTableObserver)
	if !ok {
		return
	}
	bs, C := r.sc.BlockSize, r.sc.Capacity
	want, w, longest := r.hostTable(k)
	r.ptWant, r.ptWidth = want, w
	got, gw, ok, err := po.DevicePageTable()
	off := len(k.act[0].pos) - 1
	switch {
	case err != nil:
		*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read page table: " + err.Error()})
		return
	case !ok:
		*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1, located: true, offset: off,
			detail: "the engine has no page table after a step"})
		return
	case gw != w || len(got) != C*w:
		*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1, located: true, offset: off,
			detail: fmt.Sprintf("the device page table is %d values of width %d, the host expects [%d, %d] (width policy %s, longest active row %d blocks)", len(got), gw, C, w, r.sc.Width, longest)})
		return
	}
	for s := 0; s < C; s++ {
		g, x := got[s*w:(s+1)*w], want[s*w:(s+1)*w]
		if slices.Equal(g, x) {
			continue
		}
		seq, pos, what := -1, -1, fmt.Sprintf("slot %d is inactive in the step", s)
		if q, ok := slotSeq[s]; ok {
			for _, a := range k.act {
				if a.slot == s {
					seq, pos = q, a.pos[len(a.pos)-1]
				}
			}
			what = fmt.Sprintf("slot %d holds seq %d at pos %d (block size %d)", s, seq, pos, bs)
		}
		*ps = append(*ps, problem{prop: PropPageTable, seq: seq, pos: pos, located: true, offset: off,
			detail: fmt.Sprintf("device page-table row %d is %s, the host expects %s: %s (columns past its blocks hold PagePad %d)", s, fmtRow(g), fmtRow(x), what, contractPad)})
		return
	}
}

// checkPageTableKept checks that a command that runs no step (finish,
// recapture) left the device page table as the last step wrote it.
func (r *runner) checkPageTableKept(ps *[]problem) {
	po, ok := r.sut.(PageTableObserver)
	if !ok || r.ptWant == nil {
		return
	}
	got, gw, ok, err := po.DevicePageTable()
	switch {
	case err != nil:
		*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read page table: " + err.Error()})
	case !ok || gw != r.ptWidth || !slices.Equal(got, r.ptWant):
		*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1,
			detail: fmt.Sprintf("a command that runs no step changed the device page table: %s (width %d, present %v), the last step left %s (width %d)", fmtRow(got), gw, ok, fmtRow(r.ptWant), r.ptWidth)})
	}
}

// fmtRow prints page-table values with a trailing run of more than four
// PagePad entries collapsed, e.g. "[3 7 ...254×0]".
func fmtRow(v []int32) string {
	n := len(v)
	for n > 0 && v[n-1] == contractPad {
		n--
	}
	if len(v)-n <= 4 {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(fmt.Sprint(v[:n]), "]")
	if n > 0 {
		s += " "
	}
	return fmt.Sprintf("%s...%d×%d]", s, len(v)-n, contractPad)
}

// checkOpPos checks the cur_pos every position-reading op saw against the
// host's positions, step by step (a prefill is one step per position).
func (r *runner) checkOpPos(ps *[]problem, k call, obs []OpPos, slotSeq map[int]int) {
	n := len(k.act[0].pos)
	exp := func(j int) []int32 {
		v := make([]int32, r.sc.Capacity)
		for i := range v {
			v[i] = -1
		}
		for _, a := range k.act {
			v[a.slot] = int32(a.pos[j])
		}
		return v
	}
	j := 0
	cur := exp(0)
	for _, o := range obs {
		if slices.Equal(o.CurPos, cur) {
			continue
		}
		if j+1 < n {
			if nx := exp(j + 1); slices.Equal(o.CurPos, nx) {
				j, cur = j+1, nx
				continue
			}
		}
		seq, pos := -1, -1
		for s := range cur {
			if s < len(o.CurPos) && o.CurPos[s] != cur[s] {
				if q, ok := slotSeq[s]; ok {
					seq, pos = q, int(cur[s])
				}
				break
			}
		}
		*ps = append(*ps, problem{prop: PropCurPos, seq: seq, pos: pos, located: true, offset: j, op: o.Seq,
			detail: fmt.Sprintf("%s (%s) ran with device cur_pos %v, the host expects %v (seq_len-1 per active slot, -1 for the others)", o.Op, o.Regime, o.CurPos, cur)})
		return
	}
}

type wkey struct {
	layer int
	value bool
	slot  int
}

func (r *runner) checkWrites(ps *[]problem, k call, ws []KVWrite, slotSeq map[int]int) {
	bs := r.sc.BlockSize
	// The writes by cache and slot, in the order the keys first appear:
	// r.wkeys maps a key to its group in r.wgroups (both reused, emptied
	// here; a key checked below is deleted).
	if r.wkeys == nil {
		r.wkeys = map[wkey]int{}
	}
	clear(r.wkeys)
	groups, order := r.wgroups[:0], r.worder[:0]
	for _, w := range ws {
		key := wkey{w.Layer, w.Value, w.Slot}
		i, ok := r.wkeys[key]
		if !ok {
			i = len(groups)
			r.wkeys[key] = i
			order = append(order, key)
			if i < cap(groups) {
				groups = groups[:i+1]
				groups[i] = groups[i][:0]
			} else {
				groups = append(groups, nil)
			}
		}
		groups[i] = append(groups[i], w)
	}
	r.wgroups, r.worder = groups, order
	take := func(key wkey) ([]KVWrite, bool) {
		i, ok := r.wkeys[key]
		if !ok {
			return nil, false
		}
		delete(r.wkeys, key)
		return groups[i], true
	}
	var curPos, place *problem
	note := func(dst **problem, p problem) {
		if *dst == nil {
			*dst = &p
		}
	}
	for _, a := range k.act {
		for l := 0; l < r.cfg.NumHiddenLayers; l++ {
			for _, value := range []bool{false, true} {
				got, _ := take(wkey{l, value, a.slot})
				for i, p := range a.pos {
					wantB, wantR := int64(a.blocks[p/bs]), int64(p%bs)
					exp := KVWrite{Layer: l, Value: value, Slot: a.slot, Pos: int64(p), Block: wantB, Row: wantR}
					if i >= len(got) {
						note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: p, located: true, offset: i, missing: true,
							detail: fmt.Sprintf("seq %d: missing KV write (%v)", a.seq, exp)})
						break
					}
					g := got[i]
					if g.Pos != int64(p) {
						note(&curPos, problem{prop: PropCurPos, seq: a.seq, pos: p, located: true, offset: i,
							detail: fmt.Sprintf("seq %d: paged_update_cache (layer %d %s, slot %d) ran with device cur_pos %d, host seq_len-1 is %d", a.seq, l, kvName(value), a.slot, g.Pos, p)})
						continue
					}
					if g.Block != wantB || g.Row != wantR {
						note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: p, located: true, offset: i,
							detail: fmt.Sprintf("seq %d pos %d: KV written to block %d row %d, the host table says block %d row %d (table %v, layer %d %s)", a.seq, p, g.Block, g.Row, wantB, wantR, a.blocks[:p/bs+1], l, kvName(value))})
					}
				}
				if len(got) > len(a.pos) {
					lastPos, off := -1, 0
					if len(a.pos) > 0 {
						lastPos, off = a.pos[len(a.pos)-1], len(a.pos)-1
					}
					note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: lastPos, located: true, offset: off,
						detail: fmt.Sprintf("seq %d: %d extra KV writes, first %v", a.seq, len(got)-len(a.pos), got[len(a.pos)])})
				}
			}
		}
	}
	for _, key := range order {
		got, ok := take(key)
		if !ok {
			continue
		}
		g := got[0]
		switch {
		case key.layer < 0:
			note(&place, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("KV write into a buffer that is no cache of the engine: %v", g)})
		case key.layer >= r.cfg.NumHiddenLayers:
			note(&place, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("KV write into layer %d of %d: %v", key.layer, r.cfg.NumHiddenLayers, g)})
		default:
			note(&curPos, problem{prop: PropCurPos, seq: -1, pos: -1, detail: fmt.Sprintf("slot %d is inactive (host cur_pos -1) but paged_update_cache wrote for it with device cur_pos %d (%v)", key.slot, g.Pos, g)})
		}
	}
	if curPos != nil {
		*ps = append(*ps, *curPos)
	}
	if place != nil {
		*ps = append(*ps, *place)
	}
}

// dropPromptPadding removes from a multi-token prefill's KV writes those
// of the tile padding rows past the prompt (positions T..roundup32(T)-1 of
// the last block, where the host table names them): paged_fill_cache
// writes whole 32-row tiles, and the oracle expects those rows to hold
// zeros. A prefill by decode steps writes no such row.
func (r *runner) dropPromptPadding(ws []KVWrite, k call) []KVWrite {
	if k.decode || r.sc.Prefill != qwen3.PrefillProgram {
		return ws
	}
	bs := r.sc.BlockSize
	out := ws[:0:0]
	for _, w := range ws {
		pad := false
		for _, a := range k.act {
			T := len(a.pos)
			if w.Slot != a.slot || w.Pos < int64(T) || w.Pos >= int64(promptTileEnd(T)) {
				continue
			}
			p := int(w.Pos)
			if p/bs < len(a.blocks) && w.Block == int64(a.blocks[p/bs]) && w.Row == int64(p%bs) {
				pad = true
			}
		}
		if !pad {
			out = append(out, w)
		}
	}
	return out
}

func kvName(value bool) string {
	if value {
		return "V"
	}
	return "K"
}

func (r *runner) checkOutputs(ps *[]problem, k call, bs int) {
	if len(k.got) != len(k.want) {
		*ps = append(*ps, problem{prop: PropLogits, seq: -1, pos: -1, detail: fmt.Sprintf("%d outputs, ref has %d", len(k.got), len(k.want))})
		return
	}
	for i := range k.want {
		g, w := k.got[i], k.want[i]
		d := diffOutput(g, w)
		if d == "" {
			continue
		}
		off := 0
		if !k.decode {
			off = i
		}
		*ps = append(*ps, problem{prop: PropLogits, seq: int(w.Seq), pos: w.Pos, located: true, offset: off,
			detail: fmt.Sprintf("seq %d pos %d (block %d, row %d): %s", w.Seq, w.Pos, w.Pos/bs, w.Pos%bs, d)})
		return
	}
}

// diffOutput describes how got differs from ref's want, or "".
func diffOutput(got, want qwen3.Output) string {
	if got.Seq != want.Seq || got.Pos != want.Pos {
		return fmt.Sprintf("output for seq %d pos %d, ref's is seq %d pos %d", got.Seq, got.Pos, want.Seq, want.Pos)
	}
	if len(got.Logits) != len(want.Logits) {
		return fmt.Sprintf("%d logits, ref has %d", len(got.Logits), len(want.Logits))
	}
	n, first := 0, -1
	for i := range want.Logits {
		if math.Float32bits(got.Logits[i]) != math.Float32bits(want.Logits[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if got.Token == want.Token && n == 0 {
		return ""
	}
	var b strings.Builder
	if got.Token != want.Token {
		fmt.Fprintf(&b, "token %d, ref %d; ", got.Token, want.Token)
	}
	if n > 0 {
		fmt.Fprintf(&b, "%d of %d logits differ, first [%d] %v vs ref %v", n, len(want.Logits), first, got.Logits[first], want.Logits[first])
	} else {
		b.WriteString("logits equal")
	}
	return b.String()
}

// auditMaxBlocks: caches of more blocks are not audited (reading 256
// blocks back after every finish costs more than the rest of a schedule;
// the KV write log still shows every write landed where the table says).
const auditMaxBlocks = 64

// auditCache compares the SUT's whole KV cache with ref's.
func (r *runner) auditCache(ps *[]problem) {
	kr, ok := r.sut.(KVReader)
	if !ok {
		return
	}
	for l := 0; l < r.cfg.NumHiddenLayers; l++ {
		dk, dv, err := kr.ReadKV(l)
		if err != nil {
			*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read KV cache: " + err.Error()})
			return
		}
		value, i, ok := r.firstCacheDiff(ps, l, dk, dv, allSpans)
		if !ok {
			return
		}
		if i >= 0 {
			blk, row, head, dim := r.cacheCoord(i)
			dev, oracl := r.cacheBits(l, value, i, dk, dv)
			*ps = append(*ps, problem{prop: PropKVCache, seq: -1, pos: -1, detail: fmt.Sprintf("layer %d %s cache, block %d row %d head %d dim %d: device bits %#04x, ref %#04x", l, kvName(value), blk, row, head, dim, dev, oracl)})
			return
		}
	}
}

// failure turns the problems of one call into a Failure (nil when none).
func (r *runner) failure(k call, ps []problem, finding string, si StepInfo) *Failure {
	if len(ps) == 0 {
		return nil
	}
	slices.SortStableFunc(ps, firstCause)
	if k.err != nil && ps[0].missing {
		// A write that never happened because the call stopped at its
		// error: the error is the cause, the missing write its effect.
		i := slices.IndexFunc(ps, func(q problem) bool { return q.callErr })
		if i > 0 {
			e := ps[i]
			copy(ps[1:i+1], ps[:i])
			ps[0] = e
		}
	}
	p := ps[0]
	// A finding or an error has no position: place it at the earliest
	// located problem of the same call, if any.
	loc := p
	if !loc.located {
		for _, q := range ps[1:] {
			if q.located && (!loc.located || q.offset < loc.offset) {
				loc = q
			}
		}
	}
	f := &Failure{Property: p.prop, Command: r.cmds, Cmd: k.c.String(), SubStep: k.subStep,
		DeviceStep: r.steps + loc.offset, Seq: loc.seq, Pos: loc.pos, Regime: si.Regime, Width: si.Width,
		Detail: p.detail, Finding: finding}
	if f.Seq < 0 && len(k.act) == 1 {
		f.Seq = k.act[0].seq
	}
	for _, q := range ps[1:] {
		if q.prop != p.prop && !slices.Contains(f.Also, q.prop) {
			f.Also = append(f.Also, q.prop)
			f.AlsoDetail = append(f.AlsoDetail, q.prop+": "+clipDetail(q.detail, maxAlsoDetail))
		}
	}
	return f
}

// firstCause orders the problems of one call by when they arose, so the
// headline names the first cause: problems in different device steps of
// the call by step; problems at device ops by the op (device order);
// problems seen at an op before those seen only after the call; the rest
// (and ties) by propRank.
func firstCause(a, b problem) int {
	if a.located && b.located && a.offset != b.offset {
		return a.offset - b.offset
	}
	switch {
	case a.op > 0 && b.op > 0 && a.op != b.op:
		return a.op - b.op
	case a.op > 0 && b.op == 0 && (b.located || b.prop != PropStrict):
		return -1
	case b.op > 0 && a.op == 0 && (a.located || a.prop != PropStrict):
		return 1
	}
	return slices.Index(propRank, a.prop) - slices.Index(propRank, b.prop)
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
