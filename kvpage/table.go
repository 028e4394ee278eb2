package kvpage

import "fmt"

// Table is one sequence's block table: blocks[i] backs positions
// i*bs .. i*bs+bs-1. Invariant: len(blocks) == BlocksFor(Len(), bs).
type Table struct {
	pool   *Pool
	blocks []int32
	length int
}

// NewTable returns an empty table drawing its blocks from p.
func (p *Pool) NewTable() *Table { return &Table{pool: p} }

// Pool is the pool the table draws from.
func (t *Table) Pool() *Pool { return t.pool }

// Len is the sequence length the table covers (the largest length passed to
// Grow since the last Release).
func (t *Table) Len() int { return t.length }

// NumBlocks is the number of blocks held: BlocksFor(Len(), BlockSize).
func (t *Table) NumBlocks() int { return len(t.blocks) }

// Cap is the number of positions the held blocks can store (a multiple of the
// block size, at least Len()).
func (t *Table) Cap() int { return len(t.blocks) * t.pool.blockSize }

// Blocks returns a copy of the block ids, in position order.
func (t *Table) Blocks() []int32 { return append([]int32(nil), t.blocks...) }

// Grow makes the table cover positions 0..length-1, allocating the lowest
// free blocks, one per block boundary crossed. It is all or nothing: when
// the pool has too few free blocks it returns an ErrExhausted error and
// changes nothing. A length at or below Len() is a no-op; Grow never shrinks.
func (t *Table) Grow(length int) error {
	if length < 0 {
		return fmt.Errorf("kvpage: Grow(%d): negative length", length)
	}
	if length <= t.length {
		return nil
	}
	need := BlocksFor(length, t.pool.blockSize) - len(t.blocks)
	if free := t.pool.NumFree(); need > free {
		return &ExhaustedError{NumBlocks: t.pool.NumBlocks(), Free: free, Need: need}
	}
	for range need {
		t.blocks = append(t.blocks, t.pool.take(stateTable))
	}
	t.length = length
	return nil
}

// Release drops the table's reference to every block it holds (a block no
// other table shares returns to the pool) and resets the table to length 0.
// The table can be grown again. Releasing an empty table is a no-op.
func (t *Table) Release() {
	for _, id := range t.blocks {
		t.pool.unref(id)
	}
	t.blocks = t.blocks[:0]
	t.length = 0
}

// Slot returns the block and row holding position pos, or an error when pos
// is outside 0..Len()-1.
func (t *Table) Slot(pos int) (block int32, row int, err error) {
	if pos < 0 || pos >= t.length {
		return 0, 0, fmt.Errorf("kvpage: position %d outside the sequence [0, %d)", pos, t.length)
	}
	block, row = Slot(t.blocks, pos, t.pool.blockSize)
	return block, row, nil
}

// Row exports the table as a page-table row of the given width, padded with
// pad. See PaddedRow.
func (t *Table) Row(width int, pad int32) ([]int32, error) {
	return PaddedRow(t.blocks, width, pad)
}

// PadRow writes the table into dst, padded with pad. See PadRow.
func (t *Table) PadRow(dst []int32, pad int32) error {
	return PadRow(dst, t.blocks, pad)
}
