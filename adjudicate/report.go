package adjudicate

import (
	"math"
	"sort"
)

// Options are the verdict's thresholds; zero values take the defaults.
type Options struct {
	// Band is the near-tie band in nats (0: DefaultBand).
	Band float64
	// TopK is the rank beyond which a divergence is far (0: DefaultTopK).
	TopK int
}

func (o Options) withDefaults() Options {
	if o.Band == 0 {
		o.Band = DefaultBand
	}
	if o.TopK == 0 {
		o.TopK = DefaultTopK
	}
	return o
}

// Position is the judgement of the token that the logits of position Pos
// chose (a dump step record's pos).
type Position struct {
	Pos int
	Judgement
	// Bound: GapNats, GapSteps and Rank are lower bounds (an oracle dump's
	// top list did not reach our token). A NaN GapNats means unknown (the
	// dump carries no top logits); such a position is judged a divergence.
	Bound bool
}

// Report is the judgement of one sequence.
type Report struct {
	Seq    int
	Prompt []int32
	// Positions holds one judgement per judged generated token, in order.
	Positions []Position
	// Note says what was not judged and why ("" when every step was).
	Note string
}

// Count returns how many positions have verdict v.
func (r *Report) Count(v Verdict) int {
	n := 0
	for _, p := range r.Positions {
		if p.Verdict == v {
			n++
		}
	}
	return n
}

// FirstDifference returns the first position whose token is not the
// teacher's choice (verdict other than agree), or nil.
func (r *Report) FirstDifference() *Position {
	for i := range r.Positions {
		if r.Positions[i].Verdict != Agree {
			return &r.Positions[i]
		}
	}
	return nil
}

// FirstBad returns the first divergent position (divergence or far), or nil.
func (r *Report) FirstBad() *Position {
	for i := range r.Positions {
		if r.Positions[i].Verdict.Bad() {
			return &r.Positions[i]
		}
	}
	return nil
}

// Bad reports whether any position diverges.
func (r *Report) Bad() bool { return r.FirstBad() != nil }

// AnyBad reports whether any report has a divergence.
func AnyBad(rs []Report) bool {
	for i := range rs {
		if rs[i].Bad() {
			return true
		}
	}
	return false
}

// Tally collects teacher-forced judgements position by position, for a
// caller that runs the teacher itself and feeds it our tokens (the
// property suite's tolerant mode runs ref beside the engine on the same
// schedule). Not safe for concurrent use.
type Tally struct {
	opt  Options
	reps map[int]*Report
}

// NewTally returns an empty Tally with opt's thresholds.
func NewTally(opt Options) *Tally {
	return &Tally{opt: opt.withDefaults(), reps: map[int]*Report{}}
}

// Judge judges our token chosen at (seq, pos) against the teacher's
// logits row for the same prefix, records it and returns it.
func (t *Tally) Judge(seq, pos int, teacher []float32, ours int32) (Position, error) {
	j, err := Judge(teacher, ours, t.opt.Band, t.opt.TopK)
	if err != nil {
		return Position{}, err
	}
	r := t.reps[seq]
	if r == nil {
		r = &Report{Seq: seq}
		t.reps[seq] = r
	}
	p := Position{Pos: pos, Judgement: j}
	r.Positions = append(r.Positions, p)
	return p, nil
}

// Reports returns the reports so far, by sequence id.
func (t *Tally) Reports() []Report {
	out := make([]Report, 0, len(t.reps))
	for _, r := range t.reps {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// unknown is a Position whose gap is not known.
func unknown(pos int, ours, top int32) Position {
	return Position{Pos: pos, Judgement: Judgement{Token: ours, TeacherTop: top, GapNats: math.NaN(), GapSteps: -1, Verdict: Divergence}}
}
