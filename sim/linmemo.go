package sim

import (
	"hash/maphash"
	"slices"
	"sync"
	"unsafe"

	"github.com/offcard/offcard/bf16"
)

// A linear's output row is a pure function of the weight's contents, the
// bias's and the input row's bits (ref's dot product in its canonical
// order). Campaigns feed the same rows again and again: the same prompts
// in many schedules, every schedule again while it is shrunk. So output
// rows are remembered, process-wide, keyed by those bits exactly (a hash
// finds the candidates; the weight, the bias and the row are compared in
// full), and a launch computes only rows it has not seen. A weight's
// identity is its contents: weights decoded on any device with the same
// bytes share one id (canonWeight).

var linMemo = struct {
	sync.Mutex
	seed   maphash.Seed
	rows   map[uint64][]*memoRow
	bytes  int
	canon  map[uint64][]*canonW
	nextID uint64
}{seed: maphash.MakeSeed(), rows: map[uint64][]*memoRow{}, canon: map[uint64][]*canonW{}}

// linMemoBytes bounds the rows kept; past it the memo starts again empty.
const linMemoBytes = 96 << 20

// useLinMemo turns the memo on (tests compare with it off).
var useLinMemo = true

type canonW struct {
	wt []bf16.BF16
	id uint64
}

type memoRow struct {
	wid  uint64
	bias []bf16.BF16 // nil: no bias
	x    []bf16.BF16
	out  []bf16.BF16
}

func bf16Bytes16(v []bf16.BF16) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 2*len(v))
}

// canonWeight returns the id of a decoded weight's contents (n*k values
// as [n][k] rows), the same for equal contents on any device.
func canonWeight(wt []bf16.BF16, n, k int) uint64 {
	var h maphash.Hash
	linMemo.Lock()
	defer linMemo.Unlock()
	h.SetSeed(linMemo.seed)
	h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(k), byte(k >> 8), byte(k >> 16)})
	h.Write(bf16Bytes16(wt))
	key := h.Sum64()
	for _, c := range linMemo.canon[key] {
		if slices.Equal(c.wt, wt) {
			return c.id
		}
	}
	linMemo.nextID++
	c := &canonW{wt: slices.Clone(wt), id: linMemo.nextID}
	linMemo.canon[key] = append(linMemo.canon[key], c)
	return c.id
}

func rowKey(wid uint64, bias, x []bf16.BF16) uint64 {
	var h maphash.Hash
	h.SetSeed(linMemo.seed)
	var b [9]byte
	for i := 0; i < 8; i++ {
		b[i] = byte(wid >> (8 * i))
	}
	if bias != nil {
		b[8] = 1
	}
	h.Write(b[:])
	h.Write(bf16Bytes16(bias))
	h.Write(bf16Bytes16(x))
	return h.Sum64()
}

// memoGet copies the remembered output row for (wid, bias, x) into dst.
func memoGet(key, wid uint64, bias, x, dst []bf16.BF16) bool {
	linMemo.Lock()
	defer linMemo.Unlock()
	for _, r := range linMemo.rows[key] {
		if r.wid == wid && (r.bias == nil) == (bias == nil) && slices.Equal(r.bias, bias) && slices.Equal(r.x, x) && len(r.out) == len(dst) {
			copy(dst, r.out)
			return true
		}
	}
	return false
}

// memoPut remembers an output row.
func memoPut(key, wid uint64, bias, x, out []bf16.BF16) {
	r := &memoRow{wid: wid, x: slices.Clone(x), out: slices.Clone(out)}
	if bias != nil {
		r.bias = slices.Clone(bias)
	}
	size := 2*(len(x)+len(out)+len(bias)) + 128
	linMemo.Lock()
	defer linMemo.Unlock()
	if linMemo.bytes+size > linMemoBytes {
		clear(linMemo.rows)
		linMemo.bytes = 0
	}
	linMemo.rows[key] = append(linMemo.rows[key], r)
	linMemo.bytes += size
}
