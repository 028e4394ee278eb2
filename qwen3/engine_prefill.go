package qwen3

import (
	"fmt"
	"math"
	"slices"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// prefillKey names the programs of one multi-token prefill: the prompt
// length T (every activation's shape), the page-table width (the
// paged_fill_cache key), and for a chunk its form (chunkKeyTensor or the
// integer start, which is part of chunked SDPA's program key) and its
// page tables' widths.
type prefillKey struct{ t, w, start, sdpaW int }

// prefill runs the prompt tokens of a new sequence in slot s as one
// multi-token program (tt_transformers' forward_prefill, one-shot, no
// padding to 128: S = T, tiles padded to 32 by the layout):
//
//   - tokens [1,1,1,T] UINT32 and positions 0..T-1 written to fresh
//     tensors; embedding of the tokens, and of the positions into the
//     cos/sin tables ([1,1,T,head_dim] TILE);
//   - per layer: rms_norm, fused qkv linear, nlp_create_qkv_heads, q/k
//     rms_norm on [1,heads,T,D], rotary_embedding_hf (prefill mode),
//     paged_fill_cache of K and V through the page table's row s
//     (BatchIdx = s), causal SDPA over the fresh K/V, nlp_concat_heads,
//     o_proj, add, rms_norm, gate/up, silu·mul, down, add;
//   - final rms_norm, lm_head into [1,1,T,vocab], argmax into [1,1,1,T].
//
// The page table gets row s = the prompt's blocks (the width policy over
// them; other rows PagePad), written only when it changed, exactly as a
// decode step would. The decode inputs (tokens, cur_pos, rope index) are
// left as a decode step at position T-1 would leave them (seedDecode), the
// host's mirror following, and no decode program is compiled (the warm
// widths are unchanged). Every tensor the pass allocates (the prompt's
// token and position inputs, the activations, the ops' own outputs) is
// freed before returning.
//
// paged_fill_cache copies whole tiles: rows T..roundup32(T)-1 of the
// prompt's last block receive the tiles' padding rows (zeros).
func (e *Engine) prefill(s int, seq SeqID, toks []int32, blocks []int32) ([]Output, error) {
	var st StepStats
	T := len(toks)
	req := make([]slotReq, e.opt.Capacity)
	req[s] = slotReq{active: true, seq: seq, tok: toks[T-1], pos: T - 1, blocks: blocks}
	table, err := e.pageTable(&st, req)
	if err != nil {
		return nil, err
	}
	if err := e.writePageTable(&st, table); err != nil {
		return nil, err
	}
	key := prefillKey{t: T, w: e.ptW}
	st.Regime = RegimeCold
	if e.prefillWarm[key] {
		st.Regime = RegimeWarm
	}
	outs, err := e.prefillForward(&st, seq, toks, prefillPlan{fillPT: *e.pt, fillBatch: s})
	if err != nil {
		return nil, err
	}
	if err := e.seedDecode(&st, s, T, uint32(outs[T-1].Token)); err != nil {
		e.mirror = false
		return nil, err
	}
	e.prefillWarm[key] = true
	if e.opt.Verify {
		if err := e.verify(); err != nil {
			return nil, err
		}
	}
	e.account(st, true)
	e.stats.PrefillTokens += T
	return outs, nil
}

// seedDecode leaves the decode inputs as a decode step of slot s at
// position T-1 would have left them (cur_pos T for s and -1 for every
// other slot, rope index T for s, token input = the prompt's greedy next
// token for s), writing only the tensors whose contents differ from the
// host's mirror, so the mirror stays exact and the next step of the slot
// is a steady-state step for the device.
func (e *Engine) seedDecode(st *StepStats, s, T int, next uint32) error {
	return e.seedSlots(st, []slotSeed{{s, T, next}})
}

// slotSeed is a slot's decode inputs after its last position T-1: cur_pos
// and rope index T, token input next.
type slotSeed struct {
	slot, T int
	next    uint32
}

// seedSlots is seedDecode for several slots at once (every other slot -1).
func (e *Engine) seedSlots(st *StepStats, seeds []slotSeed) error {
	C := e.opt.Capacity
	pos := fill32(C, -1)
	rope := make([]int32, C)
	toks := make([]uint32, C)
	if e.mirror {
		copy(rope, e.devRope)
		copy(toks, e.devTok)
	}
	seeded := make([]bool, C)
	for _, sd := range seeds {
		pos[sd.slot], rope[sd.slot], toks[sd.slot] = int32(sd.T), int32(sd.T), sd.next
		seeded[sd.slot] = true
	}
	for i := range rope {
		if !seeded[i] && (rope[i] < 0 || int(rope[i]) >= e.ropeLen) {
			rope[i] = 0
		}
	}
	if !e.mirror || !slices.Equal(pos, e.devPos) || !slices.Equal(rope, e.devRope) {
		if err := e.writePos(st, pos, rope); err != nil {
			return err
		}
	}
	if !e.mirror || !slices.Equal(toks, e.devTok) {
		if err := e.writeToks(st, toks); err != nil {
			return err
		}
	}
	e.holds(pos, rope, toks)
	return nil
}

// prefillPlan is where a prefill pass writes and what it attends: from
// position start (0: a whole prompt), paged_fill_cache through row
// fillBatch of fillPT; with chunkPT nil, causal SDPA over the pass's own
// K/V; otherwise chunked SDPA over the paged caches through chunkPT, with
// the start as an integer (chunkStart nil) or in the device tensor
// chunkStart.
type prefillPlan struct {
	start      int
	fillPT     tt.Tensor
	fillBatch  int
	chunkPT    *tt.Tensor
	chunkStart *tt.Tensor
}

// prefillForward runs the prefill graph and reads the results back.
func (e *Engine) prefillForward(st *StepStats, seq SeqID, toks []int32, plan prefillPlan) ([]Output, error) {
	c, o := e.cfg, &e.ops
	T, hd := len(toks), c.HeadDim
	h, q, kv, in, V := c.HiddenSize, c.QDim(), c.KVDim(), c.IntermediateSize, c.VocabSize
	scale := float32(1 / math.Sqrt(float64(hd)))
	f := &fwd{e: e}
	defer f.release(0)
	// alloc is a caller-allocated tensor of the pass (freed with the rest).
	alloc := func(spec tt.Spec) tt.Tensor {
		if f.err != nil {
			return tt.Tensor{}
		}
		t, err := e.dev.Allocate(spec)
		if err != nil {
			f.err = fmt.Errorf("allocate %v: %w", spec, err)
			return tt.Tensor{}
		}
		f.tmp = append(f.tmp, t)
		return t
	}
	// The ids padded to whole tiles: ttnn.embedding's fused kernel (see
	// ropeIDs).
	T32 := tileUp(T)
	tokT := alloc(dramRM(tt.UINT32, 1, 1, 1, T32))
	posT := alloc(dramRM(tt.UINT32, 1, 1, 1, T32))
	if f.err != nil {
		return nil, f.err
	}
	ids := make([]uint32, T32)
	pos := make([]uint32, T32)
	for i, t := range toks {
		ids[i], pos[i] = uint32(t), uint32(plan.start+i)
	}
	if err := e.write(st, tokT, tt.HostUint32([]int{1, 1, 1, T32}, tt.RowMajor, ids)); err != nil {
		return nil, fmt.Errorf("prompt tokens: %w", err)
	}
	if err := e.write(st, posT, tt.HostUint32([]int{1, 1, 1, T32}, tt.RowMajor, pos)); err != nil {
		return nil, fmt.Errorf("prompt positions: %w", err)
	}

	x := alloc(dramTile(1, 1, T, h))
	cos := alloc(dramTile(1, 1, T, hd))
	sin := alloc(dramTile(1, 1, T, hd))
	res := alloc(dramTile(1, 1, T, h))
	qkvT := alloc(dramTile(1, 1, T, q+2*kv))
	oT := alloc(dramTile(1, 1, T, h))
	gate := alloc(dramTile(1, 1, T, in))
	up := alloc(dramTile(1, 1, T, in))
	gu := alloc(dramTile(1, 1, T, in))
	down := alloc(dramTile(1, 1, T, h))
	f.run(reuse(&o.Embedding, tt.Embedding{Input: tokT, Weight: e.w.embed, Output: x}))
	f.run(reuse(&o.Embedding, tt.Embedding{Input: posT, Weight: e.w.cos, Output: cos}))
	f.run(reuse(&o.Embedding, tt.Embedding{Input: posT, Weight: e.w.sin, Output: sin}))
	keep := len(f.tmp)
	for l := range e.w.layers {
		if f.err != nil {
			break
		}
		L := &e.w.layers[l]
		normed := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: x, Weight: L.inNorm, Epsilon: e.eps}))
		f.run(reuse(&o.Linear, tt.Linear{Input: normed, Weight: L.qkv, Output: qkvT, TransposeB: true}))
		heads := f.run(reuse(&o.NLPCreateQKVHeads, tt.NLPCreateQKVHeads{Input: qkvT, NumHeads: c.NumAttentionHeads, NumKVHeads: c.NumKeyValueHeads}))
		if f.err != nil {
			break
		}
		qh, kh, vh := heads[0], heads[1], heads[2]
		qn := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: qh, Weight: L.qNorm, Epsilon: e.eps}))
		kn := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: kh, Weight: L.kNorm, Epsilon: e.eps}))
		qr := f.one(reuse(&o.RotaryEmbeddingHF, tt.RotaryEmbeddingHF{Input: qn, Cos: cos, Sin: sin, Prefill: true}))
		kr := f.one(reuse(&o.RotaryEmbeddingHF, tt.RotaryEmbeddingHF{Input: kn, Cos: cos, Sin: sin, Prefill: true}))
		f.run(reuse(&o.PagedFillCache, tt.PagedFillCache{Cache: L.kc, Input: kr, PageTable: plan.fillPT, BatchIdx: plan.fillBatch}))
		f.run(reuse(&o.PagedFillCache, tt.PagedFillCache{Cache: L.vc, Input: vh, PageTable: plan.fillPT, BatchIdx: plan.fillBatch}))
		var attn tt.Tensor
		if plan.chunkPT == nil {
			attn = f.one(reuse(&o.SDPA, tt.SDPA{Q: qr, K: kr, V: vh, Causal: true, Scale: scale}))
		} else {
			op := tt.ChunkedSDPA{Q: qr, K: L.kc, V: L.vc, PageTable: *plan.chunkPT, ChunkStartTensor: plan.chunkStart, Scale: scale}
			if plan.chunkStart == nil {
				op.ChunkStart = int64(plan.start)
			}
			attn = f.one(reuse(&o.ChunkedSDPA, op))
		}
		cat := f.one(reuse(&o.NLPConcatHeads, tt.NLPConcatHeads{Input: attn}))
		f.run(reuse(&o.Linear, tt.Linear{Input: cat, Weight: L.o, Output: oT, TransposeB: true}))
		f.run(reuse(&o.Add, tt.Add{A: x, B: oT, Output: res}))
		normed2 := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: res, Weight: L.postNorm, Epsilon: e.eps}))
		f.run(reuse(&o.Linear, tt.Linear{Input: normed2, Weight: L.gate, Output: gate, TransposeB: true}))
		f.run(reuse(&o.Linear, tt.Linear{Input: normed2, Weight: L.up, Output: up, TransposeB: true}))
		f.run(reuse(&o.SiluMul, tt.SiluMul{Gate: gate, Up: up, Output: gu}))
		f.run(reuse(&o.Linear, tt.Linear{Input: gu, Weight: L.down, Output: down, TransposeB: true}))
		f.run(reuse(&o.Add, tt.Add{A: res, B: down, Output: x}))
		f.release(keep)
	}
	normed := f.one(reuse(&o.RMSNorm, tt.RMSNorm{Input: x, Weight: e.w.norm, Epsilon: e.eps}))
	logits := alloc(dramTile(1, 1, T, V))
	amax := alloc(dramRM(tt.UINT32, 1, 1, 1, T))
	f.run(reuse(&o.Linear, tt.Linear{Input: normed, Weight: e.w.lmHead, Output: logits, TransposeB: true}))
	f.run(reuse(&o.Argmax, tt.Argmax{Input: logits, Output: amax}))
	if f.err != nil {
		return nil, f.err
	}
	lh, err := e.dev.ReadHost(logits)
	if err != nil {
		return nil, fmt.Errorf("read logits: %w", err)
	}
	th, err := e.dev.ReadHost(amax)
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	st.HostReads += 2
	lv, tv := bf16.FromBytes(lh.Data), th.Uint32s() // lv is read only
	outs := make([]Output, T)
	for i := range outs {
		logits := make([]float32, V)
		bf16.ToFloat32s(logits, lv[i*V:(i+1)*V])
		outs[i] = Output{Seq: seq, Pos: plan.start + i, Token: int32(tv[i]), Logits: logits}
	}
	return outs, nil
}
