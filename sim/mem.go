package sim

import (
	"bytes"
	"errors"
	"math/bits"
	"sync"
)

// mem is one physical memory (a DRAM channel or one core's L1): a sparse
// byte array of fixed size, allocated in chunks on first write. Bytes never
// written read as the poison pattern (or, for L1 under Options.L1 zero or
// stale, as zeros). In strict mode a
// shadow bitmap records which bytes were ever written.
type mem struct {
	size   uint64
	fresh  []byte       // what a never-written chunk holds (poisonChunk or zeroChunk)
	chunks [][][]byte   // two-level: chunks[c>>dirShift][c&dirMask], created on demand
	shadow [][][]uint64 // nil unless strict; one bit per byte of a chunk
	strict bool
	watch  *wcache // DRAM channels: told of every write (decoded-weight cache)
	// stamps hold, per stripe of stripeSize bytes of a created chunk, the
	// value of *clock at the stripe's last write (0: never written; a
	// rewrite that leaves a stripe's bytes as they were does not count),
	// then the newest of a chunk's (at index chunkStripes); PeekInto reads
	// back only stripes written since a given clock.
	stamps [][][]uint64
	clock  *uint64
	// shared marks the interned chunks (intern.go): read only, copied at
	// the first write; nil while there is none.
	shared [][]bool
	// released: the chunks went back to chunkPool (Device.Recycle); every
	// later access panics.
	released bool
}

// chunkPool holds the chunks of released memories for later first writes
// (newChunk); a chunk taken from it is overwritten whole (with the fresh
// pattern) before any byte of it is read.
var chunkPool sync.Pool // of *[chunkSize]byte

// stampPool and shadowPool hold the stamps and strict shadows of the
// chunks of released memories; a slice taken from them is cleared first.
var stampPool, shadowPool sync.Pool // of *[chunkStamps]uint64, *[chunkSize / 64]uint64

// A chunk's stamps are one per stripe (chunkStripes of them), then the
// newest of them (so a reader skips a chunk not written since a clock).
const (
	chunkStripes = chunkSize / stripeSize
	chunkStamps  = chunkStripes + 1
)

// newStamps and newShadow are a chunk's cleared stamps and shadow.
func newStamps() []uint64 {
	if p, ok := stampPool.Get().(*[chunkStamps]uint64); ok {
		clear(p[:])
		return p[:]
	}
	return make([]uint64, chunkStamps)
}

func newShadow() []uint64 {
	if p, ok := shadowPool.Get().(*[chunkSize / 64]uint64); ok {
		clear(p[:])
		return p[:]
	}
	return make([]uint64, chunkSize/64)
}

var errReleased = errors.New("sim: use of a released device's memory")

// newChunk is a chunk of unspecified contents: a released one, or new.
func newChunk() []byte {
	if p, ok := chunkPool.Get().(*[chunkSize]byte); ok {
		return p[:]
	}
	return make([]byte, chunkSize)
}

// release hands the chunks to chunkPool (their stamps and shadows to
// stampPool and shadowPool). The memory must not be used again: every
// later access panics, so no chunk is read through it after another memory
// took it.
func (m *mem) release() {
	if m.released {
		return
	}
	m.released = true
	for di, dir := range m.chunks {
		for ci, ch := range dir {
			if ch != nil && !m.isShared(uint64(di)<<dirShift|uint64(ci)) {
				chunkPool.Put((*[chunkSize]byte)(ch))
			}
		}
	}
	eachChunk(m.stamps, func(st []uint64) { stampPool.Put((*[chunkStamps]uint64)(st)) })
	eachChunk(m.shadow, func(sh []uint64) { shadowPool.Put((*[chunkSize / 64]uint64)(sh)) })
	m.chunks, m.stamps, m.shadow, m.shared = nil, nil, nil, nil
}

// entry returns chunk c's slice in a two-level table (chunks, stamps or
// shadow), made by fresh when there is none yet (created).
func entry[T any](dirs [][][]T, c uint64, fresh func() []T) (x []T, created bool) {
	dir := dirs[c>>dirShift]
	if dir == nil {
		dir = make([][]T, 1<<dirShift)
		dirs[c>>dirShift] = dir
	}
	if x = dir[c&dirMask]; x == nil {
		x, created = fresh(), true
		dir[c&dirMask] = x
	}
	return x, created
}

// eachChunk calls f with the per-chunk slice of every created chunk in a
// two-level table (chunks, stamps or shadow).
func eachChunk[T any](dirs [][][]T, f func([]T)) {
	for _, dir := range dirs {
		for _, x := range dir {
			if x != nil {
				f(x)
			}
		}
	}
}

const (
	chunkShift = 16
	chunkSize  = 1 << chunkShift
	chunkMask  = chunkSize - 1
	dirShift   = 8
	dirMask    = 1<<dirShift - 1

	// A stripe is 8 face rows of a bf16 tile (16 elements, 32 bytes each):
	// a decode step's KV write changes one row of a cache tile, two face
	// rows in two stripes, so PeekInto re-reads those 16 face rows (a
	// quarter of the tile), not the whole tile, and tells the two.
	stripeShift = 8
	stripeSize  = 1 << stripeShift
)

// Poison is the byte fresh memory holds at address a: 0xC1 at even addresses,
// 0x7F at odd ones. Read as little-endian bf16 it is 0x7FC1 (a NaN), as fp32
// 0x7FC17FC1 (a NaN), as int32/uint32 2143387585 (a huge block id or
// position, never -1).
func Poison(a uint64) byte {
	if a&1 == 0 {
		return 0xC1
	}
	return 0x7F
}

var poisonChunk = func() []byte {
	b := make([]byte, chunkSize)
	for i := range b {
		b[i] = Poison(uint64(i))
	}
	return b
}()

var zeroChunk = make([]byte, chunkSize)

func newMem(size uint64, strict bool) *mem { return newMemFresh(size, strict, poisonChunk) }

// newMemFresh is a memory whose never-written bytes read as fresh's.
func newMemFresh(size uint64, strict bool, fresh []byte) *mem {
	return newMemsFresh(1, size, strict, fresh)[0]
}

// newMemsFresh is count memories of newMemFresh in a few allocations (a
// device's cores' L1s).
func newMemsFresh(count int, size uint64, strict bool, fresh []byte) []*mem {
	n := (size + chunkMask) >> chunkShift
	n = (n + dirMask) >> dirShift
	ms := make([]mem, count)
	out := make([]*mem, count)
	chunks := make([][][]byte, uint64(count)*n)
	stamps := make([][][]uint64, uint64(count)*n)
	var shadow [][][]uint64
	if strict {
		shadow = make([][][]uint64, uint64(count)*n)
	}
	for i := range ms {
		lo, hi := uint64(i)*n, uint64(i+1)*n
		ms[i] = mem{size: size, fresh: fresh, chunks: chunks[lo:hi:hi], strict: strict, stamps: stamps[lo:hi:hi]}
		if strict {
			ms[i].shadow = shadow[lo:hi:hi]
		}
		out[i] = &ms[i]
	}
	return out
}

// in reports whether [a, a+n) lies inside the memory.
func (m *mem) in(a, n uint64) bool { return a <= m.size && n <= m.size-a }

// read copies len(dst) bytes at a into dst. The range must be inside.
func (m *mem) read(a uint64, dst []byte) {
	for len(dst) > 0 {
		c, off := a>>chunkShift, a&chunkMask
		n := copy(dst, m.chunkOrPoison(c)[off:])
		dst = dst[n:]
		a += uint64(n)
	}
}

// view returns the n bytes at a without copying when they lie in one
// chunk (ok false otherwise). The slice is read only, and valid until the
// next write to the memory (a first write replaces a fresh chunk).
func (m *mem) view(a, n uint64) (b []byte, ok bool) {
	c, off := a>>chunkShift, a&chunkMask
	if off+n > chunkSize {
		return nil, false
	}
	return m.chunkOrPoison(c)[off : off+n : off+n], true
}

func (m *mem) chunkOrPoison(c uint64) []byte {
	if m.released {
		panic(errReleased)
	}
	if dir := m.chunks[c>>dirShift]; dir != nil && dir[c&dirMask] != nil {
		return dir[c&dirMask]
	}
	return m.fresh
}

// write copies src to a. The range must be inside.
func (m *mem) write(a uint64, src []byte) {
	for len(src) > 0 {
		n := copy(m.claim(a, min(uint64(len(src)), chunkSize-a&chunkMask)), src)
		src = src[n:]
		a += uint64(n)
	}
}

// claimWhole is claim for n bytes at a that may cross a chunk border:
// false when they do (and nothing is claimed; the caller writes them).
func (m *mem) claimWhole(a, n uint64) ([]byte, bool) {
	if a&chunkMask+n > chunkSize {
		return nil, false
	}
	return m.claim(a, n), true
}

// claim returns the n bytes at a, which lie in one chunk, for the caller
// to overwrite whole before the memory is read again: they count as
// written already (the watch told, the stripes stamped, in strict mode
// the bytes marked), as write counts its bytes. A chunk created here holds
// the fresh pattern outside them.
func (m *mem) claim(a, n uint64) []byte {
	if m.released {
		panic(errReleased)
	}
	if m.watch != nil {
		m.watch.wrote(a, n)
	}
	c, off := a>>chunkShift, a&chunkMask
	ch, created := entry(m.chunks, c, newChunk)
	if m.isShared(c) {
		ch = m.unshare(c)
	}
	if created {
		copy(ch[:off], m.fresh)
		copy(ch[off+n:], m.fresh[off+n:])
		entry(m.stamps, c, newStamps)
	}
	if n == 0 {
		return ch[off:off]
	}
	if m.strict {
		m.mark(c, off, n)
	}
	if m.clock != nil {
		st := m.stamps[c>>dirShift][c&dirMask]
		for i, e := off>>stripeShift, (off+n-1)>>stripeShift; i <= e; i++ {
			st[i] = *m.clock
		}
		st[chunkStripes] = *m.clock
	}
	return ch[off : off+n : off+n]
}

// rewrite writes src to a as write does, except that a stripe whose bytes
// src leaves as they were is not copied, stamped or watched (its bytes,
// and so anything decoded from them, did not change); in strict mode all
// of [a, a+len(src)) is marked written, as a write marks it.
func (m *mem) rewrite(a uint64, src []byte) {
	for len(src) > 0 {
		n := min(uint64(len(src)), stripeSize-a&(stripeSize-1)) // inside one stripe, so one chunk
		c, off := a>>chunkShift, a&chunkMask
		if bytes.Equal(m.chunkOrPoison(c)[off:off+n], src[:n]) {
			if m.strict {
				m.mark(c, off, n)
			}
		} else {
			m.write(a, src[:n])
		}
		src = src[n:]
		a += n
	}
}

// changedUnitsIn appends to dst, in increasing order and once each, the
// index i of every unit [a+i*unit, a+(i+1)*unit) of [a, a+n) that shares
// a stripe written while the clock read since or later. A chunk not
// written since is passed over by its own stamp, a written one stripe by
// stripe.
func (m *mem) changedUnitsIn(dst []int, a, n, unit, since uint64) []int {
	if m.released {
		panic(errReleased)
	}
	last := uint64(1<<64 - 1)
	for s, e := a>>stripeShift, (a+n-1)>>stripeShift; s <= e; {
		c := s >> (chunkShift - stripeShift)
		ce := min(e, (c+1)<<(chunkShift-stripeShift)-1) // the last stripe in this chunk
		dir := m.stamps[c>>dirShift]
		if dir == nil || dir[c&dirMask] == nil || dir[c&dirMask][chunkStripes] < since {
			s = ce + 1
			continue
		}
		st := dir[c&dirMask]
		for ; s <= ce; s++ {
			if st[s&(chunkStripes-1)] < since {
				continue
			}
			lo, hi := max(s<<stripeShift, a)-a, min((s+1)<<stripeShift, a+n)-a
			for j := max(lo/unit, last+1); j*unit < hi; j++ {
				dst = append(dst, int(j))
				last = j
			}
		}
	}
	return dst
}

// changedUnits is a mask of the units of unit bytes of [a, a+n) (at most
// 64 of them; the last may be short): bit j is set when bytes
// [a+j*unit, a+(j+1)*unit) share a stripe written while the clock read
// since or later.
func (m *mem) changedUnits(a, n, unit, since uint64) uint64 {
	if m.released {
		panic(errReleased)
	}
	var mask uint64
	for s, e := a>>stripeShift, (a+n-1)>>stripeShift; s <= e; s++ {
		c := s >> (chunkShift - stripeShift)
		dir := m.stamps[c>>dirShift]
		if dir == nil || dir[c&dirMask] == nil || dir[c&dirMask][chunkStripes] < since {
			s |= chunkStripes - 1 // nothing in this chunk: on to the next
			continue
		}
		if dir[c&dirMask][s&(chunkStripes-1)] < since {
			continue
		}
		lo, hi := max(s<<stripeShift, a)-a, min((s+1)<<stripeShift, a+n)-a
		for j := lo / unit; j*unit < hi; j++ {
			mask |= 1 << j
		}
	}
	return mask
}

func (m *mem) mark(c, off, n uint64) {
	sh, _ := entry(m.shadow, c, newShadow)
	i, end := off, off+n
	if b := i & 63; b != 0 && i < end { // the head of a word
		cnt := min(64-b, end-i)
		sh[i>>6] |= (1<<cnt - 1) << b
		i += cnt
	}
	if w := end>>6 - i>>6; i < end && w > 0 { // whole words
		ws := sh[i>>6 : i>>6+w]
		for k := range ws {
			ws[k] = ^uint64(0)
		}
		i += w << 6
	}
	if i < end { // the tail of a word
		sh[i>>6] |= 1<<(end-i) - 1
	}
}

// unwritten returns the first address in [a, a+n) never written, if any. It
// is meaningful only in strict mode (otherwise it reports nothing).
func (m *mem) unwritten(a, n uint64) (uint64, bool) {
	if m.released {
		panic(errReleased)
	}
	if !m.strict {
		return 0, false
	}
	for end := a + n; a < end; {
		c, off := a>>chunkShift, a&chunkMask
		cnt := min(end-a, chunkSize-off)
		dir := m.shadow[c>>dirShift]
		if dir == nil || dir[c&dirMask] == nil {
			return a, true
		}
		if i, bad := firstClear(dir[c&dirMask], off, off+cnt); bad {
			return a - off + i, true
		}
		a += cnt
	}
	return 0, false
}

// firstClear is the first clear bit of sh in [lo, hi), if any.
func firstClear(sh []uint64, lo, hi uint64) (uint64, bool) {
	for lo < hi {
		w, b := lo>>6, lo&63
		nb := min(64-b, hi-lo) // bits of this word in range
		miss := ^sh[w] >> b
		if nb < 64 {
			miss &= 1<<nb - 1
		}
		if miss != 0 {
			return lo + uint64(bits.TrailingZeros64(miss)), true
		}
		lo += nb
	}
	return 0, false
}
