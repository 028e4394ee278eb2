package ref

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
)

// goldenDigest pins the oracle: sha256 over, for every output of the tiny
// model (seed 1) on prompt [1 2 3 4 5] followed by 20 greedy steps, the
// token (int32 LE) and every logit (float32 bits LE). It was recorded after
// TestGoldenCrossCheck showed the decoder equal, bit for bit, to the
// independent naive implementation in the canonical order, and within
// goldenMaxSteps bf16 steps of a plain sequential-sum implementation. If a
// change moves it, the numerics changed: find out why before re-recording.
const goldenDigest = "6353eeefd1d394ba0a66a4121238bae5d884341aed90c842e98cf72794a86349"

// goldenWeights is the sha256 of the tiny seed-1 weights the digest was
// recorded with, so that a change of qwen3.Synth is told apart from a
// change of the numerics.
const goldenWeights = "cdf3b95ba4dee52171fa9efd579b87e9a6a100155eb52e77cac7272c81f7e879"

func weightsDigest(w *qwen3.Weights) string {
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

const goldenMaxSteps = 4

func goldenRun(t *testing.T) (outs []qwen3.Output, tokens []int32) {
	d := newTiny(t, 1, Options{BlockSize: 32, NumBlocks: 4})
	prompt := []int32{1, 2, 3, 4, 5}
	outs = generate(t, d, 0, prompt, []int32{2, 0}, 20)
	return outs, fedTokens(prompt, outs)
}

func digest(outs []qwen3.Output) string {
	h := sha256.New()
	var b [4]byte
	for _, o := range outs {
		binary.LittleEndian.PutUint32(b[:], uint32(o.Token))
		h.Write(b[:])
		for _, l := range o.Logits {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(l))
			h.Write(b[:])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestGoldenDigest(t *testing.T) {
	if wd := weightsDigest(tinyWeights(t, 1)); wd != goldenWeights {
		t.Fatalf("qwen3.Synth(tiny, 1) changed (weights sha256 %s, recorded with %s): "+
			"re-record goldenWeights and goldenDigest once TestGoldenCrossCheck passes", wd, goldenWeights)
	}
	outs, toks := goldenRun(t)
	got := digest(outs)
	t.Logf("tokens fed: %v", toks)
	if got != goldenDigest {
		t.Fatalf("golden digest %s, want %s", got, goldenDigest)
	}
}

// TestGoldenCrossCheck runs the golden scenario through the independent
// naive implementation: with the canonical order it must match exactly;
// with sequential float32 sums, logits must agree within goldenMaxSteps bf16
// steps and the greedy tokens must agree wherever the top two logits are
// not within that tolerance of each other.
func TestGoldenCrossCheck(t *testing.T) {
	outs, toks := goldenRun(t)
	w := tinyWeights(t, 1)
	lane, seq := newNaive(w, laneDot), newNaive(w, seqDot)
	maxSteps, diffLogits := 0, 0
	for pos, tok := range toks {
		got := outs[pos].Logits
		l := lane.step(tok, pos)
		s := seq.step(tok, pos)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(l[i]) {
				t.Fatalf("pos %d logit %d: decoder %v, naive (canonical order) %v", pos, i, got[i], l[i])
			}
			st := bf16.Steps(bf16.FromFloat32(got[i]), bf16.FromFloat32(s[i]))
			maxSteps = max(maxSteps, st)
			if st != 0 {
				diffLogits++
			}
		}
		if outs[pos].Token != qwen3.Argmax(s) {
			a, b := top2(s)
			if bf16.Steps(bf16.FromFloat32(a), bf16.FromFloat32(b)) > goldenMaxSteps {
				t.Errorf("pos %d: token %d, sequential-sum naive %d with a clear margin", pos, outs[pos].Token, qwen3.Argmax(s))
			}
		}
	}
	t.Logf("vs sequential sums: max %d bf16 steps, %d of %d logits differ", maxSteps, diffLogits, len(toks)*len(outs[0].Logits))
	if maxSteps > goldenMaxSteps {
		t.Fatalf("sequential-sum naive differs by %d bf16 steps (tolerance %d)", maxSteps, goldenMaxSteps)
	}
}

func top2(v []float32) (a, b float32) {
	a, b = float32(math.Inf(-1)), float32(math.Inf(-1))
	for _, x := range v {
		if x > a {
			a, b = x, a
		} else if x > b {
			b = x
		}
	}
	return a, b
}
