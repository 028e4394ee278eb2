package ref

import (
	"fmt"
	"sync"
	"testing"

	"github.com/offcard/offcard/bf16"

	"github.com/offcard/offcard/qwen3"
)

var (
	big06Once sync.Once
	big06     *qwen3.Weights
	big06Err  error
)

// weights06 synthesises the qwen3-0.6b shape once per test binary (~1.2 GB).
func weights06(b *testing.B) *qwen3.Weights {
	big06Once.Do(func() {
		cfg, err := qwen3.Preset("qwen3-0.6b")
		if err != nil {
			big06Err = err
			return
		}
		big06, big06Err = qwen3.Synth(cfg, 1)
	})
	if big06Err != nil {
		b.Fatal(big06Err)
	}
	return big06
}

// benchDecode decodes batch sequences, one step per iteration each, and
// reports generated tokens per second.
func benchDecode(b *testing.B, w *qwen3.Weights, batch int) {
	const blockSize = 32
	d, err := New(w, Options{BlockSize: blockSize, NumBlocks: batch * 4})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	steps := make([]qwen3.Step, batch)
	for i := range steps {
		steps[i] = qwen3.Step{Seq: qwen3.SeqID(i), Token: int32(i + 1),
			Blocks: []int32{int32(4 * i), int32(4*i + 1), int32(4*i + 2), int32(4*i + 3)}}
	}
	maxPos := 4*blockSize - 1
	cpu0 := processCPU()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		outs, err := d.Decode(steps)
		if err != nil {
			b.Fatal(err)
		}
		for i := range steps {
			steps[i].Token = outs[i].Token
			steps[i].Pos = (steps[i].Pos + 1) % maxPos
		}
	}
	b.StopTimer()
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tok/s")
	if cpu > 0 {
		// CPU time per token over all threads: on a shared machine, wall
		// time includes waiting for a core; this does not.
		b.ReportMetric(cpu.Seconds()*1e3/float64(b.N*batch), "cpu-ms/tok")
	}
}

func BenchmarkDecode(b *testing.B) {
	w := weights06(b)
	for _, batch := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchDecode(b, w, batch) })
	}
}

func BenchmarkTinyStep(b *testing.B) {
	cfg, _ := qwen3.Preset("tiny")
	w, err := qwen3.Synth(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchDecode(b, w, batch) })
	}
}

// BenchmarkMatVecLMHead is the 0.6b lm_head shape (151936×1024) on one
// goroutine: the decoder's row kernel.
func BenchmarkMatVecLMHead(b *testing.B) {
	w := weights06(b)
	cols := w.Config.HiddenSize
	rows := len(w.LMHead) / cols
	x := make([]float32, cols)
	for i := range x {
		x[i] = w.Norm[i].Float32()
	}
	dst := make([]bf16.BF16, rows)
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			for o := range rows {
				dst[o] = bf16.FromFloat32(dotRow(w.LMHead[o*cols:(o+1)*cols], x))
			}
		}
		b.ReportMetric(float64(rows*cols*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
}
