package qwen3

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/offcard/offcard/internal/inputfile"
)

// Defaults for keys a config.json may omit. They are Hugging Face
// Qwen3Config's defaults, except head_dim (see ParseConfig).
const (
	DefaultRMSNormEps            = 1e-6
	DefaultRopeTheta             = 10000.0
	DefaultMaxPositionEmbeddings = 32768
)

// maxDim bounds every size so that products of two sizes cannot overflow.
const maxDim = 1 << 24

// LoadConfig reads and parses a config.json file: a regular file of at
// most inputfile.MaxJSON bytes.
func LoadConfig(path string) (Config, error) {
	data, err := inputfile.ReadFile(path, inputfile.MaxJSON, "a config.json")
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig parses a Hugging Face Qwen3 config.json and validates it
// (Validate). Keys are matched exactly, as Python does; unknown keys are
// ignored; of a duplicated key the last wins, as in Python's json.
//
//   - Required: hidden_size, intermediate_size, num_hidden_layers,
//     num_attention_heads, vocab_size (JSON integers).
//   - num_key_value_heads defaults to num_attention_heads (as in HF).
//   - head_dim defaults to hidden_size / num_attention_heads. (HF's
//     Qwen3Config defaults it to 128; every released Qwen3 config sets it.)
//   - rms_norm_eps defaults to 1e-6; max_position_embeddings to 32768;
//     tie_word_embeddings to false (all as in HF's Qwen3Config).
//   - rope_theta is read from the top level or from
//     rope_parameters.rope_theta (newer transformers); an integer is fine.
//     When both are absent it is 10000, HF's default. A rope_scaling or
//     rope_parameters whose rope_type is not "default" is rejected: only
//     plain RoPE is implemented.
//   - The dtype comes from "dtype" (newer) or "torch_dtype"; if both are
//     present they must agree.
//   - bos_token_id and eos_token_id may be null or absent (then -1);
//     eos_token_id may be a list, of which the first entry is taken.
//   - model_type, when present, must be "qwen3"; hidden_act, when present,
//     "silu"; attention_bias and use_sliding_window, when present, false.
//
// Errors begin with "config.json:" and name the offending key.
func ParseConfig(data []byte) (Config, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		if err == nil {
			err = fmt.Errorf("got null")
		}
		return Config{}, fmt.Errorf("config.json: not a JSON object: %v", err)
	}
	r := reader{m: m}
	c := Config{
		HiddenSize:        r.requiredInt("hidden_size"),
		IntermediateSize:  r.requiredInt("intermediate_size"),
		NumHiddenLayers:   r.requiredInt("num_hidden_layers"),
		NumAttentionHeads: r.requiredInt("num_attention_heads"),
		VocabSize:         r.requiredInt("vocab_size"),
	}
	c.NumKeyValueHeads = r.optionalInt("num_key_value_heads", c.NumAttentionHeads)
	headDim := 0
	if c.NumAttentionHeads > 0 {
		headDim = c.HiddenSize / c.NumAttentionHeads
	}
	if _, ok := r.get("head_dim"); !ok && c.NumAttentionHeads > 0 && c.HiddenSize%c.NumAttentionHeads != 0 && r.err == nil {
		r.fail("config.json: head_dim is absent and hidden_size %d is not divisible by num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	c.HeadDim = r.optionalInt("head_dim", headDim)
	c.RMSNormEps = r.optionalFloat("rms_norm_eps", DefaultRMSNormEps)
	c.MaxPositionEmbeddings = r.optionalInt("max_position_embeddings", DefaultMaxPositionEmbeddings)
	c.TieWordEmbeddings = r.optionalBool("tie_word_embeddings", false)
	c.BOSTokenID = r.optionalInt("bos_token_id", -1)
	c.EOSTokenID = r.eos()
	c.RopeTheta = r.ropeTheta()
	c.Dtype = r.dtype()
	if s, ok := r.optionalString("model_type"); ok && s != "qwen3" {
		r.fail("config.json: model_type %q is not supported (want \"qwen3\")", s)
	}
	if s, ok := r.optionalString("hidden_act"); ok && s != "silu" {
		r.fail("config.json: hidden_act %q is not supported (want \"silu\")", s)
	}
	if r.optionalBool("attention_bias", false) {
		r.fail("config.json: attention_bias true is not supported (Qwen3 has no biases)")
	}
	if r.optionalBool("use_sliding_window", false) {
		r.fail("config.json: use_sliding_window true is not supported")
	}
	if r.err != nil {
		return Config{}, r.err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks that c describes a model this project can run: every size
// positive (and at most 2^24); num_attention_heads divisible by
// num_key_value_heads; head_dim, hidden_size, intermediate_size and
// vocab_size multiples of 32 (the device's tile edge; head_dim is thereby
// even, as RoPE needs); rms_norm_eps and rope_theta positive and finite; the
// dtype empty or one of bfloat16, float16, float32; token ids, when set
// (≥ 0), inside the vocabulary.
func (c Config) Validate() error {
	sizes := []struct {
		key string
		v   int
	}{
		{"hidden_size", c.HiddenSize},
		{"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads},
		{"head_dim", c.HeadDim},
		{"vocab_size", c.VocabSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings},
	}
	for _, s := range sizes {
		if s.v <= 0 {
			return fmt.Errorf("config.json: %s %d must be positive", s.key, s.v)
		}
		if s.v > maxDim && s.key != "max_position_embeddings" {
			return fmt.Errorf("config.json: %s %d is larger than %d", s.key, s.v, maxDim)
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("config.json: num_key_value_heads %d does not divide num_attention_heads %d", c.NumKeyValueHeads, c.NumAttentionHeads)
	}
	for _, s := range []struct {
		key string
		v   int
	}{
		{"head_dim", c.HeadDim},
		{"hidden_size", c.HiddenSize},
		{"intermediate_size", c.IntermediateSize},
	} {
		if s.v%32 != 0 {
			return fmt.Errorf("config.json: %s %d is not a multiple of 32 (the device tile edge)", s.key, s.v)
		}
	}
	if c.VocabSize%32 != 0 {
		return fmt.Errorf("config.json: vocab_size %d is not a multiple of 32; pad it to %d", c.VocabSize, (c.VocabSize+31)/32*32)
	}
	if !(c.RMSNormEps > 0) || math.IsInf(c.RMSNormEps, 0) {
		return fmt.Errorf("config.json: rms_norm_eps %v must be positive and finite", c.RMSNormEps)
	}
	if !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) {
		return fmt.Errorf("config.json: rope_theta %v must be positive and finite", c.RopeTheta)
	}
	switch c.Dtype {
	case "", "bfloat16", "float16", "float32":
	default:
		return fmt.Errorf("config.json: torch_dtype %q is not one of bfloat16, float16, float32", c.Dtype)
	}
	for _, s := range []struct {
		key string
		v   int
	}{{"bos_token_id", c.BOSTokenID}, {"eos_token_id", c.EOSTokenID}} {
		if s.v >= c.VocabSize || s.v < -1 {
			return fmt.Errorf("config.json: %s %d is outside the vocabulary [0, %d)", s.key, s.v, c.VocabSize)
		}
	}
	return nil
}

// reader pulls typed values out of a decoded JSON object, keeping the first
// error.
type reader struct {
	m      map[string]json.RawMessage
	prefix string // for nested objects, e.g. "rope_parameters."
	err    error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

// get returns the raw value of key; null counts as absent.
func (r *reader) get(key string) (json.RawMessage, bool) {
	v, ok := r.m[key]
	if !ok || string(v) == "null" {
		return nil, false
	}
	return v, true
}

func (r *reader) requiredInt(key string) int {
	if _, ok := r.get(key); !ok {
		r.fail("config.json: missing %s", r.prefix+key)
		return 0
	}
	return r.optionalInt(key, 0)
}

func (r *reader) optionalInt(key string, def int) int {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	n, err := parseInt(v)
	if err != nil {
		r.fail("config.json: %s: %v", r.prefix+key, err)
		return 0
	}
	return n
}

func parseInt(v json.RawMessage) (int, error) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer, got %s", clip(v))
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, fmt.Errorf("%d is out of range", n)
	}
	return int(n), nil
}

func (r *reader) optionalFloat(key string, def float64) float64 {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		r.fail("config.json: %s: want a number, got %s", r.prefix+key, clip(v))
		return 0
	}
	return f
}

func (r *reader) optionalBool(key string, def bool) bool {
	v, ok := r.get(key)
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		r.fail("config.json: %s: want true or false, got %s", r.prefix+key, clip(v))
		return false
	}
	return b
}

func (r *reader) optionalString(key string) (string, bool) {
	v, ok := r.get(key)
	if !ok {
		return "", false
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		r.fail("config.json: %s: want a string, got %s", r.prefix+key, clip(v))
		return "", false
	}
	return s, true
}

func (r *reader) eos() int {
	v, ok := r.get("eos_token_id")
	if !ok {
		return -1
	}
	if len(v) > 0 && v[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			r.fail("config.json: eos_token_id: want an integer or a list of integers, got %s", clip(v))
			return 0
		}
		if len(list) == 0 {
			return -1
		}
		for _, e := range list {
			if _, err := parseInt(e); err != nil {
				r.fail("config.json: eos_token_id: %v", err)
				return 0
			}
		}
		n, _ := parseInt(list[0])
		return n
	}
	return r.optionalInt("eos_token_id", -1)
}

func (r *reader) ropeTheta() float64 {
	theta := r.optionalFloat("rope_theta", 0)
	_, top := r.get("rope_theta")
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		v, ok := r.get(key)
		if !ok {
			continue
		}
		var p map[string]json.RawMessage
		if err := json.Unmarshal(v, &p); err != nil {
			r.fail("config.json: %s: want an object, got %s", key, clip(v))
			return 0
		}
		sub := reader{m: p, prefix: key + "."}
		for _, typeKey := range []string{"rope_type", "type"} {
			if t, ok := sub.optionalString(typeKey); ok && t != "default" {
				r.fail("config.json: %s.%s %q is not supported (only default RoPE)", key, typeKey, t)
			}
		}
		if sub.err != nil {
			r.fail("%v", sub.err)
		}
		if key != "rope_parameters" {
			continue
		}
		if _, ok := sub.get("rope_theta"); ok {
			t := sub.optionalFloat("rope_theta", 0)
			if sub.err != nil {
				r.fail("%v", sub.err)
				return 0
			}
			if top && t != theta {
				r.fail("config.json: rope_theta %v disagrees with rope_parameters.rope_theta %v", theta, t)
			}
			theta, top = t, true
		}
	}
	if !top {
		return DefaultRopeTheta
	}
	return theta
}

func (r *reader) dtype() string {
	a, okA := r.optionalString("dtype")
	b, okB := r.optionalString("torch_dtype")
	if okA && okB && a != b {
		r.fail("config.json: dtype %q disagrees with torch_dtype %q", a, b)
	}
	if okA {
		return a
	}
	return b
}

// clip shortens a raw JSON value for an error message.
func clip(v json.RawMessage) string {
	const max = 40
	if len(v) > max {
		return string(v[:max]) + "…"
	}
	return string(v)
}
