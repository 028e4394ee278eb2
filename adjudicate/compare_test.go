package adjudicate

import (
	"math"
	"strings"
	"testing"

	"github.com/offcard/offcard/dump"
)

// oracleSeq is a dump sequence whose steps carry the top 4 of rows.
func oracleSeq(seq int, prompt []int32, rows [][]float32) *dump.Sequence {
	s := &dump.Sequence{Seq: seq, Prompt: prompt}
	for i, row := range rows {
		ids, vals := dump.Top(row, 4)
		s.Steps = append(s.Steps, dump.Step{Step: i, Seq: seq, Pos: len(prompt) - 1 + i, Token: ids[0], TopIDs: ids, TopLogits: vals, GapSteps: -1})
	}
	return s
}

func oneSeq(s *dump.Sequence) *dump.Dump { return &dump.Dump{Seqs: []*dump.Sequence{s}} }

func TestCompare(t *testing.T) {
	rows := [][]float32{
		{0, 5, 4.75, 1, 0.5, 0},
		{3, 1, 0, 0, 0, 2},
		{0, 0, 1, 0, 0, 0},
	}
	oracle := oracleSeq(0, []int32{1, 2}, rows)
	with := func(tokens ...int32) *dump.Dump {
		s := &dump.Sequence{Seq: 0, Prompt: []int32{1, 2}}
		for i, tok := range tokens {
			s.Steps = append(s.Steps, dump.Step{Seq: 0, Pos: 1 + i, Token: tok})
		}
		return oneSeq(s)
	}
	cases := []struct {
		name    string
		ours    *dump.Dump
		n       int // positions judged
		verdict Verdict
		rank    int
		gap     float64
		bound   bool
		note    string
	}{
		{"same", with(1, 0, 2), 3, Agree, 1, 0, false, ""},
		{"runner-up", with(2, 0, 2), 1, NearTie, 2, 0.25, false, "after 1 not judged"},
		{"in list, beyond band", with(1, 5, 2), 2, Divergence, 2, 1, false, "after 2 not judged"},
		{"below the list", with(5, 0, 2), 1, Divergence, 5, 4.5, true, "after 1"},
		{"last step differs", with(1, 0, 5), 3, Divergence, 5, 1, true, ""},
		{"ours longer", with(1, 0, 2, 4), 3, Agree, 1, 0, false, "oracle dump ends"},
	}
	for _, c := range cases {
		rs, err := Compare(c.ours, oneSeq(oracle), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := rs[0]
		last := r.Positions[len(r.Positions)-1]
		if len(r.Positions) != c.n || last.Verdict != c.verdict || last.Rank != c.rank || last.GapNats != c.gap || last.Bound != c.bound || !strings.Contains(r.Note, c.note) {
			t.Errorf("%s: %d positions, last %+v, note %q", c.name, len(r.Positions), last, r.Note)
		}
	}
	// An oracle sequence without steps (generate --steps 0): nothing
	// judged, and said so (it was an index out of range).
	rs, err := Compare(with(1, 0), oneSeq(oracleSeq(0, []int32{1, 2}, nil)), Options{})
	if err != nil || len(rs[0].Positions) != 0 || !strings.Contains(rs[0].Note, "has no steps") {
		t.Errorf("oracle without steps: %v, %+v", err, rs)
	}
	// No top list in the oracle: unknown gap, judged a divergence.
	bare := oracleSeq(0, []int32{1, 2}, rows)
	for i := range bare.Steps {
		bare.Steps[i].TopIDs, bare.Steps[i].TopLogits = nil, nil
	}
	rs, _ = Compare(with(2), oneSeq(bare), Options{})
	if p := rs[0].Positions[0]; !math.IsNaN(p.GapNats) || p.Verdict != Divergence {
		t.Errorf("no top list: %+v", p)
	}
	// Far: below a list as long as the top K.
	rs, _ = Compare(with(5), oneSeq(oracle), Options{TopK: 3})
	if p := rs[0].Positions[0]; p.Verdict != Far {
		t.Errorf("below a list of 4 with top K 3: %+v", p)
	}
	if _, err := Compare(with(1), oneSeq(oracleSeq(0, []int32{1, 3}, rows)), Options{}); err == nil || !strings.Contains(err.Error(), "prompts differ") {
		t.Errorf("different prompts: %v", err)
	}
	if _, err := Compare(with(1), oneSeq(oracleSeq(1, []int32{1, 2}, rows)), Options{}); err == nil || !strings.Contains(err.Error(), "not in the oracle") {
		t.Errorf("missing sequence: %v", err)
	}
}

func TestTally(t *testing.T) {
	tl := NewTally(Options{})
	row := []float32{1, 0.75, -10}
	for _, c := range []struct {
		seq, pos int
		tok      int32
	}{{1, 4, 0}, {0, 2, 1}, {1, 5, 2}} {
		if _, err := tl.Judge(c.seq, c.pos, row, c.tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tl.Judge(0, 3, row, 3); err == nil {
		t.Error("token outside the row: no error")
	}
	rs := tl.Reports()
	if len(rs) != 2 || rs[0].Seq != 0 || rs[0].Bad() || rs[0].Count(NearTie) != 1 || !rs[1].Bad() || rs[1].FirstBad().Pos != 5 || !AnyBad(rs) {
		t.Fatalf("reports %+v", rs)
	}
}
