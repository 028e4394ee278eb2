// Package kvpage is the host-side truth of a paged KV cache: a fixed pool of
// KV blocks, per-sequence block tables, the slot arithmetic that maps a token
// position to (block, row), and the policy that decides how wide the device
// page table is.
//
// Contract:
//   - A Pool owns NumBlocks blocks of BlockSize positions, with ids
//     0..NumBlocks-1. Every id is allocatable (the pool reserves no null
//     block; a caller that wants one allocates it first and keeps it).
//   - Alloc hands out the lowest free id. The order is deterministic, so a
//     freed block is handed out again as soon as it is the lowest free one;
//     tests rely on this to replay histories exactly.
//   - Each block is in one state at a time: free, a loose allocation
//     (Alloc/Free), or held by one or more Tables. Free refuses ids that are
//     out of range, already free (double free), or held by a Table (release
//     the table instead). A refused call changes nothing.
//   - When no block is free, allocation fails with an error for which
//     errors.Is(err, ErrExhausted) holds; its message reads
//     "kvpage: all N blocks in use".
//   - A Table records a sequence length L and holds exactly BlocksFor(L, bs)
//     = ceil(L/bs) blocks; table[i] backs positions i*bs .. i*bs+bs-1.
//     Grow(L) allocates one block per block boundary crossed, all or
//     nothing: if the pool cannot supply every block it needs, Grow returns
//     ErrExhausted and neither the table nor the pool changes. Grow never
//     shrinks. Release returns every block to the pool and leaves an empty,
//     reusable table.
//   - Table.Blocks returns a copy; callers may keep or modify it freely, and
//     must call Blocks again to see later growth (a kept slice is a
//     snapshot, never a live view).
//   - Slot arithmetic: position pos lives in block table[pos/bs] at row
//     pos%bs. BlockIndex, Row, BlocksFor and Slot panic on a negative
//     position or length or a non-positive block size, and Slot panics when
//     the table is too narrow for the position: a host that indexes past its
//     table has a bug, and it must be loud (the kernel's page-table walk has
//     no bound check).
//   - PaddedRow / PadRow export a table as a page-table row of a given width:
//     the table's blocks, then the pad value in every remaining column, so a
//     reused row never keeps a stale tail. A table wider than the row is an
//     error, never a silent truncation.
//   - A WidthPolicy chooses the page-table width W of a batch: Fixed(n)
//     always gives n and fails when a sequence needs more than n blocks;
//     Dynamic gives the longest sequence's block count, at least 1. The zero
//     WidthPolicy is Dynamic. ParseWidthPolicy accepts exactly what String
//     prints: "dynamic" or "fixed:N" with N a positive decimal integer.
//
// Shared blocks (share.go), as vLLM's block manager has them:
//   - A table block carries a reference count, RefCount: the number of
//     tables holding it. A block is free exactly when no table (and no loose
//     allocation) holds it; Release and Truncate drop one reference per
//     block and a block returns to the pool when its count reaches zero.
//   - Fork returns a child that shares every block of its parent (each count
//     +1) at the parent's length (parallel sampling, beams). SharePrefix
//     starts an empty table with another table's first L positions, sharing
//     the blocks that hold them (a prefix-cache hit; L is usually k*bs, a
//     partial last block is shared too). A prefix cache keeps its blocks
//     alive by holding them in a table of its own.
//   - No table writes into a block another table holds. Before the KV
//     writes of positions from..to-1 the scheduler calls PrepareWrite(from,
//     to): it grows the table to cover them and replaces each shared block
//     they land in by a fresh one (copy-on-write), returning the BlockCopy
//     list, in position order, that the engine must carry out before the
//     writes (every layer's K and V of Src into Dst: vLLM's copy_blocks; in
//     package qwen3, BlockCopier). All or nothing, like Grow.
//   - Truncate(L) rolls a table back to L positions (speculative decoding's
//     rejection): the blocks past BlocksFor(L) are released; rows at and
//     past L of the kept last block are stale and written again before any
//     read (the decoder reads only positions below the one it computes).
//
// Nothing in the package is safe for concurrent use without external locking.
//
// The package imports nothing internal.
package kvpage
