package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
	"github.com/stretchr/testify/require"
)

// TestLinMemoExactEntries puts rows that share one key (as hash
// collisions would) and differ in one part each — the weight, the input
// row, the bias or its presence, the output length — and gets each back
// exactly; then fills the memo past its bound and checks it started again.
func TestLinMemoExactEntries(t *testing.T) {
	row := bitsRows(rand.New(rand.NewPCG(3, 4)))
	const key = 0x5eed
	const w1, w2 = 1 << 60, 1<<60 + 1 // ids no weight of another test gets
	x1, x2, b := row(48), row(48), row(16)
	x1b := slices.Clone(x1)
	x1b[47] ^= 1
	cases := []struct {
		wid     uint64
		bias, x []bf16.BF16
		out     []bf16.BF16
	}{
		{w1, nil, x1, row(16)},
		{w1, nil, x2, row(16)},
		{w2, nil, x1, row(16)},
		{w1, b, x1, row(16)},
		{w1, nil, x1, row(8)},
	}
	m := &rowMemo{}
	for _, c := range cases {
		m.put(key, c.wid, c.bias, c.x, c.out)
	}
	for i, c := range cases {
		dst := make([]bf16.BF16, len(c.out))
		if !m.get(key, c.wid, c.bias, c.x, dst) || !slices.Equal(dst, c.out) {
			t.Fatalf("entry %d: got %v, want %v", i, dst, c.out)
		}
	}
	for _, miss := range []struct {
		name    string
		wid     uint64
		bias, x []bf16.BF16
		n       int
	}{
		{"another input row", w1, nil, x1b, 16},
		{"another bias", w1, row(16), x1, 16},
		{"another weight", w2 + 1, nil, x1, 16},
		{"another width", w1, nil, x1, 12},
	} {
		if m.get(key, miss.wid, miss.bias, miss.x, make([]bf16.BF16, miss.n)) {
			t.Fatalf("%s: the memo answered", miss.name)
		}
	}
	// Past linMemoBytes the memo starts again: the first rows are gone, the
	// last is kept. Page-sized rows fill it a page at a time.
	big := row(memoPage)
	fill := 0
	for ; 2*fill*len(big) <= 2*linMemoBytes; fill++ {
		m.put(key+uint64(fill+1), w1, nil, big[:1], big[1:])
	}
	if m.get(key, w1, nil, x1, make([]bf16.BF16, 16)) {
		t.Fatal("a row survived the memo's reset")
	}
	if !m.get(key+uint64(fill), w1, nil, big[:1], make([]bf16.BF16, len(big)-1)) {
		t.Fatal("the last row put is not in the memo")
	}
	// Keys that start at one table slot (they differ above the table's
	// bits) probe past each other; past memoSlots/2 entries the memo
	// starts again too.
	same := func(j int) uint64 { return key + uint64(j)*memoSlots }
	for j := 0; j < 100; j++ {
		m.put(same(j), w1, nil, x1[:1], x2[j%48:j%48+1])
	}
	for j := 0; j < 100; j++ {
		dst := make([]bf16.BF16, 1)
		if !m.get(same(j), w1, nil, x1[:1], dst) || dst[0] != x2[j%48] {
			t.Fatalf("colliding key %d: got %v, want %v", j, dst, x2[j%48])
		}
	}
	for j := 100; j <= memoSlots/2; j++ {
		m.put(same(j), w1, nil, x1[:1], x2[:1])
	}
	if m.get(same(0), w1, nil, x1[:1], make([]bf16.BF16, 1)) {
		t.Fatal("a row survived the reset past memoSlots/2 entries")
	}
	if !m.get(same(memoSlots/2), w1, nil, x1[:1], make([]bf16.BF16, 1)) {
		t.Fatal("the last row put is not in the memo")
	}
}

// bitsRows returns a maker of rows of n random bf16 bit patterns.
func bitsRows(r *rand.Rand) func(n int) []bf16.BF16 {
	return func(n int) []bf16.BF16 {
		v := make([]bf16.BF16, n)
		for i := range v {
			v[i] = bf16.BF16(r.Uint32())
		}
		return v
	}
}

// A device takes a row memo at its first linear and gives it back at
// Recycle: a device alive at the same time gets another one (no two
// devices write one memo), and the next device gets it back with the
// first one's rows, which answer its launch (nothing is put), with the
// same outputs.
func TestRowMemoPassesFromDeviceToDevice(t *testing.T) {
	const m, k, n = 2, 64, 32
	r := rand.New(rand.NewPCG(21, 22))
	x, w := cRand(r, m*k, false), cRand(r, n*k, false)
	lin := func(d *Device) []bf16.BF16 {
		in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, m, k), x)
		wt := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, n, k), w)
		out := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, m, n))
		cRun(t, d, tt.Linear{Input: in, Weight: wt, Output: out, TransposeB: true})
		return cDown(t, d, out)
	}
	memoPool.Lock()
	memoPool.free = nil // the memos of earlier tests' devices
	memoPool.Unlock()
	d1 := cDev(t, Options{})
	require.Nil(t, d1.rows, "a memo before the first linear")
	want := lin(d1)
	m1 := d1.rows
	require.NotNil(t, m1)
	require.Len(t, m1.ents, m, "the rows computed are remembered")

	d2 := cDev(t, Options{})
	require.Equal(t, want, lin(d2))
	require.NotSame(t, m1, d2.rows, "two live devices share a memo")

	d1.Recycle()
	d3 := cDev(t, Options{})
	require.Equal(t, want, lin(d3))
	require.Same(t, m1, d3.rows, "the recycled device's memo did not pass on")
	require.Len(t, m1.ents, m, "rows in the memo were computed and put again")

	d4 := cDev(t, Options{})
	lin(d4)
	require.NotSame(t, d3.rows, d4.rows, "a memo handed out twice")
}

// A remembered row is what a later launch writes for that input through
// that weight, without computing it; other inputs, another weight with the
// same shape, and a weight whose contents changed are computed.
// LinearRows counts both.
func TestRememberLinear(t *testing.T) {
	const m, k, n = 3, 64, 96
	r := rand.New(rand.NewPCG(21, 22))
	x := cRand(r, m*k, false)
	w1, w2 := cRand(r, n*k, false), cRand(r, n*k, false)
	d := cDev(t, Options{Strict: true})
	defer d.Recycle()
	in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, m, k), x)
	wSpec := cSpec(tt.BF16, tt.Tile, 1, 1, n, k)
	wa, wb := cUpload(t, d, wSpec, w1), cUpload(t, d, wSpec, w2)
	out := cAlloc(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, m, n))
	lin := func(w tt.Tensor) []bf16.BF16 {
		cRun(t, d, tt.Linear{Input: in, Weight: w, Output: out, TransposeB: true})
		return cDown(t, d, out)
	}
	want := make([]bf16.BF16, m*n)
	for i := range m {
		ref.MatVec(want[i*n:(i+1)*n], w1, x[i*k:(i+1)*k])
	}
	// Row 1's remembered output is not ref's: seeing it proves the launch
	// took it.
	fake := slices.Clone(want[n : 2*n])
	fake[0], fake[n-1] = bf16.FromFloat32(7), bf16.FromFloat32(-7)
	d.RememberLinear(LinearWeightID(w1, n, k), x[k:2*k], fake)
	got := lin(wa)
	cSame(t, "row 0", got[:n], want[:n])
	cSame(t, "row 1 (remembered)", got[n:2*n], fake)
	cSame(t, "row 2", got[2*n:], want[2*n:])
	if c, f := d.LinearRows(); c != 2 || f != 1 {
		t.Fatalf("LinearRows = %d computed, %d found; want 2 and 1", c, f)
	}
	// The same input through another weight is computed.
	got = lin(wb)
	ref.MatVec(want[n:2*n], w2, x[k:2*k])
	cSame(t, "row 1 through another weight", got[n:2*n], want[n:2*n])
	// So it is once the remembered weight's contents change.
	if err := d.WriteHost(wa, tt.HostBF16(wSpec.Shape, wSpec.Layout, w2)); err != nil {
		t.Fatal(err)
	}
	got = lin(wa)
	cSame(t, "row 1 after the weight changed", got[n:2*n], want[n:2*n])
	// The id is the contents': equal contents anywhere share it.
	if LinearWeightID(slices.Clone(w1), n, k) != LinearWeightID(w1, n, k) || LinearWeightID(w1, n, k) == LinearWeightID(w2, n, k) ||
		LinearWeightID(w1, k, n) == LinearWeightID(w1, n, k) {
		t.Fatal("LinearWeightID is not the contents' and shape's id")
	}
}

// rowKey depends on each of its parts: the weight id, the bias (and its
// presence), every input element; and its low bits (the table's index)
// spread.
func TestRowKeyParts(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	x := cRand(r, 128, false)
	bias := cRand(r, 128, false)
	base := rowKey(7, nil, x)
	seen := map[uint64]string{base: "base"}
	add := func(what string, k uint64) {
		t.Helper()
		if prev, ok := seen[k]; ok {
			t.Fatalf("%s has the key of %s", what, prev)
		}
		seen[k] = what
	}
	add("another weight", rowKey(8, nil, x))
	add("a bias", rowKey(7, bias, x))
	add("a zero bias", rowKey(7, make([]bf16.BF16, 128), x))
	for i := range x {
		y := slices.Clone(x)
		y[i] ^= 1
		add("input element "+string(rune('0'+i%10)), rowKey(7, nil, y))
	}
	slots := map[uint64]bool{}
	for w := range uint64(4096) {
		slots[rowKey(w, nil, x)&(memoSlots-1)] = true
	}
	if len(slots) < 3500 { // 4096 keys into 65536 slots: about 3,970 distinct
		t.Fatalf("4096 weight ids land in %d slots", len(slots))
	}
}

// BenchmarkRowKey is the memo's key of a 128-value input row (the tiny
// model's hidden size).
func BenchmarkRowKey(b *testing.B) {
	x := cRand(rand.New(rand.NewPCG(43, 44)), 128, false)
	for b.Loop() {
		_ = rowKey(5, nil, x)
	}
}
