package adjudicate

import (
	"fmt"
	"testing"

	"github.com/offcard/offcard/dump"
	"github.com/offcard/offcard/qwen3"
)

// BenchmarkForce1000 is the adjudication time per 1,000 positions: one
// op judges a sequence of 1,000 generated tokens (after an 8-token
// prompt) teacher-forced on ref, on the tiny preset and on the qwen3-0.6b
// shape (synthetic weights). The tokens are arbitrary: the cost does not
// depend on them. Run the 0.6b case with -benchtime=1x. cpu-s is the
// process's CPU time (all threads), for a shared machine.
func BenchmarkForce1000(b *testing.B) {
	for _, preset := range []string{"tiny", "qwen3-0.6b"} {
		b.Run(preset, func(b *testing.B) {
			cfg, err := qwen3.Preset(preset)
			if err != nil {
				b.Fatal(err)
			}
			w, err := qwen3.Synth(cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			s := &dump.Sequence{Prompt: []int32{1, 2, 3, 4, 5, 6, 7, 8}}
			for i := range 1000 {
				s.Steps = append(s.Steps, dump.Step{Pos: 7 + i, Token: int32((i * 7919) % cfg.VocabSize)})
			}
			d := &dump.Dump{Seqs: []*dump.Sequence{s}}
			teacher, err := NewTeacher(w, d, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer teacher.Close()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				r, err := Force(teacher, s, Options{})
				if err != nil || len(r.Positions) != 1000 {
					b.Fatalf("%v, %d positions", err, len(r.Positions))
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/1000positions")
			b.ReportMetric((processCPU()-cpu0).Seconds()/float64(b.N), "cpu-s/1000positions")
		})
	}
}

// BenchmarkForceLong is the teacher-forced pass over one long sequence
// of n positions on the tiny preset (its context raised to 32,768 for the
// run), on one thread, per position: one pass through the teacher's
// cache, a decode per position (no re-prefill). What grows with n is
// attention, which reads every earlier position at every step (O(n) per
// position, O(n²) per sequence for any exact teacher); the rest of a step
// (the matmuls, the judgement) is flat. cpu-µs/position is the process's
// CPU time, for a shared machine. Run with -benchtime=1x.
func BenchmarkForceLong(b *testing.B) {
	for _, n := range []int{1000, 4000, 20000} {
		b.Run(fmt.Sprintf("positions=%d", n), func(b *testing.B) {
			cfg, _ := qwen3.Preset("tiny")
			cfg.MaxPositionEmbeddings = 32768
			w, err := qwen3.Synth(cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			s := &dump.Sequence{Prompt: []int32{1, 2, 3}}
			for i := range n - 2 {
				s.Steps = append(s.Steps, dump.Step{Pos: 2 + i, Token: int32((i * 7919) % cfg.VocabSize)})
			}
			d := &dump.Dump{Seqs: []*dump.Sequence{s}}
			teacher, err := NewTeacher(w, d, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer teacher.Close()
			b.ResetTimer()
			cpu0 := processCPU()
			for range b.N {
				if _, err := Force(teacher, s, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			cpu := (processCPU() - cpu0).Seconds() / float64(b.N)
			b.ReportMetric(cpu, "cpu-s/sequence")
			b.ReportMetric(cpu*1e6/float64(n), "cpu-µs/position")
		})
	}
}
