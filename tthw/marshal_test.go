package tthw

import (
	"slices"
	"testing"

	"github.com/offcard/offcard/tt"
)

// The prefill ops and rotary_embedding_hf's mode marshal into the layouts
// offcard_tt.h states (op code; tensors; own int attributes, then one spec
// per allocated output; floats), in value and pointer form alike.
func TestMarshalPrefillOps(t *testing.T) {
	ts := func(id tt.TensorID, sh ...int) tt.Tensor {
		return tt.Tensor{ID: id, Spec: tt.Spec{Shape: sh, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}}
	}
	in := ts(1, 1, 1, 40, 8*64)
	heads, kv := ts(2, 1, 4, 40, 64), ts(3, 1, 2, 40, 64)
	cos, sin := ts(4, 1, 1, 64, 64), ts(5, 1, 1, 64, 64)
	for _, c := range []struct {
		op     tt.Op
		code   int32
		ids    []uint64
		own    []int64
		floats []float32
		outs   int
	}{
		{tt.NLPCreateQKVHeads{Input: in, NumHeads: 4, NumKVHeads: 2}, 18, []uint64{1}, []int64{4, 2, 0}, nil, 3},
		{tt.NLPCreateQKVHeads{Input: in, NumHeads: 4, NumKVHeads: 2, TransposeK: true}, 18, []uint64{1}, []int64{4, 2, 1}, nil, 3},
		{tt.SDPA{Q: heads, K: kv, V: kv, Causal: true, Scale: 0.125, QChunkSize: 64, KChunkSize: 32, FP32DestAcc: true}, 19, []uint64{2, 3, 3}, []int64{1, 64, 32, 1, 0}, []float32{0.125}, 1},
		{tt.SDPA{Q: heads, K: kv, V: kv, QChunkSize: 64, KChunkSize: 64, ExactExp: true}, 19, []uint64{2, 3, 3}, []int64{0, 64, 64, 0, 1}, []float32{0}, 1},
		{tt.SDPA{Q: heads, K: kv, V: kv}, 19, []uint64{2, 3, 3}, []int64{0, 0, 0, 0, 0}, []float32{0}, 1},
		{tt.NLPConcatHeads{Input: heads}, 20, []uint64{2}, nil, nil, 1},
		{tt.RotaryEmbeddingHF{Input: heads, Cos: cos, Sin: sin, Prefill: true}, 5, []uint64{2, 4, 5}, []int64{0}, nil, 1},
		{tt.RotaryEmbeddingHF{Input: heads, Cos: cos, Sin: sin}, 5, []uint64{2, 4, 5}, []int64{1}, nil, 1},
	} {
		a, err := marshalOp(c.op)
		if err != nil {
			t.Fatalf("%s: %v", c.op.Name(), err)
		}
		p, err := marshalOp(tt.Ptr(c.op))
		if err != nil {
			t.Fatalf("%s (pointer): %v", c.op.Name(), err)
		}
		for _, x := range []opArgs{a, p} {
			if x.code != c.code || !slices.Equal(x.tensors, c.ids) || !slices.Equal(x.ints, c.own) || !slices.Equal(x.floats, c.floats) || len(x.outSpecs) != c.outs {
				t.Errorf("%s: marshalled %+v, want code %d tensors %v ints %v floats %v and %d outputs", c.op.Name(), x, c.code, c.ids, c.own, c.floats, c.outs)
			}
			for j, s := range x.outSpecs {
				want := c.op.(tt.Allocating).OutputSpecs()[j]
				w, err := specWords(s)
				if err != nil || !s.Equal(want) {
					t.Errorf("%s: output %d spec %v (%v), want %v", c.op.Name(), j, s, err, want)
				}
				back, err := specFromWords(w)
				if err != nil || !back.Equal(s) {
					t.Errorf("%s: output %d spec does not round-trip: %v (%v)", c.op.Name(), j, back, err)
				}
			}
		}
	}
}
