package conform

import (
	"fmt"
	"math/rand/v2"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// The prefill (multi-token) ops: S = 40 (not a multiple of 32), 4 query
// heads over 2 KV heads.
const (
	preS, preH, preKV, preD = 40, 4, 2, 64
)

// casePrefillHeads: nlp_create_qkv_heads splits a fused QKV prompt into
// Q [1,4,40,64], K and V [1,2,40,64] DRAM interleaved (same specs,
// addresses and bytes on both), and nlp_concat_heads joins Q back into
// [1,1,40,256]; with transpose_k_heads K is [1,2,64,40].
func casePrefillHeads(p *Pair) error {
	r := rand.New(rand.NewPCG(41, 42))
	in, err := p.allocWrite(r, dram([]int{1, 1, preS, (preH + 2*preKV) * preD}, tt.BF16, tt.Tile), 2)
	if err != nil {
		return err
	}
	heads, err := p.allocOp("nlp_create_qkv_heads", func(i int) tt.Op {
		return tt.NLPCreateQKVHeads{Input: in[i], NumHeads: preH, NumKVHeads: preKV, Memory: tt.DRAMInterleaved}
	})
	if err != nil {
		return err
	}
	for j, what := range []string{"Q", "K", "V"} {
		if err := p.exact(what, heads[j]); err != nil {
			return err
		}
	}
	cat, err := p.allocOp("nlp_concat_heads", func(i int) tt.Op { return tt.NLPConcatHeads{Input: heads[0][i]} })
	if err != nil {
		return err
	}
	if err := p.exact("concatenated Q heads", cat[0]); err != nil {
		return err
	}
	tk, err := p.allocOp("nlp_create_qkv_heads (transpose_k_heads)", func(i int) tt.Op {
		return tt.NLPCreateQKVHeads{Input: in[i], NumHeads: preH, NumKVHeads: preKV, TransposeK: true}
	})
	if err != nil {
		return err
	}
	if err := p.exact("K transposed [1,2,64,40]", tk[1]); err != nil {
		return err
	}
	p.Note("Q, K, V, K transposed and the concatenation: same specs, addresses and bytes")
	return nil
}

// prefillRope is a [1,1,n,D] TILE cos or sin table, HF order, positions
// 0..n-1.
func prefillRope(p *Pair, n int) (cos, sin [2]tt.Tensor, err error) {
	pos := make([]int, n)
	for i := range pos {
		pos[i] = i
	}
	cv, sv := cosSin(pos, preD, false)
	s := dram([]int{1, 1, n, preD}, tt.BF16, tt.Tile)
	for _, c := range []struct {
		t *[2]tt.Tensor
		v []bf16.BF16
	}{{&cos, cv}, {&sin, sv}} {
		if *c.t, err = p.alloc(s); err != nil {
			return cos, sin, err
		}
		if err = p.write(*c.t, tt.HostBF16(s.Shape, tt.Tile, c.v)); err != nil {
			return cos, sin, err
		}
	}
	return cos, sin, nil
}

// caseRotaryPrefill: rotary_embedding_hf with is_decode_mode=false on
// [1,4,40,64] with a 64-row table (rows 0..39 used); a table shorter than
// the prompt is refused with the same text.
func caseRotaryPrefill(p *Pair) error {
	r := rand.New(rand.NewPCG(43, 44))
	x, err := p.allocWrite(r, dram([]int{1, preH, preS, preD}, tt.BF16, tt.Tile), 2)
	if err != nil {
		return err
	}
	cos, sin, err := prefillRope(p, 64)
	if err != nil {
		return err
	}
	const name = "rotary_embedding_hf"
	out, err := p.allocOp(name, func(i int) tt.Op { return tt.RotaryEmbeddingHF{Input: x[i], Cos: cos[i], Sin: sin[i], Prefill: true} })
	if err != nil {
		return err
	}
	if err := p.close(name, out[0]); err != nil {
		return err
	}
	short, shortSin, err := prefillRope(p, preS-8)
	if err != nil {
		return err
	}
	return p.refused(name+" (cos table shorter than the prompt)", func(i int) tt.Op {
		return tt.RotaryEmbeddingHF{Input: x[i], Cos: short[i], Sin: shortSin[i], Prefill: true}
	})
}

// caseSDPAPrefill: causal scaled_dot_product_attention, Q [1,4,40,64] over
// K, V [1,2,40,64] (GQA 2:1), with and without a program config; then the
// refusals of a causal call with Sq != Sk and of a chunk size off the tile.
func caseSDPAPrefill(p *Pair) error {
	r := rand.New(rand.NewPCG(45, 46))
	q, err := p.allocWrite(r, dram([]int{1, preH, preS, preD}, tt.BF16, tt.Tile), 1)
	if err != nil {
		return err
	}
	var k, v [2]tt.Tensor
	for _, t := range []*[2]tt.Tensor{&k, &v} {
		if *t, err = p.allocWrite(r, dram([]int{1, preKV, preS, preD}, tt.BF16, tt.Tile), 1); err != nil {
			return err
		}
	}
	const name = "scaled_dot_product_attention"
	for _, chunk := range []int{0, 64} {
		out, err := p.allocOp(name, func(i int) tt.Op {
			return tt.SDPA{Q: q[i], K: k[i], V: v[i], Causal: true, QChunkSize: chunk, KChunkSize: chunk, ExactExp: chunk != 0}
		})
		if err != nil {
			return err
		}
		if err := p.close(name, out[0]); err != nil {
			return err
		}
	}
	kShort, err := p.allocWrite(r, dram([]int{1, preKV, preS - 1, preD}, tt.BF16, tt.Tile), 1)
	if err != nil {
		return err
	}
	if err := p.refused(name+" (causal, Sq != Sk)", func(i int) tt.Op {
		return tt.SDPA{Q: q[i], K: kShort[i], V: kShort[i], Causal: true}
	}); err != nil {
		return err
	}
	return p.refused(name+" (q_chunk_size 48)", func(i int) tt.Op {
		return tt.SDPA{Q: q[i], K: k[i], V: v[i], Causal: true, QChunkSize: 48, KChunkSize: 64}
	})
}

// refused runs an op both devices must refuse, with the same text.
func (p *Pair) refused(name string, mk func(i int) tt.Op) error {
	es, ec := run(p.Sim, mk(0)), run(p.Card, mk(1))
	if err := sameErr(name, es, ec); err != nil {
		return err
	}
	if es == nil {
		return fmt.Errorf("%s: accepted by both, want a refusal", name)
	}
	p.Note("%s refused: %v", name, es)
	return nil
}
