package tthw

import (
	"fmt"

	"github.com/offcard/offcard/tt"
)

// Spec words and op codes of offcard_tt.h.
const (
	specHeader = 10
	maxRank    = 8

	opEmbedding             = 1
	opRMSNorm               = 2
	opLinear                = 3
	opCreateQKVHeadsDecode  = 4
	opRotaryEmbeddingHF     = 5
	opPagedUpdateCache      = 6
	opPagedFusedUpdateCache = 7
	opPagedFillCache        = 8
	opPagedSDPADecode       = 9
	opConcatHeadsDecode     = 10
	opAdd                   = 11
	opSiluMul               = 12
	opArgmax                = 13
	opPlusOne               = 14
	opRotaryEmbeddingLlama  = 15
	opToMemoryConfig        = 16
	opCopy                  = 17
	opCreateQKVHeads        = 18
	opSDPA                  = 19
	opConcatHeads           = 20
	opChunkedSDPA           = 21
	opFillCache             = 22
	opSlice                 = 23
)

// The ABI's enum values (OFFCARD_TT_*), mapped explicitly so a change of
// package tt's numbering cannot silently change the ABI.
var (
	dtypeCode  = map[tt.DType]int64{tt.BF16: 1, tt.FP32: 2, tt.INT32: 3, tt.UINT32: 4, tt.UINT16: 5}
	layoutCode = map[tt.Layout]int64{tt.Tile: 1, tt.RowMajor: 2}
	bufferCode = map[tt.BufferType]int64{tt.DRAM: 1, tt.L1: 2}
	memoryCode = map[tt.MemoryLayout]int64{tt.Interleaved: 1, tt.HeightSharded: 2, tt.WidthSharded: 3}
)

func inverse[K comparable](m map[K]int64) map[int64]K {
	r := make(map[int64]K, len(m))
	for k, v := range m {
		r[v] = k
	}
	return r
}

var (
	dtypeOf  = inverse(dtypeCode)
	layoutOf = inverse(layoutCode)
	bufferOf = inverse(bufferCode)
	memoryOf = inverse(memoryCode)
)

// specWords encodes a spec as the ABI's int64 array.
func specWords(s tt.Spec) ([]int64, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if len(s.Shape) > maxRank {
		return nil, fmt.Errorf("tthw: rank %d exceeds the ABI's %d", len(s.Shape), maxRank)
	}
	w := make([]int64, specHeader, specHeader+len(s.Shape))
	w[0] = int64(len(s.Shape))
	w[1], w[2], w[3] = dtypeCode[s.DType], layoutCode[s.Layout], bufferCode[s.Memory.Buffer]
	w[4] = memoryCode[s.Memory.Layout]
	if w[4] == 0 {
		return nil, fmt.Errorf("tthw: memory layout %v has no ABI code", s.Memory.Layout)
	}
	sh := s.Memory.Shard
	w[5], w[6], w[7], w[8], w[9] = int64(sh.NumCores), int64(sh.Shape[0]), int64(sh.Shape[1]), int64(sh.FirstCore), int64(sh.GridWidth)
	for _, d := range s.Shape {
		w = append(w, int64(d))
	}
	return w, nil
}

// specFromWords decodes the ABI's spec array.
func specFromWords(w []int64) (tt.Spec, error) {
	if len(w) < specHeader || int(w[0]) != len(w)-specHeader {
		return tt.Spec{}, fmt.Errorf("tthw: malformed spec %v from the library", w)
	}
	s := tt.Spec{DType: dtypeOf[w[1]], Layout: layoutOf[w[2]],
		Memory: tt.MemoryConfig{Buffer: bufferOf[w[3]], Layout: memoryOf[w[4]],
			Shard: tt.ShardSpec{NumCores: int(w[5]), Shape: [2]int{int(w[6]), int(w[7])}, FirstCore: int(w[8]), GridWidth: int(w[9])}}}
	for _, d := range w[specHeader:] {
		s.Shape = append(s.Shape, int(d))
	}
	if err := s.Validate(); err != nil {
		return tt.Spec{}, fmt.Errorf("tthw: library reported a bad spec: %v", err)
	}
	return s, nil
}

// opArgs is one op in the ABI's form; outSpecs are the specs of the
// outputs the device allocates (tt.Allocating ops).
type opArgs struct {
	code     int32
	tensors  []uint64
	ints     []int64
	floats   []float32
	outSpecs []tt.Spec
}

// alloc records an Allocating op's output specs.
func (a opArgs) alloc(o tt.Allocating) opArgs {
	a.outSpecs = o.OutputSpecs()
	return a
}

func id(t tt.Tensor) uint64 { return uint64(t.ID) }

func idOpt(t *tt.Tensor) uint64 {
	if t == nil {
		return 0
	}
	return uint64(t.ID)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// updateInts are paged_update_cache's integer attributes: share_cache,
// batch_offset, fp32_dest_acc, the list length (-1 for tensor mode) and the
// list.
func updateInts(share bool, off int, fp32 bool, list []int32) []int64 {
	n := int64(len(list))
	if list == nil {
		n = -1 // tensor mode; a list given too is refused by the device
	}
	w := []int64{b2i(share), int64(off), b2i(fp32), n}
	for _, x := range list {
		w = append(w, int64(x))
	}
	return w
}

// marshalOp encodes a tt op (value or pointer form) for offcard_tt_run.
func marshalOp(op tt.Op) (opArgs, error) {
	switch o := op.(type) {
	case *tt.Embedding:
		return marshalOp(*o)
	case *tt.RMSNorm:
		return marshalOp(*o)
	case *tt.Linear:
		return marshalOp(*o)
	case *tt.NLPCreateQKVHeadsDecode:
		return marshalOp(*o)
	case *tt.RotaryEmbeddingHF:
		return marshalOp(*o)
	case *tt.RotaryEmbeddingLlama:
		return marshalOp(*o)
	case *tt.ToMemoryConfig:
		return marshalOp(*o)
	case *tt.PagedUpdateCache:
		return marshalOp(*o)
	case *tt.PagedFusedUpdateCache:
		return marshalOp(*o)
	case *tt.PagedFillCache:
		return marshalOp(*o)
	case *tt.PagedSDPADecode:
		return marshalOp(*o)
	case *tt.ConcatHeads:
		return marshalOp(*o)
	case *tt.NLPCreateQKVHeads:
		return marshalOp(*o)
	case *tt.SDPA:
		return marshalOp(*o)
	case *tt.NLPConcatHeads:
		return marshalOp(*o)
	case *tt.Add:
		return marshalOp(*o)
	case *tt.SiluMul:
		return marshalOp(*o)
	case *tt.Argmax:
		return marshalOp(*o)
	case *tt.PlusOne:
		return marshalOp(*o)
	case *tt.ChunkedSDPA:
		return marshalOp(*o)
	case *tt.FillCache:
		return marshalOp(*o)
	case *tt.Slice:
		return marshalOp(*o)

	case tt.Embedding:
		return opArgs{code: opEmbedding, tensors: []uint64{id(o.Input), id(o.Weight), id(o.Output)}}, nil
	case tt.RMSNorm:
		return opArgs{code: opRMSNorm, tensors: []uint64{id(o.Input), id(o.Weight)}, floats: []float32{o.Epsilon}}.alloc(o), nil
	case tt.Linear:
		return opArgs{code: opLinear, tensors: []uint64{id(o.Input), id(o.Weight), id(o.Output), idOpt(o.Bias)}, ints: []int64{b2i(o.TransposeB)}}, nil
	case tt.NLPCreateQKVHeadsDecode:
		return opArgs{code: opCreateQKVHeadsDecode, tensors: []uint64{id(o.Input)},
			ints: []int64{int64(o.NumHeads), int64(o.NumKVHeads)}}.alloc(o), nil
	case tt.RotaryEmbeddingHF:
		return opArgs{code: opRotaryEmbeddingHF, tensors: []uint64{id(o.Input), id(o.Cos), id(o.Sin)}, ints: []int64{b2i(!o.Prefill)}}.alloc(o), nil
	case tt.NLPCreateQKVHeads:
		return opArgs{code: opCreateQKVHeads, tensors: []uint64{id(o.Input)},
			ints: []int64{int64(o.NumHeads), int64(o.NumKVHeads), b2i(o.TransposeK)}}.alloc(o), nil
	case tt.SDPA:
		return opArgs{code: opSDPA, tensors: []uint64{id(o.Q), id(o.K), id(o.V)},
			ints:   []int64{b2i(o.Causal), int64(o.QChunkSize), int64(o.KChunkSize), b2i(o.FP32DestAcc), b2i(o.ExactExp)},
			floats: []float32{o.Scale}}.alloc(o), nil
	case tt.NLPConcatHeads:
		return opArgs{code: opConcatHeads, tensors: []uint64{id(o.Input)}}.alloc(o), nil
	case tt.RotaryEmbeddingLlama:
		return opArgs{code: opRotaryEmbeddingLlama, tensors: []uint64{id(o.Input), id(o.Cos), id(o.Sin), id(o.TransMat)}}.alloc(o), nil
	case tt.ToMemoryConfig:
		return opArgs{code: opToMemoryConfig, tensors: []uint64{id(o.Input)}}.alloc(o), nil
	case tt.PagedUpdateCache:
		return opArgs{code: opPagedUpdateCache, tensors: []uint64{id(o.Cache), id(o.Input), idOpt(o.UpdateIdxs), idOpt(o.PageTable)},
			ints: updateInts(o.ShareCache, o.BatchOffset, o.FP32DestAcc, o.UpdateIdxsList)}, nil
	case tt.PagedFusedUpdateCache:
		return opArgs{code: opPagedFusedUpdateCache,
			tensors: []uint64{id(o.Cache1), id(o.Input1), id(o.Cache2), id(o.Input2), idOpt(o.UpdateIdxs), idOpt(o.PageTable)},
			ints:    updateInts(o.ShareCache, o.BatchOffset, o.FP32DestAcc, o.UpdateIdxsList)}, nil
	case tt.PagedFillCache:
		return opArgs{code: opPagedFillCache, tensors: []uint64{id(o.Cache), id(o.Input), id(o.PageTable), idOpt(o.BatchIdxTensor)},
			ints: []int64{int64(o.BatchIdx)}}, nil
	case tt.PagedSDPADecode:
		return opArgs{code: opPagedSDPADecode, tensors: []uint64{id(o.Q), id(o.K), id(o.V), id(o.PageTable), id(o.CurPos)},
			ints: []int64{int64(o.KChunkSize), b2i(o.FP32DestAcc)}, floats: []float32{o.Scale}}.alloc(o), nil
	case tt.ConcatHeads:
		return opArgs{code: opConcatHeadsDecode, tensors: []uint64{id(o.Input), id(o.Output)}, ints: []int64{int64(o.NumHeads)}}, nil
	case tt.Add:
		return opArgs{code: opAdd, tensors: []uint64{id(o.A), id(o.B), id(o.Output)}}, nil
	case tt.SiluMul:
		return opArgs{code: opSiluMul, tensors: []uint64{id(o.Gate), id(o.Up), id(o.Output)}}, nil
	case tt.Argmax:
		return opArgs{code: opArgmax, tensors: []uint64{id(o.Input), id(o.Output)}}, nil
	case tt.PlusOne:
		return opArgs{code: opPlusOne, tensors: []uint64{id(o.Input)}, ints: []int64{b2i(o.SkipNegativeEntries)}}, nil
	case tt.ChunkedSDPA:
		return opArgs{code: opChunkedSDPA, tensors: []uint64{id(o.Q), id(o.K), id(o.V), id(o.PageTable), idOpt(o.ChunkStartTensor)},
			ints:   []int64{o.ChunkStart, int64(o.QChunkSize), int64(o.KChunkSize), b2i(o.FP32DestAcc), b2i(o.ExactExp)},
			floats: []float32{o.Scale}}.alloc(o), nil
	case tt.FillCache:
		return opArgs{code: opFillCache, tensors: []uint64{id(o.Cache), id(o.Input)}, ints: []int64{int64(o.BatchIdx), int64(o.UpdateIdx)}}, nil
	case tt.Slice:
		ints := []int64{int64(len(o.Begin))}
		for _, x := range o.Begin {
			ints = append(ints, int64(x))
		}
		ints = append(ints, int64(len(o.End)))
		for _, x := range o.End {
			ints = append(ints, int64(x))
		}
		a := opArgs{code: opSlice, tensors: []uint64{id(o.Input)}, ints: ints}.alloc(o)
		if a.outSpecs[0].Validate() != nil {
			// an end before its begin has no box: ttnn refuses it with its
			// own text ("End {} must be greater than or equal to start {}"),
			// so the device is asked, with the input's spec standing in
			a.outSpecs[0] = o.Input.Spec
			if o.Memory != (tt.MemoryConfig{}) {
				a.outSpecs[0].Memory = o.Memory
			}
		}
		return a, nil
	}
	return opArgs{}, fmt.Errorf("tthw: op %s has no offcard_tt op code", op.Name())
}
