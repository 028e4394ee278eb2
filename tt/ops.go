package tt

// Op is one device operation: a plain struct naming its input tensors, its
// output tensors and its attributes. Outputs are allocated by the caller, so
// every address an op touches is one the engine chose. In-place ops list the
// updated tensor among their outputs.
type Op interface {
	// Name is ttnn's name for the op.
	Name() string
	// Inputs are the tensors the op reads.
	Inputs() []Tensor
	// Outputs are the tensors the op writes.
	Outputs() []Tensor
}

func opt(ts ...*Tensor) []Tensor {
	var out []Tensor
	for _, t := range ts {
		if t != nil {
			out = append(out, *t)
		}
	}
	return out
}

// Embedding is ttnn.embedding: Output[.., i, :] = Weight[Input[i], :].
// Input: UINT32 (or INT32) ROW_MAJOR ids, logical shape [1,1,1,B]; Weight:
// BF16 ROW_MAJOR [vocab, hidden]; Output: BF16 [1,1,B,hidden].
type Embedding struct {
	Input, Weight, Output Tensor
}

// RMSNorm is ttnn.rms_norm over the last dim: Output = x / sqrt(mean(x²) +
// Epsilon) * Weight. Input/Output: BF16 TILE [..., n]; Weight: BF16 [n] laid
// out as ttnn expects ([1,1,n/32,32] ROW_MAJOR).
type RMSNorm struct {
	Input, Weight, Output Tensor
	Epsilon               float32
}

// Linear is ttnn.linear: Output = Input · Weight (+ Bias). Input [1,1,M,K];
// Weight [1,1,K,N] (TransposeB: [1,1,N,K]); Output [1,1,M,N]; all BF16 TILE.
type Linear struct {
	Input, Weight Tensor
	Bias          *Tensor
	Output        Tensor
	TransposeB    bool
}

// NLPCreateQKVHeadsDecode is ttnn.experimental.nlp_create_qkv_heads_decode:
// splits the fused QKV row of each user, Input [1,1,B,(NumHeads+2*NumKVHeads)*D],
// into Q [1,B,NumHeads(padded to 32),D], K and V [1,B,NumKVHeads(padded),D],
// height-sharded one user per core.
type NLPCreateQKVHeadsDecode struct {
	Input                Tensor
	Q, K, V              Tensor
	NumHeads, NumKVHeads int
}

// RotaryEmbedding is ttnn.experimental.rotary_embedding_llama in decode mode.
// Cos and Sin are [1,B,1,D] rows already gathered at each user's position (an
// Embedding of the rope index tensor into the cos/sin tables); Input/Output
// are [1,B,heads,D]. Offcard's contract applies the rotation in Hugging
// Face's rotate_half form (pairs i and i+D/2), so no transformation matrix is
// passed.
type RotaryEmbedding struct {
	Input, Cos, Sin, Output Tensor
}

// PagedUpdateCache is ttnn.experimental.paged_update_cache (§1): for each user
// b with update index idx != -1 and every head h,
// Cache[PageTable[b][idx/bs], h, idx%bs, :] = Input[0, b, h, :]. In place.
// Exactly one of UpdateIdxs (INT32 ROW_MAJOR [B]) and UpdateIdxsList may be
// given. PageTable (INT32 ROW_MAJOR [B, W], DRAM interleaved) selects paged
// mode. FP32DestAcc is compute_kernel_config.fp32_dest_acc_en.
type PagedUpdateCache struct {
	Cache, Input   Tensor
	UpdateIdxs     *Tensor
	UpdateIdxsList []int32
	PageTable      *Tensor
	ShareCache     bool
	BatchOffset    int
	FP32DestAcc    bool
}

// PagedFusedUpdateCache is ttnn.experimental.paged_fused_update_cache (§1.5):
// the K and V updates of PagedUpdateCache in one program, Input1 into Cache1
// and Input2 into Cache2, same indices and page table.
type PagedFusedUpdateCache struct {
	Cache1, Input1 Tensor
	Cache2, Input2 Tensor
	UpdateIdxs     *Tensor
	UpdateIdxsList []int32
	PageTable      *Tensor
	ShareCache     bool
	BatchOffset    int
	FP32DestAcc    bool
}

// PagedFillCache is ttnn.experimental.paged_fill_cache (§1.6): writes a
// prompt's tiles, Input [1, heads, S, D], into Cache through row BatchIdx (or
// BatchIdxTensor[0]) of PageTable; a -1 entry skips its block.
type PagedFillCache struct {
	Cache, Input, PageTable Tensor
	BatchIdx                int
	BatchIdxTensor          *Tensor
}

// PagedSDPADecode is ttnn.transformer.paged_scaled_dot_product_attention_decode
// (§3), causal: user b attends positions 0..CurPos[b] inclusive through its
// page-table row; CurPos[b] == -1 skips the user (no output written).
// Q [1,B,heads,D]; K, V caches [blocks, kv_heads, block_size, D]; Output
// [1,B,heads,D]. Scale 0 means 1/sqrt(D); KChunkSize 0 means dynamic.
type PagedSDPADecode struct {
	Q, K, V, PageTable, CurPos Tensor
	Output                     Tensor
	Scale                      float32
	KChunkSize                 int
}

// ConcatHeads is ttnn.experimental.nlp_concat_heads_decode: Input
// [1,B,heads(padded),D] -> Output [1,1,B,NumHeads*D].
type ConcatHeads struct {
	Input, Output Tensor
	NumHeads      int
}

// Add is ttnn.add (same shapes, BF16).
type Add struct {
	A, B, Output Tensor
}

// SiluMul is ttnn.mul(Gate, Up, input_tensor_a_activations=[SILU]):
// Output = silu(Gate) * Up.
type SiluMul struct {
	Gate, Up, Output Tensor
}

// Argmax is ttnn.argmax over the last dim: Output[b] = first index of the
// largest value of row b of Input (UINT32 ROW_MAJOR [1,1,1,B] output; it may
// be the trace's own token input).
type Argmax struct {
	Input, Output Tensor
}

// PlusOne is ttnn.plus_one (§4): in place, +1 on every INT32/UINT32 element;
// with SkipNegativeEntries only values v with 0 <= v < INT32_MAX change.
type PlusOne struct {
	Input               Tensor
	SkipNegativeEntries bool
}

// Names are ttnn's.
func (Embedding) Name() string               { return "embedding" }
func (RMSNorm) Name() string                 { return "rms_norm" }
func (Linear) Name() string                  { return "linear" }
func (NLPCreateQKVHeadsDecode) Name() string { return "nlp_create_qkv_heads_decode" }
func (RotaryEmbedding) Name() string         { return "rotary_embedding_llama" }
func (PagedUpdateCache) Name() string        { return "paged_update_cache" }
func (PagedFusedUpdateCache) Name() string   { return "paged_fused_update_cache" }
func (PagedFillCache) Name() string          { return "paged_fill_cache" }
func (PagedSDPADecode) Name() string         { return "paged_scaled_dot_product_attention_decode" }
func (ConcatHeads) Name() string             { return "nlp_concat_heads_decode" }
func (Add) Name() string                     { return "add" }
func (SiluMul) Name() string                 { return "mul" }
func (Argmax) Name() string                  { return "argmax" }
func (PlusOne) Name() string                 { return "plus_one" }

func (o Embedding) Inputs() []Tensor  { return []Tensor{o.Input, o.Weight} }
func (o Embedding) Outputs() []Tensor { return []Tensor{o.Output} }
func (o RMSNorm) Inputs() []Tensor    { return []Tensor{o.Input, o.Weight} }
func (o RMSNorm) Outputs() []Tensor   { return []Tensor{o.Output} }
func (o Linear) Inputs() []Tensor {
	return append([]Tensor{o.Input, o.Weight}, opt(o.Bias)...)
}
func (o Linear) Outputs() []Tensor                  { return []Tensor{o.Output} }
func (o NLPCreateQKVHeadsDecode) Inputs() []Tensor  { return []Tensor{o.Input} }
func (o NLPCreateQKVHeadsDecode) Outputs() []Tensor { return []Tensor{o.Q, o.K, o.V} }
func (o RotaryEmbedding) Inputs() []Tensor          { return []Tensor{o.Input, o.Cos, o.Sin} }
func (o RotaryEmbedding) Outputs() []Tensor         { return []Tensor{o.Output} }
func (o PagedUpdateCache) Inputs() []Tensor {
	return append([]Tensor{o.Cache, o.Input}, opt(o.UpdateIdxs, o.PageTable)...)
}
func (o PagedUpdateCache) Outputs() []Tensor { return []Tensor{o.Cache} }
func (o PagedFusedUpdateCache) Inputs() []Tensor {
	return append([]Tensor{o.Cache1, o.Input1, o.Cache2, o.Input2}, opt(o.UpdateIdxs, o.PageTable)...)
}
func (o PagedFusedUpdateCache) Outputs() []Tensor { return []Tensor{o.Cache1, o.Cache2} }
func (o PagedFillCache) Inputs() []Tensor {
	return append([]Tensor{o.Cache, o.Input, o.PageTable}, opt(o.BatchIdxTensor)...)
}
func (o PagedFillCache) Outputs() []Tensor  { return []Tensor{o.Cache} }
func (o PagedSDPADecode) Inputs() []Tensor  { return []Tensor{o.Q, o.K, o.V, o.PageTable, o.CurPos} }
func (o PagedSDPADecode) Outputs() []Tensor { return []Tensor{o.Output} }
func (o ConcatHeads) Inputs() []Tensor      { return []Tensor{o.Input} }
func (o ConcatHeads) Outputs() []Tensor     { return []Tensor{o.Output} }
func (o Add) Inputs() []Tensor              { return []Tensor{o.A, o.B} }
func (o Add) Outputs() []Tensor             { return []Tensor{o.Output} }
func (o SiluMul) Inputs() []Tensor          { return []Tensor{o.Gate, o.Up} }
func (o SiluMul) Outputs() []Tensor         { return []Tensor{o.Output} }
func (o Argmax) Inputs() []Tensor           { return []Tensor{o.Input} }
func (o Argmax) Outputs() []Tensor          { return []Tensor{o.Output} }
func (o PlusOne) Inputs() []Tensor          { return []Tensor{o.Input} }
func (o PlusOne) Outputs() []Tensor         { return []Tensor{o.Input} }
