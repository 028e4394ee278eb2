package proptest

import (
	"fmt"
)

// Property strict (5): the simulator's sanitizer (or an engine's own
// checker) reports no finding.

func (r *runner) findings(ps *[]problem) string {
	fo, ok := r.sut.(FindingObserver)
	if !ok {
		return ""
	}
	fs := fo.TakeFindings()
	var seqs []int
	if fsq, ok := r.sut.(FindingSeqs); ok {
		seqs = fsq.FindingSeqs()
	}
	if len(fs) == 0 {
		return ""
	}
	op := 0
	if len(seqs) > 0 {
		op = seqs[0]
	}
	d := fs[0]
	if len(fs) > 1 {
		d += fmt.Sprintf(" (and %d more)", len(fs)-1)
	}
	*ps = append(*ps, problem{prop: PropStrict, seq: -1, pos: -1, detail: d, op: op})
	return fs[0]
}
