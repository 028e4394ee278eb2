package qwen3

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/qwen3-0.6b-config.json is Qwen/Qwen3-0.6B's config.json at
// revision c1899de, reconstructed key by key from the research notes (§1.1):
// HF's layout (sorted keys, two-space indent), 726 bytes.
func TestParseRealQwen3Config(t *testing.T) {
	c, err := LoadConfig(filepath.Join("testdata", "qwen3-0.6b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Preset("qwen3-0.6b")
	if c != want {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	if c.QDim() != 2048 || c.KVDim() != 1024 || c.Group() != 2 {
		t.Fatalf("derived dims %d %d %d", c.QDim(), c.KVDim(), c.Group())
	}
}

// edit returns the real config with some keys replaced (a nil value deletes
// the key).
func edit(t *testing.T, changes map[string]any) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "qwen3-0.6b-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range changes {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseConfigVariants(t *testing.T) {
	want, _ := Preset("qwen3-0.6b")
	cases := map[string]struct {
		changes map[string]any
		check   func(Config) bool
	}{
		"dtype instead of torch_dtype": {
			map[string]any{"torch_dtype": nil, "dtype": "bfloat16"},
			func(c Config) bool { return c == want },
		},
		"both dtype keys agreeing": {
			map[string]any{"dtype": "bfloat16"},
			func(c Config) bool { return c == want },
		},
		"rope_parameters": {
			map[string]any{"rope_theta": nil, "rope_scaling": nil, "rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1000000}},
			func(c Config) bool { return c == want },
		},
		"rope_theta as float": {
			map[string]any{"rope_theta": 1e6},
			func(c Config) bool { return c == want },
		},
		"eos list": {
			map[string]any{"eos_token_id": []int{151645, 151643}},
			func(c Config) bool { return c == want },
		},
		"eos null": {
			map[string]any{"eos_token_id": json.RawMessage("null")},
			func(c Config) bool { return c.EOSTokenID == -1 },
		},
		"no head_dim": {
			map[string]any{"head_dim": nil, "hidden_size": 2048},
			func(c Config) bool { return c.HeadDim == 128 },
		},
		"defaults": {
			map[string]any{"rms_norm_eps": nil, "rope_theta": nil, "max_position_embeddings": nil, "tie_word_embeddings": nil, "num_key_value_heads": nil, "bos_token_id": nil, "torch_dtype": nil},
			func(c Config) bool {
				return c.RMSNormEps == 1e-6 && c.RopeTheta == 10000 && c.MaxPositionEmbeddings == 32768 &&
					!c.TieWordEmbeddings && c.NumKeyValueHeads == 16 && c.BOSTokenID == -1 && c.Dtype == ""
			},
		},
		"unknown keys ignored": {
			map[string]any{"quantization": map[string]any{"x": []int{1}}, "Hidden_Size": "nonsense"},
			func(c Config) bool { return c == want },
		},
		"float16 dtype": {
			map[string]any{"torch_dtype": "float16"},
			func(c Config) bool { return c.Dtype == "float16" },
		},
	}
	for name, tc := range cases {
		c, err := ParseConfig(edit(t, tc.changes))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !tc.check(c) {
			t.Errorf("%s: got %+v", name, c)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name    string
		changes map[string]any
		raw     string // used instead of changes when set
		want    string
	}{
		{name: "not JSON", raw: "hidden_size: 1024", want: "config.json: not a JSON object"},
		{name: "JSON array", raw: "[1,2]", want: "config.json: not a JSON object"},
		{name: "JSON null", raw: "null", want: "config.json: not a JSON object"},
		{name: "empty", raw: "", want: "config.json: not a JSON object"},
		{name: "trailing garbage", raw: `{"hidden_size":1} x`, want: "config.json: not a JSON object"},
		{name: "zero heads", changes: map[string]any{"num_attention_heads": 0}, want: "num_attention_heads 0 must be positive"},
		{name: "zero kv heads", changes: map[string]any{"num_key_value_heads": 0}, want: "num_key_value_heads 0 must be positive"},
		{name: "kv heads not dividing", changes: map[string]any{"num_key_value_heads": 3}, want: "config.json: num_key_value_heads 3 does not divide num_attention_heads 16"},
		{name: "head_dim 100", changes: map[string]any{"head_dim": 100}, want: "head_dim 100 is not a multiple of 32"},
		{name: "head_dim 48", changes: map[string]any{"head_dim": 48}, want: "head_dim 48 is not a multiple of 32"},
		{name: "negative hidden", changes: map[string]any{"hidden_size": -1024}, want: "hidden_size -1024 must be positive"},
		{name: "negative layers", changes: map[string]any{"num_hidden_layers": -1}, want: "num_hidden_layers -1 must be positive"},
		{name: "negative vocab", changes: map[string]any{"vocab_size": -5}, want: "vocab_size -5 must be positive"},
		{name: "hidden not tile", changes: map[string]any{"hidden_size": 1000}, want: "hidden_size 1000 is not a multiple of 32"},
		{name: "vocab not tile", changes: map[string]any{"vocab_size": 151669}, want: "vocab_size 151669 is not a multiple of 32; pad it to 151680"},
		{name: "missing hidden_size", changes: map[string]any{"hidden_size": nil}, want: "config.json: missing hidden_size"},
		{name: "missing vocab_size", changes: map[string]any{"vocab_size": nil}, want: "config.json: missing vocab_size"},
		{name: "missing layers", changes: map[string]any{"num_hidden_layers": nil}, want: "config.json: missing num_hidden_layers"},
		{name: "missing intermediate", changes: map[string]any{"intermediate_size": nil}, want: "config.json: missing intermediate_size"},
		{name: "missing heads", changes: map[string]any{"num_attention_heads": nil}, want: "config.json: missing num_attention_heads"},
		{name: "fractional size", changes: map[string]any{"hidden_size": 1024.5}, want: "hidden_size: want an integer"},
		{name: "string size", changes: map[string]any{"hidden_size": "1024"}, want: "hidden_size: want an integer"},
		{name: "huge size", changes: map[string]any{"vocab_size": 1 << 40}, want: "vocab_size"},
		{name: "zero eps", changes: map[string]any{"rms_norm_eps": 0}, want: "rms_norm_eps 0 must be positive"},
		{name: "negative theta", changes: map[string]any{"rope_theta": -1}, want: "rope_theta -1 must be positive"},
		{name: "string theta", changes: map[string]any{"rope_theta": "1e6"}, want: "rope_theta: want a number"},
		{name: "unknown dtype", changes: map[string]any{"torch_dtype": "int8"}, want: `torch_dtype "int8" is not one of`},
		{name: "dtype disagreement", changes: map[string]any{"dtype": "float32"}, want: `dtype "float32" disagrees with torch_dtype "bfloat16"`},
		{name: "yarn", changes: map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4}}, want: `rope_scaling.rope_type "yarn" is not supported`},
		{name: "theta disagreement", changes: map[string]any{"rope_parameters": map[string]any{"rope_theta": 5000000}}, want: "rope_theta 1e+06 disagrees with rope_parameters.rope_theta 5e+06"},
		{name: "qwen2", changes: map[string]any{"model_type": "qwen2"}, want: `model_type "qwen2" is not supported`},
		{name: "bias", changes: map[string]any{"attention_bias": true}, want: "attention_bias true is not supported"},
		{name: "eos outside vocab", changes: map[string]any{"eos_token_id": 151936}, want: "eos_token_id 151936 is outside the vocabulary"},
		{name: "eos list of strings", changes: map[string]any{"eos_token_id": []string{"a"}}, want: "eos_token_id: want an integer"},
		{name: "bool as string", changes: map[string]any{"tie_word_embeddings": "yes"}, want: "tie_word_embeddings: want true or false"},
		{name: "head_dim absent, hidden indivisible", changes: map[string]any{"head_dim": nil, "num_attention_heads": 24, "num_key_value_heads": 8}, want: "head_dim is absent"},
	}
	for _, c := range cases {
		data := []byte(c.raw)
		if c.raw == "" && c.changes != nil {
			data = edit(t, c.changes)
		}
		_, err := ParseConfig(data)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) || !strings.HasPrefix(msg, "config.json: ") || strings.Contains(msg, "\n") {
			t.Errorf("%s: got %q, want one line containing %q", c.name, msg, c.want)
		}
	}
}

func TestPresetsValidate(t *testing.T) {
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := (Config{}).Validate(); err == nil {
		t.Error("zero Config validated")
	}
}

// FuzzParseConfig: ParseConfig never panics, and whatever it accepts
// validates and survives a JSON round trip of the exported form.
func FuzzParseConfig(f *testing.F) {
	if data, err := os.ReadFile(filepath.Join("testdata", "qwen3-0.6b-config.json")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		again, err := ParseConfig(configJSON(c))
		if err != nil {
			t.Fatalf("exported config does not parse: %v", err)
		}
		if c.Dtype == "" {
			c.Dtype = "bfloat16"
		}
		again.Dtype = c.Dtype
		if again != c {
			t.Fatalf("round trip changed %+v to %+v", c, again)
		}
	})
}
