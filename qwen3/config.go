package qwen3

import "github.com/offcard/offcard/internal/membudget"

// Config is the subset of a Hugging Face Qwen3 config.json that shapes the
// model. Field names follow HF's keys.
type Config struct {
	HiddenSize            int     `json:"hidden_size"`
	IntermediateSize      int     `json:"intermediate_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	NumKeyValueHeads      int     `json:"num_key_value_heads"`
	HeadDim               int     `json:"head_dim"`
	VocabSize             int     `json:"vocab_size"`
	RMSNormEps            float64 `json:"rms_norm_eps"`
	RopeTheta             float64 `json:"rope_theta"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	TieWordEmbeddings     bool    `json:"tie_word_embeddings"`
	// Dtype is torch_dtype (or dtype in newer files), e.g. "bfloat16".
	Dtype      string `json:"torch_dtype"`
	BOSTokenID int    `json:"bos_token_id"`
	EOSTokenID int    `json:"eos_token_id"`
}

// QDim is the width of the query projection (heads × head_dim).
func (c Config) QDim() int { return c.NumAttentionHeads * c.HeadDim }

// KVDim is the width of the key and value projections (kv heads × head_dim).
func (c Config) KVDim() int { return c.NumKeyValueHeads * c.HeadDim }

// Group is the number of query heads that share one KV head.
func (c Config) Group() int { return c.NumAttentionHeads / c.NumKeyValueHeads }

// Params is the number of parameters (weights) c implies, saturating at
// math.MaxInt64 for dimensions no checkpoint can have.
func (c Config) Params() int64 {
	h, q, kv := int64(c.HiddenSize), int64(c.QDim()), int64(c.KVDim())
	layer := membudget.Add(
		membudget.Mul(2, h),                          // input and post-attention norms
		membudget.Mul(q, h), membudget.Mul(2, kv, h), // q, k, v
		membudget.Mul(h, q),                            // o
		membudget.Mul(2, int64(c.HeadDim)),             // q and k norms
		membudget.Mul(3, int64(c.IntermediateSize), h), // gate, up, down
	)
	heads := int64(1)
	if !c.TieWordEmbeddings {
		heads = 2
	}
	return membudget.Add(membudget.Mul(heads, int64(c.VocabSize), h), h, membudget.Mul(int64(c.NumHiddenLayers), layer))
}

// KVBytes is the size in bytes of a bf16 KV cache of positions rows:
// keys and values of every layer.
func (c Config) KVBytes(positions int) int64 {
	return membudget.Mul(int64(positions), int64(c.NumHiddenLayers), 2, int64(c.KVDim()), 2)
}
