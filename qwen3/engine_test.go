package qwen3_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/sim"
)

// seqPlan is one sequence of a schedule: admitted (prefilled) before global
// step admit, with a prompt of prompt tokens, then decoded for gen steps
// and finished.
type seqPlan struct {
	admit, prompt, gen int
}

// harness drives ref and an engine on sim with the same calls and compares
// every output bit for bit.
type harness struct {
	t    testing.TB
	w    *qwen3.Weights
	ref  *ref.Decoder
	eng  *qwen3.Engine
	dev  *sim.Device
	pool *kvpage.Pool
	tabs map[qwen3.SeqID]*kvpage.Table
	next map[qwen3.SeqID]int32 // next token to feed
	pos  map[qwen3.SeqID]int
	left map[qwen3.SeqID]int
	step int // global decode step
	// prefill is the engine's prefill mode.
	prefill qwen3.PrefillMode

	findingsEachStep bool // fail at the first strict finding, naming its step

	// curPos, when set, is told each engine call's starting positions
	// (TestEngineCurPosAtEveryOp).
	curPos *curPosObserver
}

var tinyWeights *qwen3.Weights

func tiny(t testing.TB) *qwen3.Weights {
	t.Helper()
	if tinyWeights == nil {
		cfg, err := qwen3.Preset("tiny")
		if err != nil {
			t.Fatal(err)
		}
		w, err := qwen3.Synth(cfg, 7)
		if err != nil {
			t.Fatal(err)
		}
		tinyWeights = w
	}
	return tinyWeights
}

func newHarness(t testing.TB, so sim.Options, eo qwen3.EngineOptions) *harness {
	t.Helper()
	return newHarnessW(t, tiny(t), so, eo)
}

// newHarnessW is newHarness on the weights w.
func newHarnessW(t testing.TB, w *qwen3.Weights, so sim.Options, eo qwen3.EngineOptions) *harness {
	t.Helper()
	if eo.BlockSize == 0 {
		eo.BlockSize = 32
	}
	if eo.NumBlocks == 0 {
		eo.NumBlocks = 64
	}
	dev, err := sim.New(so)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := qwen3.NewEngine(dev, w, eo)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := ref.New(w, ref.Options{BlockSize: eo.BlockSize, NumBlocks: eo.NumBlocks, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := kvpage.NewPool(eo.NumBlocks, eo.BlockSize)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, w: w, ref: rd, eng: eng, dev: dev, pool: pool,
		tabs: map[qwen3.SeqID]*kvpage.Table{}, next: map[qwen3.SeqID]int32{},
		pos: map[qwen3.SeqID]int{}, left: map[qwen3.SeqID]int{}, prefill: eo.Prefill}
	t.Cleanup(func() {
		rd.Close()
		if err := eng.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	return h
}

// same reports the first difference between two outputs, or "".
func same(a, b qwen3.Output) string {
	if a.Seq != b.Seq || a.Pos != b.Pos {
		return fmt.Sprintf("seq/pos %d/%d vs %d/%d", a.Seq, a.Pos, b.Seq, b.Pos)
	}
	if a.Token != b.Token {
		return fmt.Sprintf("token %d vs %d", a.Token, b.Token)
	}
	if len(a.Logits) != len(b.Logits) {
		return fmt.Sprintf("%d vs %d logits", len(a.Logits), len(b.Logits))
	}
	for i := range a.Logits {
		if math.Float32bits(a.Logits[i]) != math.Float32bits(b.Logits[i]) {
			return fmt.Sprintf("logit %d: %v vs %v", i, a.Logits[i], b.Logits[i])
		}
	}
	return ""
}

// diverged fails the test with a line the mutant runner parses.
func (h *harness) diverged(seq qwen3.SeqID, pos int, what string) {
	h.t.Helper()
	h.t.Fatalf("DIVERGE step=%d seq=%d pos=%d: engine vs ref: %s (regime %v)", h.step, seq, pos, what, h.eng.LastStep().Regime)
}

// prompt makes a deterministic prompt for seq.
func prompt(seq qwen3.SeqID, n, vocab int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32((int(seq)*7919 + i*104729 + 13) % vocab)
	}
	return p
}

func (h *harness) admit(seq qwen3.SeqID, n, gen int) {
	h.t.Helper()
	tab := h.pool.NewTable()
	if err := tab.Grow(n); err != nil {
		h.t.Fatal(err)
	}
	p := qwen3.Prefill{Seq: seq, Tokens: prompt(seq, n, h.w.Config.VocabSize), Blocks: tab.Blocks()}
	want, err := h.ref.Prefill(p)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.curPos != nil {
		if h.prefill == qwen3.PrefillDecode {
			h.curPos.begin([]int32{0})
		} else {
			h.curPos.want = nil // a prefill program reads no cur_pos
		}
	}
	got, err := h.eng.Prefill(p)
	if err != nil {
		h.stepFindings()
		h.t.Fatalf("RED step=%d seq=%d pos=-1: engine prefill error: %v", h.step, seq, err)
	}
	if h.curPos != nil && h.prefill == qwen3.PrefillProgram {
		h.curPos.endState([]int32{int32(n)}) // as n decode steps leave it
	}
	h.stepFindings()
	h.curPosErr()
	for i := range want {
		if d := same(got[i], want[i]); d != "" {
			h.diverged(seq, i, "prefill: "+d)
		}
	}
	h.tabs[seq] = tab
	h.next[seq] = want[n-1].Token
	h.pos[seq] = n
	h.left[seq] = gen
}

// decode runs one batch of every live sequence (in SeqID order) and
// finishes those that are done.
func (h *harness) decode() {
	h.t.Helper()
	var batch []qwen3.Step
	for seq := qwen3.SeqID(0); seq < 64; seq++ {
		tab, ok := h.tabs[seq]
		if !ok {
			continue
		}
		if err := tab.Grow(h.pos[seq] + 1); err != nil {
			h.t.Fatal(err)
		}
		batch = append(batch, qwen3.Step{Seq: seq, Token: h.next[seq], Pos: h.pos[seq], Blocks: tab.Blocks()})
	}
	if len(batch) == 0 {
		return
	}
	want, err := h.ref.Decode(batch)
	if err != nil {
		h.t.Fatal(err)
	}
	if h.curPos != nil {
		var ps []int32
		for _, st := range batch {
			ps = append(ps, int32(st.Pos))
		}
		h.curPos.begin(ps)
	}
	got, err := h.eng.Decode(batch)
	if err != nil {
		h.stepFindings()
		h.t.Fatalf("RED step=%d seq=-1 pos=-1: engine decode error: %v", h.step, err)
	}
	h.stepFindings()
	h.curPosErr()
	for i, st := range batch {
		if d := same(got[i], want[i]); d != "" {
			h.diverged(st.Seq, st.Pos, d)
		}
		h.next[st.Seq] = want[i].Token
		h.pos[st.Seq]++
		h.left[st.Seq]--
		if h.left[st.Seq] == 0 {
			h.finish(st.Seq)
		}
	}
	h.step++
}

func (h *harness) finish(seq qwen3.SeqID) {
	h.t.Helper()
	if err := h.ref.Finish(seq); err != nil {
		h.t.Fatal(err)
	}
	if err := h.eng.Finish(seq); err != nil {
		h.t.Fatal(err)
	}
	h.tabs[seq].Release()
	delete(h.tabs, seq)
}

// run plays a schedule to the end.
func (h *harness) run(plan []seqPlan) {
	h.t.Helper()
	for {
		for i, p := range plan {
			if p.admit == h.step {
				h.admit(qwen3.SeqID(i), p.prompt, p.gen)
			}
		}
		if len(h.tabs) == 0 {
			done := true
			for _, p := range plan {
				if p.admit > h.step {
					done = false
				}
			}
			if done {
				return
			}
			h.step++
			continue
		}
		h.decode()
	}
}

// curPosErr fails at the first cur_pos mismatch the observer saw.
func (h *harness) curPosErr() {
	h.t.Helper()
	if h.curPos != nil && h.curPos.err != nil {
		h.t.Fatalf("RED step=%d seq=-1 pos=-1: %v", h.step, h.curPos.err)
	}
}

// stepFindings fails at the first strict finding when findingsEachStep.
func (h *harness) stepFindings() {
	h.t.Helper()
	if !h.findingsEachStep {
		return
	}
	if f := h.dev.Findings(); len(f) > 0 {
		h.t.Fatalf("FINDING step=%d seq=-1 pos=-1: %v", h.step, f[0])
	}
}

func (h *harness) noFindings() {
	h.t.Helper()
	if f := h.dev.Findings(); len(f) > 0 {
		for _, x := range f[:min(len(f), 5)] {
			h.t.Errorf("finding: %v", x)
		}
		h.t.Fatalf("%d strict findings", len(f))
	}
}

// allCBsModelled: every program the engine had built has the static CBs
// sim lays out (none is taken to have none, sim.Device.UnmodelledCBs).
func (h *harness) allCBsModelled() {
	h.t.Helper()
	if u := h.dev.UnmodelledCBs(); len(u) > 0 {
		h.t.Errorf("programs whose CBs sim does not lay out: %q", u)
	}
}

// One sequence through three block boundaries.
var planOne = []seqPlan{{admit: 0, prompt: 5, gen: 100}}

// Several sequences, prompts around k·block±1, admitted at different steps
// and finishing at different steps (the longest first, so a dynamic width
// shrinks).
func planMany(bs, n int) []seqPlan {
	all := []seqPlan{
		{admit: 0, prompt: bs - 1, gen: 70},
		{admit: 0, prompt: 3, gen: 20},
		{admit: 2, prompt: bs, gen: 45},
		{admit: 5, prompt: bs + 1, gen: 12},
		{admit: 9, prompt: 1, gen: 60},
		{admit: 9, prompt: 2*bs - 1, gen: 30},
		{admit: 14, prompt: 7, gen: 25},
		{admit: 20, prompt: 2 * bs, gen: 8},
	}
	return all[:n]
}

func TestEngineEagerEqualsRef(t *testing.T) {
	h := newHarness(t, sim.Options{Strict: true}, qwen3.EngineOptions{Capacity: 1})
	h.run(planOne)
	h.noFindings()
	st := h.eng.Stats()
	if st.Captures != 0 || st.Replays != 0 {
		t.Fatalf("eager engine captured: %+v", st)
	}
}

func TestEngineCapturedEqualsRef(t *testing.T) {
	for _, every := range []int{0, 1, 3, 8} {
		t.Run(fmt.Sprintf("recapture=%d", every), func(t *testing.T) {
			h := newHarness(t, sim.Options{Strict: true}, qwen3.EngineOptions{Capacity: 1, Mode: qwen3.ModeCaptured, RecaptureEvery: every, Verify: true})
			h.run(planOne)
			h.noFindings()
			st := h.eng.Stats()
			if st.Captures == 0 || (every != 1 && st.Replays == 0) {
				t.Fatalf("no trace use: %+v", st)
			}
			t.Logf("stats %+v", st)
		})
	}
}

// planMatrix: four sequences, prompts at block-1, 3, block, block+1,
// admitted at different steps and finishing at different steps (the
// longest first, so a dynamic width shrinks), positions crossing one or two
// block boundaries.
func planMatrix(bs int) []seqPlan {
	return []seqPlan{
		{admit: 0, prompt: bs - 1, gen: bs + 8},
		{admit: 0, prompt: 3, gen: 20},
		{admit: 2, prompt: bs, gen: 10},
		{admit: 5, prompt: bs + 1, gen: 12},
	}
}

// The full matrix: arch × block size × width policy × mode.
func TestEngineMatrixEqualsRef(t *testing.T) {
	tiny(t)
	type cfg struct {
		mode  qwen3.EngineMode
		every int
	}
	modes := []cfg{{qwen3.ModeEager, 0}, {qwen3.ModeCaptured, 0}, {qwen3.ModeCaptured, 3}}
	for _, arch := range []sim.Arch{sim.Wormhole, sim.Blackhole} {
		for _, bs := range []int{32, 64} {
			plan := planMatrix(bs)
			for _, width := range []string{"fixed:256", "fixed:enough", "dynamic"} {
				wp := kvpage.Dynamic()
				switch width {
				case "fixed:256":
					wp = kvpage.Fixed(256)
				case "fixed:enough":
					need := 0
					for _, p := range plan {
						need = max(need, kvpage.BlocksFor(p.prompt+p.gen, bs))
					}
					wp = kvpage.Fixed(need)
				}
				for _, m := range modes {
					name := fmt.Sprintf("%v/bs%d/%v/%v-re%d", arch, bs, wp, m.mode, m.every)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						h := newHarness(t, sim.Options{Arch: arch, Strict: true}, qwen3.EngineOptions{
							Capacity: len(plan), BlockSize: bs, NumBlocks: 256, Width: wp, Mode: m.mode, RecaptureEvery: m.every, Verify: true})
						h.run(plan)
						h.noFindings()
					})
				}
			}
		}
	}
}

// Batches of 1 to 8 sequences with different prompt lengths, finishing at
// different steps, captured with re-captures, dynamic width.
func TestEngineBatchesEqualsRef(t *testing.T) {
	tiny(t)
	for n := 1; n <= 8; n++ {
		for _, every := range []int{8} {
			t.Run(fmt.Sprintf("n%d/re%d", n, every), func(t *testing.T) {
				t.Parallel()
				h := newHarness(t, sim.Options{Strict: true}, qwen3.EngineOptions{
					Capacity: n, BlockSize: 32, NumBlocks: 128, Mode: qwen3.ModeCaptured, RecaptureEvery: every, Verify: true})
				h.run(planMany(32, n))
				h.noFindings()
			})
		}
	}
}
