package adjudicate

import (
	"slices"
	"testing"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// An "engine" (a second ref) whose token at one position is replaced by
// ref's runner-up, driven with its own tokens for two sequences in one
// batch: Stream finds the near-tie there and agreement everywhere else.
func TestStream(t *testing.T) {
	w := tinyWeights(t)
	newRef := func() *ref.Decoder {
		d, err := ref.New(w, ref.Options{NumBlocks: 8, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	}
	engine, st := newRef(), NewStream(newRef(), Options{Band: 10})
	const flipSeq, flipPos = 1, 9
	flip := func(o *qwen3.Output) {
		if o.Seq == flipSeq && o.Pos == flipPos {
			o.Token = ranked(o.Logits)[1]
		}
	}
	blocks := map[qwen3.SeqID][]int32{0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}}
	next := map[qwen3.SeqID]int32{}
	for _, seq := range []qwen3.SeqID{0, 1} {
		p := qwen3.Prefill{Seq: seq, Tokens: []int32{1, 2, int32(3 + seq)}, Blocks: blocks[seq]}
		outs, err := engine.Prefill(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Prefill(p, outs); err != nil {
			t.Fatal(err)
		}
		next[seq] = outs[len(outs)-1].Token
	}
	for pos := 3; pos < 20; pos++ {
		batch := []qwen3.Step{{Seq: 0, Token: next[0], Pos: pos, Blocks: blocks[0]}, {Seq: 1, Token: next[1], Pos: pos, Blocks: blocks[1]}}
		outs, err := engine.Decode(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range outs {
			flip(&outs[i])
			next[outs[i].Seq] = outs[i].Token
		}
		if _, err := st.Decode(batch, outs); err != nil {
			t.Fatal(err)
		}
	}
	rs := st.Reports()
	if len(rs) != 2 || len(rs[0].Positions) != 18 || len(rs[1].Positions) != 18 {
		t.Fatalf("reports %+v", rs)
	}
	if rs[0].FirstDifference() != nil {
		t.Fatalf("seq 0: %+v", rs[0].FirstDifference())
	}
	var verdicts []Verdict
	for _, p := range rs[1].Positions {
		if p.Verdict != Agree {
			verdicts = append(verdicts, p.Verdict)
			if p.Pos != flipPos || p.Rank != 2 {
				t.Fatalf("seq 1: %+v", p)
			}
		}
	}
	if !slices.Equal(verdicts, []Verdict{NearTie}) {
		t.Fatalf("seq 1 verdicts %v", verdicts)
	}
	if err := st.Finish(0); err != nil {
		t.Fatal(err)
	}
}
