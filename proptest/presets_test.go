package proptest

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/kvpage"
	"github.com/offcard/offcard/qwen3"
)

// TestScriptModelDir: a scenario on a checkpoint directory is the header
// line "model dir=PATH", parsed back to the same scenario; a preset and a
// directory together, or a path a script cannot hold, are refused.
func TestScriptModelDir(t *testing.T) {
	text := "model dir=/ckpt/qwen3\ndevice sim arch=wormhole strict\nengine block=32 blocks=12 width=dynamic capacity=2 mode=eager\nadmit seq=0 prompt=3\n"
	s, err := ParseScript(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if s.Scenario.ModelDir != "/ckpt/qwen3" || s.Scenario.Model != "" {
		t.Fatalf("parsed model %q dir %q", s.Scenario.Model, s.Scenario.ModelDir)
	}
	if s.String() != text {
		t.Fatalf("round trip:\n%s\nwant\n%s", s.String(), text)
	}
	for _, bad := range []string{"model tiny dir=/x", "model dir=", "model dir=/x tiny"} {
		if _, err := ParseScript(strings.NewReader(bad + "\ndevice sim\nengine\n")); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	sc := s.Scenario
	sc.ModelDir = "/a b"
	if err := sc.Validate(); err == nil {
		t.Error("a directory with a space: accepted")
	}
}

// TestScaledScenarios: a campaign on the qwen3-0.6b preset draws one
// model (Synth seed 1), at most 4 sequences, at most 64 blocks and a
// smaller work budget, and still draws prompts of k·block-1, k·block and
// k·block+1 positions; tiny's campaign is the default one, scenario for
// scenario.
func TestScaledScenarios(t *testing.T) {
	r1, r2 := rand.New(rand.NewSource(5)), rand.New(rand.NewSource(5))
	for i := 0; i < 200; i++ {
		a, b := drawScenario(r1, Base{}), drawScenario(r2, Base{Model: "tiny"})
		if a != b || a.budget != 0 {
			t.Fatalf("scenario %d: default %v, --preset tiny %v", i, a, b)
		}
	}
	cfg, _ := qwen3.Preset("qwen3-0.6b")
	rng := rand.New(rand.NewSource(9))
	edges := map[int]int{} // prompt length - k·bs (-1, 0, 1) -> count
	var maxWork int
	for i := 0; i < 300; i++ {
		sc := drawScenario(rng, Base{Model: "qwen3-0.6b"})
		if sc.Model != "qwen3-0.6b" || sc.ModelSeed != 1 || sc.Capacity > 4 || sc.NumBlocks > 64 || sc.budget != 72 {
			t.Fatalf("scenario %d: %v (budget %d)", i, sc, sc.budget)
		}
		if err := sc.Validate(); err != nil {
			t.Fatalf("scenario %d: %v", i, err)
		}
		m := newModel(&sc, sc.MaxLen(cfg))
		for n := 0; n < 40; n++ {
			c := drawCommand(rng, m)
			if err := m.check(c); err != nil {
				t.Fatalf("scenario %d: drew %v: %v", i, c, err)
			}
			if c.Kind == Admit {
				if d := c.Prompt % sc.BlockSize; c.Prompt > 1 && (d <= 1 || d == sc.BlockSize-1) {
					edges[(d+1)%sc.BlockSize-1]++
				}
			}
			m = m.apply(c)
		}
		maxWork = max(maxWork, m.work)
	}
	t.Logf("prompt lengths at a block edge (-1, 0, +1): %v; most work in a case %d", edges, maxWork)
	for _, d := range []int{-1, 0, 1} {
		if edges[d] == 0 {
			t.Errorf("no prompt of k·block%+d positions drawn", d)
		}
	}
}

// exportTiny writes tiny seed 2 as a checkpoint directory.
func exportTiny(t *testing.T) string {
	t.Helper()
	w, err := ModelWeights(Scenario{Model: "tiny", ModelSeed: 2})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Export(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestModelDirCampaign: a campaign on a checkpoint directory runs every
// case on it (the scripts say so), passes on the engine on sim, and the
// hello to a foreign engine names the directory and carries its
// config.json.
func TestModelDirCampaign(t *testing.T) {
	dir := exportTiny(t)
	rs := Campaign(Options{Seed: 3, Cases: 3, Factory: SimFactory, Base: Base{ModelDir: dir}, Workers: 1})
	for _, r := range rs {
		if !r.Passed {
			t.Fatalf("case %d: %s", r.Index, r.Report())
		}
		if !strings.HasPrefix(r.Scenario, "model dir="+dir+"\n") {
			t.Fatalf("case %d scenario:\n%s", r.Index, r.Scenario)
		}
	}
	f, err := NewEngineFactory(EngineOptions{Command: []string{"unused"}})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := f.Hello(Scenario{ModelDir: dir, BlockSize: 32, NumBlocks: 4, Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if h.Model.Weights != dir || h.Model.Preset != "" || !bytes.Equal(h.Model.Config, cfg) {
		t.Fatalf("hello model: %+v", h.Model)
	}
}

// TestModelDirPositionLimit: schedules drawn for a checkpoint whose
// max_position_embeddings is 40 never take a sequence past 40 positions,
// and still draw prompts at the first block's edge (31, 32, 33 need 33 <=
// 40).
func TestModelDirPositionLimit(t *testing.T) {
	w, err := ModelWeights(Scenario{Model: "tiny", ModelSeed: 3})
	if err != nil {
		t.Fatal(err)
	}
	short := *w
	short.Config.MaxPositionEmbeddings = 40
	dir := filepath.Join(t.TempDir(), "short")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := short.Export(dir); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2))
	edge := 0
	for i := 0; i < 200; i++ {
		sc := drawScenario(rng, Base{ModelDir: dir})
		m := newModel(&sc, sc.MaxLen(short.Config))
		for n := 0; n < 30; n++ {
			c := drawCommand(rng, m)
			if c.Kind == Admit && c.Prompt >= 31 && c.Prompt <= 33 && sc.BlockSize == 32 {
				edge++
			}
			m = m.apply(c)
			for q, l := range m.live {
				if l && m.length[q] > 40 {
					t.Fatalf("scenario %d: seq %d reached %d positions after %v (limit 40)", i, q, m.length[q], c)
				}
			}
		}
	}
	if edge == 0 {
		t.Fatal("no prompt at the first block's edge")
	}
}

// TestDrawTraceRegion: about one captured scenario in eight opens its
// device with a trace region, a power of two from 1 KiB to 2 MiB, so that
// tiny's decode graph (59 KiB of trace) both overflows some and fits
// others; an eager scenario never has one. The draw is a function of the
// scenario's other fields: scripts and replays carry it in the device line.
func TestDrawTraceRegion(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	captured, regions, small, large := 0, 0, 0, 0
	for i := 0; i < 4000; i++ {
		sc := drawScenario(rng, Base{})
		if sc.Mode != qwen3.ModeCaptured {
			if sc.TraceRegion != 0 {
				t.Fatalf("scenario %d: eager with trace_region=%d", i, sc.TraceRegion)
			}
			continue
		}
		captured++
		if r := sc.TraceRegion; r != 0 {
			regions++
			if r < 1<<10 || r > 2<<20 || r&(r-1) != 0 {
				t.Fatalf("scenario %d: trace_region=%d, want a power of two in [1 KiB, 2 MiB]", i, r)
			}
			if r < 59<<10 {
				small++
			} else {
				large++
			}
		}
		bare := sc
		bare.TraceRegion = 0 // drawn from the other fields
		if drawTraceRegion(bare) != sc.TraceRegion {
			t.Fatalf("scenario %d: the region is not a function of the scenario", i)
		}
		back, err := ParseScript(strings.NewReader(sc.String()))
		if err != nil || back.Scenario.TraceRegion != sc.TraceRegion {
			t.Fatalf("scenario %d: %q parses to trace_region %d (%v)", i, sc.String(), back.Scenario.TraceRegion, err)
		}
	}
	if f := float64(regions) / float64(captured); f < 1.0/11 || f > 1.0/6 {
		t.Errorf("%d of %d captured scenarios have a trace region (%.3f), want about 1/8", regions, captured, f)
	}
	if small == 0 || large == 0 {
		t.Errorf("regions below tiny's 59 KiB graph: %d, at or above it: %d; want both", small, large)
	}
}

// drawLongChunked draws a chunked prompt past 8 blocks in about one
// eligible admit in three, within the pool and twice the work budget, and
// never at the 0.6B shape's budget (8 blocks of 32 do not fit 2·72).
func TestDrawLongChunked(t *testing.T) {
	serve := Serving{PrefillFrom: true}
	for _, tc := range []struct {
		name       string
		budget, bs int
		blocks     int
		serve      Serving
		want       bool
	}{
		{"tiny", 0, 32, 64, serve, true},
		{"tiny, block 64 (8 blocks past twice the budget)", 0, 64, 64, serve, false},
		{"tiny, 8 blocks in the pool", 0, 32, 8, serve, false},
		{"tiny, no prefill_from", 0, 32, 64, Serving{}, false},
		{"0.6B scale", 72, 32, 64, serve, false},
	} {
		drawn := 0
		for i := 0; i < 600; i++ {
			sc := Scenario{Model: "tiny", ModelSeed: uint64(1 + i%3), BlockSize: tc.bs, NumBlocks: tc.blocks, Width: kvpage.Dynamic(), Capacity: 1 + i%4, budget: tc.budget}
			m := newModel(&sc, tc.blocks*tc.bs)
			m.serve = tc.serve
			m.admits = i / 3
			c, ok := drawLongChunked(m, tc.blocks)
			if !ok {
				continue
			}
			drawn++
			if c.Prompt <= 8*tc.bs || c.Prompt > min(tc.blocks*tc.bs, 2*m.budget()) || c.Chunk < 1 || c.Chunk >= c.Prompt {
				t.Fatalf("%s: drew %s", tc.name, c)
			}
			if err := m.check(c); err != nil {
				t.Fatalf("%s: drew %s, which the model refuses: %v", tc.name, c, err)
			}
		}
		if got := drawn > 0; got != tc.want {
			t.Errorf("%s: drew %d long chunked prompts in 600 admits, want some: %v", tc.name, drawn, tc.want)
		}
		if tc.want && (drawn < 600/5 || drawn > 600/2) {
			t.Errorf("%s: drew %d of 600, want about 1/3", tc.name, drawn)
		}
	}
}
