// Package conform runs the same op sequences on offcard's simulator and on
// a device library (package tthw: the C loopback, or the ttnn shim on a
// card) and compares them op by op.
//
// Contract:
//   - Each Case runs on a fresh sim.Device and a fresh tthw.Device of the
//     library's arch and returns nil or one readable line saying what
//     differs.
//   - Data movement is exact: host round trips, the allocator's addresses
//     (first fit, alignment, immediate reuse, L1 top-down, one address
//     across banks), plus_one with its -1 skip, embedding, the paged ops
//     (paged_update_cache with -1 users and block-boundary rows,
//     paged_fused_update_cache, paged_fill_cache with -1 blocks), and what a
//     trace replay writes at its baked addresses; refusals must carry the
//     same tt-metal text, whole (format arguments filled as ttnn fills them).
//   - Math is within bounds stated before measuring (Bounds), per op, in
//     bf16 steps of every element (taken at the larger of the two values
//     and Floor times the output's RMS, so cancellation near zero is not
//     counted in the zero's own tiny steps), plus a Pearson correlation of
//     the whole output (gonum/stat) of at least MinCorrelation.
//   - Device facts must match the arch (DRAM banks, alignment) and the
//     library must report the pinned tt-metal commit.
//
// Import rule: conform imports tt, sim, tthw and bf16 (and gonum/stat).
package conform
