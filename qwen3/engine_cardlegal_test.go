package qwen3_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
)

// The engine's whole decode and prefill graphs are calls ttnn accepts at
// the pin, for both presets and both archs: sim validates every call with
// the pin's checks (among them, paged SDPA decode with more than one KV
// head refuses a sharded output: ttnn/cpp/ttnn/operations/transformer/
// sdpa_decode/device/sdpa_decode_device_operation.cpp:403-405; both presets
// are GQA), so a refused call fails the run; and every output stays
// bit-exact with ref. The qwen3-0.6b shape runs one layer over a cut
// vocabulary: every per-layer op has the real geometry (16 query heads over
// 8 KV heads, head_dim 128, hidden 1024, intermediate 3072), at a cost of
// seconds. Eager, captured and replayed steps, prefill by program and by
// decode steps (the 0.6B shape: one of them per arch), two block
// boundaries. Every program the runs build has the static CBs sim lays out
// (none taken to have none: linear's configs are all 1D or 2D ones).
func TestEngineCardLegalBothPresetsBothArchs(t *testing.T) {
	for _, preset := range []string{"tiny", "qwen3-0.6b"} {
		cfg, err := qwen3.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		if preset != "tiny" {
			cfg.NumHiddenLayers, cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 1, 2048, 1, 2
		}
		w, err := qwen3.Synth(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.NumKeyValueHeads < 2 {
			t.Fatalf("%s: %d KV heads: not GQA, the test would not hold the engine to the GQA rule", preset, cfg.NumKeyValueHeads)
		}
		for _, arch := range []sim.Arch{sim.Wormhole, sim.Blackhole} {
			for _, pf := range []qwen3.PrefillMode{qwen3.PrefillProgram, qwen3.PrefillDecode} {
				if preset != "tiny" && (pf == qwen3.PrefillDecode) == (arch == sim.Wormhole) {
					continue // the 0.6B shape: program prefill on Wormhole, decode prefill on Blackhole (cost)
				}
				t.Run(preset+"/"+arch.String()+"/"+pf.String(), func(t *testing.T) {
					h := newHarnessW(t, w, sim.Options{Arch: arch, Strict: true}, qwen3.EngineOptions{
						Capacity: 2, BlockSize: 32, NumBlocks: 16, Width: kvpage.Dynamic(), Mode: qwen3.ModeCaptured, Prefill: pf})
					h.findingsEachStep = true
					h.run([]seqPlan{{admit: 0, prompt: 30, gen: 40}, {admit: 1, prompt: 33, gen: 6}})
					h.noFindings()
					h.allCBsModelled()
				})
			}
		}
	}
}

// A capture at the real Qwen3-0.6B depth fits L1 on both archs: the engine
// frees each layer's intermediates inside the capture too (ttnn.deallocate,
// as tt_transformers does), so the capture's L1 holds one layer's outputs,
// not 28 layers' ("Statically allocated circular buffers in program N clash
// with L1 buffers" otherwise). All 28 layers of the 0.6B per-layer shape,
// vocabulary cut; a capture and replays, bit-exact with ref, and no strict
// finding (the trace replays through addresses freed during its own
// capture and handed to later ops of the same capture, which is legal).
func TestEngineCapture06BDepthFitsL1BothArchs(t *testing.T) {
	cfg, err := qwen3.Preset("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumHiddenLayers != 28 {
		t.Fatalf("qwen3-0.6b preset has %d layers, want 28", cfg.NumHiddenLayers)
	}
	// Two layers drawn, repeated to 28 (the device gets 28 layers of its
	// own tensors; drawing 28 would cost about 0.8 GB and most of the time).
	layers := cfg.NumHiddenLayers
	cfg.NumHiddenLayers, cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 2, 256, 1, 2
	w, err := qwen3.Synth(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	for len(w.Layers) < layers {
		w.Layers = append(w.Layers, w.Layers[len(w.Layers)%2])
	}
	w.Config.NumHiddenLayers = layers
	for _, arch := range []sim.Arch{sim.Wormhole, sim.Blackhole} {
		t.Run(arch.String(), func(t *testing.T) {
			h := newHarnessW(t, w, sim.Options{Arch: arch, Strict: true}, qwen3.EngineOptions{
				Capacity: 1, BlockSize: 32, NumBlocks: 4, Width: kvpage.Dynamic(), Mode: qwen3.ModeCaptured})
			h.findingsEachStep = true
			h.run([]seqPlan{{admit: 0, prompt: 2, gen: 4}})
			h.noFindings()
			h.allCBsModelled()
			st := h.eng.Stats()
			if st.Captures == 0 || st.StepsByRegime[qwen3.RegimeReplay] == 0 {
				t.Fatalf("captures %d, replays %d: the run never captured and replayed", st.Captures, st.StepsByRegime[qwen3.RegimeReplay])
			}
		})
	}
}

// Above 8 slots the engine's decode batch is card-legal only where its
// users' shard grid is one rectangle from core (0,0): ttnn::prim::
// nlp_concat_heads_decode takes the sub-core-grid path for any other grid
// and refuses it without sub-core grids (ttnn/cpp/ttnn/operations/
// experimental/transformer/nlp_concat_heads_decode/device/
// nlp_concat_heads_decode_device_operation.cpp:133-140, :61-66). The
// engine's users' grid is 8 wide on both archs, as tt_transformers' is: 16
// and 32 slots are two and four whole rows of it, and decode bit-exact with
// ref on both archs (Blackhole's own 13-wide walk would make 16 users a row
// and 3 cores). 12 slots walk the device's grid: one row of Blackhole's,
// bit-exact, and a row and 4 cores of Wormhole's, refused with ttnn's
// text.
func TestEngineUsersGridRectangleRule(t *testing.T) {
	w := tiny(t)
	for _, c := range []struct {
		arch  sim.Arch
		slots int
		want  string // "" runs, bit-exact with ref
	}{
		{sim.Wormhole, 16, ""},
		{sim.Blackhole, 16, ""},
		{sim.Blackhole, 32, ""},
		{sim.Wormhole, 12, "nlp_concat_heads_decode: Subcoregrids must be provided if on_subcoregrids is true"},
		{sim.Blackhole, 12, ""},
	} {
		t.Run(fmt.Sprintf("%v/%d", c.arch, c.slots), func(t *testing.T) {
			eo := qwen3.EngineOptions{Capacity: c.slots, BlockSize: 32, NumBlocks: 2 * c.slots, Mode: qwen3.ModeEager}
			if c.want == "" {
				tw := newTwin(t, w, sim.Options{Arch: c.arch}, eo)
				var seqs []qwen3.SeqID
				for s := range c.slots {
					seq := qwen3.SeqID(s + 1)
					tw.from(seq, 0, prompt(seq, 2, w.Config.VocabSize))
					seqs = append(seqs, seq)
				}
				tw.decodeN(2, seqs...)
				return
			}
			dev, err := sim.New(sim.Options{Arch: c.arch, Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			e, err := qwen3.NewEngine(dev, w, eo)
			if err != nil {
				t.Fatal(err)
			}
			var batch []qwen3.Step
			for s := range c.slots {
				batch = append(batch, qwen3.Step{Seq: qwen3.SeqID(s + 1), Token: int32(s + 3), Pos: 0, Blocks: []int32{int32(s)}})
			}
			if _, err = e.Decode(batch); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
			if err := e.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}
