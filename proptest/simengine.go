package proptest

import (
	"fmt"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

// OpenSimEngine is the wire.Open of cmd/offcard-engine: qwen3.Engine on a
// fresh simulated device (SimFactory), built from the hello's preset and
// seed (its weights directory is read only when the hello names no preset:
// a user's checkpoint) and its hints (width policy,
// mode, recapture period, arch, strict, verify). It offers full logits,
// claims bit-exactness, and reports every observation by sequence:
// cur_pos and page-table rows (idle rows too) read back from the device,
// the KV write log, and the sanitizer's findings; its page pad is
// qwen3.PagePad.
func OpenSimEngine(h wire.Hello) (wire.Engine, wire.Caps, error) {
	sc := Scenario{Model: h.Model.Preset, ModelSeed: h.Model.Seed, Device: "sim", Arch: "wormhole",
		BlockSize: h.BlockSize, NumBlocks: h.NumBlocks, Capacity: h.Capacity, Mode: qwen3.ModeEager}
	if sc.Model == "" {
		sc.ModelDir, sc.ModelSeed = h.Model.Weights, 0
	}
	if x := h.Hints; x != nil {
		if x.Arch != "" {
			sc.Arch = x.Arch
		}
		sc.Strict, sc.Verify, sc.RecaptureEvery = x.Strict, x.Verify, x.RecaptureEvery
		if x.Width != "" {
			w, err := kvpage.ParseWidthPolicy(x.Width)
			if err != nil {
				return nil, wire.Caps{}, err
			}
			sc.Width = w
		}
		if x.Mode != "" {
			m, err := qwen3.ParseEngineMode(x.Mode)
			if err != nil {
				return nil, wire.Caps{}, err
			}
			sc.Mode = m
		}
		if x.Prefill != "" {
			p, err := qwen3.ParsePrefillMode(x.Prefill)
			if err != nil {
				return nil, wire.Caps{}, err
			}
			sc.Prefill = p
		}
	}
	if err := sc.Validate(); err != nil {
		return nil, wire.Caps{}, err
	}
	sut, err := SimFactory(sc)
	if err != nil {
		return nil, wire.Caps{}, err
	}
	pad := int32(qwen3.PagePad)
	caps := wire.Caps{Engine: "offcard-engine (qwen3.Engine on sim)", Logits: wire.LogitsFull, Exact: true, PagePad: &pad,
		Observes: []string{wire.ObsCurPos, wire.ObsPageTable, wire.ObsKVWrites, wire.ObsFindings}}
	s := sut.(*SimSUT)
	return &simEngine{Engine: s.Eng, sut: s}, caps, nil
}

// simEngine is qwen3.Engine with the simulator's observations by sequence.
type simEngine struct {
	*qwen3.Engine
	sut *SimSUT
}

// Observe implements wire.Observer.
func (e *simEngine) Observe(op string, seqs []int) (wire.Observations, error) {
	var obs wire.Observations
	slotSeq, live := e.Engine.SlotSeqs()
	seqOf := func(slot int) int {
		if slot >= 0 && slot < len(live) && live[slot] {
			return int(slotSeq[slot])
		}
		return -1
	}
	slotOf := map[int]int{}
	for s := range live {
		if live[s] {
			slotOf[int(slotSeq[s])] = s
		}
	}
	ws, err := e.sut.TakeKVWrites()
	if err != nil {
		return obs, err
	}
	for _, w := range ws {
		kv := "k"
		if w.Value {
			kv = "v"
		}
		obs.KVWrites = append(obs.KVWrites, wire.KVWrite{Layer: w.Layer, KV: kv, Seq: seqOf(w.Slot), Pos: w.Pos, Block: w.Block, Row: w.Row})
	}
	obs.Findings = e.sut.TakeFindings()
	if op != wire.OpAdmit && op != wire.OpDecode {
		return obs, nil
	}
	cur, err := e.sut.DeviceCurPos()
	if err != nil {
		return obs, err
	}
	table, width, ok, err := e.sut.DevicePageTable()
	if err != nil {
		return obs, err
	}
	inCall := map[int]bool{}
	for _, q := range seqs {
		inCall[slotOf[q]] = true
	}
	for s := 0; ok && (s+1)*width <= len(table); s++ {
		if !inCall[s] {
			obs.IdleRows = append(obs.IdleRows, append([]int32{}, table[s*width:(s+1)*width]...))
		}
	}
	for _, q := range seqs {
		s, found := slotOf[q]
		if !found {
			return obs, fmt.Errorf("seq %d holds no slot after the call", q)
		}
		so := wire.SeqObs{Seq: q}
		if s < len(cur) {
			p := int(cur[s])
			so.CurPos = &p
		}
		if ok && (s+1)*width <= len(table) {
			so.PageRow = append([]int32{}, table[s*width:(s+1)*width]...)
		}
		obs.Seqs = append(obs.Seqs, so)
	}
	return obs, nil
}

var _ wire.Observer = (*simEngine)(nil)
