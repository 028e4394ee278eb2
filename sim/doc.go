// Package sim is offcard's simulated tt-metal device: a CPU model of the
// device semantics that break paged decode, as tt-metal has them at
// tt.TTMetalCommit (622c6fb9). Code comments cite the tt-metal source path
// of what they model; section numbers refer to the project's tt-metal
// semantics notes.
//
// Memory (§6): DRAM is per-channel sparse byte arrays (Wormhole: 12 banks, two
// per channel at offsets 0 / bank size, 32 B alignment; Blackhole: 8 banks,
// 64 B), L1 one sparse array per worker core (Wormhole 1,499,136 B,
// Blackhole 1,572,864 B: worker_l1_size of tt_metal/soc_descriptors/
// *_arch.yaml). Fresh DRAM holds the Poison pattern (a bf16/fp32 NaN, a
// huge int). What fresh L1 holds is Options.L1: poison (the default),
// zero (tt-metal's L1 clear at device open) or stale (zeros under what
// earlier programs' circular buffers left); under zero and stale the host
// write path also sends each DRAM page slot's alignment padding as zeros.
// Strict mode keeps a per-byte written bitmap. Interleaved pages go to bank
// page % nbanks at base + (page / nbanks) * aligned page size;
// height-sharded shard i lives on core Shard.FirstCore+i of the grid's
// numbering (row-major over the leftmost Shard.GridWidth columns, default
// the whole grid's width), width-sharded shard i (a column range, TILE
// only) likewise. A ROW_MAJOR page is one row;
// a TILE page is one 32x32 tile in 16x16 face order (TileElem). Every byte a
// tensor holds lives only there: host writes tilize into the pages, host
// reads untilize from them.
//
// Allocator (§6.4): one address per buffer across all banks, DRAM bottom-up
// and L1 top-down, address-ordered first fit (BEST selectable for DRAM),
// coalescing on free, immediate reuse, the trace region at the top of each
// DRAM bank (each bank its share of the total: tt_metal/impl/allocator/
// allocator.cpp:43-49), tt-metal's out-of-memory text. Besides the engine's own
// allocations: the outputs of ops whose ttnn entry point allocates them
// (tt.Allocating: rms_norm, nlp_create_qkv_heads_decode, both RoPE ops,
// to_memory_config (to another config: to the tensor's own it returns the
// tensor, core/to_memory_config/to_memory_config_op.cpp:257-261), paged SDPA decode, and the prefill ops
// nlp_create_qkv_heads, scaled_dot_product_attention and
// nlp_concat_heads), at dispatch, inside a capture too;
// and a kernel-binary buffer (KernelBinaryBytesPerBank per bank, top-down)
// at every program-cache miss (tt_metal/distributed/mesh_workload.cpp
// load_binaries).
//
// Programs (§1.1-1.2, §6.5): ops are validated on every call, hits
// included (ttnn/api/ttnn/device_operation.hpp: a hit runs
// validate_on_program_cache_hit, which for these ops is the miss
// validation), with ttnn's texts verbatim (every check is a row of the
// table tt/checks.tsv, with its tt-metal path:line; refusals of offcard's
// own contract start with tt.ContractPrefix "offcard: "); then looked up in a program cache keyed by op
// attributes and tensor specs (never addresses or contents; SDPA decode keys
// the cur_pos tensor's spec too); a hit only refreshes runtime arguments. Each program
// places its circular buffers from the same L1 base in creation order, so
// bytes past a program's last CB hold whatever earlier programs left there.
//
// paged_update_cache (§1.3-1.4) is modelled kernel-faithfully: the index
// stick and the page-table stick (padded_shape[-1]*4 bytes) are copied into
// their CBs, page_table[idx/block_size] is an unchecked 32-bit L1 load, all
// index math wraps mod 2^32, only an index of exactly 0xFFFFFFFF skips. In
// paged mode the users' cores run unordered (no semaphore chain without
// share_cache; with share_cache the users run in core order, each
// writing back before the next reads): every core reads its cache tiles before any writes back, in
// an order drawn from Options.Seed, so two users whose rows share a tile lose
// one row (strict: kv-tile-race). paged_fused_update_cache (§1.5) is the
// same kernel run for two (cache, input) pairs in one program, each on its
// input's shard grid (the grids must not overlap; tt.ShardSpec.FirstCore
// places the second), with the page table's aligned page read into its CB
// and an index CB of the index tensor's aligned page, as the fused
// factories do. Paged SDPA decode places its CBs in the pin's order (c_0
// Q, c_1/c_2 K/V, c_3, c_5..c_7, c_8 and c_15 cur_pos, c_9 page table, c_10
// tilized Q, ...) and reads the aligned page-table page into c_9 (past it
// lies c_10, unwritten for a TILE Q),
// caps the dynamic K chunk at 8 tiles (4 with fp32 accumulation), refuses a
// user k_chunk_size that is not a power of two, and fetches the masked
// tiles of the last chunk too (an address outside the bank faults).
// Accesses outside device memory return a *Fault.
//
// Prefill (prefill.go): nlp_create_qkv_heads and nlp_concat_heads are tile
// copies as their readers are (any dtype they accept, padding rows
// included); rotary_embedding_hf in prefill mode rotates sequence row s
// with cos/sin row s, with decode mode's arithmetic (ref.Rope), so the two
// modes agree bit for bit at a position; scaled_dot_product_attention
// (non-paged, causal or not, GQA) gives the reference numerics, not the
// card's: query row i is ref.Attend over key rows 0..i (causal), the
// function paged SDPA decode uses, so a causal prefill row is bit-identical
// to the decode of that position. The card's prefill SDPA is an online
// softmax over q/k chunks with an approximate exp and bf16 intermediates,
// so on a card prefill and token-by-token decode differ in the last bits.
// Not modelled there: sharded inputs, head dims
// that are not a multiple of 32 for the TM ops, non-BF16 RoPE inputs.
//
// Trace (§5): capture records launches with the addresses of the moment,
// executing nothing; host I/O during capture fails with tt-metal's texts;
// a program-cache miss during capture caches the program and allocates its
// kernel-binary buffer, then fails writing the binaries ("Writes are not
// supported during trace capture. trace id: N"), and the program's next
// launch allocates a new binary buffer; Execute replays verbatim with no validation; the
// unsafe-allocation warning is kept in Warnings.
//
// Modes: faithful (default) produces the card's wrong answers; Strict adds
// Findings (one readable line each) at hazards: page-table read past the row
// / CB, page-table entry outside the cache, a -1 entry used as a block id,
// reads of never-written memory, two users racing on one cache tile, host
// I/O or program-cache miss during capture, a replay touching a freed
// address, an allocation overlapping a live trace's freed operands.
//
// Not modelled (yet): BFLOAT8_B/BFLOAT4_B caches; sharded (UINT16) page
// tables; the row-major fused factory; the real per-program CB layouts of
// most compute ops (under stale L1 they leave only their input pages, from
// the CB base of cores 0..15, 32 KiB a core; rms_norm leaves c_0, c_20,
// c_22 and c_16 where layernorm_op_multi_core.cpp places them, on the
// cores split_work_to_cores gives its tile rows (cbleft.go), so with one
// user at the qwen3-0.6b geometry the word past paged_update_cache's
// page-table CB is the K head norm's x*x; paged SDPA decode and the cache
// ops leave their reader-filled CBs where the pin's factories place them;
// matmul's CBs, which the word past the row reaches with more users, are
// not modelled); linear's CB/L1 clash check beyond the configs
// matmul_cfg.go models (every other op's static CB region is checked:
// cbregion.go, cbleft.go, sdpa_cbs.go, the cache ops); SDPA's
// multi-core split per user (one core per user here) and NaN propagation
// through masked tiles; the exact kernel-binary sizes and trace-buffer
// sizes (1 KiB per launch is assumed); the trace_region_size == 0 dynamic
// trace buffer; the checks tt/checks.tsv lists as left out (with the
// reason for each); the full shape rules of the RoPE ops' trans_mat and of
// nlp_create_qkv_heads_decode's core-grid options.
//
// Observability: Options.LogKV records every KV row write of the paged
// update ops, eager or replayed (KVLog); Options.LogOps keeps an OpEvent per
// op (name, regime eager/capture/replay, key arguments, the tensors and
// addresses touched; OpLog), and Options.OnOp receives the same events as
// they happen (Options.OnOpBrief: without Args and Touched, for an observer
// that needs neither). Peek reads a tensor's current bytes for tests
// without being a host transfer (it works during capture and reports
// nothing; PeekTo reads into the caller's buffer); PeekInto does so
// incrementally: every memory keeps a write stamp per 256-byte stripe (and
// per 64 KiB chunk the newest, so a chunk not written since is passed over
// in one look; a DRAM tensor's changed pages are found from its banks'
// stamps, not page by page), so a later PeekInto re-reads only the pages
// (of a TILE tensor: the tile face rows) in stripes written since the
// previous one, whatever op or transfer wrote them, and tells the face
// rows whose bytes changed (a first PeekInto counts from +0). The cache
// kernels' writes of whole tiles (paged_update_cache, paged_fill_cache)
// stamp only the stripes whose bytes they changed (the memory ends the
// same, and strict marks the whole tile written), so a decode step's peek
// re-reads two stripes and tells one row, not a tile.
//
// Performance: eager launches run on the live buffers from device-owned
// launch values (program-cache keys are built in a reused buffer from
// short per-device spec names; an op passed as a pointer is used in place,
// not copied into a new interface value, and nothing of it is kept; a
// capture carves its recorded launches from slabs); op outputs and host
// uploads are tilized straight into the memory's chunks (an all-zero
// upload clears its pages); and linear's dot products run through
// ref.MatRows (ref's canonical order over once-widened input rows, each
// weight row read once for all rows; a bias goes through ref.DotWidened),
// so results stay bit-equal to ref. Linear keeps each DRAM weight it decoded while no byte
// of the weight's bank range is written (every DRAM write is watched), and
// remembers output rows from device to device (a memo a device takes at
// its first linear and gives back at Recycle, so a campaign's workers each
// keep one warm and none takes a lock per row), keyed exactly by the
// weight's contents, the bias and the input row's bits, so a row seen
// before (the same prompt in another schedule, a schedule run again while
// shrinking) is not computed again. A caller that computed rows with
// ref.MatRows itself can hand them to the memo (RememberLinear, with the
// weight's LinearWeightID): proptest hands over ref's rows of each
// position before the engine under test runs it. Before the memo, a kept weight answers
// a row whose input is the one it saw at that row index last time (a
// decode step feeds most rows as the step before did). All of these give
// the bytes the banks hold, as before (wcache.go, linmemo.go). Device.Recycle hands a finished device's
// 64 KiB memory chunks to later devices; the recycled device panics on any
// use. The chunks wholly inside a host upload of 1 MiB or more to DRAM (a
// model's weights, a cache's zeros) are interned by their bytes
// process-wide: devices holding the same weights (a campaign's workers)
// share them read only, and the first write to a shared chunk copies it
// (intern.go), so no device reads another's writes.
// BenchmarkTinyDecodeStep / BenchmarkTinyRefStep compare a tiny-model step
// with ref's; BenchmarkPagedKVDecode measures the paged ops.
//
// Device implements tt.Device: every op of package tt runs.
package sim
