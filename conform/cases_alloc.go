package conform

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// allocOp runs an op whose outputs the device allocates on both devices:
// same outcome, same number of outputs, same specs and addresses (the
// allocator at dispatch).
func (p *Pair) allocOp(name string, mk func(i int) tt.Op) ([][2]tt.Tensor, error) {
	os, es := p.Sim.Run(mk(0))
	oc, ec := p.Card.Run(mk(1))
	if err := sameErr(name, es, ec); err != nil {
		return nil, err
	}
	if es != nil {
		return nil, es
	}
	if len(os) != len(oc) {
		return nil, fmt.Errorf("%s: sim allocates %d outputs, device %d", name, len(os), len(oc))
	}
	out := make([][2]tt.Tensor, len(os))
	for j := range os {
		if !os[j].Spec.Equal(oc[j].Spec) {
			return nil, fmt.Errorf("%s: output %d is %v on sim, %v on the device", name, j, os[j].Spec, oc[j].Spec)
		}
		if os[j].Addr != oc[j].Addr {
			return nil, fmt.Errorf("%s: output %d at %#x on sim, %#x on the device", name, j, os[j].Addr, oc[j].Addr)
		}
		out[j] = [2]tt.Tensor{os[j], oc[j]}
	}
	return out, nil
}

func (p *Pair) allocWrite(r *rand.Rand, s tt.Spec, scale float32) ([2]tt.Tensor, error) {
	return p.upload(s, randBF16(r, s.Volume(), scale))
}

// upload allocates s on both devices and writes v (BF16, logical order).
func (p *Pair) upload(s tt.Spec, v []bf16.BF16) ([2]tt.Tensor, error) {
	t, err := p.alloc(s)
	if err != nil {
		return t, err
	}
	return t, p.write(t, tt.HostBF16(s.Shape, s.Layout, v))
}

// heads runs nlp_create_qkv_heads_decode on a random fused QKV row of b
// users (4 query heads, 2 KV heads of 32).
func (p *Pair) heads(r *rand.Rand, b int) ([][2]tt.Tensor, error) {
	in, err := p.allocWrite(r, dram([]int{1, 1, b, (4 + 2*2) * 32}, tt.BF16, tt.Tile), 2)
	if err != nil {
		return nil, err
	}
	return p.allocOp("nlp_create_qkv_heads_decode", func(i int) tt.Op {
		return tt.NLPCreateQKVHeadsDecode{Input: in[i], NumHeads: 4, NumKVHeads: 2}
	})
}

func caseCreateHeads(p *Pair) error {
	outs, err := p.heads(rand.New(rand.NewPCG(23, 24)), 4)
	if err != nil {
		return err
	}
	for j, what := range []string{"Q", "K", "V"} {
		if err := p.exact(what, outs[j]); err != nil {
			return err
		}
	}
	p.Note("Q, K, V height-sharded, same addresses and values")
	return nil
}

func caseConcatHeads(p *Pair) error {
	outs, err := p.heads(rand.New(rand.NewPCG(25, 26)), 4)
	if err != nil {
		return err
	}
	out, err := p.alloc(tt.Spec{Shape: []int{1, 1, 4, 4 * 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1WidthSharded(4, [2]int{32, 32})})
	if err != nil {
		return err
	}
	if err := p.op("nlp_concat_heads_decode", func(i int) tt.Op { return tt.ConcatHeads{Input: outs[0][i], Output: out[i], NumHeads: 4} }); err != nil {
		return err
	}
	return p.exact("concatenated heads (width-sharded)", out)
}

// caseUsersGrid8Wide: 16 users on a grid numbered over the leftmost 8
// columns (tt.ShardSpec.GridWidth, tt_transformers' users' rectangle): on
// Blackhole the one range (0,0)-(7,1), user i on core (i%8, i/8), not the
// 13-wide walk. nlp_create_qkv_heads_decode walks its output grid inside
// the config's grid, nlp_concat_heads_decode accepts the rectangle, and
// paged_update_cache reads each user's row from its own core.
// rotary_embedding_llama's users read the matrix at its address in their
// own cores' L1: with the matrix on the whole-grid walk of 21 cores, a
// different matrix on each, user i reads core (i%8, i/8)'s (on Blackhole
// core 13+i-8 for i >= 8, not core i).
func caseUsersGrid8Wide(p *Pair) error {
	const b = 16
	r := rand.New(rand.NewPCG(61, 62))
	grid := func(rows int) tt.MemoryConfig {
		m := tt.L1HeightSharded(b, [2]int{rows, 32})
		m.Shard.GridWidth = 8
		return m
	}
	in, err := p.allocWrite(r, dram([]int{1, 1, b, (4 + 2*2) * 32}, tt.BF16, tt.Tile), 2)
	if err != nil {
		return err
	}
	outs, err := p.allocOp("nlp_create_qkv_heads_decode", func(i int) tt.Op {
		return tt.NLPCreateQKVHeadsDecode{Input: in[i], NumHeads: 4, NumKVHeads: 2, Memory: grid(32)}
	})
	if err != nil {
		return err
	}
	for j, what := range []string{"Q", "K", "V"} {
		if outs[j][0].Spec.Memory.Shard.GridWidth != 8 || outs[j][1].Spec.Memory.Shard.GridWidth%8 != 0 {
			return fmt.Errorf("%s: sharded %v (sim) and %v (card), want 8 wide", what, outs[j][0].Spec.Memory, outs[j][1].Spec.Memory)
		}
		if err := p.exact(what, outs[j]); err != nil {
			return err
		}
	}
	cat, err := p.alloc(tt.Spec{Shape: []int{1, 1, b, 4 * 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1WidthSharded(4, [2]int{32, 32})})
	if err != nil {
		return err
	}
	if err := p.op("nlp_concat_heads_decode", func(i int) tt.Op { return tt.ConcatHeads{Input: outs[0][i], Output: cat[i], NumHeads: 4} }); err != nil {
		return err
	}
	if err := p.exact("concatenated heads", cat); err != nil {
		return err
	}
	m := tt.L1HeightSharded(b, [2]int{32, 64})
	m.Shard.GridWidth = 8
	k, err := newKVOn(p, r, b, 32, 2, m)
	if err != nil {
		return err
	}
	pos := make([]int32, b)
	for u := range pos {
		pos[u] = int32(u*5 + 31)
	}
	if err := k.positions(p, pos); err != nil {
		return err
	}
	if err := p.op("paged_update_cache", k.update); err != nil {
		return err
	}
	if err := p.exact("cache after an update of 16 users", k.cache); err != nil {
		return err
	}
	cs := tt.Spec{Shape: []int{1, b, 1, k.d}, DType: tt.BF16, Layout: tt.Tile, Memory: m}
	cos, sin, err := p.cosSinTables(cs, []int{0, 5, 31, 1000, 7, 3, 64, 2, 9, 100, 11, 12, 13, 14, 15, 16}, true)
	if err != nil {
		return err
	}
	const mats = 21 // cores 0..20 of the whole-grid walk: every user's core on both archs
	ts := tt.Spec{Shape: []int{1, 1, 32 * mats, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(mats, [2]int{32, 32})}
	mv := make([]bf16.BF16, 32*32*mats)
	for c := range mats {
		for i := 0; i < 16; i++ {
			mv[c*1024+(2*i)*32+2*i+1] = bf16.FromFloat32(float32(c + 1))
			mv[c*1024+(2*i+1)*32+2*i] = bf16.FromFloat32(-float32(c + 1))
		}
	}
	tm, err := p.upload(ts, mv)
	if err != nil {
		return err
	}
	rot, err := p.allocOp("rotary_embedding_llama", func(i int) tt.Op {
		return tt.RotaryEmbeddingLlama{Input: k.input[i], Cos: cos[i], Sin: sin[i], TransMat: tm[i]}
	})
	if err != nil {
		return err
	}
	if err := p.close("rotary_embedding_llama", rot[0]); err != nil {
		return err
	}
	p.Note("16 users 8 wide: create heads, concat heads, paged_update_cache, rotary_embedding_llama reading a matrix per core")
	return nil
}

func caseToMemoryConfig(p *Pair) error {
	r := rand.New(rand.NewPCG(27, 28))
	in, err := p.allocWrite(r, dram([]int{1, 1, 64, 64}, tt.BF16, tt.Tile), 2)
	if err != nil {
		return err
	}
	sh, err := p.allocOp("to_memory_config", func(i int) tt.Op {
		return tt.ToMemoryConfig{Input: in[i], Memory: tt.L1HeightSharded(2, [2]int{32, 64})}
	})
	if err != nil {
		return err
	}
	if err := p.exact("DRAM -> L1 height-sharded", sh[0]); err != nil {
		return err
	}
	back, err := p.allocOp("to_memory_config", func(i int) tt.Op { return tt.ToMemoryConfig{Input: sh[0][i], Memory: tt.DRAMInterleaved} })
	if err != nil {
		return err
	}
	return p.exact("L1 height-sharded -> DRAM", back[0])
}

// caseToMemoryConfigSame: to the input's own memory config ttnn returns the
// input itself (ttnn/cpp/ttnn/operations/core/to_memory_config/
// to_memory_config_op.cpp): the device's new handle shares the input's
// buffer (same address), freeing it leaves the input intact, and freeing
// both frees the buffer once. Checked on the device; sim's answer is noted
// (the simulator models the identity in its own change).
func caseToMemoryConfigSame(p *Pair) error {
	r := rand.New(rand.NewPCG(31, 32))
	spec := dram([]int{1, 1, 32, 64}, tt.BF16, tt.Tile)
	in, err := p.allocWrite(r, spec, 2)
	if err != nil {
		return err
	}
	before, err := p.Card.ReadHost(in[1])
	if err != nil {
		return err
	}
	live, err := p.Card.Live()
	if err != nil {
		return err
	}
	outs, err := p.Card.Run(tt.ToMemoryConfig{Input: in[1], Memory: spec.Memory})
	if err != nil {
		return err
	}
	out := outs[0]
	if out.Addr != in[1].Addr || !out.Spec.Equal(in[1].Spec) {
		return fmt.Errorf("to_memory_config to the same config: output %v at %#x, input %v at %#x", out.Spec, out.Addr, in[1].Spec, in[1].Addr)
	}
	if err := p.Card.Free(out); err != nil {
		return err
	}
	after, err := p.Card.ReadHost(in[1])
	if err != nil {
		return fmt.Errorf("the input after freeing its alias: %v", err)
	}
	if !bytes.Equal(before.Data, after.Data) {
		return fmt.Errorf("the input changed when its alias was freed: %s", firstDiff(before, after))
	}
	// The buffer is still the input's: a new allocation of the same spec
	// does not land on it.
	probe, err := p.Card.Allocate(spec)
	if err != nil {
		return err
	}
	if probe.Addr == in[1].Addr {
		return fmt.Errorf("freeing the alias freed the input's buffer: a new tensor lands at %#x", probe.Addr)
	}
	if err := p.Card.Free(probe); err != nil {
		return err
	}
	if err := p.Card.Free(in[1]); err != nil {
		return err
	}
	if now, err := p.Card.Live(); err != nil || now.Tensors != live.Tensors-1 {
		return fmt.Errorf("live tensors %+v after freeing both handles, %+v before (err %v)", now, live, err)
	}
	so, err := p.Sim.Run(tt.ToMemoryConfig{Input: in[0], Memory: spec.Memory})
	if err == nil {
		p.Note("device: same address %#x, one buffer; sim: output at %#x", out.Addr, so[0].Addr)
	}
	return nil
}

func caseRMSNorm(p *Pair) error {
	r := rand.New(rand.NewPCG(29, 30))
	in, err := p.allocWrite(r, dram([]int{1, 1, 8, 128}, tt.BF16, tt.Tile), 3)
	if err != nil {
		return err
	}
	w, err := p.allocWrite(r, dram([]int{1, 1, 4, 32}, tt.BF16, tt.RowMajor), 1)
	if err != nil {
		return err
	}
	out, err := p.allocOp("rms_norm", func(i int) tt.Op { return tt.RMSNorm{Input: in[i], Weight: w[i], Epsilon: 1e-6} })
	if err != nil {
		return err
	}
	return p.close("rms_norm", out[0])
}

// cosSin are user b's rotary rows at position pos[b]: HF order (pairs i,
// i+D/2) or, for llama, interleaved (cos[2i] = cos[2i+1]).
// cosSinTables uploads the cos and sin tables of pos (cosSin) in spec cs.
func (p *Pair) cosSinTables(cs tt.Spec, pos []int, llama bool) (cos, sin [2]tt.Tensor, err error) {
	cv, sv := cosSin(pos, cs.Shape[len(cs.Shape)-1], llama)
	if cos, err = p.upload(cs, cv); err != nil {
		return
	}
	sin, err = p.upload(cs, sv)
	return
}

func cosSin(pos []int, d int, llama bool) (c, s []bf16.BF16) {
	for _, x := range pos {
		for i := 0; i < d; i++ {
			k := i % (d / 2)
			if llama {
				k = i / 2
			}
			th := float64(x) * math.Pow(10000, -2*float64(k)/float64(d))
			c = append(c, bf16.FromFloat32(float32(math.Cos(th))))
			s = append(s, bf16.FromFloat32(float32(math.Sin(th))))
		}
	}
	return c, s
}

func caseRotary(p *Pair, llama bool) error {
	r := rand.New(rand.NewPCG(31, 32))
	const b, heads, d = 4, 4, 32
	x, err := p.allocWrite(r, tt.Spec{Shape: []int{1, b, heads, d}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(b, [2]int{32, d})}, 2)
	if err != nil {
		return err
	}
	cs := tt.Spec{Shape: []int{1, b, 1, d}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(b, [2]int{32, d})}
	cos, sin, err := p.cosSinTables(cs, []int{0, 5, 31, 1000}, llama)
	if err != nil {
		return err
	}
	var tm [2]tt.Tensor
	name := "rotary_embedding_hf"
	if llama {
		name = "rotary_embedding_llama"
		// One copy per user's core, as tt_transformers shards it
		// (models/tt_transformers/tt/rope.py:829-849): each core reads the
		// matrix at the buffer's address in its own L1.
		ts := tt.Spec{Shape: []int{1, 1, 32 * b, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(b, [2]int{32, 32})}
		m := make([]bf16.BF16, 32*32*b)
		for u := range b {
			for i := 0; i < 16; i++ {
				m[u*1024+(2*i)*32+2*i+1] = bf16.FromFloat32(1)
				m[u*1024+(2*i+1)*32+2*i] = bf16.FromFloat32(-1)
			}
		}
		if tm, err = p.upload(ts, m); err != nil {
			return err
		}
	}
	out, err := p.allocOp(name, func(i int) tt.Op {
		if llama {
			return tt.RotaryEmbeddingLlama{Input: x[i], Cos: cos[i], Sin: sin[i], TransMat: tm[i]}
		}
		return tt.RotaryEmbeddingHF{Input: x[i], Cos: cos[i], Sin: sin[i]}
	})
	if err != nil {
		return err
	}
	return p.close(name, out[0])
}

func caseSDPA(p *Pair) error {
	r := rand.New(rand.NewPCG(33, 34))
	k, err := newKV(p, r, 2, 8, 4, 0)
	if err != nil {
		return err
	}
	// the V cache: another [blocks, heads, bs, D] of random values
	v, err := p.allocWrite(r, k.cache[0].Spec, 1)
	if err != nil {
		return err
	}
	q, err := p.allocWrite(r, dram([]int{1, 2, 4, 64}, tt.BF16, tt.Tile), 1)
	if err != nil {
		return err
	}
	cur, err := p.alloc(dram([]int{2}, tt.INT32, tt.RowMajor))
	if err != nil {
		return err
	}
	if err := p.write(cur, tt.HostInt32([]int{2}, tt.RowMajor, []int32{40, 100})); err != nil {
		return err
	}
	const name = "paged_scaled_dot_product_attention_decode"
	out, err := p.allocOp(name, func(i int) tt.Op {
		return tt.PagedSDPADecode{Q: q[i], K: k.cache[i], V: v[i], PageTable: k.pt[i], CurPos: cur[i]}
	})
	if err != nil {
		return err
	}
	return p.close(name, out[0])
}
