package ref

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
func benchDecode(b *testing.B, w *qwen3.Weights, batch int) { benchDecodeThreads(b, w, batch, 0) }

// benchDecodeThreads is benchDecode on a decoder with the given Threads
// (0: GOMAXPROCS). Besides tok/s it reports the weight bytes streamed per
// second (every matrix once per step; the embedding row is not counted).
func benchDecodeThreads(b *testing.B, w *qwen3.Weights, batch, threads int) {
	const blockSize = 32
	d, err := New(w, Options{BlockSize: blockSize, NumBlocks: batch * 4, Threads: threads})
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
	// One untimed step first: it faults in the mapped pages and fills the
	// weight parts' exponent ranges (a one-off pass over the weights).
	if _, err := d.Decode(steps); err != nil {
		b.Fatal(err)
	}
	for i := range steps {
		steps[i].Pos++
	}
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
	b.ReportMetric(float64(matrixBytes(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "weight-GB/s")
	if cpu > 0 {
		// CPU time per token over all threads: on a shared machine, wall
		// time includes waiting for a core; this does not. Likewise the
		// weight bytes per CPU-second.
		b.ReportMetric(cpu.Seconds()*1e3/float64(b.N*batch), "cpu-ms/tok")
		b.ReportMetric(float64(matrixBytes(w))*float64(b.N)/cpu.Seconds()/1e9, "GB/cpu-s")
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

// matrixBytes is the size of the weight matrices one decode step reads.
func matrixBytes(w *qwen3.Weights) int {
	n := len(w.LMHead)
	for _, L := range w.Layers {
		n += len(L.Q) + len(L.K) + len(L.V) + len(L.O) + len(L.Gate) + len(L.Up) + len(L.Down)
	}
	return 2 * n
}

// BenchmarkDecodeLoaded is the oracle as the CLI runs it: the qwen3-0.6b
// shape (synthetic weights, seed 1) exported to a checkpoint directory and
// loaded back through qwen3.Load (on Linux the file read into huge pages),
// at batch 1 and 8 on 1 and 2 threads. OFFCARD_BENCH_MODEL names an exported directory to reuse
// (offcard export --synth qwen3-0.6b --seed 1 --out DIR); otherwise one is
// written to a temporary directory first.
func BenchmarkDecodeLoaded(b *testing.B) {
	dir := os.Getenv("OFFCARD_BENCH_MODEL")
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "qwen3-0.6b")
		if err := weights06(b).Export(dir); err != nil {
			b.Fatal(err)
		}
	}
	w, err := qwen3.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	if w.Config.HiddenSize != 1024 || w.Config.NumHiddenLayers != 28 {
		b.Fatalf("%s is not the qwen3-0.6b shape", dir)
	}
	for _, threads := range []int{1, 2} {
		for _, batch := range []int{1, 8} {
			b.Run(fmt.Sprintf("threads=%d/batch=%d", threads, batch), func(b *testing.B) {
				if threads > runtime.GOMAXPROCS(0) {
					b.Skipf("GOMAXPROCS=%d < %d threads", runtime.GOMAXPROCS(0), threads)
				}
				benchDecodeThreads(b, w, batch, threads)
			})
		}
	}
}

// streamSink keeps the streaming read of BenchmarkStreamRead observable.
var streamSink int

// BenchmarkStreamRead is the yardstick of weight-GB/s: one read of a
// buffer of the size of the 0.6b weights (1.2 GB), on 1 and 2 goroutines,
// through bf16Range (with AVX-512, four vector operations per 64 bytes:
// a streaming read at memory speed).
func BenchmarkStreamRead(b *testing.B) {
	buf := make([]bf16.BF16, 600_000_000)
	for i := range buf {
		buf[i] = bf16.BF16(i)
	}
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			cpu0 := processCPU()
			for b.Loop() {
				var wg sync.WaitGroup
				his := make([]int, threads)
				for t := range threads {
					part := buf[len(buf)*t/threads : len(buf)*(t+1)/threads]
					wg.Add(1)
					go func() {
						defer wg.Done()
						his[t] = bf16Range(part).hi
					}()
				}
				wg.Wait()
				for _, h := range his {
					streamSink += h
				}
			}
			cpu := processCPU() - cpu0
			b.ReportMetric(float64(len(buf)*2)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			if cpu > 0 {
				b.ReportMetric(float64(len(buf)*2)*float64(b.N)/cpu.Seconds()/1e9, "GB/cpu-s")
			}
		})
	}
}
