package sim

import (
	"encoding/binary"
	"strconv"
	"sync"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// This file holds the memory access the compute ops share: whole-tensor
// untilize/tilize through the simulated banks, page reads and writes with
// the hardware's address faults, and per-op scratch buffers.

// tileSegs[i] is the element offset, inside one tile page, of the 16
// contiguous elements of tile row i/2, columns (i%2)*16 .. (i%2)*16+15.
var tileSegs = func() (s [2 * tt.TileSize]int) {
	for i := range s {
		s[i] = TileElem(i/2, (i%2)*tt.FaceSize)
	}
	return
}()

// untilizeTileRows copies the first rows rows of one tile page into a
// row-major view: dst is the view at the tile's top-left element, stride
// the view's row length. (The 16-element segments move through a local
// array: inline moves, not a memmove call each.)
func untilizeTileRows(dst []bf16.BF16, stride int, page []bf16.BF16, rows int) {
	for i, off := range tileSegs[:2*rows] {
		o := (i>>1)*stride + (i&1)*tt.FaceSize
		seg := *(*[tt.FaceSize]bf16.BF16)(page[off : off+tt.FaceSize])
		*(*[tt.FaceSize]bf16.BF16)(dst[o : o+tt.FaceSize]) = seg
	}
}

// tilizeTile is the inverse of untilizeTileRows for a whole tile.
func tilizeTile(page []bf16.BF16, src []bf16.BF16, stride int) {
	for i, off := range tileSegs {
		o := (i>>1)*stride + (i&1)*tt.FaceSize
		seg := *(*[tt.FaceSize]bf16.BF16)(src[o : o+tt.FaceSize])
		*(*[tt.FaceSize]bf16.BF16)(page[off : off+tt.FaceSize]) = seg
	}
}

// geom is the 2-D geometry of a spec: logical rows are outer*h rows of w
// elements; the padded view (what the pages hold, untilized) has outer*hp
// rows of wp elements.
type geom struct {
	outer, h, w, hp, wp int
}

func geomOf(s tt.Spec) geom {
	n := len(s.Shape)
	pad := func(x int) int {
		if s.Layout == tt.Tile {
			return (x + tt.TileSize - 1) / tt.TileSize * tt.TileSize
		}
		return x
	}
	g := geom{outer: 1, h: 1, hp: 1, w: s.Shape[n-1], wp: s.Shape[n-1]}
	if n >= 2 {
		g.wp = pad(g.w)
		g.h = s.Shape[n-2]
		g.hp = pad(g.h)
		for _, x := range s.Shape[:n-2] {
			g.outer *= x
		}
	}
	return g
}

// rows is the number of logical rows.
func (g geom) rows() int { return g.outer * g.h }

// prow is the padded-view row of logical row l.
func (g geom) prow(l int) int { return (l/g.h)*g.hp + l%g.h }

// size is the element count of the padded view.
func (g geom) size() int { return g.outer * g.hp * g.wp }

// scratch holds an op's working buffers; they are pooled so that steady-state
// runs do not allocate.
type scratch struct {
	page  []byte
	bufs  [8][]bf16.BF16
	f32   []float32
	words []uint32
	phys  []uint32
	ptRow []byte
	bytes [4][]byte
	io    opIO
	// paged_update_cache's pending write-backs (update_cache.go flush)
	ucPend  []ucWrite
	ucBytes []byte
	// a linear's output rows and widened input rows (ref.MatRows)
	outRows [][]bf16.BF16
	inRows  [][]float32
}

// bytesN returns byte scratch buffer i with n bytes (contents unspecified).
func (s *scratch) bytesN(i, n int) []byte {
	if cap(s.bytes[i]) < n {
		s.bytes[i] = make([]byte, n)
	}
	return s.bytes[i][:n]
}

var scratchPool = sync.Pool{New: func() any { return &scratch{page: make([]byte, 4096)} }}

func getScratch() *scratch  { return scratchPool.Get().(*scratch) }
func putScratch(s *scratch) { scratchPool.Put(s) }

// buf returns scratch buffer i with n elements (contents unspecified).
func (s *scratch) buf(i, n int) []bf16.BF16 {
	if cap(s.bufs[i]) < n {
		s.bufs[i] = make([]bf16.BF16, n)
	}
	return s.bufs[i][:n]
}

func (s *scratch) pageBuf(n int) []byte {
	if cap(s.page) < n {
		s.page = make([]byte, n)
	}
	return s.page[:n]
}

func (s *scratch) floats(n int) []float32 {
	if cap(s.f32) < n {
		s.f32 = make([]float32, n)
	}
	return s.f32[:n]
}

// rowsOut and rowsIn are slices of n row slices (contents unspecified).
func (s *scratch) rowsOut(n int) [][]bf16.BF16 {
	if cap(s.outRows) < n {
		s.outRows = make([][]bf16.BF16, n)
	}
	return s.outRows[:n]
}

func (s *scratch) rowsIn(n int) [][]float32 {
	if cap(s.inRows) < n {
		s.inRows = make([][]float32, n)
	}
	return s.inRows[:n]
}

// u32x is a second uint32 buffer (sdpa's block ids; u32 holds cur_pos).
func (s *scratch) u32x(n int) []uint32 {
	if cap(s.phys) < n {
		s.phys = make([]uint32, n)
	}
	return s.phys[:n]
}

func (s *scratch) u32(n int) []uint32 {
	if cap(s.words) < n {
		s.words = make([]uint32, n)
	}
	return s.words[:n]
}

// opIO is one launch's access context: the op name (for faults and
// findings) and whether a read of unwritten memory was already reported.
type opIO struct {
	d        *Device
	op       string
	reported bool
	// checkReads turns on the strict never-written check for pageIO reads.
	// Ops set it only around reads whose garbage would be used as control
	// data or attended values (ids, positions, page tables, KV tiles); rows
	// of activations that a skipped user never got are garbage on the card
	// too and harmless.
	checkReads bool
}

// pageIO reads or writes one page of a buffer at its placement (§6.3); an
// address outside the memory is a Fault. In strict mode the first read of
// never-written bytes of a launch is a Finding (when checkReads is set).
func (x *opIO) pageIO(b *buffer, p int, buf []byte, write bool) error {
	m, a, loc, err := x.locate(b, p, len(buf))
	if err != nil {
		return err
	}
	if write {
		m.write(a, buf)
		return nil
	}
	m.read(a, buf)
	x.checkUnwritten(b, p, m, a, loc, len(buf))
	return nil
}

// pageView is pageIO's read without the copy where it can: the page's
// bytes in memory when they lie in one chunk, else read into buf. The
// result is read only and valid until the next write to that memory.
func (x *opIO) pageView(b *buffer, p int, buf []byte) ([]byte, error) {
	m, a, loc, err := x.locate(b, p, len(buf))
	if err != nil {
		return nil, err
	}
	v, ok := m.view(a, uint64(len(buf)))
	if !ok {
		m.read(a, buf)
		v = buf
	}
	x.checkUnwritten(b, p, m, a, loc, len(buf))
	return v, nil
}

// claimPage is pageIO's write without the copy where it can: the bytes of
// page p in memory, when they lie in one chunk, for the caller to fill
// whole (mem.claim); inPlace false otherwise, and the caller writes the
// page through pageIO.
func (x *opIO) claimPage(b *buffer, p int) (page []byte, inPlace bool, err error) {
	m, a, _, err := x.locate(b, p, int(b.pageSize))
	if err != nil {
		return nil, false, err
	}
	page, inPlace = m.claimWhole(a, b.pageSize)
	return page, inPlace, nil
}

// locate returns the memory and offset of n bytes of page p, or the Fault
// of an address outside the memory.
func (x *opIO) locate(b *buffer, p, n int) (*mem, uint64, PageLoc, error) {
	d := x.d
	loc := d.pageLoc(b, p)
	if loc.Type == tt.DRAM {
		m, a := d.dramAt(loc.Bank, loc.Addr)
		if !m.in(a, uint64(n)) {
			return nil, 0, loc, &Fault{Op: x.op, Core: 0, Space: "DRAM bank " + strconv.Itoa(loc.Bank), Addr: loc.Addr, Len: n}
		}
		return m, a, loc, nil
	}
	if loc.Bank >= len(d.l1) || !d.l1[loc.Bank].in(loc.Addr, uint64(n)) {
		return nil, 0, loc, &Fault{Op: x.op, Core: loc.Bank, Space: "L1", Addr: loc.Addr, Len: n}
	}
	return d.l1[loc.Bank], loc.Addr, loc, nil
}

// checkUnwritten reports, in strict mode and when the launch checks its
// reads, the first never-written byte of a page read at m[a:a+n].
func (x *opIO) checkUnwritten(b *buffer, p int, m *mem, a uint64, loc PageLoc, n int) {
	if !x.d.opt.Strict || x.reported || !x.checkReads {
		return
	}
	if at, bad := m.unwritten(a, uint64(n)); bad {
		x.reported = true
		x.d.find(Finding{Class: ReadUnwritten, Op: x.op, Core: -1, User: -1, Index: int64(p), Tensor: b.id, Addr: loc.Addr,
			Detail: spaceName(loc) + " byte " + hex(at-a+loc.Addr) + " of page " + itoa(p) + " was never written (poison)"})
	}
}

// readPadded untilizes a BF16 tensor into its padded row-major view (dst
// has geomOf(spec).size() elements). ROW_MAJOR pages are copied as rows.
func (x *opIO) readPadded(s *scratch, b *buffer, dst []bf16.BF16) error {
	return x.untilize(s, b, dst, false)
}

// readRows is readPadded for ops that use only the logical rows of the
// padded view: the padding rows of dst are left as they were. Every page
// is still read (its faults and findings are the same).
func (x *opIO) readRows(s *scratch, b *buffer, dst []bf16.BF16) error {
	return x.untilize(s, b, dst, true)
}

// untilize reads every page of b into its padded view dst: with
// logicalOnly, only the tile rows that hold logical rows.
func (x *opIO) untilize(s *scratch, b *buffer, dst []bf16.BF16, logicalOnly bool) error {
	pg := s.pageBuf(int(b.pageSize))
	if b.spec.Layout != tt.Tile {
		w := int(b.pageSize) / 2
		for p := 0; p < b.numPages; p++ {
			v, err := x.pageView(b, p, pg)
			if err != nil {
				return err
			}
			copy(dst[p*w:(p+1)*w], bf16.FromBytes(v))
		}
		return nil
	}
	g := b.g
	wt := g.wp / tt.TileSize
	for p := 0; p < b.numPages; p++ {
		v, err := x.pageView(b, p, pg)
		if err != nil {
			return err
		}
		tr, tc := p/wt, p%wt
		rows := tt.TileSize
		if logicalOnly {
			rows = g.tileRowsUsed(tr)
		}
		untilizeTileRows(dst[tr*tt.TileSize*g.wp+tc*tt.TileSize:], g.wp, bf16.FromBytes(v), rows)
	}
	return nil
}

// writePadded tilizes a padded row-major view into the tensor's pages. When
// only is not nil, page p is written only if only(p) is true.
func (x *opIO) writePadded(s *scratch, b *buffer, src []bf16.BF16, only func(p int) bool) error {
	pg := s.pageBuf(int(b.pageSize))
	view := bf16.FromBytes(pg)
	if b.spec.Layout != tt.Tile {
		w := int(b.pageSize) / 2
		for p := 0; p < b.numPages; p++ {
			if only != nil && !only(p) {
				continue
			}
			copy(view, src[p*w:(p+1)*w])
			if err := x.pageIO(b, p, bf16Bytes(pg, view), true); err != nil {
				return err
			}
		}
		return nil
	}
	wp := b.g.wp
	wt := wp / tt.TileSize
	for p := 0; p < b.numPages; p++ {
		if only != nil && !only(p) {
			continue
		}
		tr, tc := p/wt, p%wt
		tilizeTile(view, src[tr*tt.TileSize*wp+tc*tt.TileSize:], wp)
		if err := x.pageIO(b, p, bf16Bytes(pg, view), true); err != nil {
			return err
		}
	}
	return nil
}

// tileRowsUsed is how many rows of tile row tr hold logical rows in a
// TILE geometry: the first ones of the tile; the rest are padding.
func (g geom) tileRowsUsed(tr int) int {
	k := tr % (g.hp / tt.TileSize) // tile row inside its outer block
	return max(0, min(tt.TileSize, g.h-k*tt.TileSize))
}

// writeRows writes a tensor from the logical rows of its padded view src:
// columns [0, w) of each logical row; every padding element of a page is
// written as zero, as writePadded does when src's padding is zero. The
// padding of src is not read.
func (x *opIO) writeRows(s *scratch, b *buffer, src []bf16.BF16) error {
	if b.spec.Layout != tt.Tile {
		return x.writePadded(s, b, src, nil) // the padded view is the logical one
	}
	sb := bf16.View(src) // read only
	g := b.g
	wt := g.wp / tt.TileSize
	for p := 0; p < b.numPages; p++ {
		tr, tc := p/wt, p%wt
		c0 := tc * tt.TileSize
		cols := min(tt.TileSize, g.w-c0)
		rows := g.tileRowsUsed(tr)
		page, inPlace, err := x.claimPage(b, p)
		if err != nil {
			return err
		}
		if !inPlace {
			page = s.pageBuf(int(b.pageSize))
		}
		if rows < tt.TileSize || cols < tt.TileSize {
			clear(page)
		}
		for i := range rows {
			row := sb[2*((tr*tt.TileSize+i)*g.wp+c0):]
			for lo := 0; lo < cols; lo += tt.FaceSize {
				at := 2 * TileElem(i, lo)
				if cols-lo >= tt.FaceSize {
					moveFaceRow(page[at:], row[2*lo:])
				} else {
					copy(page[at:at+2*(cols-lo)], row[2*lo:2*cols])
				}
			}
		}
		if !inPlace {
			if err := x.pageIO(b, p, page, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// bf16Bytes returns pg holding view's values: view aliases pg when
// bf16.FromBytes could alias it (little-endian host, aligned), otherwise the
// values are encoded into pg.
func bf16Bytes(pg []byte, view []bf16.BF16) []byte {
	if len(view) > 0 && len(pg) > 0 && &bf16.FromBytes(pg[:2])[0] == &view[0] {
		return pg
	}
	for i, v := range view {
		binary.LittleEndian.PutUint16(pg[2*i:], uint16(v))
	}
	return pg
}

// readLogical reads a BF16 tensor's logical elements in row-major order.
func (x *opIO) readLogical(s *scratch, slot int, b *buffer, dst []bf16.BF16) error {
	g := b.g
	if g.h == g.hp && g.w == g.wp {
		return x.readPadded(s, b, dst)
	}
	pad := s.buf(slot, g.size())
	if err := x.readRows(s, b, pad); err != nil {
		return err
	}
	for l := 0; l < g.rows(); l++ {
		r := g.prow(l) * g.wp
		copy(dst[l*g.w:(l+1)*g.w], pad[r:r+g.w])
	}
	return nil
}

// readWords reads page p of a 4-byte ROW_MAJOR tensor as uint32 values.
func (x *opIO) readWords(s *scratch, b *buffer, p int, dst []uint32) error {
	pg := s.pageBuf(int(b.pageSize))
	if err := x.pageIO(b, p, pg, false); err != nil {
		return err
	}
	for i := range dst {
		dst[i] = binary.LittleEndian.Uint32(pg[4*i:])
	}
	return nil
}

// snapshot copies a live operand's geometry: launches keep these copies, so
// a replay uses the recorded addresses even after the tensor is freed.
func snapshot(b *buffer) *buffer {
	c := *b
	return &c
}

// operandOf returns the live buffer of an op operand. A tensor that is not
// allocated fails before any op check, as ttnn's launch checks every
// tensor argument first (ttnn/api/ttnn/device_operation.hpp launch,
// tt.MsgInputNotAllocated).
func (d *Device) operandOf(op string, t tt.Tensor) (*buffer, error) {
	b, ok := d.live(t)
	if !ok || b.addr != t.Addr {
		return nil, tt.Errorf(op, tt.MsgInputNotAllocated)
	}
	return b, nil
}

// opKey builds a program-cache key in the device's key buffer: the op
// name, its attributes and the specs of its tensors (never addresses or
// contents).
func (d *Device) opKey(name string, attrs attrKey, bs ...*buffer) []byte {
	k := append(d.kb[:0], name...)
	for _, a := range attrs {
		k = strconv.AppendUint(append(k, '|'), a, 16)
	}
	for _, b := range bs {
		k = append(k, '|')
		if b == nil {
			k = append(k, '-')
			continue
		}
		k = append(k, b.key...)
	}
	d.kb = k
	return k
}

// attrKey is an op's attributes as they enter its program-cache key (each
// op defines the meaning of the two words; the op name tells them apart).
type attrKey [2]uint64

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// simpleProgram is the compiled program of a compute op: it keeps only
// its static CB region's end and the core range of its first CB
// (checkCBRegion). An op whose CBs the simulator does not lay out
// (opLaunch.cbs unset) has an empty region, at the L1 unreserved base.
type simpleProgram struct {
	end   uint64
	cores coreRange
}

func (p simpleProgram) cbEnd() uint64 { return p.end }

// runSimple is the common host path of the compute ops: operands must be
// live, the program cache is consulted (validate on a miss), and the launch
// is executed or recorded. Eagerly the launch runs at once on the live
// buffers from a device-owned launch value (no allocation); during capture
// it is recorded with snapshots of the operands (their addresses now).
func (d *Device) runSimple(name string, attrs attrKey, bufs []*buffer, validate func() error, l *opLaunch) error {
	key := d.opKey(name, attrs, bufs...)
	p, err := d.lookup(name, key, validate, func() (program, error) {
		if l.bind != nil {
			if err := l.bind(d, name, bufs); err != nil {
				return nil, err
			}
		}
		if l.cbs != nil {
			return l.cbs(d, bufs), nil
		}
		return simpleProgram{end: d.opt.L1UnreservedBase}, nil
	})
	if err != nil {
		return err
	}
	if err := d.checkCBRegion(name, p); err != nil {
		return err
	}
	l.op = name
	if d.capturing {
		d.recorded = append(d.recorded, d.record(l, bufs))
		return nil
	}
	d.eager = *l
	d.eager.bufs = bufs
	err = d.eager.exec(d)
	d.eager = opLaunch{}
	return err
}

// opErr is a refusal with ttnn's text (the table tt/checks.tsv lists each
// one with its tt-metal path:line), its arguments printed as ttnn's fmt
// prints them (ttnnArgs).
func opErr(op, format string, a ...any) error { return tt.Errorf(op, format, ttnnArgs(a)...) }

// ttnnArgs renders the enum arguments of a ttnn text as TT_FATAL's fmt
// call does at the pin: DataType through its own formatter
// ("DataType::INT32", tt_metal/impl/tensor/tensor_types.cpp:126-143), every
// other enum (Layout, TensorMemoryLayout, BufferType) through the generic
// enum formatter, enchantum::scoped::to_string ("Layout::TILE",
// tt_stl/tt_stl/fmt.hpp:54-64), which prints the type's unqualified name,
// "::" and the enumerator. Other arguments pass through.
func ttnnArgs(a []any) []any {
	out := a
	for i, x := range a {
		var s string
		switch v := x.(type) {
		case tt.DType:
			s = "DataType::" + v.String()
		case tt.Layout:
			s = "Layout::" + v.String()
		case tt.MemoryLayout:
			s = "TensorMemoryLayout::" + v.String()
		case tt.BufferType:
			s = "BufferType::" + v.String()
		default:
			continue
		}
		if &out[0] == &a[0] {
			out = append([]any(nil), a...)
		}
		out[i] = s
	}
	return out
}

// contractErr is a refusal of offcard's own contract where ttnn has no
// check of its own (an input the simulator does not model, or a
// caller-passed output ttnn would take unchecked): its text starts with
// tt.ContractPrefix, so it is never mistaken for a text of ttnn's.
func contractErr(op, format string, a ...any) error {
	return tt.Errorf(op, tt.ContractPrefix+format, a...)
}

// ttShape prints a shape as tt-metal's operator<< for Shape does
// ("Shape([1, 1, 8, 768])", tt_metal/common/shape.cpp).
func ttShape(s []int) string {
	b := []byte("Shape([")
	for i, x := range s {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return string(append(b, "])"...))
}

func wantBF16(op, what string, b *buffer) error {
	if b.spec.DType != tt.BF16 {
		return contractErr(op, "%s must be BFLOAT16, got %v", what, b.spec.DType)
	}
	return nil
}

func wantLayout(op, what string, b *buffer, l tt.Layout) error {
	if b.spec.Layout != l {
		return contractErr(op, "%s must be %v, got %v", what, l, b.spec.Layout)
	}
	return nil
}

func wantRank(op, what string, b *buffer, r int) error {
	if len(b.spec.Shape) != r {
		return contractErr(op, "%s must be rank %d, got shape %v", what, r, b.spec.Shape)
	}
	return nil
}
