package qwen3

// Optional interfaces beside Decoder for the schedules serving engines run
// (prefix caching, chunked prefill, speculative verify, forks with
// copy-on-write, rollback, preemption). A scheduler tests for each with a
// type assertion and draws only the actions the decoder supports. The block
// bookkeeping (shared blocks, reference counts, the copies a write needs)
// is the scheduler's, in package kvpage; a decoder carries out what it is
// handed.
//
// Rollback needs no call. Every entry names its positions (Step.Pos,
// VerifyStep.Pos, PrefillFrom.Start), and a decoder reads only the cache
// rows below the position it computes, after writing that position's row.
// A sequence rolled back to length L (kvpage Table.Truncate(L) after a
// verify accepted L positions) is simply decoded or verified from position
// L again: rows at and past L still hold the rejected drafts' KV, and each
// is overwritten by the step at its position before any step reads it. An
// implementation that keeps a per-sequence position of its own (a device
// cur_pos tensor) must take it from each call's positions, never advance
// it past a verify's accepted length on its own.
//
// Preemption by recompute needs no call either: Finish the sequence, and
// later re-admit it with Prefill (or PrefillFrom) of its prompt and the
// tokens generated so far, through any block table. The outputs must equal
// the original run's bit for bit (the cache's content depends on the
// tokens and positions only, never on the block layout).

// PrefillFrom is a prompt chunk written from position Start over KV already
// in the cache.
type PrefillFrom struct {
	Seq SeqID
	// Start is the first position computed. Positions 0..Start-1 are read
	// from the cache through Blocks: shared blocks of a prefix-cache hit
	// written by this or another sequence, or this sequence's earlier
	// chunks.
	Start int
	// Tokens are the tokens at positions Start..Start+len(Tokens)-1.
	Tokens []int32
	// Blocks is the sequence's block table; it must cover every position
	// up to Start+len(Tokens)-1. The blocks written (those holding
	// Start..Start+len(Tokens)-1) must be held by this sequence alone.
	Blocks []int32
}

// PrefixPrefiller prefills from a start position: a prefix-cache hit
// (Start = the cached length, usually a multiple of the block size) or one
// chunk of a chunked prefill (chunks in order, each starting where the last
// ended).
type PrefixPrefiller interface {
	// PrefillFrom writes the KV of positions Start..Start+len(Tokens)-1 and
	// returns one Output per position, in order. Each Output equals, bit
	// for bit, that of a Prefill from 0 of the same tokens (the cached
	// prefix's and these). Start 0 is Prefill (the sequence must not be
	// live); with Start > 0 the sequence may be new (a prefix hit) or live
	// (its next chunk), and is live afterwards.
	PrefillFrom(p PrefillFrom) ([]Output, error)
}

// VerifyStep is one sequence's entry of a verify batch: k tokens at
// positions Pos..Pos+k-1 (the last accepted token and the drafts after it).
type VerifyStep struct {
	Seq    SeqID
	Tokens []int32 // k >= 1 tokens
	// Pos is the position of Tokens[0]: the sequence's length before this
	// step.
	Pos int
	// Blocks is the sequence's block table; it must cover Pos+k-1 (grown
	// before the step: the k positions may cross a block boundary), and
	// the blocks written must be held by this sequence alone.
	Blocks []int32
}

// Verifier runs speculative decoding's verify step.
type Verifier interface {
	// Verify runs every entry of batch (distinct sequences), writing each
	// token's KV at its position, and returns per entry k Outputs, in
	// position order. Output j of an entry equals bit for bit what k
	// sequential Decode steps of the same tokens would return at position
	// Pos+j. Rejected positions are rolled back by the caller (see above:
	// no call).
	Verify(batch []VerifyStep) ([][]Output, error)
}

// BlockCopy is one block copy: every layer's keys and values of block Src
// written over block Dst, all rows (vLLM's copy_blocks; the copy-on-write
// step that kvpage's Table.PrepareWrite asks for).
type BlockCopy struct{ Src, Dst int32 }

// BlockCopier carries out block copies.
type BlockCopier interface {
	// CopyBlocks performs every copy. The copies are independent: no block
	// is the Dst of two copies or both a Src and a Dst, so their order does
	// not matter; a list that breaks this is refused, changing nothing.
	CopyBlocks(copies []BlockCopy) error
}

// ServingDecoder is a Decoder with every serving interface.
type ServingDecoder interface {
	Decoder
	PrefixPrefiller
	Verifier
	BlockCopier
}

// The serving calls by name (the protocol's names too).
const (
	ServePrefillFrom = "prefill_from"
	ServeVerify      = "verify"
	ServeCopyBlocks  = "copy_blocks"
)

// ServingOffer is a decoder whose serving support is known only at run
// time (a foreign engine over the protocol implements every method but
// answers only the calls its hello listed). A scheduler draws a serving
// action only when the decoder implements its interface and, if it
// implements ServingOffer too, OffersServing names the call.
type ServingOffer interface {
	OffersServing(call string) bool
}

// Serves reports whether d supports the serving call (ServePrefillFrom,
// ServeVerify, ServeCopyBlocks).
func Serves(d Decoder, call string) bool {
	var ok bool
	switch call {
	case ServePrefillFrom:
		_, ok = d.(PrefixPrefiller)
	case ServeVerify:
		_, ok = d.(Verifier)
	case ServeCopyBlocks:
		_, ok = d.(BlockCopier)
	}
	if o, isOffer := d.(ServingOffer); ok && isOffer {
		return o.OffersServing(call)
	}
	return ok
}
