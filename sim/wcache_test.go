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
// same linear outputs while the weights are rewritten by a host copy, by an op writing
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
	for _, p := range [][2]int{{0, 3}, {3, 5}, {6, 7}} {
		if slices.Equal(with[p[0]], with[p[1]]) {
			t.Fatalf("outputs %d and %d are equal: the rewrite between them tests nothing", p[0], p[1])
		}
	}
}
