package proptest

import "fmt"

// Property recompute, exact mode (and a tolerant SUT that claims
// bit-exactness): a preempted sequence's recompute (readmit: a prefill of
// its prompt and generated tokens through other blocks) returns at every
// position exactly the output the SUT returned when it first computed that
// position (compared by a 64-bit hash of position, token and logits'
// bits). The expectation is the SUT's own first run, so in the exact mode
// this adds what ref's equality already implies only a name; for an
// engine it is determinism across batches, block layouts and prefill paths.

// PropRecompute: a recomputed output differs from the SUT's first run.
const PropRecompute = "recompute"

func (r *runner) checkRecompute(ps *[]problem, k call) {
	if k.first == nil || len(k.got) != len(k.first) {
		return
	}
	for i, h := range k.first {
		g := k.got[i]
		if h == 0 || hashOutput(g) == h {
			continue
		}
		a := k.act[0]
		*ps = append(*ps, problem{prop: PropRecompute, seq: a.seq, pos: g.Pos, located: true, offset: i,
			detail: fmt.Sprintf("seq %d pos %d: the re-admitted sequence's recompute (token %d) is not bit-identical to the SUT's first run at that position (hash %#016x, first run %#016x)", a.seq, g.Pos, g.Token, hashOutput(g), h)})
		return
	}
}
