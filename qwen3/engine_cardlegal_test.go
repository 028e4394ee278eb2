package qwen3_test

import (
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
// boundaries.
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
				})
			}
		}
	}
}
