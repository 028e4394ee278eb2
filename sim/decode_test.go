package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// miniEngine runs a tiny Qwen3 decode step as a sequence of device ops (the
// decomposition a tt_transformers-style engine uses). It exists to check,
// end to end, that the simulator's ops compose to ref.Decoder bit for bit,
// and to time one step.
type miniEngine struct {
	d      *Device
	cfg    qwen3.Config
	B, W   int
	bs     int
	fused  bool // K and V updates in one paged_fused_update_cache (V on cores B..2B-1)
	embed  tt.Tensor
	cosT   tt.Tensor
	sinT   tt.Tensor
	norm   tt.Tensor
	lm     tt.Tensor
	layers []miniLayer
	// inputs
	tok, pos, rope, pt tt.Tensor
	// activations
	x, o, qkv, cat, g, u, cos, sin, logits, next tt.Tensor
}

type miniLayer struct {
	inorm, wqkv, qn, kn, wo, post, gate, up, down tt.Tensor
	kc, vc                                        tt.Tensor
}

func hfWeight(t testing.TB, d *Device, rows, cols int, w []bf16.BF16) tt.Tensor {
	return cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, rows, cols), w)
}

func normWeight(t testing.TB, d *Device, w []bf16.BF16) tt.Tensor {
	return cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 1, 1, len(w)/32, 32), w)
}

func newMiniEngine(t testing.TB, w *qwen3.Weights, B, W, bs, blocks int, o Options) *miniEngine {
	c := w.Config
	d := cDev(t, o)
	e := &miniEngine{d: d, cfg: c, B: B, W: W, bs: bs}
	h, hd, qd, kvd, in := c.HiddenSize, c.HeadDim, c.QDim(), c.KVDim(), c.IntermediateSize
	e.embed = cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, c.VocabSize, h), w.Embed)
	const maxPos = 512
	cos, sin := make([]bf16.BF16, maxPos*hd), make([]bf16.BF16, maxPos*hd)
	for p := 0; p < maxPos; p++ {
		ref.RopeTable(c.RopeTheta, hd, p, cos[p*hd:(p+1)*hd], sin[p*hd:(p+1)*hd])
	}
	e.cosT = cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, maxPos, hd), cos)
	e.sinT = cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, maxPos, hd), sin)
	e.norm = normWeight(t, d, w.Norm)
	e.lm = hfWeight(t, d, c.VocabSize, h, w.LMHead)
	zero := make([]bf16.BF16, blocks*c.NumKeyValueHeads*bs*hd)
	for _, L := range w.Layers {
		fused := slices.Concat(L.Q, L.K, L.V)
		e.layers = append(e.layers, miniLayer{
			inorm: normWeight(t, d, L.InputNorm), wqkv: hfWeight(t, d, qd+2*kvd, h, fused),
			qn: normWeight(t, d, L.QNorm), kn: normWeight(t, d, L.KNorm),
			wo: hfWeight(t, d, h, qd, L.O), post: normWeight(t, d, L.PostNorm),
			gate: hfWeight(t, d, in, h, L.Gate), up: hfWeight(t, d, in, h, L.Up), down: hfWeight(t, d, h, in, L.Down),
			kc: cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, c.NumKeyValueHeads, bs, hd), zero),
			vc: cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, c.NumKeyValueHeads, bs, hd), zero),
		})
	}
	al := func(s tt.Spec) tt.Tensor { return cAlloc(t, d, s) }
	bf := func(shape ...int) tt.Tensor { return al(cSpec(tt.BF16, tt.Tile, shape...)) }
	// Ids padded to whole tiles, so that embedding into the TILE x, cos and
	// sin takes ttnn's fused kernel (as qwen3.Engine: tokens [1,1,1,32],
	// rope index 32 copies a user).
	e.tok = al(cSpec(tt.UINT32, tt.RowMajor, 1, 1, 1, miniPad(B)))
	e.rope = al(cSpec(tt.UINT32, tt.RowMajor, 1, 1, 1, B*tt.TileSize))
	e.pos = al(cSpec(tt.INT32, tt.RowMajor, B))
	e.pt = al(cSpec(tt.INT32, tt.RowMajor, B, W))
	e.x, e.o = bf(1, 1, B, h), bf(1, 1, B, h)
	e.qkv = bf(1, 1, B, qd+2*kvd)
	e.cat = al(tt.Spec{Shape: []int{1, 1, B, qd}, DType: tt.BF16, Layout: tt.Tile,
		Memory: tt.L1WidthSharded(c.NumAttentionHeads, [2]int{32, hd})})
	e.g, e.u = bf(1, 1, B, in), bf(1, 1, B, in)
	e.cos, e.sin = bf(1, B, 1, hd), bf(1, B, 1, hd)
	e.logits = bf(1, 1, B, c.VocabSize)
	e.next = al(cSpec(tt.UINT32, tt.RowMajor, 1, 1, 1, B))
	return e
}

// forward runs one decode step's ops. traced: the host-free step (argmax
// writes the next token into the token input, plus_one advances cur_pos
// (skipping -1) and the rope index). keep: the outputs the device allocated
// stay allocated (a capture: the trace writes them); otherwise they are
// freed at the end. It returns the ops run, for counting.
func (e *miniEngine) forward(t testing.TB, traced, keep bool) int {
	t.Helper()
	c := e.cfg
	eps := float32(c.RMSNormEps)
	n := 0
	var tmp []tt.Tensor
	run := func(op tt.Op) []tt.Tensor {
		t.Helper()
		outs, err := e.d.Run(op)
		if err != nil {
			t.Fatalf("%s: %v", op.Name(), err)
		}
		n++
		tmp = append(tmp, outs...)
		return outs
	}
	one := func(op tt.Op) tt.Tensor { t.Helper(); return run(op)[0] }
	run(tt.Embedding{Input: e.tok, Weight: e.embed, Output: e.x})
	run(tt.Embedding{Input: e.rope, Weight: e.cosT, Output: e.cos})
	run(tt.Embedding{Input: e.rope, Weight: e.sinT, Output: e.sin})
	rows := tt.L1HeightSharded(e.B, [2]int{32, c.HeadDim})
	cos := one(tt.ToMemoryConfig{Input: e.cos, Memory: rows})
	sin := one(tt.ToMemoryConfig{Input: e.sin, Memory: rows})
	norm := func(x, w tt.Tensor) tt.Tensor {
		xi := one(tt.ToMemoryConfig{Input: x, Memory: tt.L1Interleaved})
		y := one(tt.RMSNorm{Input: xi, Weight: w, Epsilon: eps})
		return one(tt.ToMemoryConfig{Input: y, Memory: x.Spec.Memory})
	}
	for _, L := range e.layers {
		pt := e.pt
		idx := e.pos
		a := one(tt.RMSNorm{Input: e.x, Weight: L.inorm, Epsilon: eps})
		run(tt.Linear{Input: a, Weight: L.wqkv, Output: e.qkv, TransposeB: true})
		qkv := run(tt.NLPCreateQKVHeadsDecode{Input: e.qkv, NumHeads: c.NumAttentionHeads, NumKVHeads: c.NumKeyValueHeads})
		q3 := one(tt.RotaryEmbeddingHF{Input: norm(qkv[0], L.qn), Cos: cos, Sin: sin})
		k3 := one(tt.RotaryEmbeddingHF{Input: norm(qkv[1], L.kn), Cos: cos, Sin: sin})
		if e.fused {
			v := one(tt.ToMemoryConfig{Input: qkv[2], Memory: tt.L1HeightShardedAt(e.B, e.B, [2]int{32, c.HeadDim})})
			run(tt.PagedFusedUpdateCache{Cache1: L.kc, Input1: k3, Cache2: L.vc, Input2: v, UpdateIdxs: &idx, PageTable: &pt})
		} else {
			run(tt.PagedUpdateCache{Cache: L.kc, Input: k3, UpdateIdxs: &idx, PageTable: &pt})
			run(tt.PagedUpdateCache{Cache: L.vc, Input: qkv[2], UpdateIdxs: &idx, PageTable: &pt})
		}
		// GQA: the SDPA output in DRAM, resharded for concat heads.
		attnD := one(tt.PagedSDPADecode{Q: q3, K: L.kc, V: L.vc, PageTable: e.pt, CurPos: e.pos, Memory: tt.DRAMInterleaved})
		attn := one(tt.ToMemoryConfig{Input: attnD, Memory: q3.Spec.Memory})
		run(tt.ConcatHeads{Input: attn, Output: e.cat, NumHeads: c.NumAttentionHeads})
		run(tt.Linear{Input: e.cat, Weight: L.wo, Output: e.o, TransposeB: true})
		run(tt.Add{A: e.x, B: e.o, Output: e.x})
		a2 := one(tt.RMSNorm{Input: e.x, Weight: L.post, Epsilon: eps})
		run(tt.Linear{Input: a2, Weight: L.gate, Output: e.g, TransposeB: true})
		run(tt.Linear{Input: a2, Weight: L.up, Output: e.u, TransposeB: true})
		run(tt.SiluMul{Gate: e.g, Up: e.u, Output: e.g})
		run(tt.Linear{Input: e.g, Weight: L.down, Output: e.o, TransposeB: true})
		run(tt.Add{A: e.x, B: e.o, Output: e.x})
	}
	a := one(tt.RMSNorm{Input: e.x, Weight: e.norm, Epsilon: eps})
	run(tt.Linear{Input: a, Weight: e.lm, Output: e.logits, TransposeB: true})
	if traced {
		run(tt.Argmax{Input: e.logits, Output: e.tok})
		run(tt.PlusOne{Input: e.pos, SkipNegativeEntries: true})
		run(tt.PlusOne{Input: e.rope})
	} else {
		run(tt.Argmax{Input: e.logits, Output: e.next})
	}
	if !keep {
		for _, x := range tmp {
			if err := e.d.Free(x); err != nil {
				t.Fatal(err)
			}
		}
	}
	return n
}

func (e *miniEngine) step(t testing.TB, toks []uint32, pos []int32, table []int32) {
	d := e.d
	rope := make([]uint32, e.B)
	for i, p := range pos {
		rope[i] = uint32(max(p, 0))
	}
	for _, w := range []struct {
		dst tt.Tensor
		h   tt.HostTensor
	}{
		{e.tok, tt.HostUint32([]int{1, 1, 1, miniPad(e.B)}, tt.RowMajor, miniToks(toks))},
		{e.rope, tt.HostUint32([]int{1, 1, 1, e.B * tt.TileSize}, tt.RowMajor, miniRope(rope))},
		{e.pos, tt.HostInt32([]int{e.B}, tt.RowMajor, pos)},
		{e.pt, tt.HostInt32([]int{e.B, e.W}, tt.RowMajor, table)},
	} {
		if err := d.WriteHost(w.dst, w.h); err != nil {
			t.Fatal(err)
		}
	}
	e.forward(t, false, false)
}

// useFused makes the engine update K and V with one
// paged_fused_update_cache (§1.5), V's input resharded on cores B..2B-1.
func (e *miniEngine) useFused() { e.fused = true }

// Engine-on-sim equals ref.Decoder bit for bit: 4 slots that join at
// different steps (inactive slots carry -1), positions crossing block
// boundaries, permuted block tables, greedy tokens fed back; with separate
// K/V updates and with paged_fused_update_cache.
func TestMiniEngineMatchesRefDecoder(t *testing.T) {
	for _, fused := range []bool{false, true} {
		testMiniEngineMatchesRef(t, fused)
	}
}

func testMiniEngineMatchesRef(t *testing.T, fused bool) {
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := qwen3.Synth(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	const B, W, bs, blocks, steps = 4, 4, 32, 20, 75
	rd, err := ref.New(w, ref.Options{BlockSize: bs, NumBlocks: blocks, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	e := newMiniEngine(t, w, B, W, bs, blocks, Options{Strict: true})
	if fused {
		e.useFused()
	}
	r := rand.New(rand.NewPCG(1, 1))
	perm := r.Perm(blocks)
	table := make([]int32, B*W)
	for i := range table {
		table[i] = int32(perm[i])
	}
	start := []int{0, 3, 10, 40}
	toks := make([]uint32, B)
	for b := range toks {
		toks[b] = uint32(r.IntN(cfg.VocabSize))
	}
	for s := 0; s < steps; s++ {
		pos := make([]int32, B)
		var batch []qwen3.Step
		var slots []int
		for b := 0; b < B; b++ {
			p := s - start[b]
			if p < 0 {
				pos[b] = -1
				continue
			}
			pos[b] = int32(p)
			batch = append(batch, qwen3.Step{Seq: qwen3.SeqID(b), Token: int32(toks[b]), Pos: p, Blocks: table[b*W : (b+1)*W]})
			slots = append(slots, b)
		}
		outs, err := rd.Decode(batch)
		if err != nil {
			t.Fatal(err)
		}
		e.step(t, toks, pos, table)
		logits := cDown(t, e.d, e.logits)
		next := cDownI32(t, e.d, e.next)
		for i, o := range outs {
			b := slots[i]
			got := logits[b*cfg.VocabSize : (b+1)*cfg.VocabSize]
			for j, f := range o.Logits {
				if got[j].Float32() != f && !(f != f && got[j].IsNaN()) {
					t.Fatalf("step %d slot %d pos %d: logit %d = %v, ref %v", s, b, pos[b], j, got[j].Float32(), f)
				}
			}
			if next[b] != o.Token {
				t.Fatalf("step %d slot %d: token %d, ref %d", s, b, next[b], o.Token)
			}
			toks[b] = uint32(o.Token)
		}
	}
	for _, f := range e.d.Findings() {
		t.Errorf("strict finding on a correct engine: %v", f)
	}
}

// BenchmarkTinyDecodeStep times one tiny-model decode step's ops on the
// simulator: batch 8, positions around 100, 2 layers, faithful and strict.
// Compare with BenchmarkTinyRefStep (the same step on ref.Decoder).
func BenchmarkTinyDecodeStep(b *testing.B) {
	cfg, _ := qwen3.Preset("tiny")
	w, err := qwen3.Synth(cfg, 7)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		o    Options
	}{{"faithful", Options{}}, {"strict", Options{Strict: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			const B, W, bs, blocks = 8, 8, 32, 64
			e := newMiniEngine(b, w, B, W, bs, blocks, mode.o)
			table := make([]int32, B*W)
			for i := range table {
				table[i] = int32(i)
			}
			toks := make([]uint32, B)
			pos := make([]int32, B)
			for i := range pos {
				pos[i] = int32(96 + i)
			}
			e.step(b, toks, pos, table)
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for i := 0; i < b.N; i++ {
				n = e.forward(b, false, false)
			}
			b.ReportMetric(float64(n), "ops/step")
		})
	}
}

// BenchmarkTinyRefStep is the same step (tiny model, batch 8, positions
// around 100) on ref.Decoder, single-threaded (the simulator runs on one
// goroutine) and with ref's default threads (GOMAXPROCS), for comparison
// with BenchmarkTinyDecodeStep.
func BenchmarkTinyRefStep(b *testing.B) {
	cfg, _ := qwen3.Preset("tiny")
	w, err := qwen3.Synth(cfg, 7)
	if err != nil {
		b.Fatal(err)
	}
	for _, threads := range []int{1, 0} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			const B, W, bs = 8, 8, 32
			rd, err := ref.New(w, ref.Options{BlockSize: bs, NumBlocks: B * W, Threads: threads})
			if err != nil {
				b.Fatal(err)
			}
			defer rd.Close()
			steps := make([]qwen3.Step, B)
			for i := range steps {
				tbl := make([]int32, W)
				for j := range tbl {
					tbl[j] = int32(i*W + j)
				}
				steps[i] = qwen3.Step{Seq: qwen3.SeqID(i), Token: int32(i), Pos: 96 + i, Blocks: tbl}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := rd.Decode(steps); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPagedKVDecode is the simulated throughput of the paged ops of
// one layer on the tiny shape (batch 8, 2 KV heads, 4 Q heads, head_dim 32,
// block 32, positions around 100): paged_update_cache for K and V, then
// paged SDPA decode; faithful and strict. ops/s counts the three ops.
func BenchmarkPagedKVDecode(b *testing.B) {
	for _, mode := range []struct {
		name string
		o    Options
	}{{"faithful", Options{}}, {"strict", Options{Strict: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			const B, HKV, HQ, D, bs, blocks, W = 8, 2, 4, 32, 32, 64, 8
			d := cDev(b, mode.o)
			r := rand.New(rand.NewPCG(1, 2))
			cache := func() tt.Tensor {
				return cUpload(b, d, cSpec(tt.BF16, tt.Tile, blocks, HKV, bs, D), cRand(r, blocks*HKV*bs*D, false))
			}
			kc, vc := cache(), cache()
			in := func() tt.Tensor {
				s := tt.Spec{Shape: []int{1, B, HKV, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})}
				return cUpload(b, d, s, cRand(r, B*HKV*D, false))
			}
			k, v := in(), in()
			q := cUpload(b, d, cSpec(tt.BF16, tt.Tile, 1, B, HQ, D), cRand(r, B*HQ*D, false))
			pos := make([]int32, B)
			for i := range pos {
				pos[i] = int32(96 + i)
			}
			cp := cUploadI32(b, d, cSpec(tt.INT32, tt.RowMajor, B), pos)
			tbl := make([]int32, B*W)
			for i, p := range r.Perm(blocks) {
				tbl[i] = int32(p)
			}
			pt := cUploadI32(b, d, cSpec(tt.INT32, tt.RowMajor, B, W), tbl)
			ops := []tt.Op{
				tt.PagedUpdateCache{Cache: kc, Input: k, UpdateIdxs: &cp, PageTable: &pt},
				tt.PagedUpdateCache{Cache: vc, Input: v, UpdateIdxs: &cp, PageTable: &pt},
				tt.PagedSDPADecode{Q: q, K: kc, V: vc, PageTable: pt, CurPos: cp},
			}
			runAll := func() {
				for _, op := range ops {
					outs, err := d.Run(op)
					if err != nil {
						b.Fatal(err)
					}
					for _, o := range outs {
						if err := d.Free(o); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			runAll()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				runAll()
			}
			b.ReportMetric(float64(b.N*len(ops))/b.Elapsed().Seconds(), "ops/s")
			if fs := d.Findings(); len(fs) != 0 {
				b.Fatalf("findings: %v", fs)
			}
		})
	}
}

// A captured host-free step replays to the same logits as ref.Decoder, step
// after step, with no host write; an inactive slot (-1) stays inactive.
func TestMiniEngineTraceReplayMatchesRef(t *testing.T) {
	cfg, _ := qwen3.Preset("tiny")
	w, err := qwen3.Synth(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	const B, W, bs, blocks = 3, 4, 32, 12
	rd, err := ref.New(w, ref.Options{BlockSize: bs, NumBlocks: blocks, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	e := newMiniEngine(t, w, B, W, bs, blocks, Options{Strict: true})
	table := []int32{4, 9, 1, 6, 7, 0, 11, 10, 2, 3, 5, 8}
	pos := []int32{28, -1, 61}
	toks := []uint32{17, 0, 300}
	// Prefix positions 0..pos-1 of the active slots through ref and the
	// device's caches (eager steps), so both hold the same KV.
	for p := 0; p < 61; p++ {
		var batch []qwen3.Step
		sp := []int32{-1, -1, -1}
		for _, b := range []int{0, 2} {
			if p < int(pos[b]) {
				sp[b] = int32(p)
				batch = append(batch, qwen3.Step{Seq: qwen3.SeqID(b), Token: int32(p % 50), Pos: p, Blocks: table[b*W : (b+1)*W]})
			}
		}
		if _, err := rd.Decode(batch); err != nil {
			t.Fatal(err)
		}
		e.step(t, []uint32{uint32(p % 50), 0, uint32(p % 50)}, sp, table)
	}
	// Warm (eager) host-free step, then capture.
	rope := make([]uint32, B)
	for i, p := range pos {
		rope[i] = uint32(max(p, 0))
	}
	for _, wr := range []struct {
		dst tt.Tensor
		h   tt.HostTensor
	}{
		{e.tok, tt.HostUint32([]int{1, 1, 1, miniPad(B)}, tt.RowMajor, miniToks(toks))},
		{e.rope, tt.HostUint32([]int{1, 1, 1, B * tt.TileSize}, tt.RowMajor, miniRope(rope))},
		{e.pos, tt.HostInt32([]int{B}, tt.RowMajor, pos)},
	} {
		if err := e.d.WriteHost(wr.dst, wr.h); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step int) {
		var batch []qwen3.Step
		for _, b := range []int{0, 2} {
			batch = append(batch, qwen3.Step{Seq: qwen3.SeqID(b), Token: int32(toks[b]), Pos: int(pos[b]), Blocks: table[b*W : (b+1)*W]})
		}
		outs, err := rd.Decode(batch)
		if err != nil {
			t.Fatal(err)
		}
		logits := cDown(t, e.d, e.logits)
		for i, b := range []int{0, 2} {
			for j, f := range outs[i].Logits {
				if logits[b*cfg.VocabSize+j].Float32() != f {
					t.Fatalf("step %d slot %d pos %d: logit %d differs from ref", step, b, pos[b], j)
				}
			}
			toks[b] = uint32(outs[i].Token)
			pos[b]++
		}
		gotPos := cDownI32(t, e.d, e.pos)
		gotTok := cDownI32(t, e.d, e.tok)
		for _, b := range []int{0, 2} {
			if gotPos[b] != pos[b] || uint32(gotTok[b]) != toks[b] {
				t.Fatalf("step %d slot %d: device pos/token %d/%d, want %d/%d", step, b, gotPos[b], gotTok[b], pos[b], toks[b])
			}
		}
		if gotPos[1] != -1 {
			t.Fatalf("inactive slot advanced to %d", gotPos[1])
		}
	}
	e.forward(t, true, false)
	check(0)
	id, err := e.d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	e.forward(t, true, true)
	if err := e.d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	hits, misses := e.d.ProgramCacheStats()
	for s := 1; s <= 40; s++ { // slot 0 crosses 32 and 64, slot 2 crosses 64 and 96
		if err := e.d.Execute(id); err != nil {
			t.Fatal(err)
		}
		check(s)
	}
	if h2, m2 := e.d.ProgramCacheStats(); h2 != hits || m2 != misses {
		t.Fatalf("replays touched the program cache: %d/%d -> %d/%d", hits, misses, h2, m2)
	}
	for _, f := range e.d.Findings() {
		t.Errorf("strict finding on a correct engine: %v", f)
	}
}

// miniPad is n rounded up to whole tiles.
func miniPad(n int) int { return (n + tt.TileSize - 1) / tt.TileSize * tt.TileSize }

// miniToks is toks padded with zeros to whole tiles.
func miniToks(toks []uint32) []uint32 {
	return append(append([]uint32(nil), toks...), make([]uint32, miniPad(len(toks))-len(toks))...)
}

// miniRope is each user's rope index 32 times (one tile row a user).
func miniRope(rope []uint32) []uint32 {
	out := make([]uint32, 0, len(rope)*tt.TileSize)
	for _, r := range rope {
		for range tt.TileSize {
			out = append(out, r)
		}
	}
	return out
}
