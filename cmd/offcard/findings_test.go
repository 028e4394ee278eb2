package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
)

// bigBlockScript writes the hostile sweep's script `engine block=8192
// blocks=1` over an exported tiny checkpoint whose context is 16384 (tiny's
// own 4096 refuses the block size up front) and returns its path.
func bigBlockScript(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	m := filepath.Join(dir, "tiny")
	if code, out, errs := runCLI(t, "export", "--synth", "tiny", "--seed", "1", "--out", m); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errs)
	}
	cp := filepath.Join(m, "config.json")
	b, err := os.ReadFile(cp)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["max_position_embeddings"] = 16384
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "big.script")
	script := "model dir=" + m + "\ndevice sim\nengine block=8192 blocks=1 width=dynamic capacity=1 mode=eager\nadmit seq=0 prompt=3\ndecode steps=2\n"
	if err := os.WriteFile(p, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A finding never hides its cause (issue 33 point 5): the hostile sweep's
// script `engine block=8192 blocks=1` (over a long-context checkpoint) makes the simulator refuse SDPA
// decode (its circular buffers do not fit L1); the report names that
// refusal with tt-metal's text as the failing property, and the KV write
// that never happened because of it is shown as its effect, with its text.
func TestFindingShowsEngineError(t *testing.T) {
	p := bigBlockScript(t)
	code, out, errs := runCLI(t, "replay", p)
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"property: sut-error",
		"grow to 2743392 B which is beyond max L1 size of 1499136 B", // program.cpp:1486-1493, checked before the clash
		"also failed at that step: kv-write: seq 0: missing KV write",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "also failed at that step:") && !strings.Contains(l, ": ") {
			t.Errorf("a bare property name: %q", l)
		}
	}
	code, out, _ = runCLI(t, "replay", p, "--json")
	var doc replayReport
	if err := json.Unmarshal([]byte(out), &doc); code != 1 || err != nil || doc.Failure == nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if f := doc.Failure; len(f.AlsoDetail) != len(f.Also) || len(f.Also) == 0 {
		t.Errorf("also %q, also_detail %q", f.Also, f.Also)
	}
}

// flakySUT panics at its first decode; flakyFactory makes only its first
// SUT flaky, so the failure never recurs while the case shrinks.
type flakySUT struct{ proptest.SUT }

func (s flakySUT) Decoder() qwen3.Decoder { return flakyDecoder{s.SUT.Decoder()} }

type flakyDecoder struct{ qwen3.Decoder }

func (flakyDecoder) Decode([]qwen3.Step) ([]qwen3.Output, error) {
	panic("planted: a crash that happens once")
}

// A crash that never reproduced during shrinking says so (issue 33
// point 5), in the text report and in --json; a deterministic failure
// does not.
func TestFailureNotReproduced(t *testing.T) {
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	var n atomic.Int64
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		if err == nil && n.Add(1) == 1 {
			return flakySUT{s}, nil
		}
		return s, err
	}
	code, out, errs := runCLI(t, "check", "--cases", "1", "--seed", "3")
	if code != 1 || !strings.Contains(out, "NOT REPRODUCED") || !strings.Contains(out, "property: panic") ||
		!strings.HasSuffix(out, "0 passed, 1 failed (1 of them not reproduced while shrinking)\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	n.Store(0)
	code, out, _ = runCLI(t, "check", "--cases", "1", "--seed", "3", "--json")
	var doc checkReport
	if err := json.Unmarshal([]byte(out), &doc); code != 1 || err != nil || len(doc.Result) != 1 || !doc.Result[0].NotReproduced {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	// Every SUT crashes: reproduced, and the report does not say otherwise.
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return flakySUT{s}, err
	}
	code, out, errs = runCLI(t, "check", "--cases", "1", "--seed", "3")
	if code != 1 || strings.Contains(out, "NOT REPRODUCED") || !strings.Contains(out, "property: panic") {
		t.Fatalf("deterministic crash: exit %d\n%s%s", code, out, errs)
	}
}

// wrongTableSUT reports a device page table whose slot 0 row starts one
// block off.
type wrongTableSUT struct{ *proptest.SimSUT }

func (s wrongTableSUT) DevicePageTable() ([]int32, int, bool, error) {
	t, w, ok, err := s.SimSUT.DevicePageTable()
	if len(t) > 0 {
		t = append([]int32(nil), t...)
		t[0]++
	}
	return t, w, ok, err
}

// A failure pictures its step (issue 33 point 11): the device page-table
// rows beside the host's, and a block × row map of the step's KV writes
// (the hostile script's missing write is a '!' at block 0 row 3 of layer
// 1's K cache).
func TestFailureGrids(t *testing.T) {
	p := bigBlockScript(t)
	_, out, _ := runCLI(t, "replay", p)
	for _, want := range []string{
		"page table after the step: device (width 1) | host (width 1)\n    slot 0 (seq 0)  [0] | [0]\n",
		"KV writes of the step, layer 1 K, rows 0..63 of each block",
		"    block    0  ...!......",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		if err != nil {
			return nil, err
		}
		return wrongTableSUT{s.(*proptest.SimSUT)}, nil
	}
	code, out, errs := runCLI(t, "check", "--cases", "1", "--seed", "3")
	if code != 1 || !strings.Contains(out, "property: page-table") || !regexp.MustCompile(`slot 0 \(seq \d+\)  \[\d+[^]]*\] \| \[\d+[^]]*\]   <- differs`).MatchString(out) {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
}
