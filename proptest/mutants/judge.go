package mutants

// The judge catalog: bugs of offcard's side of a foreign engine's verdict —
// the tolerant judge's tolerances and bands, which observations it
// compares, and how wire classifies an engine's faults — written as a
// colleague might write them. Each must turn one verdict of the planted
// engine panel (proptest's TestPanel): a buggy plant that passes, an
// honest one that fails, or a bug named by the wrong property. Killer
// names that plant; TestJudgeCatalogKilled builds proptest's test binary
// once over the catalog's schema and runs the killer's subtest with each
// mutant (and the whole panel without one, which must pass).

const (
	judgeTolerant = "proptest/tolerant.go"
	judgeRun      = "proptest/prop_kv.go"
	judgeEngine   = "proptest/engine.go"
	judgeWireObs  = "proptest/wireobs.go"
	judgeReplay   = "proptest/prop_replay.go"
	judgeTap      = "proptest/tap.go"
	judgeClient   = "wire/client.go"
)

// The serving properties' judge files; their mutants' killers are the
// planted serving bugs of proptest's TestServingPlantsRed (Killer
// "TestServingPlantsRed/NAME").
const (
	servingKill = "TestServingPlantsRed/"
	// bandKill: proptest's table of the near-tie band (TestJudgeTokenBand).
	bandKill = "TestJudgeTokenBand/"
)

// JudgeCatalog is the judge-side mutant catalog.
var JudgeCatalog = []Mutant{
	{
		Name:   "judge-steps-loose",
		Idea:   "logits may be twice the stated bf16-step bound off (16, not 8)",
		Killer: "logits-past-bound",
		Edits: []Edit{{File: judgeTolerant,
			Old: "nats > absTol && steps > tol.LogitSteps",
			New: "nats > absTol && steps > 2*tol.LogitSteps"}},
	},
	{
		Name:   "judge-steps-tight",
		Idea:   "a logit exactly at the bound fails (>= for >): the stated bound is not what is forgiven",
		Killer: "honest-at-bound",
		Edits: []Edit{{File: judgeTolerant,
			Old: "nats > absTol && steps > tol.LogitSteps",
			New: "nats > absTol && steps >= tol.LogitSteps"}},
	},
	{
		Name:   "judge-both-bounds",
		Idea:   "a logit must be within both bounds (steps and nats), not either",
		Killer: "honest-at-bound",
		Edits: []Edit{{File: judgeTolerant,
			Old: "nats > absTol && steps > tol.LogitSteps",
			New: "nats > absTol || steps > tol.LogitSteps"}},
	},
	{
		Name:   "judge-band-wide",
		Idea:   "the near-tie band is four times the stated one (2 nats, not 0.5)",
		Killer: "token-past-band",
		Edits: []Edit{{File: judgeTolerant,
			Old: "j, err := adjudicate.Judge(ref, tok, tol.Band, tol.TopK)",
			New: "j, err := adjudicate.Judge(ref, tok, 4*tol.Band, tol.TopK)"}},
	},
	{
		Name:   "judge-band-narrow",
		Idea:   "the near-tie band is a fifth of the stated one: legitimate flips fail",
		Killer: bandKill + "half-nat-at-10",
		Edits: []Edit{{File: judgeTolerant,
			Old: "j, err := adjudicate.Judge(ref, tok, tol.Band, tol.TopK)",
			New: "j, err := adjudicate.Judge(ref, tok, tol.Band/5, tol.TopK)"}},
	},
	{
		Name:   "judge-band-steps-ignored",
		Idea:   "the near-tie band is nats only: a flip of two bf16 steps at a top logit over 64 (one nat) fails",
		Killer: bandKill + "two-steps-at-100",
		Edits: []Edit{{File: judgeTolerant,
			Old: "case !j.Verdict.Bad() || j.GapSteps <= tol.BandSteps:",
			New: "case !j.Verdict.Bad():"}},
	},
	{
		Name:   "judge-band-steps-wide",
		Idea:   "the near-tie band reaches 8 bf16 steps (the logit bound), not 2: a 3-step flip at a top of 100 passes",
		Killer: bandKill + "three-steps-at-100",
		Edits: []Edit{{File: judgeTolerant,
			Old: "case !j.Verdict.Bad() || j.GapSteps <= tol.BandSteps:",
			New: "case !j.Verdict.Bad() || j.GapSteps <= 4*tol.BandSteps:"}},
	},
	{
		Name:   "judge-exact-claim-ignored",
		Idea:   "an engine's exact claim is not held against it: bit-exact engines judged within the tolerance",
		Killer: "exact-lie-logit",
		Edits: []Edit{{File: judgeEngine,
			Old: "if s.C.Caps().Exact {",
			New: "if s.C.Caps().Exact && false {"}},
	},
	{
		Name:   "judge-exact-token-unchecked",
		Idea:   "an exact engine's logits are compared bit for bit but its token is only judged by the band",
		Killer: "exact-lie-token",
		Edits: []Edit{
			{File: judgeTolerant,
				Old: "case tol.Exact && g.Token != w.Token:",
				New: "case tol.Exact && g.Token != w.Token && false:"},
			{File: judgeTolerant,
				Old: "d = diffOutput(g, w)",
				New: "d = logitsOff(g.Logits, w.Logits, nil, tol)"},
		},
	},
	{
		Name:   "judge-cur-pos-lenient",
		Idea:   "a cur_pos one behind the sequence's length is accepted (the seed's bug)",
		Killer: "cur-pos-behind",
		Edits: []Edit{{File: judgeTolerant,
			Old: "if wantCur && st.CurPos != last+1 {",
			New: "if wantCur && st.CurPos != last+1 && st.CurPos != last {"}},
	},
	{
		Name:   "judge-page-row-first-only",
		Idea:   "only the first column of a sequence's page-table row is compared",
		Killer: "page-row-last",
		Edits: []Edit{{File: judgeTolerant,
			Old: "case len(st.Row) < n || !slices.Equal(st.Row[:n], want):",
			New: "case len(st.Row) < n || st.Row[0] != want[0]:"}},
	},
	{
		Name:   "judge-pad-unchecked",
		Idea:   "the columns past a sequence's blocks are not compared with the engine's pad",
		Killer: "page-pad",
		Edits: []Edit{{File: judgeTolerant,
			Old: "case pad != nil:",
			New: "case pad != nil && false:"}},
	},
	{
		Name:   "judge-idle-rows-unchecked",
		Idea:   "page-table rows no sequence of the step uses are not looked at",
		Killer: "idle-row",
		Edits: []Edit{{File: judgeTolerant,
			Old: "if pad == nil || !wantRow {",
			New: "if pad == nil || !wantRow || true {"}},
	},
	{
		Name:   "judge-kv-extra-ignored",
		Idea:   "KV writes beyond one per position are not reported",
		Killer: "kv-extra",
		Edits: []Edit{{File: judgeRun,
			Old: "if len(got) > len(a.pos) {",
			New: "if len(got) > len(a.pos) && false {"}},
	},
	{
		Name:   "judge-kv-row-ignored",
		Idea:   "a KV write's row is not compared, only its block",
		Killer: "kv-row",
		Edits: []Edit{{File: judgeRun,
			Old: "if g.Block != wantB || g.Row != wantR {",
			New: "if g.Block != wantB {"}},
	},
	{
		Name:   "judge-findings-dropped",
		Idea:   "the findings an engine reports are never read",
		Killer: "finding",
		Edits: []Edit{{File: judgeEngine,
			Old: "fs := s.obs().Findings",
			New: "fs := []string(nil)"}},
	},
	{
		Name:   "judge-refusal-assumed",
		Idea:   "through the protocol, an eager step where the cadence wants a capture is taken as the device refusing it even with no trace region hinted (the region condition dropped)",
		Killer: "regime-all-eager",
		Edits: []Edit{{File: judgeWireObs,
			Old: "if r.sc.TraceRegion > 0 && !r.regime.refused {",
			New: "if !r.regime.refused { // mutant"}},
	},
	{
		Name: "judge-refusal-forgotten",
		Idea: "the cadence model does not keep a refusal: after the device refused a capture it wants a capture again at the next warm step",
		// Through the protocol every eager step of a hinted trace region
		// is taken as a refusal again, so only the device's own refusal,
		// in process, tells: the regression script of a refused capture.
		Killer: "TestRegressions/trace-region-refused",
		Edits: []Edit{{File: judgeReplay,
			Old: "m.refused, m.refusedNow = true, true",
			New: "m.refusedNow = true // mutant: refusal not kept"}},
	},
	{
		Name:   "judge-freed-tables-kept",
		Idea:   "the tap's history of the page tables paged ops used keeps freed ones, so a long chunked prefill's chunk tables push the decode table out and an honest engine's table is called stray",
		Killer: "TestRegressions/chunked-admit-five-chunks",
		Edits: []Edit{{File: judgeTap,
			Old: "\t\tif i := slices.Index(t.pageTable[:], x.ID); i >= 0 {\n",
			New: "\t\tif i := slices.Index(t.pageTable[:], x.ID); i >= 0 && false { // mutant\n"}},
	},
	{
		Name:   "judge-fault-unclassified",
		Idea:   "a protocol fault (crash, hang, garbage) is not classified as the engine property",
		Killer: "crash",
		Edits: []Edit{{File: judgeTolerant,
			Old: "\t\treturn PropEngine\n",
			New: "\t\treturn PropSUTError\n"}},
	},
	{
		Name:   "wire-timeout-scaled",
		Idea:   "a decode call waits ten times the timeout it was given",
		Killer: "hang",
		Edits: []Edit{{File: judgeClient,
			Old: "r, err := c.roundTrip(OpDecode, req, c.o.Timeout)",
			New: "r, err := c.roundTrip(OpDecode, req, 10*c.o.Timeout)"}},
	},
	{
		Name:   "wire-refusal-as-ok",
		Idea:   "an error reply (ok false) is taken as an empty ok reply",
		Killer: "refuse",
		Edits: []Edit{{File: judgeClient,
			Old: "return Reply{}, &RefusedError{Op: op, Msg: clipText(r.Error, maxErrorText)}",
			New: "return Reply{OK: true}, nil"}},
	},
	{
		Name:   "wire-output-count-unchecked",
		Idea:   "a decode reply with fewer outputs than the batch is not a protocol fault",
		Killer: "outputs-short",
		Edits: []Edit{{File: judgeClient,
			Old: "if len(r.Outputs) != len(batch) {",
			New: "if len(r.Outputs) > len(batch) {"}},
	},
	{
		Name:   "wire-output-place-unchecked",
		Idea:   "an output's seq and pos are not compared with the request's",
		Killer: "outputs-misplaced",
		Edits: []Edit{{File: judgeClient,
			Old: "if o.Seq != want[i].Seq || o.Pos != want[i].Pos {",
			New: "if o.Seq != want[i].Seq {"}},
	},
	{
		Name:   "judge-shared-bytes-unchecked",
		Idea:   "the cache bytes of shared blocks are never looked at for writes (only the KV log would show them)",
		Killer: servingKill + "shift-start",
		Edits: []Edit{{File: "proptest/prop_kv.go",
			Old: "if shared != nil && !sharedSeen {",
			New: "if false && shared != nil && !sharedSeen {"}},
	},
	{
		Name:   "judge-shared-refcount-off",
		Idea:   "a block counts as shared only when three tables hold it (> 2 for > 1)",
		Killer: servingKill + "shift-start",
		Edits: []Edit{{File: "proptest/prop_sharedwrite.go",
			Old: "if r.pool.RefCount(int32(b)) > 1 {",
			New: "if r.pool.RefCount(int32(b)) > 2 {"}},
	},
	{
		Name:   "judge-cold-run-unchecked",
		Idea:   "a prefix hit's outputs are not compared with the cold run",
		Killer: servingKill + "stale-hit",
		Edits: []Edit{{File: "proptest/prop_prefixhit.go",
			Old: "if k.cold == nil || len(k.got) != len(k.cold) {",
			New: "if true || k.cold == nil || len(k.got) != len(k.cold) {"}},
	},
	{
		Name:   "judge-rollback-window-unset",
		Idea:   "a verify that rejected drafts opens no rollback window",
		Killer: servingKill + "draft-pos",
		Edits: []Edit{{File: "proptest/act_verify.go",
			Old: "r.rolled[q] = [2]int{pos + a, end}",
			New: "_ = end"}},
	},
	{
		Name:   "judge-recompute-token-only",
		Idea:   "a recompute is compared with the first run by its token, not its logits' bits",
		Killer: servingKill + "recompute-drift",
		Edits: []Edit{{File: "proptest/prop_recompute.go",
			Old: "if h == 0 || hashOutput(g) == h {",
			New: "if h == 0 || hashOutput(g) == h || true {"}},
	},
	{
		Name:   "judge-copy-rows-half",
		Idea:   "the oracle notes only the first half of a copy's destination rows as written, so the cache diff looks nowhere else",
		Killer: servingKill + "copy-half",
		Edits: []Edit{{File: "proptest/oracle.go",
			Old: "for row := range o.bs {",
			New: "for row := range o.bs / 2 {"}},
	},
	{
		Name:   "judge-ref-copy-skipped",
		Idea:   "the oracle does not carry out the block copies it hands the SUT",
		Killer: servingKill + "copy-skip",
		Edits: []Edit{{File: "proptest/oracle.go",
			Old: "if err := o.d.CopyBlocks(copies); err != nil {",
			New: "if err := o.d.CopyBlocks(nil); err != nil {"}},
	},
}
