package qwen3

import (
	"math"
	"testing"
)

// Params counts every tensor Synth makes (tied and untied), and saturates
// for dimensions no checkpoint has.
func TestParamsAndKVBytes(t *testing.T) {
	for _, tied := range []bool{false, true} {
		cfg, _ := Preset("tiny")
		cfg.TieWordEmbeddings = tied
		w, err := Synth(cfg, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := len(w.Embed) + len(w.Norm)
		if !tied {
			n += len(w.LMHead)
		}
		for _, l := range w.Layers {
			n += len(l.InputNorm) + len(l.Q) + len(l.K) + len(l.V) + len(l.O) + len(l.QNorm) + len(l.KNorm) + len(l.PostNorm) + len(l.Gate) + len(l.Up) + len(l.Down)
		}
		if got := cfg.Params(); got != int64(n) {
			t.Errorf("tied %v: Params %d, Synth made %d", tied, got, n)
		}
	}
	big, _ := Preset("qwen3-0.6b")
	if got := big.Params(); got != 596049920 { // Qwen3-0.6B: 0.6B with embeddings, 0.44B without
		t.Errorf("qwen3-0.6b: %d parameters", got)
	}
	big.NumHiddenLayers, big.HiddenSize, big.IntermediateSize = 1<<24, 1<<24, 1<<24
	if got := big.Params(); got != math.MaxInt64 {
		t.Errorf("huge config: %d, want saturation", got)
	}
	tiny, _ := Preset("tiny")
	if got := tiny.KVBytes(32); got != 32*2*2*64*2 {
		t.Errorf("KVBytes(32) = %d", got)
	}
}
