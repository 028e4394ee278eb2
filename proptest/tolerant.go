package proptest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/offcard/offcard/adjudicate"
	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

// The tolerant mode: the property suite against a SUT offcard cannot
// observe op by op (a user's engine behind the line protocol, the card).
// A SUT is tolerant when it implements Tolerant; the runner then checks,
// after every Decoder call:
//
//   - tokens (logits): each output token judged by adjudicate.Judge
//     against ref's logits row for the same prefix — the runner feeds the
//     SUT's own tokens back to both (teacher forcing), so a legitimate
//     near-tie flip does not cascade. A divergence (ref's logit for the
//     token more than Band nats and more than BandSteps bf16 steps below
//     ref's top) fails.
//   - logits (logits): full rows, when given, within LogitSteps bf16
//     steps or LogitNats nats of ref's, value by value; top-k entries
//     likewise. With Exact (the SUT claims bit-exactness) rows and
//     digests are compared bit for bit and tokens must equal ref's.
//   - cur-pos, page-table, kv-write: the observations the SUT offers,
//     exactly, by sequence (SeqObserver, KVObserver): cur_pos after the
//     call is the sequence's length; the page-table row starts with
//     Blocks[:pos/bs+1] (and is PagePad after it, when the SUT names a
//     pad); every KV write lands at table[pos/bs] row pos%bs, exactly once
//     per layer, K and V, for the call's positions and nothing else.
//   - strict: findings the SUT's own checker reports (FindingObserver).
//   - engine: the process crashed, hung or answered garbage (wire's
//     FaultError); sut-error: it refused a valid call.

// Tolerance is what the tolerant mode forgives. The bounds are stated
// before any engine is measured against them.
type Tolerance struct {
	// Band is the near-tie band in nats (adjudicate's); BandSteps the same
	// in bf16 steps of ref's row. A token within either is a near-tie:
	// where ref's top logit is 64 or more a bf16 step is half a nat, and
	// two logits each rounded one step the other way swap at two steps.
	Band      float64
	BandSteps int
	// TopK: a divergence whose token ranks beyond TopK is "far".
	TopK int
	// LogitSteps and LogitNats bound |logit - ref's| (either suffices);
	// so does LogitRowRMS times the RMS of ref's row: an engine's rounding
	// differences in the final hidden state move every logit by an amount
	// proportional to the row's spread, not to the logit's own size.
	LogitSteps  int
	LogitNats   float64
	LogitRowRMS float64
	// Exact: bit for bit (the SUT says it can).
	Exact bool
}

// DefaultTolerance: adjudicate's band (0.5 nats) or 2 bf16 steps, and top
// 20; logits within
// 8 bf16 steps of ref's value, 1/32 nat, or 1/8 of the RMS of ref's row.
// Synth's peaked logits spread with an RMS of about 15 (tiny) and 22 (the
// 0.6B shape), so that is about 1.9 and 2.7 nats: the same bound relative
// to the row as 1/32 nat was for the flat tiny model before (RMS 0.23).
// An engine's rounding differences move every logit by a part of the
// row's spread (the C loopback, float32 between ops: 0.5 nats at a second
// position of tiny); a wrong position, block or stale value moves the top
// logits by several times the row's RMS.
var DefaultTolerance = Tolerance{Band: adjudicate.DefaultBand, BandSteps: 2, TopK: adjudicate.DefaultTopK, LogitSteps: 8, LogitNats: 1.0 / 32, LogitRowRMS: 1.0 / 8}

// Tolerant is a SUT checked in the tolerant mode.
type Tolerant interface {
	Tolerance() Tolerance
}

// SeqState is what a SUT reports about one sequence after a call: its
// device cur_pos (-1: not reported) and page-table row (nil: not reported).
// Seq -1 is a page-table row no sequence of the call uses (all pad, when
// the SUT names one).
type SeqState struct {
	Seq    int
	CurPos int
	Row    []int32
}

// SeqObserver is a tolerant SUT that reports device state by sequence.
type SeqObserver interface {
	// TakeSeqStates returns the states after the last call.
	TakeSeqStates() ([]SeqState, error)
	// SeqCaps says what the states hold: cur_pos, page-table rows, and the
	// pad value of the columns past a sequence's blocks (nil: not checked).
	SeqCaps() (curPos, pageRow bool, pad *int32)
}

// PartialLogits is an output's top-k (largest first) and full-row digest.
type PartialLogits struct {
	IDs    []int32
	Logits []float32
	Digest string
}

// PartialLogitsObserver is a SUT that sends top-k logits instead of rows.
type PartialLogitsObserver interface {
	PartialLogits() []PartialLogits
}

// PropEngine: the engine process crashed, hung or wrote garbage.
const PropEngine = "engine"

// engineProp maps a protocol fault to PropEngine ("" otherwise).
func engineProp(err error) string {
	var f *wire.FaultError
	if errors.As(err, &f) {
		return PropEngine
	}
	return ""
}

// hung reports a failure of an engine that did not answer in time: its
// case is not shrunk (every shrink run would wait out the timeout).
func hung(f *Failure) bool {
	return f.Property == PropEngine && strings.HasPrefix(f.Detail, "engine "+wire.Hung)
}

// tolerant reports whether the runner's SUT is tolerant.
func (r *runner) tolerant() (Tolerance, bool) {
	t, ok := r.sut.(Tolerant)
	if !ok {
		return Tolerance{}, false
	}
	return t.Tolerance(), true
}

// fed is the token fed to sequence q after output i of a call: ref's in
// the exact mode, the SUT's own in the tolerant mode (teacher forcing).
func (r *runner) fed(got, want []qwen3.Output, i int) int32 {
	if _, ok := r.tolerant(); ok && i < len(got) && len(got) == len(want) {
		return got[i].Token
	}
	return want[i].Token
}

// checkTolerant checks one Decoder call of a tolerant SUT.
func (r *runner) checkTolerant(k call, tol Tolerance) *Failure {
	var ps []problem
	if k.err != nil {
		ps = append(ps, problem{prop: errProp(k.err), seq: -1, pos: -1, detail: k.err.Error()})
	}
	finding := r.findings(&ps)
	// By sequence: the SUT names sequences, not slots.
	act := slices.Clone(k.act)
	seqSet := map[int]int{}
	for i := range act {
		act[i].slot = act[i].seq
		seqSet[act[i].seq] = act[i].seq
	}
	kk := k
	kk.act = act
	e, isEngine := r.sut.(*EngineSUT)
	var unjudged map[int]bool
	if isEngine {
		unjudged = r.wire().unjudged(k)
		defer r.wire().step(k)
	}
	if isEngine && k.err == nil && r.offers(wire.ObsKVWrites) {
		r.checkWireKV(&ps, kk, e, seqSet)
	} else if kv, ok := r.sut.(KVObserver); ok && k.err == nil && r.offers(wire.ObsKVWrites) {
		ws, err := kv.TakeKVWrites()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "KV writes: " + err.Error()})
		} else {
			r.checkSharedLog(&ps, ws, seqSet)
			r.checkWrites(&ps, kk, r.dropPromptPadding(ws, kk), seqSet)
		}
	}
	if so, ok := r.sut.(SeqObserver); ok && k.err == nil {
		r.checkSeqStates(&ps, k, so)
	}
	// Regime cadence, steady-state host writes and device memory from the
	// device's events, where the SUT offers them (the card path).
	if r.tap != nil {
		r.checkTap(&ps, k)
	} else {
		r.reachWidth(k)
	}
	if isEngine {
		r.checkWireDevice(&ps, k, e)
	}
	if k.err == nil {
		r.checkTolerantOutputs(&ps, k, tol, unjudged)
		if tol.Exact {
			r.checkColdRun(&ps, k)
			r.checkRecompute(&ps, k)
		}
	}
	return r.failure(k, ps, finding, StepInfo{})
}

// offers asks an EngineSUT whether its engine offers an observation
// (other tolerant SUTs: whatever interfaces they implement).
func (r *runner) offers(o string) bool {
	if e, ok := r.sut.(*EngineSUT); ok {
		return e.C.Caps().Offers(o)
	}
	return true
}

func (r *runner) checkSeqStates(ps *[]problem, k call, so SeqObserver) {
	wantCur, wantRow, pad := so.SeqCaps()
	// A PrefillFrom's chunk reads page-table slices of its own and need not
	// touch the decode table (as in-process: the next step's rows are
	// checked).
	wantRow = wantRow && !k.from
	if !wantCur && !wantRow {
		return
	}
	sts, err := so.TakeSeqStates()
	if err != nil {
		*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "observations: " + err.Error()})
		return
	}
	bySeq := map[int]SeqState{}
	bs := r.sc.BlockSize
	off := len(k.act[0].pos) - 1
	// An engine that follows the hints keeps the width policy's width.
	width := -1
	if c, ok := r.engineCaps(); ok && c.FollowsHints && wantRow {
		longest := 0
		for _, a := range k.act {
			longest = max(longest, a.pos[len(a.pos)-1]/bs+1)
		}
		width = r.sc.contractWidth(longest)
	}
	for _, s := range sts {
		if width >= 0 && len(s.Row) != width {
			what := fmt.Sprintf("seq %d's row", s.Seq)
			if s.Seq < 0 {
				what = "a row no sequence of the step uses"
			}
			*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1, located: true, offset: off,
				detail: fmt.Sprintf("the device page table's %s is %s: %d columns, the width policy %s wants %d (the engine follows the hints)", what, fmtRow(s.Row), len(s.Row), r.sc.Width, width)})
			return
		}
		if s.Seq >= 0 {
			bySeq[s.Seq] = s
			continue
		}
		if pad == nil || !wantRow {
			continue
		}
		for j, x := range s.Row {
			if x != *pad {
				*ps = append(*ps, problem{prop: PropPageTable, seq: -1, pos: -1, located: true, offset: off,
					detail: fmt.Sprintf("a device page-table row no sequence of the step uses is %s: column %d holds %d, the engine's pad is %d (a stale block id)", fmtRow(s.Row), j, x, *pad)})
				break
			}
		}
	}
	for _, a := range k.act {
		last := a.pos[len(a.pos)-1]
		st, ok := bySeq[a.seq]
		if !ok {
			*ps = append(*ps, problem{prop: PropSUTError, seq: a.seq, pos: last, located: true, offset: off,
				detail: fmt.Sprintf("seq %d: the engine reported no state for a sequence of the call", a.seq)})
			continue
		}
		if wantCur && st.CurPos != last+1 {
			*ps = append(*ps, problem{prop: PropCurPos, seq: a.seq, pos: last, located: true, offset: off,
				detail: fmt.Sprintf("seq %d: after the step the device cur_pos is %d, the host's seq_len is %d", a.seq, st.CurPos, last+1)})
		}
		if !wantRow {
			continue
		}
		n := last/bs + 1
		want := a.blocks[:n]
		switch {
		case len(st.Row) < n || !slices.Equal(st.Row[:n], want):
			*ps = append(*ps, problem{prop: PropPageTable, seq: a.seq, pos: last, located: true, offset: off,
				detail: fmt.Sprintf("seq %d pos %d: the device page-table row is %s, the host's blocks are %v (block size %d)", a.seq, last, fmtRow(st.Row), want, bs)})
		case pad != nil:
			for j := n; j < len(st.Row); j++ {
				if st.Row[j] != *pad {
					*ps = append(*ps, problem{prop: PropPageTable, seq: a.seq, pos: last, located: true, offset: off,
						detail: fmt.Sprintf("seq %d pos %d: the device page-table row is %s: column %d holds %d past the sequence's %d blocks, the engine's pad is %d", a.seq, last, fmtRow(st.Row), j, st.Row[j], n, *pad)})
					break
				}
			}
		}
	}
}

// checkTolerantOutputs judges each output against ref's.
// Outputs of the sequences in unjudged (they read rows they never wrote)
// are not judged.
func (r *runner) checkTolerantOutputs(ps *[]problem, k call, tol Tolerance, unjudged map[int]bool) {
	got, want := k.got, k.want
	if !k.decode && len(got) == 1 && len(want) > 1 {
		want = want[len(want)-1:] // the engine sent the last position only
	}
	if len(got) != len(want) {
		*ps = append(*ps, problem{prop: PropLogits, seq: -1, pos: -1, detail: fmt.Sprintf("%d outputs, ref has %d", len(got), len(want))})
		return
	}
	var partial []PartialLogits
	if po, ok := r.sut.(PartialLogitsObserver); ok {
		partial = po.PartialLogits()
	}
	bs := r.sc.BlockSize
	for i := range want {
		g, w := got[i], want[i]
		if unjudged[int(w.Seq)] && g.Seq == w.Seq && g.Pos == w.Pos {
			continue
		}
		d := ""
		switch {
		case g.Seq != w.Seq || g.Pos != w.Pos:
			d = fmt.Sprintf("output for seq %d pos %d, ref's is seq %d pos %d", g.Seq, g.Pos, w.Seq, w.Pos)
		case tol.Exact && g.Token != w.Token:
			d = fmt.Sprintf("token %d, ref %d (the engine claims bit-exactness)", g.Token, w.Token)
		default:
			d = judgeToken(w.Logits, g.Token, tol)
		}
		if d == "" && g.Logits != nil {
			if tol.Exact {
				d = diffOutput(g, w)
			} else {
				d = logitsOff(g.Logits, w.Logits, nil, tol)
			}
		}
		if d == "" && i < len(partial) {
			p := partial[i]
			d = logitsOff(p.Logits, w.Logits, p.IDs, tol)
			if d == "" && tol.Exact && p.Digest != "" && p.Digest != dump.Digest(w.Logits) {
				d = fmt.Sprintf("logits digest %s, ref's %s (the engine claims bit-exactness)", p.Digest, dump.Digest(w.Logits))
			}
		}
		if d == "" {
			continue
		}
		off := 0
		if !k.decode {
			off = len(k.act[0].pos) - len(want) + i
		}
		*ps = append(*ps, problem{prop: PropLogits, seq: int(w.Seq), pos: w.Pos, located: true, offset: off,
			detail: fmt.Sprintf("seq %d pos %d (block %d, row %d): %s", w.Seq, w.Pos, w.Pos/bs, w.Pos%bs, d)})
		return
	}
}

// judgeToken judges tok against ref's row: "" when it is ref's top or a
// near-tie (within tol.Band nats or tol.BandSteps bf16 steps of ref's top
// logit), else what is wrong with it.
func judgeToken(ref []float32, tok int32, tol Tolerance) string {
	j, err := adjudicate.Judge(ref, tok, tol.Band, tol.TopK)
	switch {
	case err != nil:
		return err.Error()
	case !j.Verdict.Bad() || j.GapSteps <= tol.BandSteps:
		return ""
	}
	return fmt.Sprintf("token %d is a %s under ref: %.4g nats (%d bf16 steps) below ref's top token %d, rank %d (band %.3g nats or %d bf16 steps)",
		tok, j.Verdict, j.GapNats, j.GapSteps, j.TeacherTop, j.Rank, tol.Band, tol.BandSteps)
}

// logitsOff checks got against ref's row: got[i] is the logit of ids[i]
// (of id i when ids is nil). It describes the first value off by more
// than the tolerance, or returns "".
func logitsOff(got, ref []float32, ids []int32, tol Tolerance) string {
	if ids == nil && len(got) != len(ref) {
		return fmt.Sprintf("%d logits, ref has %d", len(got), len(ref))
	}
	absTol := tol.LogitNats
	if tol.LogitRowRMS > 0 && !tol.Exact {
		var ss float64
		for _, x := range ref {
			ss += float64(x) * float64(x)
		}
		absTol = max(absTol, tol.LogitRowRMS*math.Sqrt(ss/float64(max(len(ref), 1))))
	}
	for i, g := range got {
		id := i
		if ids != nil {
			id = int(ids[i])
		}
		w := ref[id]
		if tol.Exact {
			if math.Float32bits(g) != math.Float32bits(w) {
				return fmt.Sprintf("logit[%d] %v, ref %v (the engine claims bit-exactness)", id, g, w)
			}
			continue
		}
		if g == w {
			continue
		}
		nats := math.Abs(float64(g) - float64(w))
		steps := bf16.Steps(bf16.FromFloat32(g), bf16.FromFloat32(w))
		if math.IsNaN(nats) || (nats > absTol && steps > tol.LogitSteps) {
			return fmt.Sprintf("logit[%d] %v, ref %v: off by %.3g nats, %d bf16 steps (tolerance %d steps or %.3g nats)", id, g, w, nats, steps, tol.LogitSteps, absTol)
		}
	}
	return ""
}
