package proptest

import (
	"math"

	"github.com/offcard/offcard/qwen3"
)

// What the runner remembers of each sequence for the serving actions: the
// token fed at each position (a prefix hit and a fork inherit it, a
// re-admit prefills it again), the hash of the SUT's output at each
// position when first computed (the recompute property's expectation),
// and the rollback window (the rollback property's).

// fedLast is the token to feed after a prefill call: ref's last, or in
// the tolerant mode the SUT's own (teacher forcing), when the call passed.
func (r *runner) fedLast(got, want []qwen3.Output, f *Failure) int32 {
	if _, ok := r.tolerant(); ok && len(got) > 0 && f == nil {
		return got[len(got)-1].Token
	}
	return want[len(want)-1].Token
}

// record notes that sequence q was fed tok at pos and that the SUT's
// output for it is got[i] (when the SUT returned as many outputs as asked).
func (r *runner) record(q, pos int, tok int32, got []qwen3.Output, i int) {
	h := r.hist[q]
	for len(h) < pos {
		h = append(h, -1) // a position jump's gap
	}
	r.hist[q] = append(h[:pos], tok)
	o := r.outh[q]
	for len(o) < pos {
		o = append(o, 0)
	}
	var x uint64
	if i < len(got) {
		x = hashOutput(got[i])
	}
	r.outh[q] = append(o[:pos], x)
	if w := r.rolled[q]; w[1] > 0 && pos+1 >= w[1] {
		r.rolled[q] = [2]int{} // every rejected row rewritten
	}
}

// recordAll records a prefill call's positions start.. (fed toks).
func (r *runner) recordAll(q int, toks []int32, start int, got, want []qwen3.Output, f *Failure) {
	if len(got) != len(want) {
		got = nil
	}
	for i, t := range toks {
		r.record(q, start+i, t, got, i)
	}
}

// forget drops what the runner remembers of q.
func (r *runner) forget(q int) {
	r.hist[q], r.outh[q], r.rolled[q] = nil, nil, [2]int{}
}

// hashOutput is a 64-bit FNV-1a hash of an output's position, token and
// logits' bits (the recompute property compares outputs by it).
func hashOutput(o qwen3.Output) uint64 {
	h := uint64(14695981039346656037)
	put := func(v uint32) {
		for k := 0; k < 32; k += 8 {
			h ^= uint64(byte(v >> k))
			h *= 1099511628211
		}
	}
	put(uint32(o.Pos))
	put(uint32(o.Token))
	for _, x := range o.Logits {
		put(math.Float32bits(x))
	}
	return h | 1 // never 0 (0: no output recorded)
}
