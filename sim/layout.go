package sim

import "github.com/offcard/offcard/tt"

// TileElem is the element index, inside one 32x32 tile page, of row r and
// column c (§6.6): four 16x16 faces stored face0 (rows 0-15, cols 0-15),
// face1 (rows 0-15, cols 16-31), face2 (rows 16-31, cols 0-15), face3, each
// face row-major.
func TileElem(r, c int) int {
	return ((r/tt.FaceSize)*2+c/tt.FaceSize)*tt.FaceSize*tt.FaceSize + (r%tt.FaceSize)*tt.FaceSize + c%tt.FaceSize
}

// forEachTileSeg calls f for every contiguous run of logical elements of tile
// page t: n elements starting at logical element index li land at element
// index ti of the page.
func forEachTileSeg(s tt.Spec, t int, f func(ti, li, n int)) {
	g := geomOf(s)
	wt := g.wp / tt.TileSize
	tr, tc := t/wt, t%wt
	// hp is a multiple of 32, so a tile's rows lie in one outer slice o,
	// from its row hh0 on.
	o, hh0 := tr*tt.TileSize/g.hp, tr*tt.TileSize%g.hp
	for r := range g.tileRowsUsed(tr) {
		for half := 0; half < 2; half++ {
			c0 := tc*tt.TileSize + half*tt.FaceSize
			n := min(g.w-c0, tt.FaceSize)
			if n <= 0 {
				continue
			}
			f(TileElem(r, half*tt.FaceSize), (o*g.h+hh0+r)*g.w+c0, n)
		}
	}
}

// writePages tilizes (or splits into rows) logical host bytes into the
// buffer's pages. TILE padding elements become zero.
func (d *Device) writePages(b *buffer, data []byte) {
	e := b.spec.DType.Size()
	n := b.pageSize
	if d.opt.L1 != L1Poison && b.bt == tt.DRAM {
		n = b.aligned // the padding goes out too, as zeros (Options.L1)
	}
	page := make([]byte, n)
	for p := 0; p < b.numPages; p++ {
		if b.spec.Layout == tt.Tile {
			clear(page)
			forEachTileSeg(b.spec, p, func(ti, li, n int) {
				copy(page[ti*e:(ti+n)*e], data[li*e:(li+n)*e])
			})
		} else {
			copy(page[:b.pageSize], data[uint64(p)*b.pageSize:])
		}
		m, a := d.memAt(d.pageLoc(b, p))
		m.write(a, page)
	}
}

// readPages untilizes the buffer's pages into logical bytes. In strict mode
// the first never-written byte of a page holding logical data is a Finding.
func (d *Device) readPages(b *buffer, op string) []byte {
	data := make([]byte, b.spec.Volume()*b.spec.DType.Size())
	d.readPagesInto(b, data, op, 0, nil)
	return data
}

// readPagesInto untilizes the buffer's pages into dst, its logical bytes:
// every page when since is 0, else only the pages written while the clock
// read since or later; changed, when set, hears of every run of elements
// written [lo, hi). A read by op (not "", i.e. not a Peek) reports the first
// never-written byte of a page as a strict Finding.
func (d *Device) readPagesInto(b *buffer, dst []byte, op string, since uint64, changed func(lo, hi int)) {
	e := b.spec.DType.Size()
	var spill []byte // a page that spans two chunks
	reported := op == ""
	for p := 0; p < b.numPages; p++ {
		loc := d.pageLoc(b, p)
		m, a := d.memAt(loc)
		if since > 0 && !m.writtenSince(a, b.pageSize, since) {
			continue
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
		if b.spec.Layout == tt.Tile {
			// The page's runs in logical order, adjacent ones told as one.
			lo, hi := 0, 0
			forEachTileSeg(b.spec, p, func(ti, li, n int) {
				copy(dst[li*e:(li+n)*e], page[ti*e:(ti+n)*e])
				if li != hi {
					if changed != nil && lo < hi {
						changed(lo, hi)
					}
					lo = li
				}
				hi = li + n
			})
			if changed != nil && lo < hi {
				changed(lo, hi)
			}
		} else {
			lo := int(uint64(p) * b.pageSize)
			n := copy(dst[lo:], page)
			if changed != nil {
				changed(lo/e, (lo+n)/e)
			}
		}
	}
}
