package kvpage

import "fmt"

func checkBS(bs int) {
	if bs < 1 {
		panic(fmt.Sprintf("kvpage: block size %d must be positive", bs))
	}
}

// BlockIndex is the index into a block table of the block holding pos:
// pos / bs. It panics if pos < 0 or bs < 1.
func BlockIndex(pos, bs int) int {
	checkBS(bs)
	if pos < 0 {
		panic(fmt.Sprintf("kvpage: negative position %d", pos))
	}
	return pos / bs
}

// Row is the row within its block of position pos: pos % bs. It panics if
// pos < 0 or bs < 1.
func Row(pos, bs int) int {
	checkBS(bs)
	if pos < 0 {
		panic(fmt.Sprintf("kvpage: negative position %d", pos))
	}
	return pos % bs
}

// BlocksFor is the number of blocks a sequence of length positions needs:
// ceil(length / bs), without overflow. It panics if length < 0 or bs < 1.
func BlocksFor(length, bs int) int {
	checkBS(bs)
	if length < 0 {
		panic(fmt.Sprintf("kvpage: negative length %d", length))
	}
	n := length / bs
	if length%bs != 0 {
		n++
	}
	return n
}

// Slot returns the block (table[pos/bs]) and row (pos%bs) of position pos.
// It panics if pos < 0, bs < 1, or the table is too narrow for pos.
func Slot(table []int32, pos, bs int) (block int32, row int) {
	i := BlockIndex(pos, bs)
	if i >= len(table) {
		panic(fmt.Sprintf("kvpage: position %d needs block index %d but the table has %d blocks (block size %d)",
			pos, i, len(table), bs))
	}
	return table[i], pos % bs
}

// PaddedRow returns a new row of width columns: the table's block ids, then
// pad in every remaining column. It fails when the table has more blocks
// than width (or width is negative).
func PaddedRow(table []int32, width int, pad int32) ([]int32, error) {
	if width < 0 {
		return nil, fmt.Errorf("kvpage: negative row width %d", width)
	}
	if len(table) > width {
		return nil, fmt.Errorf("kvpage: table of %d blocks does not fit a row of width %d", len(table), width)
	}
	row := make([]int32, width)
	_ = PadRow(row, table, pad) // cannot fail: len(table) <= width
	return row, nil
}

// PadRow overwrites all of dst: the table's block ids, then pad in every
// remaining column (so a reused row keeps no stale tail). It fails, leaving
// dst untouched, when the table has more blocks than len(dst).
func PadRow(dst []int32, table []int32, pad int32) error {
	if len(table) > len(dst) {
		return fmt.Errorf("kvpage: table of %d blocks does not fit a row of width %d", len(table), len(dst))
	}
	n := copy(dst, table)
	for i := n; i < len(dst); i++ {
		dst[i] = pad
	}
	return nil
}
