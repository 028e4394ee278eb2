package tt

// Op is one device operation: a plain struct naming its input tensors, the
// output tensors the caller passes, and its attributes. Where ttnn's entry
// point takes an output tensor, the contract requires the caller to pass one
// (Outputs lists it; in-place ops list the updated tensor). Where ttnn's entry
// point allocates its own output (rms_norm, nlp_create_qkv_heads_decode,
// nlp_create_qkv_heads, rotary_embedding_hf, rotary_embedding_llama, paged
// SDPA decode, scaled_dot_product_attention, nlp_concat_heads,
// to_memory_config), the op is an Allocating op: the device allocates the
// outputs at dispatch and Device.Run returns them.
type Op interface {
	// Name is ttnn's name for the op.
	Name() string
	// Inputs are the tensors the op reads.
	Inputs() []Tensor
	// Outputs are the caller's tensors the op writes (nil for an
	// Allocating op).
	Outputs() []Tensor
}

// Allocating is an op whose ttnn entry point allocates its outputs (at
// tt-metal 622c6fb9 none of these accepts a preallocated output, or, for
// nlp_create_qkv_heads_decode, it accepts one and ignores it). The device
// validates the op, then allocates one tensor per OutputSpecs entry through
// its allocator (DRAM bottom-up, L1 top-down, exactly as Device.Allocate),
// then runs it; during a trace capture it allocates too, and the recorded
// program writes those addresses on every replay. Device.Run returns the
// tensors in OutputSpecs order; the caller owns them and frees them with
// Device.Free (keeping them allocated for as long as a trace that wrote
// them lives).
type Allocating interface {
	Op
	// OutputSpecs are the specs of the tensors the device allocates, as
	// ttnn's compute_output_specs gives them for these inputs and
	// attributes. Only meaningful for an op that validates. Each call
	// returns shapes no one else holds (a device's outputs keep them).
	OutputSpecs() []Spec
	// AppendInputs and AppendOutputSpecs append Inputs' and OutputSpecs'
	// lists to dst, so a device lists them at every launch without
	// allocating the lists.
	AppendInputs(dst []Tensor) []Tensor
	AppendOutputSpecs(dst []Spec) []Spec
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
// Input: UINT32 or BFLOAT16 ROW_MAJOR ids, interleaved (ttnn refuses INT32:
// "Input must be UINT32 or BFLOAT16", ttnn/cpp/ttnn/operations/embedding/
// device/embedding_device_operation.cpp), logical shape [1,1,1,B]; Weight:
// BF16 ROW_MAJOR [vocab, hidden], interleaved; Output: BF16 [1,1,B,hidden]
// (caller-allocated; ttnn's optional_output_tensor). ttnn's layout argument
// is the Output's layout. A TILE Output is tilized (the fused kernel) only
// when B is a multiple of 32 and hidden is (embedding.cpp:46-58 at
// 622c6fb9): pad the ids to whole tiles; otherwise the row-major kernel
// writes row i as a stick at tile page i, as on the card.
type Embedding struct {
	Input, Weight, Output Tensor
}

// RMSNorm is ttnn.rms_norm over the last dim: out = x / sqrt(mean(x²) +
// Epsilon) * Weight. Input: BF16 TILE [..., n], interleaved or width-sharded
// (ttnn refuses HEIGHT_SHARDED input: "Height sharded inputs are not
// supported.", ttnn/cpp/ttnn/operations/normalization/layernorm/device/
// layernorm_device_operation.cpp); Weight: BF16 [n] laid out as ttnn expects
// ([1,1,n/32,32] ROW_MAJOR). Allocating: one output with the input's shape,
// dtype and layout, in Memory (zero value: the input's memory config, ttnn's
// default).
type RMSNorm struct {
	Input, Weight Tensor
	Epsilon       float32
	Memory        MemoryConfig
}

// Linear is ttnn.linear: Output = Input · Weight (+ Bias). Input [1,1,M,K];
// Weight [1,1,K,N] (TransposeB: [1,1,N,K]); Output [1,1,M,N]; all BF16 TILE
// (a batched Input or Weight is refused as outside the contract). ttnn
// checks a Bias's layout and width only where it fuses the bias into the
// matmul (one tile high, Input sharded or Input and Weight in DRAM
// interleaved); elsewhere it adds it after. With TransposeB, when ttnn picks the multi-core program config (a small
// output, or more output blocks than cores, not all operands in DRAM), the
// call allocates a transposed copy of Weight in Weight's memory config and
// frees it on return (ttnn/cpp/ttnn/operations/matmul/matmul.cpp:209-253):
// captured, its address is baked into the trace.
type Linear struct {
	Input, Weight Tensor
	Bias          *Tensor
	Output        Tensor
	TransposeB    bool
}

// NLPCreateQKVHeadsDecode is ttnn.experimental.nlp_create_qkv_heads_decode:
// splits the fused QKV row of each user, Input BF16 TILE
// [1,1,B,(NumHeads+2*NumKVHeads)*D] (interleaved), into Q [1,B,NumHeads,D],
// K and V [1,B,NumKVHeads,D]. Allocating: three outputs, BF16 TILE, L1
// HEIGHT_SHARDED one user per core (shard [heads rounded up to 32, D]) on the
// B cores starting at Memory.Shard.FirstCore of a grid Memory.Shard.GridWidth
// wide (Memory zero value: core 0 of the worker grid; the walk is
// nlp_create_qkv_heads_decode_device_operation.cpp:134-139's over the
// config's grid). ttnn's optional_output_tensors argument is ignored by the op at the pinned
// commit, so the contract has none.
type NLPCreateQKVHeadsDecode struct {
	Input                Tensor
	NumHeads, NumKVHeads int
	Memory               MemoryConfig
}

// NLPCreateQKVHeads is ttnn.experimental.nlp_create_qkv_heads (the prefill
// form, no separate KV input): splits the fused QKV rows, Input TILE
// [B,1,S,(NumHeads+2*NumKVHeads)*D] interleaved (S a multiple of 32), into
// Q [B,NumHeads,S,D], K and V [B,NumKVHeads,S,D]: row s of Q head h is
// columns h*D.. of input row s, K heads follow the Q heads, V heads the K
// heads. D = padded width / (NumHeads+2*NumKVHeads); NumKVHeads 0 means
// NumHeads (ttnn's default). TransposeK is
// transpose_k_heads (K [B,NumKVHeads,D,S]); tt_transformers passes false
// (Python's default is true). Allocating: three outputs in the
// input's dtype, TILE, in Memory (zero value: the input's config, ttnn's
// value_or). ttnn honours three preallocated outputs here
// (optional_output_tensors); the contract does not take them.
type NLPCreateQKVHeads struct {
	Input                Tensor
	NumHeads, NumKVHeads int
	TransposeK           bool
	Memory               MemoryConfig
}

// RotaryEmbeddingHF is ttnn.experimental.rotary_embedding_hf
// (ttnn/cpp/ttnn/operations/experimental/transformer/rotary_embedding_hf):
// Hugging Face's rotate_half form, pairs i and i+D/2:
// out = x*cos + rotate_half(x)*sin, no transformation matrix.
//
// Decode mode (Prefill false, is_decode_mode=true): Input BF16 TILE
// [1,B,heads,D] HEIGHT_SHARDED; Cos and Sin BF16 TILE [1,B,1,D] (user b's
// row gathered at its position), HEIGHT_SHARDED, same shape.
//
// Prefill mode (Prefill true, is_decode_mode=false): Input TILE
// [1,heads,S,D] (interleaved); Cos and Sin TILE [1,1,S',D] with S' >= S
// (interleaved or sharded); sequence row s of every head uses cos/sin row s
// (the caller slices the table for a start position).
//
// Allocating: one output with the input's spec (Memory zero value: the
// input's config).
type RotaryEmbeddingHF struct {
	Input, Cos, Sin Tensor
	// Prefill is !is_decode_mode. The field is named for the mode that is
	// not the zero value, so existing decode callers keep their meaning.
	Prefill bool
	Memory  MemoryConfig
}

// RotaryEmbeddingLlama is ttnn.experimental.rotary_embedding_llama in decode
// mode (ttnn/cpp/ttnn/operations/experimental/transformer/
// rotary_embedding_llama): Meta's interleaved-pair form,
// out = x*cos + (x·TransMat)*sin, where TransMat [1,1,32·k,32] BF16 TILE
// HEIGHT_SHARDED (shard [32,32]) acts on each 32-wide column tile of x.
// Each user's core reads the matrix at the buffer's address in its own L1
// (the matrix CB is bound to that address on every core), so shard one
// copy per user's core, as tt_transformers does; a matrix on one core
// rotates the other users with whatever their L1 holds there
// (strict: sim.TransMatOffCore)
// (tt_transformers' get_rot_transformation_mat: TransMat[2i][2i+1] = 1,
// TransMat[2i+1][2i] = -1, so (x0,x1) -> (-x1,x0)). Input, Cos, Sin as for
// RotaryEmbeddingHF but cos/sin rows in interleaved order (cos[2i] =
// cos[2i+1]). Allocating: one output with the input's spec.
type RotaryEmbeddingLlama struct {
	Input, Cos, Sin, TransMat Tensor
	Memory                    MemoryConfig
}

// ToMemoryConfig is ttnn.to_memory_config (ttnn/cpp/ttnn/operations/core/
// core.hpp): the same values in another memory config (interleaved <->
// sharded, L1 <-> DRAM). Allocating: one output, the input's spec with
// Memory. tt_transformers uses it around rms_norm on head tensors
// (attention.py norm_reshard). To the input's own memory config it returns
// the input tensor itself: no allocation, no program
// (ttnn/cpp/ttnn/operations/core/to_memory_config/to_memory_config_op.cpp:
// 257-261 at 622c6fb9); Device.Run then returns Input, which the caller
// must not free as an output.
type ToMemoryConfig struct {
	Input  Tensor
	Memory MemoryConfig
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
// BatchIdxTensor[0]) of PageTable; a -1 entry skips its block. BatchIdx is
// ttnn's batch_idx_fallback: it must name a row of PageTable even when
// BatchIdxTensor is given ("Batch idx must be within the page_table batch
// size", paged_fill_cache_device_operation.cpp).
type PagedFillCache struct {
	Cache, Input, PageTable Tensor
	BatchIdx                int
	BatchIdxTensor          *Tensor
}

// PagedSDPADecode is ttnn.transformer.paged_scaled_dot_product_attention_decode
// (§3), causal: user b attends positions 0..CurPos[b] inclusive through its
// page-table row; CurPos[b] == -1 skips the user (its output rows are not
// written). Q BF16 TILE [1,B,heads,D] (DRAM interleaved or HEIGHT_SHARDED);
// K, V caches [blocks, kv_heads, block_size, D]; PageTable INT32 ROW_MAJOR
// [B, W]; CurPos INT32 ROW_MAJOR [B]. Scale 0 means 1/sqrt(D); KChunkSize 0
// means dynamic (capped at 8 tiles, 4 with FP32DestAcc), otherwise a power
// of two and a multiple of 32. Allocating: one output, BF16 TILE
// [1,B,heads,D] in Memory (zero value: DRAM interleaved, ttnn's default).
type PagedSDPADecode struct {
	Q, K, V, PageTable, CurPos Tensor
	Scale                      float32
	KChunkSize                 int
	FP32DestAcc                bool
	Memory                     MemoryConfig
}

// SDPA is ttnn.transformer.scaled_dot_product_attention (ttnn/cpp/ttnn/
// operations/transformer/sdpa), non-paged, no mask, no sliding window, no
// attention sink: Q TILE [B,H,Sq,D], K and V TILE [B,K,Sk,D], all DRAM/L1
// interleaved, H a multiple of K (query head h reads kv head h/(H/K)).
// Causal (is_causal) needs Sq == Sk and row i attends key rows 0..i;
// otherwise every row attends all Sk rows. Scale 0 means ttnn's default,
// 1/sqrt(D). QChunkSize and KChunkSize are the SDPAProgramConfig's chunk
// sizes (both 0: no program config, ttnn's 32/32; otherwise multiples of
// 32); ExactExp sets the program config's exp_approx_mode to false
// (tt_transformers' prefill setting; ttnn's default is true; it needs the
// chunk sizes); FP32DestAcc is compute_kernel_config.fp32_dest_acc_en. None
// of the three changes the simulator's numerics (see package sim). Allocating: one
// output, Q's logical shape and dtype, TILE, in Memory (zero value: DRAM
// interleaved, ttnn's default).
type SDPA struct {
	Q, K, V                Tensor
	Causal                 bool
	Scale                  float32
	QChunkSize, KChunkSize int
	ExactExp               bool
	FP32DestAcc            bool
	Memory                 MemoryConfig
}

// NLPConcatHeads is ttnn.experimental.nlp_concat_heads (the prefill form;
// ConcatHeads is the decode op): Input TILE [B,heads,S,D] -> [B,1,S,heads*D],
// row s = head 0 row s ‖ ... ‖ head heads-1 row s. Allocating (ttnn takes no
// output tensor): one output in the input's dtype, TILE, in Memory (zero
// value: the input's config).
type NLPConcatHeads struct {
	Input  Tensor
	Memory MemoryConfig
}

// ConcatHeads is ttnn.experimental.nlp_concat_heads_decode: Input BF16 TILE
// [1,B,heads,D] HEIGHT_SHARDED one user per core -> Output [1,1,B,NumHeads*D].
// The caller's Output must be sharded (the program factory reads its shard
// spec); ttnn's default is L1 WIDTH_SHARDED over NumHeads cores, shard
// [32, D].
type ConcatHeads struct {
	Input, Output Tensor
	NumHeads      int
}

// Add is ttnn.add (same shapes and layouts, BF16). The Output is always
// passed, so two ROW_MAJOR operands are refused, as ttnn refuses them.
type Add struct {
	A, B, Output Tensor
}

// SiluMul is ttnn.mul(Gate, Up, input_tensor_a_activations=[SILU]):
// Output = silu(Gate) * Up; operands as Add's.
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
func (NLPCreateQKVHeads) Name() string       { return "nlp_create_qkv_heads" }
func (RotaryEmbeddingHF) Name() string       { return "rotary_embedding_hf" }
func (RotaryEmbeddingLlama) Name() string    { return "rotary_embedding_llama" }
func (ToMemoryConfig) Name() string          { return "to_memory_config" }
func (PagedUpdateCache) Name() string        { return "paged_update_cache" }
func (PagedFusedUpdateCache) Name() string   { return "paged_fused_update_cache" }
func (PagedFillCache) Name() string          { return "paged_fill_cache" }
func (PagedSDPADecode) Name() string         { return "paged_scaled_dot_product_attention_decode" }
func (ConcatHeads) Name() string             { return "nlp_concat_heads_decode" }
func (SDPA) Name() string                    { return "scaled_dot_product_attention" }
func (NLPConcatHeads) Name() string          { return "nlp_concat_heads" }
func (Add) Name() string                     { return "add" }
func (SiluMul) Name() string                 { return "mul" }
func (Argmax) Name() string                  { return "argmax" }
func (PlusOne) Name() string                 { return "plus_one" }

func (o Embedding) Inputs() []Tensor  { return []Tensor{o.Input, o.Weight} }
func (o Embedding) Outputs() []Tensor { return []Tensor{o.Output} }
func (o RMSNorm) Inputs() []Tensor    { return o.AppendInputs(nil) }
func (o RMSNorm) Outputs() []Tensor   { return nil }
func (o Linear) Inputs() []Tensor {
	return append([]Tensor{o.Input, o.Weight}, opt(o.Bias)...)
}
func (o Linear) Outputs() []Tensor                  { return []Tensor{o.Output} }
func (o NLPCreateQKVHeadsDecode) Inputs() []Tensor  { return o.AppendInputs(nil) }
func (o NLPCreateQKVHeadsDecode) Outputs() []Tensor { return nil }
func (o NLPCreateQKVHeads) Inputs() []Tensor        { return o.AppendInputs(nil) }
func (o NLPCreateQKVHeads) Outputs() []Tensor       { return nil }
func (o RotaryEmbeddingHF) Inputs() []Tensor        { return o.AppendInputs(nil) }
func (o RotaryEmbeddingHF) Outputs() []Tensor       { return nil }
func (o RotaryEmbeddingLlama) Inputs() []Tensor     { return o.AppendInputs(nil) }
func (o RotaryEmbeddingLlama) Outputs() []Tensor    { return nil }
func (o ToMemoryConfig) Inputs() []Tensor           { return o.AppendInputs(nil) }
func (o ToMemoryConfig) Outputs() []Tensor          { return nil }
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
func (o PagedSDPADecode) Inputs() []Tensor  { return o.AppendInputs(nil) }
func (o PagedSDPADecode) Outputs() []Tensor { return nil }
func (o SDPA) Inputs() []Tensor             { return o.AppendInputs(nil) }
func (o SDPA) Outputs() []Tensor            { return nil }
func (o NLPConcatHeads) Inputs() []Tensor   { return o.AppendInputs(nil) }
func (o NLPConcatHeads) Outputs() []Tensor  { return nil }
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

// AppendInputs appends the op's inputs, Inputs' list, to dst: the ops a
// decode step allocates through list them without allocating.
func (o RMSNorm) AppendInputs(dst []Tensor) []Tensor { return append(dst, o.Input, o.Weight) }

// AppendInputs appends Inputs' list to dst.
func (o NLPCreateQKVHeadsDecode) AppendInputs(dst []Tensor) []Tensor { return append(dst, o.Input) }

// AppendInputs appends Inputs' list to dst.
func (o RotaryEmbeddingHF) AppendInputs(dst []Tensor) []Tensor {
	return append(dst, o.Input, o.Cos, o.Sin)
}

// AppendInputs appends Inputs' list to dst.
func (o ToMemoryConfig) AppendInputs(dst []Tensor) []Tensor { return append(dst, o.Input) }

// AppendInputs appends Inputs' list to dst.
func (o PagedSDPADecode) AppendInputs(dst []Tensor) []Tensor {
	return append(dst, o.Q, o.K, o.V, o.PageTable, o.CurPos)
}

// withMemory is s in memory config m, or s unchanged when m is the zero value.
func withMemory(s Spec, m MemoryConfig) Spec {
	s.Shape = append([]int(nil), s.Shape...)
	if m != (MemoryConfig{}) {
		s.Memory = m
	}
	return s
}

func roundTile(x int) int { return roundUp(x, TileSize) }

// OutputSpecs: the input's spec in Memory (default the input's config).
func (o RMSNorm) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendOutputSpecs appends OutputSpecs' list to dst (the ops a decode
// step allocates through list them without allocating the list).
func (o RMSNorm) AppendOutputSpecs(dst []Spec) []Spec {
	return append(dst, withMemory(o.Input.Spec, o.Memory))
}

// OutputSpecs: Q, K, V, each [1,B,heads,D] BF16 TILE L1 HEIGHT_SHARDED on B
// cores from Memory.Shard.FirstCore (of a grid Memory.Shard.GridWidth wide),
// shard [heads rounded up to 32, D].
func (o NLPCreateQKVHeadsDecode) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o NLPCreateQKVHeadsDecode) AppendOutputSpecs(dst []Spec) []Spec {
	in := o.Input.Spec
	if len(in.Shape) != 4 || o.NumHeads <= 0 || o.NumKVHeads <= 0 {
		return dst
	}
	b := in.Shape[2]
	d := in.Shape[3] / (o.NumHeads + 2*o.NumKVHeads)
	mk := func(h int) Spec {
		m := L1HeightShardedAt(o.Memory.Shard.FirstCore, b, [2]int{roundTile(h), d})
		m.Shard.GridWidth = o.Memory.Shard.GridWidth
		return Spec{Shape: []int{1, b, h, d}, DType: in.DType, Layout: Tile, Memory: m}
	}
	return append(dst, mk(o.NumHeads), mk(o.NumKVHeads), mk(o.NumKVHeads))
}

// OutputSpecs: Q [B,NumHeads,S,D], K [B,NumKVHeads,S,D] ([B,NumKVHeads,D,S]
// with TransposeK), V [B,NumKVHeads,S,D], with B and S the input's logical
// dims 0 and 2 and D = padded width / (NumHeads+2*NumKVHeads) rounded up to
// 32; the input's dtype, TILE, in Memory (default the input's config)
// (nlp_create_qkv_heads_device_operation.cpp compute_output_specs).
func (o NLPCreateQKVHeads) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendInputs appends Inputs' list to dst.
func (o NLPCreateQKVHeads) AppendInputs(dst []Tensor) []Tensor { return append(dst, o.Input) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o NLPCreateQKVHeads) AppendOutputSpecs(dst []Spec) []Spec {
	in := o.Input.Spec
	if len(in.Shape) != 4 || o.NumHeads <= 0 || o.NumKVHeads < 0 {
		return dst
	}
	kv := o.KVHeads()
	d := roundTile(in.Width() / (o.NumHeads + 2*kv))
	b, s := in.Shape[0], in.Shape[2]
	m := o.Memory
	if m == (MemoryConfig{}) {
		m = in.Memory
	}
	mk := func(sh ...int) Spec { return Spec{Shape: sh, DType: in.DType, Layout: Tile, Memory: m} }
	k := mk(b, kv, s, d)
	if o.TransposeK {
		k = mk(b, kv, d, s)
	}
	return append(dst, mk(b, o.NumHeads, s, d), k, mk(b, kv, s, d))
}

// KVHeads is the number of K and V heads the op makes: NumKVHeads, or
// NumHeads when NumKVHeads is 0 (ttnn's num_kv_heads.value_or(num_q_heads)).
func (o NLPCreateQKVHeads) KVHeads() int {
	if o.NumKVHeads == 0 {
		return o.NumHeads
	}
	return o.NumKVHeads
}

// OutputSpecs: the input's spec in Memory (default the input's config).
func (o RotaryEmbeddingHF) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o RotaryEmbeddingHF) AppendOutputSpecs(dst []Spec) []Spec {
	return append(dst, withMemory(o.Input.Spec, o.Memory))
}

// OutputSpecs: the input's spec in Memory (default the input's config).
func (o RotaryEmbeddingLlama) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendInputs appends Inputs' list to dst.
func (o RotaryEmbeddingLlama) AppendInputs(dst []Tensor) []Tensor {
	return append(dst, o.Input, o.Cos, o.Sin, o.TransMat)
}

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o RotaryEmbeddingLlama) AppendOutputSpecs(dst []Spec) []Spec {
	return append(dst, withMemory(o.Input.Spec, o.Memory))
}

// OutputSpecs: the input's spec in Memory.
func (o ToMemoryConfig) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o ToMemoryConfig) AppendOutputSpecs(dst []Spec) []Spec {
	s := o.Input.Spec
	s.Shape = append([]int(nil), s.Shape...)
	s.Memory = o.Memory
	return append(dst, s)
}

// OutputSpecs: Q's shape, BF16 TILE, in Memory (default DRAM interleaved).
func (o PagedSDPADecode) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o PagedSDPADecode) AppendOutputSpecs(dst []Spec) []Spec {
	m := o.Memory
	if m == (MemoryConfig{}) {
		m = DRAMInterleaved
	}
	return append(dst, Spec{Shape: append([]int(nil), o.Q.Spec.Shape...), DType: BF16, Layout: Tile, Memory: m})
}

// OutputSpecs: Q's logical shape and dtype, TILE, in Memory (default DRAM
// interleaved) (sdpa_device_operation.cpp compute_output_specs).
func (o SDPA) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendInputs appends Inputs' list to dst.
func (o SDPA) AppendInputs(dst []Tensor) []Tensor { return append(dst, o.Q, o.K, o.V) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o SDPA) AppendOutputSpecs(dst []Spec) []Spec {
	m := o.Memory
	if m == (MemoryConfig{}) {
		m = DRAMInterleaved
	}
	return append(dst, Spec{Shape: append([]int(nil), o.Q.Spec.Shape...), DType: o.Q.Spec.DType, Layout: Tile, Memory: m})
}

// OutputSpecs: [B,1,S,heads*D] from the input's logical [B,heads,S,D], the
// input's dtype, TILE, in Memory (default the input's config)
// (nlp_concat_heads_device_operation.cpp compute_output_specs).
func (o NLPConcatHeads) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendInputs appends Inputs' list to dst.
func (o NLPConcatHeads) AppendInputs(dst []Tensor) []Tensor { return append(dst, o.Input) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o NLPConcatHeads) AppendOutputSpecs(dst []Spec) []Spec {
	in := o.Input.Spec
	if len(in.Shape) != 4 {
		return dst
	}
	m := o.Memory
	if m == (MemoryConfig{}) {
		m = in.Memory
	}
	sh := in.Shape
	return append(dst, Spec{Shape: []int{sh[0], 1, sh[2], sh[1] * sh[3]}, DType: in.DType, Layout: Tile, Memory: m})
}

var (
	_ Allocating = RMSNorm{}
	_ Allocating = NLPCreateQKVHeads{}
	_ Allocating = SDPA{}
	_ Allocating = NLPConcatHeads{}
	_ Allocating = NLPCreateQKVHeadsDecode{}
	_ Allocating = RotaryEmbeddingHF{}
	_ Allocating = RotaryEmbeddingLlama{}
	_ Allocating = ToMemoryConfig{}
	_ Allocating = PagedSDPADecode{}
	_ Allocating = ChunkedSDPA{}
	_ Allocating = Slice{}
)

// Ptr returns op as a pointer to one of this package's op structs: a
// pointer as it is, a struct as a pointer to a copy of it, any other op as
// it is. A device that switches on the pointer types takes either form
// through it, and a caller that passes a pointer (reusing one op value per
// type) has no op copied into a new interface value per call.
func Ptr(op Op) Op {
	switch o := op.(type) {
	case Embedding:
		return &o
	case RMSNorm:
		return &o
	case Linear:
		return &o
	case NLPCreateQKVHeadsDecode:
		return &o
	case RotaryEmbeddingHF:
		return &o
	case RotaryEmbeddingLlama:
		return &o
	case ToMemoryConfig:
		return &o
	case PagedUpdateCache:
		return &o
	case PagedFusedUpdateCache:
		return &o
	case PagedFillCache:
		return &o
	case PagedSDPADecode:
		return &o
	case ConcatHeads:
		return &o
	case NLPCreateQKVHeads:
		return &o
	case SDPA:
		return &o
	case NLPConcatHeads:
		return &o
	case Add:
		return &o
	case SiluMul:
		return &o
	case Argmax:
		return &o
	case PlusOne:
		return &o
	case ChunkedSDPA:
		return &o
	case FillCache:
		return &o
	case Slice:
		return &o
	}
	return op
}

// ChunkedSDPA is ttnn.transformer.chunked_scaled_dot_product_attention
// (ttnn/cpp/ttnn/operations/transformer/sdpa/sdpa.hpp at 622c6fb9): one
// chunk of a prompt's queries attends, causally, the keys and values of
// positions 0..ChunkStart+Sq-1 read from the paged caches through
// PageTable (tt_transformers' chunked prefill, models/tt_transformers/tt/
// attention.py forward_prefill with chunk_start_idx). Q BF16 TILE
// [1,H,Sq,D]; K, V the paged caches [blocks, kv_heads, block_size, D];
// PageTable INT32 ROW_MAJOR [1, W] (the sequence's blocks, in order).
// Query row i sits at position ChunkStart+i. ChunkStartTensor, when set,
// selects the flexible overload: an INT32 [1] device tensor read at run
// time (so a trace replays with a new start); ChunkStart is then unused.
// The legacy overload needs ChunkStart a multiple of QChunkSize. Scale 0
// means 1/sqrt(D); QChunkSize, KChunkSize, ExactExp and FP32DestAcc are
// the program and compute-kernel configs, as in SDPA. Allocating: one
// output, Q's logical shape and dtype, TILE, in Memory (zero value: DRAM
// interleaved).
type ChunkedSDPA struct {
	Q, K, V, PageTable     Tensor
	ChunkStart             int64
	ChunkStartTensor       *Tensor
	Scale                  float32
	QChunkSize, KChunkSize int
	ExactExp               bool
	FP32DestAcc            bool
	Memory                 MemoryConfig
}

// FillCache is ttnn.fill_cache (ttnn/cpp/ttnn/operations/kv_cache/
// kv_cache.hpp at 622c6fb9): Input [1, heads, S, D] written over rows
// UpdateIdx..UpdateIdx+S-1 of batch BatchIdx of Cache [B, heads, Smax, D].
// In place. On a paged cache [blocks, kv_heads, block_size, D] the batch
// index is a block: the second half of a block copy (Slice, then
// FillCache into the destination block).
type FillCache struct {
	Cache, Input Tensor
	BatchIdx     int
	UpdateIdx    int
}

// Slice is ttnn.slice with unit steps: the box Begin..End (exclusive) of
// Input, one entry per dim. The first half of a block copy: Begin
// [src,0,0,0], End [src+1, kv_heads, block_size, D] of a paged cache.
// Allocating: one output, the box's shape, Input's dtype and layout, in
// Memory (zero value: the input's config).
type Slice struct {
	Input      Tensor
	Begin, End []int
	Memory     MemoryConfig
}

func (ChunkedSDPA) Name() string { return "chunked_scaled_dot_product_attention" }
func (FillCache) Name() string   { return "fill_cache" }
func (Slice) Name() string       { return "slice" }

func (o ChunkedSDPA) Inputs() []Tensor  { return o.AppendInputs(nil) }
func (o ChunkedSDPA) Outputs() []Tensor { return nil }
func (o FillCache) Inputs() []Tensor    { return []Tensor{o.Cache, o.Input} }
func (o FillCache) Outputs() []Tensor   { return []Tensor{o.Cache} }
func (o Slice) Inputs() []Tensor        { return o.AppendInputs(nil) }
func (o Slice) Outputs() []Tensor       { return nil }

// AppendInputs appends Inputs' list to dst.
func (o ChunkedSDPA) AppendInputs(dst []Tensor) []Tensor {
	dst = append(dst, o.Q, o.K, o.V, o.PageTable)
	if o.ChunkStartTensor != nil {
		dst = append(dst, *o.ChunkStartTensor)
	}
	return dst
}

// OutputSpecs: Q's logical shape and dtype, TILE, in Memory.
func (o ChunkedSDPA) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o ChunkedSDPA) AppendOutputSpecs(dst []Spec) []Spec {
	m := o.Memory
	if m == (MemoryConfig{}) {
		m = DRAMInterleaved
	}
	return append(dst, Spec{Shape: append([]int(nil), o.Q.Spec.Shape...), DType: o.Q.Spec.DType, Layout: Tile, Memory: m})
}

// AppendInputs appends Inputs' list to dst.
func (o Slice) AppendInputs(dst []Tensor) []Tensor { return append(dst, o.Input) }

// OutputSpecs: the box's shape, Input's dtype and layout, in Memory.
func (o Slice) OutputSpecs() []Spec { return o.AppendOutputSpecs(nil) }

// AppendOutputSpecs appends OutputSpecs' list to dst.
func (o Slice) AppendOutputSpecs(dst []Spec) []Spec {
	s := withMemory(o.Input.Spec, o.Memory)
	if len(o.Begin) == len(s.Shape) && len(o.End) == len(s.Shape) {
		for i := range s.Shape {
			s.Shape[i] = o.End[i] - o.Begin[i]
		}
	}
	return append(dst, s)
}
