package proptest

import (
	"fmt"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// The block copies kvpage's PrepareWrite asks for (copy-on-write of a
// shared block before a write into it: a fork's child or parent, a prefix
// hit inside a block), carried out through qwen3.BlockCopier before the
// call that writes, as vLLM's scheduler has copy_blocks run. A copy is a
// Decoder call of its own, checked like one: no error, no finding, no
// trace, the device memory, the page table unchanged, and (kv-write) its
// writes exactly every row of each destination block, the cache bytes
// then equal to ref's; shared-write: no write into a block another table
// still holds.

func (r *runner) copyBlocks(c Cmd, sub int, copies []kvpage.BlockCopy) *Failure {
	cs := make([]qwen3.BlockCopy, len(copies))
	for i, x := range copies {
		cs[i] = qwen3.BlockCopy{Src: x.Src, Dst: x.Dst}
	}
	if err := r.ref.CopyBlocks(cs); err != nil {
		panic(fmt.Sprintf("ref copy blocks: %v", err))
	}
	bc, ok := r.dec.(qwen3.BlockCopier)
	if !ok {
		panic("runner: a block copy for a SUT without BlockCopier")
	}
	_, err := sutDo(func() (struct{}, error) { return struct{}{}, bc.CopyBlocks(cs) })
	r.reach.add(ReachBlockCopy)
	return r.checkCopy(call{c: c, subStep: sub, copies: cs, err: err})
}

// checkCopy checks a CopyBlocks call.
func (r *runner) checkCopy(k call) *Failure {
	var ps []problem
	if k.err != nil {
		ps = append(ps, problem{prop: errProp(k.err), seq: -1, pos: -1, detail: k.err.Error(), callErr: true})
	}
	finding := r.findings(&ps)
	if _, ok := r.tolerant(); ok {
		// The tolerant mode sees a copy through the calls that read it.
		return r.failure(k, ps, finding, StepInfo{})
	}
	if kv, ok := r.sut.(KVObserver); ok {
		ws, err := kv.TakeKVWrites()
		if err != nil {
			ps = append(ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "KV log: " + err.Error()})
		} else {
			r.checkSharedLog(&ps, ws, nil)
			r.checkCopyWrites(&ps, k, ws)
		}
	}
	if r.tap != nil {
		ev := r.tap.TakeEvents()
		if ev.Captures+ev.Executes > 0 {
			ps = append(ps, problem{prop: PropReplay, seq: -1, pos: -1, detail: fmt.Sprintf("a block copy captured %d and executed %d traces on the device", ev.Captures, ev.Executes)})
		}
		r.checkMem(&ps, ev)
	}
	if oo, ok := r.sut.(OpPosObserver); ok {
		_, _ = oo.TakeOpPos() // a copy reads no cur_pos; nothing to hold it to
	}
	if _, ok := r.sut.(KVPeeker); ok {
		r.diffCache(&ps, k)
	}
	r.checkPageTableKept(&ps)
	return r.failure(k, ps, finding, StepInfo{})
}

// checkCopyWrites holds a copy's KV log to the contract: for every layer,
// K and V, each row of each destination block written exactly once,
// nothing else (a copy writes its whole destination block; the log's slot
// and position are not compared, a copy has no sequence).
func (r *runner) checkCopyWrites(ps *[]problem, k call, ws []KVWrite) {
	bs := r.sc.BlockSize
	type row struct {
		layer int
		value bool
		block int64
		row   int64
	}
	want := map[row]int{}
	for _, c := range k.copies {
		for l := 0; l < r.cfg.NumHiddenLayers; l++ {
			for _, v := range []bool{false, true} {
				for x := 0; x < bs; x++ {
					want[row{l, v, int64(c.Dst), int64(x)}] = 0
				}
			}
		}
	}
	for _, w := range ws {
		key := row{w.Layer, w.Value, w.Block, w.Row}
		n, ok := want[key]
		switch {
		case !ok:
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1,
				detail: fmt.Sprintf("block copy %v wrote outside its destination blocks: %v", k.copies, w)})
			return
		case n > 0:
			*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1,
				detail: fmt.Sprintf("block copy %v wrote a destination row twice: %v", k.copies, w)})
			return
		}
		want[key] = 1
	}
	for _, c := range k.copies {
		for l := 0; l < r.cfg.NumHiddenLayers; l++ {
			for _, v := range []bool{false, true} {
				for x := 0; x < bs; x++ {
					if want[row{l, v, int64(c.Dst), int64(x)}] == 0 {
						*ps = append(*ps, problem{prop: PropKVWrite, seq: -1, pos: -1,
							detail: fmt.Sprintf("block copy %d->%d left destination row %d (layer %d %s) unwritten: a copy writes its whole destination block", c.Src, c.Dst, x, l, kvName(v))})
						return
					}
				}
			}
		}
	}
}
