package mutants

// The catalog. Every edit's Old text is copied from the current source and
// must occur there exactly once (TestAnchorsApply checks it on every
// `go test ./...`). Edits of one mutant are applied in order, each to the
// result of the previous one.

const (
	engineStep = "qwen3/engine_step.go"
	simPlusOne = "sim/plusone.go"
	kvpagePool = "kvpage/pool.go"
	engineServ = "qwen3/engine_serving.go"
	kvShare    = "kvpage/share.go"
	kvTable    = "kvpage/table.go"
)

// Catalog is the mutant catalog, in the order the runner reports it: the
// design's ten first, then the additions.
var Catalog = []Mutant{
	{
		Name: "pt-one-column",
		Prop: "strict",
		Idea: "the page table is [C,1] (the width policy ignored, each row truncated to its first block) and, once written, never refreshed (seed bug 1)",
		Seed: true,
		Expect: "red at the first step whose position is past the first block: in a decode step the KV-update " +
			"reader indexes the row's stick past its one column (strict); a prompt program longer than a block is " +
			"refused by paged_fill_cache (seq_len past max_num_blocks_per_seq·block_size): the engine's error (sut-error) leads, " +
			"its missing KV rows (kv-write) shown as the effect",
		Edits: []Edit{
			{File: engineStep,
				Old: "w, err := kvpage.Width(e.opt.Width, longest)",
				New: "w, err := 1, error(nil) // mutant: [C,1]"},
			{File: engineStep,
				Old: "kvpage.PadRow(row, r.blocks, PagePad)",
				New: "kvpage.PadRow(row, r.blocks[:min(len(r.blocks), len(row))], PagePad)"},
			{File: engineStep,
				Old: "if e.ptHost == nil || !slices.Equal(table, e.ptHost) {",
				New: "if e.ptHost == nil { // mutant: no steady-state refresh"},
		},
	},
	{
		Name: "warm-pos-global",
		Prop: "cur-pos",
		Idea: "once any capture ever happened (a counter Reset never clears), cold, warm and capture steps skip the " +
			"seed's WarmDecodePos: no cur_pos/rope re-seed and, in eager steps, no plus_one (seed bug 2)",
		Seed: true,
		Expect: "red at the cold eager step that starts the re-capture after a trace release " +
			"(a block boundary under the dynamic width): its position update is skipped, so the re-captured trace " +
			"reads cur_pos one position behind",
		Notes: "The seed keyed WarmDecodePos (the eager steps' position re-seed and advance) on a process-wide " +
			"capture counter. This engine's eager steps end with plus_one in the graph, so skipping only the re-seed " +
			"is harmless on one sequence (warm-pos-global-pure); the eager plus_one is skipped with it, under the " +
			"same counter, which is the seed's bug. The seed's gate saw wrong logits at the re-capture step (the " +
			"engine issue's pin: position 33 of its schedule); property 3 reads cur_pos after every step and fires " +
			"one step earlier, at the cold step whose advance was skipped (position 32).",
		Edits: []Edit{
			{File: engineStep,
				Old: "if st.Regime != RegimeReplay || posDiffers {",
				New: "if (st.Regime != RegimeReplay && e.stats.Captures == 0) || (st.Regime == RegimeReplay && posDiffers) { // mutant"},
			{File: engineStep,
				Old: "\tcase RegimeCold, RegimeWarm:\n\t\tif err := e.forward(); err != nil {",
				New: "\tcase RegimeCold, RegimeWarm:\n\t\tseedEagerNoPlusOne = e.stats.Captures > 0 // mutant\n\t\terr := e.forward()\n\t\tseedEagerNoPlusOne = false\n\t\tif err != nil {"},
			{File: engineStep,
				Old: "\t\ttt.PlusOne{Input: a.ropeIdx},\n\t)\n",
				New: "\t\ttt.PlusOne{Input: a.ropeIdx},\n\t)\n\tif seedEagerNoPlusOne { // mutant\n\t\tops = ops[:len(ops)-2]\n\t}\n"},
			{File: engineStep,
				Old: "// ErrEngineClosed is returned by an Engine used after Close.\n",
				New: "// seedEagerNoPlusOne: mutant warm-pos-global (eager steps run no plus_one).\nvar seedEagerNoPlusOne bool\n\n// ErrEngineClosed is returned by an Engine used after Close.\n"},
		},
	},
	{
		Name: "free-not-retire",
		Prop: "strict",
		Idea: "on a width change while the live trace addresses the page table, the old table is freed (before its successor is allocated) instead of retired",
		Expect: "strict: the successor lands on the freed table that the live trace still addresses " +
			"(allocation-overlaps-live-trace) at the first block-boundary growth of a captured run",
		Notes: "Freeing after the successor's allocation (the literal swap of retire for free) is an equivalent mutant " +
			"in this engine: the trace is released in the same step, before any replay or allocation, so nothing can " +
			"land on the freed table. The seed's hazard needs the freed address handed out while the trace lives.",
		NeedsSim: "sim strict mode: the freed table is reallocated while the live trace still addresses it, but the trace is released in the same step, before any replay, so the card never computes a wrong value; only the sanitizer's allocation-overlaps-live-trace finding sees the hazard (on the loopback: 20 cases pass)",
		SeenBy:   []string{"findings"},
		Edits: []Edit{
			{File: engineStep,
				Old: "func (e *Engine) setWidth(w int) error {\n\tt, err := e.dev.Allocate(e.ptSpec(w))\n",
				New: "func (e *Engine) setWidth(w int) error {\n" +
					"\tif old := e.pt; old != nil && e.trace != nil && e.trace.pt == old.ID { // mutant: free, not retire\n" +
					"\t\tif err := e.dev.Free(*old); err != nil {\n\t\t\treturn err\n\t\t}\n" +
					"\t\te.pt = nil\n\t\te.stats.PageTableReallocs++\n\t}\n" +
					"\tt, err := e.dev.Allocate(e.ptSpec(w))\n"},
		},
	},
	{
		Name: "width-grow-only",
		Prop: "sut-error",
		Idea: "the page table is reallocated only when the width grows (>) instead of on any change (!=); a shrink copies the narrower table into the wider tensor",
		Expect: "red (the engine fails: Host tensor has different shape) at the first step after the longest sequence " +
			"finishes under the dynamic width policy while a shorter one lives",
		Edits: []Edit{
			{File: engineStep,
				Old: "\tif e.pt == nil || w != e.ptW {\n\t\tif err := e.setWidth(w); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t}\n",
				New: "\tif e.pt == nil || w > e.ptW { // mutant: grow only\n\t\tif err := e.setWidth(w); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t} else {\n\t\te.ptW = w\n\t}\n"},
		},
	},
	{
		Name:   "plus-one-no-skip",
		Prop:   "cur-pos",
		Idea:   "plus_one on cur_pos without skip_negative_entries: an inactive slot's -1 becomes 0",
		Expect: "red at the first replay with an inactive slot: it writes KV through its pad entry into block 0, row 0",
		Edits: []Edit{
			{File: engineStep,
				Old: "tt.PlusOne{Input: a.curPos, SkipNegativeEntries: true},",
				New: "tt.PlusOne{Input: a.curPos, SkipNegativeEntries: false}, // mutant"},
		},
	},
	{
		Name: "stale-tail",
		Prop: "page-table",
		Idea: "a reused page-table row keeps its old tail: only each active row's used prefix is rewritten, inactive rows are not cleared",
		Expect: "red (page-table) at the first step that leaves a row with a block id the host's table does not " +
			"have there: an inactive slot still naming a block of a sequence that is finished or not in the step, " +
			"or a reused row's tail past the new sequence's blocks",
		Notes: "Equivalent for the outputs in this engine: with KChunkSize = BlockSize neither the KV update nor SDPA " +
			"ever dereferences an entry past the current block, and a width change starts from a fresh table. It " +
			"breaks the engine's documented row contract (columns past the slot's blocks, and inactive rows, hold " +
			"PagePad) and leaves block ids of finished sequences in the device table. Only the page-table property " +
			"(the device table, read back, against the host's rows) kills it, on sim and on a card (the card path " +
			"reads rows of slots outside the call back as idle rows, all pad: seed 1, case 2 on the loopback); a " +
			"stale id 0 is invisible (PagePad is 0), so the shrunk reproduction needs a third sequence.",
		SeenBy: []string{"page_table+page_pad"},
		Edits: []Edit{
			{File: engineStep,
				Old: "\ttable := make([]int32, C*e.ptW)\n",
				New: "\ttable := make([]int32, C*e.ptW)\n\tif len(e.ptHost) == len(table) { // mutant: rows reused\n\t\tcopy(table, e.ptHost)\n\t}\n"},
			{File: engineStep,
				Old: "\t\t\tfor i := range row {\n\t\t\t\trow[i] = PagePad\n\t\t\t}\n\t\t\tcontinue\n",
				New: "\t\t\tcontinue // mutant: inactive row not cleared\n"},
			{File: engineStep,
				Old: "kvpage.PadRow(row, r.blocks, PagePad)",
				New: "kvpage.PadRow(row[:len(r.blocks)], r.blocks, PagePad)"},
		},
	},
	{
		Name:   "reseed-off-by-one",
		Prop:   "cur-pos",
		Idea:   "the re-seed writes cur_pos = seq_len (the next position) instead of seq_len - 1",
		Expect: "red at the first step: KV is written one row late and attention reads a row never written",
		Edits: []Edit{
			{File: engineStep,
				Old: "pos[s], rope[s], toks[s] = int32(r.pos), int32(r.pos), uint32(r.tok)",
				New: "pos[s], rope[s], toks[s] = int32(r.pos+1), int32(r.pos), uint32(r.tok) // mutant"},
		},
	},
	{
		Name:   "rope-not-advanced",
		Prop:   "cur-pos",
		Idea:   "the graph has no plus_one on the rope index, so a replay rotates q and k at the captured position",
		Expect: "red at the first replay step",
		Edits: []Edit{
			{File: engineStep,
				Old: "\t\ttt.PlusOne{Input: a.ropeIdx},\n",
				New: "\t\t// mutant: rope index not advanced\n"},
		},
	},
	{
		Name: "refresh-never",
		Prop: "page-table",
		Idea: "page-table contents are never re-copied after the first capture (only a new tensor is written)",
		Expect: "red at the first step that needs a new table entry without a width change " +
			"(a fixed width past a block boundary, or a sequence admitted next to a live one)",
		Edits: []Edit{
			{File: engineStep,
				Old: "if e.ptHost == nil || !slices.Equal(table, e.ptHost) {",
				New: "if e.ptHost == nil || (e.stats.Captures == 0 && !slices.Equal(table, e.ptHost)) { // mutant"},
		},
	},
	{
		Name: "alloc-after-capture",
		Prop: "strict",
		Idea: "after capture the engine frees the silu·mul activation the trace recorded and allocates a scratch tensor in its place, used from then on",
		Expect: "strict: the scratch lands on the trace's freed operand (allocation-overlaps-live-trace) at the capture step; " +
			"every replay then touches a freed address (trace-replay-stale-address)",
		Notes: "The scratch gets the same address (first fit, immediate reuse), so faithful runs stay bit-exact: " +
			"only the sanitizer sees it, as on the card only a hang or a later owner would.",
		NeedsSim: "sim strict mode: the scratch lands on the trace's freed operand and the replays touch it, but the values the engine reads stay right on a card (on the loopback: 10 cases pass); only the sanitizer's allocation-overlaps-live-trace / trace-replay-stale-address findings see it",
		SeenBy:   []string{"findings"},
		Edits: []Edit{
			{File: engineStep,
				Old: "\te.trace = &engTrace{id: id, pt: e.pt.ID, width: e.ptW, active: active, owned: owned}\n",
				New: "\te.trace = &engTrace{id: id, pt: e.pt.ID, width: e.ptW, active: active, owned: owned}\n" +
					"\told := e.a.gu // mutant: a scratch allocated after capture\n" +
					"\tif err := e.dev.Free(old); err != nil {\n\t\treturn err\n\t}\n" +
					"\tscratch, err := e.dev.Allocate(dramTile(1, 1, e.opt.Capacity, e.cfg.IntermediateSize))\n" +
					"\tif err != nil {\n\t\treturn err\n\t}\n" +
					"\te.a.gu = scratch\n" +
					"\tfor i, t := range e.tensor {\n\t\tif t.ID == old.ID {\n\t\t\te.tensor[i] = scratch\n\t\t}\n\t}\n"},
		},
	},

	// Additions.
	{
		Name:   "warm-pos-global-pure",
		Prop:   "cur-pos",
		Idea:   "only the skipped re-seed of warm-pos-global (eager steps keep their plus_one)",
		Expect: "red at the first non-replay step after a capture whose positions the device does not hold: the prefill of a sequence admitted after a capture",
		Notes:  "Survives schedules of one sequence: this engine's eager steps advance cur_pos themselves.",
		Edits: []Edit{
			{File: engineStep,
				Old: "if st.Regime != RegimeReplay || posDiffers {",
				New: "if (st.Regime != RegimeReplay && e.stats.Captures == 0) || (st.Regime == RegimeReplay && posDiffers) { // mutant"},
		},
	},
	{
		Name:   "trace-kept-on-width-change",
		Prop:   "kv-write",
		Idea:   "a page-table width change does not force a re-capture: the trace keeps replaying with the retired table",
		Expect: "red at the first step past a block boundary under the dynamic width (strict: page-table read past the row)",
		Edits: []Edit{
			{File: engineStep,
				Old: "if e.trace != nil && (e.trace.pt != e.pt.ID || !slices.Equal(e.trace.active, active) ||",
				New: "if e.trace != nil && (!slices.Equal(e.trace.active, active) || // mutant"},
		},
	},
	{
		Name: "capture-outputs-freed",
		Prop: "strict",
		Idea: "the outputs the device allocated for the ops recorded in a capture and kept for the trace (the resharded " +
			"cos/sin, the final rms_norm) are freed right after the capture, while the trace still writes them on every replay",
		Expect: "strict: the capture step's own execution touches the freed outputs (trace-replay-stale-address); " +
			"faithful runs stay bit-exact until something else is allocated there",
		Notes: "Only catchable since the contract is ttnn's: with caller-allocated outputs every address a trace " +
			"wrote was an engine tensor kept for the engine's life. tt_transformers keeps the captured outputs alive for " +
			"the trace's life (generator.py stores trace_output).",
		NeedsSim: "sim strict mode: the freed outputs are written only by the trace itself and nothing is allocated on them " +
			"between replays, so the values stay right on a card (on the loopback: 200 cases pass); only the sanitizer's " +
			"trace-replay-stale-address finding sees the hazard",
		SeenBy: []string{"findings"},
		Edits: []Edit{
			{File: engineStep,
				Old: "\te.trace = &engTrace{id: id, pt: e.pt.ID, width: e.ptW, active: active, owned: owned}\n",
				New: "\te.freeTensors(owned) // mutant: a capture's op outputs freed after capture\n" +
					"\te.trace = &engTrace{id: id, pt: e.pt.ID, width: e.ptW, active: active}\n"},
		},
	},
	{
		Name: "pool-same-block",
		Prop: "kv-write",
		Idea: "the scheduler's block pool hands the lowest free block out again and again: two sequences (and one " +
			"sequence's successive blocks) get the same block",
		Expect: "red at the first decode step where two users write rows of one 32-row tile: their cores race on the " +
			"tile's read-modify-write and one row is lost (strict: kv-tile-race); or at a prompt program whose blocks " +
			"repeat (paged_fill_cache writes the later block over the earlier one: kv-write)",
		Notes: "A scheduler bug, not the engine's: ref gets the same tables and keeps both rows. Only catchable since " +
			"sim runs paged_update_cache's users unordered (all reads, then the writes in a seeded order): with the " +
			"former serial model the engine kept both rows too and the mutant survived. Behind the protocol the " +
			"scheduler is offcard's side: --engine builds it into the checker.",
		Scheduler: true,
		Edits: []Edit{
			{File: kvpagePool,
				Old: "\tid := heap.Pop(&p.free).(int32)\n",
				New: "\tid := p.free[0] // mutant: the lowest free block handed out again\n"},
		},
	},
	{
		Name:     "sim-plus-one-no-skip",
		Prop:     "cur-pos",
		Idea:     "the simulator's plus_one ignores skip_negative_entries for -1 (a simulator bug, not the engine's)",
		Expect:   "red at the first replay with an inactive slot (as plus-one-no-skip)",
		NeedsSim: "it mutates the simulator (sim/plusone.go), not the engine: a card runs its own plus_one",
		Edits: []Edit{
			{File: simPlusOne,
				Old: "if l.flag && (v < 0 || v == math.MaxInt32) {",
				New: "if l.flag && v == math.MaxInt32 { // mutant"},
		},
	},

	// Issue 9: written before the properties that kill them (see Candidates).
	{
		Name:   "width-headroom",
		Prop:   "page-table",
		Idea:   "the dynamic width policy keeps one spare column (longest+1), a wrong width policy shared by the engine and kvpage",
		Expect: "red (page-table) at the first step under the dynamic width: the table is one column wider than the contract's max(longest, 1)",
		Edits: []Edit{
			{File: kvpageWidth,
				Old: "return max(longestBlocks, 1), nil",
				New: "return max(longestBlocks+1, 1), nil // mutant: one column of headroom"},
		},
	},
	{
		Name:   "pad-one",
		Prop:   "page-table",
		Idea:   "the page-table pad value is 1 instead of the contract's 0 (every unused column names block 1)",
		Expect: "red (page-table) at the first step: columns past a slot's blocks hold 1",
		Notes:  "Harmless to the outputs (KChunkSize = BlockSize never reads a pad column); only an expectation that does not take the pad from qwen3.PagePad sees it.",
		SeenBy: []string{"page_table+page_pad"},
		Edits: []Edit{
			{File: "qwen3/engine.go",
				Old: "const PagePad int32 = 0",
				New: "const PagePad int32 = 1 // mutant"},
		},
	},
	{
		Name:   "leak-pt-on-width-change",
		Prop:   "device-memory",
		Idea:   "a page table superseded by a width change while no trace addresses it is dropped, never freed (one leaked tensor per width change)",
		Expect: "red (device-memory) after the first width change outside a live trace",
		SeenBy: []string{"memory", "close"},
		Edits: []Edit{
			{File: engineStep,
				Old: "\t\t} else if err := e.dev.Free(*old); err != nil {\n\t\t\treturn fmt.Errorf(\"free page table: %w\", err)\n\t\t}\n",
				New: "\t\t} // mutant: superseded table leaked\n"},
		},
	},
	{
		Name:   "recapture-one-late",
		Prop:   "replay",
		Idea:   "recapture_every counts with > instead of >=: one replay too many on every trace",
		Expect: "red (replay cadence) at the replay that should have been a re-capture",
		SeenBy: []string{"regime+follows_hints"},
		Edits: []Edit{
			{File: engineStep,
				Old: "e.trace.steps >= e.opt.RecaptureEvery",
				New: "e.trace.steps > e.opt.RecaptureEvery /* mutant */"},
		},
	},
	{
		Name:   "token-rewritten-in-replay",
		Prop:   "host-writes",
		Idea:   "unless the engine's own read-back check is on, every step rewrites the token input (the greedy token is copied back to the device)",
		Expect: "red (host-writes) at the first steady-state replay of a scenario without verify",
		SeenBy: []string{"regime+host_writes"},
		Edits: []Edit{
			{File: engineStep,
				Old: "posDiffers, tokDiffers := !e.mirror, !e.mirror",
				New: "posDiffers, tokDiffers := !e.mirror, !e.mirror || !e.opt.Verify // mutant"},
		},
	},
	{
		Name:   "decode-new-seqs-one-slot",
		Prop:   "cur-pos",
		Idea:   "Decode gives every sequence it starts the lowest slot no live sequence holds, ignoring the slots taken earlier in the same batch",
		Expect: "red at the first decode that starts two sequences at once: both land in one slot",
		Edits: []Edit{
			{File: engineStep,
				Old: "if s = e.freeSlot(taken); s < 0 {",
				New: "if s = e.freeSlot(nil); s < 0 { // mutant"},
		},
	},

	// Issue 9: written before the properties that kill them (see Candidates).
	{
		Name:   "trace-kept-on-batch-change",
		Prop:   "replay",
		Idea:   "a change of the active slots does not force a re-capture (only the page-table tensor and recapture_every do)",
		Expect: "red (replay cadence) at the first replay whose active slots differ from the capture's",
		Notes:  "The graph runs every slot and inactive ones carry -1, so the outputs may stay bit-exact; the design's contract (re-capture on batch-shape change) is what it breaks.",
		SeenBy: []string{"regime+follows_hints"},
		Edits: []Edit{
			{File: engineStep,
				Old: "if e.trace != nil && (e.trace.pt != e.pt.ID || !slices.Equal(e.trace.active, active) ||",
				New: "if e.trace != nil && (e.trace.pt != e.pt.ID || // mutant: active set ignored"},
		},
	},
	{
		Name:   "close-keeps-trace",
		Prop:   "device-memory",
		Idea:   "Close frees every tensor but does not release the live trace",
		Expect: "red (device-memory) at the end of the first captured run that holds a trace when it is closed",
		SeenBy: []string{"close"},
		Edits: []Edit{
			{File: "qwen3/engine.go",
				Old: "\te.closed = true\n\terr := e.dropTrace()\n",
				New: "\te.closed = true\n\tvar err error // mutant: trace not released\n"},
		},
	},
	{
		Name: "pt-tracked-twice",
		Prop: "device-memory",
		Idea: "every page table is also remembered with the persistent tensors, so Close frees the current one twice",
		Expect: "red (device-memory) after the first width change: the superseded table stays allocated as a " +
			"persistent tensor; a run without one ends with Close freeing the current table twice (close)",
		Edits: []Edit{
			{File: engineStep,
				Old: "\te.pt, e.ptW, e.ptHost = &t, w, nil\n",
				New: "\te.pt, e.ptW, e.ptHost = &t, w, nil\n\te.tensor = append(e.tensor, t) // mutant\n"},
		},
	},
	{
		Name:   "leak-retired-on-release",
		Prop:   "device-memory",
		Idea:   "releasing a trace forgets the page tables it retired without freeing them",
		Expect: "red (device-memory) after the first width change of a captured run",
		SeenBy: []string{"memory", "close"},
		Edits: []Edit{
			{File: engineStep,
				Old: "\t\t\terr = errors.Join(err, e.dev.Free(r.t))\n",
				New: "\t\t\t// mutant: retired table leaked\n"},
		},
	},
	{
		Name:   "recapture-every-ignored",
		Prop:   "replay",
		Idea:   "recapture_every is accepted and never acted on",
		Expect: "red (replay cadence) at the first replay past recapture_every steps on one trace",
		SeenBy: []string{"regime+follows_hints"},
		Edits: []Edit{
			{File: engineStep,
				Old: "(e.opt.RecaptureEvery > 0 && e.trace.steps >= e.opt.RecaptureEvery)",
				New: "(false && e.opt.RecaptureEvery > 0 && e.trace.steps >= e.opt.RecaptureEvery) /* mutant */"},
		},
	},
	{
		Name: "teacher-token-dropped-in-replay",
		Prop: "kv-write",
		Idea: "a replay never writes the token input (it assumes greedy decoding): a teacher-forced token is ignored",
		Expect: "red (kv-write) at the first replay fed a token other than the device's argmax: the rows it writes " +
			"hold the argmax token's keys and values, not the fed token's (its logits differ too)",
		Edits: []Edit{
			{File: engineStep,
				Old: "\tif tokDiffers {\n",
				New: "\tif tokDiffers && st.Regime != RegimeReplay { // mutant\n"},
		},
	},
	{
		Name:   "jump-not-reseeded-in-replay",
		Prop:   "cur-pos",
		Idea:   "a replay never re-seeds cur_pos and the rope index, even when the caller's positions did not advance by one",
		Expect: "red (cur-pos) at the first replay whose positions jump",
		Edits: []Edit{
			{File: engineStep,
				Old: "if st.Regime != RegimeReplay || posDiffers {",
				New: "if st.Regime != RegimeReplay || posDiffers && st.Regime != RegimeReplay { // mutant: posDiffers ignored in replays"},
		},
	},

	// Issue 15: the guard of the prefill-by-decode mode, drawn in one
	// case in eight.
	{
		Name:   "prefill-decode-slot-zero",
		Prop:   "logits",
		Idea:   "a prefill by decode steps returns each step's output of slot 0, not of the slot the sequence took",
		Expect: "red (logits) at the first prefill by decode steps into a slot other than 0: the outputs are another sequence's",
		Edits: []Edit{
			{File: engineStep,
				Old: "outs[i] = o[s]",
				New: "outs[i] = o[0] // mutant"},
		},
	},

	// Issue 35: one per serving action, as a colleague would write it
	// (drawn only for a SUT that serves the call).
	{
		Name:   "chunk-slice-one-block-off",
		Prop:   "kv-write",
		Idea:   "a chunk's page-table slice for paged_fill_cache starts at (start-1)/block_size, one block before the chunk's first",
		Expect: "red (kv-write) at the first chunk of a chunked prefill that starts on a block boundary: its rows land in the block before",
		Edits: []Edit{
			{File: engineServ,
				Old: "first, n := start/bs, (len(toks)+bs-1)/bs",
				New: "first, n := (start-1)/bs, (len(toks)+bs-1)/bs // mutant"},
		},
	},
	{
		Name:   "verify-old-width",
		Prop:   "kv-write",
		Idea:   "a verify's rounds run through the table grown for its first position only: the drafts past a block boundary read PagePad",
		Expect: "red (kv-write) at the first verify whose k positions cross a block boundary: those rows go to block PagePad",
		Edits: []Edit{
			{File: engineServ,
				Old: "req[slots[i]] = slotReq{active: true, seq: st.Seq, tok: st.Tokens[j], pos: st.Pos + j, blocks: st.Blocks[:last/bs+1]}",
				New: "_ = last\n\t\t\t\treq[slots[i]] = slotReq{active: true, seq: st.Seq, tok: st.Tokens[j], pos: st.Pos + j, blocks: st.Blocks[:st.Pos/bs+1]} // mutant"},
		},
	},
	{
		Name:   "rollback-not-reseeded",
		Prop:   "rollback",
		Idea:   "a replay re-seeds an active slot's cur_pos only when it jumped forward: after a rejected draft the device stays at the draft's end",
		Expect: "red (rollback) at the first replay after a verify that rejected a draft: the device writes past the accepted length",
		Edits: []Edit{
			{File: engineStep,
				Old: "if e.mirror && (pos[s] != e.devPos[s] || rope[s] != e.devRope[s]) {",
				New: "if e.mirror && (pos[s] != e.devPos[s] || rope[s] != e.devRope[s]) && (!r.active || pos[s] > e.devPos[s]) { // mutant"},
		},
	},
	{
		Name:   "copy-keys-only",
		Prop:   "kv-write",
		Idea:   "a block copy (copy-on-write) copies each layer's keys and forgets the values",
		Expect: "red (kv-write) at the first block copy: the destination block's V rows are not written",
		Edits: []Edit{
			{File: engineServ,
				Old: "for _, cache := range [2]tt.Tensor{L.kc, L.vc} {",
				New: "for _, cache := range [1]tt.Tensor{L.kc} { // mutant: values not copied"},
		},
	},
	{
		Name:      "cow-refcount-off-by-one",
		Prop:      "shared-write",
		Idea:      "the scheduler copies a block on write only when more than two tables share it: a block shared by a parent and one child is written in place",
		Expect:    "red (shared-write) at the first write into a block exactly two tables share (a fork's or a prefix hit's partial last block)",
		Notes:     "A scheduler bug, not the engine's: --engine builds it into the checker.",
		Scheduler: true,
		Edits: []Edit{
			{File: kvShare,
				Old: "\t\tif t.pool.refs[t.blocks[i]] > 1 {\n",
				New: "\t\tif t.pool.refs[t.blocks[i]] > 2 { // mutant\n"},
		},
	},
	{
		Name:      "share-rounded-down",
		Prop:      "prefix-hit",
		Idea:      "a prefix hit shares floor(length/block_size) blocks but claims length positions: a hit inside a block loses its partial block",
		Expect:    "red (prefix-hit) at the first prefix hit whose length is not a block multiple: the shared positions of its last block read rows the table no longer maps",
		Notes:     "A scheduler bug, not the engine's: --engine builds it into the checker. At an exact block boundary it is correct.",
		Scheduler: true,
		Edits: []Edit{
			{File: kvShare,
				Old: "\tn := BlocksFor(length, t.pool.blockSize)\n",
				New: "\tn := length / t.pool.blockSize // mutant: rounded down\n"},
		},
	},
	{
		Name: "release-frees-shared",
		Prop: "kv-write",
		Idea: "a table's release (a finish, a preemption) returns every block it holds to the pool, also those a fork or a " +
			"prefix hit still shares: the next allocation hands out a block a live table still addresses",
		Expect: "red (kv-write) at the first write after a sharer ends: a live table's block, freed under it, is taken " +
			"again by a table's growth or a new sequence, and one write lands on the other's rows",
		Notes:     "A scheduler bug, not the engine's: --engine builds it into the checker. A preempted sequence's blocks are the case the serving issue names (blocks reused while something still addresses them).",
		Scheduler: true,
		Edits: []Edit{
			{File: kvTable,
				Old: "\tfor _, id := range t.blocks {\n\t\tt.pool.unref(id)\n\t}\n",
				New: "\tfor _, id := range t.blocks {\n\t\tif t.pool.refs[id] > 0 { // mutant: back to the pool, shared or not\n\t\t\tt.pool.put(id)\n\t\t}\n\t}\n"},
		},
	},
	{
		Name:   "refused-not-rerun",
		Prop:   "cur-pos",
		Idea:   "when the device refuses a capture (trace region too small) the engine goes eager from the next step on but returns this step's outputs without running it: the capture recorded the graph, nothing executed it",
		Expect: "red (cur-pos) at the step whose capture the device refused (a case drawn with trace_region below the graph's trace): the graph's plus_one never ran, so the device's cur_pos is one behind; its logits are the previous step's and its KV rows are never written",
		Edits: []Edit{
			{File: engineStep,
				Old: "\t\t\tst.Regime = RegimeWarm\n\t\t\treturn e.forward()\n",
				New: "\t\t\tst.Regime = RegimeWarm\n\t\t\treturn nil // mutant: the refused step never runs\n"},
		},
	},
	{
		Name:   "refused-leaks-capture",
		Prop:   "device-memory",
		Idea:   "after a refused end_trace_capture the engine releases the trace but keeps the tensors the capture allocated (the refusal path forgot the cleanup the other error path does)",
		Expect: "red (device-memory) after the step whose capture the device refused: the capture's own outputs stay allocated and nothing holds them",
		SeenBy: []string{"memory", "close"},
		Edits: []Edit{
			{File: engineStep,
				Old: "\t\t_ = e.dev.Release(id)\n\t\te.freeTensors(owned)\n\t\tif tt.TraceRegionTooSmall(err) {\n",
				New: "\t\t_ = e.dev.Release(id)\n\t\tif tt.TraceRegionTooSmall(err) { // mutant: the capture's tensors kept\n\t\t\te.noRegion = true\n\t\t\treturn errNoRegion\n\t\t}\n\t\te.freeTensors(owned)\n\t\tif tt.TraceRegionTooSmall(err) {\n"},
		},
	},
	{
		Name:   "chunk-table-own-width",
		Prop:   "kv-write",
		Idea:   "each chunk of a chunked prefill gets a page table just wide enough for its own blocks (padded to 8), as if every chunk compiled its own program; chunked SDPA's tensor form hashes its program without the table (sdpa_device_operation.cpp:399-400), so the program built for the first chunk serves them all",
		Expect: "red (kv-write) at the first chunk, in captured mode, whose table passes 8 blocks: the program compiled at width 8 reads its table's 32-byte stick past its end, where the tensor form's chunk-start CB follows on Wormhole (sdpa_program_factory.cpp:697-704, reader_interleaved.cpp:241-256), and takes the chunk start (256 at 8 blocks of 32) for a block id: key rows come from past the cache, so the chunk's attention and the KV it writes next go wrong; in a strict case the sanitizer names the stick overrun first (page-table-read-past-cb)",
		Edits: []Edit{
			{File: engineServ,
				Old: "w = (e.opt.NumBlocks + 7) / 8 * 8",
				New: "w = (w + 7) / 8 * 8 // mutant: a width per chunk"},
		},
	},
}
