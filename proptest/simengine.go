package proptest

import (
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

// OpenSimEngine is the wire.Open of cmd/offcard-engine: qwen3.Engine on a
// fresh simulated device (SimFactory), built from the hello's preset and
// seed (its weights directory is read only when the hello names no preset:
// a user's checkpoint) and its hints (width policy,
// mode, recapture period, arch, strict, verify), which it follows. It
// offers full logits, claims bit-exactness, and reports every observation
// of protocol version 2 by sequence: cur_pos and page-table rows (idle
// rows too) read back from the device, the KV write log (a prompt
// program's tile padding as clears), the sanitizer's findings, and from
// the device's events (the engine runs on a Tap) each call's regime and
// host writes and the live allocations and traces, after the hello, each
// call and bye. Its page pad is the contract's (0, the suite's own value:
// a wrong qwen3.PagePad is a finding, not a new contract).
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
		sc.Strict, sc.Verify, sc.RecaptureEvery, sc.TraceRegion = x.Strict, x.Verify, x.RecaptureEvery, x.TraceRegion
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
	pad := contractPad
	caps := wire.Caps{Engine: "offcard-engine (qwen3.Engine on sim)", Logits: wire.LogitsFull, Exact: true, PagePad: &pad,
		Observes: wire.Observes(wire.Version), FollowsHints: true}
	s := sut.(*SimSUT)
	return &simEngine{Engine: s.Eng, sut: s}, caps, nil
}

// simEngine is qwen3.Engine with the simulator's observations by sequence.
type simEngine struct {
	*qwen3.Engine
	sut *SimSUT
	// prompt is the length of the last admit's prompt; from the last
	// prefill_from.
	prompt int
	from   qwen3.PrefillFrom
}

// PrefillFrom implements qwen3.PrefixPrefiller.
func (e *simEngine) PrefillFrom(p qwen3.PrefillFrom) ([]qwen3.Output, error) {
	e.from = p
	return e.Engine.PrefillFrom(p)
}

// fromWrite names a prefill_from's write by the call's sequence and the
// position its block and row hold in the call's table (a chunk writes
// through a page-table slice of its own: the log's batch row and index
// are the slice's); a row after the call's last position is the chunk
// tile's padding (a clear).
func (e *simEngine) fromWrite(x *wire.KVWrite) {
	bs := e.Engine.BlockSize()
	for i, b := range e.from.Blocks {
		if int64(b) == x.Block {
			x.Seq, x.Pos = int(e.from.Seq), int64(i*bs)+x.Row
			x.Clear = x.Pos >= int64(e.from.Start+len(e.from.Tokens))
			return
		}
	}
}

// Prefill implements qwen3.Decoder.
func (e *simEngine) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	e.prompt = len(p.Tokens)
	return e.Engine.Prefill(p)
}

// Observe implements wire.Observer.
func (e *simEngine) Observe(op string, seqs []int) (wire.Observations, error) {
	var obs wire.Observations
	if op == wire.OpHello || op == wire.OpBye {
		wireObservations(e.sut.Tap, &obs)
		obs.Regime, obs.HostWrites, obs.Findings, obs.Mem.PageTable = "", nil, nil, nil
		return obs, nil
	}
	wireObservations(e.sut.Tap, &obs)
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
		x := wire.KVWrite{Layer: w.Layer, KV: kv, Seq: seqOf(w.Slot), Pos: w.Pos, Block: w.Block, Row: w.Row}
		// A prompt program writes its last 32-row tile whole: the rows past
		// the prompt are padding (zeros), no token's.
		x.Clear = op == wire.OpAdmit && len(seqs) == 1 && x.Seq == seqs[0] && x.Pos >= int64(e.prompt)
		switch op {
		case wire.OpPrefillFrom:
			e.fromWrite(&x)
		case wire.OpCopyBlocks:
			x.Seq, x.Pos = -1, -1 // a copy has no sequence
		}
		obs.KVWrites = append(obs.KVWrites, x)
	}
	obs.Findings = append(obs.Findings, e.sut.TakeFindings()...)
	if op != wire.OpAdmit && op != wire.OpDecode && op != wire.OpPrefillFrom && op != wire.OpVerify {
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
			// No state to report: the judge names the sequence missing
			// (when cur_pos or page_table is offered).
			continue
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
