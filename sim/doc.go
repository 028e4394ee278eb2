// Package sim is offcard's simulated tt-metal device: a CPU model of the
// device semantics that break paged decode. Section numbers refer to the
// project's tt-metal semantics notes.
//
// Memory (§6): DRAM is per-channel sparse byte arrays (Wormhole: 12 banks, two
// per channel at offsets 0 / bank size, 32 B alignment; Blackhole: 8 banks,
// 64 B), L1 one sparse array per worker core. Fresh memory holds the Poison
// pattern (a bf16/fp32 NaN, a huge int) and is never zeroed; strict mode keeps
// a per-byte written bitmap. Interleaved pages go to bank page % nbanks at
// base + (page / nbanks) * aligned page size; height-sharded shard i lives on
// core Shard.FirstCore+i. A ROW_MAJOR page is one row; a TILE page is one
// 32x32 tile in 16x16 face order (TileElem). Every byte a tensor holds lives only there: host
// writes tilize into the pages, host reads untilize from them.
//
// Allocator (§6.4): one address per buffer across all banks, DRAM bottom-up
// and L1 top-down, address-ordered first fit (BEST selectable for DRAM),
// coalescing on free, immediate reuse, the trace region at the top of each
// DRAM bank, tt-metal's out-of-memory text.
//
// Programs (§1.1-1.2, §6.5): ops are looked up in a program cache keyed by op
// attributes and tensor specs (never addresses or contents); validation runs
// only on a miss; a hit only refreshes runtime arguments. Each program places
// its circular buffers from the same L1 base in creation order, so bytes past
// a program's last CB hold whatever earlier programs left there.
//
// paged_update_cache (§1.3-1.4) is modelled kernel-faithfully: the index
// stick and the page-table stick (padded_shape[-1]*4 bytes) are copied into
// their CBs, page_table[idx/block_size] is an unchecked 32-bit L1 load, all
// index math wraps mod 2^32, only an index of exactly 0xFFFFFFFF skips, and
// cores run in order 0..B-1 as the kernels' semaphore chain orders them.
// paged_fused_update_cache (§1.5) is the same kernel run for two (cache,
// input) pairs in one program, each on its input's shard grid (the grids
// must not overlap; tt.ShardSpec.FirstCore places the second), with the
// same CB layout, index tensor, page table and missing bound check.
// Accesses outside device memory return a *Fault.
//
// Trace (§5): capture records launches with the addresses of the moment,
// executing nothing; host I/O and program-cache misses during capture fail
// with tt-metal's texts; Execute replays verbatim with no validation; the
// unsafe-allocation warning is kept in Warnings.
//
// Modes: faithful (default) produces the card's wrong answers; Strict adds
// Findings (one readable line each) at hazards: page-table read past the row
// / CB, page-table entry outside the cache, a -1 entry used as a block id,
// reads of never-written memory, host I/O or program-cache miss during
// capture, a replay touching a freed address, an allocation overlapping a
// live trace's freed operands.
//
// Observability: Options.LogKV records every KV row write of the paged
// update ops, eager or replayed (KVLog); Options.LogOps keeps an OpEvent per
// op (name, regime eager/capture/replay, key arguments, the tensors and
// addresses touched; OpLog), and Options.OnOp receives the same events as
// they happen. Peek reads a tensor's current bytes for tests without being a
// host transfer (it works during capture and reports nothing).
//
// Performance: eager launches run on the live buffers without allocating
// (program-cache keys are built in a reused buffer from per-tensor spec
// strings), and linear's dot products call ref.DotWidened (ref's canonical
// order over a once-widened input row), so results stay bit-equal to ref. BenchmarkTinyDecodeStep / BenchmarkTinyRefStep compare a
// tiny-model step with ref's; BenchmarkPagedKVDecode measures the paged ops.
//
// Device implements tt.Device: every op of package tt runs.
package sim
