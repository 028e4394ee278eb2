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

// The serving ops marshal as offcard_tt.h states (ops 21-23), value and
// pointer form alike; chunk_start_idx travels even with the tensor form
// (the library ignores it there), and slice carries both lists' lengths.
func TestMarshalServingOps(t *testing.T) {
	ts := func(id tt.TensorID, dt tt.DType, l tt.Layout, sh ...int) tt.Tensor {
		return tt.Tensor{ID: id, Spec: tt.Spec{Shape: sh, DType: dt, Layout: l, Memory: tt.DRAMInterleaved}}
	}
	q, k, v := ts(1, tt.BF16, tt.Tile, 1, 4, 64, 64), ts(2, tt.BF16, tt.Tile, 8, 2, 32, 64), ts(3, tt.BF16, tt.Tile, 8, 2, 32, 64)
	pt, start := ts(4, tt.INT32, tt.RowMajor, 1, 8), ts(5, tt.INT32, tt.RowMajor, 1)
	in := ts(6, tt.BF16, tt.Tile, 1, 2, 32, 64)
	for _, c := range []struct {
		op      tt.Op
		code    int32
		ids     []uint64
		own     []int64
		floats  []float32
		outs    int
		outDims []int
	}{
		{tt.ChunkedSDPA{Q: q, K: k, V: v, PageTable: pt, ChunkStart: 64, Scale: 0.125, QChunkSize: 64, KChunkSize: 32, FP32DestAcc: true},
			21, []uint64{1, 2, 3, 4, 0}, []int64{64, 64, 32, 1, 0}, []float32{0.125}, 1, []int{1, 4, 64, 64}},
		{tt.ChunkedSDPA{Q: q, K: k, V: v, PageTable: pt, ChunkStartTensor: &start, ExactExp: true, QChunkSize: 32, KChunkSize: 32},
			21, []uint64{1, 2, 3, 4, 5}, []int64{0, 32, 32, 0, 1}, []float32{0}, 1, []int{1, 4, 64, 64}},
		{tt.FillCache{Cache: k, Input: in, BatchIdx: 6, UpdateIdx: 32}, 22, []uint64{2, 6}, []int64{6, 32}, nil, 0, nil},
		{tt.Slice{Input: k, Begin: []int{3, 0, 0, 0}, End: []int{4, 2, 32, 64}}, 23, []uint64{2}, []int64{4, 3, 0, 0, 0, 4, 4, 2, 32, 64}, nil, 1, []int{1, 2, 32, 64}},
		// unequal lists reach the library, which refuses with ttnn's text
		{tt.Slice{Input: k, Begin: []int{3, 0, 0, 0}, End: []int{4, 2, 32}}, 23, []uint64{2}, []int64{4, 3, 0, 0, 0, 3, 4, 2, 32}, nil, 1, []int{8, 2, 32, 64}},
		// so does an end before its begin (the input's spec stands in)
		{tt.Slice{Input: k, Begin: []int{3, 0, 0, 0}, End: []int{2, 2, 32, 64}}, 23, []uint64{2}, []int64{4, 3, 0, 0, 0, 4, 2, 2, 32, 64}, nil, 1, []int{8, 2, 32, 64}},
	} {
		var ptr tt.Op
		switch o := c.op.(type) {
		case tt.ChunkedSDPA:
			ptr = &o
		case tt.FillCache:
			ptr = &o
		case tt.Slice:
			ptr = &o
		}
		for _, op := range []tt.Op{c.op, ptr} {
			x, err := marshalOp(op)
			if err != nil {
				t.Fatalf("%s: %v", c.op.Name(), err)
			}
			if x.code != c.code || !slices.Equal(x.tensors, c.ids) || !slices.Equal(x.ints, c.own) || !slices.Equal(x.floats, c.floats) || len(x.outSpecs) != c.outs {
				t.Errorf("%s (%T): marshalled %+v, want code %d tensors %v ints %v floats %v and %d outputs", c.op.Name(), op, x, c.code, c.ids, c.own, c.floats, c.outs)
				continue
			}
			if c.outs == 1 {
				if !slices.Equal(x.outSpecs[0].Shape, c.outDims) {
					t.Errorf("%s: output spec %v, want shape %v", c.op.Name(), x.outSpecs[0], c.outDims)
				}
				if _, err := specWords(x.outSpecs[0]); err != nil {
					t.Errorf("%s: output spec %v: %v", c.op.Name(), x.outSpecs[0], err)
				}
			}
		}
	}
}

// A spec's shard grid travels whole: its cores, shape, first core and grid
// width each take their own word (OFFCARD_TT_SPEC_SHARD_*), and the words
// decode to the same spec.
func TestSpecWordsShardGrid(t *testing.T) {
	m := tt.L1HeightShardedAt(3, 16, [2]int{32, 64})
	m.Shard.GridWidth = 8
	s := tt.Spec{Shape: []int{1, 16, 2, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: m}
	w, err := specWords(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{4, dtypeCode[tt.BF16], layoutCode[tt.Tile], bufferCode[tt.L1], memoryCode[tt.HeightSharded], 16, 32, 64, 3, 8, 1, 16, 2, 64}; !slices.Equal(w, want) {
		t.Fatalf("words %v, want %v", w, want)
	}
	back, err := specFromWords(w)
	if err != nil || !back.Equal(s) {
		t.Fatalf("decoded %v (%v), want %v", back, err, s)
	}
}
