package qwen3

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/tt"
)

// EngineMode selects how an Engine runs decode steps.
type EngineMode uint8

// Engine modes. The zero EngineMode is ModeEager.
const (
	// ModeEager runs every op of every step from the host (no trace).
	ModeEager EngineMode = iota
	// ModeCaptured captures the decode graph into a trace once warm and
	// replays it afterwards (tt_transformers' traced decode, §8.2). When
	// the device refuses a capture because its trace region cannot hold
	// the trace, the engine runs that step and every later one eagerly.
	ModeCaptured
)

// PrefillMode is how Engine.Prefill runs a prompt.
type PrefillMode uint8

// Prefill modes. The zero PrefillMode is PrefillProgram.
const (
	// PrefillProgram runs the whole prompt as one multi-token program
	// (tt_transformers' prefill: paged_fill_cache and causal SDPA).
	PrefillProgram PrefillMode = iota
	// PrefillDecode runs the prompt one token at a time as eager decode
	// steps (the decode graph, paged_update_cache and paged SDPA decode at
	// every prompt position).
	PrefillDecode
)

// String prints "program" or "decode"; ParsePrefillMode reads it back.
func (m PrefillMode) String() string {
	switch m {
	case PrefillProgram:
		return "program"
	case PrefillDecode:
		return "decode"
	}
	return fmt.Sprintf("PrefillMode(%d)", uint8(m))
}

// ParsePrefillMode reads "program" or "decode".
func ParsePrefillMode(s string) (PrefillMode, error) {
	switch s {
	case "program":
		return PrefillProgram, nil
	case "decode":
		return PrefillDecode, nil
	}
	return 0, fmt.Errorf("prefill mode %q: want program or decode", s)
}

// String prints "eager" or "captured"; ParseEngineMode reads it back.
func (m EngineMode) String() string {
	switch m {
	case ModeEager:
		return "eager"
	case ModeCaptured:
		return "captured"
	}
	return fmt.Sprintf("EngineMode(%d)", uint8(m))
}

// ParseEngineMode reads "eager" or "captured".
func ParseEngineMode(s string) (EngineMode, error) {
	switch s {
	case "eager":
		return ModeEager, nil
	case "captured":
		return ModeCaptured, nil
	}
	return 0, fmt.Errorf("engine mode %q: want eager or captured", s)
}

// Regime is what one engine step did on the device. It is decided from the
// engine's own state (its trace, the widths it has compiled, the active
// slots), never from a process-wide counter.
type Regime uint8

// Regimes.
const (
	// RegimeCold is an eager step that compiles programs: the first step at
	// a page-table width (the only tensor spec that varies) since the
	// engine started or was Reset.
	RegimeCold Regime = iota
	// RegimeWarm is an eager step whose programs are all compiled.
	RegimeWarm
	// RegimeCapture re-seeds the inputs, records the decode graph into a
	// new trace and executes it once.
	RegimeCapture
	// RegimeReplay executes the live trace; positions advance by the
	// plus_one recorded in it.
	RegimeReplay
	numRegimes
)

// NumRegimes is the number of regimes (for arrays indexed by Regime).
const NumRegimes = int(numRegimes)

// String is the regime's lower-case name.
func (r Regime) String() string {
	switch r {
	case RegimeCold:
		return "cold"
	case RegimeWarm:
		return "warm"
	case RegimeCapture:
		return "capture"
	case RegimeReplay:
		return "replay"
	}
	return fmt.Sprintf("Regime(%d)", uint8(r))
}

// EngineOptions configure an Engine. Zero fields take defaults.
type EngineOptions struct {
	// Capacity is the number of slots C: the batch dimension of every
	// device tensor (default 1). A sequence holds one slot from its first
	// Prefill or Decode until Finish. Decode shards the users one per
	// core from core (0,0) for nlp_concat_heads_decode, which the card
	// accepts only as one rectangle: a multiple of 8 users is a rectangle
	// 8 wide on both archs (tt_transformers' num_to_corerange); any other
	// count walks the device's grid, one rectangle up to a row of it
	// (Wormhole 8, Blackhole 13). Other capacities fail the first decode
	// step with ttnn's text, on sim as on the card.
	Capacity int
	// BlockSize is the number of positions per KV block (default 32; a
	// multiple of 32).
	BlockSize int
	// NumBlocks is the number of KV blocks of the device cache (default 64).
	// Block ids in tables must lie in [0, NumBlocks).
	NumBlocks int
	// Width is the page-table width policy (zero value: dynamic). A fixed
	// width must not exceed NumBlocks (paged_update_cache refuses a page
	// table wider than the cache has blocks, §1.1).
	Width kvpage.WidthPolicy
	// Mode is eager (default) or captured.
	Mode EngineMode
	// Prefill is how prompts run: one multi-token program (default) or
	// token by token through the decode graph.
	Prefill PrefillMode
	// RecaptureEvery > 0 makes a captured engine release its trace and
	// capture a new one after that many steps on one trace (the capture
	// step included): 1 captures every step.
	RecaptureEvery int
	// Verify reads the device's cur_pos, rope index, token and page-table
	// tensors back after every step and fails the step when they differ
	// from what the engine believes (reads counted apart, in
	// EngineStats.VerifyReads).
	Verify bool
}

// Engine defaults.
const (
	DefaultEngineBlockSize = 32
	DefaultEngineNumBlocks = 64
)

// Engine is the paged decode driver: Qwen3 as tt_transformers runs it
// (§8), written only against tt.Device, so one engine runs on the simulator
// and on the card. It implements Decoder.
//
// Slots and inactive users. Every device tensor has a batch dimension of
// Capacity slots. A step's active slots carry their token's position in
// cur_pos; every other slot carries -1, which paged_update_cache and paged
// SDPA decode skip and plus_one (skip_negative_entries) leaves at -1.
//
// Positions. cur_pos ([C] INT32) and the rope index ([1,1,1,C] INT32,
// max(pos,0)) are device tensors. During a step, device cur_pos of an
// active slot equals the Pos of the token being decoded (the position its
// KV is written at and the last position it attends to, inclusive, §8.3).
// Every step ends with plus_one on both (cur_pos with
// skip_negative_entries), so afterwards they hold Pos+1. Every non-replay
// step (cold, warm, capture) re-seeds both from the host, unconditionally;
// a replay relies on the plus_one of the previous step and writes them
// only when the host's record of the device differs from the step's
// positions (a caller that did not advance by one).
//
// Page table. A [C, W] INT32 ROW_MAJOR DRAM tensor: row s holds the block
// ids slot s needs for its current position (Blocks[:Pos/BlockSize+1]),
// then the pad value 0 (see PagePad). W follows the width policy over the
// active slots' block counts. Any change of W allocates a new tensor; the
// old one is retired (kept allocated) while a trace still addresses it and
// freed once that trace is released. Contents are written only when they
// differ from what the engine last wrote: inside a block, nothing.
//
// Traces (ModeCaptured). The engine captures once a step's programs are
// all compiled (an eager step at the current width ran), and replays after.
// It releases the trace and captures again when the page-table tensor
// changes (a width change), when the set of active slots changes, and every
// RecaptureEvery steps when asked. Reset releases the trace and forgets the
// compiled widths and the host's record of the device, so the next step is
// cold and re-seeds everything. Every persistent tensor (weights, caches,
// inputs, caller-allocated activations) is allocated at NewEngine; besides
// the ops' own outputs (below) and a prefill program's tensors (allocated
// and freed inside Prefill, while every tensor a live trace touches stays
// allocated), the only allocation afterwards is a page table on a width
// change, and it happens while the live trace still holds (retires) the
// table it addresses, so it can never land on anything a trace touches.
//
// Device-allocated outputs. rms_norm, the head split, rotary,
// to_memory_config and paged SDPA decode allocate their outputs (tt.Allocating);
// the engine frees a layer's at the end of the layer, in eager steps and
// during a capture alike (tt_transformers' ttnn.deallocate inside its
// trace: models/tt_transformers/tt/decoder.py, attention.py, mlp.py), so
// every layer's outputs take the same addresses and a capture holds one
// layer's L1, not one per layer (the 0.6B shape's 28 would not fit). The
// trace replays through those addresses in capture order; nothing else is
// allocated in L1 while it lives, and the page tables allocated then are
// freed or retired before it executes again. The pass's own outputs
// (the resharded cos/sin, the final rms_norm) are freed after an eager
// step and kept for a capture's trace (freed after Release).
//
// Sampling. Argmax on device writes each slot's next token into the
// token input tensor the next step (or replay) reads. A step whose tokens
// equal what the device holds (greedy decoding) writes no token; any other
// token (teacher forcing, a prompt) is written and counted.
//
// Prefill. With PrefillProgram (the default) the whole prompt runs as one
// multi-token program: embedding, per layer the prefill ops
// (nlp_create_qkv_heads, rotary_embedding_hf prefill, paged_fill_cache of K
// and V through the slot's page-table row, causal SDPA, nlp_concat_heads),
// lm_head over all T rows and argmax (see Engine.prefill). Row i of causal
// SDPA is ref.Attend over rows 0..i and every other op is row-wise, so each
// position's logits are bit-identical to ref's token-by-token prefill. It
// compiles no decode program; it leaves the decode inputs as a decode step
// at position T-1 would (cur_pos T, the next token), writing only what
// differs from the host's mirror. With PrefillDecode the prompt runs one
// token at a time as eager decode steps with only the prefilled slot
// active (the decode graph at every prompt position, paged_fill_cache not
// used), also bit-identical to ref.
type Engine struct {
	// longestFloor is a floor on the block count the width policy sees
	// (Verify: every round at the width of the batch's longest entry).
	longestFloor int
	dev          tt.Device
	cfg          Config
	opt          EngineOptions
	eps          float32

	ropeLen int // rows of the cos/sin tables

	w      engWeights
	a      engActs
	tensor []tt.Tensor // every tensor allocated at NewEngine, freed by Close

	// slots
	slotSeq  []SeqID
	slotLive []bool
	seqSlot  map[SeqID]int

	// page table
	pt      *tt.Tensor // current page table, nil before the first step
	ptW     int
	ptHost  []int32 // what the device's current table holds; nil = unknown
	retired []retiredPT

	// trace
	trace     *engTrace
	capturing bool         // forward is recording a capture
	captured  []tt.Tensor  // outputs allocated during the capture so far
	fwdTmp    []tt.Tensor  // the decode pass's list of its outputs, kept for the next pass
	ops       opSlots      // the ops the passes run, one per type (reuse)
	warm      map[int]bool // page-table widths whose programs have run eagerly
	// noRegion: the device refused a capture (its trace region is smaller
	// than the decode graph's trace), so every later step runs eager.
	noRegion bool

	prefillWarm map[prefillKey]bool // prefill programs compiled since NewEngine or Reset

	// the host's record of the device inputs (valid when mirror is true)
	mirror  bool
	devPos  []int32
	devRope []int32
	devTok  []uint32

	stats  EngineStats
	last   StepStats
	closed bool
}

var _ Decoder = (*Engine)(nil)

// PagePad is the value in every page-table column a slot does not use (the
// columns past its current block, and every column of an inactive slot).
//
// Why 0 and not -1: paged SDPA decode reads the page-table entries of every
// K chunk up to round_up(cur_pos+1, k_chunk) (§3.2) and treats no entry as
// special, so a -1 there becomes a huge block id, i.e. a garbage DRAM
// address (tt-metal PR #45079: -1 entries hung the NOC); paged_update_cache
// does not skip -1 entries either (§1.3). A 0 entry is always a real block
// of the cache, which the engine zero-fills at start, so any masked read
// through it is a finite, harmless value. The engine also passes
// KChunkSize = BlockSize to SDPA, so chunk rounding never reads a column
// past the one holding cur_pos, and never writes through a pad entry
// (inactive slots have cur_pos -1 and are skipped). The vLLM TT runner pads
// with 0 as well (§8.4).
const PagePad int32 = 0

// StepStats is what one step did.
type StepStats struct {
	Regime Regime
	// HostWrites and HostReads are the host<->device copies of the step
	// (Verify's reads not included).
	HostWrites, HostReads int
	// TokenWrite: the step wrote the token input (a token differing from
	// the device's own argmax). PosWrite: it wrote cur_pos and the rope
	// index. PageTableWrite: it wrote the page table.
	TokenWrite, PosWrite, PageTableWrite bool
	// Width is the page-table width the step ran with.
	Width int
}

// EngineStats are the engine's counters since NewEngine.
type EngineStats struct {
	// Steps counts device steps (a prefill program is one step; with
	// PrefillDecode, each prompt position is one).
	Steps int
	// PrefillSteps counts the steps run by Prefill; PrefillTokens the
	// prompt tokens they ran.
	PrefillSteps, PrefillTokens int
	// StepsByRegime and HostWritesByRegime / HostReadsByRegime break the
	// steps and their host copies down by regime.
	StepsByRegime      [NumRegimes]int
	HostWritesByRegime [NumRegimes]int
	HostReadsByRegime  [NumRegimes]int
	// HostWrites and HostReads are the totals over steps; InitWrites are
	// the writes of NewEngine (weights, tables, zero fills).
	HostWrites, HostReads, InitWrites int
	// VerifyReads are the reads of EngineOptions.Verify.
	VerifyReads int
	// TokenWrites counts token-input writes (teacher forcing, prompts);
	// PosWrites counts cur_pos/rope re-seeds (each writes two tensors);
	// PageTableWrites counts page-table content writes.
	TokenWrites, PosWrites, PageTableWrites int
	// Captures, Replays (trace executions that were replay steps; a capture
	// step's own execution is not counted), Releases of traces, Resets.
	Captures, Replays, Releases, Resets int
	// PageTableReallocs counts page-table tensor allocations after the
	// first (width changes). Retired counts superseded tables kept alive
	// for a live trace; RetiredFreed those freed once the trace was
	// released; RetiredLive is how many are held now.
	PageTableReallocs, Retired, RetiredFreed, RetiredLive int
}

type retiredPT struct {
	t     tt.Tensor
	trace tt.TraceID
}

type engTrace struct {
	id     tt.TraceID
	pt     tt.TensorID
	width  int
	active []bool
	steps  int         // steps run on this trace, the capture step included
	owned  []tt.Tensor // outputs the device allocated during capture; the trace writes them
}

type engLayer struct {
	inNorm, postNorm, qNorm, kNorm tt.Tensor
	qkv, o, gate, up, down         tt.Tensor
	kc, vc                         tt.Tensor
}

type engWeights struct {
	embed, lmHead, norm tt.Tensor
	cos, sin            tt.Tensor
	layers              []engLayer
}

// engActs are the persistent inputs and the caller-allocated activations of
// the graph (the outputs of ops that take an output tensor). The outputs of
// the ops that allocate their own (rms_norm, the head split, rotary,
// to_memory_config, paged SDPA decode) are the device's, returned by Run.
type engActs struct {
	tok, curPos, ropeIdx tt.Tensor
	cos, sin             tt.Tensor
	x, h                 tt.Tensor
	qkv                  tt.Tensor
	cat, o               tt.Tensor
	gate, up, gu, down   tt.Tensor
	logits               tt.Tensor
}

// NewEngine uploads w to dev and allocates every persistent tensor. The
// engine does not own dev; Close frees what the engine allocated.
func NewEngine(dev tt.Device, w *Weights, opt EngineOptions) (*Engine, error) {
	if dev == nil {
		return nil, errors.New("qwen3: engine: nil device")
	}
	if w == nil {
		return nil, errors.New("qwen3: engine: nil weights")
	}
	if opt.Capacity < 0 || opt.BlockSize < 0 || opt.NumBlocks < 0 || opt.RecaptureEvery < 0 {
		return nil, fmt.Errorf("qwen3: engine: negative option in %+v", opt)
	}
	if opt.Capacity == 0 {
		opt.Capacity = 1
	}
	if opt.BlockSize == 0 {
		opt.BlockSize = DefaultEngineBlockSize
	}
	if opt.NumBlocks == 0 {
		opt.NumBlocks = DefaultEngineNumBlocks
	}
	if opt.BlockSize%tt.TileSize != 0 {
		return nil, fmt.Errorf("qwen3: engine: block size %d is not a multiple of %d", opt.BlockSize, tt.TileSize)
	}
	if opt.Mode != ModeEager && opt.Mode != ModeCaptured {
		return nil, fmt.Errorf("qwen3: engine: bad mode %v", opt.Mode)
	}
	if opt.Prefill != PrefillProgram && opt.Prefill != PrefillDecode {
		return nil, fmt.Errorf("qwen3: engine: bad prefill mode %v", opt.Prefill)
	}
	if fw, ok := opt.Width.FixedWidth(); ok && fw > opt.NumBlocks {
		return nil, fmt.Errorf("qwen3: engine: fixed page-table width %d exceeds the %d cache blocks (paged_update_cache: max_num_blocks_per_seq must be less than max_num_blocks)", fw, opt.NumBlocks)
	}
	cfg := w.Config
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("qwen3: engine: %w", err)
	}
	if err := checkEngineWeights(w); err != nil {
		return nil, err
	}
	e := &Engine{
		dev: dev, cfg: cfg, opt: opt, eps: float32(cfg.RMSNormEps),
		seqSlot: map[SeqID]int{},
		warm:    map[int]bool{},

		prefillWarm: map[prefillKey]bool{},
	}
	C := opt.Capacity
	e.slotSeq = make([]SeqID, C)
	e.slotLive = make([]bool, C)
	e.devPos = make([]int32, C)
	e.devRope = make([]int32, C)
	e.devTok = make([]uint32, C)
	e.ropeLen = opt.NumBlocks * opt.BlockSize
	if cfg.MaxPositionEmbeddings > 0 {
		e.ropeLen = min(e.ropeLen, cfg.MaxPositionEmbeddings)
	}
	if err := e.upload(w); err != nil {
		e.freeAll()
		return nil, err
	}
	if err := e.allocActs(); err != nil {
		e.freeAll()
		return nil, err
	}
	return e, nil
}

func checkEngineWeights(w *Weights) error {
	c := w.Config
	h, q, kv, in, v := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.VocabSize
	var errs []error
	chk := func(name string, got, want int) {
		if got != want {
			errs = append(errs, fmt.Errorf("qwen3: engine: weight %s has %d values, want %d", name, got, want))
		}
	}
	chk("embed", len(w.Embed), v*h)
	chk("lm_head", len(w.LMHead), v*h)
	chk("norm", len(w.Norm), h)
	if len(w.Layers) != c.NumHiddenLayers {
		errs = append(errs, fmt.Errorf("qwen3: engine: %d layers, config says %d", len(w.Layers), c.NumHiddenLayers))
	}
	for i, L := range w.Layers {
		p := fmt.Sprintf("layers.%d.", i)
		chk(p+"input_layernorm", len(L.InputNorm), h)
		chk(p+"q_proj", len(L.Q), q*h)
		chk(p+"k_proj", len(L.K), kv*h)
		chk(p+"v_proj", len(L.V), kv*h)
		chk(p+"o_proj", len(L.O), h*q)
		chk(p+"q_norm", len(L.QNorm), c.HeadDim)
		chk(p+"k_norm", len(L.KNorm), c.HeadDim)
		chk(p+"post_attention_layernorm", len(L.PostNorm), h)
		chk(p+"gate_proj", len(L.Gate), in*h)
		chk(p+"up_proj", len(L.Up), in*h)
		chk(p+"down_proj", len(L.Down), h*in)
	}
	return errors.Join(errs...)
}

// alloc allocates and remembers a tensor for Close.
func (e *Engine) alloc(spec tt.Spec) (tt.Tensor, error) {
	t, err := e.dev.Allocate(spec)
	if err != nil {
		return tt.Tensor{}, fmt.Errorf("qwen3: engine: allocate %v: %w", spec, err)
	}
	e.tensor = append(e.tensor, t)
	return t, nil
}

// put allocates a tensor and writes host data into it (an init write).
func (e *Engine) put(spec tt.Spec, h tt.HostTensor) (tt.Tensor, error) {
	t, err := e.alloc(spec)
	if err != nil {
		return t, err
	}
	if err := e.dev.WriteHost(t, h); err != nil {
		return t, fmt.Errorf("qwen3: engine: write %v: %w", spec, err)
	}
	e.stats.InitWrites++
	return t, nil
}

func dramTile(shape ...int) tt.Spec {
	return tt.Spec{Shape: shape, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
}

func dramRM(dt tt.DType, shape ...int) tt.Spec {
	return tt.Spec{Shape: shape, DType: dt, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}
}

// userRows is a [1, C, 1, D] BF16 TILE tensor in DRAM: one row per user,
// each in its own tile row (the cos/sin rows gathered at the rope index).
// tileUp is n rounded up to a multiple of 32 (tt.TileSize).
func tileUp(n int) int { return (n + tt.TileSize - 1) / tt.TileSize * tt.TileSize }

// The embedding ids are padded to whole tiles so that ttnn.embedding with
// layout TILE takes its fused (tilizing) kernel
// (ttnn/cpp/ttnn/operations/embedding/embedding.cpp:46-58 at 622c6fb9):
// with fewer ids the row-major kernel would write row sticks into the
// tiles. tt_transformers pads its tokens the same way (models/
// tt_transformers/tt/model.py prepare_inputs_decode: "Necessary padding
// to be full tile sized when on device") and embeds with
// layout=ttnn.TILE_LAYOUT (models/tt_transformers/tt/embedding.py).
//
// The token tensor is [1,1,1,tileUp(C)]: id s is slot s's token (argmax
// writes the first C), the rest 0. The rope index is [1,1,1,32*C]: slot
// s's position fills ids 32s..32s+31, so the fused kernel's tile row s is
// user s's cos/sin row followed by 31 copies, which is the physical
// layout of the [1,C,1,D] TILE tensor rotary_embedding_hf reads (row 0
// of tile row s); plus_one keeps every copy in step, so the padding ids
// stay in the table as the slot's own does.
func ropeIDs(rope []int32) []uint32 {
	out := make([]uint32, len(rope)*tt.TileSize)
	for s, r := range rope {
		for k := range tt.TileSize {
			out[s*tt.TileSize+k] = uint32(r)
		}
	}
	return out
}

func userRows(C, d int) tt.Spec {
	return tt.Spec{Shape: []int{1, C, 1, d}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
}

// userSharded is the height-sharded L1 config of a [1, C, n, D] TILE tensor,
// one user per core (shard [n rounded up to 32, D]): what
// nlp_create_qkv_heads_decode produces and rotary_embedding_hf and
// paged_update_cache want (§1.1). A multiple of usersGridWidth users past
// the first is a rectangle usersGridWidth wide; other counts walk the
// device's grid.
func userSharded(C, n, d int) tt.MemoryConfig {
	rows := (n + tt.TileSize - 1) / tt.TileSize * tt.TileSize
	m := tt.L1HeightSharded(C, [2]int{rows, d})
	if C > usersGridWidth && C%usersGridWidth == 0 {
		m.Shard.GridWidth = usersGridWidth
	}
	return m
}

// usersGridWidth is the width of the users' grid: tt_transformers shards
// its decode users over an 8-wide rectangle from core (0,0) on any arch
// (num_to_corerange, models/tt_transformers/tt/model_config.py:4544-4597,
// for the SDPA output that nlp_concat_heads_decode takes, :1806-1811; the
// 8x4 create-heads grid on Blackhole, :1769-1777), so that 16 or 32 users
// are the one range nlp_concat_heads_decode accepts; Blackhole's own
// 13-wide walk would make 16 users a row and 3 cores, which it refuses.
// Other counts keep the device's walk: up to a row of it is one range (12
// users on Blackhole), where the 8-wide one would be a row and 4 cores.
const usersGridWidth = 8

// zerosFor is a host tensor of zeros for spec. Its bytes are shared by
// every engine of the process and must only be read (WriteHost only
// reads its source): an engine zero-fills megabytes of KV cache.
func zerosFor(spec tt.Spec) tt.HostTensor {
	n := spec.Volume() * spec.DType.Size()
	zeros.Lock()
	defer zeros.Unlock()
	if len(zeros.b) < n {
		zeros.b = make([]byte, n)
	}
	return tt.HostTensor{Shape: append([]int(nil), spec.Shape...), DType: spec.DType, Layout: spec.Layout,
		Data: zeros.b[:n:n]}
}

// zeros holds the bytes zerosFor hands out (grown, never written).
var zeros struct {
	sync.Mutex
	b []byte
}

// normWeight is an RMSNorm weight as tt.RMSNorm documents it: [1,1,n/32,32]
// ROW_MAJOR holding the n values in order.
func (e *Engine) normWeight(v []bf16.BF16) (tt.Tensor, error) {
	n := len(v)
	shape := []int{1, 1, n / tt.TileSize, tt.TileSize}
	return e.put(dramRM(tt.BF16, shape...), hostBF16(shape, tt.RowMajor, bf16.View(v)))
}

// linearWeight uploads an HF [out, in] matrix as the [1,1,N,K] TILE weight of
// a TransposeB linear: row o of the device tensor is output o's row.
func (e *Engine) linearWeight(rows, cols int, b []byte) (tt.Tensor, error) {
	shape := []int{1, 1, rows, cols}
	return e.put(dramTile(shape...), hostBF16(shape, tt.Tile, b))
}

// hostBF16 is a BF16 host tensor of little-endian bytes b, which may be the
// weights' own memory (bf16.View): a device's WriteHost only reads it.
func hostBF16(shape []int, layout tt.Layout, b []byte) tt.HostTensor {
	return tt.HostTensor{Shape: append([]int(nil), shape...), DType: tt.BF16, Layout: layout, Data: b}
}

func (e *Engine) upload(w *Weights) error {
	c := e.cfg
	h, q, kv, in, v, hd := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.VocabSize, c.HeadDim
	var err error
	if e.w.embed, err = e.put(dramRM(tt.BF16, v, h), hostBF16([]int{v, h}, tt.RowMajor, bf16.View(w.Embed))); err != nil {
		return err
	}
	if e.w.lmHead, err = e.linearWeight(v, h, bf16.View(w.LMHead)); err != nil {
		return err
	}
	if e.w.norm, err = e.normWeight(w.Norm); err != nil {
		return err
	}
	cos, sin := ropeTables(c.RopeTheta, hd, e.ropeLen)
	if e.w.cos, err = e.put(dramRM(tt.BF16, e.ropeLen, hd), hostBF16([]int{e.ropeLen, hd}, tt.RowMajor, bf16.View(cos))); err != nil {
		return err
	}
	if e.w.sin, err = e.put(dramRM(tt.BF16, e.ropeLen, hd), hostBF16([]int{e.ropeLen, hd}, tt.RowMajor, bf16.View(sin))); err != nil {
		return err
	}
	cacheSpec := dramTile(e.opt.NumBlocks, c.NumKeyValueHeads, e.opt.BlockSize, hd)
	zeroCache := zerosFor(cacheSpec)
	fused := make([]byte, 0, 2*(q+2*kv)*h)
	e.w.layers = make([]engLayer, c.NumHiddenLayers)
	for i := range w.Layers {
		L, D := &w.Layers[i], &e.w.layers[i]
		fused = append(append(append(fused[:0], bf16.View(L.Q)...), bf16.View(L.K)...), bf16.View(L.V)...)
		steps := []struct {
			dst *tt.Tensor
			f   func() (tt.Tensor, error)
		}{
			{&D.inNorm, func() (tt.Tensor, error) { return e.normWeight(L.InputNorm) }},
			{&D.postNorm, func() (tt.Tensor, error) { return e.normWeight(L.PostNorm) }},
			{&D.qNorm, func() (tt.Tensor, error) { return e.normWeight(L.QNorm) }},
			{&D.kNorm, func() (tt.Tensor, error) { return e.normWeight(L.KNorm) }},
			{&D.qkv, func() (tt.Tensor, error) { return e.linearWeight(q+2*kv, h, fused) }},
			{&D.o, func() (tt.Tensor, error) { return e.linearWeight(h, q, bf16.View(L.O)) }},
			{&D.gate, func() (tt.Tensor, error) { return e.linearWeight(in, h, bf16.View(L.Gate)) }},
			{&D.up, func() (tt.Tensor, error) { return e.linearWeight(in, h, bf16.View(L.Up)) }},
			{&D.down, func() (tt.Tensor, error) { return e.linearWeight(h, in, bf16.View(L.Down)) }},
			// The caches start zeroed (tt_transformers builds them with
			// torch.zeros): a masked read through a pad entry reads zeros.
			{&D.kc, func() (tt.Tensor, error) { return e.put(cacheSpec, zeroCache) }},
			{&D.vc, func() (tt.Tensor, error) { return e.put(cacheSpec, zeroCache) }},
		}
		for _, s := range steps {
			t, err := s.f()
			if err != nil {
				return fmt.Errorf("layer %d: %w", i, err)
			}
			*s.dst = t
		}
	}
	return nil
}

// allocActs allocates the persistent inputs and every activation, and
// zero-fills the activations once, so that rows an op legitimately leaves
// unwritten (SDPA skips inactive users) hold defined values.
func (e *Engine) allocActs() error {
	c := e.cfg
	C := e.opt.Capacity
	h, q, kv, in, v, hd := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.VocabSize, c.HeadDim
	H := c.NumAttentionHeads
	a := &e.a
	specs := []struct {
		dst  *tt.Tensor
		spec tt.Spec
	}{
		{&a.tok, dramRM(tt.UINT32, 1, 1, 1, tileUp(C))},
		{&a.curPos, dramRM(tt.INT32, C)},
		{&a.ropeIdx, dramRM(tt.UINT32, 1, 1, 1, C*tt.TileSize)},
		{&a.cos, userRows(C, hd)},
		{&a.sin, userRows(C, hd)},
		{&a.x, dramTile(1, 1, C, h)},
		{&a.h, dramTile(1, 1, C, h)},
		{&a.qkv, dramTile(1, 1, C, q+2*kv)},
		// nlp_concat_heads_decode writes a sharded output only; ttnn's
		// default is L1 WIDTH_SHARDED, one head per core, shard [32, D].
		{&a.cat, tt.Spec{Shape: []int{1, 1, C, q}, DType: tt.BF16, Layout: tt.Tile,
			Memory: tt.L1WidthSharded(H, [2]int{(C + tt.TileSize - 1) / tt.TileSize * tt.TileSize, hd})}},
		{&a.o, dramTile(1, 1, C, h)},
		{&a.gate, dramTile(1, 1, C, in)},
		{&a.up, dramTile(1, 1, C, in)},
		{&a.gu, dramTile(1, 1, C, in)},
		{&a.down, dramTile(1, 1, C, h)},
		{&a.logits, dramTile(1, 1, C, v)},
	}
	for _, s := range specs {
		var err error
		switch s.dst {
		case &a.curPos:
			*s.dst, err = e.put(s.spec, tt.HostInt32(s.spec.Shape, tt.RowMajor, fill32(C, -1)))
			for i := range e.devPos {
				e.devPos[i] = -1
			}
		default:
			*s.dst, err = e.put(s.spec, zerosFor(s.spec))
		}
		if err != nil {
			return err
		}
	}
	e.mirror = true // tok 0, cur_pos -1, rope 0 as just written
	return nil
}

func fill32(n int, v int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// ropeTables computes Hugging Face's default rotary tables for positions
// 0..n-1: inv_freq[i] = 1/theta^(2i/d) with the exponent in float32 and the
// power in float64 rounded to float32, angle = float32(pos)·inv_freq[i] in
// float32, cos and sin taken in float64 of that angle, rounded to float32
// and then to bf16, each value stored at i and i+d/2. The oracle builds its
// rows the same way (a test checks every row against ref.RopeTable).
//
// The tables are shared (read only): rows 0..n-1 are the first n rows of the
// widest table built so far for theta and d, built once per process.
func ropeTables(theta float64, d, n int) (cos, sin []bf16.BF16) {
	ropeMemo.Lock()
	defer ropeMemo.Unlock()
	k := ropeKey{math.Float64bits(theta), d}
	t, ok := ropeMemo.m[k]
	if !ok || len(t[0]) < n*d {
		t[0], t[1] = buildRopeTables(theta, d, n)
		if ropeMemo.m == nil {
			ropeMemo.m = map[ropeKey][2][]bf16.BF16{}
		}
		ropeMemo.m[k] = t
	}
	return t[0][: n*d : n*d], t[1][: n*d : n*d]
}

// ropeMemo holds ropeTables' tables by theta's bits and d.
var ropeMemo struct {
	sync.Mutex
	m map[ropeKey][2][]bf16.BF16
}

type ropeKey struct {
	theta uint64
	d     int
}

// buildRopeTables computes ropeTables' tables for positions 0..n-1.
func buildRopeTables(theta float64, d, n int) (cos, sin []bf16.BF16) {
	half := d / 2
	inv := make([]float32, half)
	for i := range inv {
		ex := float32(2*i) / float32(d)
		inv[i] = 1 / float32(math.Pow(theta, float64(ex)))
	}
	cos = make([]bf16.BF16, n*d)
	sin = make([]bf16.BF16, n*d)
	for p := 0; p < n; p++ {
		row := p * d
		for i, f := range inv {
			ang := float32(p) * f
			cv := bf16.FromFloat32(float32(math.Cos(float64(ang))))
			sv := bf16.FromFloat32(float32(math.Sin(float64(ang))))
			cos[row+i], cos[row+i+half] = cv, cv
			sin[row+i], sin[row+i+half] = sv, sv
		}
	}
	return cos, sin
}

// Config is the model the engine runs.
func (e *Engine) Config() Config { return e.cfg }

// BlockSize is the number of positions per KV block.
func (e *Engine) BlockSize() int { return e.opt.BlockSize }

// Options returns the options in effect (defaults filled in).
func (e *Engine) Options() EngineOptions { return e.opt }

// Stats returns the counters since NewEngine.
func (e *Engine) Stats() EngineStats { return e.stats }

// LastStep returns what the most recent step did.
func (e *Engine) LastStep() StepStats { return e.last }

// PageTable returns the current page-table tensor (false before the first
// step).
func (e *Engine) PageTable() (tt.Tensor, bool) {
	if e.pt == nil {
		return tt.Tensor{}, false
	}
	return *e.pt, true
}

// Inputs returns the persistent input tensors the decode graph reads:
// the token input, cur_pos and the rope index.
func (e *Engine) Inputs() (tok, curPos, ropeIdx tt.Tensor) {
	return e.a.tok, e.a.curPos, e.a.ropeIdx
}

// KVCache returns layer l's key and value cache tensors, each
// [NumBlocks, kv_heads, BlockSize, head_dim] BF16 TILE.
func (e *Engine) KVCache(l int) (k, v tt.Tensor) { return e.w.layers[l].kc, e.w.layers[l].vc }

// Traced reports whether a trace is live.
func (e *Engine) Traced() bool { return e.trace != nil }

// Close releases the trace and frees every tensor the engine allocated. It
// is idempotent.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.dropTrace()
	return errors.Join(err, e.freeAll())
}

func (e *Engine) freeAll() error {
	var errs []error
	if e.pt != nil {
		errs = append(errs, e.dev.Free(*e.pt))
		e.pt = nil
	}
	for _, r := range e.retired {
		errs = append(errs, e.dev.Free(r.t))
	}
	e.retired = nil
	for _, t := range e.tensor {
		errs = append(errs, e.dev.Free(t))
	}
	e.tensor = nil
	return errors.Join(errs...)
}
