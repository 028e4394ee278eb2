package qwen3_test

import (
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
)

// BenchmarkEngineDecode measures tiny-model decode steps on sim (one
// sequence, greedy, inside blocks of 32): eager vs captured. The sequence
// starts again at position 0 after span positions, so the attention's
// length stays what campaigns see. It reports host writes per step.
func BenchmarkEngineDecode(b *testing.B) {
	for _, mode := range []qwen3.EngineMode{qwen3.ModeEager, qwen3.ModeCaptured} {
		b.Run(mode.String(), func(b *testing.B) {
			w := tiny(b)
			dev, err := sim.New(sim.Options{})
			if err != nil {
				b.Fatal(err)
			}
			const bs, nb, span = 32, 256, 4 * 32
			e, err := qwen3.NewEngine(dev, w, qwen3.EngineOptions{Capacity: 1, BlockSize: bs, NumBlocks: nb, Width: kvpage.Fixed(nb), Mode: mode})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			blocks := make([]int32, nb)
			for i := range blocks {
				blocks[i] = int32(i)
			}
			out, err := e.Prefill(qwen3.Prefill{Seq: 0, Tokens: []int32{1, 2, 3}, Blocks: blocks})
			if err != nil {
				b.Fatal(err)
			}
			tok, pos := out[len(out)-1].Token, 3
			before := e.Stats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if pos == span {
					b.StopTimer()
					if err := e.Finish(0); err != nil {
						b.Fatal(err)
					}
					pos = 0
					b.StartTimer()
				}
				o, err := e.Decode([]qwen3.Step{{Seq: 0, Token: tok, Pos: pos, Blocks: blocks}})
				if err != nil {
					b.Fatal(err)
				}
				tok, pos = o[0].Token, pos+1
			}
			b.StopTimer()
			st := e.Stats()
			b.ReportMetric(float64(st.HostWrites-before.HostWrites)/float64(b.N), "writes/step")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
