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
//   - Each block has exactly one owner at a time: free, a loose allocation
//     (Alloc/Free), or one Table. Free refuses ids that are out of range,
//     already free (double free), or owned by a Table (release the table
//     instead). A refused call changes nothing.
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
// Nothing in the package is safe for concurrent use without external locking.
//
// The package imports nothing internal.
package kvpage
