// Package dump is the JSONL token-stream format that offcard writes
// (generate, sim, check) and reads (adjudicate), and that any engine can
// emit: one JSON object per line, of two kinds.
//
// A prompt record opens a sequence:
//
//	{"seq":0,"prompt":[151644,872,198]}
//
// A step record is one generated token:
//
//	{"seq":0,"pos":2,"token":9707}
//
// Only seq, pos and token are required. pos is the position whose logits
// produced the token, so a sequence's first step has pos = len(prompt)-1
// and each further step has the previous pos + 1: the token stream of the
// sequence is its prompt followed by its steps' tokens. Optional fields of
// a step record: step (the 0-based index of the generated token in its
// sequence), top_ids and top_logits (the k largest logits, larger
// first, same length), gap_steps (top-1 minus top-2 logit in bf16 steps),
// digest (first 16 hex digits of sha256 over the whole logits row as
// little-endian float32, see Digest). Optional fields of a prompt record:
// model (the identity of the model the dump was made with; offcard writes
// qwen3's Weights.Digest, "sha256:" and 16 hex digits, and any other
// string is compared as it is) and model_name (its description, e.g.
// "synth tiny seed 1"). Every prompt record that carries a model carries
// the same one (Dump.Model; a dump is of one model); a dump without it (an
// older offcard's, another engine's) reads as before. Unknown fields are
// ignored, so a writer may add its own.
//
// Rules (Read, Validate and Writer enforce the same ones): every line is a
// JSON object; a record with "prompt" is a prompt record (seq, and a
// non-empty prompt of token ids ≥ 0) and carries no pos or token; any other
// record is a step record (seq ≥ 0, pos, token ≥ 0); a sequence has one
// prompt record, before its steps; its steps' positions follow one another
// from len(prompt)-1; top_ids and top_logits have equal lengths. Records of
// different sequences may interleave (a batch). Blank lines are skipped. A
// violation is one error naming the line.
//
// The package imports nothing of offcard's.
package dump
