package proptest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
	"github.com/offcard/offcard/tt"
)

// SUT is a system under test: a qwen3.Decoder plus whatever it can tell
// about the device. Only Decoder and Close are required; the runner checks
// every property whose observation the SUT offers (the optional interfaces
// below) and skips the others.
type SUT interface {
	// Decoder is the implementation driven with the schedule.
	Decoder() qwen3.Decoder
	// Close releases the SUT.
	Close() error
}

// A Factory builds a fresh SUT for a scenario (the engine on sim today;
// the engine on the card later). The runner calls it once per schedule
// run, shrinking included.
type Factory func(sc Scenario) (SUT, error)

// Resetter is a SUT whose engine can be forced back to a cold regime, so
// the next captured step records a new trace (the Recapture command).
// Without it Recapture does nothing.
type Resetter interface {
	Reset() error
}

// KVWrite is one cache-row write as the device performed it: the cache
// (layer, K or V), the batch row (slot) that wrote, the position the device
// used (its cur_pos), and the block and row it wrote to.
type KVWrite struct {
	Layer int // -1: a buffer that is no KV cache of the engine
	Value bool
	Slot  int
	Pos   int64
	Block int64
	Row   int64
}

func (w KVWrite) String() string {
	kv := "K"
	if w.Value {
		kv = "V"
	}
	return fmt.Sprintf("layer %d %s slot %d pos %d -> block %d row %d", w.Layer, kv, w.Slot, w.Pos, w.Block, w.Row)
}

// KVObserver is a SUT that logs its KV-cache writes. TakeKVWrites returns
// the writes since the previous call, in order.
type KVObserver interface {
	TakeKVWrites() ([]KVWrite, error)
}

// PosObserver is a SUT that can read its device cur_pos back ([Capacity],
// one entry per slot). It is read after every Decoder call.
type PosObserver interface {
	DeviceCurPos() ([]int32, error)
}

// OpPos is the device cur_pos an op that reads it (paged_update_cache,
// paged SDPA decode) saw, one entry per slot.
type OpPos struct {
	Op     string
	Regime string // eager or replay
	CurPos []int32
	// Seq is the op's place in device order (1, 2, ...; 0 unknown).
	Seq int
}

// OpPosObserver is a SUT that records cur_pos at every op that reads it.
// TakeOpPos returns the records since the previous call, in device order;
// they are valid until the SUT's next call.
type OpPosObserver interface {
	TakeOpPos() ([]OpPos, error)
}

// FindingObserver is a SUT with a sanitizer. TakeFindings returns the
// hazards seen since the previous call, one readable line each.
type FindingObserver interface {
	TakeFindings() []string
}

// FindingSeqs is a FindingObserver that also says at which op (device
// order, as OpPos.Seq) each finding of the last TakeFindings arose.
type FindingSeqs interface {
	FindingSeqs() []int
}

// DeviceTapper is a SUT whose engine runs on a Tap: the properties read
// regimes, host writes and live allocations from its device events.
type DeviceTapper interface {
	DeviceTap() *Tap
}

// KVPeeker is a SUT whose whole KV cache can be read cheaply, without a
// host transfer the engine or the sanitizer would see (sim: PeekInto),
// after every call; in ref's layout (per layer, [block][kvHead][row]
// [headDim]). PeekKV also returns the element ranges [lo, hi) of k and v
// that may have changed since the layer's previous PeekKV: outside them
// both hold what they held then (the first time: +0, bits 0x0000, as
// ref's caches start). The slices are valid until the next PeekKV.
type KVPeeker interface {
	PeekKV(layer int) (k, v []bf16.BF16, changed [][2]int, err error)
}

// StepInfo is what the engine's last step did.
type StepInfo struct {
	Regime string // cold, warm, capture, replay
	Width  int    // page-table width
}

// StepObserver is a SUT that reports its last step's regime and width.
type StepObserver interface {
	LastStep() StepInfo
}

// KVReader is a SUT whose whole KV cache can be read back, in ref's layout
// (per layer, [block][kvHead][row][headDim]).
type KVReader interface {
	ReadKV(layer int) (k, v []bf16.BF16, err error)
}

// PageTableObserver is a SUT that can show the page table its device
// holds, without a host transfer the engine would see (sim: Peek). ok is
// false while the engine has no page table yet (before its first step);
// otherwise table holds width columns per slot, row by row.
type PageTableObserver interface {
	DevicePageTable() (table []int32, width int, ok bool, err error)
}

// The model weights are synthesised once per (preset, seed), or loaded
// once per checkpoint directory, and shared, read-only, by every run;
// workers that need different models make them at the same time (a
// campaign's first cases need all three).
var weightsCache sync.Map // key -> *modelWeights

type modelWeights struct {
	once sync.Once
	w    *qwen3.Weights
	err  error
}

// modelKey names a scenario's weights in weightsCache.
func modelKey(sc Scenario) string {
	if sc.ModelDir != "" {
		return "dir:" + sc.ModelDir
	}
	return fmt.Sprintf("%s/%d", sc.Model, sc.ModelSeed)
}

// ModelWeights returns the scenario's (cached) weights: synthetic ones of
// its preset and seed, or its checkpoint directory's.
func ModelWeights(sc Scenario) (*qwen3.Weights, error) {
	return PrepareModel(sc, nil)
}

// PrepareModel is ModelWeights that reports the synthesis's progress (see
// qwen3.SynthProgress) when it is this call that makes the weights.
func PrepareModel(sc Scenario, progress func(done, total int64)) (*qwen3.Weights, error) {
	v, _ := weightsCache.LoadOrStore(modelKey(sc), &modelWeights{})
	m := v.(*modelWeights)
	m.once.Do(func() {
		if sc.ModelDir != "" {
			m.w, m.err = qwen3.Load(sc.ModelDir)
			return
		}
		cfg, err := qwen3.Preset(sc.Model)
		if err != nil {
			m.err = err
			return
		}
		m.w, m.err = qwen3.SynthProgress(cfg, sc.ModelSeed, progress)
	})
	return m.w, m.err
}

// ModelConfig is the scenario's model config: its preset's, or its
// checkpoint directory's config.json (read, not the whole checkpoint).
func ModelConfig(sc Scenario) (qwen3.Config, error) {
	if sc.ModelDir != "" {
		return qwen3.LoadConfig(filepath.Join(sc.ModelDir, "config.json"))
	}
	return qwen3.Preset(sc.Model)
}

// SimSUT is qwen3.Engine on the simulator, with every observation: the
// KV write log, cur_pos read-back, strict findings, the step's regime and
// width, the device page table, and the caches.
type SimSUT struct {
	Dev *sim.Device
	Eng *qwen3.Engine

	Tap *Tap

	caches   map[uint64]cacheID // cache buffer address -> (layer, K/V)
	layers   int
	curPos   tt.Tensor
	posBytes []byte // onOp's peek of cur_pos
	opPos    []OpPos
	posBuf   []int32 // the CurPos values of opPos
	peekErr  error
	nFind    int   // findings seen by onOp
	findSeq  []int // op seq of each finding since the last TakeFindings
	ucSeq    []int // op seq of each executed paged_update_cache since the last TakeKVWrites
	strictOn bool
	peeks    [][2]peekCache // per layer, K and V (PeekKV)
	changed  [][2]int       // PeekKV's changed ranges, reused
}

type cacheID struct {
	layer int
	value bool
}

// SimFactory builds qwen3.Engine on a fresh sim.Device (KV log on, strict
// as the scenario says).
func SimFactory(sc Scenario) (SUT, error) {
	if sc.Device != "sim" {
		return nil, fmt.Errorf("device %q: this factory builds sim only", sc.Device)
	}
	w, err := ModelWeights(sc)
	if err != nil {
		return nil, err
	}
	arch := sim.Wormhole
	if sc.Arch == "blackhole" {
		arch = sim.Blackhole
	}
	l1 := sim.L1Poison
	if sc.L1 != "" {
		if l1, err = sim.ParseL1Init(sc.L1); err != nil {
			return nil, err
		}
	}
	s := &SimSUT{caches: map[uint64]cacheID{}, layers: w.Config.NumHiddenLayers, strictOn: sc.Strict}
	dev, err := sim.New(sim.Options{Arch: arch, Strict: sc.Strict, L1: l1, TraceRegionSize: sc.TraceRegion, LogKV: true, OnOp: s.onOp, OnOpBrief: true})
	if err != nil {
		return nil, err
	}
	s.Tap = NewTap(dev)
	eng, err := qwen3.NewEngine(s.Tap, w, sc.EngineOptions())
	if err != nil {
		return nil, err
	}
	s.Tap.MarkBaseline()
	s.Tap.TakeEvents()
	s.Dev, s.Eng = dev, eng
	_, s.curPos, _ = eng.Inputs()
	for l := 0; l < s.layers; l++ {
		k, v := eng.KVCache(l)
		ka, err1 := dev.Address(k)
		va, err2 := dev.Address(v)
		if err := errors.Join(err1, err2); err != nil {
			eng.Close()
			return nil, err
		}
		s.caches[ka] = cacheID{l, false}
		s.caches[va] = cacheID{l, true}
	}
	// Init-time findings (none expected) are reported with the first call.
	return s, nil
}

// Decoder implements SUT.
func (s *SimSUT) Decoder() qwen3.Decoder { return s.Eng }

// Close implements SUT.
func (s *SimSUT) Close() error { return s.Eng.Close() }

// Reset implements Resetter.
func (s *SimSUT) Reset() error { return s.Eng.Reset() }

// Recycler is a SUT whose device memory later SUTs may reuse once the run
// is over (after Close and every check).
type Recycler interface {
	// Recycle ends the SUT: any later use of its device panics.
	Recycle()
}

// Recycle implements Recycler (sim.Device.Recycle); PeekKV's buffers go
// to later SUTs too.
func (s *SimSUT) Recycle() {
	s.Dev.Recycle()
	for _, l := range s.peeks {
		for _, pc := range l {
			if pc.b != nil {
				peekBufs.Put(&pc.b)
			}
		}
	}
	s.peeks = nil
}

// peekBufs holds the host buffers of recycled SUTs' KV peeks, so that a
// case does not fault in fresh memory for its first whole-cache read.
var peekBufs sync.Pool // of *[]byte

// peekBuf is a buffer of n bytes of unspecified contents.
func peekBuf(n int) []byte {
	if p, ok := peekBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]byte, n)
}

// DeviceTap implements DeviceTapper.
func (s *SimSUT) DeviceTap() *Tap { return s.Tap }

// PeekKV implements KVPeeker with the simulator's Peek.
func (s *SimSUT) PeekKV(layer int) (k, v []bf16.BF16, changed [][2]int, err error) {
	kt, vt := s.Eng.KVCache(layer)
	if s.peeks == nil {
		s.peeks = make([][2]peekCache, s.layers)
	}
	var out [2][]bf16.BF16
	changed = s.changed[:0] // valid until the next PeekKV (KVPeeker)
	for i, t := range []tt.Tensor{kt, vt} {
		pc := &s.peeks[layer][i]
		all := false
		if pc.t.ID != t.ID || pc.t.Addr != t.Addr || pc.v == nil {
			// The first read (since 0) counts from +0, as the first
			// PeekKV does. A tensor that replaced another is told whole.
			all = pc.v != nil
			b := peekBuf(2 * t.Spec.Volume())
			v := bf16.FromBytes(b)
			*pc = peekCache{t: t, b: b, v: v, alias: len(v) > 0 && &bf16.FromBytes(b[:2])[0] == &v[0]}
		}
		pc.since, err = s.Dev.PeekInto(t, pc.b, pc.since, func(lo, hi int) {
			if !pc.alias {
				copy(pc.v[lo:hi], bf16.FromBytes(pc.b[2*lo:2*hi]))
			}
			if n := len(changed); n > 0 && changed[n-1][1] == lo {
				changed[n-1][1] = hi
			} else {
				changed = append(changed, [2]int{lo, hi})
			}
		})
		if err != nil {
			return nil, nil, nil, err
		}
		if all {
			changed = append(changed[:0], [2]int{0, len(pc.v)})
		}
		out[i] = pc.v
	}
	s.changed = changed
	return out[0], out[1], changed, nil
}

// peekCache is one KV cache tensor as PeekKV last read it: its host
// bytes, their bf16 values (the same memory when alias is set: a
// little-endian host), and the device clock to read changes from.
type peekCache struct {
	t     tt.Tensor
	since uint64
	b     []byte
	v     []bf16.BF16
	alias bool
}

// UpdateCacheSeqs returns the op seq of each executed paged_update_cache
// since the last TakeKVWrites.
func (s *SimSUT) UpdateCacheSeqs() []int { return s.ucSeq }

// TakeKVWrites implements KVObserver from the simulator's KV log.
func (s *SimSUT) TakeKVWrites() ([]KVWrite, error) {
	s.ucSeq = s.ucSeq[:0]
	log := s.Dev.KVLog()
	s.Dev.ResetKVLog()
	out := make([]KVWrite, len(log))
	for i, w := range log {
		id, ok := s.caches[w.CacheAddr]
		if !ok {
			id.layer = -1
		}
		out[i] = KVWrite{Layer: id.layer, Value: id.value, Slot: w.User,
			Pos: int64(int32(w.Pos)), Block: int64(w.Physical), Row: int64(w.Row)}
	}
	return out, nil
}

// onOp records cur_pos at every executed op that reads it. It reads only
// the event's Seq, Op and Regime (the device builds brief events:
// OnOpBrief).
func (s *SimSUT) onOp(e sim.OpEvent) {
	if s.Eng == nil {
		return
	}
	if s.strictOn {
		// Findings() copies only a non-empty list (rare: a failing run).
		if f := s.Dev.Findings(); len(f) > s.nFind {
			for range f[s.nFind:] {
				s.findSeq = append(s.findSeq, e.Seq)
			}
			s.nFind = len(f)
		}
	}
	if e.Regime == sim.Capture {
		return
	}
	switch e.Op {
	case "paged_update_cache", "paged_fused_update_cache":
		s.ucSeq = append(s.ucSeq, e.Seq)
	case "paged_scaled_dot_product_attention_decode":
	default:
		return
	}
	n := s.curPos.Spec.Volume()
	if cap(s.posBytes) < 4*n {
		s.posBytes = make([]byte, 4*n)
	}
	b := s.posBytes[:4*n]
	if err := s.Dev.PeekTo(s.curPos, b); err != nil {
		s.peekErr = err
		return
	}
	at := len(s.posBuf)
	for i := range n {
		s.posBuf = append(s.posBuf, int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	pos := s.posBuf[at : at+n : at+n] // a later append that moves posBuf leaves it as it is
	s.opPos = append(s.opPos, OpPos{Op: e.Op, Regime: e.Regime.String(), CurPos: pos, Seq: e.Seq})
}

// TakeOpPos implements OpPosObserver.
// The list and its CurPos slices are reused from the next call on.
func (s *SimSUT) TakeOpPos() ([]OpPos, error) {
	p, err := s.opPos, s.peekErr
	s.opPos, s.posBuf, s.peekErr = s.opPos[:0], s.posBuf[:0], nil
	return p, err
}

// DeviceCurPos implements PosObserver.
func (s *SimSUT) DeviceCurPos() ([]int32, error) {
	_, cp, _ := s.Eng.Inputs()
	h, err := s.Dev.ReadHost(cp)
	if err != nil {
		return nil, err
	}
	return h.Int32s(), nil
}

// DevicePageTable implements PageTableObserver: Engine.PageTable read with
// the simulator's Peek (not a host transfer, so the engine's counters and
// the sanitizer do not see it).
func (s *SimSUT) DevicePageTable() ([]int32, int, bool, error) {
	t, ok := s.Eng.PageTable()
	if !ok {
		return nil, 0, false, nil
	}
	h, err := s.Dev.Peek(t)
	if err != nil {
		return nil, 0, true, err
	}
	if len(h.Shape) != 2 {
		return nil, 0, true, fmt.Errorf("page table %v: not two-dimensional", t)
	}
	return h.Int32s(), h.Shape[1], true, nil
}

// TakeFindings implements FindingObserver.
func (s *SimSUT) TakeFindings() []string {
	f := s.Dev.Findings()
	if len(f) == 0 {
		s.findSeq = s.findSeq[:0]
		return nil
	}
	s.Dev.ClearFindings()
	s.nFind = 0
	out := make([]string, len(f))
	for i, x := range f {
		out[i] = x.String()
	}
	return out
}

// FindingSeqs implements FindingSeqs: the op seq at which each finding of
// the last TakeFindings was first seen (0: before any op, e.g. at a trace
// execution's checks).
func (s *SimSUT) FindingSeqs() []int {
	out := slices.Clone(s.findSeq)
	s.findSeq = s.findSeq[:0]
	return out
}

// LastStep implements StepObserver.
func (s *SimSUT) LastStep() StepInfo {
	st := s.Eng.LastStep()
	return StepInfo{Regime: st.Regime.String(), Width: st.Width}
}

// ReadKV implements KVReader.
func (s *SimSUT) ReadKV(layer int) (k, v []bf16.BF16, err error) {
	kt, vt := s.Eng.KVCache(layer)
	kh, err := s.Dev.ReadHost(kt)
	if err != nil {
		return nil, nil, err
	}
	vh, err := s.Dev.ReadHost(vt)
	if err != nil {
		return nil, nil, err
	}
	return kh.BF16s(), vh.BF16s(), nil
}
