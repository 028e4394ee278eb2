package proptest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/wire"
)

// refEngine is a small engine an outsider could write from the README: ref
// (bit-exact, so it claims exact) on its own paged cache, reporting
// cur_pos and its KV writes, and making one of the choices the protocol
// leaves to the engine (mode):
//
//	ref-clear        zero a sequence's blocks at finish, reported as
//	                 clears (version 2)
//	ref-clear-v1     the same in version 1: the zeroing writes reported
//	                 as writes of the finished sequence at each row's
//	                 position (version 1 has no clear flag)
//	ref-clear-admit  zero the blocks an admit hands out before the
//	                 prompt is written (clears, then the prompt's writes)
//	ref-clear-live   a bug: at finish it also zeroes the first block of
//	                 another live sequence
//
// It never pads a prompt's last 32-row tile, whatever the hints say.
type refEngine struct {
	*ref.Decoder
	mode   string
	bs     int
	layers int
	tables map[int][]int32
	length map[int]int
	writes []wire.KVWrite
}

func openRefEngine(mode string) wire.Open {
	return func(h wire.Hello) (wire.Engine, wire.Caps, error) {
		cfg, err := qwen3.Preset(h.Model.Preset)
		if err != nil {
			return nil, wire.Caps{}, err
		}
		w, err := qwen3.Synth(cfg, h.Model.Seed)
		if err != nil {
			return nil, wire.Caps{}, err
		}
		d, err := ref.New(w, ref.Options{BlockSize: h.BlockSize, NumBlocks: h.NumBlocks, Threads: 1})
		if err != nil {
			return nil, wire.Caps{}, err
		}
		c := wire.Caps{Engine: "ref, " + mode, Logits: wire.LogitsFull, Exact: true, Observes: []string{wire.ObsCurPos, wire.ObsKVWrites}}
		switch mode {
		case "ref-clear-v1":
			c.Version = 1
		case "ref-v1-only", "ref-v2-only":
			if v := int(mode[5] - '0'); h.Version != v {
				return nil, wire.Caps{}, fmt.Errorf("protocol version %d: this engine speaks %d", h.Version, v)
			}
		}
		return &refEngine{Decoder: d, mode: mode, bs: h.BlockSize, layers: cfg.NumHiddenLayers, tables: map[int][]int32{}, length: map[int]int{}}, c, nil
	}
}

func (e *refEngine) Close() error { e.Decoder.Close(); return nil }

// zero zeroes blocks in every layer's K and V and notes the writes.
func (e *refEngine) zero(seq int, blocks []int32, clear bool) {
	kv := e.KV()
	for l := 0; l < e.layers; l++ {
		k, v := kv.Layer(l)
		per := len(k) / max(1, kv.Blocks()) // one block's values
		for j, b := range blocks {
			if int(b) < kv.Blocks() {
				clear := k[int(b)*per : (int(b)+1)*per]
				for i := range clear {
					clear[i] = 0
				}
				clear = v[int(b)*per : (int(b)+1)*per]
				for i := range clear {
					clear[i] = 0
				}
			}
			for _, x := range []string{"k", "v"} {
				for row := 0; row < e.bs; row++ {
					w := wire.KVWrite{Layer: l, KV: x, Seq: -1, Pos: -1, Block: int64(b), Row: int64(row), Clear: clear}
					if !clear {
						w.Seq, w.Pos = seq, int64(j*e.bs+row)
					}
					e.writes = append(e.writes, w)
				}
			}
		}
	}
}

// wrote notes the writes of one position.
func (e *refEngine) wrote(seq, pos int, blocks []int32) {
	for l := 0; l < e.layers; l++ {
		for _, x := range []string{"k", "v"} {
			e.writes = append(e.writes, wire.KVWrite{Layer: l, KV: x, Seq: seq, Pos: int64(pos), Block: int64(blocks[pos/e.bs]), Row: int64(pos % e.bs)})
		}
	}
}

func (e *refEngine) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	e.writes = nil
	if e.mode == "ref-clear-admit" {
		e.zero(int(p.Seq), p.Blocks, true)
	}
	out, err := e.Decoder.Prefill(p)
	if err != nil {
		return nil, err
	}
	for i := range p.Tokens {
		e.wrote(int(p.Seq), i, p.Blocks)
	}
	e.tables[int(p.Seq)], e.length[int(p.Seq)] = slices.Clone(p.Blocks), len(p.Tokens)
	return out, nil
}

func (e *refEngine) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	e.writes = nil
	out, err := e.Decoder.Decode(b)
	if err != nil {
		return nil, err
	}
	for _, s := range b {
		e.wrote(int(s.Seq), s.Pos, s.Blocks)
		e.tables[int(s.Seq)], e.length[int(s.Seq)] = slices.Clone(s.Blocks), s.Pos+1
	}
	return out, nil
}

func (e *refEngine) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	e.writes = nil
	out, err := e.Decoder.PrefillFrom(p)
	if err != nil {
		return nil, err
	}
	for i := range p.Tokens {
		e.wrote(int(p.Seq), p.Start+i, p.Blocks)
	}
	e.tables[int(p.Seq)], e.length[int(p.Seq)] = slices.Clone(p.Blocks), p.Start+len(p.Tokens)
	return out, nil
}

func (e *refEngine) Verify(b []qwen3.VerifyStep) ([][]qwen3.Output, error) {
	e.writes = nil
	out, err := e.Decoder.Verify(b)
	if err != nil {
		return nil, err
	}
	for _, s := range b {
		for j := range s.Tokens {
			e.wrote(int(s.Seq), s.Pos+j, s.Blocks)
		}
		e.tables[int(s.Seq)], e.length[int(s.Seq)] = slices.Clone(s.Blocks), s.Pos+len(s.Tokens)
	}
	return out, nil
}

// CopyBlocks reports a copy's writes as the protocol says: every row of
// each destination block, once per layer, K and V, seq and pos -1.
func (e *refEngine) CopyBlocks(copies []qwen3.BlockCopy) error {
	e.writes = nil
	if err := e.Decoder.CopyBlocks(copies); err != nil {
		return err
	}
	for _, c := range copies {
		for l := 0; l < e.layers; l++ {
			for _, x := range []string{"k", "v"} {
				for row := 0; row < e.bs; row++ {
					e.writes = append(e.writes, wire.KVWrite{Layer: l, KV: x, Seq: -1, Pos: -1, Block: int64(c.Dst), Row: int64(row)})
				}
			}
		}
	}
	return nil
}

// held is the subset of blocks that no live sequence but seq holds (a
// clearing engine must spare a block a prefix hit or a fork still shares).
func (e *refEngine) held(seq int, blocks []int32) []int32 {
	var out []int32
	for _, b := range blocks {
		shared := false
		for o, t := range e.tables {
			if o != seq && slices.Contains(t, b) {
				shared = true
			}
		}
		if !shared {
			out = append(out, b)
		}
	}
	return out
}

func (e *refEngine) Finish(seq qwen3.SeqID) error {
	e.writes = nil
	if err := e.Decoder.Finish(seq); err != nil {
		return err
	}
	q := int(seq)
	e.zero(q, e.held(q, e.tables[q]), e.mode != "ref-clear-v1")
	delete(e.tables, q)
	delete(e.length, q)
	if e.mode == "ref-clear-live" {
		for o := range MaxSeqs {
			if t, ok := e.tables[o]; ok {
				e.zero(o, t[:1], true)
				break
			}
		}
	}
	return nil
}

// Observe implements wire.Observer.
func (e *refEngine) Observe(op string, seqs []int) (wire.Observations, error) {
	o := wire.Observations{KVWrites: e.writes}
	e.writes = nil
	if op == wire.OpAdmit || op == wire.OpDecode || op == wire.OpPrefillFrom || op == wire.OpVerify {
		for _, q := range seqs {
			n := e.length[q]
			o.Seqs = append(o.Seqs, wire.SeqObs{Seq: q, CurPos: &n})
		}
	}
	return o, nil
}

// clearScript: seq 0 fills blocks 0 and 1 and finishes; seq 1 is admitted
// into block 0 (the pool's lowest) and jumps past its tile padding into
// block 1, where ref still holds seq 0's rows and a clearing engine zeros.
const clearScript = `model tiny seed=2
device engine arch=wormhole strict
engine block=32 blocks=4 width=dynamic capacity=2 mode=captured
admit seq=0 prompt=40
decode steps=2
admit seq=2 prompt=2
finish seq=0
admit seq=1 prompt=3
decode steps=1 seqs=1 skip=34
decode steps=2
finish seq=1
`

// TestEngineChoices: an engine that makes a choice the protocol leaves to
// it passes: it clears freed blocks (reported as clears in version 2, as
// plain writes at finish in version 1) or the blocks an admit hands out,
// and it pads no prompt tile, so after a jump its logits differ from
// ref's (which keeps a finished sequence's rows and pads prompt tiles with
// zeros). An engine whose clear hits a live sequence's row fails kv-write.
func TestEngineChoices(t *testing.T) {
	for _, tc := range []struct{ mode, prop, detail string }{
		{"ref-clear", "", ""},
		{"ref-clear-v1", "", ""},
		{"ref-clear-admit", "", ""},
		{"ref-clear-live", PropKVWrite, "overwrites seq 2 pos 0, which is live"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			f := engineFactory(t, tc.mode, 0)
			fail, _, err := RunScript(mustScript(t, clearScript), f.Factory)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.prop == "" && fail != nil:
				t.Fatalf("failed: %v", fail)
			case tc.prop != "" && (fail == nil || fail.Property != tc.prop || !strings.Contains(fail.Detail, tc.detail)):
				t.Fatalf("got %v, want %s with %q", fail, tc.prop, tc.detail)
			}
		})
	}
}

// TestEngineChoicesCampaign: the clearing engine passes a short random
// campaign (starts by decode, reused ids, jumps, teacher forcing).
func TestEngineChoicesCampaign(t *testing.T) {
	f := engineFactory(t, "ref-clear", 0)
	for _, r := range Campaign(Options{Seed: 3, Cases: 6, Factory: f.Factory, Base: Base{Device: EngineDevice}}) {
		if !r.Passed {
			t.Error(r.Report())
		}
	}
}

// TestEngineV1Only: an engine written for version 1 (or 2) that refuses a
// newer hello is asked again one version older until it accepts, and in
// that version from then on.
func TestEngineV1Only(t *testing.T) {
	for _, tc := range []struct {
		mode    string
		version int
	}{{"ref-v1-only", 1}, {"ref-v2-only", 2}} {
		f := engineFactory(t, tc.mode, 0)
		fail, _, err := RunScript(mustScript(t, clearScript), f.Factory)
		if err != nil || fail != nil {
			t.Fatalf("%s: %v %v", tc.mode, err, fail)
		}
		if f.version != tc.version {
			t.Fatalf("%s: the factory remembered version %d, want %d", tc.mode, f.version, tc.version)
		}
	}
}
