package sim

import (
	"hash/maphash"
	"runtime"
	"sync"
	"weak"

	"github.com/offcard/offcard/tt"
)

// Interned chunks. A large host upload to DRAM (a model's weights, a KV
// cache's zeros) leaves chunks whose bytes other devices of the process
// (a campaign's workers, each with its own device) or other chunks of the
// same memory hold too. Each chunk wholly inside such an upload is looked
// up by its bytes in a process-wide table and, when an equal one is there,
// shared with it, read only; the first write to a shared chunk copies it
// (claim), so every memory still reads exactly what was written to it.
// The table holds its chunks weakly: a chunk no memory holds any more is
// collected and its entry dropped. Sharing changes no byte any device
// reads, only how many copies of them the process keeps.

// internMin is the smallest upload whose chunks are interned (smaller ones,
// a step's tokens and page table, are written again each step).
const internMin = 1 << 20

var interned = struct {
	sync.Mutex
	m map[uint64]weak.Pointer[[chunkSize]byte]
}{m: map[uint64]weak.Pointer[[chunkSize]byte]{}}

var internSeed = maphash.MakeSeed()

// chunkHash keys the table (a variable so a test can make every chunk
// collide: an entry is shared only when its bytes are equal, not its hash).
var chunkHash = func(ch *[chunkSize]byte) uint64 { return maphash.Bytes(internSeed, ch[:]) }

// isShared reports whether chunk c is an interned one (read only).
func (m *mem) isShared(c uint64) bool {
	if m.shared == nil {
		return false
	}
	dir := m.shared[c>>dirShift]
	return dir != nil && dir[c&dirMask]
}

func (m *mem) setShared(c uint64, v bool) {
	if m.shared == nil {
		m.shared = make([][]bool, len(m.chunks))
	}
	if m.shared[c>>dirShift] == nil {
		m.shared[c>>dirShift] = make([]bool, 1<<dirShift)
	}
	m.shared[c>>dirShift][c&dirMask] = v
}

// intern shares chunk c (which must exist) with an interned chunk of the
// same bytes, or makes it the interned one for its bytes.
func (m *mem) intern(c uint64) {
	dir := m.chunks[c>>dirShift]
	if m.released || dir == nil || dir[c&dirMask] == nil || m.isShared(c) {
		return
	}
	ch := (*[chunkSize]byte)(dir[c&dirMask])
	h := chunkHash(ch)
	interned.Lock()
	defer interned.Unlock()
	if p := interned.m[h].Value(); p != nil {
		if *p == *ch {
			dir[c&dirMask] = p[:]
			m.setShared(c, true)
			chunkPool.Put(ch)
		}
		return // equal, or another chunk's hash: kept private
	}
	interned.m[h] = weak.Make(ch)
	runtime.AddCleanup(ch, func(h uint64) {
		interned.Lock()
		defer interned.Unlock()
		if interned.m[h].Value() == nil {
			delete(interned.m, h)
		}
	}, h)
	m.setShared(c, true)
}

// unshare gives chunk c a private copy of its shared bytes.
func (m *mem) unshare(c uint64) []byte {
	dir := m.chunks[c>>dirShift]
	own := newChunk()
	copy(own, dir[c&dirMask])
	dir[c&dirMask] = own
	m.setShared(c, false)
	return own
}

// internUpload interns the chunks wholly inside a DRAM-interleaved
// buffer's bank ranges after a host upload of internMin bytes or more.
func (d *Device) internUpload(b *buffer) {
	if b.bt != tt.DRAM || b.spec.Memory.Sharded() || uint64(b.numPages)*b.pageSize < internMin {
		return
	}
	n := b.nbanks(d)
	for j := range min(n, b.numPages) {
		pages := uint64((b.numPages - j + n - 1) / n)
		m, a := d.dramAt(j, b.addr)
		for c := (a + chunkMask) >> chunkShift; (c+1)<<chunkShift <= a+pages*b.aligned; c++ {
			m.intern(c)
		}
	}
}
