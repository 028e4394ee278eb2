package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// The decoded-weight cache and the output-row memo (which keys rows by the
// weight's contents) change no result: the same program on a device with
// them and on one without (d.wc.m = nil: no weight id, no memo) gives the
// same linear outputs while the weights are rewritten by a host copy (of
// one weight, then of another kept through that drop), by an op writing
// its output over them, and freed and reallocated at the same address with
// new contents, and without (stale bytes, as on the card).
func TestLinearWeightCacheSeesWrites(t *testing.T) {
	const m, k, n = 3, 64, 96
	r := rand.New(rand.NewPCG(11, 12))
	x := cRand(r, m*k, false)
	w1, w2, w3, w4 := cRand(r, n*k, false), cRand(r, n*k, false), cRand(r, n*k, false), cRand(r, n*k, true)
	zeros := make([]bf16.BF16, n*k)
	wSpec := cSpec(tt.BF16, tt.Tile, 1, 1, n, k)
	knSpec := cSpec(tt.BF16, tt.Tile, 1, 1, k, n)
	outSpec := cSpec(tt.BF16, tt.Tile, 1, 1, m, n)

	run := func(cache bool) [][]bf16.BF16 {
		d := cDev(t, Options{Strict: true})
		if !cache {
			d.wc.m = nil
		}
		var outs [][]bf16.BF16
		in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, m, k), x)
		w := cUpload(t, d, wSpec, w1)
		kn := cUpload(t, d, knSpec, w1) // the same bytes read as [k, n]
		out := cAlloc(t, d, outSpec)
		lin := func(wt tt.Tensor, transposed bool) {
			cRun(t, d, tt.Linear{Input: in, Weight: wt, Output: out, TransposeB: transposed})
			outs = append(outs, cDown(t, d, out))
		}
		lin(w, true)
		lin(kn, false)
		lin(w, true)
		// A host copy over the weight.
		if err := d.WriteHost(w, tt.HostBF16(wSpec.Shape, wSpec.Layout, w2)); err != nil {
			t.Fatal(err)
		}
		lin(w, true)
		lin(kn, false)
		// A host copy over the other one, kept through the drop above.
		if err := d.WriteHost(kn, tt.HostBF16(knSpec.Shape, knSpec.Layout, w3)); err != nil {
			t.Fatal(err)
		}
		lin(kn, false)
		// An op's output over the weight.
		src := cUpload(t, d, wSpec, w3)
		z := cUpload(t, d, wSpec, zeros)
		cRun(t, d, tt.Add{A: src, B: z, Output: w})
		lin(w, true)
		// Freed, reallocated at the same address: stale bytes, then new ones.
		if err := d.Free(w); err != nil {
			t.Fatal(err)
		}
		w2nd := cAlloc(t, d, wSpec)
		if w2nd.Addr != w.Addr {
			t.Fatalf("reallocated at %#x, freed %#x: the test needs immediate reuse", w2nd.Addr, w.Addr)
		}
		lin(w2nd, true)
		if err := d.WriteHost(w2nd, tt.HostBF16(wSpec.Shape, wSpec.Layout, w4)); err != nil {
			t.Fatal(err)
		}
		lin(w2nd, true)
		return outs
	}
	with, without := run(true), run(false)
	for i := range with {
		cSame(t, "linear "+string(rune('a'+i)), with[i], without[i])
	}
	for _, p := range [][2]int{{0, 3}, {4, 5}, {3, 6}, {7, 8}} {
		if slices.Equal(with[p[0]], with[p[1]]) {
			t.Fatalf("outputs %d and %d are equal: the rewrite between them tests nothing", p[0], p[1])
		}
	}
}

// A weight's last rows answer a row only when its input and bias are the
// ones last put at that row index, with the output put then; a later put
// at the index replaces it, and indexes past lastRowsMax are not kept.
func TestLastRows(t *testing.T) {
	row := bitsRows(rand.New(rand.NewPCG(5, 6)))
	const k, n = 8, 4
	x, bias, out := row(k), row(n), row(n)
	x2 := slices.Clone(x)
	x2[k-1] ^= 1
	bias2 := slices.Clone(bias)
	bias2[0] ^= 1
	var last lastRows
	last.put(1, nil, x, out)
	last.put(2, bias, x, out)
	get := func(m int, bias, x []bf16.BF16) ([]bf16.BF16, bool) {
		dst := make([]bf16.BF16, n)
		return dst, last.get(m, bias, x, dst)
	}
	for _, c := range []struct {
		name    string
		m       int
		bias, x []bf16.BF16
		hit     bool
	}{
		{"the row put", 1, nil, x, true},
		{"the row put with its bias", 2, bias, x, true},
		{"another input", 1, nil, x2, false},
		{"a bias where none was", 1, bias, x, false},
		{"no bias where one was", 2, nil, x, false},
		{"another bias", 2, bias2, x, false},
		{"another row index", 0, nil, x, false},
		{"a row index never put", 7, nil, x, false},
	} {
		dst, hit := get(c.m, c.bias, c.x)
		if hit != c.hit || hit && !slices.Equal(dst, out) {
			t.Errorf("%s: hit %v (%v), want %v", c.name, hit, dst, c.hit)
		}
	}
	out2 := row(n)
	last.put(1, nil, x2, out2)
	if _, hit := get(1, nil, x); hit {
		t.Error("a replaced row still answers")
	}
	if dst, hit := get(1, nil, x2); !hit || !slices.Equal(dst, out2) {
		t.Errorf("the replacing row: %v, %v", dst, hit)
	}
	last.put(lastRowsMax, nil, x, out)
	if _, hit := get(lastRowsMax, nil, x); hit || len(last.recs) > lastRowsMax {
		t.Errorf("row index %d kept", lastRowsMax)
	}
	var none *lastRows // a weight not kept
	none.put(0, nil, x, out)
	if none.get(0, nil, x, make([]bf16.BF16, n)) {
		t.Error("a nil lastRows answered")
	}
}
