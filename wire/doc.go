// Package wire is offcard's line protocol for an engine offcard did not
// write: one JSON object per line over a child process's stdin and stdout,
// versioned by a hello exchange (Version).
//
// Requests: hello (model: preset + seed, Hugging Face config, a weights
// directory; block size, number of blocks, capacity; hints for offcard's
// own engine), admit (seq, prompt, block table), decode (a batch of seq,
// token, position, block table), finish, reset (a re-capture request),
// bye. Replies: ok or error; hello's Caps (logits none / top_k / full,
// exact, the observations offered, the page pad); a call's Outputs
// (tokens; full rows as base64 little-endian bf16, or top-k plus the dump
// format's digest) and Observations (cur_pos and page-table rows by
// sequence, idle page-table rows, KV writes, findings).
//
// Client is a qwen3.Decoder over a child process. Every call has a
// timeout; an engine that exits, hangs past it (it is then killed with its
// process group) or writes a line that is not a valid reply is a
// FaultError (Crashed, Hung, Malformed) and the client is dead; an error
// reply is a RefusedError and the session goes on. Serve is the engine
// side, for Go engines (cmd/offcard-engine). The README's "Put your engine
// under test" is the user's documentation of the protocol.
//
// wire imports only dump, qwen3 and kvpage (design: never sim or tthw).
package wire
