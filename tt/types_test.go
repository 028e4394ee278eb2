package tt

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// §6.6: TILE pads the last two dims to 32; a page is one 32x32 tile (BF16
// 2048 B, FP32 4096 B); ROW_MAJOR page = one row (padded_shape[-1]*elem).
func TestSpecPages(t *testing.T) {
	for _, c := range []struct {
		spec     Spec
		padded   []int
		pageSize int
		pages    int
	}{
		{Spec{[]int{1, 8, 32, 128}, BF16, Tile, DRAMInterleaved}, []int{1, 8, 32, 128}, 2048, 32},
		{Spec{[]int{1, 1, 5, 100}, BF16, Tile, DRAMInterleaved}, []int{1, 1, 32, 128}, 2048, 4},
		{Spec{[]int{3, 1}, FP32, Tile, DRAMInterleaved}, []int{32, 32}, 4096, 1},
		// [B] int32 => one page of 4B bytes; [B,W] => B pages of 4W bytes.
		{Spec{[]int{8}, INT32, RowMajor, DRAMInterleaved}, []int{8}, 32, 1},
		{Spec{[]int{8, 1}, INT32, RowMajor, DRAMInterleaved}, []int{8, 1}, 4, 8},
		{Spec{[]int{8, 256}, INT32, RowMajor, DRAMInterleaved}, []int{8, 256}, 1024, 8},
		{Spec{[]int{1, 8, 32, 128}, BF16, Tile, L1HeightSharded(8, [2]int{32, 128})}, []int{1, 8, 32, 128}, 2048, 32},
	} {
		s := c.spec
		if err := s.Validate(); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		if got := s.PaddedShape(); !reflect.DeepEqual(got, c.padded) {
			t.Errorf("%v padded %v want %v", s, got, c.padded)
		}
		if got := s.PageSize(); got != c.pageSize {
			t.Errorf("%v page size %d want %d", s, got, c.pageSize)
		}
		if got := s.NumPages(); got != c.pages {
			t.Errorf("%v pages %d want %d", s, got, c.pages)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	bad := []Spec{
		{nil, BF16, Tile, DRAMInterleaved},
		{[]int{4}, BF16, Tile, DRAMInterleaved},
		{[]int{0, 4}, BF16, RowMajor, DRAMInterleaved},
		{[]int{4, 4}, 0, RowMajor, DRAMInterleaved},
		{[]int{4, 4}, BF16, 0, DRAMInterleaved},
		{[]int{1, 8, 32, 128}, BF16, Tile, MemoryConfig{Layout: HeightSharded, Buffer: DRAM, Shard: ShardSpec{NumCores: 8, Shape: [2]int{32, 128}}}},
		{[]int{1, 8, 32, 128}, BF16, Tile, L1HeightSharded(8, [2]int{32, 64})},
		{[]int{1, 8, 32, 128}, BF16, Tile, L1HeightSharded(7, [2]int{32, 128})},
		{[]int{1, 8, 32, 128}, BF16, Tile, L1HeightShardedAt(-1, 8, [2]int{32, 128})},
		{[]int{1, 8, 32, 128}, BF16, Tile, L1HeightSharded(16, [2]int{16, 128})},
	}
	for _, s := range bad {
		if err := s.Validate(); err == nil {
			t.Errorf("%v: want error", s)
		}
	}
}

func TestSpecStringEqual(t *testing.T) {
	a := Spec{[]int{1, 8, 32, 128}, BF16, Tile, L1HeightSharded(8, [2]int{32, 128})}
	if got, want := a.String(), "[1,8,32,128] BFLOAT16 TILE L1_HEIGHT_SHARDED(cores=8,shard=[32,128])"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	c := a
	c.Memory = L1HeightShardedAt(8, 8, [2]int{32, 128})
	if got, want := c.String(), "[1,8,32,128] BFLOAT16 TILE L1_HEIGHT_SHARDED(cores=8,shard=[32,128],first=8)"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if err := c.Validate(); err != nil || a.Equal(c) {
		t.Errorf("first core: validate %v, equal %v", err, a.Equal(c))
	}
	b := a
	b.Shape = []int{1, 8, 32, 128}
	if !a.Equal(b) {
		t.Error("equal specs differ")
	}
	b.Shape = []int{1, 8, 32, 64}
	if a.Equal(b) {
		t.Error("different shapes equal")
	}
}

func TestHostRoundTrip(t *testing.T) {
	h := HostInt32([]int{2, 2}, RowMajor, []int32{-1, 0, 7, 1 << 30})
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	if got := h.Int32s(); !reflect.DeepEqual(got, []int32{-1, 0, 7, 1 << 30}) {
		t.Errorf("got %v", got)
	}
	if got := h.Uint32s()[0]; got != 0xFFFFFFFF {
		t.Errorf("-1 is %#x", got)
	}
	b := HostBF16([]int{3}, RowMajor, []bf16.BF16{bf16.One, bf16.NegInf, 0})
	if got := b.BF16s(); !reflect.DeepEqual(got, []bf16.BF16{bf16.One, bf16.NegInf, 0}) {
		t.Errorf("got %v", got)
	}
	f := HostFP32([]int{1}, RowMajor, []float32{1.5})
	if f.Float32s()[0] != 1.5 {
		t.Error("fp32")
	}
	if err := (HostTensor{Shape: []int{3}, DType: INT32, Data: make([]byte, 8)}).Check(); err == nil {
		t.Error("short data accepted")
	}
}

func TestErrorMsg(t *testing.T) {
	err := fmt.Errorf("wrap: %w", &Error{Op: "copy_host_to_device_tensor", Msg: MsgHostShape})
	if !HasMsg(err, MsgHostShape) {
		t.Error("HasMsg misses wrapped error")
	}
	if HasMsg(errors.New(MsgHostShape), MsgHostShape) {
		t.Error("HasMsg matched a plain error")
	}
	e := Errorf("allocate", MsgOutOfMemory, 4096, DRAM, 12, 352, 1024, 704, 320, 256)
	if e.Msg != "Out of Memory: Not enough space to allocate 4096 B DRAM buffer across 12 banks, where each bank needs to store 352 B, but bank size is 1024 B (allocated: 704 B, free: 320 B, largest free block: 256 B)" {
		t.Errorf("got %q", e.Msg)
	}
	if !HasMsg(e, "Out of Memory: Not enough space") {
		t.Error("prefix")
	}
}

func TestWidthShardedSpec(t *testing.T) {
	ok := Spec{Shape: []int{1, 1, 8, 512}, DType: BF16, Layout: Tile, Memory: L1WidthSharded(16, [2]int{32, 32})}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := ok.Memory.String(); got != "L1_WIDTH_SHARDED(cores=16,shard=[32,32])" {
		t.Errorf("String %q", got)
	}
	for _, bad := range []Spec{
		{Shape: []int{1, 1, 8, 512}, DType: BF16, Layout: RowMajor, Memory: L1WidthSharded(16, [2]int{8, 32})},
		{Shape: []int{1, 1, 8, 512}, DType: BF16, Layout: Tile, Memory: L1WidthSharded(8, [2]int{32, 32})},
		{Shape: []int{1, 1, 8, 512}, DType: BF16, Layout: Tile, Memory: L1WidthSharded(16, [2]int{64, 32})},
		{Shape: []int{1, 1, 8, 512}, DType: BF16, Layout: Tile, Memory: MemoryConfig{Layout: WidthSharded, Buffer: DRAM, Shard: ShardSpec{NumCores: 16, Shape: [2]int{32, 32}}}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
}

// The ops whose ttnn entry point allocates its own output at TTMetalCommit
// are Allocating, with ttnn's default output specs; the others are not.
func TestAllocatingOps(t *testing.T) {
	in := Tensor{Spec: Spec{Shape: []int{1, 1, 5, 1024}, DType: BF16, Layout: Tile, Memory: DRAMInterleaved}}
	heads := NLPCreateQKVHeadsDecode{Input: in, NumHeads: 4, NumKVHeads: 2}.OutputSpecs()
	if len(heads) != 3 || heads[0].String() != "[1,5,4,128] BFLOAT16 TILE L1_HEIGHT_SHARDED(cores=5,shard=[32,128])" ||
		heads[2].String() != "[1,5,2,128] BFLOAT16 TILE L1_HEIGHT_SHARDED(cores=5,shard=[32,128])" {
		t.Errorf("head specs %v", heads)
	}
	if s := (RMSNorm{Input: in}).OutputSpecs(); len(s) != 1 || !s[0].Equal(in.Spec) {
		t.Errorf("rms_norm output %v", s)
	}
	if s := (PagedSDPADecode{Q: Tensor{Spec: heads[0]}}).OutputSpecs(); s[0].Memory != DRAMInterleaved || s[0].String()[:12] != "[1,5,4,128] " {
		t.Errorf("sdpa output %v", s)
	}
	pre := Tensor{Spec: Spec{Shape: []int{1, 1, 40, 8 * 64}, DType: BF16, Layout: Tile, Memory: DRAMInterleaved}}
	qkv := NLPCreateQKVHeads{Input: pre, NumHeads: 4, NumKVHeads: 2}.OutputSpecs()
	if len(qkv) != 3 || qkv[0].String() != "[1,4,40,64] BFLOAT16 TILE DRAM_INTERLEAVED" ||
		qkv[1].String() != "[1,2,40,64] BFLOAT16 TILE DRAM_INTERLEAVED" || qkv[2].String() != "[1,2,40,64] BFLOAT16 TILE DRAM_INTERLEAVED" {
		t.Errorf("nlp_create_qkv_heads specs %v", qkv)
	}
	if s := (NLPCreateQKVHeads{Input: pre, NumHeads: 4, NumKVHeads: 2, TransposeK: true, Memory: L1Interleaved}).OutputSpecs(); s[1].String() != "[1,2,64,40] BFLOAT16 TILE L1_INTERLEAVED" {
		t.Errorf("nlp_create_qkv_heads transposed K %v", s[1])
	}
	pre6 := Tensor{Spec: Spec{Shape: []int{1, 1, 40, 6 * 64}, DType: BF16, Layout: Tile, Memory: DRAMInterleaved}}
	if s := (NLPCreateQKVHeads{Input: pre6, NumHeads: 2}).OutputSpecs(); s[1].String() != "[1,2,40,64] BFLOAT16 TILE DRAM_INTERLEAVED" {
		t.Errorf("nlp_create_qkv_heads num_kv_heads default %v", s)
	}
	if s := (SDPA{Q: Tensor{Spec: qkv[0]}}).OutputSpecs(); len(s) != 1 || s[0].String() != "[1,4,40,64] BFLOAT16 TILE DRAM_INTERLEAVED" {
		t.Errorf("sdpa output %v", s)
	}
	if s := (NLPConcatHeads{Input: Tensor{Spec: qkv[0]}}).OutputSpecs(); len(s) != 1 || s[0].String() != "[1,1,40,256] BFLOAT16 TILE DRAM_INTERLEAVED" {
		t.Errorf("nlp_concat_heads output %v", s)
	}
	for _, op := range []Op{RMSNorm{}, NLPCreateQKVHeadsDecode{}, NLPCreateQKVHeads{}, RotaryEmbeddingHF{}, RotaryEmbeddingLlama{}, PagedSDPADecode{}, SDPA{}, NLPConcatHeads{}, ToMemoryConfig{}} {
		if _, ok := op.(Allocating); !ok || op.Outputs() != nil {
			t.Errorf("%s is not Allocating", op.Name())
		}
	}
	for _, op := range []Op{Embedding{}, Linear{}, ConcatHeads{}, Add{}, SiluMul{}, Argmax{}, PlusOne{}, PagedUpdateCache{}, PagedFusedUpdateCache{}, PagedFillCache{}} {
		if _, ok := op.(Allocating); ok {
			t.Errorf("%s takes the caller's output in ttnn, yet is Allocating", op.Name())
		}
	}
	if len(TTMetalCommit) != 40 || TTMetalCommit[:8] != "622c6fb9" {
		t.Errorf("pin %q", TTMetalCommit)
	}
}

// TestHeightWidthArePaddedShape: Height and Width read the padded shape
// without building it.
func TestHeightWidthArePaddedShape(t *testing.T) {
	for _, sh := range [][]int{{7}, {33}, {1, 7}, {5, 40}, {2, 3, 5, 70}, {1, 1, 32, 64}, {3, 1, 1}} {
		for _, l := range []Layout{Tile, RowMajor} {
			s := Spec{Shape: sh, DType: BF16, Layout: l}
			p := s.PaddedShape()
			h := 1
			for _, d := range p[:len(p)-1] {
				h *= d
			}
			if s.Height() != h || s.Width() != p[len(p)-1] {
				t.Errorf("%v %v: Height %d Width %d, padded shape %v", sh, l, s.Height(), s.Width(), p)
			}
		}
	}
}

// The append forms list what Inputs and OutputSpecs list, after what dst
// held, and output specs hold shapes no one else holds (Allocating's
// contract), whichever form made them.
func TestAppendForms(t *testing.T) {
	in := Tensor{ID: 1, Spec: Spec{Shape: []int{1, 1, 8, 1024}, DType: BF16, Layout: Tile, Memory: DRAMInterleaved}}
	w := Tensor{ID: 2, Spec: Spec{Shape: []int{1, 1, 32, 32}, DType: BF16, Layout: RowMajor, Memory: DRAMInterleaved}}
	q := Tensor{ID: 3, Spec: Spec{Shape: []int{1, 8, 4, 128}, DType: BF16, Layout: Tile, Memory: L1HeightSharded(8, [2]int{32, 128})}}
	for _, op := range []Allocating{
		RMSNorm{Input: in, Weight: w},
		ToMemoryConfig{Input: in, Memory: L1Interleaved},
		RotaryEmbeddingHF{Input: q, Cos: w, Sin: in},
		RotaryEmbeddingLlama{Input: q, Cos: w, Sin: in, TransMat: w},
		NLPCreateQKVHeadsDecode{Input: in, NumHeads: 4, NumKVHeads: 2},
		NLPCreateQKVHeads{Input: in, NumHeads: 4, NumKVHeads: 2},
		PagedSDPADecode{Q: q, K: in, V: in, PageTable: w, CurPos: w},
		SDPA{Q: q, K: q, V: q},
		NLPConcatHeads{Input: q},
	} {
		pre := Tensor{ID: 99}
		if got := op.AppendInputs([]Tensor{pre}); got[0].ID != pre.ID || !reflect.DeepEqual(got[1:], op.Inputs()) {
			t.Errorf("%s: AppendInputs %v, Inputs %v", op.Name(), got, op.Inputs())
		}
		preSpec := Spec{Shape: []int{7}}
		got := op.AppendOutputSpecs([]Spec{preSpec})
		if !reflect.DeepEqual(got[0], preSpec) || !reflect.DeepEqual(got[1:], op.OutputSpecs()) || len(got) < 2 {
			t.Errorf("%s: AppendOutputSpecs %v, OutputSpecs %v", op.Name(), got, op.OutputSpecs())
		}
		for _, specs := range [][]Spec{op.OutputSpecs(), got[1:]} {
			for _, s := range specs {
				for _, x := range op.Inputs() {
					if len(s.Shape) > 0 && len(x.Spec.Shape) > 0 && &s.Shape[0] == &x.Spec.Shape[0] {
						t.Errorf("%s: an output spec shares its shape with an input", op.Name())
					}
				}
			}
		}
	}
}

// Ptr makes every op of the package a pointer to an equal copy, and
// leaves a pointer as it is.
func TestPtr(t *testing.T) {
	x := Tensor{ID: 5, Spec: Spec{Shape: []int{1, 1, 32, 32}, DType: BF16, Layout: Tile}}
	for _, op := range []Op{
		Embedding{Input: x}, RMSNorm{Input: x, Epsilon: 1e-6}, Linear{Input: x, TransposeB: true},
		NLPCreateQKVHeadsDecode{Input: x, NumHeads: 4}, NLPCreateQKVHeads{Input: x, NumHeads: 4},
		RotaryEmbeddingHF{Input: x}, RotaryEmbeddingLlama{Input: x}, ToMemoryConfig{Input: x, Memory: L1Interleaved},
		PagedUpdateCache{Cache: x}, PagedFusedUpdateCache{Cache1: x}, PagedFillCache{Cache: x, BatchIdx: 2},
		PagedSDPADecode{Q: x, Scale: 0.5}, ConcatHeads{Input: x, NumHeads: 4}, SDPA{Q: x, Causal: true},
		NLPConcatHeads{Input: x}, Add{A: x}, SiluMul{Gate: x}, Argmax{Input: x}, PlusOne{Input: x},
	} {
		p := Ptr(op)
		v := reflect.ValueOf(p)
		if v.Kind() != reflect.Pointer || !reflect.DeepEqual(v.Elem().Interface(), op) {
			t.Errorf("%s: Ptr gives %#v", op.Name(), p)
			continue
		}
		if q := Ptr(p); q != p {
			t.Errorf("%s: Ptr of a pointer is another pointer", op.Name())
		}
	}
}

// Every tensor an op names is one of its operands: Inputs and Outputs
// together list each tensor field (set or pointed to) of every op, so a
// device checks every one is live and records every one in a trace's
// footprint.
func TestOperandsAreTheTensorFields(t *testing.T) {
	tensorT, ptrT := reflect.TypeOf(Tensor{}), reflect.TypeOf(&Tensor{})
	for _, zero := range []Op{
		Embedding{}, RMSNorm{}, Linear{}, NLPCreateQKVHeadsDecode{}, NLPCreateQKVHeads{},
		RotaryEmbeddingHF{}, RotaryEmbeddingLlama{}, ToMemoryConfig{}, PagedUpdateCache{},
		PagedFusedUpdateCache{}, PagedFillCache{}, PagedSDPADecode{}, ConcatHeads{}, SDPA{},
		NLPConcatHeads{}, Add{}, SiluMul{}, Argmax{}, PlusOne{},
	} {
		v := reflect.New(reflect.TypeOf(zero)).Elem()
		want := map[TensorID]string{}
		for i := 0; i < v.NumField(); i++ {
			f, id := v.Field(i), TensorID(100+i)
			switch f.Type() {
			case tensorT:
				f.Set(reflect.ValueOf(Tensor{ID: id}))
			case ptrT:
				f.Set(reflect.ValueOf(&Tensor{ID: id}))
			default:
				continue
			}
			want[id] = v.Type().Field(i).Name
		}
		op := v.Interface().(Op)
		got := map[TensorID]bool{}
		for _, x := range append(op.Inputs(), op.Outputs()...) {
			got[x.ID] = true
		}
		for id, name := range want {
			if !got[id] {
				t.Errorf("%s: tensor field %s is neither an input nor an output", op.Name(), name)
			}
		}
	}
}
