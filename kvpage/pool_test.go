package kvpage

import (
	"errors"
	"slices"
	"testing"
)

func newPool(t *testing.T, n, bs int) *Pool {
	t.Helper()
	p, err := NewPool(n, bs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPoolRejects(t *testing.T) {
	for _, c := range []struct{ n, bs int }{{0, 32}, {-1, 32}, {4, 0}, {4, -3}, {1 << 40, 32}} {
		if _, err := NewPool(c.n, c.bs); err == nil {
			t.Errorf("NewPool(%d, %d): no error", c.n, c.bs)
		}
	}
}

// Pin the allocation order: lowest free id first; a freed block is reused as
// soon as it is the lowest free one.
func TestAllocLowestFirstAndReuse(t *testing.T) {
	p := newPool(t, 4, 32)
	for want := int32(0); want < 4; want++ {
		id, err := p.Alloc()
		if err != nil || id != want {
			t.Fatalf("Alloc = %d, %v; want %d", id, err, want)
		}
	}
	_, err := p.Alloc()
	if !errors.Is(err, ErrExhausted) || err.Error() != "kvpage: all 4 blocks in use" {
		t.Fatalf("Alloc on a full pool: %v", err)
	}
	if p.NumFree() != 0 || p.InUse() != 4 {
		t.Fatalf("counts %d free %d in use", p.NumFree(), p.InUse())
	}
	for _, id := range []int32{2, 1} {
		if err := p.Free(id); err != nil {
			t.Fatal(err)
		}
	}
	if p.NumFree() != 2 || p.InUse() != 2 {
		t.Fatalf("counts %d free %d in use", p.NumFree(), p.InUse())
	}
	for _, want := range []int32{1, 2} {
		if id, err := p.Alloc(); err != nil || id != want {
			t.Fatalf("Alloc after free = %d, %v; want %d", id, err, want)
		}
	}
	if err := p.check(); err != nil {
		t.Fatal(err)
	}
}

func TestFreeRejects(t *testing.T) {
	p := newPool(t, 3, 4)
	a, _ := p.Alloc()
	tb := p.NewTable()
	if err := tb.Grow(1); err != nil { // takes block 1
		t.Fatal(err)
	}
	cases := []struct {
		id   int32
		want error
	}{
		{-1, ErrOutOfRange}, {3, ErrOutOfRange}, {1 << 30, ErrOutOfRange},
		{2, ErrDoubleFree}, // never allocated
		{1, ErrOwnedByTable},
	}
	for _, c := range cases {
		if err := p.Free(c.id); !errors.Is(err, c.want) {
			t.Errorf("Free(%d) = %v, want %v", c.id, err, c.want)
		}
	}
	if err := p.Free(a); err != nil {
		t.Fatal(err)
	}
	if err := p.Free(a); !errors.Is(err, ErrDoubleFree) {
		t.Fatalf("second Free(%d) = %v", a, err)
	}
	if p.NumFree() != 2 || !slices.Equal(tb.Blocks(), []int32{1}) {
		t.Fatalf("refused frees changed state: %d free, table %v", p.NumFree(), tb.Blocks())
	}
	if err := p.check(); err != nil {
		t.Fatal(err)
	}
}

func TestTableGrow(t *testing.T) {
	const bs = 4
	p := newPool(t, 8, bs)
	tb := p.NewTable()
	steps := []struct {
		length int
		blocks int
	}{
		{0, 0}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 2}, {8, 2}, {9, 3}, {6, 3} /* no shrink */, {17, 5},
	}
	for _, s := range steps {
		if err := tb.Grow(s.length); err != nil {
			t.Fatalf("Grow(%d): %v", s.length, err)
		}
		if tb.NumBlocks() != s.blocks || len(tb.Blocks()) != s.blocks {
			t.Fatalf("after Grow(%d): %d blocks, want %d", s.length, tb.NumBlocks(), s.blocks)
		}
		if tb.Len() != max(s.length, tb.Len()) || tb.Cap() != s.blocks*bs {
			t.Fatalf("after Grow(%d): Len %d Cap %d", s.length, tb.Len(), tb.Cap())
		}
	}
	if tb.Len() != 17 || p.InUse() != 5 {
		t.Fatalf("Len %d InUse %d", tb.Len(), p.InUse())
	}
	if err := tb.Grow(-1); err == nil {
		t.Fatal("Grow(-1): no error")
	}
}

func TestTableGrowExhaustedIsAtomic(t *testing.T) {
	p := newPool(t, 3, 2)
	a, b := p.NewTable(), p.NewTable()
	if err := a.Grow(3); err != nil { // 2 blocks
		t.Fatal(err)
	}
	err := b.Grow(5) // needs 3, 1 free
	var ee *ExhaustedError
	if !errors.Is(err, ErrExhausted) || !errors.As(err, &ee) || ee.Need != 3 || ee.Free != 1 || ee.NumBlocks != 3 {
		t.Fatalf("Grow(5) = %v", err)
	}
	if err.Error() != "kvpage: need 3 more blocks but only 1 of 3 are free" {
		t.Fatalf("message %q", err)
	}
	if b.Len() != 0 || b.NumBlocks() != 0 || p.NumFree() != 1 {
		t.Fatalf("failed Grow changed state: len %d blocks %d free %d", b.Len(), b.NumBlocks(), p.NumFree())
	}
	if err := a.Grow(5); err != nil { // needs exactly the one free block
		t.Fatal(err)
	}
	err = b.Grow(1)
	if !errors.Is(err, ErrExhausted) || err.Error() != "kvpage: all 3 blocks in use" {
		t.Fatalf("Grow on a full pool: %v", err)
	}
	err = b.Grow(3)
	if err == nil || err.Error() != "kvpage: all 3 blocks in use (need 2 more)" {
		t.Fatalf("Grow(3) on a full pool: %v", err)
	}
}

func TestTableReleaseAndReuse(t *testing.T) {
	p := newPool(t, 4, 2)
	a := p.NewTable()
	if err := a.Grow(4); err != nil {
		t.Fatal(err)
	}
	loose, _ := p.Alloc() // 2
	if got := a.Blocks(); !slices.Equal(got, []int32{0, 1}) || loose != 2 {
		t.Fatalf("blocks %v loose %d", got, loose)
	}
	snap := a.Blocks()
	snap[0] = 99 // a copy: the table is unaffected
	if a.Blocks()[0] != 0 {
		t.Fatal("Blocks returned a live view")
	}
	a.Release()
	if a.Len() != 0 || a.NumBlocks() != 0 || p.NumFree() != 3 {
		t.Fatalf("after Release: len %d blocks %d free %d", a.Len(), a.NumBlocks(), p.NumFree())
	}
	a.Release() // no-op
	if p.NumFree() != 3 {
		t.Fatal("double Release changed the pool")
	}
	// Freed blocks are reused, lowest first, by another table and by Alloc.
	b := p.NewTable()
	if err := b.Grow(3); err != nil {
		t.Fatal(err)
	}
	if got := b.Blocks(); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("reuse: %v", got)
	}
	if id, err := p.Alloc(); err != nil || id != 3 {
		t.Fatalf("Alloc = %d, %v", id, err)
	}
	if err := p.check(); err != nil {
		t.Fatal(err)
	}
}

func TestTableSlotAndRow(t *testing.T) {
	p := newPool(t, 8, 4)
	// Make the table's blocks non-contiguous: 0 and 2 loose, table gets 1, 3, 4.
	x, _ := p.Alloc()
	tb := p.NewTable()
	if err := tb.Grow(1); err != nil {
		t.Fatal(err)
	}
	y, _ := p.Alloc()
	if err := tb.Grow(9); err != nil {
		t.Fatal(err)
	}
	if x != 0 || y != 2 || !slices.Equal(tb.Blocks(), []int32{1, 3, 4}) {
		t.Fatalf("x %d y %d blocks %v", x, y, tb.Blocks())
	}
	for _, c := range []struct {
		pos   int
		block int32
		row   int
	}{{0, 1, 0}, {1, 1, 1}, {3, 1, 3}, {4, 3, 0}, {5, 3, 1}, {7, 3, 3}, {8, 4, 0}} {
		b, r, err := tb.Slot(c.pos)
		if err != nil || b != c.block || r != c.row {
			t.Errorf("Slot(%d) = %d, %d, %v; want %d, %d", c.pos, b, r, err, c.block, c.row)
		}
	}
	for _, pos := range []int{-1, 9, 11, 12} { // 9..11 are within Cap but past Len
		if _, _, err := tb.Slot(pos); err == nil {
			t.Errorf("Slot(%d): no error", pos)
		}
	}
	row, err := tb.Row(5, -1)
	if err != nil || !slices.Equal(row, []int32{1, 3, 4, -1, -1}) {
		t.Fatalf("Row = %v, %v", row, err)
	}
	if _, err := tb.Row(2, 0); err == nil {
		t.Fatal("Row narrower than the table: no error")
	}
	dst := []int32{9, 9, 9, 9}
	if err := tb.PadRow(dst, 0); err != nil || !slices.Equal(dst, []int32{1, 3, 4, 0}) {
		t.Fatalf("PadRow = %v, %v", dst, err)
	}
}

func TestAccessors(t *testing.T) {
	p := newPool(t, 5, 16)
	tb := p.NewTable()
	if p.NumBlocks() != 5 || p.BlockSize() != 16 || p.NumFree() != 5 || p.InUse() != 0 || tb.Pool() != p {
		t.Fatalf("accessors: %d %d %d %d", p.NumBlocks(), p.BlockSize(), p.NumFree(), p.InUse())
	}
}
