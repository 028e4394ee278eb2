package proptest

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Failures: the property names (ranked: the likeliest cause first), a
// run's first failing step, and how the problems of one call become it.

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

var propRank = []string{PropSetup, PropEngine, PropPanic, PropStrict, PropRollback, PropCurPos, PropSharedWrite, PropKVWrite, PropPageTable, PropSUTError, PropReplay, PropHostWrites, PropMemory, PropPrefixHit, PropRecompute, PropLogits, PropKVCache, PropClose}

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

// failure turns the problems of one call into a Failure (nil when none).
func (r *runner) failure(k call, ps []problem, finding string, si StepInfo) *Failure {
	if len(ps) == 0 {
		return nil
	}
	ps = r.rollbackProblems(ps)
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
