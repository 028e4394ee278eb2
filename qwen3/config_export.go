package qwen3

import "encoding/json"

// hfConfig is config.json as Export writes it: Hugging Face's key names, in
// HF's sorted order.
type hfConfig struct {
	Architectures         []string  `json:"architectures"`
	AttentionBias         bool      `json:"attention_bias"`
	BOSTokenID            *int      `json:"bos_token_id"`
	EOSTokenID            *int      `json:"eos_token_id"`
	HeadDim               int       `json:"head_dim"`
	HiddenAct             string    `json:"hidden_act"`
	HiddenSize            int       `json:"hidden_size"`
	IntermediateSize      int       `json:"intermediate_size"`
	MaxPositionEmbeddings int       `json:"max_position_embeddings"`
	ModelType             string    `json:"model_type"`
	NumAttentionHeads     int       `json:"num_attention_heads"`
	NumHiddenLayers       int       `json:"num_hidden_layers"`
	NumKeyValueHeads      int       `json:"num_key_value_heads"`
	RMSNormEps            float64   `json:"rms_norm_eps"`
	RopeScaling           *struct{} `json:"rope_scaling"`
	RopeTheta             float64   `json:"rope_theta"`
	TieWordEmbeddings     bool      `json:"tie_word_embeddings"`
	TorchDtype            string    `json:"torch_dtype"`
	UseSlidingWindow      bool      `json:"use_sliding_window"`
	VocabSize             int       `json:"vocab_size"`
}

// configJSON renders c as an HF-style config.json (two-space indent,
// trailing newline). Token ids of -1 are written as null.
func configJSON(c Config) []byte {
	id := func(v int) *int {
		if v < 0 {
			return nil
		}
		return &v
	}
	h := hfConfig{
		Architectures:         []string{"Qwen3ForCausalLM"},
		BOSTokenID:            id(c.BOSTokenID),
		EOSTokenID:            id(c.EOSTokenID),
		HeadDim:               c.HeadDim,
		HiddenAct:             "silu",
		HiddenSize:            c.HiddenSize,
		IntermediateSize:      c.IntermediateSize,
		MaxPositionEmbeddings: c.MaxPositionEmbeddings,
		ModelType:             "qwen3",
		NumAttentionHeads:     c.NumAttentionHeads,
		NumHiddenLayers:       c.NumHiddenLayers,
		NumKeyValueHeads:      c.NumKeyValueHeads,
		RMSNormEps:            c.RMSNormEps,
		RopeTheta:             c.RopeTheta,
		TieWordEmbeddings:     c.TieWordEmbeddings,
		TorchDtype:            "bfloat16",
		VocabSize:             c.VocabSize,
	}
	out, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		panic(err) // unreachable: every field marshals, and Validate keeps floats finite
	}
	return append(out, '\n')
}
