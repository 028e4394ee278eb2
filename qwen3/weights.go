package qwen3

import "github.com/offcard/offcard/bf16"

// Weights holds a Qwen3 checkpoint as bf16 matrices in Hugging Face's layout:
// a linear layer's weight is row-major [out, in], so output o is the dot
// product of the input with row o. Slices may alias a file's read-only
// image (safetensors.Open): never write to them.
type Weights struct {
	Config Config
	Embed  []bf16.BF16 // [vocab, hidden]
	// LMHead is [vocab, hidden]; with tied embeddings it is Embed itself.
	LMHead []bf16.BF16
	Norm   []bf16.BF16 // [hidden], the final norm
	Layers []Layer

	closer func() error
}

// Layer is one decoder layer's tensors.
type Layer struct {
	InputNorm []bf16.BF16 // [hidden]
	Q         []bf16.BF16 // [heads*head_dim, hidden]
	K         []bf16.BF16 // [kv_heads*head_dim, hidden]
	V         []bf16.BF16 // [kv_heads*head_dim, hidden]
	O         []bf16.BF16 // [hidden, heads*head_dim]
	QNorm     []bf16.BF16 // [head_dim]
	KNorm     []bf16.BF16 // [head_dim]
	PostNorm  []bf16.BF16 // [hidden]
	Gate      []bf16.BF16 // [intermediate, hidden]
	Up        []bf16.BF16 // [intermediate, hidden]
	Down      []bf16.BF16 // [hidden, intermediate]
}

// Close releases the files' images behind w, if any. w must not be used after.
func (w *Weights) Close() error {
	if w == nil || w.closer == nil {
		return nil
	}
	c := w.closer
	w.closer = nil
	return c()
}
