package sim

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// ucFix is a paged KV cache [blocks, H, BS, D] with B users, an update-index
// tensor [B], a page table [B, W], and a host model of the cache.
type ucFix struct {
	t                   *testing.T
	d                   *Device
	B, H, BS, D, blocks int
	W                   int
	cache, in, idx, pt  tt.Tensor
	model               []bf16.BF16 // [blocks][H][BS][D]
	rng                 *rand.Rand
}

func newUCFix(t *testing.T, o Options, B, H, BS, D, blocks, W int) *ucFix {
	t.Helper()
	f := &ucFix{t: t, d: newDev(t, o), B: B, H: H, BS: BS, D: D, blocks: blocks, W: W, rng: rand.New(rand.NewPCG(uint64(B*W), 7))}
	f.cache = mustAlloc(t, f.d, tt.Spec{Shape: []int{blocks, H, BS, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved})
	f.in = mustAlloc(t, f.d, tt.Spec{Shape: []int{1, B, H, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})})
	f.idx = mustAlloc(t, f.d, rmSpec(B))
	f.pt = mustAlloc(t, f.d, rmSpec(B, W))
	f.model = make([]bf16.BF16, blocks*H*BS*D)
	for i := range f.model {
		f.model[i] = bf16.FromFloat32(float32(f.rng.NormFloat64()))
	}
	f.write(f.cache, tt.HostBF16(f.cache.Spec.Shape, tt.Tile, f.model))
	return f
}

// prog is the cached program of f.op().
func (f *ucFix) prog() *ucProgram {
	f.t.Helper()
	o := f.op()
	a := &ucArgs{op: opUpdateCache}
	if err := f.d.resolveUC(a, []tt.Tensor{o.Cache}, []tt.Tensor{o.Input}, o.UpdateIdxs, o.PageTable); err != nil {
		f.t.Fatal(err)
	}
	p, ok := f.d.progs[string(f.d.ucKey(a))].(*ucProgram)
	if !ok {
		f.t.Fatal("program not cached")
	}
	return p
}

func (f *ucFix) write(x tt.Tensor, h tt.HostTensor) {
	f.t.Helper()
	if err := f.d.WriteHost(x, h); err != nil {
		f.t.Fatal(err)
	}
}

func (f *ucFix) setTable(rows [][]int32) {
	flat := make([]int32, 0, f.B*f.W)
	for _, r := range rows {
		flat = append(flat, r...)
	}
	f.write(f.pt, tt.HostInt32([]int{f.B, f.W}, tt.RowMajor, flat))
}

func (f *ucFix) op() tt.PagedUpdateCache {
	return tt.PagedUpdateCache{Cache: f.cache, Input: f.in, UpdateIdxs: &f.idx, PageTable: &f.pt}
}

// step writes random K rows for pos (one per user), runs the op, applies the
// expected semantics (§1.4) to the model for users with pos != -1.
func (f *ucFix) step(pos []int32, table [][]int32) error {
	f.t.Helper()
	in := make([]bf16.BF16, f.B*f.H*f.D)
	for i := range in {
		in[i] = bf16.FromFloat32(float32(f.rng.NormFloat64()))
	}
	f.write(f.in, tt.HostBF16([]int{1, f.B, f.H, f.D}, tt.Tile, in))
	f.write(f.idx, tt.HostInt32([]int{f.B}, tt.RowMajor, pos))
	if err := run1(f.d, f.op()); err != nil {
		return err
	}
	for b, p := range pos {
		if p < 0 || b >= len(table) || int(p)/f.BS >= len(table[b]) {
			continue // not modelled: the test checks the log instead
		}
		blk := int(table[b][int(p)/f.BS])
		for h := 0; h < f.H; h++ {
			copy(f.model[((blk*f.H+h)*f.BS+int(p)%f.BS)*f.D:][:f.D], in[(b*f.H+h)*f.D:][:f.D])
		}
	}
	return nil
}

func (f *ucFix) checkCache() {
	f.t.Helper()
	h, err := f.d.ReadHost(f.cache)
	if err != nil {
		f.t.Fatal(err)
	}
	got := h.BF16s()
	for i := range got {
		if got[i] != f.model[i] {
			d := f.D
			f.t.Fatalf("cache differs at block %d head %d row %d col %d: %#x want %#x",
				i/(f.H*f.BS*d), i/(f.BS*d)%f.H, i/d%f.BS, i%d, got[i], f.model[i])
		}
	}
}

func permTable(rng *rand.Rand, B, W, blocks int) [][]int32 {
	perm := rng.Perm(blocks)
	t := make([][]int32, B)
	for b := range t {
		t[b] = make([]int32, W)
		for j := range t[b] {
			t[b][j] = int32(perm[b*W+j])
		}
	}
	return t
}

// §1.3/§1.4: with a full-width random permuted table (the tt_transformers
// demo table, §8.4), every user's row lands at cache[table[b][p/bs], h, p%bs, :]
// and nothing else changes; -1 users write nothing; positions straddle block
// boundaries.
func TestUpdateCacheFullWidth(t *testing.T) {
	for _, c := range []struct {
		arch        Arch
		B, H, BS, D int
		blocks      int
	}{
		{Wormhole, 4, 2, 32, 64, 16},
		{Wormhole, 8, 1, 64, 128, 64},
		{Blackhole, 3, 3, 32, 32, 12},
		{Wormhole, 13, 2, 32, 32, 26}, // more users than DRAM banks
	} {
		W := c.blocks / c.B
		f := newUCFix(t, Options{Arch: c.arch, Strict: true, LogKV: true}, c.B, c.H, c.BS, c.D, c.blocks, W)
		table := permTable(f.rng, c.B, W, c.blocks)
		f.setTable(table)
		maxPos := W*c.BS - 1
		cands := []int{0, 1, c.BS - 1, c.BS, c.BS + 1, 2*c.BS - 1, maxPos, 31, 32, 33}
		for s := 0; s < 20; s++ {
			pos := make([]int32, c.B)
			for b := range pos {
				switch r := f.rng.IntN(10); {
				case r == 0:
					pos[b] = -1
				case r < 5:
					pos[b] = int32(min(cands[f.rng.IntN(len(cands))], maxPos))
				default:
					pos[b] = int32(f.rng.IntN(maxPos + 1))
				}
			}
			f.d.ResetKVLog()
			if err := f.step(pos, table); err != nil {
				t.Fatal(err)
			}
			f.checkCache()
			log := f.d.KVLog()
			n := 0
			for b, p := range pos {
				if p == -1 {
					continue
				}
				w := log[n]
				n++
				if w.User != b || w.Pos != uint32(p) || w.Physical != uint32(table[b][int(p)/c.BS]) || w.Row != uint32(int(p)%c.BS) {
					t.Fatalf("user %d pos %d: log %+v", b, p, w)
				}
			}
			if n != len(log) {
				t.Fatalf("log has %d writes, want %d", len(log), n)
			}
		}
		if fs := f.d.Findings(); len(fs) != 0 {
			t.Fatalf("strict findings on a correct run: %v", fs)
		}
	}
}

// tt-metal's "arbitrary update indices" test idea: positions base + i*17.
func TestUpdateCacheArbitraryIndices(t *testing.T) {
	const B, H, BS, D, blocks = 8, 2, 32, 64, 64
	W := blocks / B
	f := newUCFix(t, Options{Arch: Wormhole, Strict: true}, B, H, BS, D, blocks, W)
	table := permTable(f.rng, B, W, blocks)
	f.setTable(table)
	for _, base := range []int{0, 15, 31, 32, 63, 100, 127} {
		pos := make([]int32, B)
		for i := range pos {
			pos[i] = int32((base + i*17) % (W * BS))
		}
		if err := f.step(pos, table); err != nil {
			t.Fatal(err)
		}
		f.checkCache()
	}
	if fs := f.d.Findings(); len(fs) != 0 {
		t.Fatalf("findings: %v", fs)
	}
}

// §2: a [B,1] page table at a position >= block_size. Faithful: the kernel
// loads page_table_ptr[1] from L1 past the 4-byte page-table CB, whatever an
// earlier program left there, and writes that block. Strict: the same write,
// plus a finding naming the index and the row width.
func TestUpdateCacheNarrowTable(t *testing.T) {
	for _, strict := range []bool{false, true} {
		const B, H, BS, D, blocks = 2, 2, 32, 64, 8
		f := newUCFix(t, Options{Arch: Wormhole, Strict: strict, LogKV: true}, B, H, BS, D, blocks, 1)
		table := [][]int32{{4}, {6}}
		f.setTable(table)
		// Block boundary not crossed yet: correct.
		if err := f.step([]int32{31, 5}, table); err != nil {
			t.Fatal(err)
		}
		f.checkCache()
		if len(f.d.Findings()) != 0 {
			t.Fatalf("findings before the boundary: %v", f.d.Findings())
		}
		// An earlier program left block id 3 (user 0's core) and 1 (user 1's
		// core) in the L1 word just past the page-table CB.
		p := f.prog()
		past := p.c3.addr + 4
		f.d.l1[0].write(past, []byte{3, 0, 0, 0})
		f.d.l1[1].write(past, []byte{1, 0, 0, 0})
		f.d.ResetKVLog()
		// User 0 crosses into virtual block 1; the host believes block 5.
		if err := f.step([]int32{32, 6}, [][]int32{{4, 3}, {6}}); err != nil {
			t.Fatal(err)
		}
		f.checkCache() // the model applied block 3: that is where the card writes
		log := f.d.KVLog()
		if len(log) != 2 || log[0].Virtual != 1 || log[0].Physical != 3 || log[0].Row != 0 {
			t.Fatalf("log %+v", log)
		}
		fs := f.d.Findings()
		if !strict {
			if len(fs) != 0 {
				t.Fatal("faithful mode reported findings")
			}
			continue
		}
		if len(fs) != 1 || fs[0].Class != PTReadPastRow || fs[0].User != 0 || fs[0].Index != 1 {
			t.Fatalf("findings %v", fs)
		}
		line := fs[0].String()
		for _, want := range []string{"page_table[0][1]", "row has 1 entries", "past the 4 B page-table CB"} {
			if !strings.Contains(line, want) {
				t.Errorf("finding %q lacks %q", line, want)
			}
		}
	}
}

// Poisoned L1 past the CB (nothing ran there): the entry is 0x7FC17FC1, a
// garbage block id: strict reports the out-of-row read and the entry outside
// the cache; the access either lands somewhere in DRAM or faults.
func TestUpdateCacheNarrowTablePoison(t *testing.T) {
	f := newUCFix(t, Options{Arch: Wormhole, Strict: true, LogKV: true}, 2, 2, 32, 64, 8, 1)
	table := [][]int32{{4}, {6}}
	f.setTable(table)
	err := f.step([]int32{40, 3}, [][]int32{{4}, {6}})
	var fault *Fault
	if err != nil && !errors.As(err, &fault) {
		t.Fatal(err)
	}
	var classes []FindingClass
	for _, x := range f.d.Findings() {
		classes = append(classes, x.Class)
	}
	want := []FindingClass{PTReadPastRow, ReadUnwritten, PTEntryOutsideCache}
	if len(classes) < 3 || classes[0] != want[0] || classes[1] != want[1] || classes[2] != want[2] {
		t.Fatalf("findings %v", f.d.Findings())
	}
}

// §1.3: only exactly 0xFFFFFFFF skips; -2 is a huge index, not a skip.
// A -1 page-table entry is not special (strict flags it).
func TestUpdateCacheMinusOne(t *testing.T) {
	f := newUCFix(t, Options{Arch: Wormhole, Strict: true, LogKV: true}, 2, 1, 32, 32, 4, 2)
	table := [][]int32{{0, -1}, {2, 3}}
	f.setTable(table)
	if err := f.step([]int32{-1, 40}, table); err != nil {
		t.Fatal(err)
	}
	if len(f.d.KVLog()) != 1 || len(f.d.Findings()) != 0 {
		t.Fatalf("log %v findings %v", f.d.KVLog(), f.d.Findings())
	}
	f.checkCache()
	err := f.step([]int32{40, 1}, nil)
	fs := f.d.Findings()
	if len(fs) == 0 || fs[0].Class != MinusOneNotSkipped {
		t.Fatalf("err %v findings %v", err, fs)
	}
	f.d.ClearFindings()
	f.d.ResetKVLog()
	// -2 = 0xFFFFFFFE: virtual block 134217727, page_table_ptr[that] is an L1
	// load far past the core's L1: the kernel faults instead of skipping.
	err = f.step([]int32{-2, 1}, nil)
	var fault *Fault
	if !errors.As(err, &fault) || fault.Space != "L1" || fault.Core != 0 {
		t.Fatalf("-2: err %v", err)
	}
}
