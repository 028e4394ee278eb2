package ref

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/stretchr/testify/require"
)

var (
	tinyMu sync.Mutex
	tinyW  = map[uint64]*qwen3.Weights{}
)

func tinyWeights(t testing.TB, seed uint64) *qwen3.Weights {
	t.Helper()
	tinyMu.Lock()
	defer tinyMu.Unlock()
	if w, ok := tinyW[seed]; ok {
		return w
	}
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := qwen3.Synth(cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	tinyW[seed] = w
	return w
}

func newTiny(t testing.TB, seed uint64, opt Options) *Decoder {
	t.Helper()
	d, err := New(tinyWeights(t, seed), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func seqTable(first, n int) []int32 {
	b := make([]int32, n)
	for i := range b {
		b[i] = int32(first + i)
	}
	return b
}

// promptTokens is a deterministic prompt of length n over the tiny vocab.
func promptTokens(n, salt int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((i*37 + salt*101 + 3) % 512)
	}
	return p
}

func sameOutput(t *testing.T, what string, got, want qwen3.Output) {
	t.Helper()
	if got.Token != want.Token || got.Pos != want.Pos {
		t.Fatalf("%s: token/pos %d@%d, want %d@%d", what, got.Token, got.Pos, want.Token, want.Pos)
	}
	if len(got.Logits) != len(want.Logits) {
		t.Fatalf("%s: %d logits, want %d", what, len(got.Logits), len(want.Logits))
	}
	for i := range got.Logits {
		if math.Float32bits(got.Logits[i]) != math.Float32bits(want.Logits[i]) {
			t.Fatalf("%s pos %d: logit %d = %v, want %v", what, got.Pos, i, got.Logits[i], want.Logits[i])
		}
	}
}

// decodeAll feeds tokens one by one with Decode (no prefill) and returns
// every output.
func decodeAll(t *testing.T, d *Decoder, seq qwen3.SeqID, tokens []int32, blocks []int32) []qwen3.Output {
	t.Helper()
	var outs []qwen3.Output
	for pos, tok := range tokens {
		o, err := d.Decode([]qwen3.Step{{Seq: seq, Token: tok, Pos: pos, Blocks: blocks}})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o[0])
	}
	return outs
}

// generate prefills prompt then decodes steps greedy tokens; it returns
// all outputs (prompt positions then generated ones).
func generate(t *testing.T, d *Decoder, seq qwen3.SeqID, prompt []int32, blocks []int32, steps int) []qwen3.Output {
	t.Helper()
	outs, err := d.Prefill(qwen3.Prefill{Seq: seq, Tokens: prompt, Blocks: blocks})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < steps; i++ {
		last := outs[len(outs)-1]
		o, err := d.Decode([]qwen3.Step{{Seq: seq, Token: last.Token, Pos: last.Pos + 1, Blocks: blocks}})
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o[0])
	}
	return outs
}

// fedTokens is the token at each position of a generate run.
func fedTokens(prompt []int32, outs []qwen3.Output) []int32 {
	toks := slices.Clone(prompt)
	for i := len(prompt); i < len(outs); i++ {
		toks = append(toks, outs[i-1].Token)
	}
	return toks
}

func TestPrefillThenDecodeEqualsTokenByToken(t *testing.T) {
	prompt := promptTokens(40, 1) // crosses the first 32-position block
	a := newTiny(t, 1, Options{BlockSize: 32, NumBlocks: 8})
	outs := generate(t, a, 7, prompt, seqTable(0, 3), 30)
	b := newTiny(t, 1, Options{BlockSize: 32, NumBlocks: 8})
	ref := decodeAll(t, b, 7, fedTokens(prompt, outs), seqTable(4, 3))
	for i := range outs {
		sameOutput(t, "prefill+decode vs decode", outs[i], ref[i])
	}
}

func TestNonContiguousBlockTable(t *testing.T) {
	for _, bs := range []int{32, 64} {
		t.Run(fmt.Sprintf("bs=%d", bs), func(t *testing.T) {
			prompt := promptTokens(3*bs/2, 2)
			a := newTiny(t, 1, Options{BlockSize: bs, NumBlocks: 12})
			outs := generate(t, a, 1, prompt, []int32{0, 1, 2, 3}, 2*bs)
			b := newTiny(t, 1, Options{BlockSize: bs, NumBlocks: 12})
			perm := []int32{11, 3, 7, 0}
			outs2 := generate(t, b, 1, prompt, perm, 2*bs)
			for i := range outs {
				sameOutput(t, "permuted table", outs2[i], outs[i])
			}
			// The cache really is laid out by the table: block 11 of b
			// holds what block 0 of a holds.
			ka, _ := a.KV().Layer(1)
			kb, _ := b.KV().Layer(1)
			per := a.KV().LayerSize() / 12
			if !slices.Equal(ka[0:per], kb[11*per:12*per]) || !slices.Equal(ka[3*per:4*per], kb[0:per]) {
				t.Fatal("KV blocks are not where the table says")
			}
		})
	}
}

func TestBatchIndependence(t *testing.T) {
	const steps = 40
	solo := newTiny(t, 1, Options{BlockSize: 32, NumBlocks: 16})
	want := generate(t, solo, 0, promptTokens(5, 0), seqTable(0, 3), steps)

	// Three threads: the batch's 4·2 (sequence, kv head) attention items
	// split unevenly over the pool's parts.
	d := newTiny(t, 1, Options{BlockSize: 32, NumBlocks: 16, Threads: 3})
	// Three other sequences with other prompts and positions.
	type seqState struct {
		id     qwen3.SeqID
		blocks []int32
		last   qwen3.Output
	}
	var others []*seqState
	for i := 1; i <= 3; i++ {
		blocks := seqTable(4*i, 3)
		outs, err := d.Prefill(qwen3.Prefill{Seq: qwen3.SeqID(i), Tokens: promptTokens(3+7*i, i), Blocks: blocks})
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, &seqState{qwen3.SeqID(i), blocks, outs[len(outs)-1]})
	}
	mine := seqTable(0, 3)
	outs, err := d.Prefill(qwen3.Prefill{Seq: 0, Tokens: promptTokens(5, 0), Blocks: mine})
	if err != nil {
		t.Fatal(err)
	}
	for i := range outs {
		sameOutput(t, "prefill", outs[i], want[i])
	}
	last := outs[len(outs)-1]
	for s := 0; s < steps; s++ {
		var batch []qwen3.Step
		me := qwen3.Step{Seq: 0, Token: last.Token, Pos: last.Pos + 1, Blocks: mine}
		for _, o := range others {
			batch = append(batch, qwen3.Step{Seq: o.id, Token: o.last.Token, Pos: o.last.Pos + 1, Blocks: o.blocks})
		}
		at := s % 4 // my place in the batch moves around
		batch = slices.Insert(batch, at, me)
		res, err := d.Decode(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range batch {
			if res[i].Seq != st.Seq || res[i].Pos != st.Pos {
				t.Fatalf("output %d is for seq %d pos %d, want %d %d", i, res[i].Seq, res[i].Pos, st.Seq, st.Pos)
			}
			for _, o := range others {
				if o.id == st.Seq {
					o.last = res[i]
				}
			}
		}
		last = res[at]
		sameOutput(t, fmt.Sprintf("batched step %d", s), last, want[5+s])
	}
}

func TestThreadsInvariant(t *testing.T) {
	prompt := promptTokens(9, 3)
	run := func(threads int) []qwen3.Output {
		d := newTiny(t, 2, Options{BlockSize: 32, NumBlocks: 4, Threads: threads})
		return generate(t, d, 0, prompt, seqTable(0, 3), 40)
	}
	base := run(1)
	for _, threads := range []int{2, 3, 7} {
		got := run(threads)
		for i := range base {
			sameOutput(t, fmt.Sprintf("threads=%d", threads), got[i], base[i])
		}
	}
	old := runtime.GOMAXPROCS(1)
	one := run(0)
	one2 := run(2)
	runtime.GOMAXPROCS(2)
	two := run(0)
	runtime.GOMAXPROCS(old)
	for i := range base {
		sameOutput(t, "GOMAXPROCS=1", one[i], base[i])
		sameOutput(t, "GOMAXPROCS=1 threads=2", one2[i], base[i])
		sameOutput(t, "GOMAXPROCS=2", two[i], base[i])
	}
}

// Batched decoding does not depend on the threads: every output and the
// whole cache are the same bit for bit on 1, 2 and 3 threads, so that the
// per-slot stages (split by slot) and the attention items (split by
// sequence and kv head) fall on parts unevenly, at batch 5 and 8.
func TestBatchThreadsInvariant(t *testing.T) {
	const steps = 12
	for _, batch := range []int{5, 8} {
		run := func(threads int) ([][]qwen3.Output, *KVStore) {
			d := newTiny(t, 3, Options{BlockSize: 32, NumBlocks: 2 * batch, Threads: threads})
			var res [][]qwen3.Output
			for s := 0; s < steps; s++ {
				var b []qwen3.Step
				for i := 0; i < batch; i++ {
					pos := 3*i + s // sequences at different positions
					b = append(b, qwen3.Step{Seq: qwen3.SeqID(i), Token: promptTokens(pos+1, i)[pos],
						Pos: pos, Blocks: seqTable(2*i, 2)})
				}
				outs, err := d.Decode(b)
				if err != nil {
					t.Fatal(err)
				}
				res = append(res, outs)
			}
			return res, d.KV()
		}
		base, kv := run(1)
		for _, threads := range []int{2, 3} {
			got, kv2 := run(threads)
			for s := range base {
				for i := range base[s] {
					sameOutput(t, fmt.Sprintf("batch=%d threads=%d step %d seq %d", batch, threads, s, i), got[s][i], base[s][i])
				}
			}
			for l := range tinyWeights(t, 3).Layers {
				k1, v1 := kv.Layer(l)
				k2, v2 := kv2.Layer(l)
				if !slices.Equal(k1, k2) || !slices.Equal(v1, v2) {
					t.Fatalf("batch=%d threads=%d: layer %d cache differs", batch, threads, l)
				}
			}
		}
	}
}

// Block boundaries: a paged decoder of block size 32 or 64 equals the
// independent contiguous implementation (naive, canonical order) bit for
// bit at positions k·32−1, k·32, k·32+1.
func TestBlockBoundariesAgainstNaive(t *testing.T) {
	w := tinyWeights(t, 1)
	const last = 3*32 + 1
	toks := promptTokens(last+1, 4)
	nv := newNaive(w, laneDot)
	want := make([][]float32, len(toks))
	for pos, tok := range toks {
		want[pos] = nv.step(tok, pos)
	}
	check := map[int]bool{}
	for k := 1; k <= 3; k++ {
		check[k*32-1], check[k*32], check[k*32+1] = true, true, true
	}
	for _, bs := range []int{32, 64} {
		d := newTiny(t, 1, Options{BlockSize: bs, NumBlocks: 8})
		blocks := []int32{6, 1, 4, 2} // non-contiguous
		for pos, tok := range toks {
			o, err := d.Decode([]qwen3.Step{{Seq: 3, Token: tok, Pos: pos, Blocks: blocks}})
			if err != nil {
				t.Fatal(err)
			}
			if !check[pos] && pos != 0 {
				continue
			}
			for i, l := range o[0].Logits {
				if math.Float32bits(l) != math.Float32bits(want[pos][i]) {
					t.Fatalf("bs=%d pos=%d logit %d: %v, naive %v", bs, pos, i, l, want[pos][i])
				}
			}
			if o[0].Token != qwen3.Argmax(want[pos]) {
				t.Fatalf("bs=%d pos=%d token %d, naive %d", bs, pos, o[0].Token, qwen3.Argmax(want[pos]))
			}
		}
	}
}

func kvSnapshot(d *Decoder) []bf16.BF16 {
	var all []bf16.BF16
	for l := range d.cfg.NumHiddenLayers {
		k, v := d.KV().Layer(l)
		all = append(all, k...)
		all = append(all, v...)
	}
	return all
}

func TestErrors(t *testing.T) {
	d := newTiny(t, 1, Options{BlockSize: 32, NumBlocks: 4})
	if _, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: []int32{1, 2}, Blocks: []int32{0}}); err != nil {
		t.Fatal(err)
	}
	before := kvSnapshot(d)
	ok := qwen3.Step{Seq: 2, Token: 5, Pos: 0, Blocks: []int32{1}}
	step := func(mod func(*qwen3.Step)) qwen3.Step { s := ok; mod(&s); return s }
	cases := []struct {
		name string
		call func() error
	}{
		{"duplicate seq in batch", func() error {
			_, err := d.Decode([]qwen3.Step{ok, step(func(s *qwen3.Step) { s.Blocks = []int32{2} })})
			return err
		}},
		{"negative pos", func() error { _, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Pos = -1 })}); return err }},
		{"table does not cover pos", func() error {
			_, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Pos = 32 })})
			return err
		}},
		{"empty table", func() error {
			_, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Blocks = nil })})
			return err
		}},
		{"token too big", func() error {
			_, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Token = 512 })})
			return err
		}},
		{"token negative", func() error { _, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Token = -1 })}); return err }},
		{"block id too big", func() error {
			_, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Blocks = []int32{4} })})
			return err
		}},
		{"block id negative", func() error {
			_, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Blocks = []int32{-1} })})
			return err
		}},
		{"earlier block id bad", func() error {
			_, err := d.Decode([]qwen3.Step{step(func(s *qwen3.Step) { s.Pos, s.Blocks = 40, []int32{9, 1} })})
			return err
		}},
		{"bad entry after a good one", func() error {
			_, err := d.Decode([]qwen3.Step{ok, {Seq: 3, Token: 1, Pos: 0, Blocks: []int32{-5}}})
			return err
		}},
		{"prefill live seq", func() error {
			_, err := d.Prefill(qwen3.Prefill{Seq: 1, Tokens: []int32{1}, Blocks: []int32{2}})
			return err
		}},
		{"prefill empty", func() error { _, err := d.Prefill(qwen3.Prefill{Seq: 9, Blocks: []int32{2}}); return err }},
		{"prefill table short", func() error {
			_, err := d.Prefill(qwen3.Prefill{Seq: 9, Tokens: promptTokens(33, 0), Blocks: []int32{2}})
			return err
		}},
		{"prefill bad token", func() error {
			_, err := d.Prefill(qwen3.Prefill{Seq: 9, Tokens: []int32{1, 600}, Blocks: []int32{2}})
			return err
		}},
		{"prefill bad block", func() error {
			_, err := d.Prefill(qwen3.Prefill{Seq: 9, Tokens: []int32{1}, Blocks: []int32{100}})
			return err
		}},
		{"finish unknown", func() error { return d.Finish(42) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic: %v", r)
					}
				}()
				err = c.call()
			}()
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			if !slices.Equal(before, kvSnapshot(d)) {
				t.Fatal("a rejected call changed the KV cache")
			}
		})
	}
	// Still usable; finish works once.
	if _, err := d.Decode([]qwen3.Step{{Seq: 1, Token: 3, Pos: 2, Blocks: []int32{0}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Finish(1); err != nil {
		t.Fatal(err)
	}
	if err := d.Finish(1); err == nil {
		t.Fatal("second finish: no error")
	}
	if out, err := d.Decode(nil); err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v %v", out, err)
	}
	d.Close()
	d.Close()
	if _, err := d.Decode([]qwen3.Step{ok}); err == nil {
		t.Fatal("decode after close: no error")
	}
	if _, err := d.Prefill(qwen3.Prefill{Seq: 5, Tokens: []int32{1}, Blocks: []int32{0}}); err == nil {
		t.Fatal("prefill after close: no error")
	}
}

func TestNewErrors(t *testing.T) {
	w := tinyWeights(t, 1)
	bad := *w
	bad.Layers = slices.Clone(w.Layers)
	bad.Layers[1].K = bad.Layers[1].K[:10]
	noLayers := *w
	noLayers.Layers = nil
	badCfg := *w
	badCfg.Config.NumKeyValueHeads = 3
	cases := []struct {
		name string
		w    *qwen3.Weights
		opt  Options
	}{
		{"nil weights", nil, Options{}},
		{"short tensor", &bad, Options{}},
		{"missing layers", &noLayers, Options{}},
		{"heads not multiple of kv heads", &badCfg, Options{}},
		{"negative block size", w, Options{BlockSize: -1}},
		{"negative threads", w, Options{Threads: -2}},
	}
	for _, c := range cases {
		d, err := New(c.w, c.opt)
		if err == nil {
			d.Close()
			t.Errorf("%s: no error", c.name)
		}
	}
	d, err := New(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.BlockSize() != DefaultBlockSize || d.NumBlocks() != DefaultNumBlocks || d.Config() != w.Config {
		t.Errorf("defaults: block size %d, blocks %d", d.BlockSize(), d.NumBlocks())
	}
}

// The decode hot path does not allocate apart from the returned outputs.
func TestDecodeAllocations(t *testing.T) {
	d := newTiny(t, 1, Options{BlockSize: 32, NumBlocks: 8, Threads: 2})
	steps := []qwen3.Step{{Seq: 0, Token: 1, Blocks: seqTable(0, 4)}, {Seq: 1, Token: 2, Blocks: seqTable(4, 4)}}
	if _, err := d.Decode(steps); err != nil {
		t.Fatal(err)
	}
	pos := 1
	n := testing.AllocsPerRun(20, func() {
		for i := range steps {
			steps[i].Pos = pos
		}
		pos++
		if _, err := d.Decode(steps); err != nil {
			t.Fatal(err)
		}
	})
	// outputs slice + one logits slice per sequence
	if n > 1+float64(len(steps)) {
		t.Fatalf("decode allocates %v times per step", n)
	}
}

// Options.Products is told every matrix job of a forward pass, in order,
// with the matrices grouped as documented and each output row MatRows'
// bits for its input; the decoder's results do not change.
func TestProductsAreMatRows(t *testing.T) {
	w := tinyWeights(t, 3)
	c := w.Config
	type job struct {
		ws   [][]bf16.BF16
		cols int
	}
	var jobs []job
	checked := 0
	opt := Options{BlockSize: 32, NumBlocks: 8, Threads: 2}
	opt.Products = func(ws [][]bf16.BF16, cols int, xs [][]float32, outs [][][]bf16.BF16) {
		jobs = append(jobs, job{slices.Clone(ws), cols})
		for m, mat := range ws {
			want := make([]bf16.BF16, len(mat)/cols)
			for b, xf := range xs {
				x := make([]bf16.BF16, cols)
				for i, f := range xf[:cols] {
					x[i] = bf16.FromFloat32(f)
				}
				MatVec(want, mat, x)
				require.Equal(t, want, outs[m][b], "job %d, matrix %d, input %d: outs is not MatVec's", len(jobs)-1, m, b)
				checked++
			}
		}
	}
	with, err := New(w, opt)
	require.NoError(t, err)
	defer with.Close()
	without := newTiny(t, 3, Options{BlockSize: 32, NumBlocks: 8, Threads: 2})
	p := qwen3.Prefill{Seq: 0, Tokens: promptTokens(3, 1), Blocks: seqTable(0, 4)}
	steps := []qwen3.Step{{Seq: 0, Token: 5, Pos: 3, Blocks: seqTable(0, 4)}, {Seq: 1, Token: 9, Pos: 0, Blocks: seqTable(4, 4)}}
	var outs [2][]qwen3.Output
	for i, d := range []*Decoder{with, without} {
		_, err := d.Prefill(p)
		require.NoError(t, err)
		outs[i], err = d.Decode(steps)
		require.NoError(t, err)
	}
	require.Equal(t, outs[1], outs[0], "outputs differ with Products set")
	// Four passes (three prompt positions, one decode step), each of
	// layers×4 jobs and the lm_head.
	perPass := []job{}
	for l := range w.Layers {
		L := &w.Layers[l]
		perPass = append(perPass, job{[][]bf16.BF16{L.Q, L.K, L.V}, c.HiddenSize}, job{[][]bf16.BF16{L.O}, c.QDim()},
			job{[][]bf16.BF16{L.Gate, L.Up}, c.HiddenSize}, job{[][]bf16.BF16{L.Down}, c.IntermediateSize})
	}
	perPass = append(perPass, job{[][]bf16.BF16{w.LMHead}, c.HiddenSize})
	require.Len(t, jobs, 4*len(perPass))
	for i, j := range jobs {
		e := perPass[i%len(perPass)]
		require.Equal(t, e.cols, j.cols, "job %d: columns", i)
		require.Len(t, j.ws, len(e.ws), "job %d: matrices", i)
		for m := range j.ws {
			require.True(t, &j.ws[m][0] == &e.ws[m][0] && len(j.ws[m]) == len(e.ws[m]), "job %d: matrix %d is not the weight it should be", i, m)
		}
	}
	// Five inputs in all (the prompt's three, the step's two), each through
	// seven matrices a layer and the lm_head.
	require.Equal(t, 5*(7*len(w.Layers)+1), checked, "output rows checked")
}
