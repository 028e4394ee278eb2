package adjudicate

import (
	"math"
	"testing"
)

func TestJudge(t *testing.T) {
	nan := float32(math.NaN())
	row := []float32{1, 3, 2.75, -5, 3, nan}
	cases := []struct {
		name    string
		ours    int32
		band    float64
		topK    int
		verdict Verdict
		rank    int
		gap     float64
	}{
		{"teacher's choice", 1, 0.5, 20, Agree, 1, 0},
		{"equal maximum, other id", 4, 0.5, 20, Agree, 1, 0},
		{"runner-up inside band", 2, 0.5, 20, NearTie, 3, 0.25},
		{"runner-up outside band", 2, 0.1, 20, Divergence, 3, 0.25},
		{"low, inside top K", 3, 0.5, 20, Divergence, 5, 8},
		{"low, outside top K", 3, 0.5, 4, Far, 5, 8},
		{"NaN logit", 5, 0.5, 20, Divergence, 6, math.Inf(1)},
		{"NaN logit, outside top K", 5, 0.5, 5, Far, 6, math.Inf(1)},
	}
	for _, c := range cases {
		j, err := Judge(row, c.ours, c.band, c.topK)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if j.Verdict != c.verdict || j.Rank != c.rank || j.GapNats != c.gap || j.TeacherTop != 1 {
			t.Errorf("%s: got %+v, want verdict %v rank %d gap %v top 1", c.name, j, c.verdict, c.rank, c.gap)
		}
	}
	if _, err := Judge(row, 6, 0.5, 20); err == nil {
		t.Error("token past the vocabulary: no error")
	}
	if _, err := Judge(row, -1, 0.5, 20); err == nil {
		t.Error("negative token: no error")
	}
}

func TestJudgeGapSteps(t *testing.T) {
	// 1 and 1+2^-7 are adjacent bf16 values; 1 and 2 are 128 steps apart.
	j, _ := Judge([]float32{1 + 1.0/128, 1}, 1, 0.5, 20)
	if j.GapSteps != 1 {
		t.Errorf("adjacent values: %d steps, want 1", j.GapSteps)
	}
	j, _ = Judge([]float32{2, 1}, 1, 0.5, 20)
	if j.GapSteps != 128 {
		t.Errorf("1 vs 2: %d steps, want 128", j.GapSteps)
	}
}

// Equal infinite maxima: our token ties the teacher's top, so it agrees
// (Inf - Inf is NaN, not a gap).
func TestJudgeInfiniteTie(t *testing.T) {
	inf := float32(math.Inf(1))
	j, err := Judge([]float32{inf, 0, inf}, 2, 0.5, 20)
	if err != nil || j.Verdict != Agree || j.GapNats != 0 || j.GapSteps != 0 || j.Rank != 1 {
		t.Fatalf("%+v %v", j, err)
	}
	j, _ = Judge([]float32{inf, 0, inf}, 1, 0.5, 1)
	if j.Verdict != Far || !math.IsInf(j.GapNats, 1) {
		t.Fatalf("finite under an infinite top: %+v", j)
	}
}
