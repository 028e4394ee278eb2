// Command offcard-engine is offcard's own engine (qwen3.Engine on the
// simulator) behind the engine line protocol (package wire): the
// reference an engine offcard did not write is held to, and the target of
// `offcard mutants --engine`, which builds it with each catalog mutant
// applied through `go build -overlay`.
//
//	offcard check --engine offcard-engine
//
// It reads requests on stdin and answers on stdout, one JSON object per
// line. The hello's model preset and seed give the weights (qwen3.Synth,
// as offcard's oracle makes them); its hints give the engine's options
// (page-table width policy, eager or captured, recapture period) and the
// simulator's (arch, strict sanitizer). It offers full logits, claims
// bit-exactness with ref, and reports every observation: cur_pos and
// page-table rows read back from the simulated device (without a host
// transfer the engine would count), the KV write log, and the sanitizer's
// findings.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/wire"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
			fmt.Fprintln(stdout, "usage: offcard-engine   (speaks offcard's engine line protocol on stdin/stdout; see offcard check --engine)")
			return 0
		}
		fmt.Fprintf(stderr, "offcard-engine: unexpected argument %q (it takes none; try --help)\n", args[0])
		return 2
	}
	if err := wire.Serve(stdin, stdout, open); err != nil {
		fmt.Fprintf(stderr, "offcard-engine: %v\n", err)
		return 1
	}
	return 0
}

// open builds the engine on a fresh simulated device.
func open(h wire.Hello) (wire.Engine, wire.Caps, error) {
	sc := proptest.Scenario{Model: h.Model.Preset, ModelSeed: h.Model.Seed, Device: "sim", Arch: "wormhole",
		BlockSize: h.BlockSize, NumBlocks: h.NumBlocks, Capacity: h.Capacity, Mode: qwen3.ModeEager}
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
	}
	if err := sc.Validate(); err != nil {
		return nil, wire.Caps{}, err
	}
	sut, err := proptest.SimFactory(sc)
	if err != nil {
		return nil, wire.Caps{}, err
	}
	pad := int32(qwen3.PagePad)
	caps := wire.Caps{Engine: "offcard-engine (qwen3.Engine on sim)", Logits: wire.LogitsFull, Exact: true, PagePad: &pad,
		Observes: []string{wire.ObsCurPos, wire.ObsPageTable, wire.ObsKVWrites, wire.ObsFindings}}
	return &engine{Engine: sut.(*proptest.SimSUT).Eng, sut: sut.(*proptest.SimSUT)}, caps, nil
}

// engine is qwen3.Engine with the simulator's observations by sequence.
type engine struct {
	*qwen3.Engine
	sut *proptest.SimSUT
}

// Observe implements wire.Observer.
func (e *engine) Observe(op string, seqs []int) (wire.Observations, error) {
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

var _ wire.Observer = (*engine)(nil)
