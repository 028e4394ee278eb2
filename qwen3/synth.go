package qwen3

import (
	"fmt"

	"github.com/offcard/offcard/bf16"
)

// Presets are the shapes Synth and the command line know by name.
var presets = map[string]Config{
	// The real Qwen/Qwen3-0.6B shape.
	"qwen3-0.6b": {
		HiddenSize: 1024, IntermediateSize: 3072, NumHiddenLayers: 28,
		NumAttentionHeads: 16, NumKeyValueHeads: 8, HeadDim: 128,
		VocabSize: 151936, RMSNormEps: 1e-6, RopeTheta: 1e6,
		MaxPositionEmbeddings: 40960, TieWordEmbeddings: true, Dtype: "bfloat16",
		BOSTokenID: 151643, EOSTokenID: 151645,
	},
	// A tiny model of the same architecture: 2 layers, 2:1 GQA, every
	// dimension a multiple of 32, so a decode step takes microseconds. Its
	// lm_head is untied (as in Qwen3-8B and larger): with tied embeddings and
	// small synthetic layers the greedy token just repeats its input, which
	// would hide bugs in feeding tokens back.
	"tiny": {
		HiddenSize: 128, IntermediateSize: 256, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 32,
		VocabSize: 512, RMSNormEps: 1e-6, RopeTheta: 1e6,
		MaxPositionEmbeddings: 4096, TieWordEmbeddings: false, Dtype: "bfloat16",
		BOSTokenID: 0, EOSTokenID: 1,
	},
}

// PresetNames lists the names Preset accepts.
func PresetNames() []string { return []string{"tiny", "qwen3-0.6b"} }

// Preset returns a named model shape.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown model preset %q (want tiny or qwen3-0.6b)", name)
	}
	return c, nil
}

// Synth makes deterministic weights for cfg: the same (cfg, seed) gives the
// same bytes on every machine, because only integer arithmetic and exact
// float64 sums feed the values. Norm weights are near 1 (1 + 0.05·N(0,1)),
// everything else is N(0, 0.02²), each rounded to bf16. Every tensor draws
// from its own stream keyed by its Hugging Face name, so adding a layer does
// not change the others. With cfg.TieWordEmbeddings the lm_head is the
// embedding table; otherwise it is drawn as "lm_head.weight".
func Synth(cfg Config, seed uint64) (*Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h, q, kv, inter := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize
	w := &Weights{Config: cfg}
	w.Embed = synthTensor(seed, "model.embed_tokens.weight", cfg.VocabSize*h, 0, 0.02)
	w.LMHead = w.Embed
	if !cfg.TieWordEmbeddings {
		w.LMHead = synthTensor(seed, "lm_head.weight", cfg.VocabSize*h, 0, 0.02)
	}
	w.Norm = synthTensor(seed, "model.norm.weight", h, 1, 0.05)
	w.Layers = make([]Layer, cfg.NumHiddenLayers)
	for i := range w.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		w.Layers[i] = Layer{
			InputNorm: synthTensor(seed, p+"input_layernorm.weight", h, 1, 0.05),
			Q:         synthTensor(seed, p+"self_attn.q_proj.weight", q*h, 0, 0.02),
			K:         synthTensor(seed, p+"self_attn.k_proj.weight", kv*h, 0, 0.02),
			V:         synthTensor(seed, p+"self_attn.v_proj.weight", kv*h, 0, 0.02),
			O:         synthTensor(seed, p+"self_attn.o_proj.weight", h*q, 0, 0.02),
			QNorm:     synthTensor(seed, p+"self_attn.q_norm.weight", cfg.HeadDim, 1, 0.05),
			KNorm:     synthTensor(seed, p+"self_attn.k_norm.weight", cfg.HeadDim, 1, 0.05),
			PostNorm:  synthTensor(seed, p+"post_attention_layernorm.weight", h, 1, 0.05),
			Gate:      synthTensor(seed, p+"mlp.gate_proj.weight", inter*h, 0, 0.02),
			Up:        synthTensor(seed, p+"mlp.up_proj.weight", inter*h, 0, 0.02),
			Down:      synthTensor(seed, p+"mlp.down_proj.weight", h*inter, 0, 0.02),
		}
	}
	return w, nil
}

// synthTensor draws n values mean + std·N(0,1) from the stream (seed, name).
// N(0,1) is approximated by the Irwin–Hall sum of 12 uniforms minus 6: exact
// in float64, so identical on every platform.
func synthTensor(seed uint64, name string, n int, mean, std float64) []bf16.BF16 {
	s := splitmix{state: seed ^ fnv1a(name)}
	out := make([]bf16.BF16, n)
	for i := range out {
		var sum float64
		for range 12 {
			sum += float64(s.next()>>11) * (1.0 / (1 << 53))
		}
		out[i] = bf16.FromFloat32(float32(mean + std*(sum-6)))
	}
	return out
}

func fnv1a(s string) uint64 {
	h := uint64(0xcbf29ce484222325)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return h
}

type splitmix struct{ state uint64 }

func (s *splitmix) next() uint64 {
	s.state += 0x9E3779B97F4A7C15
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
