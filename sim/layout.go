package sim

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/offcard/offcard/tt"
)

// TileElem is the element index, inside one 32x32 tile page, of row r and
// column c (§6.6): four 16x16 faces stored face0 (rows 0-15, cols 0-15),
// face1 (rows 0-15, cols 16-31), face2 (rows 16-31, cols 0-15), face3, each
// face row-major.
func TileElem(r, c int) int {
	return ((r/tt.FaceSize)*2+c/tt.FaceSize)*tt.FaceSize*tt.FaceSize + (r%tt.FaceSize)*tt.FaceSize + c%tt.FaceSize
}

// tileRuns are the logical elements of one tile page: row r (r < rows)
// holds the n0 elements from first+r*stride on at page element
// TileElem(r, 0) and, when n1 > 0, the n1 elements after them at
// TileElem(r, FaceSize). A page's rows lie in one outer slice, since the
// padded height is a multiple of 32.
type tileRuns struct{ rows, first, stride, n0, n1 int }

// tileRunsOf describes tile page t of a TILE tensor of geometry g.
func tileRunsOf(g geom, t int) tileRuns {
	wt := g.wp / tt.TileSize
	tr, tc := t/wt, t%wt
	o, hh0 := tr*tt.TileSize/g.hp, tr*tt.TileSize%g.hp
	c0 := tc * tt.TileSize
	return tileRuns{rows: g.tileRowsUsed(tr), first: (o*g.h+hh0)*g.w + c0, stride: g.w,
		n0: min(g.w-c0, tt.FaceSize), n1: max(0, min(g.w-c0-tt.FaceSize, tt.FaceSize))}
}

// full reports whether the runs fill the page: no padding element.
func (t tileRuns) full() bool {
	return t.rows == tt.TileSize && t.n0 == tt.FaceSize && t.n1 == tt.FaceSize
}

// tilize copies the page's logical elements (e bytes each) from data,
// the tensor's logical bytes, into page; padding elements are left as
// they are.
func (t tileRuns) tilize(page, data []byte, e int) {
	const fs = tt.FaceSize
	for r := 0; r < t.rows; r++ {
		li, ti := t.first+r*t.stride, TileElem(r, 0)
		if e == 2 && t.n0 == fs && t.n1 == fs {
			moveFaceRow(page[ti*2:], data[li*2:])
			moveFaceRow(page[(ti+fs*fs)*2:], data[(li+fs)*2:])
			continue
		}
		copy(page[ti*e:], data[li*e:(li+t.n0)*e])
		if t.n1 > 0 {
			li, ti = li+fs, ti+fs*fs
			copy(page[ti*e:], data[li*e:(li+t.n1)*e])
		}
	}
}

// untilizeUnits copies into dst, the tensor's logical bytes, the page's
// logical elements that lie in the face rows (16 elements, 16*e bytes,
// numbered by their place in the page) whose bits mask sets (all of them:
// ^0), and calls changed (when set) with them as runs in increasing order,
// adjacent ones told as one. With diff, a face row whose bytes dst holds
// already is left and not told.
func (t tileRuns) untilizeUnits(dst, page []byte, e int, mask uint64, diff bool, changed func(lo, hi int)) {
	const fs = tt.FaceSize
	lo, hi := 0, 0
	for r := 0; r < t.rows; r++ {
		for half, n := range [2]int{t.n0, t.n1} {
			j := (r/fs*2+half)*fs + r%fs
			if n <= 0 || mask&(1<<j) == 0 {
				continue
			}
			li, ti := t.first+r*t.stride+half*fs, j*fs
			if n == fs && e == 2 {
				if diff && sameFaceRow(dst[li*2:], page[ti*2:]) {
					continue
				}
				moveFaceRow(dst[li*2:], page[ti*2:])
			} else {
				to, from := dst[li*e:(li+n)*e], page[ti*e:(ti+n)*e]
				if diff && bytes.Equal(to, from) {
					continue
				}
				copy(to, from)
			}
			if changed == nil {
				continue
			}
			if li != hi {
				if lo < hi {
					changed(lo, hi)
				}
				lo = li
			}
			hi = li + n
		}
	}
	if changed != nil && lo < hi {
		changed(lo, hi)
	}
}

// sameFaceRow reports whether the bf16 face rows (32 bytes) at a and b
// hold the same bytes, in four word loads each.
func sameFaceRow(a, b []byte) bool {
	x, y := (*[2 * tt.FaceSize]byte)(a), (*[2 * tt.FaceSize]byte)(b)
	le := binary.LittleEndian
	return le.Uint64(x[0:]) == le.Uint64(y[0:]) && le.Uint64(x[8:]) == le.Uint64(y[8:]) &&
		le.Uint64(x[16:]) == le.Uint64(y[16:]) && le.Uint64(x[24:]) == le.Uint64(y[24:])
}

// moveFaceRow copies one bf16 face row (16 elements, 32 bytes) from src to
// dst as an inline move: through a local, so the compiler does not call
// memmove for it.
func moveFaceRow(dst, src []byte) {
	seg := *(*[2 * tt.FaceSize]byte)(src)
	*(*[2 * tt.FaceSize]byte)(dst) = seg
}

// writePages tilizes (or splits into rows) logical host bytes into the
// buffer's pages. TILE padding elements become zero.
func (d *Device) writePages(b *buffer, data []byte) {
	e := b.spec.DType.Size()
	n := b.pageSize
	if d.opt.L1 != L1Poison && b.bt == tt.DRAM {
		n = b.aligned // the padding goes out too, as zeros (Options.L1)
	}
	var stage []byte     // a page that spans two chunks, written after it is made
	zero := isZero(data) // every page is zeros (a cache's first fill)
	for p := 0; p < b.numPages; p++ {
		m, a := d.memAt(d.pageLoc(b, p))
		page, inPlace := m.claimWhole(a, n)
		if !inPlace {
			if stage == nil {
				stage = make([]byte, n)
			}
			page = stage
		}
		switch {
		case zero:
			clear(page)
		case b.spec.Layout == tt.Tile:
			t := tileRunsOf(b.g, p)
			if !t.full() || n > b.pageSize {
				clear(page)
			}
			t.tilize(page, data, e)
		default:
			clear(page[copy(page[:b.pageSize], data[uint64(p)*b.pageSize:]):])
		}
		if !inPlace {
			m.write(a, page)
		}
	}
}

// isZero reports whether every byte of b is zero.
func isZero(b []byte) bool {
	for len(b) > 0 {
		n := min(len(b), len(zeroChunk))
		if !bytes.Equal(b[:n], zeroChunk[:n]) {
			return false
		}
		b = b[n:]
	}
	return true
}

// readPages untilizes the buffer's pages into logical bytes. In strict mode
// the first never-written byte of a page holding logical data is a Finding.
func (d *Device) readPages(b *buffer, op string) []byte {
	data := make([]byte, b.spec.Volume()*b.spec.DType.Size())
	d.readPagesInto(b, data, op, 0, nil)
	return data
}

// readPagesInto untilizes the buffer's pages into dst, its logical bytes:
// every page when since is 0, else only the pages (TILE: the face rows of
// the pages) that share a stripe written while the clock read since or
// later; changed, when set, hears in increasing order of the runs of
// elements [lo, hi) that may differ from what dst held: when since is 0,
// every run but those of pages holding only +0 bytes; after since, the
// runs read (TILE: the face rows whose bytes changed). A read by op (not "", i.e. not a Peek)
// reports the first never-written byte of a page as a strict Finding.
func (d *Device) readPagesInto(b *buffer, dst []byte, op string, since uint64, changed func(lo, hi int)) {
	e := b.spec.DType.Size()
	var spill []byte // a page that spans two chunks
	reported := op == ""
	// After since, a DRAM-interleaved tensor's pages are found from the
	// stamps of each bank's range of it (a KV cache: a decode step writes
	// a row or two of it), then read in increasing order as below.
	n, listed := b.numPages, false
	if since > 0 && b.bt == tt.DRAM && !b.spec.Memory.Sharded() {
		nb := d.arch.nbanks
		d.peekPages = d.peekPages[:0]
		for j := range nb {
			m, a := d.dramAt(j, b.addr)
			from := len(d.peekPages)
			d.peekPages = m.changedUnitsIn(d.peekPages, a, b.perBank, b.aligned, since)
			for i := from; i < len(d.peekPages); i++ {
				d.peekPages[i] = d.peekPages[i]*nb + j // the bank's i-th page
			}
		}
		slices.Sort(d.peekPages)
		for len(d.peekPages) > 0 && d.peekPages[len(d.peekPages)-1] >= b.numPages {
			d.peekPages = d.peekPages[:len(d.peekPages)-1]
		}
		n, listed = len(d.peekPages), true
	}
	for i := range n {
		p := i
		if listed {
			p = d.peekPages[i]
		}
		loc := d.pageLoc(b, p)
		m, a := d.memAt(loc)
		// After since, only what shares a changed stripe is read: of a TILE
		// page (1024 elements, 64 face rows of 16) those face rows, of a
		// ROW_MAJOR page the whole page.
		unit := b.pageSize
		if b.spec.Layout == tt.Tile {
			unit = uint64(tt.FaceSize * e)
		}
		mask := ^uint64(0)
		if since > 0 {
			if mask = m.changedUnits(a, b.pageSize, unit, since); mask == 0 {
				continue
			}
		}
		page, ok := m.view(a, b.pageSize) // read only
		if !ok {
			if spill == nil {
				spill = make([]byte, b.pageSize)
			}
			m.read(a, spill)
			page = spill
		}
		if !reported {
			if at, bad := m.unwritten(a, b.pageSize); bad {
				reported = true
				d.find(Finding{Class: ReadUnwritten, Op: op, Core: -1, User: -1, Index: int64(p), Tensor: b.id, Addr: loc.Addr,
					Detail: spaceName(loc) + " byte " + hex(at-a+loc.Addr) + " of page " + itoa(p) + " was never written (poison)"})
			}
		}
		// A first read counts from +0: a page of +0 is read but not told.
		tell := changed
		if since == 0 && tell != nil && isZero(page) {
			tell = nil
		}
		if b.spec.Layout == tt.Tile {
			tileRunsOf(b.g, p).untilizeUnits(dst, page, e, mask, since > 0, tell)
		} else {
			lo := int(uint64(p) * b.pageSize)
			n := copy(dst[lo:], page)
			if tell != nil {
				tell(lo/e, (lo+n)/e)
			}
		}
	}
}
