package main

import (
	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
)

// dumpTopK is the number of top logits a step record carries.
const dumpTopK = 8

// dumpStep is the step record of one output: the token, the top logits,
// the top-1/top-2 gap in bf16 steps and the digest of the whole row.
func dumpStep(step int, o qwen3.Output) dump.Step {
	ids, vals := dump.Top(o.Logits, dumpTopK)
	s := dump.Step{Step: step, Seq: int(o.Seq), Pos: o.Pos, Token: o.Token, TopIDs: ids, TopLogits: vals, GapSteps: -1, Digest: dump.Digest(o.Logits)}
	if len(vals) > 1 {
		s.GapSteps = bf16.Steps(bf16.FromFloat32(vals[0]), bf16.FromFloat32(vals[1]))
	}
	return s
}
