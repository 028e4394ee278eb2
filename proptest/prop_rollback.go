package proptest

import "fmt"

// Property rollback, in every mode: after a verify rolled a sequence back
// to its accepted length A (rejected rows A..E-1 of the verify's end E
// still hold the drafts' KV), the device takes the sequence's position
// from each call, never from the drafts: until every rejected row is
// rewritten, every position the SUT reports or the device shows for the
// sequence (an output's position, a KV write's, cur_pos at an op and
// after the call, where observed) is the host's (A, A+1, ...), and each
// output equals ref's (which read only rewritten rows: a stale read of a
// rejected row shows there). Any cur-pos, kv-write or logits problem of
// such a sequence in its window is also this property's, named with the
// rollback that caused it.

// PropRollback: a rolled-back sequence's position or outputs show the
// rejected drafts.
const PropRollback = "rollback"

// rollbackProblems adds a rollback problem beside each cur-pos, kv-write
// or logits problem of a sequence inside its rollback window.
func (r *runner) rollbackProblems(ps []problem) []problem {
	n := len(ps)
	for _, p := range ps[:n] {
		if p.seq < 0 || p.seq >= MaxSeqs {
			continue
		}
		w := r.rolled[p.seq]
		if w[1] == 0 || (p.prop != PropCurPos && p.prop != PropKVWrite && p.prop != PropLogits) {
			continue
		}
		q := p
		q.prop = PropRollback
		q.detail = fmt.Sprintf("seq %d was rolled back to %d positions (a verify to %d rejected its drafts at %d..%d), and its rejected rows are not all rewritten: %s", p.seq, w[0], w[1], w[0], w[1]-1, p.detail)
		ps = append(ps, q)
	}
	return ps
}
