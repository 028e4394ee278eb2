// Package proptest drives any qwen3.Decoder with random request schedules
// and checks, after every Decoder call, that it behaves exactly like the ref
// oracle and that the device did what the host's page tables say.
//
// # Pieces
//
//   - Generators (gopter): GenScenario draws a scenario (model, arch, block
//     size, blocks, width policy, capacity, mode, recapture_every, strict
//     or faithful); the command generator draws a schedule of admit /
//     decode / finish / recapture commands valid in the current model
//     state: prompt lengths biased to k·bs-1, k·bs, k·bs+1 and to filling
//     the pool; decode runs biased to cross the next block boundary or to
//     fill the pool; decodes that start sequences (several at once), feed
//     a teacher stream instead of the greedy token, or jump positions; and,
//     right after an admit that followed a decode, the same batch again
//     (a prefill between two replays of one active set). Mixed in, the
//     serving schedules, each drawn only when qwen3.Serves says the SUT's
//     decoder supports the calls it makes (Base.Serve, which Campaign
//     and RunCase ask the factory for with the SUT of a case's first
//     run, serve.go; check prints the calls not served): prefix hits at, before and after block
//     boundaries, across sequences, from donors that may finish while the
//     sharer holds their blocks (PrefillFrom; CopyBlocks for a partial
//     block); chunked prefill with chunk sizes around the block size and
//     its double (PrefillFrom); speculative verify steps of k = 1..8 with
//     random acceptance and rollback (Verify, kvpage Truncate); forks with
//     copy-on-write (kvpage Fork; the copies PrepareWrite asks for carried
//     out through CopyBlocks before the write; at block boundaries no
//     copy is needed, so any SUT draws those); preemption and re-admit by
//     recompute (Finish, then a prefill of the sequence's tokens so far).
//   - The state machine (github.com/leanovate/gopter/commands): the State
//     is the host's abstract truth (live sequences, lengths, slots, the
//     tables as abstract block ids, so shared blocks and copies are
//     counted, gapless history, preempted sequences); PreCondition checks every argument of a command
//     against it, so gopter's shrinking never produces an invalid schedule.
//     The SystemUnderTest is a run that drives ref, the host's kvpage pool
//     and tables, and a SUT built by a Factory, together.
//   - SUT and Factory: a SUT exposes its qwen3.Decoder and, optionally,
//     observations (DeviceTapper, KVPeeker, KVObserver, OpPosObserver,
//     PosObserver, PageTableObserver, FindingObserver, StepObserver,
//     KVReader, Resetter); every property whose observation a SUT lacks is
//     skipped, so a user's engine behind a protocol gets the logits
//     property alone. SimFactory builds qwen3.Engine on a Tap (a
//     tt.Device wrapper recording allocations, frees, host transfers,
//     captures, executions and releases, and the tensors each trace
//     recorded) over a sim.Device, with every observation; a factory for
//     the card wraps its device in a Tap the same way.
//   - Expectations come from the suite's own model of the contract, never
//     from the engine's helpers: the width policy (fixed:N is N, dynamic
//     the longest active row's blocks, at least 1), the pad (0), the block
//     accounting (ceil(len/bs)), the regime cadence, the steady state.
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
//   - ref's matrix products are handed to the simulated device the engine
//     runs on (ref.Options.Products, sim.Device.RememberLinear): a linear
//     launch that reads an input row ref has multiplied by the same
//     weight contents takes ref's output row, the bits it would compute
//     (both are ref.MatRows), instead of computing it. Any other input is
//     computed, so what the device writes does not change (rowshare.go).
//   - RunScript replays a script; TestRegressions replays every script in
//     testdata/regressions; FuzzPageTableWidths decodes bytes into a
//     width sequence and a schedule.
//
// # Files
//
// One file per action and per property family, so that a property, its
// expectation and its mutants (proptest/mutants: the overlays name the
// file they patch) are found together:
//
//   - act_*.go: each action of a schedule, as the generator draws it and as
//     the runner plays it on ref, the host tables and the SUT;
//   - prop_*.go: each exact-mode property family and the contract model
//     it checks against (logits, kv, cur-pos, page-table, replay and
//     host-writes, device-memory, strict); tolerant.go and wireobs.go the
//     tolerant mode;
//   - run.go the runner (one schedule run, check dispatching every
//     property after a call), failure.go the property names and failures,
//     model.go the host's abstract state and each command's precondition,
//     gen.go the scenario generator and command mix, machine.go gopter's
//     state machine, case results and shrinking, script.go the script
//     format, reach.go the reach counts.
//
// # Properties (checked after every Decoder call, and at Close)
//
//  1. logits: every output's token and logits equal ref's bit for bit
//     (prefill positions and decode steps). In captured mode this is also
//     "replay = eager = ref" (property 4), and since ref's result for a
//     sequence does not depend on its batch, it is batch independence
//     (property 6).
//  2. kv-write: the device's KV caches (read with sim's PeekInto after
//     every call, KVPeeker) equal ref's, which wrote each position at the host
//     table's block, row pos%bs: a row the call should have written that
//     does not hold ref's values is a write that went elsewhere or was
//     dropped; any other row that differs is a stray write. The bytes are
//     read where the kernel wrote, not from any log. As the caches were
//     equal after the previous call (before the first, both held +0), only
//     what changed is compared: what the device's memory saw written since
//     (sim's write stamps; of a tile, the face rows whose bytes changed;
//     the first time, what is not +0) and the rows ref was asked to write;
//     the verdict is the whole diff's. The device's KV write
//     log (KVObserver) is checked too: exactly one write per position,
//     slot, layer and K/V, none for inactive slots, none by finish or
//     recapture. A prefill by one program (paged_fill_cache) writes the
//     prompt's last 32-row tile whole: rows T..roundup32(T)-1 of its last
//     block get the tile's padding (zeros), which ref's store mirrors, and
//     the log's records of those rows are not writes of positions. kv-cache: for a SUT without KVPeeker, after every finish
//     the whole cache (KVReader; caches of at most 64 blocks) equals ref's.
//  3. cur-pos: at every op that reads cur_pos (paged_update_cache, paged
//     SDPA decode; observed with sim.Options.OnOp and Device.Peek) the
//     device's cur_pos is the host's seq_len-1 for the active slots and -1
//     for the others; after the call it is seq_len and -1; each KV write's
//     index is the host's position; with the scenario's verify flag the
//     engine's own read-back must agree too.
//  4. replay (regime cadence, from the Tap's device events, not the
//     engine's report): a prefill captures and executes nothing; an eager
//     engine never does; a captured engine's decode step is a replay
//     exactly when a trace is live and neither the page-table width (any
//     change since the capture), nor the active slots, nor
//     recapture_every (steps on the trace) call for a re-capture, a
//     capture when no valid trace is live and an eager step ran at the
//     width since the last reset, and eager otherwise; a command that runs
//     no step runs nothing. Without a Tap the engine's StepObserver report
//     is checked (no replay across a width change, after a reset, or in
//     eager mode). Trace hazards (stale address, allocation overlapping a
//     live trace) are property 5.
//  5. strict: the simulator in strict mode reports no finding (faithful
//     cases skip it; every other property holds there too).
//  6. page-table (with property 2): after every Decoder call the device
//     page table (Engine.PageTable read with sim's Peek, no host transfer)
//     has the contract's width over the active rows; row s of an active
//     slot holds Blocks[:Pos/BlockSize+1], then the pad 0; every other row
//     (free slots, finished sequences, live sequences not in the step) is
//     all 0. A command that runs no step leaves it as it was. Inside a
//     prefill only the last step's table is seen.
//  7. host-writes: a steady-state replay (the same slots and sequences as
//     the previous device step, each one position on inside its block, fed
//     the token that step produced) makes no host write, whatever the
//     options (counted by the Tap).
//  8. device-memory: after every call the device holds exactly the
//     tensors the engine allocated at construction, its current page table
//     (its latest allocation) and tables a live trace still records;
//     nothing after Close, no trace either. A free or release of something
//     not allocated fails too.
//  9. close: Close returns no error.
//
// The serving properties (prop_sharedwrite.go, prop_prefixhit.go,
// prop_rollback.go, prop_recompute.go; kv-write covers the new writes):
//
//  10. shared-write (exact): no write lands in a block that two or more
//     host tables hold when the call is made (kvpage's reference counts,
//     after PrepareWrite's copies): from the KV write log (any record) and
//     the cache bytes (a changed element that differs from ref's).
//  11. prefix-hit (exact; tolerant when the SUT claims bit-exactness): a
//     prefix hit's outputs equal a cold run of the same tokens that ref
//     computes from position 0 on a cache of its own.
//  12. rollback (every mode): after a verify rolled a sequence back, until
//     its rejected rows are rewritten, any cur-pos, kv-write or logits
//     problem of it is reported as rollback too (ranked first): its
//     position came from the drafts, or it read a rejected row before it
//     was overwritten.
//  13. recompute (exact; tolerant when exact is claimed): a re-admitted
//     sequence's outputs are bit-identical to the SUT's own first run at
//     each position.
//  14. kv-write for the new calls: a verify's k writes and a chunk's
//     writes each at the host table's block and row; a block copy writes
//     every row of each destination block and nothing else (its log
//     records, by block and row; its bytes equal ref's copy).
//
// # Tolerant mode (tolerant.go, engine.go)
//
// A SUT that implements Tolerant (an engine process behind the line
// protocol, EngineFactory; the card) is checked without op-level
// observation: each token judged by adjudicate.Judge against ref's row for
// the same prefix, teacher-forced (the runner feeds the SUT's own tokens
// to both), a divergence beyond Tolerance.Band nats and Tolerance.BandSteps bf16
// steps fails (logits); full or
// top-k logits within Tolerance.LogitSteps bf16 steps, LogitNats nats or
// LogitRowRMS times the RMS of ref's row, or bit for bit with Tolerance.Exact; and the observations it offers,
// exactly, by sequence (SeqObserver: cur_pos = seq_len after the call,
// page-table row = the blocks then the pad, idle rows all pad;
// KVObserver with KVWrite.Slot holding the sequence; FindingObserver).
// An engine that crashes, hangs or writes garbage fails with property
// engine (PropEngine); a hung case is not shrunk. An engine that fails
// its hello ends the campaign instead (a SetupError: EngineFactory.Failed,
// Options.Abort). OpenSimEngine is the serving side of cmd/offcard-engine.
//
// The headline names the first cause: the problems of one call are ordered
// by device step, then by the device op at which they arose (strict
// findings, cur_pos at an op, the KV log's writes), then the ones seen
// after the call (page table, cache bytes, logits), ties by the order
// setup, engine, panic, strict, rollback, cur-pos, shared-write, kv-write,
// page-table, sut-error, replay, host-writes, device-memory, prefix-hit,
// recompute, logits, kv-cache, close; the others are
// listed as "also". A panic of the SUT is the property panic; a panic or
// error of the runner itself (the oracle, the host pool) is no finding:
// the case reports it as an error, check counts it apart and exits 2 when
// nothing else failed.
//
// # Shrinking and reach
//
// gopter shrinks the schedule (shorter prompts and decodes, fewer batch
// members and starts, no teacher stream, smaller jumps, shorter shared
// prefixes and tails, no chunking, fewer verify entries and drafts,
// salts 0, fewer commands);
// then shrinkScript drops single commands gopter could not (a failure at
// Close is invisible to it) and simplifies the scenario (capacity, blocks,
// verify, recapture_every, arch, model seed), keeping each change after
// which the script fails the same way. Every case counts the states its
// original schedule visited (CaseResult.Reach: decode starts, several at
// once, teacher forcing, position jumps, a full pool, a page table as wide
// as the cache, eager/capture/replay/steady replays, prefills between
// replays, faithful and strict cases, prefix hits at and inside blocks,
// chunks, verify steps across blocks, rollbacks, forks, block copies,
// preemptions, re-admits, ...); ReachTotals sums a campaign,
// and offcard check --json prints it as "reach".
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
//	  - model NAME seed=N: a qwen3 preset and its Synth seed; or model
//	    dir=PATH: a Hugging Face checkpoint directory (config.json +
//	    model.safetensors; a path without white space).
//	  - device NAME arch=wormhole|blackhole [l1=poison|zero|stale]
//	    [trace_region=BYTES] [strict]: the device ("sim") and the simulated
//	    chip; what fresh L1 holds; the trace region (default 0: ttnn's
//	    default, none; a region smaller than the decode graph's trace makes
//	    the device refuse the capture and the engine run eager); strict
//	    turns the sanitizer on.
//	  - engine: block= block size (multiple of 32, default 32); blocks= KV
//	    blocks of the cache and of the host pool (default 64); width=
//	    dynamic or fixed:N (N <= blocks); capacity= slots 1..8 (default 1);
//	    mode= eager or captured; recapture= N re-captures every N steps
//	    (captured only); prefill= program (default: a prompt is one
//	    multi-token program) or decode (token by token through the decode
//	    graph); verify turns on the engine's read-back check.
//
// Then one command per line:
//
//		admit seq=0 prompt=31 [salt=3]
//		decode steps=4 [seqs=0,2] [start=3,5] [force=7] [skip=2]
//		finish seq=0
//		recapture
//		share seq=1 from=0 len=33 prompt=40 [salt=2] [chunk=32]
//		verify seqs=0,1 k=4,8 accept=2,8 [draft=7]
//		fork seq=2 from=0 [salt=1]
//		preempt seq=0
//		readmit seq=0 [chunk=31]
//
//	  - admit seq=Q prompt=N [salt=S]: prefill a new sequence Q (0..15, not
//	    live) with N tokens; token i of the prompt is
//	    splitmix64(splitmix64(splitmix64(Q)+S)+i) mod vocab. The host
//	    allocates its blocks from the pool (lowest free id first), and the
//	    engine gives it the lowest free slot.
//	  - decode steps=K [seqs=...] [start=...] [force=F] [skip=J]: K decode
//	    steps of every live sequence (or of the listed ones) and of the
//	    sequences start lists (not live; each takes the lowest free slot,
//	    in increasing id order, and decodes from position 0), increasing
//	    ids. Each is fed ref's last token for it (a started sequence's first
//	    token is its stream token 0 of salt 0); with force=F every step is
//	    fed token pos of the stream (seq, F) instead (teacher forcing); with
//	    skip=J the live sequences' first position is their length + J (a
//	    position jump, J <= 64). The host grows each table as positions need.
//	  - finish seq=Q: end sequence Q; its blocks return to the pool.
//	  - recapture: Engine.Reset, so the next captured step is cold and
//	    captures a new trace.
//	  - admit ... chunk=C (and readmit, share): the prompt is prefilled
//	    with PrefillFrom calls of C positions each (needs prefill_from).
//	  - share seq=Q from=D len=L prompt=N [salt=S] [chunk=C]: a prefix
//	    hit: new sequence Q's positions 0..L-1 are live sequence D's (its
//	    tokens; its blocks through kvpage SharePrefix; L at most D's
//	    length without a position jump), then Q's own tokens L..N-1
//	    (stream (Q, S)) are prefilled with PrefillFrom from L. A partial
//	    last shared block is copied first (needs copy_blocks).
//	  - verify seqs=... k=... accept=... [draft=S]: one Verify call; each
//	    listed sequence runs k tokens (its next token, then k-1 drafts from
//	    stream (seq, S)) at its length onwards (k 1..8, the table grown and
//	    copied on write first), then keeps accept (1..k) positions: the
//	    rest is rolled back (Truncate), and the next token fed is the
//	    output at the last kept position.
//	  - fork seq=C from=P [salt=S]: C shares all of P's blocks (Fork) and
//	    decodes its first position at P's length, fed its stream token
//	    (C, S) there; the shared partial block is copied first (needs
//	    copy_blocks unless P's length is a whole number of blocks).
//	  - preempt seq=Q: Finish Q (its blocks to the pool), keeping its
//	    tokens; Q must have no position jump.
//	  - readmit seq=Q [chunk=C]: prefill a preempted Q's tokens again
//	    through fresh blocks.
//
// The host tables are kvpage's: every write is preceded by PrepareWrite
// (growth and copy-on-write), every copy it asks for by a CopyBlocks call
// of its own, checked like any call.
//
// A script is checked as it runs: a command whose precondition fails (no
// free slot, too few blocks, a sequence not live, a position past the
// cache or a fixed width) is an error of the script, not a failure of the
// SUT.
package proptest
