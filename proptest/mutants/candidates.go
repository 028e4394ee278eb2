package mutants

// Candidates are mutants written as a new user would write them: realistic
// engine, bookkeeping and simulator bugs, written from the engine's and the
// contract's documentation without looking at the properties (issue 9).
// They are not in the Catalog until the suite kills them; ByName finds
// them, so `offcard mutants --only NAME` runs one.
var Candidates = []Mutant{
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
				New: "if st.Regime != RegimeReplay || posDiffers && st.Regime != RegimeReplay { // mutant: posDiffers ignored in replays"},
		},
	},
}

const kvpageWidth = "kvpage/width.go"
