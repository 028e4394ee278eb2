package sim

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// Tests of the prefill ops (prefill.go) against the ref kernels and plain
// index arithmetic, on sizes off the tile (S not a multiple of 32) and with
// grouped-query attention 1:1, 2:1 and 4:1.

// prefillGeoms are (query heads, kv heads, S, D) cases.
var prefillGeoms = []struct{ h, kv, s, d int }{
	{4, 2, 40, 64},  // GQA 2:1, S = 32+8
	{8, 2, 70, 32},  // GQA 4:1, S = 64+6
	{2, 2, 33, 128}, // MHA, S = 32+1
	{4, 1, 5, 64},   // GQA 4:1, S < one tile
}

// pRun runs an Allocating op and returns its outputs.
func pRun(t testing.TB, d *Device, op tt.Op) []tt.Tensor {
	t.Helper()
	outs, err := d.Run(op)
	if err != nil {
		t.Fatalf("%s: %v", op.Name(), err)
	}
	return outs
}

func TestCreateHeadsPrefillSplitsColumns(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, g := range prefillGeoms {
		d := cDev(t, Options{Strict: true})
		w := (g.h + 2*g.kv) * g.d
		x := cRand(r, g.s*w, true)
		in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, g.s, w), x)
		outs := pRun(t, d, tt.NLPCreateQKVHeads{Input: in, NumHeads: g.h, NumKVHeads: g.kv, Memory: tt.DRAMInterleaved})
		if len(outs) != 3 {
			t.Fatalf("%d outputs", len(outs))
		}
		col := 0
		for i, o := range outs {
			heads := g.h
			if i > 0 {
				heads = g.kv
			}
			if want := cSpec(tt.BF16, tt.Tile, 1, heads, g.s, g.d); !o.Spec.Equal(want) {
				t.Fatalf("output %d spec %v, want %v", i, o.Spec, want)
			}
			got := cDown(t, d, o)
			want := make([]bf16.BF16, heads*g.s*g.d)
			for h := 0; h < heads; h++ {
				for s := 0; s < g.s; s++ {
					copy(want[(h*g.s+s)*g.d:(h*g.s+s+1)*g.d], x[s*w+col+h*g.d:])
				}
			}
			cSame(t, []string{"q", "k", "v"}[i], got, want)
			col += heads * g.d
		}
		if f := d.Findings(); len(f) != 0 {
			t.Fatalf("findings: %v", f)
		}
	}
}

// A tile copy: FLOAT32 passes bit for bit, and the padding rows of the
// input's last tile row travel with it (as the card's reader copies tiles).
func TestCreateHeadsPrefillCopiesTiles(t *testing.T) {
	d := cDev(t, Options{})
	const H, KV, S, D = 2, 1, 3, 32
	w := (H + 2*KV) * D
	in := cAlloc(t, d, cSpec(tt.FP32, tt.Tile, 1, 1, S, w))
	vals := make([]float32, S*w)
	for i := range vals {
		vals[i] = float32(i) + 0.25
	}
	if err := d.WriteHost(in, tt.HostFP32([]int{1, 1, S, w}, tt.Tile, vals)); err != nil {
		t.Fatal(err)
	}
	outs := pRun(t, d, tt.NLPCreateQKVHeads{Input: in, NumHeads: H, NumKVHeads: KV})
	for i, o := range outs {
		if o.Spec.DType != tt.FP32 || o.Spec.Memory != tt.DRAMInterleaved {
			t.Fatalf("output %d spec %v", i, o.Spec)
		}
	}
	h, err := d.ReadHost(outs[2]) // V: columns (H+KV)*D..
	if err != nil {
		t.Fatal(err)
	}
	got := h.Float32s()
	for s := 0; s < S; s++ {
		for e := 0; e < D; e++ {
			if want := vals[s*w+(H+KV)*D+e]; got[s*D+e] != want {
				t.Fatalf("v[%d][%d] = %v, want %v", s, e, got[s*D+e], want)
			}
		}
	}
}

func TestConcatHeadsPrefillJoinsHeads(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	for _, g := range prefillGeoms {
		d := cDev(t, Options{Strict: true})
		x := cRand(r, g.h*g.s*g.d, true)
		in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, g.h, g.s, g.d), x)
		out := cOut(t, d, tt.NLPConcatHeads{Input: in})
		if want := cSpec(tt.BF16, tt.Tile, 1, 1, g.s, g.h*g.d); !out.Spec.Equal(want) {
			t.Fatalf("output spec %v, want %v", out.Spec, want)
		}
		got := cDown(t, d, out)
		w := g.h * g.d
		want := make([]bf16.BF16, g.s*w)
		for s := 0; s < g.s; s++ {
			for h := 0; h < g.h; h++ {
				copy(want[s*w+h*g.d:s*w+(h+1)*g.d], x[(h*g.s+s)*g.d:])
			}
		}
		cSame(t, "concat", got, want)
		if f := d.Findings(); len(f) != 0 {
			t.Fatalf("findings: %v", f)
		}
	}
}

// ropeRows is the prefill cos/sin table, positions 0..n-1, [n][d].
func ropeRows(n, d int) (cos, sin []bf16.BF16) {
	cos, sin = make([]bf16.BF16, n*d), make([]bf16.BF16, n*d)
	for p := 0; p < n; p++ {
		ref.RopeTable(1e6, d, p, cos[p*d:(p+1)*d], sin[p*d:(p+1)*d])
	}
	return cos, sin
}

func TestRotaryPrefillMatchesRope(t *testing.T) {
	r := rand.New(rand.NewPCG(55, 56))
	for _, g := range prefillGeoms {
		d := cDev(t, Options{})
		x := cRand(r, g.h*g.s*g.d, true)
		in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, g.h, g.s, g.d), x)
		maxSeq := g.s + 37 // a longer table: rows 0..S-1 are used
		cos, sin := ropeRows(maxSeq, g.d)
		ct := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, maxSeq, g.d), cos)
		st := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, maxSeq, g.d), sin)
		out := cOut(t, d, tt.RotaryEmbeddingHF{Input: in, Cos: ct, Sin: st, Prefill: true})
		if !out.Spec.Equal(in.Spec) {
			t.Fatalf("output spec %v, want the input's %v", out.Spec, in.Spec)
		}
		got := cDown(t, d, out)
		want := make([]bf16.BF16, len(x))
		for h := 0; h < g.h; h++ {
			for s := 0; s < g.s; s++ {
				o := (h*g.s + s) * g.d
				ref.Rope(want[o:o+g.d], x[o:o+g.d], cos[s*g.d:(s+1)*g.d], sin[s*g.d:(s+1)*g.d])
			}
		}
		cSame(t, "rope prefill", got, want)
	}
}

// Prefill RoPE row s equals decode RoPE at position s, bit for bit, through
// the device's own decode path.
func TestRotaryPrefillEqualsDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(57, 58))
	const H, S, D = 4, 37, 64
	d := cDev(t, Options{})
	x := cRand(r, H*S*D, false)
	cos, sin := ropeRows(S, D)
	in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, H, S, D), x)
	ct := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, S, D), cos)
	st := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, S, D), sin)
	pre := cDown(t, d, cOut(t, d, tt.RotaryEmbeddingHF{Input: in, Cos: ct, Sin: st, Prefill: true}))
	// Decode: S users, user s at position s, its H heads.
	dx := make([]bf16.BF16, S*H*D)
	for s := 0; s < S; s++ {
		for h := 0; h < H; h++ {
			copy(dx[(s*H+h)*D:(s*H+h+1)*D], x[(h*S+s)*D:])
		}
	}
	hs := tt.Spec{Shape: []int{1, S, H, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(S, [2]int{32, D})}
	rows := tt.Spec{Shape: []int{1, S, 1, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(S, [2]int{32, D})}
	dec := cDown(t, d, cOut(t, d, tt.RotaryEmbeddingHF{Input: cUpload(t, d, hs, dx), Cos: cUpload(t, d, rows, cos), Sin: cUpload(t, d, rows, sin)}))
	for s := 0; s < S; s++ {
		for h := 0; h < H; h++ {
			cSame(t, "prefill vs decode rope", pre[(h*S+s)*D:(h*S+s+1)*D], dec[(s*H+h)*D:(s*H+h+1)*D])
		}
	}
}

// sdpaPrefillWant: query head h, row i attends kv head h/(H/KV), rows
// 0..i (causal) or all sk rows, through ref.Attend on freshly gathered
// contiguous keys and values.
func sdpaPrefillWant(h, kv, sq, sk, d int, causal bool, q, k, v []bf16.BF16, scale float32) []bf16.BF16 {
	out := make([]bf16.BF16, h*sq*d)
	group := h / kv
	for qh := 0; qh < h; qh++ {
		g := qh / group
		for i := 0; i < sq; i++ {
			n := sk
			if causal {
				n = i + 1
			}
			keys := append([]bf16.BF16(nil), k[g*sk*d:(g*sk+n)*d]...)
			vals := append([]bf16.BF16(nil), v[g*sk*d:(g*sk+n)*d]...)
			o := (qh*sq + i) * d
			ref.Attend(out[o:o+d], q[o:o+d], keys, vals, n, scale, make([]float32, n))
		}
	}
	return out
}

func TestSDPAPrefillMatchesAttend(t *testing.T) {
	r := rand.New(rand.NewPCG(59, 60))
	for _, g := range prefillGeoms {
		for _, scale := range []float32{0, 0.3} {
			d := cDev(t, Options{Strict: true})
			q := cRand(r, g.h*g.s*g.d, false)
			k := cRand(r, g.kv*g.s*g.d, false)
			v := cRand(r, g.kv*g.s*g.d, false)
			qt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, g.h, g.s, g.d), q)
			kt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, g.kv, g.s, g.d), k)
			vt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, g.kv, g.s, g.d), v)
			out := cOut(t, d, tt.SDPA{Q: qt, K: kt, V: vt, Causal: true, Scale: scale, QChunkSize: 64, KChunkSize: 64, ExactExp: scale != 0})
			if want := cSpec(tt.BF16, tt.Tile, 1, g.h, g.s, g.d); !out.Spec.Equal(want) {
				t.Fatalf("output spec %v, want %v", out.Spec, want)
			}
			s := scale
			if s == 0 {
				s = ref.AttnScale(g.d)
			}
			cSame(t, "sdpa prefill", cDown(t, d, out), sdpaPrefillWant(g.h, g.kv, g.s, g.s, g.d, true, q, k, v, s))
			if f := d.Findings(); len(f) != 0 {
				t.Fatalf("findings: %v", f)
			}
		}
	}
}

// Without is_causal every query row attends all Sk keys, and Sq may differ
// from Sk; batch 2 exercises the batch index.
func TestSDPAPrefillNonCausal(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	const B, H, KV, SQ, SK, D = 2, 4, 2, 7, 45, 32
	d := cDev(t, Options{})
	q := cRand(r, B*H*SQ*D, false)
	k := cRand(r, B*KV*SK*D, false)
	v := cRand(r, B*KV*SK*D, false)
	qt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, B, H, SQ, D), q)
	kt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, B, KV, SK, D), k)
	vt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, B, KV, SK, D), v)
	got := cDown(t, d, cOut(t, d, tt.SDPA{Q: qt, K: kt, V: vt}))
	for b := 0; b < B; b++ {
		want := sdpaPrefillWant(H, KV, SQ, SK, D, false, q[b*H*SQ*D:(b+1)*H*SQ*D], k[b*KV*SK*D:(b+1)*KV*SK*D], v[b*KV*SK*D:(b+1)*KV*SK*D], ref.AttnScale(D))
		cSame(t, "sdpa non-causal", got[b*H*SQ*D:(b+1)*H*SQ*D], want)
	}
}

// The property a one-pass prefill rests on: a causal prefill SDPA gives, for
// every position i, the bits paged SDPA decode gives for that position with
// the same K/V written into a paged cache by paged_fill_cache.
func TestSDPAPrefillEqualsPagedDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(63, 64))
	const H, KV, S, D, BS, W = 8, 2, 45, 64, 32, 3
	d := cDev(t, Options{Strict: true})
	q := cRand(r, H*S*D, false)
	k := cRand(r, KV*S*D, false)
	v := cRand(r, KV*S*D, false)
	qt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, H, S, D), q)
	kt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, KV, S, D), k)
	vt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, KV, S, D), v)
	pre := cDown(t, d, cOut(t, d, tt.SDPA{Q: qt, K: kt, V: vt, Causal: true}))

	kc := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 5, KV, BS, D), make([]bf16.BF16, 5*KV*BS*D))
	vc := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 5, KV, BS, D), make([]bf16.BF16, 5*KV*BS*D))
	pt := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1, W), []int32{4, 1, 3})
	cRun(t, d, tt.PagedFillCache{Cache: kc, Input: kt, PageTable: pt})
	cRun(t, d, tt.PagedFillCache{Cache: vc, Input: vt, PageTable: pt})
	for i := 0; i < S; i++ {
		qi := make([]bf16.BF16, H*D)
		for h := 0; h < H; h++ {
			copy(qi[h*D:(h+1)*D], q[(h*S+i)*D:])
		}
		qd := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, H, D), qi)
		cp := cUploadI32(t, d, cSpec(tt.INT32, tt.RowMajor, 1), []int32{int32(i)})
		out := cOut(t, d, tt.PagedSDPADecode{Q: qd, K: kc, V: vc, PageTable: pt, CurPos: cp})
		dec := cDown(t, d, out)
		for h := 0; h < H; h++ {
			cSame(t, "prefill row vs decode", pre[(h*S+i)*D:(h*S+i+1)*D], dec[h*D:(h+1)*D])
		}
		for _, x := range []tt.Tensor{qd, cp, out} {
			if err := d.Free(x); err != nil {
				t.Fatal(err)
			}
		}
	}
	if f := d.Findings(); len(f) != 0 {
		t.Fatalf("findings: %v", f)
	}
}

// create_heads -> RoPE (q and k) -> SDPA -> concat_heads is the attention
// block of a prefill program; it matches the same chain on the CPU.
func TestPrefillAttentionChain(t *testing.T) {
	r := rand.New(rand.NewPCG(65, 66))
	const H, KV, S, D = 4, 2, 40, 64
	w := (H + 2*KV) * D
	d := cDev(t, Options{Strict: true, LogOps: true})
	x := cRand(r, S*w, false)
	in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, S, w), x)
	cos, sin := ropeRows(64, D)
	ct := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 64, D), cos)
	st := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, 64, D), sin)
	// pointer forms, as an engine may pass them
	heads := pRun(t, d, &tt.NLPCreateQKVHeads{Input: in, NumHeads: H, NumKVHeads: KV, Memory: tt.DRAMInterleaved})
	qr := cOut(t, d, &tt.RotaryEmbeddingHF{Input: heads[0], Cos: ct, Sin: st, Prefill: true})
	kr := cOut(t, d, tt.RotaryEmbeddingHF{Input: heads[1], Cos: ct, Sin: st, Prefill: true})
	attn := cOut(t, d, &tt.SDPA{Q: qr, K: kr, V: heads[2], Causal: true, Scale: ref.AttnScale(D)})
	cat := cOut(t, d, &tt.NLPConcatHeads{Input: attn, Memory: tt.DRAMInterleaved})
	got := cDown(t, d, cat)

	split := func(base, n int) []bf16.BF16 { // [n][S][D] from columns base..
		o := make([]bf16.BF16, n*S*D)
		for h := 0; h < n; h++ {
			for s := 0; s < S; s++ {
				copy(o[(h*S+s)*D:(h*S+s+1)*D], x[s*w+base+h*D:])
			}
		}
		return o
	}
	rope := func(v []bf16.BF16, n int) []bf16.BF16 {
		o := make([]bf16.BF16, len(v))
		for h := 0; h < n; h++ {
			for s := 0; s < S; s++ {
				a := (h*S + s) * D
				ref.Rope(o[a:a+D], v[a:a+D], cos[s*D:(s+1)*D], sin[s*D:(s+1)*D])
			}
		}
		return o
	}
	q, k, v := rope(split(0, H), H), rope(split(H*D, KV), KV), split((H+KV)*D, KV)
	a := sdpaPrefillWant(H, KV, S, S, D, true, q, k, v, ref.AttnScale(D))
	want := make([]bf16.BF16, S*H*D)
	for s := 0; s < S; s++ {
		for h := 0; h < H; h++ {
			copy(want[(s*H+h)*D:(s*H+h+1)*D], a[(h*S+s)*D:])
		}
	}
	cSame(t, "attention chain", got, want)
	var args []string
	for _, e := range d.OpLog() {
		if e.Regime == Eager && e.Op != "" {
			args = append(args, e.Op+" "+e.Args)
		}
	}
	wantArgs := []string{
		"nlp_create_qkv_heads num_heads=4 num_kv_heads=2 transpose_k_heads=false",
		"rotary_embedding_hf is_decode_mode=false",
		"rotary_embedding_hf is_decode_mode=false",
		"scaled_dot_product_attention is_causal=true scale=0.125 q_chunk_size=0 k_chunk_size=0",
		"nlp_concat_heads ",
	}
	if len(args) != len(wantArgs) {
		t.Fatalf("op log %q, want %q", args, wantArgs)
	}
	for i := range args {
		if args[i] != wantArgs[i] {
			t.Errorf("op log entry %d: %q, want %q", i, args[i], wantArgs[i])
		}
	}
	if f := d.Findings(); len(f) != 0 {
		t.Fatalf("findings: %v", f)
	}
}

// What ttnn refuses, the prefill ops refuse with ttnn's text (the source of
// each text is cited), leaving nothing allocated; each refusal is asked
// twice, the second time after a good call has warmed the program cache
// where the specs allow it.
func TestPrefillRefusals(t *testing.T) {
	r := rand.New(rand.NewPCG(67, 68))
	d := cDev(t, Options{})
	const H, KV, S, D = 4, 2, 40, 64
	w := (H + 2*KV) * D
	up := func(dt tt.DType, l tt.Layout, sh ...int) tt.Tensor {
		s := cSpec(dt, l, sh...)
		n := s.Volume()
		if dt == tt.FP32 {
			x := cAlloc(t, d, s)
			if err := d.WriteHost(x, tt.HostFP32(sh, l, make([]float32, n))); err != nil {
				t.Fatal(err)
			}
			return x
		}
		return cUpload(t, d, s, cRand(r, n, false))
	}
	qkv := up(tt.BF16, tt.Tile, 1, 1, S, w)
	qkvRM := up(tt.BF16, tt.RowMajor, 1, 1, S, w)
	qkv2 := up(tt.BF16, tt.Tile, 1, 2, S, w)
	heads := up(tt.BF16, tt.Tile, 1, H, S, D)
	headsRM := up(tt.BF16, tt.RowMajor, 1, H, S, D)
	headsF32 := up(tt.FP32, tt.Tile, 1, H, S, D)
	kv := up(tt.BF16, tt.Tile, 1, KV, S, D)
	kv3 := up(tt.BF16, tt.Tile, 1, 3, S, D)
	kvShort := up(tt.BF16, tt.Tile, 1, KV, S-1, D)
	kvD := up(tt.BF16, tt.Tile, 1, KV, S, 2*D)
	kvB2 := up(tt.BF16, tt.Tile, 2, KV, S, D)
	kvRM := up(tt.BF16, tt.RowMajor, 1, KV, S, D)
	q48 := up(tt.BF16, tt.Tile, 1, H, S, 48)
	kv48 := up(tt.BF16, tt.Tile, 1, KV, S, 48)
	kvInt := cUploadI32(t, d, cSpec(tt.INT32, tt.Tile, 1, KV, S, D), make([]int32, KV*S*D))
	cosT := up(tt.BF16, tt.Tile, 1, 1, 64, D)
	sinT := up(tt.BF16, tt.Tile, 1, 1, 64, D)
	cosShort := up(tt.BF16, tt.Tile, 1, 1, S-1, D)
	sinLong := up(tt.BF16, tt.Tile, 1, 1, 96, D)
	cosRM := up(tt.BF16, tt.RowMajor, 1, 1, 64, D)
	cosB := up(tt.BF16, tt.Tile, 1, 2, 64, D)
	cosF32 := up(tt.FP32, tt.Tile, 1, 1, 64, D)
	cos128 := up(tt.BF16, tt.Tile, 1, 1, 64, 2*D)
	heads96 := up(tt.BF16, tt.Tile, 1, H, S, 96)
	cos96 := up(tt.BF16, tt.Tile, 1, 1, 64, 96)
	l1hs := tt.L1HeightSharded(2, [2]int{32, D})

	sdpa := func(q, k, v tt.Tensor) tt.SDPA { return tt.SDPA{Q: q, K: k, V: v, Causal: true} }
	const (
		xt  = "ttnn/cpp/ttnn/operations/experimental/transformer/"
		sdp = "ttnn/cpp/ttnn/operations/transformer/sdpa/device/sdpa_device_operation.cpp"
		ch  = xt + "nlp_create_qkv_heads/device/nlp_create_qkv_heads_device_operation.cpp"
		cc  = xt + "nlp_concat_heads/device/nlp_concat_heads_device_operation.cpp"
		rh  = xt + "rotary_embedding_hf/device/rotary_embedding_hf_device_operation.cpp"
	)
	for _, c := range []struct {
		src  string
		op   tt.Op
		want string
		warm tt.Op // a good call with the same program-cache key material, or nil
	}{
		// nlp_create_qkv_heads
		{xt + "nlp_create_qkv_heads/nlp_create_qkv_heads.cpp", tt.NLPCreateQKVHeads{Input: qkv, NumHeads: 3, NumKVHeads: 1}, "Unsupported input shape", nil},
		{ch, tt.NLPCreateQKVHeads{Input: qkvRM, NumHeads: H, NumKVHeads: KV}, "Input tensor layout must be TILE but got Layout::ROW_MAJOR", nil},
		{ch, tt.NLPCreateQKVHeads{Input: qkv2, NumHeads: H, NumKVHeads: KV}, "Unsupported input sequence length 2 is not equal to 1", nil},
		{ch, tt.NLPCreateQKVHeads{Input: qkv, NumHeads: H, NumKVHeads: KV, Memory: l1hs}, "Output memory config layout must be INTERLEAVED but got TensorMemoryLayout::HEIGHT_SHARDED",
			tt.NLPCreateQKVHeads{Input: qkv, NumHeads: H, NumKVHeads: KV}},
		// nlp_concat_heads
		{cc, tt.NLPConcatHeads{Input: headsRM}, "Input tensor layout must be TILE but got Layout::ROW_MAJOR", nil},
		{cc, tt.NLPConcatHeads{Input: heads, Memory: l1hs}, "Output memory config layout must be INTERLEAVED but got TensorMemoryLayout::HEIGHT_SHARDED", tt.NLPConcatHeads{Input: heads}},
		// rotary_embedding_hf, prefill mode
		{rh, tt.RotaryEmbeddingHF{Input: headsRM, Cos: cosT, Sin: sinT, Prefill: true}, "Input must be tilized", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cosRM, Sin: sinT, Prefill: true}, "Cos must be tilized", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cosT, Sin: cosRM, Prefill: true}, "Sin must be tilized", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads96, Cos: cos96, Sin: cos96, Prefill: true},
			"Input X dim (96) must be either 32 (single tile) or divisible by 64 (rotate_half midpoint must align with a tile boundary).", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cosF32, Sin: sinT, Prefill: true}, "Cos and Sin dtypes must match", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cosT, Sin: sinLong, Prefill: true}, "Cos and Sin shapes must match", nil},
		// the shapes compared are the padded ones: [.., 39, D] pads to [.., 64, D]
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cosT, Sin: cosShort, Prefill: true},
			"Sin seq_len must be >= input seq_len. Input seq_len: 40, Sin seq_len: 39.", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cos128, Sin: cos128, Prefill: true}, "Cos dims must match input dims", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cosB, Sin: cosB, Prefill: true}, "Cos must have batch dim = 1 in prefill mode", nil},
		{rh, tt.RotaryEmbeddingHF{Input: heads, Cos: cosShort, Sin: cosShort, Prefill: true},
			"Cos seq_len must be >= input seq_len. Input seq_len: 40, Cos seq_len: 39.", nil},
		// scaled_dot_product_attention
		{sdp, sdpa(heads, kvRM, kv), "Inputs to SDPA must be tilized", nil},
		{sdp, sdpa(headsF32, kv, kv), "Data type of input tensor must be BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is DataType::FLOAT32", nil},
		{sdp, sdpa(heads, kvInt, kv), "Data type of input tensor must be BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is DataType::INT32", nil},
		{sdp, sdpa(heads, kvShort, kvShort), "Causal SDPA requires Q and K to have the same sequence length. Got Q: 40, K: 39", nil},
		{sdp, sdpa(heads, kvB2, kvB2), "K and V batch must match. Got K: 2, V: 2", nil},
		{sdp, sdpa(heads, kv, kv3), "K and V num_heads must match. Got K: 2, V: 3", nil},
		{sdp, tt.SDPA{Q: heads, K: kv, V: kvShort}, "K and V sequence length must match. Got K: 40, V: 39", nil},
		{sdp, sdpa(heads, kv, kvD), "K and V hidden dim must match. Got K: 64, V: 128", nil},
		{sdp, sdpa(heads, kv3, kv3), "Q num_heads must be >= K num_heads and divisible by K num_heads. Got Q: 4, K: 3", nil},
		{sdp, sdpa(kv, heads, heads), "Q num_heads must be >= K num_heads and divisible by K num_heads. Got Q: 2, K: 4", nil},
		{sdp, tt.SDPA{Q: heads, K: kv, V: kv, Causal: true, QChunkSize: 48, KChunkSize: 64},
			"q_chunk_size must be divisible by TILE_SIZE. Got q_chunk_size: 48, TILE_SIZE: 32", nil},
		{sdp, tt.SDPA{Q: heads, K: kv, V: kv, Causal: true, QChunkSize: 64, KChunkSize: 40},
			"k_chunk_size must be divisible by TILE_SIZE. Got k_chunk_size: 40, TILE_SIZE: 32", nil},
		{sdp, sdpa(q48, kv48, kv48), "Padding is not supported on the head_dim dimension", nil},
		{"offcard's: exp_approx_mode lives in SDPAProgramConfig", tt.SDPA{Q: heads, K: kv, V: kv, Causal: true, ExactExp: true},
			tt.ContractPrefix + "exp_approx_mode needs a program config: set q_chunk_size and k_chunk_size", nil},
	} {
		for pass := 0; pass < 2; pass++ {
			if pass == 1 && c.warm != nil {
				pRunFree(t, d, c.warm)
			}
			before := d.bufs.n
			_, err := d.Run(c.op)
			if !tt.HasMsg(err, c.want) {
				t.Errorf("%s (%s), pass %d: got %v, want %q", c.op.Name(), c.src, pass, err, c.want)
			}
			if d.bufs.n != before {
				t.Errorf("%s: a refused op left %d tensors allocated", c.op.Name(), d.bufs.n-before)
			}
		}
	}
}

// pRunFree runs an Allocating op and frees its outputs.
func pRunFree(t testing.TB, d *Device, op tt.Op) {
	t.Helper()
	for _, x := range pRun(t, d, op) {
		if err := d.Free(x); err != nil {
			t.Fatal(err)
		}
	}
}

// Configurations ttnn accepts but the simulator does not model fail with a
// plain error, never a ttnn text the card would not print.
func TestPrefillNotImplemented(t *testing.T) {
	d := cDev(t, Options{})
	const H, KV, S, D = 2, 1, 32, 64
	w := (H + 2*KV) * D
	in := cAlloc(t, d, tt.Spec{Shape: []int{1, 1, S, w}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(1, [2]int{S, w})})
	heads := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, H, S, 48))
	for _, op := range []tt.Op{
		tt.NLPCreateQKVHeads{Input: in, NumHeads: H, NumKVHeads: KV, Memory: tt.L1HeightSharded(1, [2]int{64, D})},
		tt.NLPConcatHeads{Input: heads},
	} {
		before := d.bufs.n
		_, err := d.Run(op)
		var te *tt.Error
		if err == nil || asTTError(err, &te) || !strings.Contains(err.Error(), "is not implemented") {
			t.Errorf("%s: got %v, want a non-tt \"not implemented\" error", op.Name(), err)
		}
		if d.bufs.n != before {
			t.Errorf("%s: left %d tensors allocated", op.Name(), d.bufs.n-before)
		}
	}
}

// transpose_k_heads: K is [B,KV,D,S], K[g][e][s] = input row s, column
// (H+g)*D+e; the padding columns are zero where the input's padding rows
// are.
func TestCreateHeadsPrefillTransposeK(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	for _, g := range prefillGeoms {
		d := cDev(t, Options{Strict: true})
		w := (g.h + 2*g.kv) * g.d
		x := cRand(r, g.s*w, true)
		in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, g.s, w), x)
		outs := pRun(t, d, tt.NLPCreateQKVHeads{Input: in, NumHeads: g.h, NumKVHeads: g.kv, TransposeK: true})
		if want := cSpec(tt.BF16, tt.Tile, 1, g.kv, g.d, g.s); !outs[1].Spec.Equal(want) {
			t.Fatalf("K spec %v, want %v", outs[1].Spec, want)
		}
		got := cDown(t, d, outs[1])
		want := make([]bf16.BF16, g.kv*g.d*g.s)
		for h := 0; h < g.kv; h++ {
			for e := 0; e < g.d; e++ {
				for s := 0; s < g.s; s++ {
					want[(h*g.d+e)*g.s+s] = x[s*w+(g.h+h)*g.d+e]
				}
			}
		}
		cSame(t, "transposed k", got, want)
		v := cDown(t, d, outs[2]) // V is not transposed
		for s := 0; s < g.s; s++ {
			cSame(t, "v row", v[s*g.d:(s+1)*g.d], x[s*w+(g.h+g.kv)*g.d:][:g.d])
		}
	}
}

func asTTError(err error, te **tt.Error) bool {
	e, ok := err.(*tt.Error)
	if ok {
		*te = e
	}
	return ok
}

// The prefill attention chain captured into a trace replays at the baked
// addresses: after new inputs are written, a replay gives what an eager run
// on those inputs gives.
func TestPrefillChainTraceReplay(t *testing.T) {
	r := rand.New(rand.NewPCG(69, 70))
	const H, KV, S, D = 4, 2, 40, 64
	w := (H + 2*KV) * D
	d := cDev(t, Options{Strict: true})
	in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, S, w), cRand(r, S*w, false))
	cos, sin := ropeRows(S, D)
	ct := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, S, D), cos)
	st := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, S, D), sin)
	chain := func() (tt.Tensor, []tt.Tensor) {
		heads := pRun(t, d, tt.NLPCreateQKVHeads{Input: in, NumHeads: H, NumKVHeads: KV})
		qr := cOut(t, d, tt.RotaryEmbeddingHF{Input: heads[0], Cos: ct, Sin: st, Prefill: true})
		kr := cOut(t, d, tt.RotaryEmbeddingHF{Input: heads[1], Cos: ct, Sin: st, Prefill: true})
		attn := cOut(t, d, tt.SDPA{Q: qr, K: kr, V: heads[2], Causal: true})
		cat := cOut(t, d, tt.NLPConcatHeads{Input: attn})
		return cat, append(heads, qr, kr, attn)
	}
	free := func(ts []tt.Tensor) {
		for _, x := range ts {
			if err := d.Free(x); err != nil {
				t.Fatal(err)
			}
		}
	}
	warm, tmp := chain() // every program cached
	free(append(tmp, warm))
	id, err := d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	out, live := chain()
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	x2 := cRand(r, S*w, false)
	if err := d.WriteHost(in, tt.HostBF16([]int{1, 1, S, w}, tt.Tile, x2)); err != nil {
		t.Fatal(err)
	}
	if err := d.Execute(id); err != nil {
		t.Fatal(err)
	}
	replayed := cDown(t, d, out)
	eager, tmp := chain()
	cSame(t, "replayed prefill chain", replayed, cDown(t, d, eager))
	free(append(tmp, eager))
	free(append(live, out))
	if err := d.Release(id); err != nil {
		t.Fatal(err)
	}
	if fs := d.Findings(); len(fs) != 0 {
		t.Fatalf("findings: %v", fs)
	}
}
