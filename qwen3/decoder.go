package qwen3

// A Decoder runs Qwen3 over sequences whose paged KV cache is laid out by the
// caller. The scheduler (the caller) owns the block pool (package kvpage) and
// hands every call each sequence's block table, as vLLM's scheduler does; a
// Decoder never allocates blocks. Implemented by ref.Decoder (the oracle) and
// Engine (a paged decode driver over a tt.Device). Same inputs, same outputs,
// on every implementation.
type Decoder interface {
	// Config is the model the decoder runs.
	Config() Config
	// BlockSize is the number of token positions per KV block.
	BlockSize() int
	// Prefill writes the prompt's keys and values at positions 0..len(Tokens)-1
	// through p.Blocks and returns one Output per prompt position, in order.
	// The sequence must not be live yet.
	Prefill(p Prefill) ([]Output, error)
	// Decode runs one step for each entry of batch (one token per sequence,
	// distinct sequences), writing each token's KV at its position, and returns
	// one Output per entry, in the batch's order.
	Decode(batch []Step) ([]Output, error)
	// Finish forgets a sequence; its blocks belong to the caller again.
	Finish(seq SeqID) error
}

// SeqID names a sequence for the lifetime of its decode.
type SeqID int

// Prefill is a prompt to be written into the paged cache from position 0.
type Prefill struct {
	Seq    SeqID
	Tokens []int32
	// Blocks is the sequence's block table: Blocks[i] holds positions
	// i*BlockSize .. (i+1)*BlockSize-1. It must cover every prompt position.
	Blocks []int32
}

// Step is one sequence's token in a decode batch.
type Step struct {
	Seq   SeqID
	Token int32
	// Pos is the token's position: the sequence's length before this step.
	Pos int
	// Blocks is the sequence's block table; it must cover Pos.
	Blocks []int32
}

// Output is the result of one processed position.
type Output struct {
	Seq SeqID
	Pos int
	// Token is the greedy choice: the first index of the largest logit.
	Token int32
	// Logits are the bf16 logits widened to float32 (exact), len = VocabSize.
	Logits []float32
}

// Argmax returns the first index of the largest value (NaN never wins), as
// torch.argmax does on ties.
func Argmax(v []float32) int32 {
	best := -1
	for i, x := range v {
		if x != x {
			continue
		}
		if best < 0 || x > v[best] {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	return int32(best)
}
