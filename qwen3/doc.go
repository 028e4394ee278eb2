// Package qwen3 is the model side of offcard: what a Qwen3 checkpoint is,
// and the interface every decoder of it implements.
//
//   - Config is the part of a Hugging Face config.json that shapes the
//     model. ParseConfig/LoadConfig read one (accepting the key spellings
//     of older and newer transformers releases) and Validate checks it can
//     run here: GQA heads that divide, and hidden_size, intermediate_size,
//     head_dim and vocab_size multiples of the device's 32-wide tiles.
//     Preset names the built-in shapes ("tiny", "qwen3-0.6b").
//   - Weights holds every tensor as bf16 in Hugging Face's layout (a linear
//     weight is row-major [out, in]). Load/LoadWith read a checkpoint
//     directory (config.json plus model.safetensors, or a sharded
//     model.safetensors.index.json) through the strict reader in
//     qwen3/safetensors, memory-mapping the files read-only so BF16 tensors
//     are used in place; Weights.Close unmaps them. Export writes the
//     same layout back (HF-style config.json, BF16 model.safetensors).
//     Weight slices may alias a read-only map: never write to them.
//   - Synth makes deterministic weights for any valid Config and seed,
//     identical on every machine, so tests and the simulator need no
//     downloaded checkpoint.
//   - Decoder is the model-level interface (prefill, batched decode,
//     finish) shared by ref.Decoder (the oracle) and Engine, the paged
//     decode driver over a tt.Device (engine.go; one device step is
//     Engine.step in engine_step.go, in named stages: page table, regime,
//     inputs, run, results, stats). The scheduler (caller) owns the paged
//     KV blocks (package kvpage).
//   - Beside Decoder, optional serving interfaces (serving.go) that a
//     scheduler finds by type assertion: PrefixPrefiller (PrefillFrom:
//     positions Start.. computed over positions 0..Start-1 read from the
//     cache — a prefix-cache hit or the next chunk of a chunked prefill),
//     Verifier (Verify: k tokens at Pos..Pos+k-1 in one step, k outputs),
//     BlockCopier (CopyBlocks: the copy-on-write copies kvpage's
//     Table.PrepareWrite returns, as vLLM's copy_blocks). The contract: a
//     cache hit's or a chunk's outputs equal a cold Prefill's of the same
//     tokens bit for bit, and a verify's equal k sequential Decode steps'.
//     Rollback after a rejected draft and preemption by recompute need no
//     call: each call names its positions, a step reads only rows below
//     its position after writing its own, so a sequence rolled back to L
//     is decoded from L again (its stale rows are overwritten before any
//     read), and a preempted one is Finished and later re-prefilled with
//     its tokens so far, with the same outputs. The shared-block rules
//     (who may write a block, reference counts) are kvpage's.
//
// The tokenizer is the subpackage qwen3/tokenizer.
package qwen3
