package ref

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
)

// The cross-check: ref against someone else's arithmetic. The fixtures in
// testdata/crosscheck were written by hf_eager.py, a mirror of Hugging
// Face's eager Qwen3 forward run on PyTorch's own bf16 CPU kernels, which
// shares no code and no accumulation order with ref (make crosscheck
// regenerates them). For every position of the fixture's token sequence
// (prompt, then PyTorch's greedy continuation, teacher-forced into ref) it
// holds PyTorch's greedy token and its top-8 logits.
//
// Tolerances, stated before measuring: two correct bf16 implementations
// that differ only in fp32 accumulation order disagree by a few bf16 steps
// after a few layers (the same bound as goldenMaxSteps against a
// sequential-sum implementation). So for every top-8 logit of every
// position, |ref - torch| <= crossMaxSteps bf16 steps, and the mean over
// all of them <= crossMeanSteps. Greedy tokens must agree wherever
// PyTorch's top-1/top-2 gap is more than 2*crossMaxSteps steps (a nearer
// tie may legitimately flip); the agreement over all positions is logged.
const (
	crossMaxSteps  = 4
	crossMeanSteps = 1.0
)

type crossFixture struct {
	Name   string `json:"name"`
	Config struct {
		HiddenSize        int  `json:"hidden_size"`
		IntermediateSize  int  `json:"intermediate_size"`
		NumHiddenLayers   int  `json:"num_hidden_layers"`
		NumAttentionHeads int  `json:"num_attention_heads"`
		NumKeyValueHeads  int  `json:"num_key_value_heads"`
		HeadDim           int  `json:"head_dim"`
		VocabSize         int  `json:"vocab_size"`
		TieWordEmbeddings bool `json:"tie_word_embeddings"`
	} `json:"config"`
	PromptLen int     `json:"prompt_len"`
	Tokens    []int32 `json:"tokens"`
	Positions []struct {
		Pos       int       `json:"pos"`
		Token     int32     `json:"token"`
		TopIDs    []int32   `json:"top_ids"`
		TopLogits []float32 `json:"top_logits"`
	} `json:"positions"`
}

// crossCases are the fixtures and the synthetic weights they were made
// from (ref/testdata/crosscheck/export: qwen3.Synth(preset, seed) cut to
// layers; see the Makefile's crosscheck target).
var crossCases = []struct {
	file   string
	preset string
	seed   uint64
	layers int
}{
	{"tiny-seed1.json", "tiny", 1, 0},
	{"qwen3-0.6b-2layers-seed1.json", "qwen3-0.6b", 1, 2},
}

func TestCrossCheckPyTorch(t *testing.T) {
	for _, c := range crossCases {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "crosscheck", c.file))
			if err != nil {
				t.Fatalf("%v (make crosscheck writes it)", err)
			}
			var fx crossFixture
			if err := json.Unmarshal(data, &fx); err != nil {
				t.Fatal(err)
			}
			cfg, err := qwen3.Preset(c.preset)
			if err != nil {
				t.Fatal(err)
			}
			if c.layers > 0 {
				cfg.NumHiddenLayers = c.layers
			}
			fc := fx.Config
			if fc.HiddenSize != cfg.HiddenSize || fc.IntermediateSize != cfg.IntermediateSize ||
				fc.NumHiddenLayers != cfg.NumHiddenLayers || fc.NumAttentionHeads != cfg.NumAttentionHeads ||
				fc.NumKeyValueHeads != cfg.NumKeyValueHeads || fc.HeadDim != cfg.HeadDim ||
				fc.VocabSize != cfg.VocabSize || fc.TieWordEmbeddings != cfg.TieWordEmbeddings {
				t.Fatalf("fixture config %+v is not %s with %d layers", fc, c.preset, cfg.NumHiddenLayers)
			}
			if len(fx.Positions) != len(fx.Tokens) || len(fx.Tokens) <= fx.PromptLen {
				t.Fatalf("fixture has %d positions for %d tokens (prompt %d)", len(fx.Positions), len(fx.Tokens), fx.PromptLen)
			}
			w, err := qwen3.Synth(cfg, c.seed)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			d, err := New(w, Options{BlockSize: 32, NumBlocks: len(fx.Tokens)/32 + 1})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			outs, err := d.Prefill(qwen3.Prefill{Seq: 0, Tokens: fx.Tokens, Blocks: seqTable(0, len(fx.Tokens)/32+1)})
			if err != nil {
				t.Fatal(err)
			}
			maxSteps, sum, n, agree := 0, 0, 0, 0
			for i, p := range fx.Positions {
				o := outs[i]
				if p.Pos != i || o.Pos != i {
					t.Fatalf("position %d: fixture pos %d, ref pos %d", i, p.Pos, o.Pos)
				}
				for k, id := range p.TopIDs {
					s := bf16.Steps(bf16.FromFloat32(o.Logits[id]), bf16.FromFloat32(p.TopLogits[k]))
					maxSteps = max(maxSteps, s)
					sum += s
					n++
					if s > crossMaxSteps {
						t.Errorf("pos %d, token %d: ref logit %g, torch %g: %d bf16 steps (> %d)", i, id, o.Logits[id], p.TopLogits[k], s, crossMaxSteps)
					}
				}
				if o.Token == p.Token {
					agree++
					continue
				}
				gap := bf16.Steps(bf16.FromFloat32(p.TopLogits[0]), bf16.FromFloat32(p.TopLogits[1]))
				t.Logf("pos %d: greedy tokens differ (ref %d, torch %d) on a near-tie: torch's top-1/top-2 gap %d bf16 steps", i, o.Token, p.Token, gap)
				if gap > 2*crossMaxSteps {
					t.Errorf("pos %d: ref greedy token %d, torch %d with a top-1/top-2 gap of %d bf16 steps", i, o.Token, p.Token, gap)
				}
			}
			// The fixture's continuation is torch's greedy choice; ref's
			// choice at the same positions is the agreement counted above.
			for i := fx.PromptLen; i < len(fx.Tokens); i++ {
				if fx.Tokens[i] != fx.Positions[i-1].Token {
					t.Fatalf("fixture token %d is not torch's greedy token at position %d", i, i-1)
				}
			}
			mean := float64(sum) / float64(n)
			t.Logf("%s: %d positions x top-%d logits: max %d bf16 steps, mean %.3f; greedy tokens agree at %d of %d positions",
				fx.Name, len(fx.Positions), len(fx.Positions[0].TopIDs), maxSteps, mean, agree, len(fx.Positions))
			if mean > crossMeanSteps {
				t.Errorf("mean difference %.3f bf16 steps > %.1f", mean, crossMeanSteps)
			}
		})
	}
}
