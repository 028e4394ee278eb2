package sim

import (
	"math/rand"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// §1.2, §6.5: paged_update_cache's CBs from the L1 base in creation order,
// c_1 (the input shard) not placed, the page-table CB last and exactly one
// stick (padded_shape[-1]*4 bytes, not aligned).
func TestUpdateCacheCBLayout(t *testing.T) {
	f := newUCFix(t, Options{Arch: Wormhole}, 8, 2, 32, 128, 128, 16)
	f.setTable(permTable(f.rng, 8, 16, 128))
	if err := f.step(make([]int32, 8), nil); err != nil {
		t.Fatal(err)
	}
	p := f.prog()
	base := f.d.opt.L1UnreservedBase
	if p.c0.addr != base || p.c0.size != 2*4*2048 {
		t.Errorf("c_0 at %d size %d", p.c0.addr, p.c0.size)
	}
	// c_24/25 and c_26 (2*Wt Float16_b tiles each) sit between c_0 and c_16.
	if p.c16.addr != base+3*16384 || p.c16.size != 8*4*2048 {
		t.Errorf("c_16 at %d size %d", p.c16.addr, p.c16.size)
	}
	if p.c2.addr != p.c16.addr+p.c16.size || p.c2.size != 4096 {
		t.Errorf("c_2 at %d size %d", p.c2.addr, p.c2.size)
	}
	if p.c3.addr != p.c2.addr+4096 || p.c3.size != 64 || p.end != p.c3.addr+64 {
		t.Errorf("c_3 at %d size %d end %d", p.c3.addr, p.c3.size, p.end)
	}
	// The page-table CB holds user b's row on core b after the run.
	var w [4]byte
	f.d.l1[5].read(p.c3.addr+4*3, w[:])
	h, _ := f.d.ReadHost(f.pt)
	if got, want := le32(w[:]), uint32(h.Int32s()[5*16+3]); got != want {
		t.Errorf("core 5 CB entry 3 = %d want %d", got, want)
	}
	// Placement for a [B,1] table: 4-byte CB, the next word is past it.
	g := newUCFix(t, Options{Arch: Blackhole}, 2, 1, 32, 32, 4, 1)
	g.setTable([][]int32{{0}, {1}})
	if err := g.step([]int32{0, 0}, [][]int32{{0}, {1}}); err != nil {
		t.Fatal(err)
	}
	q := g.prog()
	if q.c3.size != 4 || q.c3.addr%64 != 0 {
		t.Errorf("BH c_3 at %d size %d", q.c3.addr, q.c3.size)
	}
}

// §1.1-1.2: keyed by specs and attributes, not addresses or contents;
// validation on every call: batch_offset is not in the hash, yet a bad
// batch_offset is refused on a hit too (ttnn/api/ttnn/device_operation.hpp
// handle_mesh_adapter_cache_hit runs validate_on_program_cache_hit, i.e. the
// miss validation, at tt.TTMetalCommit); a page-table width change is a miss.
func TestUpdateCacheProgramCache(t *testing.T) {
	f := newUCFix(t, Options{Arch: Wormhole}, 2, 1, 32, 32, 8, 2)
	table := [][]int32{{0, 1}, {2, 3}}
	f.setTable(table)
	run := func(o tt.PagedUpdateCache) error {
		return run1(f.d, o)
	}
	o := f.op()
	o.BatchOffset = 1
	if err := run(o); !tt.HasMsg(err, "batch_offset must be 0") {
		t.Fatalf("miss must validate: %v", err)
	}
	if h, m := f.d.ProgramCacheStats(); h != 0 || m != 0 {
		t.Fatalf("failed validation cached: %d/%d", h, m)
	}
	if err := f.step([]int32{1, 2}, table); err != nil {
		t.Fatal(err)
	}
	if err := run(o); !tt.HasMsg(err, "batch_offset must be 0") {
		t.Fatalf("a hit must validate too: %v", err)
	}
	// New addresses and contents, same specs: a hit, at the new addresses.
	pt2 := mustAlloc(t, f.d, rmSpec(2, 2))
	f.write(pt2, tt.HostInt32([]int{2, 2}, tt.RowMajor, []int32{4, 5, 6, 7}))
	f.d.Free(f.pt)
	f.pt = pt2
	if err := f.step([]int32{33, 40}, [][]int32{{4, 5}, {6, 7}}); err != nil {
		t.Fatal(err)
	}
	f.checkCache()
	if h, m := f.d.ProgramCacheStats(); h != 1 || m != 1 {
		t.Fatalf("hits/misses %d/%d want 1/1", h, m)
	}
	// Width change: a different program.
	pt3 := mustAlloc(t, f.d, rmSpec(2, 3))
	f.write(pt3, tt.HostInt32([]int{2, 3}, tt.RowMajor, []int32{4, 5, 0, 6, 7, 1}))
	f.W, f.pt = 3, pt3
	if err := f.step([]int32{64, 65}, [][]int32{{4, 5, 0}, {6, 7, 1}}); err != nil {
		t.Fatal(err)
	}
	f.checkCache()
	if h, m := f.d.ProgramCacheStats(); h != 1 || m != 2 {
		t.Fatalf("hits/misses %d/%d want 1/2", h, m)
	}
}

// §1.1 validation messages, in order, on a miss.
func TestUpdateCacheValidation(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole})
	alloc := func(s tt.Spec) *tt.Tensor { x := mustAlloc(t, d, s); return &x }
	cacheS := tt.Spec{Shape: []int{8, 2, 32, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	inS := tt.Spec{Shape: []int{1, 4, 2, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(4, [2]int{32, 64})}
	cache, in := alloc(cacheS), alloc(inS)
	idx, pt := alloc(rmSpec(4)), alloc(rmSpec(4, 2))
	good := tt.PagedUpdateCache{Cache: *cache, Input: *in, UpdateIdxs: idx, PageTable: pt}
	mod := func(f func(o *tt.PagedUpdateCache)) tt.PagedUpdateCache { o := good; f(&o); return o }
	respec := func(s tt.Spec, f func(s *tt.Spec)) tt.Tensor {
		s.Shape = append([]int(nil), s.Shape...)
		f(&s)
		return *alloc(s)
	}
	d.WriteHost(*idx, tt.HostInt32([]int{4}, tt.RowMajor, []int32{0, 1, 2, 3}))
	d.WriteHost(*pt, tt.HostInt32([]int{4, 2}, tt.RowMajor, []int32{0, 1, 2, 3, 4, 5, 6, 7}))
	freed := *alloc(rmSpec(4))
	d.Free(freed)
	for _, c := range []struct {
		op   tt.PagedUpdateCache
		want string
	}{
		{mod(func(o *tt.PagedUpdateCache) { o.PageTable = &freed }), tt.MsgInputNotAllocated},
		{mod(func(o *tt.PagedUpdateCache) {
			o.Input = respec(inS, func(s *tt.Spec) { s.Layout = tt.RowMajor; s.Memory = tt.L1HeightSharded(4, [2]int{2, 64}) })
		}), "Input tensor in non-fused update_cache must be tilized"},
		{mod(func(o *tt.PagedUpdateCache) {
			o.Cache = respec(cacheS, func(s *tt.Spec) { s.Memory = tt.L1HeightSharded(16, [2]int{32, 64}) })
		}), "Only interleaved cache is supported"},
		{mod(func(o *tt.PagedUpdateCache) {
			o.Cache = respec(cacheS, func(s *tt.Spec) { s.Shape[3] = 128 })
		}), "paged_update_cache geometry mismatch"},
		{mod(func(o *tt.PagedUpdateCache) { o.ShareCache = true }), "share_cache not supported with paged cache"},
		{mod(func(o *tt.PagedUpdateCache) { o.UpdateIdxs = nil; o.UpdateIdxsList = []int32{0, 0, 0, 0} }), "Paged cache requires update_idxs tensor"},
		{mod(func(o *tt.PagedUpdateCache) { x := respec(rmSpec(3, 2), func(*tt.Spec) {}); o.PageTable = &x }), "Batch size between page_table and input_tensor must match"},
		{mod(func(o *tt.PagedUpdateCache) { x := respec(rmSpec(4, 9), func(*tt.Spec) {}); o.PageTable = &x }), "max_num_blocks_per_seq must be less than max_num_blocks: max_num_blocks_per_seq=9, max_num_blocks=8"},
		{mod(func(o *tt.PagedUpdateCache) { o.UpdateIdxsList = []int32{0, 0, 0, 0} }), "Only an update tensor or an update vector can be provided. Not both or neither."},
		{mod(func(o *tt.PagedUpdateCache) { x := respec(rmSpec(5), func(*tt.Spec) {}); o.UpdateIdxs = &x }), "Number of update_idxs (5) should match batch size (4)"},
		{mod(func(o *tt.PagedUpdateCache) {
			o.Input = respec(inS, func(s *tt.Spec) { s.Shape[1] = 2; s.Memory = tt.L1HeightSharded(4, [2]int{32, 64}) })
			x := respec(rmSpec(2, 2), func(*tt.Spec) {})
			o.PageTable = &x
			y := respec(rmSpec(2), func(*tt.Spec) {})
			o.UpdateIdxs = &y
		}), "Input tensor shard grid must have num_cores (4) equal to the number of users / batch (2)."},
		{mod(func(o *tt.PagedUpdateCache) { o.BatchOffset = 2 }), "batch_offset must be 0"},
	} {
		err := run1(d, c.op)
		if !tt.HasMsg(err, c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
	if err := run1(d, good); err != nil {
		t.Fatalf("good op: %v", err)
	}
}

// Non-paged modes: tensor mode cache_id = b*cache_batch_num_tiles +
// (idx/32)*Wt; list mode bakes cache_start_id and the row offset on the host.
func TestUpdateCacheNonPaged(t *testing.T) {
	for _, list := range []bool{false, true} {
		const B, H, S, D = 3, 2, 64, 32
		d := newDev(t, Options{Arch: Wormhole, LogKV: true})
		cacheS := tt.Spec{Shape: []int{B, H, S, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
		cache := mustAlloc(t, d, cacheS)
		model := make([]bf16.BF16, B*H*S*D)
		for i := range model {
			model[i] = bf16.BF16(i)
		}
		d.WriteHost(cache, tt.HostBF16(cacheS.Shape, tt.Tile, model))
		in := mustAlloc(t, d, tt.Spec{Shape: []int{1, B, H, D}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(B, [2]int{32, D})})
		inv := make([]bf16.BF16, B*H*D)
		for i := range inv {
			inv[i] = bf16.BF16(0x4000 + i)
		}
		d.WriteHost(in, tt.HostBF16([]int{1, B, H, D}, tt.Tile, inv))
		pos := []int32{0, 33, 63}
		o := tt.PagedUpdateCache{Cache: cache, Input: in}
		if list {
			o.UpdateIdxsList = pos
		} else {
			idx := mustAlloc(t, d, rmSpec(B))
			d.WriteHost(idx, tt.HostInt32([]int{B}, tt.RowMajor, pos))
			o.UpdateIdxs = &idx
		}
		if err := run1(d, o); err != nil {
			t.Fatal(err)
		}
		for b, p := range pos {
			for h := 0; h < H; h++ {
				copy(model[((b*H+h)*S+int(p))*D:][:D], inv[(b*H+h)*D:][:D])
			}
		}
		got, _ := d.ReadHost(cache)
		for i, v := range got.BF16s() {
			if v != model[i] {
				t.Fatalf("list=%v: element %d = %#x want %#x", list, i, v, model[i])
			}
		}
		if log := d.KVLog(); len(log) != B || log[2].Pos != 63 {
			t.Fatalf("log %+v", log)
		}
	}
}

// §6.5: a program whose static CB region reaches the lowest L1 buffer fails
// at enqueue.
func TestCBClash(t *testing.T) {
	f := newUCFix(t, Options{Arch: Wormhole, L1Size: 160 << 10}, 2, 1, 32, 32, 4, 2)
	f.setTable([][]int32{{0, 1}, {2, 3}})
	// The update-cache program is built first (id 0), a linear's next
	// (id 1); the clash comes at a cache hit of the first.
	if err := f.step([]int32{0, 0}, [][]int32{{0, 1}, {2, 3}}); err != nil {
		t.Fatal(err)
	}
	ck := &ckFix{t: t, d: f.d}
	if err := ck.run(ck.linear()); err != nil {
		t.Fatal(err)
	}
	big := mustAlloc(t, f.d, tt.Spec{Shape: []int{64, 12 * 1024}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.L1Interleaved})
	_ = big
	err := run1(f.d, f.op())
	// program.cpp:1544-1550's text; the program is the device's first
	// (id 0; the card's counter also counts the programs built at open),
	// its first CB on the input's shard grid, the two users' cores 0-0 and
	// 1-0 (paged_update_cache_program_factory.cpp:166, 186).
	want := regexp.MustCompile(`^paged_update_cache: Statically allocated circular buffers in program 0 clash with L1 buffers on core range \[0-0 - 1-0\]\. L1 buffer allocated at \d+ and static circular buffer region ends at \d+$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

// A buffer's part of program-cache keys is its whole spec (shape, dtype,
// layout, memory config with its shard grid): specKey must give equal
// specs one name and never give two specs the same.
func TestSpecKeyIsTheSpec(t *testing.T) {
	d, err := New(Options{Arch: Wormhole})
	if err != nil {
		t.Fatal(err)
	}
	sharded := func(cores, h, w, first int) tt.MemoryConfig {
		return tt.MemoryConfig{Layout: tt.HeightSharded, Buffer: tt.L1, Shard: tt.ShardSpec{NumCores: cores, Shape: [2]int{h, w}, FirstCore: first}}
	}
	specs := []tt.Spec{
		{Shape: []int{1, 1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved},
		{Shape: []int{1, 1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1Interleaved},
		{Shape: []int{1, 1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: sharded(1, 32, 128, 0)},
		{Shape: []int{1, 1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: sharded(1, 32, 128, 2)},
		{Shape: []int{1, 1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: sharded(2, 32, 128, 0)},
		{Shape: []int{1, 1, 32, 128}, DType: tt.FP32, Layout: tt.Tile, Memory: tt.DRAMInterleaved},
		{Shape: []int{1, 1, 32, 128}, DType: tt.BF16, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved},
		{Shape: []int{1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved},
		{Shape: []int{1, 1, 32, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved},
		{Shape: []int{1, 1, 1, 1, 1, 1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved},
	}
	// Two rounds: the second hits the names given in the first. Names
	// are equal exactly when the specs are.
	names := map[string]string{} // spec.String() -> its name
	for round := 0; round < 2; round++ {
		for _, s := range specs {
			got := d.specKey(s)
			if want, ok := names[s.String()]; ok && got != want {
				t.Fatalf("round %d: specKey(%s) = %q, before %q", round, s, got, want)
			}
			names[s.String()] = got
		}
	}
	seen := map[string]bool{}
	for _, k := range names {
		if seen[k] {
			t.Fatalf("two specs share the name %q: %v", k, names)
		}
		seen[k] = true
	}
}

// A buffer's geometry taken from its spec's slot (geometry) is the one
// computed afresh, for every spec and however the slots were last filled;
// a refused spec is refused again, never remembered.
func TestGeometryFromSlotIsFresh(t *testing.T) {
	sharded := func(cores, h, w, first int) tt.MemoryConfig {
		return tt.MemoryConfig{Layout: tt.HeightSharded, Buffer: tt.L1, Shard: tt.ShardSpec{NumCores: cores, Shape: [2]int{h, w}, FirstCore: first}}
	}
	var specs []tt.Spec
	for _, sh := range [][]int{{1, 1, 32, 128}, {1, 1, 8, 512}, {1, 8, 32, 32}, {1, 1, 1, 1, 1, 1, 32, 64}, {4, 256}} {
		for _, m := range []tt.MemoryConfig{tt.DRAMInterleaved, tt.L1Interleaved} {
			for _, l := range []tt.Layout{tt.Tile, tt.RowMajor} {
				specs = append(specs, tt.Spec{Shape: sh, DType: tt.BF16, Layout: l, Memory: m})
			}
		}
	}
	specs = append(specs,
		tt.Spec{Shape: []int{1, 8, 32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: sharded(8, 32, 32, 0)},
		tt.Spec{Shape: []int{1, 8, 32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: sharded(8, 32, 32, 3)},
		tt.Spec{Shape: []int{1, 1, 32, 32}, DType: tt.UINT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved},
		tt.Spec{Shape: []int{3}, DType: tt.BF16, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved},
	)
	bad := []tt.Spec{
		{Shape: []int{1, 8, 32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: sharded(8, 32, 32, 1000)}, // past the grid
		{Shape: []int{}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved},                   // no shape
		{Shape: []int{3}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved},                  // TILE of rank 1
	}
	for _, arch := range []Arch{Wormhole, Blackhole} {
		d, err := New(Options{Arch: arch})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 400; i++ {
			if i%7 == 0 {
				s := bad[rng.Intn(len(bad))]
				if _, err := d.allocate(s); err == nil {
					t.Fatalf("%v: allocation %d of the refused %v succeeded", arch, i, s)
				}
				continue
			}
			s := specs[rng.Intn(len(specs))]
			s.Shape = slices.Clone(s.Shape)
			tn, err := d.allocate(s)
			if err != nil {
				t.Fatalf("%v: allocate %v: %v", arch, s, err)
			}
			got, _ := d.live(tn)
			fresh, err := New(Options{Arch: arch})
			if err != nil {
				t.Fatal(err)
			}
			want, err := fresh.geometry(s)
			if err != nil {
				t.Fatal(err)
			}
			want.key, want.id, want.addr = d.specKey(s), got.id, got.addr
			if !reflect.DeepEqual(got, want) || &got.spec.Shape[0] != &s.Shape[0] {
				t.Fatalf("%v: allocation %d of %v: buffer %+v, afresh %+v", arch, i, s, *got, *want)
			}
			if rng.Intn(2) == 0 {
				if err := d.Free(tn); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// Run's output slices are pieces of one slab: a piece never reaches into
// the next, and one appended past its room moves without touching it.
func TestOutSlicesDoNotOverlap(t *testing.T) {
	d, err := New(Options{Arch: Wormhole})
	if err != nil {
		t.Fatal(err)
	}
	a := append(d.outSlice(2), tt.Tensor{ID: 1}, tt.Tensor{ID: 2})
	b := append(d.outSlice(1), tt.Tensor{ID: 3})
	a = append(a, tt.Tensor{ID: 4}) // past a's room
	if b[0].ID != 3 || a[0].ID != 1 || a[1].ID != 2 || a[2].ID != 4 {
		t.Fatalf("a %v, b %v", a, b)
	}
	for i := 0; i < outSlabLen; i++ { // across slabs
		s := append(d.outSlice(3), tt.Tensor{ID: tt.TensorID(i)})
		if cap(s) != 3 || s[0].ID != tt.TensorID(i) || b[0].ID != 3 {
			t.Fatalf("piece %d: %v (cap %d), b %v", i, s, cap(s), b)
		}
	}
}

// rms_norm's static CBs (rmsNormLayout) are checked at enqueue like any
// program's (program.cpp:1444-1552): past the core's L1 they fail with the
// size text, under the lowest L1 buffer with the clash text; the range is
// the first CB's, on the cores the tile rows go to (one row: core 0-0;
// 40 rows pad to two tile rows, cores 0-0 and 1-0; 2304 rows are 72 tile
// rows, so every core of the 8x8 grid).
func TestRMSNormCBRegionChecked(t *testing.T) {
	for _, tc := range []struct {
		name   string
		l1     uint64
		buffer bool // an L1 buffer allocated first
		rows   int  // the input's rows (default 32)
		want   string
	}{
		{"past L1", 200 << 10, false, 0, `^rms_norm: Statically allocated circular buffers on core range \[0-0 - 0-0\] grow to \d+ B which is beyond max L1 size of 204800 B$`},
		{"under an L1 buffer", 0, true, 0, `^rms_norm: Statically allocated circular buffers in program 0 clash with L1 buffers on core range \[0-0 - 0-0\]\. L1 buffer allocated at \d+ and static circular buffer region ends at \d+$`},
		{"two tile rows, one of them padding", 200 << 10, false, 40, `core range \[0-0 - 1-0\] grow to`},
		{"more tile rows than cores", 200 << 10, false, 2304, `core range \[0-0 - 7-7\] grow to`},
		{"fits", 0, false, 0, ``},
	} {
		d, err := New(Options{Arch: Wormhole, L1Size: tc.l1})
		if err != nil {
			t.Fatal(err)
		}
		f := &ckFix{t: t, d: d}
		if tc.buffer {
			// Fill L1 from the top down to just above the base.
			room := d.opt.L1Size - d.opt.L1UnreservedBase - 64<<10
			f.alloc(tt.INT32, tt.RowMajor, l1, 64, int(room/4))
		}
		o := f.rmsNorm()
		if tc.rows != 0 {
			o.Input = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, tc.rows, ckD)
		}
		err = f.run(o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !regexp.MustCompile(tc.want).MatchString(err.Error())):
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want)
		}
	}
}
