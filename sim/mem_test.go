package sim

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

func newDev(t *testing.T, o Options) *Device {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustAlloc(t *testing.T, d *Device, s tt.Spec) tt.Tensor {
	t.Helper()
	x, err := d.Allocate(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func rmSpec(shape ...int) tt.Spec {
	return tt.Spec{Shape: shape, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}
}

// §6.3: bank = page % nbanks, address = base + (page / nbanks) * aligned page
// size; §6.2 alignment 32 (Wormhole) / 64 (Blackhole); every buffer starts at bank 0.
func TestPagePlacement(t *testing.T) {
	for _, c := range []struct {
		arch    Arch
		spec    tt.Spec
		page    int
		bank    int
		off     uint64 // address - base
		aligned uint64
	}{
		{Wormhole, rmSpec(8, 1), 0, 0, 0, 32},
		{Wormhole, rmSpec(8, 1), 7, 7, 0, 32},
		{Wormhole, rmSpec(20, 1), 13, 1, 32, 32},
		{Blackhole, rmSpec(20, 1), 13, 5, 64, 64},
		{Blackhole, rmSpec(20, 17), 9, 1, 128, 128}, // 68 B page -> 128 B slot
		{Wormhole, tt.Spec{Shape: []int{4, 8, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}, 100, 4, 8 * 2048, 2048},
		{Wormhole, tt.Spec{Shape: []int{64, 64}, DType: tt.FP32, Layout: tt.Tile, Memory: tt.DRAMInterleaved}, 3, 3, 0, 4096},
		// L1 interleaved: banks are the worker cores, 16 B alignment.
		{Wormhole, tt.Spec{Shape: []int{70, 3}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.L1Interleaved}, 65, 1, 16, 16},
		// Height-sharded: shard i on core i.
		{Wormhole, tt.Spec{Shape: []int{1, 8, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(8, [2]int{32, 128})}, 13, 3, 2048, 2048},
	} {
		d := newDev(t, Options{Arch: c.arch})
		x := mustAlloc(t, d, c.spec)
		b := d.bufs.at(x.ID)
		if b.aligned != c.aligned {
			t.Errorf("%v %v: aligned page %d want %d", c.arch, c.spec, b.aligned, c.aligned)
		}
		l := d.pageLoc(b, c.page)
		if l.Bank != c.bank || l.Addr-x.Addr != c.off {
			t.Errorf("%v %v page %d: bank %d off %d, want bank %d off %d", c.arch, c.spec, c.page, l.Bank, l.Addr-x.Addr, c.bank, c.off)
		}
	}
}

// §6.1: Wormhole banks pair up on a channel at offsets 0 / bank size.
func TestWormholeChannelAliasing(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole, DRAMBankSize: 1 << 20})
	m0, a0 := d.dramAt(1, 64)
	m1, a1 := d.dramAt(0, 1<<20+64)
	if m0 != m1 || a0 != a1 {
		t.Fatal("bank 1 address 64 should alias bank 0 address 1 MiB + 64")
	}
	if m2, _ := d.dramAt(2, 0); m2 == m0 {
		t.Fatal("bank 2 shares bank 0's channel")
	}
}

// §6.6: tile face order; a host write tilizes and a read untilizes exactly.
func TestTileElemOrder(t *testing.T) {
	for _, c := range []struct{ r, c, want int }{
		{0, 0, 0}, {0, 15, 15}, {0, 16, 256}, {1, 0, 16}, {15, 31, 511},
		{16, 0, 512}, {16, 16, 768}, {31, 31, 1023}, {17, 3, 512 + 16 + 3},
	} {
		if got := TileElem(c.r, c.c); got != c.want {
			t.Errorf("TileElem(%d,%d)=%d want %d", c.r, c.c, got, c.want)
		}
	}
	seen := map[int]bool{}
	for r := 0; r < 32; r++ {
		for c := 0; c < 32; c++ {
			seen[TileElem(r, c)] = true
		}
	}
	if len(seen) != 1024 {
		t.Fatal("TileElem is not a bijection")
	}
}

// Host writes read back as written: random values, then over them zeros
// but the last element (past the first 64 KiB in the largest shape), then
// all zeros (the fast path of an all-zero write).
func TestTilizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][]int{{32, 32}, {5, 7}, {2, 3, 33, 65}, {1, 8, 32, 128}, {1, 1, 1, 1}, {1, 2, 160, 128}} {
		for _, arch := range []Arch{Wormhole, Blackhole} {
			d := newDev(t, Options{Arch: arch, Strict: true})
			s := tt.Spec{Shape: shape, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
			x := mustAlloc(t, d, s)
			random := make([]bf16.BF16, s.Volume())
			for i := range random {
				random[i] = bf16.BF16(rng.Uint32())
			}
			lastOnly := make([]bf16.BF16, s.Volume())
			lastOnly[len(lastOnly)-1] = 0x3F80
			for _, v := range [][]bf16.BF16{random, lastOnly, make([]bf16.BF16, s.Volume())} {
				h := tt.HostBF16(shape, tt.Tile, v)
				if err := d.WriteHost(x, h); err != nil {
					t.Fatal(err)
				}
				got, err := d.ReadHost(x)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.Data, h.Data) {
					t.Fatalf("%v %v: round trip differs", shape, arch)
				}
			}
			if f := d.Findings(); len(f) != 0 {
				t.Fatalf("unexpected findings %v", f)
			}
		}
	}
}

// The element at logical (row, col) of a [64, 64] tile tensor is in tile
// (row/32)*2 + col/32 at TileElem(row%32, col%32): checked in the raw bytes.
func TestTilizeBytes(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole})
	s := tt.Spec{Shape: []int{64, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	x := mustAlloc(t, d, s)
	v := make([]bf16.BF16, 64*64)
	for i := range v {
		v[i] = bf16.BF16(i)
	}
	if err := d.WriteHost(x, tt.HostBF16(s.Shape, tt.Tile, v)); err != nil {
		t.Fatal(err)
	}
	b := d.bufs.at(x.ID)
	for _, rc := range [][2]int{{0, 0}, {3, 40}, {33, 17}, {63, 63}, {20, 20}} {
		r, c := rc[0], rc[1]
		m, a := d.memAt(d.pageLoc(b, (r/32)*2+c/32))
		var two [2]byte
		m.read(a+uint64(2*TileElem(r%32, c%32)), two[:])
		if got := int(two[0]) | int(two[1])<<8; got != r*64+c {
			t.Errorf("(%d,%d): got %d", r, c, got)
		}
	}
}

// Fresh memory is poison, not zero; padding of TILE pages is zero-filled by
// the host write; strict reports reading never-written bytes.
func TestPoison(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole, Strict: true})
	x := mustAlloc(t, d, rmSpec(4))
	h, err := d.ReadHost(x)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Uint32s()[0]; got != 0x7FC17FC1 {
		t.Errorf("fresh int32 = %#x, want poison 0x7FC17FC1", got)
	}
	if f := d.Findings(); len(f) != 1 || f[0].Class != ReadUnwritten {
		t.Fatalf("findings %v", f)
	}
	if bf := h.BF16s(); !bf[0].IsNaN() {
		t.Error("poison is not a bf16 NaN")
	}
}

// §7: checks in order shape, dtype, page config; memory config may differ.
func TestWriteHostChecks(t *testing.T) {
	d := newDev(t, Options{})
	x := mustAlloc(t, d, rmSpec(8, 4))
	for _, c := range []struct {
		h    tt.HostTensor
		want string
	}{
		{tt.HostInt32([]int{8, 5}, tt.RowMajor, make([]int32, 40)), tt.MsgHostShape},
		{tt.HostFP32([]int{8, 5}, tt.Tile, make([]float32, 40)), tt.MsgHostShape},
		{tt.HostUint32([]int{8, 4}, tt.Tile, make([]uint32, 32)), tt.MsgHostDType},
		{tt.HostInt32([]int{8, 4}, tt.Tile, make([]int32, 32)), tt.MsgHostPageConfig},
	} {
		err := d.WriteHost(x, c.h)
		if !tt.HasMsg(err, c.want) {
			t.Errorf("got %v want %q", err, c.want)
		}
	}
	if err := d.WriteHost(x, tt.HostInt32([]int{8, 4}, tt.RowMajor, make([]int32, 32))); err != nil {
		t.Fatal(err)
	}
	if err := d.Free(x); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteHost(x, tt.HostInt32([]int{8, 4}, tt.RowMajor, make([]int32, 32))); !tt.HasMsg(err, tt.MsgBufferNotAllocated) {
		t.Errorf("write to freed: %v", err)
	}
}

// Writing a [B,W] row-major table writes page b = row b at its bank slot and
// leaves the alignment pad of the slot untouched (poison here).
func TestRowMajorPadUntouched(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole})
	x := mustAlloc(t, d, rmSpec(2, 1))
	if err := d.WriteHost(x, tt.HostInt32([]int{2, 1}, tt.RowMajor, []int32{5, 6})); err != nil {
		t.Fatal(err)
	}
	m, a := d.dramAt(1, x.Addr)
	got := make([]byte, 8)
	m.read(a, got)
	if !reflect.DeepEqual(got, []byte{6, 0, 0, 0, 0xC1, 0x7F, 0xC1, 0x7F}) {
		t.Errorf("bank 1 slot = % x", got)
	}
}

// PeekInto reads back exactly what Peek does, and on later calls only the
// pages written since: the changed ranges cover every element a write
// touched and no page nobody wrote.
func TestPeekInto(t *testing.T) {
	pastEnd := 0
	for _, c := range []struct {
		layout tt.Layout
		shape  []int
		page   int // the page written below (one without padding)
	}{
		{tt.Tile, []int{4, 64, 64}, 3},
		{tt.Tile, []int{2, 2, 64, 32}, 3}, // one tile wide, as the KV caches
		{tt.Tile, []int{3, 40, 48}, 0},    // padding rows and columns
		{tt.RowMajor, []int{4, 64, 64}, 3},
	} {
		layout := c.layout
		d := newDev(t, Options{Arch: Wormhole})
		x := mustAlloc(t, d, tt.Spec{Shape: c.shape, DType: tt.BF16, Layout: layout, Memory: tt.DRAMInterleaved})
		n := x.Spec.Volume()
		fill := func(seed int) []bf16.BF16 {
			v := make([]bf16.BF16, n)
			for i := range v {
				v[i] = bf16.BF16(i*7 + seed)
			}
			return v
		}
		if err := d.WriteHost(x, tt.HostBF16(x.Spec.Shape, layout, fill(1))); err != nil {
			t.Fatal(err)
		}
		dst := make([]byte, 2*n)
		var got [][2]int
		var since uint64
		// peek reads the changes since the last peek into dst, noting the
		// runs in got, and checks dst against Peek.
		peek := func(what string) {
			t.Helper()
			got = nil
			var err error
			if since, err = d.PeekInto(x, dst, since, func(lo, hi int) { got = append(got, [2]int{lo, hi}) }); err != nil {
				t.Fatal(err)
			}
			if h, _ := d.Peek(x); !bytes.Equal(dst, h.Data) {
				t.Fatalf("%v: PeekInto %s differs from Peek", layout, what)
			}
		}
		peek("from 0")
		h, _ := d.Peek(x)
		to := make([]byte, 2*n)
		if err := d.PeekTo(x, to); err != nil || !bytes.Equal(to, h.Data) {
			t.Fatalf("%v: PeekTo differs from Peek (%v)", layout, err)
		}
		if err := d.PeekTo(x, to[1:]); err == nil {
			t.Fatalf("%v: PeekTo into a short buffer", layout)
		}
		covered := 0
		for _, r := range got {
			covered += r[1] - r[0]
		}
		if covered != n {
			t.Fatalf("%v: first PeekInto reported %d of %d elements", layout, covered, n)
		}
		// Nothing written: nothing read.
		if peek("of an unchanged tensor"); len(got) != 0 {
			t.Fatalf("%v: unchanged tensor: %d ranges", layout, len(got))
		}
		// Two bytes of a page change in memory (as any kernel's write
		// would): only that stripe is re-read, and the bytes match
		// Peek's.
		b := d.bufs.at(x.ID)
		m, a := d.memAt(d.pageLoc(b, c.page))
		m.write(a+10, []byte{0x12, 0x34})
		peek("after a two-byte write")
		covered = 0
		for _, r := range got {
			covered += r[1] - r[0]
		}
		// Writes are tracked per stripeSize bytes: what shares the
		// written stripe is re-read too, nothing else: whole ROW_MAJOR
		// pages; of TILE pages, the face rows that changed (the one
		// written).
		s0 := (a + 10) &^ (stripeSize - 1)
		if layout == tt.Tile {
			s0 = (a + 10) &^ (2*tt.FaceSize - 1)
		}
		meets := func(m2 *mem, lo, n uint64) bool {
			if layout == tt.Tile {
				return m2 == m && lo == s0
			}
			return m2 == m && lo < s0+stripeSize && s0 < lo+n
		}
		want := 0
		for q := 0; q < b.numPages; q++ {
			m2, a2 := d.memAt(d.pageLoc(b, q))
			if layout != tt.Tile {
				if meets(m2, a2, b.pageSize) {
					want += int(b.pageSize) / 2
				}
				continue
			}
			tr := tileRunsOf(b.g, q)
			for r := 0; r < tr.rows; r++ {
				for half, n := range [2]int{tr.n0, tr.n1} {
					if n > 0 && meets(m2, a2+uint64(2*TileElem(r, 16*half)), 32) {
						want += n
					}
				}
			}
		}
		if covered != want || want == 0 {
			t.Fatalf("%v: one written stripe re-read %d elements, want %d", layout, covered, want)
		}
		// Writes to pages in several banks, and to the place past the
		// tensor's last page in a bank that holds one page fewer (the
		// allocation rounds every bank up): the runs come in increasing
		// order, the bytes match Peek's, and the place past the end is
		// not read.
		for _, q := range []int{b.numPages - 1, 0, b.numPages / 2} {
			m, a := d.memAt(d.pageLoc(b, q))
			m.write(a, []byte{0x56, 0x78})
		}
		if nb := d.arch.nbanks; b.numPages%nb != 0 {
			m, a = d.dramAt(b.numPages%nb, b.addr+uint64(b.numPages/nb)*b.aligned)
			m.write(a, []byte{0x9a, 0xbc})
			pastEnd++
		}
		peek("after writes in several banks")
		for i := 1; i < len(got); i++ {
			if got[i][0] < got[i-1][1] {
				t.Fatalf("%v: run %v after %v: not in increasing order", layout, got[i], got[i-1])
			}
		}
		if len(got) == 0 || got[len(got)-1][1] > n {
			t.Fatalf("%v: runs %v for %d elements", layout, got, n)
		}
	}
	if pastEnd == 0 {
		t.Fatal("no shape leaves a place past its last page: the write past the end tests nothing")
	}
}

// A first PeekInto counts from +0: every page is written into dst, but
// the runs of pages holding only +0 bytes are not told, whatever dst held.
func TestPeekIntoTellsWhatItChanged(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole})
	x := mustAlloc(t, d, tt.Spec{Shape: []int{2, 96, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved})
	n := x.Spec.Volume()
	v := make([]bf16.BF16, n)
	var want [][2]int // per slice: tile rows 0 and 1 (rows 0..63); tile row 2 holds +0
	for o := 0; o < 2; o++ {
		for r := 3; r < 10; r++ {
			for c := 0; c < 32; c++ {
				v[(o*96+r)*32+c] = bf16.FromFloat32(float32(1 + r + c))
			}
		}
		v[(o*96+40)*32+20] = 0x8000 // -0: not +0
		want = append(want, [2]int{o * 96 * 32, (o*96 + 64) * 32})
	}
	if err := d.WriteHost(x, tt.HostBF16(x.Spec.Shape, tt.Tile, v)); err != nil {
		t.Fatal(err)
	}
	h, _ := d.Peek(x)
	for _, fill := range []byte{0, 0xEE} {
		dst := bytes.Repeat([]byte{fill}, 2*n)
		var got [][2]int
		if _, err := d.PeekInto(x, dst, 0, func(lo, hi int) {
			if k := len(got); k > 0 && got[k-1][1] == lo { // runs meet across pages
				got[k-1][1] = hi
				return
			}
			got = append(got, [2]int{lo, hi})
		}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, h.Data) {
			t.Fatalf("into %#x: dst differs from Peek", fill)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("into %#x: told %v, want %v", fill, got, want)
		}
	}
}

// tileRuns against the definition, element by element: logical element
// (o, h, w) of a TILE tensor is in page (o*hp/32 + h/32)*wp/32 + w/32 at
// TileElem(h%32, w%32). Shapes with padding rows and columns, narrow and
// wide rows, several outer slices.
func TestTileRuns(t *testing.T) {
	for _, shape := range [][]int{{1, 1}, {5, 7}, {40, 20}, {2, 33, 65}, {3, 2, 64, 32}, {1, 1, 31, 100}} {
		s := tt.Spec{Shape: shape, DType: tt.BF16, Layout: tt.Tile}
		g := geomOf(s)
		pages := g.outer * g.hp / 32 * g.wp / 32
		want := make([][]int, pages) // page element -> logical index + 1 (0: padding)
		for p := range want {
			want[p] = make([]int, 1024)
		}
		for i := 0; i < s.Volume(); i++ {
			o, h, w := i/(g.h*g.w), i/g.w%g.h, i%g.w
			p := (o*g.hp/32+h/32)*(g.wp/32) + w/32
			want[p][TileElem(h%32, w%32)] = i + 1
		}
		data := make([]byte, 2*s.Volume())
		for i := 0; i < s.Volume(); i++ {
			data[2*i], data[2*i+1] = byte(i+1), byte((i+1)>>8)
		}
		back := make([]byte, len(data))
		for p := 0; p < pages; p++ {
			tr := tileRunsOf(geomOf(s), p)
			page := make([]byte, 2048)
			tr.tilize(page, data, 2)
			var logical []int
			for j := 0; j < 1024; j++ {
				if got := int(page[2*j]) | int(page[2*j+1])<<8; got != want[p][j]&0xFFFF {
					t.Fatalf("%v page %d element %d: tilized %d, want %d", shape, p, j, got, want[p][j])
				}
				if want[p][j] > 0 {
					logical = append(logical, want[p][j]-1)
				}
			}
			slices.Sort(logical)
			var spans []int
			last := -1
			tr.untilizeUnits(back, page, 2, ^uint64(0), false, func(lo, hi int) {
				if lo >= hi || lo <= last {
					t.Fatalf("%v page %d: span [%d,%d) after %d", shape, p, lo, hi, last)
				}
				if lo == last+1 && last >= 0 {
					t.Fatalf("%v page %d: adjacent spans not told as one at %d", shape, p, lo)
				}
				for i := lo; i < hi; i++ {
					spans = append(spans, i)
				}
				last = hi - 1
			})
			if !slices.Equal(spans, logical) {
				t.Fatalf("%v page %d: spans cover %v, want %v", shape, p, spans, logical)
			}
		}
		if !bytes.Equal(back, data) {
			t.Fatalf("%v: untilize of every page does not give the data back", shape)
		}
	}
}

// rewrite: a stripe left as it was keeps its stamp (and is marked written
// in strict mode); a changed one is written and stamped; the memory ends
// as after a write.
func TestRewrite(t *testing.T) {
	var clock uint64 = 1
	m := newMem(1<<20, true)
	m.clock = &clock
	old := make([]byte, 4*stripeSize)
	for i := range old {
		old[i] = byte(i * 7)
	}
	m.write(0, old[:2*stripeSize]) // stripes 0 and 1 written, 2 and 3 fresh
	clock = 5
	src := bytes.Clone(old)
	src[stripeSize+3] ^= 1                                           // stripe 1 changes
	copy(src[3*stripeSize:], poisonChunk[3*stripeSize:4*stripeSize]) // stripe 3 as fresh memory holds it
	m.rewrite(0, src)
	got := make([]byte, len(src))
	m.read(0, got)
	if !bytes.Equal(got, src) {
		t.Fatal("memory after rewrite differs from what was written")
	}
	for s, want := range []bool{false, true, true, false} {
		if ch := m.writtenSince(uint64(s)*stripeSize, stripeSize, 5); ch != want {
			t.Errorf("stripe %d: stamped since the rewrite %v, want %v", s, ch, want)
		}
	}
	if at, bad := m.unwritten(0, uint64(len(src))); bad {
		t.Errorf("byte %d not marked written", at)
	}
	if mask := m.changedUnits(stripeSize-64, 4*32, 32, 5); mask != 0b1100 {
		t.Errorf("changedUnits %b, want 1100 (the two units in stripe 1)", mask)
	}
}

// changedUnits agrees with a stripe-by-stripe model of the stamps over
// random writes and queries that span chunks (some never written, some
// written only before the queried clock).
func TestChangedUnitsMatchesModel(t *testing.T) {
	const size = 4 * chunkSize
	var clock uint64 = 1
	m := newMem(size, false)
	m.clock = &clock
	stamp := make([]uint64, size/stripeSize) // the model: each stripe's last write
	r := rand.New(rand.NewPCG(5, 6))
	for it := 0; it < 2000; it++ {
		if r.IntN(3) == 0 {
			clock++
		}
		if r.IntN(2) == 0 && r.IntN(4) != 0 { // chunk 3 is never written
			n := uint64(1 + r.IntN(3*stripeSize))
			a := uint64(r.IntN(3*chunkSize - int(n)))
			m.write(a, make([]byte, n))
			for s := a / stripeSize; s <= (a+n-1)/stripeSize; s++ {
				stamp[s] = clock
			}
		}
		unit := uint64(1 + r.IntN(size/64))
		n := unit * uint64(1+r.IntN(64))
		if n > size {
			n = size
		}
		a := uint64(r.IntN(size - int(n) + 1))
		since := 1 + uint64(r.IntN(int(clock)))
		var want uint64
		for j := uint64(0); j*unit < n; j++ {
			lo, hi := a+j*unit, min(a+(j+1)*unit, a+n)
			for s := lo / stripeSize; s <= (hi-1)/stripeSize; s++ {
				if stamp[s] >= since {
					want |= 1 << j
				}
			}
		}
		if got := m.changedUnits(a, n, unit, since); got != want {
			t.Fatalf("iteration %d: changedUnits(%d, %d, %d, %d) = %b, want %b", it, a, n, unit, since, got, want)
		}
	}
}

// writtenSince reports whether any byte of [a, a+n) shares a stripe
// written while the clock read since or later.
func (m *mem) writtenSince(a, n, since uint64) bool { return m.changedUnits(a, n, n, since) != 0 }
