package proptest

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// The serving actions and properties, developed against a SUT whose
// decoder is a second ref.Decoder (ref implements every serving
// interface), observed through its caches (KVPeeker: the whole cache after
// every call, changed elements told by a diff with the previous peek), and
// planted bugs wrapping it, each shown red on its property.

// refSUT is a ref.Decoder (or a plant wrapping one) as the SUT.
type refSUT struct {
	d    *ref.Decoder
	dec  qwen3.Decoder
	prev [][2][]bf16.BF16 // per layer, K and V, as the last PeekKV saw them
	cur  [][2][]bf16.BF16
}

// refFactory builds refSUTs; plant, when set, wraps the decoder.
func refFactory(plant func(*paddedRef) qwen3.Decoder) Factory {
	return func(sc Scenario) (SUT, error) {
		w, err := ModelWeights(sc)
		if err != nil {
			return nil, err
		}
		d, err := ref.New(w, ref.Options{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Threads: 1})
		if err != nil {
			return nil, err
		}
		pd := &paddedRef{Decoder: d, pad: sc.Prefill == qwen3.PrefillProgram}
		s := &refSUT{d: d, dec: pd}
		if plant != nil {
			s.dec = plant(pd)
		}
		return s, nil
	}
}

// paddedRef is ref that, as the engine's prefill program does
// (paged_fill_cache writes whole 32-row tiles), zeroes the rows past a
// prompt to the end of its last tile.
type paddedRef struct {
	*ref.Decoder
	pad bool
}

func (d *paddedRef) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	outs, err := d.Decoder.Prefill(p)
	if err != nil || !d.pad {
		return outs, err
	}
	cfg, bs := d.Config(), d.BlockSize()
	zero := make([]bf16.BF16, cfg.NumKeyValueHeads*cfg.HeadDim)
	for pos := len(p.Tokens); pos < promptTileEnd(len(p.Tokens)) && pos/bs < len(p.Blocks); pos++ {
		for l := range cfg.NumHiddenLayers {
			if err := d.KV().Write(l, p.Blocks, pos, zero, zero); err != nil {
				return nil, err
			}
		}
	}
	return outs, nil
}

func (s *refSUT) Decoder() qwen3.Decoder { return s.dec }
func (s *refSUT) Close() error           { s.d.Close(); return nil }

// PeekKV implements KVPeeker: ref's caches, full size (+0 past the blocks
// ref holds), and the spans that differ from the previous peek.
func (s *refSUT) PeekKV(layer int) (k, v []bf16.BF16, changed [][2]int, err error) {
	kv := s.d.KV()
	if s.prev == nil {
		n := kv.LayerSize()
		for range s.d.Config().NumHiddenLayers {
			s.prev = append(s.prev, [2][]bf16.BF16{make([]bf16.BF16, n), make([]bf16.BF16, n)})
			s.cur = append(s.cur, [2][]bf16.BF16{make([]bf16.BF16, n), make([]bf16.BF16, n)})
		}
	}
	lk, lv := kv.Layer(layer)
	for i, src := range [][]bf16.BF16{lk, lv} {
		cur, prev := s.cur[layer][i], s.prev[layer][i]
		clear(cur[copy(cur, src):])
		for j := 0; j < len(cur); {
			if cur[j] == prev[j] {
				j++
				continue
			}
			lo := j
			for j < len(cur) && cur[j] != prev[j] {
				j++
			}
			changed = append(changed, [2]int{lo, j})
		}
		copy(prev, cur)
	}
	// One list for K and V (element ranges of a layer; K's and V's are
	// the same layout).
	return s.cur[layer][0], s.cur[layer][1], mergeSpans(changed), nil
}

func servingBase() Base {
	return Base{Serve: &Serving{PrefillFrom: true, Verify: true, CopyBlocks: true}}
}

// The campaign with every serving action drawn runs green on ref and
// reaches each of them.
func TestServingCampaignOnRef(t *testing.T) {
	cases := 40
	if testing.Short() {
		cases = 16
	}
	rs := Campaign(Options{Seed: DefaultSeed, Cases: cases, Factory: refFactory(nil), Base: servingBase()})
	for _, r := range rs {
		if !r.Passed {
			t.Fatalf("case %d (seed %d): %s\n%s", r.Index, r.Seed, r.Error, r.Report())
		}
	}
	for _, rt := range ReachTotals(rs) {
		if _, serving := ServingReach[rt.Kind]; (serving || slices.Contains([]string{ReachFork, ReachPreempt, ReachReadmit, ReachSharedAfterEnd}, rt.Kind)) && rt.Cases == 0 {
			t.Errorf("%d cases never reached %s", cases, rt.Kind)
		}
	}
}

var _ = math.Float32bits
var _ = strings.Contains
