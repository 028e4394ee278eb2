package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
)

// TestLinMemoExactEntries puts rows that share one key (as hash
// collisions would) and differ in one part each — the weight, the input
// row, the bias or its presence, the output length — and gets each back
// exactly; then fills the memo past its bound and checks it started again.
func TestLinMemoExactEntries(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	row := func(n int) []bf16.BF16 {
		v := make([]bf16.BF16, n)
		for i := range v {
			v[i] = bf16.BF16(r.Uint32())
		}
		return v
	}
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
	for _, c := range cases {
		memoPut(key, c.wid, c.bias, c.x, c.out)
	}
	for i, c := range cases {
		dst := make([]bf16.BF16, len(c.out))
		if !memoGet(key, c.wid, c.bias, c.x, dst) || !slices.Equal(dst, c.out) {
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
		if memoGet(key, miss.wid, miss.bias, miss.x, make([]bf16.BF16, miss.n)) {
			t.Fatalf("%s: the memo answered", miss.name)
		}
	}
	// Past linMemoBytes the memo starts again: the first rows are gone,
	// the last is kept.
	big := row(memoPage)
	for i := 0; 2*i*len(big) <= 2*linMemoBytes; i++ {
		memoPut(uint64(i), w1, nil, big[:1], big[1:])
	}
	dst := make([]bf16.BF16, 16)
	if memoGet(key, w1, nil, x1, dst) {
		t.Fatal("a row survived the memo's reset")
	}
	last := uint64(2 * linMemoBytes / (2 * len(big)))
	if !memoGet(last, w1, nil, big[:1], make([]bf16.BF16, len(big)-1)) {
		t.Fatal("the last row put is not in the memo")
	}
}
