package sim

import (
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// §1.3: the tile id of (block p, head h, row r, col-tile w) is
// p*num_heads*block_size_t*Wt + h*block_size_t*Wt + (r/32)*Wt + w, and that
// tile lives at bank id % nbanks, slot id / nbanks (§6.3). A table of hand
// computed ids; the row is found at exactly that page.
func TestUpdateCacheTileIDs(t *testing.T) {
	for _, c := range []struct {
		H, BS, D, blocks int
		phys, pos        int32
		wantFirst        uint32 // tile id of head 0, w 0
		wantHead1Last    int    // tile id of head 1, last w
	}{
		// H=2, bst=2, Wt=2: 3*8 + (40/32)*2 = 26; head 1: +4, last w +1.
		{2, 64, 64, 8, 3, 40, 26, 31},
		// H=2, bst=1, Wt=1: block 5 -> 10; head 1 -> 11.
		{2, 32, 32, 8, 5, 31, 10, 11},
		// H=1... use H=2, bst=4, Wt=4: block 1 -> 32, row 100 -> +3*4 = 44; head 1 +16, last +3 = 63.
		{2, 128, 128, 4, 1, 100, 44, 63},
	} {
		f := newUCFix(t, Options{LogKV: true}, 1, c.H, c.BS, c.D, c.blocks, 1)
		table := [][]int32{{c.phys}}
		f.setTable(table)
		if err := f.step([]int32{c.pos}, table); err != nil {
			t.Fatal(err)
		}
		f.checkCache()
		log := f.d.KVLog()
		if len(log) != 1 || log[0].FirstTile != c.wantFirst {
			t.Fatalf("%+v: log %+v, want first tile %d", c, log, c.wantFirst)
		}
		// The last tile of head 1 holds head 1's input row at row pos%32.
		b := f.d.bufs.at(f.cache.ID)
		loc := f.d.pageLoc(b, c.wantHead1Last)
		if loc.Bank != c.wantHead1Last%12 || loc.Addr != b.addr+uint64(c.wantHead1Last/12)*2048 {
			t.Fatalf("tile %d placed at %+v", c.wantHead1Last, loc)
		}
		m, a := f.d.memAt(loc)
		page := make([]byte, 2048)
		m.read(a, page)
		row := int(c.pos) % c.BS % 32
		wt := c.D / 32
		for col := 0; col < 32; col++ {
			e := TileElem(row, col)
			got := bf16.BF16(uint16(page[2*e]) | uint16(page[2*e+1])<<8)
			want := f.model[((int(c.phys)*c.H+1)*c.BS+int(c.pos)%c.BS)*c.D+(wt-1)*32+col]
			if got != want {
				t.Fatalf("%+v: tile %d row %d col %d = %#x want %#x", c, c.wantHead1Last, row, col, got, want)
			}
		}
	}
}

// §5.3, §7: the four host-visible failures carry tt-metal's exact texts.
func TestExactCaptureAndCopyMessages(t *testing.T) {
	f := newUCFix(t, Options{}, 2, 1, 32, 32, 4, 2)
	f.setTable([][]int32{{0, 1}, {2, 3}})
	if err := f.step([]int32{0, 1}, nil); err != nil {
		t.Fatal(err)
	}
	exact := func(what string, err error, want string) {
		t.Helper()
		var e *tt.Error
		if !errors.As(err, &e) || e.Msg != want {
			t.Errorf("%s: got %v, want exactly %q", what, err, want)
		}
	}
	exact("copy of a differently shaped host tensor",
		f.d.WriteHost(f.idx, tt.HostInt32([]int{3}, tt.RowMajor, []int32{0, 0, 0})), "Host tensor has different shape")
	id, err := f.d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	exact("host write during capture", f.d.WriteHost(f.idx, tt.HostInt32([]int{2}, tt.RowMajor, []int32{0, 0})),
		"Writes are not supported during trace capture. trace id: "+strconv.Itoa(int(id)))
	_, err = f.d.ReadHost(f.idx)
	exact("host read during capture", err, "Reads are not supported during trace capture.")
	o := f.op()
	o.FP32DestAcc = true
	// The miss loads the program's binaries, whose write fails the capture
	// check (tt_metal/distributed/fd_mesh_command_queue.cpp:665 at
	// tt.TTMetalCommit).
	exact("program-cache miss during capture", run1(f.d, o),
		"Writes are not supported during trace capture. trace id: "+itoa(int(id)))
	if err := f.d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
}

// §5.5: a trace captured with an intermediate; the intermediate freed after
// capture and a new tensor allocated on its address; replay writes the
// intermediate through the baked address. Faithful: the new tensor's bytes
// are overwritten, silently. Strict: the same corruption, plus a finding at
// the allocation and one at the replay naming the new owner.
func TestTraceFreedIntermediateCorrupts(t *testing.T) {
	for _, strict := range []bool{false, true} {
		d := cDev(t, Options{Strict: strict})
		r := rand.New(rand.NewPCG(5, 5))
		spec := cSpec(tt.BF16, tt.Tile, 1, 1, 32, 64)
		a := cUpload(t, d, spec, cRand(r, 32*64, false))
		b := cUpload(t, d, spec, cRand(r, 32*64, false))
		tmp := cAlloc(t, d, spec)
		out := cAlloc(t, d, spec)
		ops := []tt.Op{tt.Add{A: a, B: b, Output: tmp}, tt.Add{A: tmp, B: b, Output: out}}
		for _, op := range ops { // warm the program cache
			cRun(t, d, op)
		}
		id, err := d.BeginCapture()
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			cRun(t, d, op)
		}
		if err := d.EndCapture(id); err != nil {
			t.Fatal(err)
		}
		if err := d.Free(tmp); err != nil {
			t.Fatal(err)
		}
		victim := cAlloc(t, d, spec)
		if victim.Addr != tmp.Addr {
			t.Fatalf("victim at %#x, freed intermediate was at %#x", victim.Addr, tmp.Addr)
		}
		mine := cRand(r, 32*64, false)
		if err := d.WriteHost(victim, tt.HostBF16(spec.Shape, tt.Tile, mine)); err != nil {
			t.Fatal(err)
		}
		if err := d.Execute(id); err != nil {
			t.Fatal(err)
		}
		got := cDown(t, d, victim)
		want := make([]bf16.BF16, len(mine))
		ref.Add(want, cDown(t, d, a), cDown(t, d, b))
		if slices.Equal(got, mine) || !slices.Equal(got, want) {
			t.Fatalf("strict=%v: the replay did not overwrite the new tensor with a+b", strict)
		}
		fs := d.Findings()
		if !strict {
			if len(fs) != 0 {
				t.Fatalf("faithful findings %v", fs)
			}
			continue
		}
		if len(fs) < 2 || fs[0].Class != AllocOverlapsTrace || fs[0].Tensor != victim.ID {
			t.Fatalf("findings %v", fs)
		}
		stale := 0
		for _, x := range fs[1:] {
			if x.Class == TraceStaleAddress && x.Tensor == tmp.ID {
				stale++
				if !strings.Contains(x.String(), "now belongs to t"+itoa(int(victim.ID))) {
					t.Errorf("finding %q does not name the new owner", x)
				}
			}
		}
		if stale != 2 { // both captured ops touch the intermediate
			t.Errorf("stale-address findings %d, want 2: %v", stale, fs)
		}
	}
}

// Issue item 9: every op is logged with its regime, key arguments and the
// addresses it touched; the observer runs after every op, eager, captured or
// replayed, and can Peek cur_pos without a host read (even while
// capturing); KV writes done by a replay are logged with the trace id.
func TestOpLogAndObserver(t *testing.T) {
	var seen []OpEvent
	var curPos [][]int32
	var d *Device
	o := Options{Strict: true, LogKV: true, LogOps: true}
	o.OnOp = func(e OpEvent) {
		seen = append(seen, e)
		for _, x := range e.Touched {
			if x.Tensor == 3 { // the index tensor (allocated third)
				h, err := d.Peek(tt.Tensor{ID: 3})
				if err != nil {
					t.Fatalf("peek in observer: %v", err)
				}
				curPos = append(curPos, h.Int32s())
			}
		}
	}
	f := newUCFix(t, o, 2, 1, 32, 32, 8, 2)
	d = f.d
	if f.idx.ID != 3 {
		t.Fatalf("index tensor is t%d", f.idx.ID)
	}
	table := [][]int32{{0, 1}, {2, 3}}
	f.setTable(table)
	if err := f.step([]int32{30, 4}, table); err != nil {
		t.Fatal(err)
	}
	plus := tt.PlusOne{Input: f.idx, SkipNegativeEntries: true}
	cRun(t, d, plus)
	id, _ := d.BeginCapture()
	cRun(t, d, f.op())
	cRun(t, d, plus)
	if _, err := d.Peek(f.idx); err != nil {
		t.Fatalf("peek during capture: %v", err)
	}
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	d.ResetKVLog()
	for i := 0; i < 3; i++ {
		if err := d.Execute(id); err != nil {
			t.Fatal(err)
		}
	}
	log := d.OpLog()
	if !slices.EqualFunc(log, seen, func(a, b OpEvent) bool { return a.String() == b.String() }) {
		t.Fatal("OpLog and OnOp saw different events")
	}
	var got []string
	for _, e := range log {
		got = append(got, e.Regime.String()+" "+e.Op)
	}
	want := []string{"eager paged_update_cache", "eager plus_one", "capture paged_update_cache", "capture plus_one"}
	for i := 0; i < 3; i++ {
		want = append(want, "replay paged_update_cache", "replay plus_one")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("op log\n%q\nwant\n%q", got, want)
	}
	for i, e := range log {
		if e.Seq != i+1 || (e.Regime != Eager && e.Trace != id) || (e.Regime == Eager && e.Trace != 0) {
			t.Errorf("event %d: %v", i, e)
		}
	}
	uc := log[len(log)-2]
	if !strings.Contains(uc.Args, "update_idxs=t3 page_table=t4") || len(uc.Touched) != 4 {
		t.Errorf("update cache event %v", uc)
	}
	for _, x := range uc.Touched {
		if want := (x.Tensor == f.cache.ID); x.Write != want {
			t.Errorf("touch %+v: write %v", x, x.Write)
		}
		if x.Tensor == f.pt.ID && x.Addr != f.pt.Addr {
			t.Errorf("page table touched at %#x, allocated at %#x", x.Addr, f.pt.Addr)
		}
	}
	// cur_pos as the observer saw it after each op touching it: the
	// eager update (30,4), +1, two captured ops (unchanged: nothing runs),
	// then each replay's update and +1.
	wantPos := [][]int32{{30, 4}, {31, 5}, {31, 5}, {31, 5}, {31, 5}, {32, 6}, {32, 6}, {33, 7}, {33, 7}, {34, 8}}
	if !slices.EqualFunc(curPos, wantPos, slices.Equal) {
		t.Fatalf("cur_pos seen by the observer %v, want %v", curPos, wantPos)
	}
	kv := d.KVLog()
	if len(kv) != 6 || kv[0].Trace != id || kv[0].Pos != 31 || kv[5].Pos != 7 || kv[2].Physical != 1 {
		t.Fatalf("replayed KV writes %+v", kv)
	}
	if fs := d.Findings(); len(fs) != 0 {
		t.Fatalf("findings (peek must not report): %v", fs)
	}
	d.ResetOpLog()
	if len(d.OpLog()) != 0 {
		t.Fatal("ResetOpLog")
	}
}

// memDigest hashes every byte the device holds (DRAM channels and L1),
// poison included.
func memDigest(d *Device) uint64 {
	h := fnv.New64a()
	for _, ms := range [][]*mem{d.chans, d.l1} {
		for _, m := range ms {
			for di, dir := range m.chunks {
				for ci, c := range dir {
					if c != nil {
						h.Write([]byte{byte(di), byte(di >> 8), byte(ci)})
						h.Write(c)
					}
				}
			}
			h.Write([]byte{0xFF})
		}
	}
	return h.Sum64()
}

// The same seed gives the same bytes: two devices run the same decode steps
// (tiny model, eager then captured and replayed); every byte of DRAM and L1
// is equal, faithful and strict alike.
func TestSameSeedSameBytes(t *testing.T) {
	cfg, _ := qwen3.Preset("tiny")
	w, err := qwen3.Synth(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	run := func(o Options) uint64 {
		e := newMiniEngine(t, w, 3, 2, 32, 8, o)
		table := []int32{5, 1, 0, 7, 3, 2}
		for s := 0; s < 4; s++ {
			e.step(t, []uint32{uint32(s), 7, 9}, []int32{int32(30 + s), -1, int32(s)}, table)
		}
		e.forward(t, true, false) // warm
		id, err := e.d.BeginCapture()
		if err != nil {
			t.Fatal(err)
		}
		e.forward(t, true, true)
		if err := e.d.EndCapture(id); err != nil {
			t.Fatal(err)
		}
		for s := 0; s < 3; s++ {
			if err := e.d.Execute(id); err != nil {
				t.Fatal(err)
			}
		}
		return memDigest(e.d)
	}
	a, b := run(Options{}), run(Options{})
	c := run(Options{Strict: true})
	if a != b || a != c {
		t.Fatalf("digests differ: %x %x strict %x", a, b, c)
	}
}
