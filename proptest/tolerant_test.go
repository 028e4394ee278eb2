package proptest

import (
	"strings"
	"testing"
)

// TestJudgeTokenBand: the tolerant judge's near-tie band is Band nats or
// BandSteps bf16 steps under ref's top, whichever reaches further; past
// both a token fails. Each case names the row's top and the token's logit.
func TestJudgeTokenBand(t *testing.T) {
	for _, c := range []struct {
		name     string
		top, tok float32
		want     string // "" passes; else a part of the failure
	}{
		{"top", 10, 10, ""},
		{"half-nat-at-10", 10, 9.5, ""}, // 8 steps of 1/16: the nats reach further
		{"past-half-nat-at-10", 10, 9.4375, "divergence under ref: 0.5625 nats (9 bf16 steps)"},
		{"two-steps-at-100", 100, 99, ""}, // 1 nat: the steps reach further
		{"three-steps-at-100", 100, 98.5, "divergence under ref: 1.5 nats (3 bf16 steps)"},
		{"two-steps-across-64", 64.5, 63.75, ""}, // one step of 1/2, one of 1/4
		{"three-steps-across-64", 64.5, 63.5, "(3 bf16 steps)"},
		{"far", 10, 1, "far under ref"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// ref's row: the top at 0, the token at 1, and more tokens
			// between them than TopK when the token is far.
			row := []float32{c.top, c.tok}
			if c.want == "far under ref" {
				for range DefaultTolerance.TopK {
					row = append(row, (c.top+c.tok)/2)
				}
			}
			got := judgeToken(row, 1, DefaultTolerance)
			switch {
			case c.want == "" && got != "":
				t.Errorf("token at %v under a top of %v fails: %s", c.tok, c.top, got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("token at %v under a top of %v: %q, want %q", c.tok, c.top, got, c.want)
			}
		})
	}
	if got := judgeToken([]float32{1, 2}, 2, DefaultTolerance); !strings.Contains(got, "outside the vocabulary") {
		t.Errorf("a token outside the row: %q", got)
	}
}
