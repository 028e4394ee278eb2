package mutants

// Perturbations are deliberate bugs of the simulator itself. The engine
// catalog run on a perturbed simulator (offcard mutants --perturb NAME)
// shows which engine mutants that simulator bug would hide; the
// simulator's own unit tests must catch every perturbation
// (TestSimPerturbationsCaught), so a hidden mutant can only stay hidden
// behind a simulator bug its tests would flag first.
var Perturbations = []Mutant{
	{
		Name:   "sim-alloc-never-reuse",
		Idea:   "the DRAM and L1 allocators never hand a freed address out again (free forgets the range)",
		Expect: "sim's allocator tests fail (immediate reuse, coalescing); engine mutants whose harm is a freed address handed to another tensor survive",
		Edits: []Edit{
			{File: "sim/alloc.go",
				Old: "\tdelete(a.used, addr)\n\ti := sort.Search(len(a.free)",
				New: "\tdelete(a.used, addr)\n\tif addr > 0 { // perturbation: freed ranges never reused\n\t\treturn\n\t}\n\ti := sort.Search(len(a.free)"},
		},
	},
	{
		Name:   "sim-overlap-misses-exact",
		Idea:   "the strict check of an allocation against a live trace's freed operands misses an allocation at exactly the freed address",
		Expect: "sim's hazard tests fail (allocation-overlaps-live-trace at the same address); engine mutants found only by that finding survive",
		Edits: []Edit{
			{File: "sim/trace.go",
				Old: "if b.addr < r.addr+r.perBank && r.addr < b.addr+size {",
				New: "if b.addr != r.addr && b.addr < r.addr+r.perBank && r.addr < b.addr+size { // perturbation"},
		},
	},
	// The card's answers at the pin (issue 34): each perturbation undoes one
	// and sim's tests must notice.
	{
		Name:   "sim-sdpa-gqa-sharded-output",
		Idea:   "paged SDPA decode accepts a sharded output with more than one KV head (sdpa_decode_device_operation.cpp:403-405 refuses it)",
		Expect: "TestSDPAOutputAndQMemoryRules fails; an engine asking for a sharded GQA output would pass on sim and fail on the card",
		Edits: []Edit{{File: "sim/sdpa.go",
			Old: "if ks[1] > 1 && out.spec.Memory.Sharded() {",
			New: "if false && ks[1] > 1 && out.spec.Memory.Sharded() { // perturbation"}},
	},
	{
		Name:   "sim-sdpa-width-sharded-output",
		Idea:   "paged SDPA decode takes a WIDTH_SHARDED output for a height-sharded one (sdpa_decode_device_operation.cpp:103-109)",
		Expect: "TestSDPAOutputAndQMemoryRules fails",
		Edits: []Edit{{File: "sim/sdpa.go",
			Old: "om.Sharded() && om.Layout != tt.HeightSharded {",
			New: "om.Sharded() && om.Layout != tt.HeightSharded && om.Layout != tt.WidthSharded { // perturbation"}},
	},
	{
		Name:   "sim-sdpa-l1-interleaved-output-refused",
		Idea:   "paged SDPA decode refuses an L1-interleaved output, which ttnn allows (the output is checked only when sharded)",
		Expect: "TestSDPAOutputAndQMemoryRules fails",
		Edits: []Edit{{File: "sim/sdpa.go",
			Old: "if om := out.spec.Memory; om.Sharded() && om.Layout != tt.HeightSharded {",
			New: "if om := out.spec.Memory; (om.Sharded() && om.Layout != tt.HeightSharded) || (!om.Sharded() && om.Buffer == tt.L1) { // perturbation"}},
	},
	{
		Name:   "sim-sdpa-width-sharded-q",
		Idea:   "paged SDPA decode takes a WIDTH_SHARDED Q (sdpa_decode_device_operation.cpp:84-88 demands HEIGHT_SHARDED)",
		Expect: "TestSDPAOutputAndQMemoryRules fails",
		Edits: []Edit{{File: "sim/sdpa.go",
			Old: "if qm := q.spec.Memory; qm.Sharded() && qm.Layout != tt.HeightSharded {",
			New: "if qm := q.spec.Memory; qm.Sharded() && qm.Layout != tt.HeightSharded && qm.Layout != tt.WidthSharded { // perturbation"}},
	},
	{
		Name:   "sim-update-cache-width-sharded-input",
		Idea:   "paged_update_cache takes a WIDTH_SHARDED input (paged_update_cache_device_operation.cpp:257-259 refuses it)",
		Expect: "TestUpdateCacheRefusesWidthSharded fails",
		Edits: []Edit{{File: "sim/update_cache.go",
			Old: "if m.Layout == tt.WidthSharded {",
			New: "if false && m.Layout == tt.WidthSharded { // perturbation"}},
	},
	{
		Name:   "sim-sdpa-cur-pos-unkeyed",
		Idea:   "SDPA decode's program-cache key leaves the cur_pos tensor out (sdpa_decode_device_operation.cpp:515-520, 553-554 hash it)",
		Expect: "TestSDPAMaskedFetchAndCurPosKey and TestSDPACurPosSpecMissesInCapture fail: a capture with a new cur_pos spec hits on sim and misses on the card",
		Edits: []Edit{{File: "sim/sdpa.go",
			Old: "key := d.opKey(name, attrs, q, k, v, pt, out, cp)",
			New: "key := d.opKey(name, attrs, q, k, v, pt, out) // perturbation"}},
	},
	{
		Name:   "sim-capture-miss-not-cached",
		Idea:   "a program-cache miss during capture fails before the program is cached and its binary buffer allocated (the card caches and allocates, then fails the write)",
		Expect: "TestCaptureMissCachesAndAllocatesThenFails fails: no miss counted, no binary buffer",
		Edits: []Edit{{File: "sim/program.go",
			Old: "\tp, err := build()\n",
			New: "\tif d.capturing { // perturbation\n\t\treturn nil, d.missDuringCapture(op)\n\t}\n\tp, err := build()\n"}},
	},
	{
		Name:   "sim-capture-miss-binaries-committed",
		Idea:   "a program whose binaries' write failed during a capture counts them as committed: its next launch loads nothing",
		Expect: "TestCaptureMissCachesAndAllocatesThenFails fails: the hit during capture runs, the buffer is never replaced",
		Edits: []Edit{{File: "sim/program.go",
			Old: "\t\td.uncommitted[string(key)] = len(d.binaries) - 1\n",
			New: "\t\t_ = d.uncommitted // perturbation\n"}},
	},
	{
		Name:   "sim-sdpa-kv-cb-single-buffered",
		Idea:   "SDPA decode's K and V CBs hold one k chunk, not two (sdpa_decode_program_factory.cpp:418-419 double-buffers them): every later CB moves",
		Expect: "TestSDPACBOrderAndSizes fails",
		Edits: []Edit{{File: "sim/sdpa.go",
			Old: "{indices: []int{1}, size: chunkT * dht * 2 * full},",
			New: "{indices: []int{1}, size: chunkT * dht * full}, // perturbation\n"}},
	},
	{
		Name:   "sim-share-cache-unordered",
		Idea:   "share_cache users run unordered (all reads, then the writes) although the semaphore chain serialises them",
		Expect: "TestShareCacheUsersSerialised fails: a lost row and a false kv-tile-race",
		Edits: []Edit{{File: "sim/update_cache.go",
			Old: "\t\t\tif p.share {\n",
			New: "\t\t\tif false && p.share { // perturbation\n"}},
	},
	{
		Name:   "sim-trace-region-whole-per-bank",
		Idea:   "every DRAM bank reserves the whole trace region, not its share (allocator.cpp:43-49)",
		Expect: "TestDeviceAllocation fails: the bank's top and the largest fit move",
		Edits: []Edit{{File: "sim/device.go",
			Old: "return alignUp((size+n-1)/n, p.dramAlign)",
			New: "return alignUp(size+0*n, p.dramAlign) // perturbation"}},
	},
	{
		Name:   "sim-trace-failed-bytes-forgotten",
		Idea:   "a failed end_trace_capture takes its bytes back (tt-metal keeps them in the trace buffers size: tt_metal/distributed/mesh_trace.cpp:59-60, 156-161)",
		Expect: "TestTraceRegionBudget fails: an empty capture that no longer fits is accepted",
		Edits: []Edit{{File: "sim/trace.go",
			Old: "\t\td.failedBytes += size\n",
			New: "\t\t// perturbation: the failed end's bytes forgotten\n"}},
	},
	{
		Name:   "sim-trace-release-safe-while-failed",
		Idea:   "a release marks allocations safe once no trace is live, though a failed end's bytes keep the trace buffers size above 0 (release_mesh_trace marks them safe only at 0: tt_metal/distributed/mesh_device.cpp:1274-1277)",
		Expect: "TestTraceFailedEndKeepsAllocationsUnsafe fails: no unsafe-allocation warning after the releases",
		Edits: []Edit{{File: "sim/trace.go",
			Old: "if d.traceBytes() == 0 { // mesh_device.cpp:1274-1277",
			New: "if len(d.traces) == 0 { // perturbation"}},
	},
	{
		Name:   "sim-allocation-before-wrapper",
		Idea:   "every input's allocation is checked before the op's wrapper checks (ttnn's wrapper runs first and reads only specs; launch checks allocation after: ttnn/api/ttnn/device_operation.hpp:450-451)",
		Expect: "TestWrapperChecksBeforeAllocation fails: a freed input gives Input Tensor is not allocated where ttnn gives the wrapper's text",
		Edits: []Edit{{File: "sim/program.go",
			Old: "\tif err := wrapperCheck(op); err != nil {\n",
			New: "\tfor _, t := range op.Inputs() { // perturbation\n\t\tif _, err := d.operandOf(op.Name(), t); err != nil {\n\t\t\treturn nil, err\n\t\t}\n\t}\n\tif err := wrapperCheck(op); err != nil {\n"}},
	},
	{
		Name:   "sim-cb-clash-id-of-last-built",
		Idea:   "the CB clash text names the program built last, not the one enqueued, when the enqueued one is a program-cache hit (ProgramImpl::id is the enqueued program's: tt_metal/impl/program/program.cpp:1544-1550)",
		Expect: "TestCBClash fails: the clash at a hit of program 0 names program 1",
		Edits: []Edit{{File: "sim/program.go",
			Old: "\t\td.curProg = d.progIDs[string(key)]\n",
			New: "\t\t// perturbation: the id left as the last build's\n"}},
	},
	{
		Name:   "sim-rmsnorm-cbs-unchecked",
		Idea:   "rms_norm's program keeps an empty CB region, so neither validate_circular_buffer_region check sees its CBs (tt_metal/impl/program/program.cpp:1444-1552; its CBs: layernorm_op_multi_core.cpp:667-798)",
		Expect: "TestRMSNormCBRegionChecked fails: rms_norm past L1, or under an L1 buffer, runs",
		Edits: []Edit{{File: "sim/compute.go",
			Old: ", cbs: rmsNormProgramCBs})",
			New: "}) // perturbation: no CBs laid out"}},
	},
	{
		Name:   "sim-compute-cbs-unchecked",
		Idea:   "the compute and fill ops' programs keep an empty CB region (binary_ng, embedding, argmax, plus_one, fill_cache and paged_fill_cache lay out CBs at the pin: tt_metal/impl/program/program.cpp:1444-1552 checks them)",
		Expect: "TestComputeCBRegions and TestComputeCBRegionChecked fail: an embedding past L1 runs",
		Edits: []Edit{{File: "sim/opio.go",
			Old: "\t\tif l.cbs != nil {",
			New: "\t\tif false && l.cbs != nil { // perturbation"},
			{File: "sim/fill.go",
				Old: "return d.pagedFillProgram(in, pt, bi != nil), nil",
				New: "return simpleProgram{end: d.opt.L1UnreservedBase}, nil // perturbation"},
			{File: "sim/serving_ops.go",
				Old: "return d.fillCacheProgram(in), nil",
				New: "return simpleProgram{end: d.opt.L1UnreservedBase}, nil // perturbation"}},
	},
	{
		Name:   "sim-rotary-cb-binds-unchecked",
		Idea:   "decode rotary binds no CB to a buffer, so a DRAM output or an L1-interleaved one smaller per bank than a shard runs (rotary_embedding_hf_sharded_program_factory.cpp:351-361; tt_metal/impl/buffers/circular_buffer_config.cpp:193-222 throws)",
		Expect: "TestRotaryDecodeBindsOutput fails: a decode rotary into DRAM runs",
		Edits: []Edit{{File: "sim/compute.go",
			Old: ", bind: rotaryBound})",
			New: "}) // perturbation: no binds"}},
	},
	{
		Name:   "sim-chunked-page-table-cb-first",
		Idea:   "chunked SDPA's page-table CB sits at the L1 base, as if it were the program's first CB (at the pin it is the seventh: sdpa_program_factory.cpp:680-699), so a read past the table's stick sees the wrong L1",
		Expect: "TestChunkedSDPAPageTableCB fails: the CB at base + 0",
		Edits: []Edit{{File: "sim/serving_ops.go",
			Old: "p.end, p.ptCB = end, cbs[at].addr",
			New: "p.end, p.ptCB = end, alignUp(d.opt.L1UnreservedBase, d.arch.dramAlign)+0*cbs[at].addr // perturbation"}},
	},
	{
		Name:   "sim-chunked-start-cbs-unwritten",
		Idea:   "the tensor form's reader does not copy the chunk start into its two CBs (reader_interleaved.cpp:241-256), so a read just past the page-table stick sees stale L1 instead of the start",
		Expect: "TestChunkedSDPATableHazards fails: entry 8 on Wormhole is not 0x100",
		Edits: []Edit{{File: "sim/serving_ops.go",
			Old: "\t\tfor _, a := range l.p.csCB {",
			New: "\t\tfor _, a := range l.p.csCB[:0] { // perturbation"}},
	},
	{
		Name:   "sim-llama-trans-mat-shared",
		Idea:   "rotary_embedding_llama's users all read the matrix from its buffer wherever it is sharded, not from the L1 of their own cores (rotary_embedding_llama_sharded_program_factory.cpp:114-126 binds the CB to the address on every core)",
		Expect: "TestRotaryLlamaInterleavedPairs fails: a one-core matrix rotates every user correctly",
		Edits: []Edit{{File: "sim/compute.go",
			Old: "\tcore := d.shardCore(in.spec.Memory.Shard, u*in.g.hp/in.spec.Memory.Shard.Shape[0])",
			New: "\tcore := d.shardCore(tm.spec.Memory.Shard, 0*u*in.g.hp/in.spec.Memory.Shard.Shape[0]) // perturbation"}},
	},
	{
		Name:   "sim-to-memory-config-same-allocates",
		Idea:   "to_memory_config to the input's own config allocates and copies (ttnn returns the input: to_memory_config_op.cpp:257-261)",
		Expect: "TestToMemoryConfigSameConfigIsTheInput fails",
		Edits: []Edit{{File: "sim/program.go",
			Old: "ok && d.sameCores(tm.Memory) == d.sameCores(tm.Input.Spec.Memory) {",
			New: "ok && false && d.sameCores(tm.Memory) == d.sameCores(tm.Input.Spec.Memory) { // perturbation"}},
	},
	{
		Name:   "sim-sdpa-stale-kv-not-left",
		Idea:   "under stale L1, paged SDPA decode leaves nothing in its K and V rings (the reader streams the cache tiles through c_1 and c_2)",
		Expect: "TestSDPAStaleLeavesKVRings fails",
		Edits: []Edit{{File: "sim/sdpa.go",
			Old: "stale := d.opt.L1 == L1Stale",
			New: "stale := false // perturbation"}},
	},
	{
		Name:   "sim-embedding-unpadded-tilized",
		Idea:   "ttnn.embedding into a TILE output with ids not a whole tile tilizes the rows (the card's row-major kernel writes row sticks at tile pages: embedding.cpp:46-58, embeddings_rm_program_factory.cpp)",
		Expect: "TestEmbeddingIntoTileUnpaddedWritesSticks fails; an engine embedding unpadded ids into TILE would pass on sim and read sticks as tiles on the card",
		Edits: []Edit{{File: "sim/compute.go",
			Old: "\tif out.spec.Layout == tt.Tile && !embedFused(in, w, out) {",
			New: "\tif false && out.spec.Layout == tt.Tile && !embedFused(in, w, out) { // perturbation"}},
	},
	{
		Name:   "sim-rmsnorm-cb-order",
		Idea:   "under stale L1, rms_norm's x*x buffer c_20 is created before c_19 (the pin creates c_19 first: layernorm_op_multi_core.cpp:731-753), so every later CB sits 4 KiB off",
		Expect: "TestRMSNormStaleLeavesCBs fails; the word past a one-column page-table row at the qwen3-0.6b geometry would come from the wrong bytes",
		Edits: []Edit{{File: "sim/cbleft.go",
			Old: "\t\t{indices: []int{19}, size: 2 * single},\n\t\t{indices: []int{20}, size: uint64(wtUp) * single},",
			New: "\t\t{indices: []int{20}, size: uint64(wtUp) * single}, // perturbation\n\t\t{indices: []int{19}, size: 2 * single},"}},
	},
	{
		Name:   "sim-grid-width-ignored",
		Idea:   "a shard grid's cores are taken from the whole-grid walk whatever its GridWidth (tt_metal/common/work_split.cpp:150-310 walks the leftmost GridWidth columns)",
		Expect: "TestShardGridWidth fails; on Blackhole user 8 of an 8-wide grid would live on core 8, not (0,1), and a per-core read (llama's matrix) would see the wrong core's L1",
		Edits: []Edit{{File: "sim/update_cache.go",
			Old: "\treturn j/w*gx + j%w\n",
			New: "\treturn j + 0*w*gx // perturbation\n"}},
	},
	{
		Name:   "sim-linear-config-unkeyed",
		Idea:   "linear's program config, chosen from the L1 free at the call, is left out of the program key (matmul_device_operation.cpp:2127-2150 hashes the attributes, the config among them)",
		Expect: "TestLinearConfigFollowsFreeL1 fails: a call after a low L1 buffer hits the program built for empty L1, whose CBs reach into the buffer; offcard check passes (its L1 use never changes the config)",
		Edits: []Edit{{File: "sim/compute.go",
			Old: "attrKey{b2u(o.TransposeB), cfg.key()}",
			New: "attrKey{b2u(o.TransposeB), 0 * cfg.key() /* perturbation */}"}},
	},
	{
		Name:   "sim-i2s-scratch-l1-aligned",
		Idea:   "to_memory_config's interleaved-to-sharded scratch pages are aligned to L1's 16 B instead of the DRAM alignment (interleaved_to_sharded_program_factory.cpp:175-191)",
		Expect: "TestComputeCBRegions fails (4·align(tile + 32, 32) on Wormhole, 64 on Blackhole)",
		Edits: []Edit{{File: "sim/cbregion.go",
			Old: "\t\ta := d.arch.dramAlign\n",
			New: "\t\ta := uint64(16) // perturbation\n"}},
	},
	{
		Name:   "sim-linear-multicore-b-untransposed",
		Idea:   "linear with TransposeB under the multi-core config reads b transposed in its own program, as the reuse configs do; ttnn transposes b first into a tensor of its own, freed after the call (operations/matmul/matmul.cpp:209-253)",
		Expect: "TestLinearMultiCoreTransposesB (one program, not two) and TestLinearMultiCoreTransposeInCapture (a replay no longer writes where the transposed weight was) fail",
		Edits: []Edit{{File: "sim/compute.go",
			Old: "if cfg.kind == mmMultiCore && o.TransposeB && o.Weight.Spec.Layout == tt.Tile && !o.Weight.Spec.Memory.Sharded() {",
			New: "if false && cfg.kind == mmMultiCore && o.TransposeB { // perturbation"}},
	},
	{
		Name:   "sim-hidden-tensors-untracked",
		Idea:   "a tensor an op allocates and frees itself (linear's transposed b) is left out of the op's footprint in a capture, so strict mode does not see the replay write where it was",
		Expect: "TestLinearMultiCoreTransposeInCapture fails: the replay overwrites the tensor allocated there and strict mode names nothing",
		Edits: []Edit{{File: "sim/trace.go",
			Old: "\tif len(d.hiddenRefs) > 0 {",
			New: "\tif false && len(d.hiddenRefs) > 0 { // perturbation"}},
	},
}

// Perturbed is m with the perturbation p's edits applied after its own.
func Perturbed(m, p Mutant) Mutant {
	m.Edits = append(append([]Edit(nil), m.Edits...), p.Edits...)
	m.Name = m.Name + "+" + p.Name
	return m
}

// PerturbationByName returns the perturbation called name.
func PerturbationByName(name string) (Mutant, bool) {
	for _, p := range Perturbations {
		if p.Name == name {
			return p, true
		}
	}
	return Mutant{}, false
}

// caughtBy names, per perturbation, the sim tests that catch it (a go test
// -run pattern): TestSimPerturbationsCaught runs only those, seconds of
// sim's tests per perturbation (one schema build serves those that fold).
var caughtBy = map[string]string{
	"sim-sdpa-gqa-sharded-output":            "^TestSDPAOutputAndQMemoryRules$",
	"sim-sdpa-width-sharded-output":          "^TestSDPAOutputAndQMemoryRules$",
	"sim-sdpa-l1-interleaved-output-refused": "^TestSDPAOutputAndQMemoryRules$",
	"sim-sdpa-width-sharded-q":               "^TestSDPAOutputAndQMemoryRules$",
	"sim-update-cache-width-sharded-input":   "^TestUpdateCacheRefusesWidthSharded$",
	"sim-sdpa-cur-pos-unkeyed":               "^TestSDPAMaskedFetchAndCurPosKey$|^TestSDPACurPosSpecMissesInCapture$",
	"sim-capture-miss-not-cached":            "^TestCaptureMissCachesAndAllocatesThenFails$",
	"sim-capture-miss-binaries-committed":    "^TestCaptureMissCachesAndAllocatesThenFails$",
	"sim-sdpa-kv-cb-single-buffered":         "^TestSDPACBOrderAndSizes$",
	"sim-share-cache-unordered":              "^TestShareCacheUsersSerialised$",
	"sim-trace-region-whole-per-bank":        "^TestDeviceAllocation$",
	"sim-allocation-before-wrapper":          "^TestWrapperChecksBeforeAllocation$",
	"sim-cb-clash-id-of-last-built":          "^TestCBClash$",
	"sim-rmsnorm-cbs-unchecked":              "^TestRMSNormCBRegionChecked$",
	"sim-compute-cbs-unchecked":              "^TestComputeCBRegions$|^TestComputeCBRegionChecked$",
	"sim-rotary-cb-binds-unchecked":          "^TestRotaryDecodeBindsOutput$",
	"sim-chunked-page-table-cb-first":        "^TestChunkedSDPAPageTableCB$",
	"sim-chunked-start-cbs-unwritten":        "^TestChunkedSDPATableHazards$",
	"sim-llama-trans-mat-shared":             "^TestRotaryLlamaInterleavedPairs$",
	"sim-to-memory-config-same-allocates":    "^TestToMemoryConfigSameConfigIsTheInput$",
	"sim-trace-failed-bytes-forgotten":       "^TestTraceRegionBudget$",
	"sim-trace-release-safe-while-failed":    "^TestTraceFailedEndKeepsAllocationsUnsafe$",
	"sim-sdpa-stale-kv-not-left":             "^TestSDPAStaleLeavesKVRings$",
	"sim-embedding-unpadded-tilized":         "^TestEmbeddingIntoTileUnpaddedWritesSticks$",
	"sim-rmsnorm-cb-order":                   "^TestRMSNormStaleLeavesCBs$",
	"sim-grid-width-ignored":                 "^TestShardGridWidth$",
	"sim-i2s-scratch-l1-aligned":             "^TestComputeCBRegions$",
	"sim-linear-config-unkeyed":              "^TestLinearConfigFollowsFreeL1$",
	"sim-linear-multicore-b-untransposed":    "^TestLinearMultiCoreTransposesB$|^TestLinearMultiCoreTransposeInCapture$",
	"sim-hidden-tensors-untracked":           "^TestLinearMultiCoreTransposeInCapture$",
}

// CaughtBy is the go test -run pattern of the sim tests that catch the
// perturbation name ("" when it names none: all of sim's tests).
func CaughtBy(name string) string { return caughtBy[name] }
