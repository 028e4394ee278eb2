package proptest

import (
	"fmt"
)

// The actions that run no device step, finish and recapture, and what
// must hold after them (checkQuiet: no error, no finding, no KV write, no
// op, the page table and the cache unchanged).

func (r *runner) finish(c Cmd) *Failure {
	f := r.end(c)
	r.forget(c.Seq)
	r.reach.add(ReachFinish)
	return f
}

func (r *runner) recapture(c Cmd) *Failure {
	rs, ok := r.sut.(Resetter)
	if !ok {
		return nil
	}
	_, err := sutDo(func() (struct{}, error) { return struct{}{}, rs.Reset() })
	r.traceWidth = -1
	r.regime.reset()
	r.prev = nil
	r.reach.add(ReachReset)
	return r.checkQuiet(c, err)
}

// checkQuiet checks a command that runs no step: no error, no finding, no
// KV write.
func (r *runner) checkQuiet(c Cmd, err error) *Failure {
	var ps []problem
	if err != nil {
		ps = append(ps, problem{prop: errProp(err), seq: -1, pos: -1, detail: err.Error()})
	}
	finding := r.findings(&ps)
	if e, ok := r.sut.(*EngineSUT); ok {
		r.checkWireQuiet(&ps, c, e)
	} else if kv, ok := r.sut.(KVObserver); ok {
		ws, err := kv.TakeKVWrites()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "KV log: " + err.Error()})
		} else if len(ws) > 0 {
			ps = append(ps, problem{prop: PropKVWrite, seq: -1, pos: -1, detail: fmt.Sprintf("%d KV writes by a command that runs no step, first: %v", len(ws), ws[0])})
		}
	}
	if r.tap != nil {
		ev := r.tap.TakeEvents()
		if ev.EagerOps+ev.Captures+ev.Executes > 0 {
			ps = append(ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: fmt.Sprintf("a command that runs no step ran %d ops, %d captures, %d trace executions on the device", ev.EagerOps, ev.Captures, ev.Executes)})
		}
		r.checkMem(&ps, ev)
	}
	if _, ok := r.sut.(KVPeeker); ok {
		r.diffCache(&ps, call{c: c})
	} else if c.Kind == Finish && r.sc.NumBlocks <= auditMaxBlocks {
		r.auditCache(&ps)
	}
	r.checkPageTableKept(&ps)
	return r.failure(call{c: c}, ps, finding, StepInfo{})
}
