package adjudicate

import (
	"fmt"
	"math"
	"slices"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/dump"
)

// Compare judges our dump against an oracle's dump of the same prompts,
// without a model: per sequence, tokens agree up to the first difference,
// which is judged from the oracle's top_ids/top_logits at that position
// (rank and gap exact when our token is in the oracle's top list, lower
// bounds when it is not, unknown without a list). After the first
// difference the two streams have different prefixes, so nothing later is
// judged (teacher forcing needs a model). Every sequence of ours must be
// in the oracle with the same prompt.
func Compare(ours, oracle *dump.Dump, opt Options) ([]Report, error) {
	opt = opt.withDefaults()
	var out []Report
	for _, s := range ours.Seqs {
		o := oracle.Sequence(s.Seq)
		if o == nil {
			return nil, fmt.Errorf("seq %d is not in the oracle dump", s.Seq)
		}
		if !slices.Equal(s.Prompt, o.Prompt) {
			return nil, fmt.Errorf("seq %d: the prompts differ (ours has %d tokens, the oracle's %d)", s.Seq, len(s.Prompt), len(o.Prompt))
		}
		r := Report{Seq: s.Seq, Prompt: s.Prompt}
		n := min(len(s.Steps), len(o.Steps))
		for i := range n {
			st, ot := s.Steps[i], o.Steps[i]
			if st.Token == ot.Token {
				r.Positions = append(r.Positions, Position{Pos: st.Pos, Judgement: Judgement{Token: st.Token, TeacherTop: ot.Token, Rank: 1, Verdict: Agree}})
				continue
			}
			r.Positions = append(r.Positions, fromTop(ot, st.Token, opt))
			if i+1 < len(s.Steps) {
				r.Note = fmt.Sprintf("positions after %d not judged: the prefixes differ from there (teacher forcing needs --model or --synth)", st.Pos)
			}
			break
		}
		if r.Note == "" && len(s.Steps) > n {
			if n == 0 {
				r.Note = "not judged: the oracle dump has no steps for this sequence"
			} else {
				r.Note = fmt.Sprintf("positions after %d not judged: the oracle dump ends there", o.Steps[n-1].Pos)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// fromTop judges our token at an oracle step from the top list it carries.
func fromTop(ot dump.Step, ours int32, opt Options) Position {
	if len(ot.TopIDs) == 0 {
		return unknown(ot.Pos, ours, ot.Token)
	}
	top := ot.TopLogits[0]
	for i, id := range ot.TopIDs {
		if id != ours {
			continue
		}
		// Our token is in the list: Judge on the list is exact for the
		// gap, and the rank counts only strictly larger logits, all of
		// which the list (sorted, larger first) holds.
		j, _ := Judge(ot.TopLogits, int32(i), opt.Band, opt.TopK)
		j.Token, j.TeacherTop = ours, ot.TopIDs[0]
		return Position{Pos: ot.Pos, Judgement: j}
	}
	// Not in the list: below its last entry.
	last := ot.TopLogits[len(ot.TopLogits)-1]
	gap := float64(top) - float64(last)
	steps := bf16.Steps(bf16.FromFloat32(top), bf16.FromFloat32(last))
	j := Judgement{Token: ours, TeacherTop: ot.TopIDs[0], Rank: len(ot.TopIDs) + 1, GapNats: gap, GapSteps: max(steps, -steps)}
	switch {
	case j.Rank > opt.TopK:
		j.Verdict = Far
	default:
		j.Verdict = Divergence
	}
	if math.IsNaN(gap) {
		return unknown(ot.Pos, ours, ot.TopIDs[0])
	}
	return Position{Pos: ot.Pos, Judgement: j, Bound: true}
}
