package kvpage

import "fmt"

// Shared blocks, as vLLM's block manager has them: a block may be held by
// several tables at once (a fork's children, a prefix-cache hit), counted by
// a reference count; a table that is about to write into a block it shares
// first takes a private copy (copy-on-write), and the scheduler has the
// engine carry out the copy (vLLM's copy_blocks) before the write.

// BlockCopy is one block copy the engine must carry out before the writes it
// precedes: every layer's K and V of block Src copied to block Dst (all
// rows), as vLLM's copy_blocks does.
type BlockCopy struct{ Src, Dst int32 }

func (c BlockCopy) String() string { return fmt.Sprintf("%d->%d", c.Src, c.Dst) }

// RefCount is the number of tables holding block id (0 for a free or loose
// block). It panics on an id out of range.
func (p *Pool) RefCount(id int32) int {
	if id < 0 || int(id) >= len(p.refs) {
		panic(fmt.Sprintf("kvpage: RefCount(%d): block id out of range [0, %d)", id, len(p.refs)))
	}
	return int(p.refs[id])
}

// ref adds a table's reference to a table block.
func (p *Pool) ref(id int32) { p.refs[id]++ }

// unref drops a table's reference; the block returns to the pool at zero.
func (p *Pool) unref(id int32) {
	p.refs[id]--
	if p.refs[id] == 0 {
		p.put(id)
	}
}

// Shared reports whether the block holding position pos is held by another
// table too (a write there needs a copy first). pos must lie in the held
// blocks (pos < Cap()); otherwise Shared panics, like Slot.
func (t *Table) Shared(pos int) bool {
	b, _ := Slot(t.blocks, pos, t.pool.blockSize)
	return t.pool.refs[b] > 1
}

// Fork returns a new table that shares every block of t (each block's
// reference count goes up by one) and has t's length: a child of a parallel
// sample or a beam. Neither table may write into a shared block without
// PrepareWrite first.
func (t *Table) Fork() *Table {
	c := &Table{pool: t.pool, blocks: t.Blocks(), length: t.length}
	for _, id := range c.blocks {
		t.pool.ref(id)
	}
	return c
}

// SharePrefix makes the empty table t start with src's first length
// positions, sharing src's blocks that hold them (a prefix-cache hit: the
// first length positions need no prefill). length is usually a multiple of
// the block size (vLLM and tt_transformers share only full blocks); a
// partial last block is shared as well and copied on the first write into
// it. It fails, changing nothing, when t is not empty, src belongs to
// another pool, or length is outside [0, src.Len()].
func (t *Table) SharePrefix(src *Table, length int) error {
	if len(t.blocks) != 0 || t.length != 0 {
		return fmt.Errorf("kvpage: SharePrefix into a table of length %d; release it first", t.length)
	}
	if src.pool != t.pool {
		return fmt.Errorf("kvpage: SharePrefix from a table of another pool")
	}
	if length < 0 || length > src.length {
		return fmt.Errorf("kvpage: SharePrefix of %d positions from a table of length %d", length, src.length)
	}
	n := BlocksFor(length, t.pool.blockSize)
	t.blocks = append(t.blocks, src.blocks[:n]...)
	for _, id := range t.blocks {
		t.pool.ref(id)
	}
	t.length = length
	return nil
}

// Truncate rolls the table back to length positions (the accepted length
// after a speculative verify, or any shorter sequence): the blocks past
// BlocksFor(length) are released (a block no other table shares returns to
// the pool), and the rows at and past length in the kept last block are
// stale until written again. It fails, changing nothing, when length is
// negative or above Len(); Truncate(Len()) is a no-op.
func (t *Table) Truncate(length int) error {
	if length < 0 || length > t.length {
		return fmt.Errorf("kvpage: Truncate(%d) of a table of length %d", length, t.length)
	}
	keep := BlocksFor(length, t.pool.blockSize)
	for _, id := range t.blocks[keep:] {
		t.pool.unref(id)
	}
	t.blocks = t.blocks[:keep]
	t.length = length
	return nil
}

// PrepareWrite readies the table for the KV writes of positions
// from..to-1: it grows the table to cover to (as Grow), and replaces every
// block those positions land in that another table shares by a fresh block
// of its own (copy-on-write; the shared block's count goes down by one). It
// returns the copies, in position order, that the engine must carry out
// before the writes (vLLM's copy_blocks); the fresh blocks are taken lowest
// id first, the copies' before the growth's. It is all or nothing: when the
// pool has too few free blocks for the copies and the growth together it
// returns an ErrExhausted error and changes nothing. It fails on from < 0
// or to < from.
func (t *Table) PrepareWrite(from, to int) ([]BlockCopy, error) {
	if from < 0 || to < from {
		return nil, fmt.Errorf("kvpage: PrepareWrite(%d, %d): want 0 <= from <= to", from, to)
	}
	if from == to {
		return nil, nil
	}
	bs := t.pool.blockSize
	first, end := from/bs, min(BlocksFor(to, bs), len(t.blocks))
	var shared []int
	for i := first; i < end; i++ {
		if t.pool.refs[t.blocks[i]] > 1 {
			shared = append(shared, i)
		}
	}
	grow := max(BlocksFor(to, bs)-len(t.blocks), 0)
	if need, free := len(shared)+grow, t.pool.NumFree(); need > free {
		return nil, &ExhaustedError{NumBlocks: t.pool.NumBlocks(), Free: free, Need: need}
	}
	var copies []BlockCopy
	for _, i := range shared {
		src := t.blocks[i]
		dst := t.pool.take(stateTable)
		t.pool.unref(src)
		t.blocks[i] = dst
		copies = append(copies, BlockCopy{Src: src, Dst: dst})
	}
	if err := t.Grow(to); err != nil {
		panic("kvpage: internal error: " + err.Error()) // checked above
	}
	return copies, nil
}
