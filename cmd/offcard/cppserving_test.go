package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/wire"
	"github.com/offcard/offcard/wire/wiretest"
)

// TestCppEngineServing: the C++ reference engine lists the serving calls
// of protocol version 3 and, with --exact, answers the serving schedule
// (prefix hit at a block boundary, chunked prefill, verify across a
// boundary, rollback, fork with copy_blocks, preemption by recompute)
// bit for bit as the oracle does; to a version 2 hello it answers 2 and
// serves nothing. (The campaign exercises the calls once its generator
// draws them.)
func TestCppEngineServing(t *testing.T) {
	exe := cppEngine(t)
	h, w := servingHello(t)
	checkServes(t, []string{exe, "--exact"}, h)

	c, err := wire.Start(wire.Options{Command: []string{exe, "--exact"}}, h)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Caps().Exact {
		t.Fatalf("caps %+v: want exact", c.Caps())
	}
	got, err := wiretest.ServingSchedule(c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ref.New(w, ref.Options{BlockSize: h.BlockSize, NumBlocks: h.NumBlocks, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want, err := wiretest.ServingSchedule(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d outputs, the oracle %d", len(got), len(want))
	}
	for i := range want {
		g, o := got[i], want[i]
		if g.Seq != o.Seq || g.Pos != o.Pos || g.Token != o.Token || !slices.Equal(g.Logits, o.Logits) {
			t.Fatalf("output %d: seq %d pos %d token %d, the oracle's seq %d pos %d token %d (logits equal: %v)", i, g.Seq, g.Pos, g.Token, o.Seq, o.Pos, o.Token, slices.Equal(g.Logits, o.Logits))
		}
	}
}

// servingHello is a version 3 hello for ServingSchedule on the tiny preset
// (synthetic weights of seed 3, exported to a temporary directory).
func servingHello(t *testing.T) (wire.Hello, *qwen3.Weights) {
	t.Helper()
	cfg, err := qwen3.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	w, err := qwen3.Synth(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-seed3")
	if err := w.Export(dir); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return wire.Hello{Model: wire.Model{Preset: "tiny", Seed: 3, Config: conf, Weights: dir}, BlockSize: 8, NumBlocks: wiretest.ServingBlocks, Capacity: 4}, w
}

// checkServes: the engine cmd answers a hello of version v with
// min(v, 3), and lists every serving call of version 3 then, none below.
func checkServes(t *testing.T, cmd []string, h wire.Hello) {
	t.Helper()
	for _, v := range []int{1, 2, 3} {
		hv := h
		hv.Version = v
		c, err := wire.Start(wire.Options{Command: cmd}, hv)
		if err != nil {
			t.Fatalf("hello version %d: %v", v, err)
		}
		want := wire.ServingCalls(v)
		if caps := c.Caps(); caps.Version != v || !slices.Equal(caps.Serves, want) {
			t.Errorf("hello version %d: caps %+v, want version %d serving %v", v, caps, v, want)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
