package adjudicate

import (
	"fmt"
	"math"

	"github.com/offcard/offcard/bf16"
)

// DefaultBand is the near-tie band in nats (the gap within which a flip is
// legitimate).
const DefaultBand = 0.5

// DefaultTopK is the rank beyond which a divergence is "far".
const DefaultTopK = 20

// Verdict is the judgement of one generated position.
type Verdict int

const (
	// Agree: our token is the teacher's greedy choice.
	Agree Verdict = iota
	// NearTie: our token is not the teacher's choice, but its logit is
	// within the band of the top.
	NearTie
	// Divergence: our token's logit is beyond the band below the top.
	Divergence
	// Far: a divergence with our token outside the teacher's top K.
	Far
)

func (v Verdict) String() string {
	switch v {
	case Agree:
		return "agree"
	case NearTie:
		return "near-tie"
	case Divergence:
		return "divergence"
	case Far:
		return "far"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Bad reports whether the verdict is a bug (divergence or far).
func (v Verdict) Bad() bool { return v == Divergence || v == Far }

// Judgement is the verdict on one generated token.
type Judgement struct {
	Token      int32   // our token
	TeacherTop int32   // the teacher's greedy token (lowest id among equal maxima)
	Rank       int     // 1 + number of tokens the teacher scores strictly above ours
	GapNats    float64 // teacher's top logit minus its logit for our token (>= 0)
	GapSteps   int     // the same gap in bf16 steps (representable values between them)
	Verdict    Verdict
}

// Judge rates our token against the teacher's logits row (float32 of bf16
// values, one per vocabulary entry) with a near-tie band in nats and the
// "far" rank topK. A NaN logit in the row ranks below every number. It
// returns an error when our token is outside the row.
func Judge(teacher []float32, ours int32, band float64, topK int) (Judgement, error) {
	if ours < 0 || int(ours) >= len(teacher) {
		return Judgement{}, fmt.Errorf("adjudicate: token %d outside the vocabulary of %d", ours, len(teacher))
	}
	top := int32(0)
	for i, x := range teacher {
		if less(teacher[top], x) {
			top = int32(i)
		}
	}
	mine := teacher[ours]
	rank := 1
	for _, x := range teacher {
		if less(mine, x) {
			rank++
		}
	}
	j := Judgement{Token: ours, TeacherTop: top, Rank: rank}
	switch {
	case mine == teacher[top]:
		// A tie with the top, infinite ones included (Inf-Inf is no gap).
	case !math.IsNaN(float64(mine)):
		j.GapNats = float64(teacher[top]) - float64(mine)
		j.GapSteps = bf16.Steps(bf16.FromFloat32(teacher[top]), bf16.FromFloat32(mine))
		if j.GapSteps < 0 {
			j.GapSteps = -j.GapSteps
		}
	default:
		j.GapNats = math.Inf(1)
		j.GapSteps = math.MaxInt32
	}
	switch {
	case ours == top || j.GapNats == 0:
		j.Verdict = Agree
	case j.GapNats <= band:
		j.Verdict = NearTie
	case rank > topK:
		j.Verdict = Far
	default:
		j.Verdict = Divergence
	}
	return j, nil
}

// less orders logits with NaN below every number.
func less(a, b float32) bool {
	if math.IsNaN(float64(b)) {
		return false
	}
	if math.IsNaN(float64(a)) {
		return true
	}
	return a < b
}
