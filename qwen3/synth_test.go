package qwen3

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"runtime"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// oneStream draws n values of the stream (seed, name) one after the other,
// as Synth did before it drew in chunks.
func oneStream(seed uint64, name string, n int, mean, std float64) []bf16.BF16 {
	s := splitmix{state: seed ^ fnv1a(name)}
	out := make([]bf16.BF16, n)
	for i := range out {
		var sum float64
		for range 12 {
			sum += float64(s.next()>>11) * (1.0 / (1 << 53))
		}
		out[i] = bf16.FromFloat32(float32(mean + float64(std*(sum-6))))
	}
	return out
}

// TestDrawNormalChunks: a chunk drawn from its first index is the same
// values as the one stream drawn from 0 (the skip of 12·first draws is
// right), for chunks that start anywhere.
func TestDrawNormalChunks(t *testing.T) {
	want := oneStream(5, "x", 1000, 0.5, 0.02)
	for _, first := range []int{0, 1, 7, 333, 999} {
		got := make([]bf16.BF16, 1000-first)
		drawNormal(got, 5, "x", first, 0.5, 0.02)
		for i := range got {
			if got[i] != want[first+i] {
				t.Fatalf("chunk from %d: value %d is %v, the stream's %v", first, first+i, got[i], want[first+i])
			}
		}
	}
}

func weightsSum(w *Weights) string {
	h := sha256.New()
	put := func(s []bf16.BF16) { h.Write(bf16.Bytes(s)) }
	put(w.Embed)
	put(w.LMHead)
	put(w.Norm)
	for _, L := range w.Layers {
		for _, s := range [][]bf16.BF16{L.InputNorm, L.Q, L.K, L.V, L.O, L.QNorm, L.KNorm, L.PostNorm, L.Gate, L.Up, L.Down} {
			put(s)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestSynthChunksAnyProcs: Synth's bytes do not depend on GOMAXPROCS, and
// a tensor longer than one chunk is the one stream of its name.
func TestSynthChunksAnyProcs(t *testing.T) {
	cfg, _ := Preset("tiny")
	cfg.VocabSize = synthChunk/cfg.HiddenSize + 96 // the embedding spans two chunks
	prev := runtime.GOMAXPROCS(1)
	a, err := Synth(cfg, 3)
	runtime.GOMAXPROCS(4)
	b, err2 := Synth(cfg, 3)
	runtime.GOMAXPROCS(prev)
	if err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	if weightsSum(a) != weightsSum(b) {
		t.Fatal("Synth differs between GOMAXPROCS 1 and 4")
	}
	want := oneStream(3, "model.embed_tokens.weight", len(a.Embed), 0, 0.02)
	for i := range want {
		if a.Embed[i] != want[i] {
			t.Fatalf("embedding value %d (chunk %d) is %v, the stream's %v", i, i/synthChunk, a.Embed[i], want[i])
		}
	}
}

// TestSynthProgress: progress rises to the total, which is the model's
// number of values.
func TestSynthProgress(t *testing.T) {
	cfg, _ := Preset("tiny")
	var last, total, calls int64
	w, err := SynthProgress(cfg, 1, func(done, tot int64) {
		if done < last {
			t.Errorf("progress went back: %d after %d", done, last)
		}
		last, total = done, tot
		calls++
	})
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(w.Embed) + len(w.LMHead) + len(w.Norm))
	for _, L := range w.Layers {
		for _, s := range [][]bf16.BF16{L.InputNorm, L.Q, L.K, L.V, L.O, L.QNorm, L.KNorm, L.PostNorm, L.Gate, L.Up, L.Down} {
			n += int64(len(s))
		}
	}
	if last != n || total != n || calls < 2 {
		t.Fatalf("progress ended at %d of %d after %d calls; the model has %d values", last, total, calls, n)
	}
}

// TestFinalNormScale pins the scale of both presets (the doc's figures)
// and that the final norm is drawn around it.
func TestFinalNormScale(t *testing.T) {
	for name, want := range map[string]float64{"tiny": 67.6, "qwen3-0.6b": 33.8} {
		cfg, _ := Preset(name)
		if got := FinalNormScale(cfg); math.Abs(got-want) > 0.05 {
			t.Errorf("%s: FinalNormScale %.3f, want %.1f", name, got, want)
		}
	}
	cfg, _ := Preset("tiny")
	w, err := Synth(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, v := range w.Norm {
		sum += float64(v.Float32())
	}
	if mean := sum / float64(len(w.Norm)); math.Abs(mean-FinalNormScale(cfg)) > 0.03*FinalNormScale(cfg) {
		t.Fatalf("final norm mean %.2f, want about %.2f", mean, FinalNormScale(cfg))
	}
}
