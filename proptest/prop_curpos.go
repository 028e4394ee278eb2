package proptest

import (
	"fmt"
	"slices"
)

// Property cur-pos (3), exact mode: the device cur_pos at every op that
// reads it, and after the call.

// checkOpPos checks the cur_pos every position-reading op saw against the
// host's positions, step by step (a prefill is one step per position).
func (r *runner) checkOpPos(ps *[]problem, k call, obs []OpPos, slotSeq map[int]int) {
	n := len(k.act[0].pos)
	exp := func(j int) []int32 {
		v := make([]int32, r.sc.Capacity)
		for i := range v {
			v[i] = -1
		}
		for _, a := range k.act {
			v[a.slot] = int32(a.pos[j])
		}
		return v
	}
	j := 0
	cur := exp(0)
	for _, o := range obs {
		if slices.Equal(o.CurPos, cur) {
			continue
		}
		if j+1 < n {
			if nx := exp(j + 1); slices.Equal(o.CurPos, nx) {
				j, cur = j+1, nx
				continue
			}
		}
		seq, pos := -1, -1
		for s := range cur {
			if s < len(o.CurPos) && o.CurPos[s] != cur[s] {
				if q, ok := slotSeq[s]; ok {
					seq, pos = q, int(cur[s])
				}
				break
			}
		}
		*ps = append(*ps, problem{prop: PropCurPos, seq: seq, pos: pos, located: true, offset: j, op: o.Seq,
			detail: fmt.Sprintf("%s (%s) ran with device cur_pos %v, the host expects %v (seq_len-1 per active slot, -1 for the others)", o.Op, o.Regime, o.CurPos, cur)})
		return
	}
}

// checkCurPosAfter checks the device cur_pos read back after call k:
// active slots hold their last position + 1 (seq_len), every other slot -1.
func (r *runner) checkCurPosAfter(ps *[]problem, k call, slotSeq map[int]int) {
	po, ok := r.sut.(PosObserver)
	if !ok {
		return
	}
	dev, err := po.DeviceCurPos()
	if err != nil {
		*ps = append(*ps, problem{prop: PropSUTError, seq: -1, pos: -1, detail: "read cur_pos: " + err.Error()})
	} else {
		want := make([]int32, r.sc.Capacity)
		for i := range want {
			want[i] = -1
		}
		for _, a := range k.act {
			want[a.slot] = int32(a.pos[len(a.pos)-1] + 1)
		}
		if !slices.Equal(dev, want) {
			seq, pos := -1, -1
			for s := range want {
				if s < len(dev) && dev[s] != want[s] {
					if q, ok := slotSeq[s]; ok {
						seq, pos = q, int(want[s])-1
					}
					break
				}
			}
			*ps = append(*ps, problem{prop: PropCurPos, seq: seq, pos: pos, located: true, offset: len(k.act[0].pos) - 1,
				detail: fmt.Sprintf("after the step the device cur_pos is %v, the host expects %v (seq_len per active slot, -1 for the others)", dev, want)})
		}
	}
}
