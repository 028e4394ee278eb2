package kvpage

import (
	"slices"
	"strings"
	"testing"
)

// Boundaries (lessons rule 8): pos%bs in {0, 1, bs-1}, over non-contiguous,
// permuted blocks.
func TestSlotBoundaries(t *testing.T) {
	table := []int32{7, 2, 9} // permuted, non-contiguous
	for _, bs := range []int{1, 2, 3, 32, 64} {
		for k := range 3 { // block index
			for _, r := range []int{0, 1, bs - 1} {
				if r >= bs {
					continue
				}
				pos := k*bs + r
				if got := BlockIndex(pos, bs); got != k {
					t.Errorf("BlockIndex(%d, %d) = %d, want %d", pos, bs, got, k)
				}
				if got := Row(pos, bs); got != r {
					t.Errorf("Row(%d, %d) = %d, want %d", pos, bs, got, r)
				}
				b, row := Slot(table, pos, bs)
				if b != table[k] || row != r {
					t.Errorf("Slot(%v, %d, %d) = (%d, %d), want (%d, %d)", table, pos, bs, b, row, table[k], r)
				}
			}
		}
	}
}

func TestSlotTable(t *testing.T) {
	const bs = 32
	table := []int32{5, 0, 3}
	cases := []struct {
		pos       int
		block     int32
		row, idx  int
		blocksFor int // BlocksFor(pos+1)
	}{
		{0, 5, 0, 0, 1},
		{1, 5, 1, 0, 1},
		{31, 5, 31, 0, 1},
		{32, 0, 0, 1, 2}, // the first boundary: the seed bug's [C,1] table broke here
		{33, 0, 1, 1, 2},
		{63, 0, 31, 1, 2},
		{64, 3, 0, 2, 3},
		{65, 3, 1, 2, 3},
		{95, 3, 31, 2, 3},
	}
	for _, c := range cases {
		b, r := Slot(table, c.pos, bs)
		if b != c.block || r != c.row {
			t.Errorf("Slot(pos=%d) = (%d, %d), want (%d, %d)", c.pos, b, r, c.block, c.row)
		}
		if got := BlockIndex(c.pos, bs); got != c.idx {
			t.Errorf("BlockIndex(%d) = %d, want %d", c.pos, got, c.idx)
		}
		if got := BlocksFor(c.pos+1, bs); got != c.blocksFor {
			t.Errorf("BlocksFor(%d) = %d, want %d", c.pos+1, got, c.blocksFor)
		}
	}
}

func TestBlocksFor(t *testing.T) {
	cases := []struct{ length, bs, want int }{
		{0, 32, 0}, {1, 32, 1}, {31, 32, 1}, {32, 32, 1}, {33, 32, 2},
		{63, 32, 2}, {64, 32, 2}, {65, 32, 3},
		{0, 1, 0}, {1, 1, 1}, {5, 1, 5},
		{int(^uint(0) >> 1), 2, int(^uint(0)>>1)/2 + 1}, // no overflow at MaxInt
	}
	for _, c := range cases {
		if got := BlocksFor(c.length, c.bs); got != c.want {
			t.Errorf("BlocksFor(%d, %d) = %d, want %d", c.length, c.bs, got, c.want)
		}
	}
}

func mustPanic(t *testing.T, name, substr string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Errorf("%s: no panic", name)
			return
		}
		if msg, _ := r.(string); !strings.Contains(msg, substr) {
			t.Errorf("%s: panic %q, want it to contain %q", name, r, substr)
		}
	}()
	f()
}

func TestSlotPanics(t *testing.T) {
	mustPanic(t, "narrow table", "needs block index 1 but the table has 1 blocks", func() { Slot([]int32{4}, 32, 32) })
	mustPanic(t, "empty table", "needs block index 0 but the table has 0 blocks", func() { Slot(nil, 0, 32) })
	mustPanic(t, "negative pos", "negative position", func() { Slot([]int32{4}, -1, 32) })
	mustPanic(t, "zero bs", "block size 0", func() { BlockIndex(3, 0) })
	mustPanic(t, "row zero bs", "block size 0", func() { Row(3, 0) })
	mustPanic(t, "row negative", "negative position", func() { Row(-1, 4) })
	mustPanic(t, "blocksFor negative", "negative length", func() { BlocksFor(-1, 4) })
	mustPanic(t, "blocksFor bs", "block size -2", func() { BlocksFor(1, -2) })
}

func TestPaddedRow(t *testing.T) {
	cases := []struct {
		table []int32
		width int
		pad   int32
		want  []int32
		err   string
	}{
		{[]int32{3, 1}, 4, 0, []int32{3, 1, 0, 0}, ""},
		{[]int32{3, 1}, 4, -1, []int32{3, 1, -1, -1}, ""},
		{[]int32{3, 1}, 2, -1, []int32{3, 1}, ""},
		{nil, 3, 9, []int32{9, 9, 9}, ""},
		{nil, 0, 9, []int32{}, ""},
		{[]int32{3, 1, 2}, 2, 0, nil, "table of 3 blocks does not fit a row of width 2"},
		{[]int32{3}, 0, 0, nil, "table of 1 blocks does not fit a row of width 0"},
		{nil, -1, 0, nil, "negative row width -1"},
	}
	for _, c := range cases {
		got, err := PaddedRow(c.table, c.width, c.pad)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("PaddedRow(%v, %d): err %v, want %q", c.table, c.width, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("PaddedRow(%v, %d, %d) = %v, %v; want %v", c.table, c.width, c.pad, got, err, c.want)
		}
	}
}

// A reused row must lose its stale tail (lessons: "stale tail").
func TestPadRowOverwritesStaleTail(t *testing.T) {
	row := []int32{11, 12, 13, 14, 15}
	if err := PadRow(row, []int32{4, 2}, -1); err != nil {
		t.Fatal(err)
	}
	if want := []int32{4, 2, -1, -1, -1}; !slices.Equal(row, want) {
		t.Fatalf("row = %v, want %v", row, want)
	}
	// Too wide: error, dst untouched.
	before := slices.Clone(row)
	if err := PadRow(row[:1], []int32{1, 2}, 0); err == nil {
		t.Fatal("PadRow into a narrow row: no error")
	}
	if !slices.Equal(row, before) {
		t.Fatalf("failed PadRow changed dst: %v -> %v", before, row)
	}
}
