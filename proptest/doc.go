// Package proptest drives any qwen3.Decoder with random request schedules
// and checks, after every Decoder call, that it behaves exactly like the ref
// oracle and that the device did what the host's page tables say.
//
// # Pieces
//
//   - Generators (gopter): GenScenario draws a scenario (model, arch, block
//     size, blocks, width policy, capacity, mode, recapture_every); the
//     command generator draws a schedule of admit / decode / finish /
//     recapture commands valid in the current model state, prompt lengths
//     biased to k·bs-1, k·bs, k·bs+1 and decode runs biased to cross the
//     next block boundary.
//   - The state machine (github.com/leanovate/gopter/commands): the State
//     is the host's abstract truth (live sequences, lengths, slots, hence
//     block counts); PreCondition checks every argument of a command
//     against it, so gopter's shrinking never produces an invalid schedule.
//     The SystemUnderTest is a run that drives ref, the host's kvpage pool
//     and tables, and a SUT built by a Factory, together.
//   - SUT and Factory: a SUT exposes its qwen3.Decoder and, optionally,
//     observations (KVObserver, OpPosObserver, PosObserver,
//     PageTableObserver, FindingObserver, StepObserver, KVReader,
//     Resetter). SimFactory
//     builds qwen3.Engine on a strict sim.Device with every observation;
//     a factory for the card will offer what the card can.
//   - Campaign runs cases in parallel; case i of the campaign with seed S
//     has seed CaseSeed(S, i), and CaseSeed(D, 0) = D, so a failing case
//     replays alone as `offcard check --seed D --cases 1`. Output depends
//     on the seed only (not on GOMAXPROCS or the number of workers). A
//     Shard K/N runs the cases i with i mod N = K-1, exactly as the whole
//     campaign runs them (`offcard check --shard K/N`).
//   - The oracle (ref.Decoder) answers positions it has already computed
//     in this process from a memo of token trajectories (what ref computes
//     at a position depends only on the weights and the tokens up to it):
//     the same output bits, and the same keys and values written into
//     ref's cache, without recomputing them.
//   - RunScript replays a script; TestRegressions replays every script in
//     testdata/regressions; FuzzPageTableWidths decodes bytes into a
//     width sequence and a schedule.
//
// # Properties (checked after every Decoder call)
//
//  1. logits: every output's token and logits equal ref's bit for bit
//     (prefill positions and decode steps). In captured mode this is also
//     "replay = eager = ref" (property 4), and since ref's result for a
//     sequence does not depend on its batch, it is batch independence
//     (property 6).
//  2. kv-write: the device's KV write log (sim.Options.LogKV) holds, for
//     each active slot, layer and K/V, exactly one write per position the
//     call processed, at block table[pos/bs], row pos%bs, and nothing else
//     (no write for inactive slots, none into another buffer, none by
//     finish or recapture). kv-cache: after every finish the device's
//     whole KV cache equals ref's, bit for bit (caches of at most 64
//     blocks; larger ones are not read back).
//  3. cur-pos: at every op that reads cur_pos (paged_update_cache, paged
//     SDPA decode; observed with sim.Options.OnOp and Device.Peek) the
//     device's cur_pos is the host's seq_len-1 for the active slots and -1
//     for the others; after the call it is seq_len and -1; each KV write's
//     index is the host's position; with the scenario's verify flag the
//     engine's own read-back must agree too.
//  4. replay: in captured mode a replay never follows a page-table width
//     change or a reset without a new capture; an eager engine never
//     captures or replays. The sanitizer's trace hazards (stale address,
//     allocation overlapping a live trace) are property 5.
//  5. strict: the simulator in strict mode reports no finding.
//  6. page-table (with property 2): after every Decoder call the device
//     page table (Engine.PageTable read with sim's Peek, no host transfer)
//     is what qwen3.Engine documents for the call's last step: the width
//     policy's width over the active rows; row s of an active slot holds
//     Blocks[:Pos/BlockSize+1], then qwen3.PagePad; every other row
//     (free slots, finished sequences, live sequences not in the step) is
//     all PagePad. A command that runs no step (finish, recapture) leaves
//     it as it was. Inside a prefill only the last step's table is seen
//     (the engine writes the whole prompt's blocks for every prompt step).
//
// When several properties fail at one step the failure names the likeliest
// cause first: setup, panic, strict, cur-pos, kv-write, page-table,
// sut-error, replay, logits, kv-cache; the others are listed as "also".
//
// # Script format
//
// A script is plain text, one directive per line, in the key=value style
// of cockroachdb/datadriven directives. Blank lines and lines starting
// with # are ignored (leading # lines are kept as the script's comments).
// Three header lines, each exactly once and before the first command:
//
//		model tiny seed=1
//		device sim arch=wormhole strict
//		engine block=32 blocks=64 width=dynamic capacity=2 mode=captured recapture=3 verify
//
//	  - model NAME seed=N: a qwen3 preset and its Synth seed.
//	  - device NAME arch=wormhole|blackhole [strict]: the device ("sim") and
//	    the simulated chip; strict turns the sanitizer on.
//	  - engine: block= block size (multiple of 32, default 32); blocks= KV
//	    blocks of the cache and of the host pool (default 64); width=
//	    dynamic or fixed:N (N <= blocks); capacity= slots 1..8 (default 1);
//	    mode= eager or captured; recapture= N re-captures every N steps
//	    (captured only); verify turns on the engine's read-back check.
//
// Then one command per line:
//
//		admit seq=0 prompt=31 [salt=3]
//		decode steps=4 [seqs=0,2]
//		finish seq=0
//		recapture
//
//	  - admit seq=Q prompt=N [salt=S]: prefill a new sequence Q (0..15, not
//	    live) with N tokens; token i of the prompt is
//	    splitmix64(splitmix64(splitmix64(Q)+S)+i) mod vocab. The host
//	    allocates its blocks from the pool (lowest free id first), and the
//	    engine gives it the lowest free slot.
//	  - decode steps=K [seqs=...]: K greedy decode steps of every live
//	    sequence (or of the listed ones, increasing ids), each fed ref's last
//	    token for it; the host grows each table at block boundaries.
//	  - finish seq=Q: end sequence Q; its blocks return to the pool.
//	  - recapture: Engine.Reset, so the next captured step is cold and
//	    captures a new trace.
//
// A script is checked as it runs: a command whose precondition fails (no
// free slot, too few blocks, a sequence not live, a position past the
// cache or a fixed width) is an error of the script, not a failure of the
// SUT.
package proptest
