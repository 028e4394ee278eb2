package qwen3

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
