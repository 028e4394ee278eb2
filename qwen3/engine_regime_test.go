package qwen3_test

import (
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/sim"
)

// The engine's cos/sin rows equal ref.RopeTable for every position, for the
// tiny model's and Qwen3-0.6B's rotary parameters.
func TestEngineRopeTablesEqualRef(t *testing.T) {
	for _, name := range []string{"tiny", "qwen3-0.6b"} {
		cfg, err := qwen3.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		n, d := 4096, cfg.HeadDim
		cos, sin := qwen3.RopeTablesForTest(cfg.RopeTheta, d, n)
		rc, rs := make([]bf16.BF16, d), make([]bf16.BF16, d)
		for p := 0; p < n; p++ {
			ref.RopeTable(cfg.RopeTheta, d, p, rc, rs)
			for i := 0; i < d; i++ {
				if cos[p*d+i] != rc[i] || sin[p*d+i] != rs[i] {
					t.Fatalf("%s: position %d index %d: engine cos/sin %v/%v, ref %v/%v", name, p, i, cos[p*d+i], sin[p*d+i], rc[i], rs[i])
				}
			}
		}
	}
}

// Inside a block a steady-state replay copies nothing host→device; at a
// block boundary under a fixed width the only write is the page table's new
// column; under dynamic width a boundary reallocates the page table once
// and re-captures once.
func TestEngineSteadyStateReplayHostFree(t *testing.T) {
	for _, width := range []kvpage.WidthPolicy{kvpage.Fixed(8), kvpage.Dynamic()} {
		t.Run(width.String(), func(t *testing.T) {
			const bs = 32
			h := newHarness(t, sim.Options{Strict: true}, qwen3.EngineOptions{
				Capacity: 1, BlockSize: bs, NumBlocks: 64, Width: width, Mode: qwen3.ModeCaptured})
			h.admit(0, 5, 1000)
			replays := 0
			for h.pos[0] < 5*bs+3 {
				pos := h.pos[0]
				before := h.eng.Stats()
				h.decode()
				st, after := h.eng.LastStep(), h.eng.Stats()
				boundary := pos%bs == 0
				if st.Regime == qwen3.RegimeReplay {
					replays++
					want := 0
					if boundary {
						want = 1 // the page table's new column
					}
					if st.HostWrites != want || st.TokenWrite || st.PosWrite {
						t.Fatalf("pos %d: replay made %d host writes (%+v), want %d", pos, st.HostWrites, st, want)
					}
					if st.HostReads != 2 {
						t.Fatalf("pos %d: replay made %d host reads, want 2 (logits, tokens)", pos, st.HostReads)
					}
				}
				if width.IsDynamic() && boundary {
					if d := after.PageTableReallocs - before.PageTableReallocs; d != 1 {
						t.Fatalf("pos %d: %d page-table reallocations at the boundary, want 1", pos, d)
					}
					if st.Regime != qwen3.RegimeCold {
						t.Fatalf("pos %d: boundary step ran %v, want cold (a new width compiles)", pos, st.Regime)
					}
					// the next step captures, the one after replays
					h.decode()
					if r := h.eng.LastStep().Regime; r != qwen3.RegimeCapture {
						t.Fatalf("pos %d: step after the boundary ran %v, want capture", pos+1, r)
					}
					h.decode()
					if r := h.eng.LastStep().Regime; r != qwen3.RegimeReplay {
						t.Fatalf("pos %d: %v, want replay", pos+2, r)
					}
					a2 := h.eng.Stats()
					if a2.Captures-before.Captures != 1 || a2.PageTableReallocs-before.PageTableReallocs != 1 {
						t.Fatalf("pos %d: boundary cost %d captures and %d reallocations, want 1 and 1",
							pos, a2.Captures-before.Captures, a2.PageTableReallocs-before.PageTableReallocs)
					}
				} else if !width.IsDynamic() && after.PageTableReallocs != 0 {
					t.Fatalf("fixed width reallocated the page table")
				}
			}
			st := h.eng.Stats()
			if replays < 4*bs {
				t.Fatalf("only %d replays", replays)
			}
			if width.IsDynamic() && (st.Retired != 5 || st.RetiredFreed != 5 || st.RetiredLive != 0) {
				t.Fatalf("retirement counters %+v, want 5 retired and freed", st)
			}
			if !width.IsDynamic() && st.Captures != 1 {
				t.Fatalf("fixed width captured %d times, want 1", st.Captures)
			}
			h.noFindings()
		})
	}
}

// Reset in the middle of a captured run: the next step is cold and
// re-seeds everything, and the run stays equal to ref.
func TestEngineResetMidRun(t *testing.T) {
	h := newHarness(t, sim.Options{Strict: true}, qwen3.EngineOptions{
		Capacity: 2, BlockSize: 32, NumBlocks: 64, Mode: qwen3.ModeCaptured, Verify: true})
	h.admit(0, 30, 200)
	h.admit(1, 7, 200)
	for i := 0; i < 60; i++ {
		if i%13 == 12 {
			if err := h.eng.Reset(); err != nil {
				t.Fatal(err)
			}
			h.decode()
			if r := h.eng.LastStep().Regime; r != qwen3.RegimeCold || !h.eng.LastStep().PosWrite {
				t.Fatalf("step after Reset: %+v, want a cold re-seeding step", h.eng.LastStep())
			}
			continue
		}
		h.decode()
	}
	if st := h.eng.Stats(); st.Resets != 4 || st.Replays == 0 {
		t.Fatalf("stats %+v", st)
	}
	h.noFindings()
}

// Teacher forcing: tokens other than the device's argmax are written (one
// write per step, counted) and the outputs still equal ref's.
func TestEngineTeacherForcing(t *testing.T) {
	h := newHarness(t, sim.Options{Strict: true}, qwen3.EngineOptions{
		Capacity: 1, BlockSize: 32, NumBlocks: 64, Mode: qwen3.ModeCaptured, Verify: true})
	h.admit(0, 4, 1000)
	V := int32(h.w.Config.VocabSize)
	for i := 0; i < 50; i++ {
		forced := i%2 == 1
		if forced {
			h.next[0] = (h.next[0] + 1) % V
		}
		h.decode()
		st := h.eng.LastStep()
		if st.TokenWrite != forced {
			t.Fatalf("step %d: token write %v, forced %v", i, st.TokenWrite, forced)
		}
		if st.Regime == qwen3.RegimeReplay && h.pos[0]%32 != 1 {
			want := 0
			if forced {
				want = 1
			}
			if st.HostWrites != want {
				t.Fatalf("step %d: replay wrote %d tensors, want %d", i, st.HostWrites, want)
			}
		}
	}
	h.noFindings()
}

// A caller that does not advance the position by one (a rewind) gets its
// position re-seeded before the replay, and the result still equals ref.
func TestEngineReplayReseedsOnPositionJump(t *testing.T) {
	h := newHarness(t, sim.Options{Strict: true}, qwen3.EngineOptions{
		Capacity: 1, BlockSize: 32, NumBlocks: 64, Mode: qwen3.ModeCaptured, Verify: true})
	h.admit(0, 4, 1000)
	for i := 0; i < 6; i++ {
		h.decode()
	}
	h.pos[0] -= 3 // rewrite the last three positions
	h.decode()
	if st := h.eng.LastStep(); st.Regime != qwen3.RegimeReplay || !st.PosWrite {
		t.Fatalf("rewind step %+v, want a replay that re-seeds", st)
	}
	for i := 0; i < 5; i++ {
		h.decode()
	}
	h.noFindings()
}

// Eager mode never captures, and every eager step re-seeds positions.
func TestEngineEagerNeverCaptures(t *testing.T) {
	h := newHarness(t, sim.Options{}, qwen3.EngineOptions{Capacity: 2, Width: kvpage.Dynamic()})
	h.run(planMatrix(32)[:2])
	st := h.eng.Stats()
	if st.Captures != 0 || st.Replays != 0 || st.StepsByRegime[qwen3.RegimeReplay] != 0 {
		t.Fatalf("%+v", st)
	}
	if st.PosWrites != st.Steps {
		t.Fatalf("%d re-seeds for %d eager steps", st.PosWrites, st.Steps)
	}
}

func TestEngineOptionsErrors(t *testing.T) {
	w := tiny(t)
	dev, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []qwen3.EngineOptions{
		{Capacity: -1},
		{BlockSize: 48},
		{NumBlocks: 64, Width: kvpage.Fixed(65)},
		{Mode: qwen3.EngineMode(9)},
	} {
		if e, err := qwen3.NewEngine(dev, w, o); err == nil {
			e.Close()
			t.Errorf("options %+v accepted", o)
		}
	}
	e, err := qwen3.NewEngine(dev, w, qwen3.EngineOptions{Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := e.Decode([]qwen3.Step{{Seq: 1, Token: 1, Pos: 40, Blocks: []int32{0}}}); err == nil {
		t.Error("table too short accepted")
	}
	if _, err := e.Decode([]qwen3.Step{{Seq: 1, Token: 1, Pos: 0, Blocks: []int32{0}}, {Seq: 2, Token: 1, Pos: 0, Blocks: []int32{1}}}); err == nil {
		t.Error("more sequences than slots accepted")
	}
	if err := e.Finish(5); err == nil {
		t.Error("finish of an unknown sequence accepted")
	}
	if m, err := qwen3.ParseEngineMode("captured"); err != nil || m != qwen3.ModeCaptured || m.String() != "captured" {
		t.Errorf("ParseEngineMode: %v %v", m, err)
	}
}

// A trace region smaller than the decode graph's trace: the device refuses
// the first capture (end_trace_capture, tt_metal/distributed/
// mesh_trace.cpp:75-80), the engine runs that step and every later one
// eagerly, through a Reset too (the refused bytes stay counted on the
// device, mesh_trace.cpp:59-60), bit-exact with ref throughout. A region
// that holds the graph (tiny's is 59 KiB on sim) captures and replays as
// with none.
func TestEngineTraceRegionRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		region  uint64
		refused bool
	}{
		{"none", 0, false},
		{"1KiB", 1 << 10, true},
		{"32KiB", 32 << 10, true},
		{"64KiB", 64 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, sim.Options{Strict: true, TraceRegionSize: tc.region}, qwen3.EngineOptions{
				Capacity: 2, NumBlocks: 16, Width: kvpage.Dynamic(), Mode: qwen3.ModeCaptured})
			h.admit(0, 30, 1000)
			h.admit(1, 3, 1000)
			for range 8 {
				h.decode()
			}
			if err := h.eng.Reset(); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				h.decode()
			}
			st := h.eng.Stats()
			caught := st.StepsByRegime[qwen3.RegimeCapture] + st.StepsByRegime[qwen3.RegimeReplay]
			if tc.refused && (caught != 0 || st.Captures != 0 || h.eng.Traced()) {
				t.Fatalf("region %d B: %d capture/replay steps, %d captures, traced %v; want every step eager", tc.region, caught, st.Captures, h.eng.Traced())
			}
			if !tc.refused && (st.Captures < 2 || st.StepsByRegime[qwen3.RegimeReplay] == 0) {
				t.Fatalf("region %d B: %d captures, %d replays; want a capture before and after the reset, and replays", tc.region, st.Captures, st.StepsByRegime[qwen3.RegimeReplay])
			}
			h.noFindings()
		})
	}
}
