package proptest

import (
	"fmt"
	"math"
	"slices"
	"strings"

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
	// (each active slot's blocks for its position, then qwen3.PagePad;
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
)

var propRank = []string{PropSetup, PropEngine, PropPanic, PropStrict, PropCurPos, PropKVWrite, PropPageTable, PropSUTError, PropReplay, PropLogits, PropKVCache}

// Failure is the first failing step of a schedule run.
type Failure struct {
	// Property is the property that fired (Prop*); Also lists the others
	// that fired at the same step.
	Property string   `json:"property"`
	Also     []string `json:"also,omitempty"`
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
	ref  *ref.Decoder
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
	if r.ref, err = ref.New(w, ref.Options{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Threads: 1}); err != nil {
		return nil, err
	}
	if r.sut, err = f(sc); err != nil {
		r.ref.Close()
		return nil, err
	}
	r.dec = r.sut.Decoder()
	return r, nil
}

func (r *runner) close() error {
	if r.ref != nil {
		r.ref.Close()
	}
	if r.sut != nil {
		return r.sut.Close()
	}
	return nil
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
			fail = &Failure{Property: PropPanic, Command: r.cmds, Cmd: c.String(), DeviceStep: r.steps,
				Seq: -1, Pos: -1, Detail: fmt.Sprint(p)}
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
}

type problem struct {
	prop     string
	seq, pos int
	offset   int  // device steps into the call (prefill position)
	located  bool // offset (and seq, pos) are known
	detail   string
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
	got, gerr := r.dec.Prefill(p)
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
	return f
}

func (r *runner) decode(c Cmd) *Failure {
	seqs := r.m.batch(c)
	for k := 1; k <= c.Steps; k++ {
		batch := make([]qwen3.Step, len(seqs))
		act := make([]active, len(seqs))
		for i, q := range seqs {
			pos := r.m.length[q] + k - 1
			tab := r.tabs[q]
			if err := tab.Grow(pos + 1); err != nil {
				panic(fmt.Sprintf("host pool: %v", err))
			}
			batch[i] = qwen3.Step{Seq: qwen3.SeqID(q), Token: r.next[q], Pos: pos, Blocks: tab.Blocks()}
			act[i] = active{seq: q, slot: r.m.slot[q], pos: []int{pos}, blocks: batch[i].Blocks}
		}
		want, err := r.ref.Decode(batch)
		if err != nil {
			panic(fmt.Sprintf("ref decode: %v", err))
		}
		got, gerr := r.dec.Decode(batch)
		if f := r.check(call{c: c, subStep: k, decode: true, act: act, got: got, want: want, err: gerr}); f != nil {
			return f
		}
		r.steps++
		for i, q := range seqs {
			r.next[q] = r.fed(got, want, i)
		}
	}
	return nil
}

func (r *runner) finish(c Cmd) *Failure {
	if err := r.ref.Finish(qwen3.SeqID(c.Seq)); err != nil {
		panic(fmt.Sprintf("ref finish: %v", err))
	}
	err := r.dec.Finish(qwen3.SeqID(c.Seq))
	r.tabs[c.Seq].Release()
	r.tabs[c.Seq] = nil
	return r.checkQuiet(c, err)
}

func (r *runner) recapture(c Cmd) *Failure {
	rs, ok := r.sut.(Resetter)
	if !ok {
		return nil
	}
	err := rs.Reset()
	r.traceWidth = -1
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
	if kv, ok := r.sut.(KVObserver); ok {
		ws, err := kv.TakeKVWrites()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "KV log: " + err.Error()})
		} else if len(ws) > 0 {
			ps = append(ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("%d KV writes by a command that runs no step, first: %v", len(ws), ws[0])})
		}
	}
	if c.Kind == Finish && r.sc.NumBlocks <= auditMaxBlocks {
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
	if len(fs) == 0 {
		return ""
	}
	d := fs[0]
	if len(fs) > 1 {
		d += fmt.Sprintf(" (and %d more)", len(fs)-1)
	}
	*ps = append(*ps, problem{prop: PropStrict, seq: -1, pos: -1, detail: d})
	return fs[0]
}

// check checks every property after one Decoder call.
func (r *runner) check(k call) *Failure {
	if tol, ok := r.tolerant(); ok {
		return r.checkTolerant(k, tol)
	}
	var ps []problem
	if k.err != nil {
		ps = append(ps, problem{prop: errProp(k.err), seq: -1, pos: -1, detail: k.err.Error()})
	}
	finding := r.findings(&ps)
	bs := r.sc.BlockSize
	slotSeq := map[int]int{}
	for _, a := range k.act {
		slotSeq[a.slot] = a.seq
	}

	// Properties 2 and 3 from the device's own KV write log: every write
	// at table[pos/bs] row pos%bs, at the host's position, exactly once.
	if kv, ok := r.sut.(KVObserver); ok {
		ws, err := kv.TakeKVWrites()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "KV log: " + err.Error()})
		} else {
			r.checkWrites(&ps, k, ws, slotSeq)
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
	// Property 4: no replay across a width change, after a reset, or in
	// eager mode.
	var si StepInfo
	if so, ok := r.sut.(StepObserver); ok && k.err == nil {
		si = so.LastStep()
		if k.decode {
			r.checkRegime(&ps, si)
		}
	}
	// Properties 1, 4, 6: outputs equal ref's bit for bit.
	if k.err == nil {
		r.checkOutputs(&ps, k, bs)
	}
	return r.failure(k, ps, finding, si)
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
// that step, then qwen3.PagePad; every other row is all PagePad; the width
// is the width policy over the active rows' block counts. The table is
// read after the call, so inside a prefill only its last step's table is
// seen.
func (r *runner) checkPageTable(ps *[]problem, k call, slotSeq map[int]int) {
	po, ok := r.sut.(PageTableObserver)
	if !ok {
		return
	}
	bs, C := r.sc.BlockSize, r.sc.Capacity
	longest := 0
	for _, a := range k.act {
		longest = max(longest, a.pos[len(a.pos)-1]/bs+1)
	}
	w, err := kvpage.Width(r.sc.Width, longest)
	if err != nil {
		panic(fmt.Sprintf("width policy: %v", err)) // the preconditions keep every position within the policy
	}
	want := make([]int32, C*w)
	for i := range want {
		want[i] = qwen3.PagePad
	}
	for _, a := range k.act {
		copy(want[a.slot*w:], a.blocks[:a.pos[len(a.pos)-1]/bs+1])
	}
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
			detail: fmt.Sprintf("device page-table row %d is %s, the host expects %s: %s (columns past its blocks hold PagePad %d)", s, fmtRow(g), fmtRow(x), what, qwen3.PagePad)})
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
	for n > 0 && v[n-1] == qwen3.PagePad {
		n--
	}
	if len(v)-n <= 4 {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(fmt.Sprint(v[:n]), "]")
	if n > 0 {
		s += " "
	}
	return fmt.Sprintf("%s...%d×%d]", s, len(v)-n, qwen3.PagePad)
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
		*ps = append(*ps, problem{prop: PropCurPos, seq: seq, pos: pos, located: true, offset: j,
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
	obs := map[wkey][]KVWrite{}
	var order []wkey
	for _, w := range ws {
		key := wkey{w.Layer, w.Value, w.Slot}
		if _, ok := obs[key]; !ok {
			order = append(order, key)
		}
		obs[key] = append(obs[key], w)
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
				key := wkey{l, value, a.slot}
				got := obs[key]
				delete(obs, key)
				for i, p := range a.pos {
					wantB, wantR := int64(a.blocks[p/bs]), int64(p%bs)
					exp := KVWrite{Layer: l, Value: value, Slot: a.slot, Pos: int64(p), Block: wantB, Row: wantR}
					if i >= len(got) {
						note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: p, located: true, offset: i,
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
					note(&place, problem{prop: PropKVWrite, seq: a.seq, pos: a.pos[len(a.pos)-1], located: true, offset: len(a.pos) - 1,
						detail: fmt.Sprintf("seq %d: %d extra KV writes, first %v", a.seq, len(got)-len(a.pos), got[len(a.pos)])})
				}
			}
		}
	}
	for _, key := range order {
		got, ok := obs[key]
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
	kvh, hd, bs := r.cfg.NumKeyValueHeads, r.cfg.HeadDim, r.sc.BlockSize
	for l := 0; l < r.cfg.NumHiddenLayers; l++ {
		dk, dv, err := kr.ReadKV(l)
		if err != nil {
			*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read KV cache: " + err.Error()})
			return
		}
		rk, rv := r.ref.KV().Layer(l)
		for _, x := range []struct {
			value      bool
			dev, oracl []bf16.BF16
		}{{false, dk, rk}, {true, dv, rv}} {
			if len(x.dev) != len(x.oracl) {
				*ps = append(*ps, problem{prop: PropKVCache, seq: -1, pos: -1, detail: fmt.Sprintf("device cache has %d values, ref %d", len(x.dev), len(x.oracl))})
				return
			}
			for i := range x.oracl {
				if x.dev[i] != x.oracl[i] {
					d := i % hd
					row := i / hd % bs
					head := i / hd / bs % kvh
					blk := i / hd / bs / kvh
					*ps = append(*ps, problem{prop: PropKVCache, seq: -1, pos: -1, detail: fmt.Sprintf("layer %d %s cache, block %d row %d head %d dim %d: device bits %#04x, ref %#04x", l, kvName(x.value), blk, row, head, d, uint16(x.dev[i]), uint16(x.oracl[i]))})
					return
				}
			}
		}
	}
}

// failure turns the problems of one call into a Failure (nil when none).
func (r *runner) failure(k call, ps []problem, finding string, si StepInfo) *Failure {
	if len(ps) == 0 {
		return nil
	}
	rank := func(p string) int { return slices.Index(propRank, p) }
	slices.SortStableFunc(ps, func(a, b problem) int { return rank(a.prop) - rank(b.prop) })
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
		}
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
	}
	return nil, r.stats(), nil
}

func (r *runner) stats() RunStats { return RunStats{Commands: r.cmds, DeviceSteps: r.steps} }
