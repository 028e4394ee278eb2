package sim

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"

	"github.com/offcard/offcard/bf16"
)

// A linear's output row is a pure function of the weight's contents, the
// bias's and the input row's bits (ref's dot product in its canonical
// order). Campaigns feed the same rows again and again: the same prompts
// in many schedules, every schedule again while it is shrunk. So output
// rows are remembered from device to device (rowMemo), keyed by those bits
// exactly (a hash finds the candidates; the weight, the bias and the row
// are compared in full), and a launch computes only rows it has not seen.
// A weight's identity is its contents: weights decoded on any device with
// the same bytes share one id (canonWeight).

var linMemo = struct {
	sync.Mutex // guards canon and nextID
	seed       maphash.Seed
	canon      map[uint64][]*canonW
	nextID     uint64
}{seed: maphash.MakeSeed(), canon: map[uint64][]*canonW{}}

// The rows are kept in rowMemos, each owned by one device at a time and
// read and written without locks: a device takes one at its first linear
// launch and hands it back at Recycle, for the next device. A campaign's
// workers each run one device at a time, so each keeps about one memo warm
// across its cases (the rows of a worker's earlier cases give nearly all
// the hits a shared memo would give), and no lookup writes a cache line the
// other core reads. Which memo a device gets changes no output: a memo
// answers only with the exact row.
var memoPool struct {
	sync.Mutex
	free []*rowMemo
}

// takeMemo hands out a free memo, or a new one.
func takeMemo() *rowMemo {
	memoPool.Lock()
	defer memoPool.Unlock()
	if n := len(memoPool.free); n > 0 {
		m := memoPool.free[n-1]
		memoPool.free = memoPool.free[:n-1]
		return m
	}
	return &rowMemo{}
}

// giveMemo returns m to the pool; its owner must not use it again.
func giveMemo(m *rowMemo) {
	memoPool.Lock()
	defer memoPool.Unlock()
	memoPool.free = append(memoPool.free, m)
}

// DropRowMemos forgets the row memos waiting to be handed to later
// devices, so devices made next start with empty ones and find only rows
// they compute or are handed (RememberLinear); a memo a live device holds
// goes back to the pool as usual. It changes no output, only what is
// computed again: tests and benchmarks call it to compare runs from the
// same start.
func DropRowMemos() {
	memoPool.Lock()
	defer memoPool.Unlock()
	memoPool.free = nil
}

// rowMemo: slots, an open-addressed table (linear probing, at most half
// full), maps a row key to its newest entry; entries with the same key
// chain through next. Nothing here holds a pointer the collector must
// follow row by row.
type rowMemo struct {
	slots []memoSlot // nil until the first put
	ents  []memoEnt
	// pages hold each entry's input row, bias (if any) and output row;
	// used pages are full but the last (pages[used-1]); a reset keeps them.
	pages [][]bf16.BF16
	used  int
}

// linMemoBytes bounds the rows one memo keeps; past it the memo starts
// again empty. With ref's rows handed over (RememberLinear), the rows
// `offcard check --cases 200` computes fall with the size (8, 16, 32 MiB:
// 162,000, 106,000, 71,000 of its 764,000 output rows; 344,000 are found
// as the weight's last rows); past 16 MiB the kernel's zeroing of the new
// memory costs what the rows save.
const linMemoBytes = 16 << 20

type canonW struct {
	wt []bf16.BF16
	id uint64
}

// memoPage is the size of a page of remembered values.
const memoPage = 1 << 16

// memoEnt is one remembered row: pages[page][at:] holds the k values of
// the input row, then nb bias values (0: no bias), then the n output
// values.
type memoEnt struct {
	wid      uint64
	page, at int32
	k, nb, n int32
	next     int32 // the next entry with the same key; -1: none
}

// canonWeight returns the id of a decoded weight's contents (n*k values
// as [n][k] rows), the same for equal contents on any device, and the one
// process-wide copy of those contents (read only), which every device's
// launches then read: wt itself is not retained.
func canonWeight(wt []bf16.BF16, n, k int) (uint64, []bf16.BF16) {
	var h maphash.Hash
	linMemo.Lock()
	defer linMemo.Unlock()
	h.SetSeed(linMemo.seed)
	h.Write([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(k), byte(k >> 8), byte(k >> 16)})
	h.Write(bf16.View(wt))
	key := h.Sum64()
	for _, c := range linMemo.canon[key] {
		if bf16.Equal(c.wt, wt) {
			return c.id, c.wt
		}
	}
	linMemo.nextID++
	c := &canonW{wt: slices.Clone(wt), id: linMemo.nextID}
	linMemo.canon[key] = append(linMemo.canon[key], c)
	return c.id, c.wt
}

// rowKey is the memo's hash of (wid, bias, x): x's and the bias's bytes
// hashed whole (one maphash.Bytes each, a third of the time of a streamed
// maphash.Hash), mixed with the weight id by a SplitMix64 finalizer so the
// table's index bits depend on all of them. A collision costs a compare.
func rowKey(wid uint64, bias, x []bf16.BF16) uint64 {
	h := maphash.Bytes(linMemo.seed, bf16.View(x))
	if bias != nil {
		h ^= bits.RotateLeft64(maphash.Bytes(linMemo.seed, bf16.View(bias)), 29) + 1
	}
	h ^= wid * 0x9E3779B97F4A7C15
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	return h ^ h>>29
}

// memoSlot is one slot of the table: ent1 is 1 + the newest entry of key
// (0: the slot is empty).
type memoSlot struct {
	key  uint64
	ent1 int32
}

// memoSlots is the table's size; a memo starts again empty before it
// holds more than memoSlots/2 entries, so a probe always ends.
const memoSlots = 1 << 16

// slot returns the slot of key in the table, or the empty slot (ent1 0)
// where it would go.
func (m *rowMemo) slot(key uint64) int {
	for i := int(key) & (memoSlots - 1); ; i = (i + 1) & (memoSlots - 1) {
		if s := &m.slots[i]; s.ent1 == 0 || s.key == key {
			return i
		}
	}
}

// get copies the remembered output row for (wid, bias, x) into dst.
func (m *rowMemo) get(key, wid uint64, bias, x, dst []bf16.BF16) bool {
	if m.slots == nil {
		return false
	}
	for i := m.slots[m.slot(key)].ent1 - 1; i >= 0; { // an empty slot: -1
		e := &m.ents[i]
		i = e.next
		if e.wid != wid || int(e.k) != len(x) || int(e.nb) != len(bias) || int(e.n) != len(dst) {
			continue
		}
		a := m.pages[e.page][e.at:]
		if bf16.Equal(a[:e.k], x) && bf16.Equal(a[e.k:e.k+e.nb], bias) {
			copy(dst, a[e.k+e.nb:e.k+e.nb+e.n])
			return true
		}
	}
	return false
}

// put remembers an output row (rows longer than a page are not).
func (m *rowMemo) put(key, wid uint64, bias, x, out []bf16.BF16) {
	size := len(x) + len(bias) + len(out)
	if size > memoPage {
		return
	}
	if len(m.ents) >= memoSlots/2 {
		m.reset()
	}
	if m.used == 0 || len(m.pages[m.used-1])+size > memoPage {
		if 2*memoPage*(m.used+1) > linMemoBytes {
			m.reset()
		}
		if m.used == len(m.pages) {
			m.pages = append(m.pages, make([]bf16.BF16, 0, memoPage))
		}
		m.pages[m.used] = m.pages[m.used][:0]
		m.used++
	}
	if m.slots == nil {
		m.slots = make([]memoSlot, memoSlots)
	}
	p := m.used - 1
	si := m.slot(key)
	next := m.slots[si].ent1 - 1 // -1: none
	m.slots[si] = memoSlot{key: key, ent1: int32(len(m.ents)) + 1}
	m.ents = append(m.ents, memoEnt{wid: wid, page: int32(p), at: int32(len(m.pages[p])), k: int32(len(x)), nb: int32(len(bias)), n: int32(len(out)), next: next})
	m.pages[p] = append(append(append(m.pages[p], x...), bias...), out...)
}

// reset empties the memo, keeping its memory.
func (m *rowMemo) reset() {
	clear(m.slots)
	m.ents = m.ents[:0]
	m.used = 0
}

// LinearWeightID is the id the row memo knows a linear's weight by: w
// holds n rows of k values, [out][in], as a linear with TransposeB reads
// its weight (Hugging Face's layout). Equal contents have equal ids in the
// whole process, whichever device or caller met them first.
func LinearWeightID(w []bf16.BF16, n, k int) uint64 {
	id, _ := canonWeight(w, n, k)
	return id
}

// RememberLinear tells the device's row memo that the linear with weight
// wid (LinearWeightID) and no bias maps input row x to output row out: a
// later launch that reads x through that weight takes out instead of
// computing it. out must be what the device would compute, ref.MatRows'
// bits for the row; the device does not check it. proptest hands the
// device the rows ref computed for the same position before the engine
// under test runs it.
func (d *Device) RememberLinear(wid uint64, x, out []bf16.BF16) {
	d.rowMemo().put(rowKey(wid, nil, x), wid, nil, x, out)
}

// rowMemo is the device's row memo, taken from the pool at first use.
func (d *Device) rowMemo() *rowMemo {
	if d.rows == nil {
		d.rows = takeMemo()
	}
	return d.rows
}

// LinearRows reports how many output rows the device's linear launches
// computed, and how many they found instead: the same as at the weight's
// last launch, or in the row memo.
func (d *Device) LinearRows() (computed, found int) { return d.linComputed, d.linFound }
