package proptest

import "fmt"

// Property prefix-hit, exact mode (and a tolerant SUT that claims
// bit-exactness): a prefix-cache hit's outputs (share: PrefillFrom from the
// shared length, over blocks another sequence wrote) equal, bit for bit,
// those of a cold run of the same tokens, which ref computes from
// position 0 on a cache of its own (act_share.go's coldRun), not through
// the runner's oracle: so the property holds the SUT to the cold run even
// where the oracle's warm path (its memo over the shared blocks) were
// wrong.

// PropPrefixHit: a prefix hit's output differs from the cold run's.
const PropPrefixHit = "prefix-hit"

func (r *runner) checkColdRun(ps *[]problem, k call) {
	if k.cold == nil || len(k.got) != len(k.cold) {
		return // a count mismatch is the logits property's
	}
	for i, w := range k.cold {
		g := k.got[i]
		if d := diffOutput(g, w); d != "" {
			a := k.act[0]
			*ps = append(*ps, problem{prop: PropPrefixHit, seq: a.seq, pos: w.Pos, located: true, offset: i,
				detail: fmt.Sprintf("seq %d pos %d, after a prefix hit on %d cached positions, differs from the cold run of the same tokens (ref from position 0 on a cache of its own): %s", a.seq, w.Pos, k.c.Len, d)})
			return
		}
	}
}
