package proptest

import (
	"fmt"
	"slices"

	"github.com/offcard/offcard/tt"
	"github.com/offcard/offcard/wire"
)

// The tolerant mode's judgement of an engine behind the protocol (an
// EngineSUT), where it differs from the card's: what the protocol leaves
// to the engine is kept out of the verdict, and protocol version 2's
// device observations (regime, host writes, memory, close) are checked as
// the in-process suite checks the tap's events.
//
// Left to the engine, never judged:
//   - what a row the sequence never wrote holds (rows it skipped with a
//     position jump, rows past its length, rows a block's previous owner
//     wrote, tile padding): the outputs of a sequence whose attention
//     window holds such a row (from its first jump until it finishes) are
//     not judged against ref (tokens nor logits); teacher forcing feeds
//     its own tokens on.
//   - writes that store no token (clears, padding) where no live sequence
//     has written: zeroing freed blocks at finish, handed-out blocks at an
//     admit, a prompt's 32-row tile padding.
//   - eager device work at finish and reset (clearing), unless the engine
//     follows the hints (then offcard's engine's contract: none).

// wireJudge is the judge's state for an engine behind the protocol.
type wireJudge struct {
	seqs map[int]*wireSeq
	// baseline is the persistent buffer count of the hello's memory
	// observation (-1: not given).
	baseline int
	// captured: a capture happened since the start or the last reset (a
	// replay needs one).
	captured bool
}

// wireSeq is what a live sequence has written: its positions (and the
// block table of its last call).
type wireSeq struct {
	blocks  []int32
	written map[int]bool
	next    int  // one past its highest position written
	holes   bool // it skipped positions: its outputs are not judged
}

func (r *runner) wire() *wireJudge {
	if r.wj == nil {
		r.wj = &wireJudge{seqs: map[int]*wireSeq{}, baseline: -1}
		if e, ok := r.sut.(*EngineSUT); ok {
			if m := e.C.HelloReply().Obs; m != nil && m.Mem != nil {
				r.wj.baseline = m.Mem.Persistent
			}
		}
	}
	return r.wj
}

// unjudged lists the sequences of a step whose outputs read a row they
// never wrote: they skipped positions before, or skip now.
func (j *wireJudge) unjudged(k call) map[int]bool {
	var u map[int]bool
	for _, a := range k.act {
		s := j.seqs[a.seq]
		skip := false
		switch {
		case fresh(k, a):
			// An admit starts the sequence afresh.
		case s == nil:
			skip = a.pos[0] > 0
		default:
			skip = s.holes || a.pos[0] > s.next
		}
		if skip {
			if u == nil {
				u = map[int]bool{}
			}
			u[a.seq] = true
		}
	}
	return u
}

// step notes what a step call wrote.
func (j *wireJudge) step(k call) {
	for _, a := range k.act {
		s := j.seqs[a.seq]
		if fresh(k, a) || s == nil {
			s = &wireSeq{written: map[int]bool{}}
			j.seqs[a.seq] = s
		}
		for _, p := range a.pos {
			if p > s.next {
				s.holes = true
			}
			s.written[p] = true
			s.next = max(s.next, p+1)
		}
		s.blocks = a.blocks
	}
}

// fresh reports whether call k starts a's sequence afresh: a prefill from
// position 0 (a verify, a later chunk and a prefix hit continue what the
// sequence holds).
func fresh(k call, a active) bool {
	return !k.decode && !k.verify && (!k.from || a.pos[0] == 0)
}

// inherit starts sequence q with the first n positions from's table holds
// (a prefix hit, a fork): written by from, or inherited by it.
func (j *wireJudge) inherit(q, from, n int) {
	src := j.seqs[from]
	s := &wireSeq{written: map[int]bool{}, next: n}
	if src != nil {
		for p := range src.written {
			if p < n {
				s.written[p] = true
			}
		}
		s.blocks, s.holes = src.blocks, len(s.written) < n // a row below n it never wrote
	}
	j.seqs[q] = s
}

// liveRows maps every cache row (block, row) a live sequence has written
// to that sequence and position.
func (j *wireJudge) liveRows(bs int) map[[2]int64][2]int {
	rows := map[[2]int64][2]int{}
	for q, s := range j.seqs {
		for p := range s.written {
			if p/bs < len(s.blocks) {
				rows[[2]int64{int64(s.blocks[p/bs]), int64(p % bs)}] = [2]int{q, p}
			}
		}
	}
	return rows
}

// engineCaps is the engine's caps when the SUT is an engine process.
func (r *runner) engineCaps() (wire.Caps, bool) {
	if e, ok := r.sut.(*EngineSUT); ok {
		return e.C.Caps(), true
	}
	return wire.Caps{}, false
}

// checkWireKV checks a step call's KV writes (kv_writes): every write
// that stores a token as checkWrites does (by sequence), the prompt's
// tile padding of an admit left out; every clear where no live sequence
// has written, and never after the call wrote the row.
func (r *runner) checkWireKV(ps *[]problem, k call, e *EngineSUT, seqSet map[int]int) {
	raw, ok := e.takeWire(&e.takenKV)
	if !ok {
		return
	}
	bs := r.sc.BlockSize
	var tok []KVWrite
	var live map[[2]int64][2]int
	done := map[[4]int64]bool{} // (layer, v, block, row) of the call's token writes so far
	for _, w := range raw.KVWrites {
		if w.KV != "k" && w.KV != "v" {
			*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: fmt.Sprintf("KV write %+v: kv %q, want k or v", w, w.KV)})
			return
		}
		value := int64(0)
		if w.KV == "v" {
			value = 1
		}
		key := [4]int64{int64(w.Layer), value, w.Block, w.Row}
		if !w.Clear {
			if !k.decode && r.promptPadding(w, k) {
				continue
			}
			done[key] = true
			tok = append(tok, KVWrite{Layer: w.Layer, Value: w.KV == "v", Slot: w.Seq, Pos: w.Pos, Block: w.Block, Row: w.Row})
			continue
		}
		if live == nil {
			live = r.wire().liveRows(bs)
		}
		if d := clearProblem(w, live, r.cfg.NumHiddenLayers); d != "" {
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: d})
			return
		}
		if done[key] {
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1,
				detail: fmt.Sprintf("a clear (layer %d %s block %d row %d) after the call wrote that row for a token", w.Layer, w.KV, w.Block, w.Row)})
			return
		}
	}
	r.checkWrites(ps, k, tok, seqSet)
}

// promptPadding: w is a write of a prefill's (or a chunk's) sequence at
// a position past the call's last inside that position's 32-row tile, at
// that position's row (a prompt program writes whole tiles; those rows
// are never read before the sequence writes them, unless it skips them).
func (r *runner) promptPadding(w wire.KVWrite, k call) bool {
	bs := r.sc.BlockSize
	for _, a := range k.act {
		if len(a.pos) == 0 {
			continue
		}
		T := a.pos[len(a.pos)-1] + 1
		if w.Seq != a.seq || w.Pos < int64(T) || w.Pos >= int64(promptTileEnd(T)) {
			continue
		}
		p := int(w.Pos)
		if p/bs < len(a.blocks) && w.Block == int64(a.blocks[p/bs]) && w.Row == int64(p%bs) {
			return true
		}
	}
	return false
}

// clearProblem describes a write that lands on a row a live sequence has
// written (or in no layer of the model), or returns "".
func clearProblem(w wire.KVWrite, live map[[2]int64][2]int, layers int) string {
	if w.Layer < 0 || w.Layer >= layers {
		return fmt.Sprintf("KV write into layer %d of %d: %+v", w.Layer, layers, w)
	}
	if o, ok := live[[2]int64{w.Block, w.Row}]; ok {
		what := "clear"
		if !w.Clear {
			what = "write"
		}
		return fmt.Sprintf("a %s (layer %d %s, block %d row %d) overwrites seq %d pos %d, which is live", what, w.Layer, w.KV, w.Block, w.Row, o[0], o[1])
	}
	return ""
}

// checkWireQuiet checks a command that runs no step (finish, reset) of an
// engine process: its KV writes by where they land only (a finish may
// clear the blocks it freed), its regime and its memory.
func (r *runner) checkWireQuiet(ps *[]problem, c Cmd, e *EngineSUT) {
	j := r.wire()
	if c.Kind == Finish || c.Kind == Preempt {
		delete(j.seqs, c.Seq)
	}
	if c.Kind == Recapture {
		j.captured = false
	}
	if raw, ok := e.takeWire(&e.takenKV); ok && e.C.Caps().Offers(wire.ObsKVWrites) && len(raw.KVWrites) > 0 {
		live := j.liveRows(r.sc.BlockSize)
		for _, w := range raw.KVWrites {
			if d := clearProblem(w, live, r.cfg.NumHiddenLayers); d != "" {
				*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: quietName(c) + ": " + d})
				break
			}
		}
	}
	raw, ok := e.takeWire(&e.takenDev)
	if !ok {
		return
	}
	caps := e.C.Caps()
	if caps.Offers(wire.ObsRegime) {
		switch g := raw.Regime; {
		case g == wire.RegimeCapture || g == wire.RegimeReplay || g == wire.RegimeEager && caps.FollowsHints:
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1,
				detail: fmt.Sprintf("%s, a command that runs no step, ran a %s on the device", quietName(c), g)})
		}
	}
	r.checkWireMem(ps, raw.Mem, caps)
}

func quietName(c Cmd) string {
	if c.Kind == Finish || c.Kind == Preempt {
		return "finish"
	}
	return "reset"
}

// checkWireDevice checks a step call's regime, host writes and memory
// (version 2) as checkTap checks the tap's events.
func (r *runner) checkWireDevice(ps *[]problem, k call, e *EngineSUT) {
	raw, ok := e.takeWire(&e.takenDev)
	if !ok {
		return
	}
	caps := e.C.Caps()
	if caps.Offers(wire.ObsRegime) && k.err == nil {
		r.checkWireRegime(ps, k, raw, caps)
	}
	r.checkWireMem(ps, raw.Mem, caps)
}

func (r *runner) checkWireRegime(ps *[]problem, k call, raw wire.Observations, caps wire.Caps) {
	j := r.wire()
	var ev TapEvents
	switch raw.Regime {
	case wire.RegimeCapture:
		ev.Captures, ev.Executes = 1, 1
	case wire.RegimeReplay:
		ev.Executes = 1
	case wire.RegimeEager:
		ev.EagerOps = 1
		// The device's refusal of a capture is not seen through the
		// protocol: with a trace region hinted, an eager step where the
		// cadence wants a capture is taken as the device refusing it, and
		// the cadence then wants eager for good (regimeModel.refused).
		if r.sc.TraceRegion > 0 && !r.regime.refused {
			ev.Refused = 1
		}
	}
	if raw.HostWrites != nil {
		ev.HostWrites = *raw.HostWrites
	}
	obs := observedRegime(ev)
	if raw.Regime == wire.RegimeNone {
		obs = wire.RegimeNone
	}
	longest := 0
	for _, a := range k.act {
		longest = max(longest, a.pos[len(a.pos)-1]/r.sc.BlockSize+1)
	}
	w := r.sc.contractWidth(longest)
	switch {
	case !k.decode:
		if caps.FollowsHints {
			if raw.Regime == wire.RegimeCapture || raw.Regime == wire.RegimeReplay {
				*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: fmt.Sprintf("a prefill ran a %s on the device", raw.Regime)})
			}
			r.regime.prefill(w, r.decodeSteps(k))
		}
	case caps.FollowsHints:
		got, want, why := r.regime.decode(&r.sc, w, activeSlots(k.act), ev)
		if r.regime.refusedNow {
			r.reach.add(ReachCaptureRefused)
		}
		if got != want {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, located: true,
				detail: fmt.Sprintf("the engine reports a %s step, the contract's cadence (the hints it follows) wants %s: %s (slots %v, width %d, mode %v, recapture_every %d)",
					raw.Regime, want, why, sortedSlots(k.act), w, r.sc.Mode, r.sc.RecaptureEvery)})
		}
	default:
		if obs == "replay" && !j.captured {
			*ps = append(*ps, problem{prop: PropReplay, seq: -1, pos: -1, located: true,
				detail: "the engine reports a replay, but it captured no trace since it started or was last reset"})
		}
	}
	if k.decode {
		r.reach.regime(obs, k.steady)
	}
	if obs == "capture" {
		j.captured = true
	}
	if k.decode && obs == "replay" && k.steady && caps.Offers(wire.ObsHostWrites) && ev.HostWrites > 0 {
		*ps = append(*ps, problem{prop: PropHostWrites, seq: -1, pos: -1, located: true,
			detail: fmt.Sprintf("a steady-state replay (the same sequences, each one position on inside its block, fed the previous step's tokens) made %d host writes, want 0", ev.HostWrites)})
	}
}

// checkWireMem checks the memory observation after a call: the buffers
// live at the hello are live, and every buffer allocated since is the
// page table the last paged op read or recorded by a live trace.
func (r *runner) checkWireMem(ps *[]problem, m *wire.Memory, caps wire.Caps) {
	if !caps.Offers(wire.ObsMemory) || m == nil {
		return
	}
	j := r.wire()
	if j.baseline >= 0 && m.Persistent != j.baseline {
		*ps = append(*ps, problem{prop: PropMemory, seq: -1, pos: -1,
			detail: fmt.Sprintf("%d of the %d buffers live at the hello are live", m.Persistent, j.baseline)})
		return
	}
	inTrace := map[int64]bool{}
	for _, t := range m.Traces {
		for _, id := range t.Buffers {
			inTrace[id] = true
		}
	}
	var stray []string
	for _, b := range m.Live {
		if m.PageTable != nil && b.ID == *m.PageTable || inTrace[b.ID] {
			continue
		}
		stray = append(stray, bufName(b))
	}
	if len(stray) > 0 {
		pt := "none"
		if m.PageTable != nil {
			pt = fmt.Sprint(*m.PageTable)
		}
		*ps = append(*ps, problem{prop: PropMemory, seq: -1, pos: -1,
			detail: fmt.Sprintf("%d buffers allocated since the hello are live though neither the current page table (buffer %s, the one the last paged op read) nor recorded by a live trace: %v",
				len(stray), pt, stray[:min(len(stray), 3)])})
	}
}

func bufName(b wire.Buffer) string {
	if b.What != "" {
		return fmt.Sprintf("%d (%s)", b.ID, b.What)
	}
	return fmt.Sprint(b.ID)
}

// closedMemory describes what the device still holds after bye (close),
// or "".
func (s *EngineSUT) closedMemory() string {
	rep := s.C.ByeReply()
	if rep == nil || !rep.OK || !s.C.Caps().Offers(wire.ObsClose) || rep.Obs == nil || rep.Obs.Mem == nil {
		return ""
	}
	m := rep.Obs.Mem
	if m.Persistent == 0 && len(m.Live) == 0 && len(m.Traces) == 0 {
		return ""
	}
	ids := make([]string, 0, 3)
	for _, b := range m.Live[:min(3, len(m.Live))] {
		ids = append(ids, bufName(b))
	}
	return fmt.Sprintf("after bye the device still holds %d buffers (%d from before the hello, later ones %v) and %d traces", m.Persistent+len(m.Live), m.Persistent, ids, len(m.Traces))
}

// wireObservations reports the tap's events and memory since the last
// call as protocol observations (OpenSimEngine's regime, host_writes,
// memory and close), and the calls the tap flagged as findings.
func wireObservations(t *Tap, obs *wire.Observations) {
	ev := t.TakeEvents()
	switch {
	case ev.Captures > 0:
		obs.Regime = wire.RegimeCapture
	case ev.Executes > 0:
		obs.Regime = wire.RegimeReplay
	case ev.EagerOps > 0:
		obs.Regime = wire.RegimeEager
	default:
		obs.Regime = wire.RegimeNone
	}
	hw := ev.HostWrites
	obs.HostWrites = &hw
	for _, m := range ev.Misuse {
		obs.Findings = append(obs.Findings, "device misuse: "+m)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	m := &wire.Memory{Persistent: len(t.live) - len(t.later)}
	for _, a := range t.later {
		b := wire.Buffer{ID: int64(a.t.ID)}
		recorded := false
		for _, ts := range t.traces {
			recorded = recorded || ts[a.t.ID]
		}
		if !recorded {
			b.What = a.t.String() // a trace's buffers go undescribed: they are many
		}
		m.Live = append(m.Live, b)
	}
	if pt := t.currentPageTable(); pt != 0 {
		id := int64(pt)
		m.PageTable = &id
	}
	ids := make([]tt.TraceID, 0, len(t.traces))
	for id := range t.traces {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		tr := wire.Trace{ID: int64(id)}
		for _, a := range t.later {
			if t.traces[id][a.t.ID] {
				tr.Buffers = append(tr.Buffers, int64(a.t.ID))
			}
		}
		m.Traces = append(m.Traces, tr)
	}
	obs.Mem = m
}
