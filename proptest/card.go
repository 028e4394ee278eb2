package proptest

import (
	"errors"
	"fmt"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/tt"
	"github.com/offcard/offcard/tthw"
)

// CardDevice is the device name of scenarios run on a device library
// (offcard check --device tt --lib PATH).
const CardDevice = "tt"

// CardFactory builds qwen3.Engine on a fresh device of the offcard_tt
// library at lib (the C loopback in CI, the ttnn shim on a card) for every
// schedule run. The SUT runs in the tolerant mode: a card is not bit-exact
// with ref and shows no op log, so it is observed only through what the
// device can report, read back after every Decoder call: each sequence's
// cur_pos and page-table row, and the KV caches, whose rows that changed
// since the previous call are the call's KV writes. Trace rules, host
// writes and device memory come from the device's own events: the engine
// runs on a Tap.
func CardFactory(lib string, tol Tolerance) Factory {
	if tol == (Tolerance{}) {
		tol = DefaultTolerance
	}
	return func(sc Scenario) (SUT, error) {
		if sc.Device != CardDevice {
			return nil, fmt.Errorf("device %q: this factory builds %s only", sc.Device, CardDevice)
		}
		w, err := ModelWeights(sc)
		if err != nil {
			return nil, err
		}
		dev, err := tthw.Open(lib, tthw.Options{Arch: sc.Arch, TraceRegionSize: sc.TraceRegion})
		if err != nil {
			return nil, err
		}
		// The engine runs on a tap, so the regime, host-write and
		// device-memory properties hold on a card as on sim; the SUT's own
		// read-backs and poisoning go to the device directly, unseen by it.
		tap := NewTap(dev)
		eng, err := qwen3.NewEngine(tap, w, sc.EngineOptions())
		if err != nil {
			dev.Close()
			return nil, err
		}
		tap.MarkBaseline()
		tap.TakeEvents()
		s := &CardSUT{Dev: dev, Eng: eng, tap: tap, tol: tol, layers: w.Config.NumHiddenLayers, bs: sc.BlockSize}
		s.rec = &callLog{d: eng, bs: sc.BlockSize}
		s.rec.before = s.poison
		if err := s.snapshot(); err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	}
}

// CardSUT is qwen3.Engine on a tthw.Device.
type CardSUT struct {
	Dev *tthw.Device
	Eng *qwen3.Engine

	tap    *Tap
	tol    Tolerance
	layers int
	bs     int
	rec    *callLog
	prev   [][2][]bf16.BF16 // the caches after the previous call, per layer (K, V)
}

// callLog passes calls to the engine and keeps the positions each
// sequence of the last call wrote (from the call's own inputs), to name
// the KV rows that changed.
type callLog struct {
	d      qwen3.Decoder
	bs     int
	wrote  map[[2]int64][2]int // (block, row) -> (seq, pos)
	inCall map[int]bool        // the sequences of the last call
	owner  map[int64][2]int    // block -> (seq, index in its table) of the call's sequences
	before func() error        // runs after wrote is set, before the call
}

func (r *callLog) note(seq qwen3.SeqID, pos int, blocks []int32, bs int) {
	for j, b := range blocks {
		r.owner[int64(b)] = [2]int{int(seq), j}
	}
	if pos/bs < len(blocks) {
		r.wrote[[2]int64{int64(blocks[pos/bs]), int64(pos % bs)}] = [2]int{int(seq), pos}
	}
}

func (r *callLog) Config() qwen3.Config { return r.d.Config() }
func (r *callLog) BlockSize() int       { return r.d.BlockSize() }

func (r *callLog) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	r.wrote, r.owner, r.inCall = map[[2]int64][2]int{}, map[int64][2]int{}, map[int]bool{int(p.Seq): true}
	for i := range p.Tokens {
		r.note(p.Seq, i, p.Blocks, r.bs)
	}
	if err := r.before(); err != nil {
		return nil, err
	}
	return r.d.Prefill(p)
}

func (r *callLog) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	r.wrote, r.owner, r.inCall = map[[2]int64][2]int{}, map[int64][2]int{}, map[int]bool{}
	for _, s := range b {
		r.inCall[int(s.Seq)] = true
		r.note(s.Seq, s.Pos, s.Blocks, r.bs)
	}
	if err := r.before(); err != nil {
		return nil, err
	}
	return r.d.Decode(b)
}

func (r *callLog) Finish(s qwen3.SeqID) error {
	r.wrote, r.owner, r.inCall = map[[2]int64][2]int{}, map[int64][2]int{}, map[int]bool{}
	return r.d.Finish(s)
}

// Decoder implements SUT.
func (s *CardSUT) Decoder() qwen3.Decoder { return s.rec }

// Close implements SUT: the engine frees its tensors, then the device is
// closed; anything still live on the device is a leak.
func (s *CardSUT) Close() error {
	err := s.Eng.Close()
	lk, cerr := s.Dev.Close()
	if err == nil && cerr == nil && (lk.Tensors != 0 || lk.Traces != 0) {
		err = fmt.Errorf("the engine left %d tensors and %d traces on the device", lk.Tensors, lk.Traces)
	}
	return errors.Join(err, cerr)
}

// Reset implements Resetter.
func (s *CardSUT) Reset() error { return s.Eng.Reset() }

// DeviceTap implements DeviceTapper: the engine's calls to the device.
func (s *CardSUT) DeviceTap() *Tap { return s.tap }

// Tolerance implements Tolerant.
func (s *CardSUT) Tolerance() Tolerance { return s.tol }

// SeqCaps implements SeqObserver: cur_pos and page-table rows, padded with
// the contract's pad (the suite's own value, not the engine's constant).
func (s *CardSUT) SeqCaps() (curPos, pageRow bool, pad *int32) {
	p := contractPad
	return true, true, &p
}

// TakeSeqStates implements SeqObserver: the device's cur_pos and page
// table, read back through the device, by the engine's slot of each
// sequence of the last call; every other slot's row is an idle row (Seq
// -1), which must hold only the pad.
func (s *CardSUT) TakeSeqStates() ([]SeqState, error) {
	_, cp, _ := s.Eng.Inputs()
	h, err := s.Dev.ReadHost(cp)
	if err != nil {
		return nil, err
	}
	cur := h.Int32s()
	var table []int32
	width := 0
	if pt, ok := s.Eng.PageTable(); ok {
		ph, err := s.Dev.ReadHost(pt)
		if err != nil {
			return nil, err
		}
		table, width = ph.Int32s(), ph.Shape[len(ph.Shape)-1]
	}
	seqs, live := s.Eng.SlotSeqs()
	var out []SeqState
	for slot, q := range seqs {
		if !live[slot] || !s.rec.inCall[int(q)] {
			if width > 0 && (slot+1)*width <= len(table) {
				out = append(out, SeqState{Seq: -1, CurPos: -1, Row: append([]int32(nil), table[slot*width:(slot+1)*width]...)})
			}
			continue
		}
		st := SeqState{Seq: int(q), CurPos: -1}
		if slot < len(cur) {
			st.CurPos = int(cur[slot])
		}
		if width > 0 && (slot+1)*width <= len(table) {
			st.Row = append([]int32(nil), table[slot*width:(slot+1)*width]...)
		}
		out = append(out, st)
	}
	return out, nil
}

// readCaches reads every layer's K and V cache back.
func (s *CardSUT) readCaches() ([][2][]bf16.BF16, error) {
	out := make([][2][]bf16.BF16, s.layers)
	for l := range out {
		k, v := s.Eng.KVCache(l)
		for i, t := range []tt.Tensor{k, v} {
			h, err := s.Dev.ReadHost(t)
			if err != nil {
				return nil, err
			}
			out[l][i] = h.BF16s()
		}
	}
	return out, nil
}

func (s *CardSUT) snapshot() (err error) {
	s.prev, err = s.readCaches()
	return err
}

// poisonBF16 is what the rows a call is about to write hold before it (a
// bf16 NaN), so that a write of the very values a row held before is
// still seen, and a write that does not happen leaves a NaN that the
// logits show.
const poisonBF16 = bf16.BF16(0x7FC1)

// poison overwrites, in every layer's K and V cache, the rows the next
// call should write (between calls: never during a capture).
func (s *CardSUT) poison() error {
	if len(s.rec.wrote) == 0 {
		return nil
	}
	cfg := s.Eng.Config()
	hd, kvh := cfg.HeadDim, cfg.NumKeyValueHeads
	for l := range s.prev {
		k, v := s.Eng.KVCache(l)
		for i, t := range []tt.Tensor{k, v} {
			c := s.prev[l][i]
			for key := range s.rec.wrote {
				for h := 0; h < kvh; h++ {
					o := ((int(key[0])*kvh+h)*s.bs + int(key[1])) * hd
					if o+hd > len(c) {
						continue
					}
					for j := o; j < o+hd; j++ {
						c[j] = poisonBF16
					}
				}
			}
			if err := s.Dev.WriteHost(t, tt.HostBF16(t.Spec.Shape, t.Spec.Layout, c)); err != nil {
				return fmt.Errorf("poisoning the rows the call writes: %w", err)
			}
		}
	}
	return nil
}

// TakeKVWrites implements KVObserver by diffing the caches read back now
// against the previous read: every (layer, K/V, block, row) whose values
// changed is one write. It is named after the sequence and position of the
// call that should have written there (Slot holds the sequence, as the
// tolerant mode expects). A change elsewhere in a block of one of the
// call's sequences is named after that sequence and the position the host
// table gives the row (a write that landed at the wrong position); a
// change in a block no sequence of the call holds is reported with Slot
// and Pos -1. The rows a call should write are poisoned before it, so a
// write of the values a row held before is seen too.
func (s *CardSUT) TakeKVWrites() ([]KVWrite, error) {
	now, err := s.readCaches()
	if err != nil {
		return nil, err
	}
	var out []KVWrite
	cfg := s.Eng.Config()
	hd, kvh := cfg.HeadDim, cfg.NumKeyValueHeads
	rowLen := hd
	for l := range now {
		for i := 0; i < 2; i++ {
			a, b := s.prev[l][i], now[l][i]
			seen := map[[2]int64]bool{}
			for j := 0; j < len(b) && j < len(a); j += rowLen {
				if bf16Equal(a[j:j+rowLen], b[j:j+rowLen]) {
					continue
				}
				e := j / hd
				row := e % s.bs
				blk := e / s.bs / kvh
				key := [2]int64{int64(blk), int64(row)}
				if seen[key] {
					continue // another kv head of the same row
				}
				seen[key] = true
				w := KVWrite{Layer: l, Value: i == 1, Slot: -1, Pos: -1, Block: key[0], Row: key[1]}
				if sp, ok := s.rec.wrote[key]; ok {
					w.Slot, w.Pos = sp[0], int64(sp[1])
				} else if o, ok := s.rec.owner[key[0]]; ok {
					w.Slot, w.Pos = o[0], int64(o[1]*s.bs+row)
				}
				out = append(out, w)
			}
		}
	}
	s.prev = now
	sortWrites(out)
	return out, nil
}

func bf16Equal(a, b []bf16.BF16) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sortWrites orders writes by layer, K before V, position, as a device
// writes them.
func sortWrites(ws []KVWrite) {
	for i := 1; i < len(ws); i++ {
		for j := i; j > 0 && lessWrite(ws[j], ws[j-1]); j-- {
			ws[j], ws[j-1] = ws[j-1], ws[j]
		}
	}
}

func lessWrite(a, b KVWrite) bool {
	if a.Layer != b.Layer {
		return a.Layer < b.Layer
	}
	if a.Value != b.Value {
		return !a.Value
	}
	if a.Slot != b.Slot {
		return a.Slot < b.Slot
	}
	return a.Pos < b.Pos
}
