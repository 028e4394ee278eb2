package qwen3_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/sim"
)

// twin runs the serving calls on ref and on the engine (sim, strict) with
// the same arguments, the scheduler's tables in kvpage, and compares every
// output bit for bit. Any strict finding fails the call that made it.
type twin struct {
	*harness
	toks map[qwen3.SeqID][]int32 // every token fed so far, by position
}

func newTwin(t *testing.T, w *qwen3.Weights, so sim.Options, eo qwen3.EngineOptions) *twin {
	t.Helper()
	so.Strict = true
	h := newHarnessW(t, w, so, eo)
	h.findingsEachStep = true
	return &twin{harness: h, toks: map[qwen3.SeqID][]int32{}}
}

func (w *twin) check(what string, got, want []qwen3.Output, err error) {
	w.t.Helper()
	w.stepFindings()
	if err != nil {
		w.t.Fatalf("RED %s: engine error: %v", what, err)
	}
	if len(got) != len(want) {
		w.t.Fatalf("DIVERGE %s: %d outputs, ref %d", what, len(got), len(want))
	}
	for i := range want {
		if d := same(got[i], want[i]); d != "" {
			w.t.Fatalf("DIVERGE %s: output %d (pos %d): %s", what, i, want[i].Pos, d)
		}
	}
}

// table grows seq's table to length (copying shared blocks it writes on
// both decoders) and returns its blocks.
func (w *twin) table(seq qwen3.SeqID, from, length int) []int32 {
	w.t.Helper()
	tab := w.tabs[seq]
	if tab == nil {
		tab = w.pool.NewTable()
		w.tabs[seq] = tab
	}
	copies, err := tab.PrepareWrite(from, length)
	if err != nil {
		w.t.Fatal(err)
	}
	w.copy(copies)
	return tab.Blocks()
}

func (w *twin) copy(cs []kvpage.BlockCopy) {
	w.t.Helper()
	if len(cs) == 0 {
		return
	}
	q := make([]qwen3.BlockCopy, len(cs))
	for i, c := range cs {
		q[i] = qwen3.BlockCopy{Src: c.Src, Dst: c.Dst}
	}
	if err := w.ref.CopyBlocks(q); err != nil {
		w.t.Fatal(err)
	}
	err := w.eng.CopyBlocks(q)
	w.stepFindings()
	if err != nil {
		w.t.Fatalf("RED copy %v: engine error: %v", cs, err)
	}
}

// from prefills seq's tokens toks at positions start.. (start 0: Prefill).
func (w *twin) from(seq qwen3.SeqID, start int, toks []int32) []qwen3.Output {
	w.t.Helper()
	blocks := w.table(seq, start, start+len(toks))
	p := qwen3.PrefillFrom{Seq: seq, Start: start, Tokens: toks, Blocks: blocks}
	want, err := w.ref.PrefillFrom(p)
	if err != nil {
		w.t.Fatal(err)
	}
	got, err := w.eng.PrefillFrom(p)
	w.check(fmt.Sprintf("prefill_from seq=%d start=%d n=%d", seq, start, len(toks)), got, want, err)
	w.toks[seq] = append(w.toks[seq][:start], toks...)
	w.pos[seq] = start + len(toks)
	w.next[seq] = want[len(want)-1].Token
	return want
}

// verify runs one verify batch: ks[i] tokens for seqs[i] from its length
// (its greedy next token, then drafts), and accepts acc[i] of them.
func (w *twin) verify(seqs []qwen3.SeqID, ks, acc []int) {
	w.t.Helper()
	batch := make([]qwen3.VerifyStep, len(seqs))
	for i, s := range seqs {
		pos := w.pos[s]
		toks := []int32{w.next[s]}
		for j := 1; j < ks[i]; j++ {
			toks = append(toks, int32((int(s)*31+pos*7+j*13)%w.w.Config.VocabSize))
		}
		batch[i] = qwen3.VerifyStep{Seq: s, Tokens: toks, Pos: pos, Blocks: w.table(s, pos, pos+ks[i])}
	}
	want, err := w.ref.Verify(batch)
	if err != nil {
		w.t.Fatal(err)
	}
	got, err := w.eng.Verify(batch)
	w.stepFindings()
	if err != nil {
		w.t.Fatalf("RED verify %v k=%v: engine error: %v", seqs, ks, err)
	}
	for i, s := range seqs {
		w.check(fmt.Sprintf("verify seq=%d pos=%d k=%d", s, batch[i].Pos, ks[i]), got[i], want[i], nil)
		// Accept acc[i] tokens: the sequence is rolled back to pos+acc.
		a := acc[i]
		w.toks[s] = append(w.toks[s][:batch[i].Pos], batch[i].Tokens[:a]...)
		w.pos[s] = batch[i].Pos + a
		w.next[s] = want[i][a-1].Token
		if err := w.tabs[s].Truncate(w.pos[s]); err != nil {
			w.t.Fatal(err)
		}
	}
}

// decodeN decodes seqs n steps as one batch each step.
func (w *twin) decodeN(n int, seqs ...qwen3.SeqID) {
	w.t.Helper()
	for range n {
		batch := make([]qwen3.Step, len(seqs))
		for i, s := range seqs {
			pos := w.pos[s]
			batch[i] = qwen3.Step{Seq: s, Token: w.next[s], Pos: pos, Blocks: w.table(s, pos, pos+1)}
		}
		want, err := w.ref.Decode(batch)
		if err != nil {
			w.t.Fatal(err)
		}
		got, err := w.eng.Decode(batch)
		w.check(fmt.Sprintf("decode %v at %d", seqs, batch[0].Pos), got, want, err)
		for i, s := range seqs {
			w.toks[s] = append(w.toks[s], batch[i].Token)
			w.pos[s]++
			w.next[s] = want[i].Token
		}
	}
}

// replayed fails a captured run that never replayed a trace (the serving
// calls were not exercised around live traces).
func (w *twin) replayed(mode qwen3.EngineMode) {
	w.t.Helper()
	if st := w.eng.Stats(); mode == qwen3.ModeCaptured && (st.Captures == 0 || st.StepsByRegime[qwen3.RegimeReplay] == 0) {
		w.t.Fatalf("captured run: %d captures, %d replays", st.Captures, st.StepsByRegime[qwen3.RegimeReplay])
	}
}

func (w *twin) finish(seq qwen3.SeqID, release bool) {
	w.t.Helper()
	if err := w.ref.Finish(seq); err != nil {
		w.t.Fatal(err)
	}
	if err := w.eng.Finish(seq); err != nil {
		w.t.Fatal(err)
	}
	if release {
		w.tabs[seq].Release()
		delete(w.tabs, seq)
	}
}

// servingPresets are the weights the serving tests run: tiny, and the
// qwen3-0.6b per-layer shape (one layer, vocabulary cut).
func servingPresets(t *testing.T) map[string]*qwen3.Weights {
	t.Helper()
	if servingBig != nil {
		return map[string]*qwen3.Weights{"tiny": tiny(t), "qwen3-0.6b-layer": servingBig}
	}
	cfg, err := qwen3.Preset("qwen3-0.6b")
	if err != nil {
		t.Fatal(err)
	}
	cfg.NumHiddenLayers, cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenID = 1, 512, 1, 2
	big, err := qwen3.Synth(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	servingBig = big
	return map[string]*qwen3.Weights{"tiny": tiny(t), "qwen3-0.6b-layer": big}
}

var servingBig *qwen3.Weights

// big0p6 reports whether a case of the 0.6B per-layer shape runs: one
// mode and arch per test (cost: about 1.5 s each).
func big0p6(name string, mode qwen3.EngineMode, arch sim.Arch, want qwen3.EngineMode, wantArch sim.Arch) bool {
	return name == "tiny" || (mode == want && arch == wantArch)
}

// servingModes: eager (integer chunk start) and captured (tensor chunk
// start, decode traces live around the serving calls).
var servingModes = []qwen3.EngineMode{qwen3.ModeEager, qwen3.ModeCaptured}

// A prefix-cache hit at k·bs-1, k·bs and k·bs+1 (through a shared table,
// the partial block copied on write) equals the cold prefill of the same
// tokens, and decoding on stays equal.
func TestEngineServingPrefixHits(t *testing.T) {
	for name, wts := range servingPresets(t) {
		for _, mode := range servingModes {
			for _, arch := range []sim.Arch{sim.Wormhole, sim.Blackhole} {
				if !big0p6(name, mode, arch, qwen3.ModeCaptured, sim.Blackhole) {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v/%v", name, mode, arch), func(t *testing.T) {
					const bs = 32
					w := newTwin(t, wts, sim.Options{Arch: arch}, qwen3.EngineOptions{Capacity: 3, BlockSize: bs, NumBlocks: 24, Mode: mode})
					base := prompt(1, 3*bs+5, wts.Config.VocabSize)
					w.from(1, 0, base)
					w.decodeN(2, 1)
					seq := qwen3.SeqID(2)
					for _, hit := range []int{2*bs - 1, 2 * bs, 2*bs + 1} {
						tab := w.pool.NewTable()
						if err := tab.SharePrefix(w.tabs[1], hit); err != nil {
							t.Fatal(err)
						}
						w.tabs[seq] = tab
						w.toks[seq] = append([]int32(nil), base[:hit]...)
						tail := base[hit:]
						w.from(seq, hit, tail)
						w.decodeN(2, 1, seq)
						w.finish(seq, true)
						seq++
					}
					w.replayed(mode)
				})
			}
		}
	}
}

// Chunked prefill with chunk sizes around block multiples equals one cold
// prefill; decoding on stays equal.
func TestEngineServingChunks(t *testing.T) {
	for name, wts := range servingPresets(t) {
		for _, mode := range servingModes {
			if !big0p6(name, mode, sim.Wormhole, qwen3.ModeEager, sim.Wormhole) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v", name, mode), func(t *testing.T) {
				const bs = 32
				w := newTwin(t, wts, sim.Options{}, qwen3.EngineOptions{Capacity: 2, BlockSize: bs, NumBlocks: 16, Mode: mode})
				toks := prompt(3, 200, wts.Config.VocabSize)
				start := 0
				for _, n := range []int{31, 33, 32, 1, 63, 40} {
					w.from(3, start, toks[start:start+n])
					start += n
					w.decodeN(2, 3) // a live trace around the next chunk
				}
				w.replayed(mode)
			})
		}
	}
}

// Verify with k = 1..8 across a block boundary, mixed k in one batch,
// random acceptance (rollback), then decoding on; block size 64 too.
func TestEngineServingVerify(t *testing.T) {
	for name, wts := range servingPresets(t) {
		for _, mode := range servingModes {
			for _, bs := range []int{32, 64} {
				if !big0p6(name, mode, sim.Wormhole, qwen3.ModeCaptured, sim.Wormhole) || (name != "tiny" && bs == 64) {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v/bs%d", name, mode, bs), func(t *testing.T) {
					w := newTwin(t, wts, sim.Options{}, qwen3.EngineOptions{Capacity: 3, BlockSize: bs, NumBlocks: 24, Mode: mode})
					v := wts.Config.VocabSize
					w.from(1, 0, prompt(1, bs-3, v))
					w.from(2, 0, prompt(2, bs-1, v))
					w.from(3, 0, prompt(3, 5, v))
					w.decodeN(1, 1, 2, 3)
					for k := 1; k <= 8; k++ {
						w.verify([]qwen3.SeqID{1, 2, 3}, []int{k, 9 - k, 1 + k%3}, []int{1 + (k-1)/2, (9 - k + 1) / 2, 1})
					}
					w.decodeN(3, 1, 2, 3)
					w.verify([]qwen3.SeqID{2}, []int{8}, []int{8})
					w.decodeN(2, 1, 2, 3)
					w.replayed(mode)
				})
			}
		}
	}
}

// A preempted sequence (finished, its blocks freed and reused by another)
// re-admitted with its tokens so far, by Prefill or by prefix hit plus
// chunk, gives the original outputs again, and decodes on equal.
func TestEngineServingPreemptRecompute(t *testing.T) {
	for _, mode := range servingModes {
		t.Run(mode.String(), func(t *testing.T) {
			const bs = 32
			wts := tiny(t)
			w := newTwin(t, wts, sim.Options{}, qwen3.EngineOptions{Capacity: 2, BlockSize: bs, NumBlocks: 12, Mode: mode})
			w.from(1, 0, prompt(1, 40, wts.Config.VocabSize))
			w.decodeN(30, 1)
			sofar := append([]int32(nil), w.toks[1]...)
			w.finish(1, true)
			w.from(2, 0, prompt(2, 70, wts.Config.VocabSize)) // takes the freed blocks
			w.decodeN(2, 2)
			orig := w.from(1, 0, sofar)
			w.finish(1, true)
			again := w.from(1, 0, sofar[:bs])
			again = append(again, w.from(1, bs, sofar[bs:])...)
			for i := range orig {
				if d := same(orig[i], again[i]); d != "" {
					t.Fatalf("recompute by chunks, position %d: %s", i, d)
				}
			}
			w.decodeN(3, 1, 2)
		})
	}
}

// Forks: children share the parent's blocks; each child's first write
// into the shared partial block is a copy (CopyBlocks), then the children
// decode apart, each equal to ref.
func TestEngineServingForkCopies(t *testing.T) {
	for _, mode := range servingModes {
		t.Run(mode.String(), func(t *testing.T) {
			wts := tiny(t)
			w := newTwin(t, wts, sim.Options{}, qwen3.EngineOptions{Capacity: 3, BlockSize: 32, NumBlocks: 16, Mode: mode})
			w.from(1, 0, prompt(1, 45, wts.Config.VocabSize))
			for _, c := range []qwen3.SeqID{2, 3} {
				w.tabs[c] = w.tabs[1].Fork()
				w.toks[c] = append([]int32(nil), w.toks[1]...)
				w.pos[c], w.next[c] = w.pos[1], int32((int(c)*5)%wts.Config.VocabSize)
			}
			w.decodeN(4, 1, 2, 3)
			w.verify([]qwen3.SeqID{2, 3}, []int{4, 2}, []int{2, 2})
			w.decodeN(20, 1, 2, 3) // across the block boundary at 64
			w.replayed(mode)
		})
	}
}

// The ops each serving call issues (the engine docs' sequences): a chunk
// from a block boundary runs per layer paged_fill_cache of K and V and one
// chunked SDPA, with the integer start when eager and the device-tensor
// start when captured; an unaligned head runs decode steps (paged SDPA
// decode); verify of k runs k decode steps; a block copy runs per layer
// and cache a slice and a fill_cache.
func TestEngineServingOpSequences(t *testing.T) {
	for _, mode := range servingModes {
		t.Run(mode.String(), func(t *testing.T) {
			wts := tiny(t)
			layers := wts.Config.NumHiddenLayers
			var ops []sim.OpEvent
			w := newTwin(t, wts, sim.Options{OnOp: func(e sim.OpEvent) { ops = append(ops, e) }},
				qwen3.EngineOptions{Capacity: 2, BlockSize: 32, NumBlocks: 16, Mode: mode})
			count := func(name, arg string) int {
				n := 0
				for _, e := range ops {
					if e.Op == name && strings.Contains(e.Args, arg) {
						n++
					}
				}
				return n
			}
			v := wts.Config.VocabSize
			w.from(1, 0, prompt(1, 32, v))
			ops = nil
			w.from(1, 32, prompt(1, 40, v)[:40]) // one chunk from 32
			arg := "chunk_start_idx=32"
			if mode == qwen3.ModeCaptured {
				arg = "chunk_start_idx_tensor="
			}
			if got := count("chunked_scaled_dot_product_attention", arg); got != layers {
				t.Errorf("chunk from 32: %d chunked SDPA calls with %s, want %d", got, arg, layers)
			}
			if got := count("paged_fill_cache", "batch_idx=0"); got != 2*layers {
				t.Errorf("chunk from 32: %d paged_fill_cache calls through the slice (batch_idx 0), want %d", got, 2*layers)
			}
			if got := count("paged_scaled_dot_product_attention_decode", ""); got != 0 {
				t.Errorf("chunk from 32: %d decode SDPA calls, want 0", got)
			}
			ops = nil
			w.from(1, 72, prompt(1, 3, v)) // unaligned: three decode steps
			if got := count("paged_scaled_dot_product_attention_decode", ""); got != 3*layers {
				t.Errorf("head from 72: %d decode SDPA calls, want %d", got, 3*layers)
			}
			if got := count("chunked_scaled_dot_product_attention", ""); got != 0 {
				t.Errorf("head from 72: %d chunked SDPA calls, want 0", got)
			}
			ops = nil
			w.copy([]kvpage.BlockCopy{{Src: w.tabs[1].Blocks()[0], Dst: 9}})
			if s, f := count("slice", ""), count("fill_cache", "batch_idx=9 update_idx=0"); s != 2*layers || f != 2*layers {
				t.Errorf("copy: %d slices, %d fill_cache into block 9, want %d each", s, f, 2*layers)
			}
		})
	}
}
