package proptest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// behindDecoder is an engine whose decode position is one behind (the
// seed's second bug): a decode of pos p writes its KV row at p-1 and
// attends with p-1's rotation, and it reports tokens only (the protocol's
// documented minimum), at the positions it was asked for.
// With behind false it is the honest tokens-only engine.
type behindDecoder struct {
	*ref.Decoder
	behind bool
}

func (d behindDecoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	outs, err := d.Decoder.Prefill(p)
	for i := range outs {
		outs[i].Logits = nil
	}
	return outs, err
}

func (d behindDecoder) Decode(batch []qwen3.Step) ([]qwen3.Output, error) {
	b := make([]qwen3.Step, len(batch))
	for i, st := range batch {
		b[i] = st
		if d.behind && st.Pos > 0 {
			b[i].Pos--
		}
	}
	outs, err := d.Decoder.Decode(b)
	for i := range outs {
		outs[i].Logits, outs[i].Pos = nil, batch[i].Pos
	}
	return outs, err
}

// behindSUT is that engine as a tolerant SUT with no observations: what
// offcard can check of a tokens-only engine.
type behindSUT struct{ d behindDecoder }

func (s *behindSUT) Decoder() qwen3.Decoder { return s.d }
func (s *behindSUT) Close() error           { s.d.Close(); return nil }
func (s *behindSUT) Tolerance() Tolerance   { return DefaultTolerance }

func tokensOnlyFactory(behind bool) Factory {
	return func(sc Scenario) (SUT, error) {
		w, err := ModelWeights(sc)
		if err != nil {
			return nil, err
		}
		d, err := ref.New(w, ref.Options{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Threads: 1})
		if err != nil {
			return nil, err
		}
		return &behindSUT{behindDecoder{d, behind}}, nil
	}
}

// flatSeed is a tiny Synth seed no other test uses: TestPositionBehindTokensOnly
// puts the flat model (tiny seed 1 with the final norm of Synth before
// FinalNormScale, about 1) under it in the weights cache.
const flatSeed = 424242

func flatTiny(t *testing.T) {
	t.Helper()
	w, err := ModelWeights(Scenario{Model: "tiny", ModelSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	flat := *w
	cfg, _ := qwen3.Preset("tiny")
	flat.Norm = make([]bf16.BF16, len(w.Norm))
	s := float32(qwen3.FinalNormScale(cfg))
	for i, v := range w.Norm {
		flat.Norm[i] = bf16.FromFloat32(v.Float32() / s)
	}
	m := &modelWeights{w: &flat}
	m.once.Do(func() {})
	weightsCache.Store(modelKey(Scenario{Model: "tiny", ModelSeed: flatSeed}), m)
}

// TestPositionBehindTokensOnly: an engine whose decode position is one
// behind, judged on its tokens alone, fails the tolerant mode (property
// logits: a token ref ranks well below its top) on Synth's peaked model;
// on the flat model Synth made before (logits within about ±1, the top-2
// gap under 0.5 nats nearly everywhere) the same engine passed every
// schedule here, each wrong token a "near-tie".
func TestPositionBehindTokensOnly(t *testing.T) {
	flatTiny(t)
	const schedule = `device engine arch=wormhole
engine block=32 blocks=12 width=dynamic capacity=2 mode=eager
admit seq=0 prompt=5
admit seq=1 prompt=31
decode steps=40
finish seq=0
decode steps=8
`
	for _, seed := range []uint64{1, 2, 3} {
		peaked, err := ParseScript(strings.NewReader(fmt.Sprintf("model tiny seed=%d\n", seed) + schedule))
		if err != nil {
			t.Fatal(err)
		}
		if f, _, err := RunScript(peaked, tokensOnlyFactory(false)); err != nil || f != nil {
			t.Fatalf("tiny seed %d: the honest tokens-only engine: %v %v", seed, f, err)
		}
		f, _, err := RunScript(peaked, tokensOnlyFactory(true))
		if err != nil {
			t.Fatal(err)
		}
		if f == nil || f.Property != PropLogits {
			t.Fatalf("tiny seed %d: the position-behind engine (tokens only) was not failed on logits: %v", seed, f)
		}
		t.Logf("peaked tiny seed %d: %s at %s: %s", seed, f.Property, f.Where(), f.Detail)
	}
	flat, err := ParseScript(strings.NewReader(fmt.Sprintf("model tiny seed=%d\n", flatSeed) + schedule))
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := RunScript(flat, tokensOnlyFactory(true))
	if err != nil {
		t.Fatal(err)
	}
	if f != nil {
		t.Fatalf("flat tiny: the position-behind engine failed (%v): the flat model no longer shows what the peaked one fixes", f)
	}
}
