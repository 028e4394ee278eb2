package kvpage_test

import (
	"errors"
	"fmt"

	"github.com/offcard/offcard/kvpage"
)

func Example() {
	pool, err := kvpage.NewPool(4, 32) // 4 blocks of 32 positions
	if err != nil {
		panic(err)
	}
	policy, err := kvpage.ParseWidthPolicy("dynamic")
	if err != nil {
		panic(err)
	}

	seq := pool.NewTable()
	_ = seq.Grow(33) // a 33-token prompt crosses the first boundary: 2 blocks
	block, row, _ := seq.Slot(32)
	fmt.Println("blocks", seq.Blocks(), "pos 32 at block", block, "row", row)

	width, _ := kvpage.Width(policy, seq.NumBlocks())
	pageRow, _ := seq.Row(width+1, -1) // one column wider, padded with -1
	fmt.Println("width", width, "row", pageRow)

	other := pool.NewTable()
	if err := other.Grow(100); errors.Is(err, kvpage.ErrExhausted) {
		fmt.Println(err) // needs 4 blocks, 2 are free; nothing changed
	}
	seq.Release()
	fmt.Println("free", pool.NumFree(), "in use", pool.InUse())
	_ = other.Grow(100)
	fmt.Println("reused", other.Blocks())
	// Output:
	// blocks [0 1] pos 32 at block 1 row 0
	// width 2 row [0 1 -1]
	// kvpage: need 4 more blocks but only 2 of 4 are free
	// free 4 in use 0
	// reused [0 1 2 3]
}
