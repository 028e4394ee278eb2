package sim

import (
	"fmt"
	"math"

	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// The prefill (multi-token) ops: nlp_create_qkv_heads, rotary_embedding_hf
// in prefill mode, scaled_dot_product_attention and nlp_concat_heads. All
// four allocate their outputs (tt.Allocating). Validation follows ttnn's
// order and texts where they are known (tt-metal 622c6fb9 paths cited at
// each check); offcard's own refusals start with tt.ContractPrefix. Configurations ttnn accepts but
// the simulator does not model fail with a plain "sim: ... not implemented"
// error, never with a made-up ttnn text.

const (
	opCreateHeadsPrefill = "nlp_create_qkv_heads"
	opConcatHeadsPrefill = "nlp_concat_heads"
	opSDPAPrefill        = "scaled_dot_product_attention"
)

// notImplemented is a configuration ttnn accepts that the simulator does not
// model (not a tt.Error: conform reports it as outside the contract).
func notImplemented(op, format string, a ...any) error {
	return fmt.Errorf("sim: %s: %s is not implemented", op, fmt.Sprintf(format, a...))
}

// tmDType is the data-format check of the TM ops (FLOAT32, BFLOAT16 or
// BFLOAT8_B; the contract has no BFLOAT8_B).
func tmDType(s tt.Spec) bool { return s.DType == tt.FP32 || s.DType == tt.BF16 }

// ---- nlp_create_qkv_heads ----

// checkCreateHeadsShape is the wrapper's check (ttnn/cpp/ttnn/operations/
// experimental/transformer/nlp_create_qkv_heads/nlp_create_qkv_heads.cpp),
// run before the device op, so before the outputs are allocated.
func checkCreateHeadsShape(o tt.NLPCreateQKVHeads) error {
	const name = opCreateHeadsPrefill
	sh := o.Input.Spec.Shape
	if len(sh) != 4 {
		return contractErr(name, "Input tensor must be rank 4 [B, 1, S, (num_heads + 2*num_kv_heads) * head_dim], got shape %v", sh)
	}
	if o.NumHeads <= 0 || o.NumKVHeads < 0 {
		return contractErr(name, "num_heads (%d) must be positive and num_kv_heads (%d) not negative", o.NumHeads, o.NumKVHeads)
	}
	// nlp_create_qkv_heads.cpp: padded_shape[3] % (num_q_heads + 2*num_kv_heads).
	if o.Input.Spec.Width()%(o.NumHeads+2*o.KVHeads()) != 0 {
		return opErr(name, "Unsupported input shape")
	}
	return nil
}

// checkInterleavedOut: an interleaved input needs an interleaved output
// config ("Output memory config layout must be INTERLEAVED but got {}",
// nlp_create_qkv_heads_device_operation.cpp and
// nlp_concat_heads_device_operation.cpp). A sharded input is not modelled.
func checkInterleavedOut(name string, in tt.Spec, m tt.MemoryConfig) error {
	if in.Memory.Sharded() {
		return nil // the device op's sharded branch decides
	}
	if m != (tt.MemoryConfig{}) && m.Layout != tt.Interleaved {
		return opErr(name, "Output memory config layout must be INTERLEAVED but got %v", m.Layout)
	}
	return nil
}

// checkCreateHeadsDevice is
// nlp_create_qkv_heads/device/nlp_create_qkv_heads_device_operation.cpp
// validate_on_program_cache_miss, in its order (the cache-hit validator is
// empty; the key holds everything checked here, so validating on every
// call gives the same answers). It runs before the outputs are allocated
// (checkAllocating), as ttnn validates before create_output_tensors.
func checkCreateHeadsDevice(o tt.NLPCreateQKVHeads, in tt.Spec) error {
	const name = opCreateHeadsPrefill
	kv := o.KVHeads()
	if !tmDType(in) {
		return opErr(name, "Unsupported data format")
	}
	if in.Layout != tt.Tile {
		return opErr(name, "Input tensor layout must be TILE but got %v", in.Layout)
	}
	p := in.PaddedShape()
	if p[2]%tt.TileSize != 0 {
		return opErr(name, "Unsupported input height %d is not tile aligned", p[2])
	}
	if p[1] != 1 {
		return opErr(name, "Unsupported input sequence length %d is not equal to 1", p[1])
	}
	if in.Memory.Sharded() {
		return notImplemented(name, "a sharded input")
	}
	if err := checkInterleavedOut(name, in, o.Memory); err != nil {
		return err
	}
	if dh := p[3] / (o.NumHeads + 2*kv); dh%tt.TileSize != 0 {
		return notImplemented(name, "head_dim %d (not a multiple of 32)", dh)
	}
	return nil
}

// createHeadsPrefill: Input [B,1,S,(H+2K)*D] TILE interleaved -> Q
// [B,H,S,D], K and V [B,K,S,D]. The card's reader copies whole tiles
// (kernels/dataflow/reader_tm_tile_layout_nlp_create_qkv_heads.cpp), so the
// simulator does too: output tile (b, h, st, c) is input tile (b, st,
// h*Dt + c) (K and V offset by H*Dt and (H+K)*Dt), padding rows included.
// Any dtype the op accepts (FLOAT32, BFLOAT16) is copied bit for bit. With
// transpose_k_heads K is [B,K,D,S]: tile (b, g, c, st) is input tile
// (b, st, H*Dt + g*Dt + c) transposed (the input's padding rows become
// padding columns).
func (d *Device) createHeadsPrefill(o tt.NLPCreateQKVHeads, outs []tt.Tensor) error {
	const name = opCreateHeadsPrefill
	kv := o.KVHeads()
	return d.launchOp(name, attrKey{uint64(o.NumHeads), uint64(kv)<<1 | b2u(o.TransposeK)}, []*tt.Tensor{&o.Input, &outs[0], &outs[1], &outs[2]}, func(bs []*buffer) error {
		return checkCreateHeadsDevice(o, bs[0].spec)
	}, opLaunch{n: o.NumHeads, f: float32(kv), flag: o.TransposeK, run: execCreateHeadsPrefill, cbs: createHeadsPrefillPrograms[b2u(o.TransposeK)]})
}

func execCreateHeadsPrefill(l *opLaunch, x *opIO, s *scratch) error {
	in := l.bufs[0]
	p := in.spec.PaddedShape()
	nh, nkv := l.n, int(l.f)
	b, st, wt := p[0], p[2]/tt.TileSize, p[3]/tt.TileSize
	dt := wt / (nh + 2*nkv)
	pg := s.pageBuf(2 * int(in.pageSize))
	pg, tp := pg[:in.pageSize], pg[in.pageSize:]
	e := in.spec.DType.Size()
	col := 0
	for i, out := range l.bufs[1:] {
		heads := nh
		if i > 0 {
			heads = nkv
		}
		transpose := i == 1 && l.flag
		for bb := 0; bb < b; bb++ {
			for h := 0; h < heads; h++ {
				for t := 0; t < st; t++ {
					for c := 0; c < dt; c++ {
						src := (bb*st+t)*wt + col + h*dt + c
						dst := ((bb*heads+h)*st+t)*dt + c
						if err := x.pageIO(in, src, pg, false); err != nil {
							return err
						}
						w := pg
						if transpose {
							dst = ((bb*heads+h)*dt+c)*st + t
							transposeTile(tp, pg, e)
							w = tp
						}
						if err := x.pageIO(out, dst, w, true); err != nil {
							return err
						}
					}
				}
			}
		}
		col += heads * dt
	}
	return nil
}

// transposeTile writes the transpose of the tile page src (elements of e
// bytes, face order) into dst.
func transposeTile(dst, src []byte, e int) {
	for r := 0; r < tt.TileSize; r++ {
		for c := 0; c < tt.TileSize; c++ {
			copy(dst[TileElem(c, r)*e:][:e], src[TileElem(r, c)*e:][:e])
		}
	}
}

// ---- nlp_concat_heads ----

func checkConcatHeadsShape(o tt.NLPConcatHeads) error {
	const name = opConcatHeadsPrefill
	if sh := o.Input.Spec.Shape; len(sh) != 4 {
		return contractErr(name, "Input tensor must be rank 4 [B, heads, S, head_dim], got shape %v", sh)
	}
	return checkInterleavedOut(name, o.Input.Spec, o.Memory)
}

// concatHeadsPrefill: Input [B,H,S,D] TILE interleaved -> [B,1,S,H*D]; a
// tile copy as the card's reader does: output tile (b, st, h*Dt + c) is
// input tile (b, h, st, c), padding rows included.
func (d *Device) concatHeadsPrefill(o tt.NLPConcatHeads, output tt.Tensor) error {
	const name = opConcatHeadsPrefill
	return d.launchOp(name, attrKey{}, []*tt.Tensor{&o.Input, &output}, func(bs []*buffer) error {
		in := bs[0].spec
		// nlp_concat_heads/device/nlp_concat_heads_device_operation.cpp
		// validate_on_program_cache_miss (run on every call).
		if !tmDType(in) {
			return opErr(name, "Unsupported data format")
		}
		if in.Layout != tt.Tile {
			return opErr(name, "Input tensor layout must be TILE but got %v", in.Layout)
		}
		if in.Memory.Sharded() {
			if in.Memory.Layout == tt.WidthSharded {
				return opErr(name, "Input tensor memory layout must not be WIDTH_SHARDED but got %v", in.Memory.Layout)
			}
			return notImplemented(name, "a sharded input")
		}
		if err := checkInterleavedOut(name, in, o.Memory); err != nil {
			return err
		}
		if dh := in.Shape[3]; dh%tt.TileSize != 0 {
			return notImplemented(name, "head_dim %d (not a multiple of 32)", dh)
		}
		return nil
	}, opLaunch{run: execConcatHeadsPrefill, cbs: concatHeadsPrefillCBs})
}

func execConcatHeadsPrefill(l *opLaunch, x *opIO, s *scratch) error {
	in, out := l.bufs[0], l.bufs[1]
	p := in.spec.PaddedShape()
	b, heads, st, dt := p[0], p[1], p[2]/tt.TileSize, p[3]/tt.TileSize
	wt := heads * dt
	pg := s.pageBuf(int(in.pageSize))
	for bb := 0; bb < b; bb++ {
		for h := 0; h < heads; h++ {
			for t := 0; t < st; t++ {
				for c := 0; c < dt; c++ {
					src := ((bb*heads+h)*st+t)*dt + c
					dst := (bb*st+t)*wt + h*dt + c
					if err := x.pageIO(in, src, pg, false); err != nil {
						return err
					}
					if err := x.pageIO(out, dst, pg, true); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// ---- rotary_embedding_hf, prefill mode ----

// rotaryPrefill is rotary_embedding_hf with is_decode_mode=false: Input
// [B,heads,S,D] TILE, Cos and Sin [1,1,S',D] TILE with S' >= S; row s of
// every head is ref.Rope with cos/sin row s (the reader takes cos/sin tile
// row r mod Ht for input tile row r of each head,
// device/kernels/dataflow/reader_rotary_embedding_hf_interleaved.cpp), the
// same arithmetic as decode mode, so a prefill row and the decode row at
// the same position agree bit for bit. Padding rows are written as zero.
func (d *Device) rotaryPrefill(o tt.RotaryEmbeddingHF, output tt.Tensor) error {
	const name = "rotary_embedding_hf"
	return d.launchOp(name, attrKey{2}, []*tt.Tensor{&o.Input, &o.Cos, &o.Sin, &output}, func(bs []*buffer) error {
		in, cs, sn := bs[0].spec, bs[1].spec, bs[2].spec
		// rotary_embedding_hf/device/rotary_embedding_hf_device_operation.cpp
		// validate_on_program_cache_miss (run on every call).
		if in.Layout != tt.Tile {
			return opErr(name, "Input must be tilized")
		}
		if cs.Layout != tt.Tile {
			return opErr(name, "Cos must be tilized")
		}
		if sn.Layout != tt.Tile {
			return opErr(name, "Sin must be tilized")
		}
		if len(in.Shape) != 4 || len(cs.Shape) != 4 || len(sn.Shape) != 4 {
			return contractErr(name, "Input, cos and sin must be rank 4, got %v, %v and %v", in.Shape, cs.Shape, sn.Shape)
		}
		x := in.Width()
		if x != tt.TileSize && x%(2*tt.TileSize) != 0 {
			return opErr(name, "Input X dim (%d) must be either %d (single tile) or divisible by %d (rotate_half midpoint must align with a tile boundary).", x, tt.TileSize, 2*tt.TileSize)
		}
		if cs.DType != sn.DType {
			return opErr(name, "Cos and Sin dtypes must match")
		}
		if !shapeEqual(cs.PaddedShape(), sn.PaddedShape()) {
			return opErr(name, "Cos and Sin shapes must match")
		}
		if cs.Shape[0] != 1 || cs.Width() != x {
			return opErr(name, "Cos dims must match input dims")
		}
		if cs.Shape[1] != 1 {
			return opErr(name, "Cos must have batch dim = 1 in prefill mode")
		}
		if sn.Shape[1] != 1 {
			return opErr(name, "Sin must have batch dim = 1 in prefill mode")
		}
		seq := in.Shape[2]
		if cs.Shape[2] < seq {
			return opErr(name, "Cos seq_len must be >= input seq_len. Input seq_len: %d, Cos seq_len: %d.", seq, cs.Shape[2])
		}
		if sn.Shape[2] < seq {
			return opErr(name, "Sin seq_len must be >= input seq_len. Input seq_len: %d, Sin seq_len: %d.", seq, sn.Shape[2])
		}
		if in.Memory.Layout == tt.WidthSharded {
			return opErr(name, "Input cannot be WIDTH_SHARDED")
		}
		if o.Memory.Layout == tt.WidthSharded {
			return opErr(name, "Output cannot be WIDTH_SHARDED")
		}
		// The factory takes any dtype; the simulator computes in bf16.
		for i, b := range bs[:3] {
			if b.spec.DType != tt.BF16 {
				return notImplemented(name, "%s of dtype %v", []string{"an input", "a cos table", "a sin table"}[i], b.spec.DType)
			}
		}
		return nil
	}, opLaunch{n: rotaryPrefillRows, run: execRotary, cbs: rotaryPrefillCBs})
}

// ---- scaled_dot_product_attention ----

// sdpaPrefill is ttnn.transformer.scaled_dot_product_attention without a
// mask, a sliding window or a sink: Q [B,H,Sq,D], K and V [B,K,Sk,D], all
// BF16 TILE interleaved; query head h of batch b reads kv head h/(H/K).
//
// Numerics: the reference's, not the card's. Query row i of each head is
// ref.Attend over key/value rows 0..i (causal) or 0..Sk-1, with the op's
// scale (0: ref.AttnScale(D), float32(1/sqrt(D))) — the function paged SDPA
// decode and the CPU oracle use, so a causal prefill gives, row for row,
// the bits token-by-token decode gives. The card differs: online softmax
// over q/k chunks, the score exp always approximate, bf16 intermediates
// (scores, running max and sum, the partial output), the scale folded into
// the exponent (sdpa_program_factory.cpp, kernels/compute/
// compute_common.hpp). QChunkSize, KChunkSize and FP32DestAcc are validated
// and keyed but do not change the simulator's result.
func (d *Device) sdpaPrefill(o tt.SDPA, output tt.Tensor) error {
	const name = opSDPAPrefill
	attrs := attrKey{uint64(math.Float32bits(o.Scale)),
		uint64(uint32(o.QChunkSize))<<34 | uint64(uint32(o.KChunkSize))<<3 | b2u(o.ExactExp)<<2 | b2u(o.FP32DestAcc)<<1 | b2u(o.Causal)}
	return d.launchOp(name, attrs, []*tt.Tensor{&o.Q, &o.K, &o.V, &output}, func(bs []*buffer) error {
		q, k, v := bs[0].spec, bs[1].spec, bs[2].spec
		// transformer/sdpa/device/sdpa_device_operation.cpp
		// validate_on_program_cache_miss (run on every call), regular mode.
		for _, s := range []tt.Spec{q, k, v} {
			if s.Layout != tt.Tile {
				return opErr(name, "Inputs to SDPA must be tilized")
			}
			if s.DType != tt.BF16 { // BFLOAT8_B and BFLOAT4_B are not in the contract
				return opErr(name, "Data type of input tensor must be BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is %v", s.DType)
			}
			if s.Memory.Sharded() {
				return opErr(name, "Operands to SDPA need to be DRAM/L1 interleaved")
			}
			if len(s.Shape) != 4 {
				return contractErr(name, "Q, K and V must be rank 4, got shape %v", s.Shape)
			}
		}
		qs, ks, vs := q.Shape, k.Shape, v.Shape
		b, nqh, nkv, sq, dh, sk := qs[0], qs[1], ks[1], qs[2], qs[3], ks[2]
		if o.Causal && sq != sk {
			return opErr(name, "Causal SDPA requires Q and K to have the same sequence length. Got Q: %d, K: %d", sq, sk)
		}
		if ks[0] != b || vs[0] != b {
			return opErr(name, "K and V batch must match. Got K: %d, V: %d", ks[0], vs[0])
		}
		if vs[1] != nkv {
			return opErr(name, "K and V num_heads must match. Got K: %d, V: %d", ks[1], vs[1])
		}
		if vs[2] != sk {
			return opErr(name, "K and V sequence length must match. Got K: %d, V: %d", ks[2], vs[2])
		}
		if ks[3] != dh || vs[3] != dh {
			return opErr(name, "K and V hidden dim must match. Got K: %d, V: %d", ks[3], vs[3])
		}
		if nqh < nkv || nqh%nkv != 0 {
			return opErr(name, "Q num_heads must be >= K num_heads and divisible by K num_heads. Got Q: %d, K: %d", nqh, nkv)
		}
		if o.QChunkSize != 0 || o.KChunkSize != 0 { // a program config
			if o.QChunkSize < 0 || o.QChunkSize%tt.TileSize != 0 {
				return opErr(name, "q_chunk_size must be divisible by TILE_SIZE. Got q_chunk_size: %d, TILE_SIZE: %d", o.QChunkSize, tt.TileSize)
			}
			if o.KChunkSize < 0 || o.KChunkSize%tt.TileSize != 0 {
				return opErr(name, "k_chunk_size must be divisible by TILE_SIZE. Got k_chunk_size: %d, TILE_SIZE: %d", o.KChunkSize, tt.TileSize)
			}
		} else if o.ExactExp {
			// exp_approx_mode is a field of SDPAProgramConfig: without chunk
			// sizes there is no program config to carry it.
			return contractErr(name, "exp_approx_mode needs a program config: set q_chunk_size and k_chunk_size")
		}
		// Padding checks run last; only the head dim can be padded here.
		for _, s := range []tt.Spec{q, k, v} {
			if s.Shape[3]%tt.TileSize != 0 {
				return opErr(name, "Padding is not supported on the head_dim dimension")
			}
		}
		return nil
	}, opLaunch{f: o.Scale, flag: o.Causal, run: execSDPAPrefill, cbs: func(d *Device, bs []*buffer) simpleProgram {
		qs, ks := bs[0].spec.Shape, bs[1].spec.Shape
		qc, kc := o.QChunkSize, o.KChunkSize
		if qc == 0 && kc == 0 {
			qc, kc = tt.TileSize, tt.TileSize
		}
		specs, _ := d.sdpaProgramCBs(sdpaShape{b: qs[0], nqh: qs[1], sq: qs[2], sk: ks[2], dh: qs[3],
			qChunk: qc, kChunk: kc, causal: o.Causal, fp32: o.FP32DestAcc})
		return d.cbRegion(specs, d.wholeGrid())
	}})
}

func execSDPAPrefill(l *opLaunch, x *opIO, s *scratch) error {
	qb, kb, vb, out := l.bufs[0], l.bufs[1], l.bufs[2], l.bufs[3]
	gq, gk, gout := qb.g, kb.g, out.g
	qv := s.buf(0, gq.size())
	if err := x.readPadded(s, qb, qv); err != nil {
		return err
	}
	x.checkReads = true // attended keys and values
	kv := s.buf(1, gk.size())
	if err := x.readPadded(s, kb, kv); err != nil {
		return err
	}
	vv := s.buf(2, gk.size())
	if err := x.readPadded(s, vb, vv); err != nil {
		return err
	}
	x.checkReads = false
	dst := s.buf(3, gout.size())
	clear(dst)
	qs, ks := qb.spec.Shape, kb.spec.Shape
	b, nqh, nkv, sq, dh, sk := qs[0], qs[1], ks[1], qs[2], qs[3], ks[2]
	group := nqh / nkv
	scale := l.f
	if scale == 0 {
		scale = ref.AttnScale(dh)
	}
	probs := s.floats(sk)
	for bb := 0; bb < b; bb++ {
		for h := 0; h < nqh; h++ {
			// kv head (bb, h/group): rows sk of dh, contiguous in the
			// padded view (D is not padded).
			base := (bb*nkv + h/group) * gk.hp * gk.wp
			keys, vals := kv[base:base+sk*dh], vv[base:base+sk*dh]
			for i := 0; i < sq; i++ {
				n := sk
				if l.flag {
					n = i + 1
				}
				qr := gq.prow((bb*nqh+h)*sq+i) * gq.wp
				or := gout.prow((bb*nqh+h)*sq+i) * gout.wp
				ref.Attend(dst[or:or+dh], qv[qr:qr+dh], keys, vals, n, scale, probs)
			}
		}
	}
	return x.writePadded(s, out, dst, nil)
}
