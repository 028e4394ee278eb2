package proptest

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
)

// The serving actions and properties, developed against a SUT whose
// decoder is a second ref.Decoder (ref implements every serving
// interface), observed through its caches (KVPeeker: the whole cache after
// every call, changed elements told by a diff with the previous peek), and
// planted bugs wrapping it, each shown red on its property.

// refSUT is a ref.Decoder (or a plant wrapping one) as the SUT.
type refSUT struct {
	d    *ref.Decoder
	dec  qwen3.Decoder
	prev [][2][]bf16.BF16 // per layer, K and V, as the last PeekKV saw them
	cur  [][2][]bf16.BF16
}

// refFactory builds refSUTs; plant, when set, wraps the decoder.
func refFactory(plant func(*paddedRef) qwen3.Decoder) Factory {
	return func(sc Scenario) (SUT, error) {
		w, err := ModelWeights(sc)
		if err != nil {
			return nil, err
		}
		d, err := ref.New(w, ref.Options{BlockSize: sc.BlockSize, NumBlocks: sc.NumBlocks, Threads: 1})
		if err != nil {
			return nil, err
		}
		pd := &paddedRef{Decoder: d, pad: sc.Prefill == qwen3.PrefillProgram}
		s := &refSUT{d: d, dec: pd}
		if plant != nil {
			s.dec = plant(pd)
		}
		return s, nil
	}
}

// paddedRef is ref that, as the engine's prefill program does
// (paged_fill_cache writes whole 32-row tiles), zeroes the rows past a
// prompt to the end of its last tile.
type paddedRef struct {
	*ref.Decoder
	pad bool
}

func (d *paddedRef) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	outs, err := d.Decoder.Prefill(p)
	if err != nil || !d.pad {
		return outs, err
	}
	return outs, d.zeroTile(p.Blocks, len(p.Tokens))
}

// PrefillFrom pads as the engine's chunk program does (chunkRuns).
func (d *paddedRef) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	outs, err := d.Decoder.PrefillFrom(p)
	if err != nil || !d.pad || !chunkRuns(p.Start, len(p.Tokens), d.BlockSize()) {
		return outs, err
	}
	return outs, d.zeroTile(p.Blocks, p.Start+len(p.Tokens))
}

// zeroTile zeroes the rows end..promptTileEnd(end)-1 of blocks.
func (d *paddedRef) zeroTile(blocks []int32, end int) error {
	cfg, bs := d.Config(), d.BlockSize()
	zero := make([]bf16.BF16, cfg.NumKeyValueHeads*cfg.HeadDim)
	for pos := end; pos < promptTileEnd(end) && pos/bs < len(blocks); pos++ {
		for l := range cfg.NumHiddenLayers {
			if err := d.KV().Write(l, blocks, pos, zero, zero); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *refSUT) Decoder() qwen3.Decoder { return s.dec }
func (s *refSUT) Close() error           { s.d.Close(); return nil }

// PeekKV implements KVPeeker: ref's caches, full size (+0 past the blocks
// ref holds), and the spans that differ from the previous peek.
func (s *refSUT) PeekKV(layer int) (k, v []bf16.BF16, changed [][2]int, err error) {
	kv := s.d.KV()
	if s.prev == nil {
		n := kv.LayerSize()
		for range s.d.Config().NumHiddenLayers {
			s.prev = append(s.prev, [2][]bf16.BF16{make([]bf16.BF16, n), make([]bf16.BF16, n)})
			s.cur = append(s.cur, [2][]bf16.BF16{make([]bf16.BF16, n), make([]bf16.BF16, n)})
		}
	}
	lk, lv := kv.Layer(layer)
	for i, src := range [][]bf16.BF16{lk, lv} {
		cur, prev := s.cur[layer][i], s.prev[layer][i]
		clear(cur[copy(cur, src):])
		for j := 0; j < len(cur); {
			if cur[j] == prev[j] {
				j++
				continue
			}
			lo := j
			for j < len(cur) && cur[j] != prev[j] {
				j++
			}
			changed = append(changed, [2]int{lo, j})
		}
		copy(prev, cur)
	}
	// One list for K and V (element ranges of a layer; K's and V's are
	// the same layout).
	return s.cur[layer][0], s.cur[layer][1], mergeSpans(changed), nil
}

func servingBase() Base {
	return Base{Serve: &Serving{PrefillFrom: true, Verify: true, CopyBlocks: true}}
}

// The campaign with every serving action drawn runs green on ref and
// reaches each of them.
func TestServingCampaignOnRef(t *testing.T) {
	cases := 40
	if testing.Short() {
		cases = 16
	}
	rs := Campaign(Options{Seed: DefaultSeed, Cases: cases, Factory: refFactory(nil), Base: servingBase()})
	for _, r := range rs {
		if !r.Passed {
			t.Fatalf("case %d (seed %d): %s\n%s", r.Index, r.Seed, r.Error, r.Report())
		}
	}
	for _, rt := range ReachTotals(rs) {
		if _, serving := ServingReach[rt.Kind]; (serving || slices.Contains([]string{ReachFork, ReachPreempt, ReachReadmit, ReachSharedAfterEnd}, rt.Kind)) && rt.Cases == 0 {
			t.Errorf("%d cases never reached %s", cases, rt.Kind)
		}
	}
}

// plantBase delegates every call to ref (with the prompt padding).
type plantBase struct{ *paddedRef }

// shiftStart: a prefix hit at a block boundary starts one position early
// (start = cached - 1), writing its chunk one row back, into the last
// shared block.
type shiftStart struct{ plantBase }

func (d shiftStart) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	if p.Start > 0 && p.Start%d.BlockSize() == 0 {
		p.Start--
	}
	return d.paddedRef.PrefillFrom(p)
}

// staleHit: a prefix hit's first output is the previous call's last
// (a logits buffer not refreshed for the hit's first position).
type staleHit struct {
	plantBase
	last *qwen3.Output
	live map[qwen3.SeqID]bool
}

func (d *staleHit) Finish(seq qwen3.SeqID) error {
	delete(d.live, seq)
	return d.paddedRef.Finish(seq)
}

func (d *staleHit) keep(outs []qwen3.Output, err error) ([]qwen3.Output, error) {
	if len(outs) > 0 {
		o := outs[len(outs)-1]
		o.Logits = slices.Clone(o.Logits)
		d.last = &o
	}
	return outs, err
}

func (d *staleHit) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	d.live[p.Seq] = true
	return d.keep(d.paddedRef.Prefill(p))
}

func (d *staleHit) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	for _, st := range b {
		d.live[st.Seq] = true
	}
	return d.keep(d.paddedRef.Decode(b))
}

func (d *staleHit) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	hit := p.Start > 0 && !d.live[p.Seq] // a new sequence over cached blocks
	d.live[p.Seq] = true
	outs, err := d.paddedRef.PrefillFrom(p)
	if err == nil && hit && d.last != nil {
		outs[0].Token, outs[0].Logits = d.last.Token, slices.Clone(d.last.Logits)
	}
	return d.keep(outs, err)
}

// draftPos: the sequence's position stays at a verify's end after a
// rollback (cur_pos advanced past the accepted length on its own).
type draftPos struct {
	plantBase
	end map[qwen3.SeqID]int
}

func (d *draftPos) at(seq qwen3.SeqID, pos int, blocks []int32) int {
	if e, ok := d.end[seq]; ok && pos < e && e < len(blocks)*d.BlockSize() {
		return e
	}
	return pos
}

func (d *draftPos) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	b = slices.Clone(b)
	for i := range b {
		b[i].Pos = d.at(b[i].Seq, b[i].Pos, b[i].Blocks)
		delete(d.end, b[i].Seq)
	}
	return d.paddedRef.Decode(b)
}

func (d *draftPos) Verify(b []qwen3.VerifyStep) ([][]qwen3.Output, error) {
	b = slices.Clone(b)
	for i := range b {
		b[i].Pos = d.at(b[i].Seq, b[i].Pos, b[i].Blocks)
	}
	outs, err := d.paddedRef.Verify(b)
	for _, st := range b {
		d.end[st.Seq] = st.Pos + len(st.Tokens)
	}
	return outs, err
}

// recomputeDrift: a re-prefill of a finished sequence's own tokens (a
// preempted sequence's recompute) returns its last logit one float32 step
// off (a cached per-sequence state that is not reset).
type recomputeDrift struct {
	plantBase
	fed, gone map[qwen3.SeqID][]int32
}

func (d *recomputeDrift) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	outs, err := d.paddedRef.Prefill(p)
	if g := d.gone[p.Seq]; err == nil && len(p.Tokens) > 1 && slices.Equal(g[:min(len(g), len(p.Tokens))], p.Tokens) {
		o := &outs[len(outs)-1]
		o.Logits = slices.Clone(o.Logits)
		o.Logits[0] = math.Nextafter32(o.Logits[0], float32(math.Inf(1)))
	}
	d.fed[p.Seq] = slices.Clone(p.Tokens)
	return outs, err
}

func (d *recomputeDrift) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	for _, st := range b {
		d.fed[st.Seq] = append(d.fed[st.Seq][:min(st.Pos, len(d.fed[st.Seq]))], st.Token)
	}
	return d.paddedRef.Decode(b)
}

func (d *recomputeDrift) Finish(seq qwen3.SeqID) error {
	d.gone[seq] = d.fed[seq]
	delete(d.fed, seq)
	return d.paddedRef.Finish(seq)
}

// copySkip: CopyBlocks does nothing (copy-on-write skipped).
type copySkip struct{ plantBase }

func (copySkip) CopyBlocks([]qwen3.BlockCopy) error { return nil }

// copyHalf: a copy writes only the first half of the destination block's
// rows (the rows a colleague thought used).
type copyHalf struct{ plantBase }

func (d copyHalf) CopyBlocks(cs []qwen3.BlockCopy) error {
	cfg, bs := d.Config(), d.BlockSize()
	kvh, hd := cfg.NumKeyValueHeads, cfg.HeadDim
	for _, c := range cs {
		for l := range cfg.NumHiddenLayers {
			lk, lv := d.KV().Layer(l)
			for row := range bs / 2 {
				k, v := make([]bf16.BF16, kvh*hd), make([]bf16.BF16, kvh*hd)
				for h := range kvh {
					off := ((int(c.Src)*kvh+h)*bs + row) * hd
					if off+hd <= len(lk) {
						copy(k[h*hd:], lk[off:off+hd])
						copy(v[h*hd:], lv[off:off+hd])
					}
				}
				if err := d.KV().Write(l, []int32{c.Dst}, row, k, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var servingPlants = []struct {
	name  string
	plant func(*paddedRef) qwen3.Decoder
	want  string
	body  string
	// detail: what the failure's detail must say (the call it names).
	detail string
}{
	{"shift-start", func(d *paddedRef) qwen3.Decoder { return shiftStart{plantBase{d}} }, PropSharedWrite,
		"admit seq=0 prompt=40\nshare seq=1 from=0 len=32 prompt=40\n", "share the block"},
	{"stale-hit", func(d *paddedRef) qwen3.Decoder {
		return &staleHit{plantBase: plantBase{d}, live: map[qwen3.SeqID]bool{}}
	}, PropPrefixHit,
		"admit seq=0 prompt=40\nshare seq=1 from=0 len=33 prompt=40\n", "cold run"},
	{"draft-pos", func(d *paddedRef) qwen3.Decoder {
		return &draftPos{plantBase: plantBase{d}, end: map[qwen3.SeqID]int{}}
	}, PropRollback,
		"admit seq=0 prompt=10\nverify seqs=0 k=4 accept=2 draft=3\ndecode steps=2\n", "rolled back to 12 positions"},
	{"recompute-drift", func(d *paddedRef) qwen3.Decoder {
		return &recomputeDrift{plantBase: plantBase{d}, fed: map[qwen3.SeqID][]int32{}, gone: map[qwen3.SeqID][]int32{}}
	}, PropRecompute,
		"admit seq=0 prompt=5\ndecode steps=3\npreempt seq=0\nreadmit seq=0\n", "first run"},
	{"copy-skip", func(d *paddedRef) qwen3.Decoder { return copySkip{plantBase{d}} }, PropKVWrite,
		"admit seq=0 prompt=40\nfork seq=1 from=0\n", "block copy 1->2: destination row 0 "},
	{"copy-half", func(d *paddedRef) qwen3.Decoder { return copyHalf{plantBase{d}} }, PropKVWrite,
		"admit seq=0 prompt=60\nverify seqs=0 k=2 accept=1\nfork seq=1 from=0\n", "block copy 1->2: destination row 16 "},
}

// Each planted serving bug is red on its property, at a script written
// for it; ref itself passes every one of the scripts.
func TestServingPlantsRed(t *testing.T) {
	const head = "model tiny seed=1\ndevice sim arch=wormhole\nengine block=32 blocks=8 capacity=3 mode=eager\n"
	for _, p := range servingPlants {
		t.Run(p.name, func(t *testing.T) {
			s, err := ParseScript(strings.NewReader(head + p.body))
			if err != nil {
				t.Fatal(err)
			}
			if f, _, err := RunScript(s, refFactory(nil)); err != nil || f != nil {
				t.Fatalf("ref: %v %v", f, err)
			}
			f, _, err := RunScript(s, refFactory(p.plant))
			if err != nil {
				t.Fatal(err)
			}
			if f == nil || f.Property != p.want || !strings.Contains(f.Detail, p.detail) {
				t.Fatalf("want %s (%q), got %v", p.want, p.detail, f)
			}
			t.Logf("%s", f)
		})
	}
}

// The generator finds each planted serving bug within a few cases, and the
// shrunk failure names the plant's property.
func TestServingPlantsFound(t *testing.T) {
	for _, p := range servingPlants {
		t.Run(p.name, func(t *testing.T) {
			rs := Campaign(Options{Seed: DefaultSeed, Cases: 60, Factory: refFactory(p.plant), Base: servingBase(), FailFast: true, Workers: 1, ShrinkRuns: 150})
			last := rs[len(rs)-1]
			if last.Passed || last.Failure == nil {
				t.Fatalf("60 cases passed")
			}
			t.Logf("case %d: %s\n%s", last.Index, last.Failure, last.ScriptText)
			if last.Failure.Property != p.want {
				t.Errorf("shrunk failure is %s, want %s", last.Failure.Property, p.want)
			}
		})
	}
}

// The KV log side of shared-write: a logged write into a block two host
// tables hold fails, one into a block a single table holds does not.
func TestSharedWriteFromLog(t *testing.T) {
	s, err := ParseScript(strings.NewReader("model tiny seed=1\ndevice sim arch=wormhole\nengine block=32 blocks=8 capacity=2\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := newRunner(s.Scenario, refFactory(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	parent := r.pool.NewTable()
	if err := parent.Grow(40); err != nil {
		t.Fatal(err)
	}
	r.tabs[0], r.tabs[1] = parent, parent.Fork()
	if _, err := r.tabs[1].PrepareWrite(40, 41); err != nil { // the child copies block 1
		t.Fatal(err)
	}
	b0, b1 := parent.Blocks()[0], parent.Blocks()[1]
	var ps []problem
	r.checkSharedLog(&ps, []KVWrite{{Layer: 0, Slot: 0, Pos: 33, Block: int64(b1), Row: 1}}, map[int]int{0: 0})
	if len(ps) != 0 {
		t.Fatalf("a write into the parent's own block: %v", ps)
	}
	r.checkSharedLog(&ps, []KVWrite{{Layer: 1, Value: true, Slot: 1, Pos: 3, Block: int64(b0), Row: 3}}, map[int]int{1: 1})
	if len(ps) != 1 || ps[0].prop != PropSharedWrite || ps[0].seq != 1 || !strings.Contains(ps[0].detail, "seqs [0 1] share") {
		t.Fatalf("a write into shared block %d: %v", b0, ps)
	}
}

// BenchmarkServingCampaignRef: the default campaign's 200 cases on the ref
// SUT, with the serving actions (serving) and without (plain): what the
// serving schedules cost the runner and the oracle (the cold runs of the
// prefix hits included).
func BenchmarkServingCampaignRef(b *testing.B) {
	for _, v := range []struct {
		name string
		base Base
	}{{"plain", Base{Serve: &Serving{}}}, {"serving", servingBase()}} {
		b.Run(v.name, func(b *testing.B) {
			cpu0 := cpuTime(0)
			for i := 0; i < b.N; i++ {
				for _, r := range Campaign(Options{Seed: DefaultSeed, Cases: 200, Factory: refFactory(nil), Base: v.base}) {
					if !r.Passed {
						b.Fatal(r.Report())
					}
				}
			}
			b.ReportMetric(float64(200*b.N)/b.Elapsed().Seconds(), "schedules/s")
			if d := cpuTime(0) - cpu0; d > 0 {
				b.ReportMetric(d.Seconds()/float64(b.N), "cpu-s/op")
			}
		})
	}
}

// noVerify is ref that answers every serving call but offers verify to
// no one (as an engine whose hello does not list it).
type noVerify struct{ plantBase }

func (noVerify) OffersServing(call string) bool { return call != qwen3.ServeVerify }

// A campaign asks the SUT what it serves (qwen3.Serves, through a
// ServingOffer too) and draws only those actions: no verify here, prefix
// hits and copies all the same; Served tells what it found.
func TestServingDrawnThroughServes(t *testing.T) {
	var served *Serving
	rs := Campaign(Options{Seed: DefaultSeed, Cases: 16, Factory: refFactory(func(d *paddedRef) qwen3.Decoder { return noVerify{plantBase{d}} }),
		Served: func(s Serving) { served = &s }})
	if served == nil || *served != (Serving{PrefillFrom: true, CopyBlocks: true}) {
		t.Fatalf("served %+v", served)
	}
	reach := map[string]int{}
	for _, r := range rs {
		if !r.Passed {
			t.Fatal(r.Report())
		}
		for k, n := range r.Reach {
			reach[k] += n
		}
	}
	if reach[ReachVerify] != 0 || reach[ReachShare] == 0 || reach[ReachBlockCopy] == 0 {
		t.Fatalf("reach %v: want no verify, prefix hits and block copies", reach)
	}
}
