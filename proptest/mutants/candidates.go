package mutants

// Candidates are the mutants written as a new user would write them
// (issue 9: realistic engine, bookkeeping and simulator bugs, from the
// engine's and the contract's documentation, without looking at the
// properties) that did not join the Catalog: the suite before issue 9
// already killed these two simulator bugs (by logits, at the same cases
// as now), so they add nothing to it. ByName finds them, so `offcard
// mutants --only NAME` runs one.
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
}

const kvpageWidth = "kvpage/width.go"
