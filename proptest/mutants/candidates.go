package mutants

// Candidates are mutants written as a new user would write them: realistic
// engine, bookkeeping and simulator bugs, written from the engine's and the
// contract's documentation without looking at the properties (issue 9).
// They are not in the Catalog until the suite kills them; ByName finds
// them, so `offcard mutants --only NAME` runs one.
var Candidates = []Mutant{
	{
		Name:   "width-headroom",
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
		Idea:   "the page-table pad value is 1 instead of the contract's 0 (every unused column names block 1)",
		Expect: "red (page-table) at the first step: columns past a slot's blocks hold 1",
		Notes:  "Harmless to the outputs (KChunkSize = BlockSize never reads a pad column); only an expectation that does not take the pad from qwen3.PagePad sees it.",
		Edits: []Edit{
			{File: "qwen3/engine.go",
				Old: "const PagePad int32 = 0",
				New: "const PagePad int32 = 1 // mutant"},
		},
	},
	{
		Name:   "sim-uc-tile-row-dropped",
		Idea:   "the simulated paged_update_cache drops the tile-row term of the cache tile id: rows 32..63 of a 64-row block land in rows 0..31",
		Expect: "red at the first write at row >= 32 of a block (block size 64): the device cache row differs from ref's",
		Edits: []Edit{
			{File: "sim/update_cache.go",
				Old: "cacheID = phys*p.numHeads*p.st*p.wt + ((raw%p.blockSize)/tt.TileSize)*p.wt",
				New: "cacheID = phys * p.numHeads * p.st * p.wt // mutant: tile row dropped"},
		},
	},
	{
		Name:   "sim-uc-last-head-dropped",
		Idea:   "the simulated paged_update_cache writes every KV head's row but the last",
		Expect: "red at the first step: the last KV head's cache row is never written",
		Edits: []Edit{
			{File: "sim/update_cache.go",
				Old: "for h := uint32(0); h < p.numHeads; h++ {\n\t\t\t\tfor w := uint32(0); w < p.wt; w++ {\n\t\t\t\t\tid := cacheID + w",
				New: "for h := uint32(0); h+1 < p.numHeads || h == 0 && p.numHeads == 1; h++ { // mutant\n\t\t\t\tfor w := uint32(0); w < p.wt; w++ {\n\t\t\t\t\tid := cacheID + w"},
		},
	},
	{
		Name:   "leak-pt-on-width-change",
		Idea:   "a page table superseded by a width change while no trace addresses it is dropped, never freed (one leaked tensor per width change)",
		Expect: "red (device-memory) after the first width change outside a live trace",
		Edits: []Edit{
			{File: engineStep,
				Old: "\t\t} else if err := e.dev.Free(*old); err != nil {\n\t\t\treturn fmt.Errorf(\"free page table: %w\", err)\n\t\t}\n",
				New: "\t\t} // mutant: superseded table leaked\n"},
		},
	},
	{
		Name:   "leak-retired-on-release",
		Idea:   "releasing a trace forgets the page tables it retired without freeing them",
		Expect: "red (device-memory) after the first width change of a captured run",
		Edits: []Edit{
			{File: engineStep,
				Old: "\t\t\terr = errors.Join(err, e.dev.Free(r.t))\n",
				New: "\t\t\t// mutant: retired table leaked\n"},
		},
	},
	{
		Name:   "recapture-one-late",
		Idea:   "recapture_every counts with > instead of >=: one replay too many on every trace",
		Expect: "red (replay cadence) at the replay that should have been a re-capture",
		Edits: []Edit{
			{File: engineStep,
				Old: "e.trace.steps >= e.opt.RecaptureEvery",
				New: "e.trace.steps > e.opt.RecaptureEvery /* mutant */"},
		},
	},
	{
		Name:   "recapture-every-ignored",
		Idea:   "recapture_every is accepted and never acted on",
		Expect: "red (replay cadence) at the first replay past recapture_every steps on one trace",
		Edits: []Edit{
			{File: engineStep,
				Old: "(e.opt.RecaptureEvery > 0 && e.trace.steps >= e.opt.RecaptureEvery)",
				New: "(false && e.opt.RecaptureEvery > 0 && e.trace.steps >= e.opt.RecaptureEvery) /* mutant */"},
		},
	},
	{
		Name:   "token-rewritten-in-replay",
		Idea:   "unless the engine's own read-back check is on, every step rewrites the token input (the greedy token is copied back to the device)",
		Expect: "red (host-writes) at the first steady-state replay of a scenario without verify",
		Edits: []Edit{
			{File: engineStep,
				Old: "posDiffers, tokDiffers := !e.mirror, !e.mirror",
				New: "posDiffers, tokDiffers := !e.mirror, !e.mirror || !e.opt.Verify // mutant"},
		},
	},
	{
		Name:   "decode-new-seqs-one-slot",
		Idea:   "Decode gives every sequence it starts the lowest slot no live sequence holds, ignoring the slots taken earlier in the same batch",
		Expect: "red at the first decode that starts two sequences at once: both land in one slot",
		Edits: []Edit{
			{File: engineStep,
				Old: "if s = e.freeSlot(taken); s < 0 {",
				New: "if s = e.freeSlot(nil); s < 0 { // mutant"},
		},
	},
	{
		Name:   "teacher-token-dropped-in-replay",
		Idea:   "a replay never writes the token input (it assumes greedy decoding): a teacher-forced token is ignored",
		Expect: "red (logits) at the first replay fed a token other than the device's argmax",
		Edits: []Edit{
			{File: engineStep,
				Old: "\tif tokDiffers {\n",
				New: "\tif tokDiffers && st.Regime != RegimeReplay { // mutant\n"},
		},
	},
	{
		Name:   "jump-not-reseeded-in-replay",
		Idea:   "a replay never re-seeds cur_pos and the rope index, even when the caller's positions did not advance by one",
		Expect: "red (cur-pos) at the first replay whose positions jump",
		Edits: []Edit{
			{File: engineStep,
				Old: "if st.Regime != RegimeReplay || posDiffers {",
				New: "if st.Regime != RegimeReplay { // mutant: posDiffers ignored"},
		},
	},
	{
		Name:   "trace-kept-on-batch-change",
		Idea:   "a change of the active slots does not force a re-capture (only the page-table tensor and recapture_every do)",
		Expect: "red (replay cadence) at the first replay whose active slots differ from the capture's",
		Notes:  "The graph runs every slot and inactive ones carry -1, so the outputs may stay bit-exact; the design's contract (re-capture on batch-shape change) is what it breaks.",
		Edits: []Edit{
			{File: engineStep,
				Old: "if e.trace != nil && (e.trace.pt != e.pt.ID || !slices.Equal(e.trace.active, active) ||",
				New: "if e.trace != nil && (e.trace.pt != e.pt.ID || // mutant: active set ignored"},
		},
	},
	{
		Name:   "close-keeps-trace",
		Idea:   "Close frees every tensor but does not release the live trace",
		Expect: "red (device-memory) at the end of the first captured run that holds a trace when it is closed",
		Edits: []Edit{
			{File: "qwen3/engine.go",
				Old: "\te.closed = true\n\terr := e.dropTrace()\n",
				New: "\te.closed = true\n\tvar err error // mutant: trace not released\n"},
		},
	},
	{
		Name:   "pt-tracked-twice",
		Idea:   "every page table is also remembered with the persistent tensors, so Close frees the current one twice",
		Expect: "red (close) at the end of every run that stepped: Close returns the device's error",
		Edits: []Edit{
			{File: engineStep,
				Old: "\te.pt, e.ptW, e.ptHost = &t, w, nil\n",
				New: "\te.pt, e.ptW, e.ptHost = &t, w, nil\n\te.tensor = append(e.tensor, t) // mutant\n"},
		},
	},
}

const kvpageWidth = "kvpage/width.go"
