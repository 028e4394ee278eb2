// Package wire is offcard's line protocol for an engine offcard did not
// write: one JSON object per line over a child process's stdin and stdout,
// one reply line per request, versioned by a hello exchange. This package
// speaks version 3 (Version) and accepts engines of versions 1 and 2
// (MinVersion 1); Schema is the protocol's JSON Schema
// (protocol.schema.json), and the README's "Put your engine under test"
// is the user's guide. An engine offcard did not write can be built from
// this comment and the schema alone.
//
// # Requests and replies
//
// Requests: hello (model: preset + seed, Hugging Face config, a weights
// directory; block size, number of blocks, capacity; hints for offcard's
// own engine), admit (seq, prompt, block table), decode (a batch of seq,
// token, position, block table), finish (seq), reset, bye; version 3
// adds the serving calls prefill_from, verify and copy_blocks (below).
// Replies: ok, or error (a refusal: the session goes on); hello's Caps
// (the version the engine speaks, logits none / top_k / full, exact, the
// observations offered, page_pad, follows_hints, serves); a call's Outputs (tokens; full rows
// as base64 little-endian bf16, or top-k plus the dump format's digest)
// and Observations. An engine should ignore request keys it does not know.
//
// # Sequences, positions, blocks
//
// offcard is the scheduler: it names sequences and owns the block pool.
// A sequence is live from its admit until its finish. An admit writes the
// prompt at positions 0..n-1 and answers every position's output (or the
// last one only). A decode entry writes its token at pos and answers the
// token after it; the batch's sequences are distinct, and live sequences
// outside the batch keep their state. A decode entry whose seq is not
// live starts that sequence: pos is 0 and token its first token (a
// one-token prompt through decode). A finished id may come back (by admit
// or by a decode start): it is a new sequence, nothing of the finished
// one carries over. blocks[i] holds positions i·block_size ..
// (i+1)·block_size-1, at row pos % block_size of block blocks[pos /
// block_size]; a call's table covers its positions. A block belongs to
// one live sequence (in version 3, several may share it: below); after
// finish it is offcard's again and may be handed to another sequence with
// its rows as the engine left them.
//
// A decode's pos is normally the sequence's length. A position jump (a
// script's skip=N) gives pos = length + N: positions length..pos-1 are
// never written, and attention at pos reads rows 0..pos of the table as
// the cache holds them. What a row the sequence never wrote holds (zeros
// of a fresh cache, a block's previous owner's rows, a prompt tile's
// padding, rows the engine cleared) is the engine's business: offcard does
// not judge that sequence's outputs (tokens nor logits, exact or not)
// from its first jump until it finishes; it feeds the engine's own tokens
// on and checks every observation as always. After the jump the
// sequence's length is pos+1.
//
// reset is a re-capture request: the engine drops any captured trace, and
// its next decode step replays nothing captured before the reset (it runs
// eagerly or captures afresh). Sequences, caches and tables are
// unchanged. An engine without traces answers ok and does nothing. finish
// forgets the sequence; the engine may clear its blocks (then reported as
// clears, with kv_writes). bye tears the engine down: the reply comes
// after, an error reply if the teardown failed.
//
// # Observations
//
// Caps.Observes lists what the engine reports; offcard checks exactly
// what is offered (the README's table says which bug each buys). A
// version 2 observation's field is required on every reply it belongs to,
// and forbidden when not offered (Caps.CheckObs; such a reply is
// Malformed); a sequence of the call missing from obs.seqs is a refusal
// of the property (sut-error). Version 1:
//
//   - cur_pos: obs.seqs[].cur_pos for each sequence of an admit or
//     decode: the device's position of the sequence after the call (its
//     length).
//   - page_table: obs.seqs[].page_row, the sequence's row of the device's
//     page table (columns 0..pos/block_size its blocks), and
//     obs.idle_rows, the rows no sequence of the call uses. With
//     page_pad, every column past a row's blocks (rows past the
//     sequence's length) and every column of an idle row holds page_pad.
//   - kv_writes: obs.kv_writes, every KV-cache row the call wrote
//     (KVWrite): each position of the call exactly once per layer, K and
//     V, at its row, and nothing else; at finish and reset, nothing over
//     a row a live sequence wrote.
//   - findings: obs.findings, hazards the engine's own checker saw.
//
// Version 2 adds, on every admit, decode, finish and reset reply:
//
//   - regime: obs.regime, what the device ran: none, eager, capture or
//     replay. No replay without a capture since the start or the last
//     reset; with follows_hints, the cadence of offcard's engine
//     (capture once an eager step compiled the width, re-capture on a
//     width change, a change of the active slots, every recapture_every
//     steps; nothing at finish and reset).
//   - host_writes: obs.host_writes, the host-to-device writes of the
//     call; a steady-state replay (the same sequences, each one position
//     on inside its block, fed the previous step's tokens) makes none
//     (judged on the steps regime calls replays: offer both).
//   - memory: obs.mem (Memory) on the hello reply (the baseline) and each
//     call's: the buffers live at the hello stay live, and every buffer
//     allocated since is the page table the last paged op read or
//     recorded by a live trace.
//   - close: obs.mem on the bye reply: nothing left (no buffer, no trace).
//
// and KVWrite.Clear (a write storing no token; it may land only where no
// live sequence has written) and Caps.FollowsHints.
//
// # Serving calls (version 3)
//
// The calls of serving engines (qwen3/serving.go: PrefixPrefiller,
// Verifier, BlockCopier; ref.Decoder implements them bit for bit). An
// engine that speaks version 3 lists those it answers in its hello
// reply's serves (Caps.Serves; absent: none); offcard sends no other (the
// client answers ErrNotServed without sending) and its campaign draws
// only the actions they carry. Blocks may be shared in version 3: a
// prefix-cache hit or a fork puts one block in several live sequences'
// tables. A call writes only blocks its sequence holds alone; offcard
// copies a shared block first (copy_blocks, the copy-on-write). finish
// forgets the sequence, not its shared blocks: an engine that clears
// blocks at finish leaves those another live sequence's table holds
// (their rows are that sequence's; a clear there fails kv_writes).
//
//   - prefill_from (seq, start, tokens, blocks): computes positions
//     start..start+n-1, each as a decode step there would: it writes the
//     position's KV at its row and attends over rows 0..p of the table as
//     the cache holds them. Rows below start are read, never written: a
//     prefix hit's shared blocks (written earlier by this or another
//     sequence) or this sequence's earlier chunks (a chunked prefill:
//     chunks in order, each starting where the last ended). Its outputs
//     equal, bit for bit, an admit's of the same tokens (the cached ones
//     and these). start 0 is an admit (the sequence is new); with start >
//     0 the sequence may be new (a prefix hit) or live (its next chunk).
//     It answers every position start..start+n-1 in order, or the last one
//     only. blocks covers start+n-1.
//   - verify (batch of seq, tokens, pos, blocks; distinct sequences): k >=
//     1 tokens per entry at positions pos..pos+k-1 (the last accepted
//     token and the drafts), written and answered as k decode steps
//     would: output j equals, bit for bit, the decode of tokens[j] at
//     pos+j after tokens[0..j-1]. The reply's outputs are every entry's k,
//     entry after entry in the batch's order, each entry's in position
//     order (Malformed otherwise: a missing or extra output, a wrong seq
//     or pos). blocks covers pos+k-1 (grown before the call: the k
//     positions may cross a block boundary). The sequence's length after
//     it is pos+k.
//   - copy_blocks (copies of src, dst): every layer's K and V of block
//     src, all block_size rows, written over block dst. The copies are
//     independent (no block is the dst of two, or both a src and a dst)
//     and their order does not matter; a list that breaks this, or names
//     a block outside the cache, is refused, changing nothing. No
//     outputs, no sequence (obs.seqs is empty). The rows of src past its
//     sequence's length are copied as the cache holds them (offcard never
//     lets a step read them before a step writes them).
//
// Rollback needs no call. After a verify, offcard keeps the accepted
// length L (at most pos+k) and names L as the position of the sequence's
// next call (a decode at L, a verify from L): the rejected drafts' rows
// stay in the cache, and each is overwritten by the step at its position
// before any step reads it. An engine keeping a position of its own (a
// device cur_pos) takes it from each call, never from the last call's
// end. Preemption needs no call either: offcard finishes the sequence and
// later re-admits it (admit or prefill_from start 0) with its prompt and
// the tokens generated so far, through any block table; the outputs equal
// the original run's bit for bit (the cache's content depends on tokens
// and positions only, never on the block layout).
//
// Observations on the serving replies, as on admit and decode: cur_pos
// (prefill_from: start+n; verify: pos+k), page_table (the sequence's row
// holds its blocks, shared ones included), kv_writes (each position of
// the call exactly once per layer, K and V, at its row, nothing below
// start, nothing in a block another live sequence holds), findings; and
// regime, host_writes and mem required as on every call (no replay
// without a capture since the start or the last reset). A copy_blocks
// reply reports its writes as KVWrite says: every row of each dst block
// once per layer, K and V, with seq and pos -1, and nothing else.
//
// # Client and Serve
//
// Client is a qwen3.Decoder over a child process, and a
// qwen3.ServingDecoder and ServingOffer (OffersServing: the hello's
// serves) in version 3. Every call has a timeout; an engine that exits, hangs past it (it is then killed with its
// process group) or writes a line that is not a valid reply is a
// FaultError (Crashed, Hung, Malformed) and the client is dead; an error
// reply is a RefusedError and the session goes on. Serve is the engine
// side, for Go engines (cmd/offcard-engine): it negotiates the version,
// leaves out what the engine does not offer (Caps.Filter), serves the
// serving calls the engine implements (a type assertion: qwen3.Serves),
// asks an Observer after the hello, each call and bye, and closes the
// engine before answering bye.
//
// wire imports only dump, qwen3 and kvpage (design: never sim or tthw).
package wire
