package qwen3

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"

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
// everything else is N(0, 0.02²), each rounded to bf16, except the final
// norm (model.norm.weight), which is FinalNormScale(cfg)·(1 + 0.05·N(0,1)):
// it makes the next-token distribution peaked like a trained model's (see
// FinalNormScale). Every tensor draws
// from its own stream keyed by its Hugging Face name, so adding a layer does
// not change the others. With cfg.TieWordEmbeddings the lm_head is the
// embedding table; otherwise it is drawn as "lm_head.weight".
func Synth(cfg Config, seed uint64) (*Weights, error) {
	return SynthProgress(cfg, seed, nil)
}

// SynthProgress is Synth that reports its progress: progress (when not
// nil) is called with the values drawn so far and the model's total, from
// one goroutine at a time, at least once per million values and once at
// the end. The values are drawn in chunks on GOMAXPROCS goroutines; a
// chunk starts its stream where the previous one left it (splitmix64 is a
// counter), so the bytes do not depend on the number of goroutines.
func SynthProgress(cfg Config, seed uint64, progress func(done, total int64)) (*Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h, q, kv, inter := cfg.HiddenSize, cfg.QDim(), cfg.KVDim(), cfg.IntermediateSize
	var jobs []synthJob
	add := func(dst *[]bf16.BF16, name string, n int, mean, std float64) {
		*dst = make([]bf16.BF16, n)
		jobs = append(jobs, synthJob{out: *dst, name: name, mean: mean, std: std})
	}
	w := &Weights{Config: cfg}
	add(&w.Embed, "model.embed_tokens.weight", cfg.VocabSize*h, 0, 0.02)
	w.LMHead = w.Embed
	if !cfg.TieWordEmbeddings {
		add(&w.LMHead, "lm_head.weight", cfg.VocabSize*h, 0, 0.02)
	}
	fs := FinalNormScale(cfg)
	add(&w.Norm, "model.norm.weight", h, fs, 0.05*fs)
	w.Layers = make([]Layer, cfg.NumHiddenLayers)
	for i := range w.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		L := &w.Layers[i]
		add(&L.InputNorm, p+"input_layernorm.weight", h, 1, 0.05)
		add(&L.Q, p+"self_attn.q_proj.weight", q*h, 0, 0.02)
		add(&L.K, p+"self_attn.k_proj.weight", kv*h, 0, 0.02)
		add(&L.V, p+"self_attn.v_proj.weight", kv*h, 0, 0.02)
		add(&L.O, p+"self_attn.o_proj.weight", h*q, 0, 0.02)
		add(&L.QNorm, p+"self_attn.q_norm.weight", cfg.HeadDim, 1, 0.05)
		add(&L.KNorm, p+"self_attn.k_norm.weight", cfg.HeadDim, 1, 0.05)
		add(&L.PostNorm, p+"post_attention_layernorm.weight", h, 1, 0.05)
		add(&L.Gate, p+"mlp.gate_proj.weight", inter*h, 0, 0.02)
		add(&L.Up, p+"mlp.up_proj.weight", inter*h, 0, 0.02)
		add(&L.Down, p+"mlp.down_proj.weight", h*inter, 0, 0.02)
	}
	runSynth(seed, jobs, progress)
	return w, nil
}

// synthJob is one tensor to draw: out[i] = mean + std·N(0,1) from the
// stream (seed, name).
type synthJob struct {
	out       []bf16.BF16
	name      string
	mean, std float64
}

// synthChunk is the most values one goroutine draws at a time.
const synthChunk = 1 << 20

// runSynth draws every job, chunk by chunk, on GOMAXPROCS goroutines.
func runSynth(seed uint64, jobs []synthJob, progress func(done, total int64)) {
	type chunk struct {
		j      *synthJob
		lo, hi int
	}
	var chunks []chunk
	var total int64
	for i := range jobs {
		n := len(jobs[i].out)
		total += int64(n)
		for lo := 0; lo < n; lo += synthChunk {
			chunks = append(chunks, chunk{&jobs[i], lo, min(lo+synthChunk, n)})
		}
	}
	work := make(chan chunk)
	done := make(chan int, len(chunks))
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(chunks))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				drawNormal(c.j.out[c.lo:c.hi], seed, c.j.name, c.lo, c.j.mean, c.j.std)
				done <- c.hi - c.lo
			}
		}()
	}
	go func() {
		for _, c := range chunks {
			work <- c
		}
		close(work)
		wg.Wait()
		close(done)
	}()
	var drawn int64
	for n := range done {
		drawn += int64(n)
		if progress != nil {
			progress(drawn, total)
		}
	}
	if progress != nil && len(chunks) == 0 {
		progress(0, 0)
	}
}

// SynthMargin is the median top-1 minus top-2 logit, in nats, that
// FinalNormScale aims Synth's models at: a trained model's next token
// usually leads by several nats, and so must a synthetic one's, or an
// engine judged on its tokens alone (within a near-tie band of 0.5 nats)
// passes with its positions wrong.
const SynthMargin = 3

// FinalNormScale is the mean of Synth's final norm weight for cfg. With
// every other weight as Synth draws it, a logit is the dot product of a
// hidden state normalised to RMS 1 with a row of N(0, 0.02²) values, so the
// logits of one position spread over the vocabulary like a normal
// distribution of standard deviation 0.02·√hidden·scale. The gap between
// the largest two of V normal draws is about σ·ln2/√(2·ln V) at the median
// (extreme-value spacing; measured 0.22σ at V = 512, 0.14σ at 151936), so
// the scale that puts the median gap at SynthMargin nats is
// SynthMargin·√(2·ln V)/ln2 / (0.02·√hidden). ln V is taken as
// ln2·⌈log2 V⌉ (integer arithmetic, square roots and quotients only, all
// correctly rounded: the same bits on every platform). tiny: 67.6 (logits
// of σ ≈ 15); qwen3-0.6b: 33.8 (σ ≈ 22).
func FinalNormScale(cfg Config) float64 {
	l := float64(bits.Len(uint(max(cfg.VocabSize-1, 1))))
	sigma := SynthMargin * math.Sqrt(2*l/math.Ln2)
	return sigma / (0.02 * math.Sqrt(float64(cfg.HiddenSize)))
}

// drawNormal fills out with the values first, first+1, ... of the stream
// (seed, name): value i is mean + std·N(0,1), N(0,1) approximated by the
// Irwin–Hall sum of the stream's uniforms 12i … 12i+11 minus 6, summed in
// float64 in that order (deterministic IEEE arithmetic, identical on every
// platform).
func drawNormal(out []bf16.BF16, seed uint64, name string, first int, mean, std float64) {
	// splitmix64's state advances by a constant per draw: skip 12·first.
	s := splitmix{state: (seed ^ fnv1a(name)) + uint64(12*first)*splitmixGamma}
	for i := range out {
		var sum float64
		for range 12 {
			sum += float64(s.next()>>11) * (1.0 / (1 << 53))
		}
		// The conversion rounds the product: no fused multiply-add on
		// any platform.
		out[i] = bf16.FromFloat32(float32(mean + float64(std*(sum-6))))
	}
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

const splitmixGamma = 0x9E3779B97F4A7C15

func (s *splitmix) next() uint64 {
	s.state += splitmixGamma
	z := s.state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
