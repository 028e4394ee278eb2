package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
)

func TestCheckPassesAndIsDeterministic(t *testing.T) {
	var outs [2]string
	for i := range outs {
		code, out, errs := runCLI(t, "check", "--cases", "6", "--seed", "11")
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		if errs != "" {
			t.Fatalf("stderr not quiet off a terminal: %q", errs)
		}
		outs[i] = out
	}
	if outs[0] != outs[1] {
		t.Fatalf("two runs differ:\n%s\n---\n%s", outs[0], outs[1])
	}
	lines := strings.Split(strings.TrimRight(outs[0], "\n"), "\n")
	if last := lines[len(lines)-1]; last != "6 passed, 0 failed" {
		t.Fatalf("last line %q", last)
	}
}

// Same seed, same bytes, under GOMAXPROCS 1 and 2 (the campaign's worker
// count follows GOMAXPROCS).
func TestCheckSameOutputAnyGOMAXPROCS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var outs [2]string
	for i, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		code, out, errs := runCLI(t, "check", "--cases", "5", "--seed", "99", "--json")
		if code != 0 {
			t.Fatalf("GOMAXPROCS %d: exit %d\n%s", procs, code, errs)
		}
		outs[i] = out
	}
	if outs[0] != outs[1] {
		t.Fatalf("GOMAXPROCS 1 and 2 differ:\n%s\n---\n%s", outs[0], outs[1])
	}
	var rep checkReport
	if err := json.Unmarshal([]byte(outs[0]), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Cases != 5 || rep.Passed != 5 || len(rep.Result) != 5 || rep.Result[0].Seed != 99 {
		t.Fatalf("report %+v", rep)
	}
}

func TestCheckUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--device", "tt", "--lib", "/nonexistent/liboffcard_tt.so"},
		{"--device", "tt"},
		{"--device", "gpu"},
		{"--lib", "x.so"},
		{"--cases", "0"},
		{"--seed", "-1"},
		{"--times"},
		{"extra"},
	} {
		code, out, errs := runCLI(t, append([]string{"check"}, args...)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "panic") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	code, _, errs := runCLI(t, "check", "--device", "tt", "--lib", "lib.so")
	if code != 2 || !strings.Contains(errs, "--lib: tthw: load") {
		t.Fatalf("tt: exit %d %q", code, errs)
	}
	if code, out, errs := runCLI(t, "check", "--help"); code != 0 || !strings.Contains(out, "--seed") || errs != "" {
		t.Fatalf("--help: exit %d %q", code, errs)
	}
}

// A planted bug (a logit changed at every block start) makes check exit 1
// with a report a person can act on, and --save writes a script that
// replays red on the bug and green on the engine.
func TestCheckReportsAndSavesFailures(t *testing.T) {
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return plantedSUT{s, sc.BlockSize}, err
	}
	dir := t.TempDir()
	code, out, errs := runCLI(t, "check", "--cases", "3", "--seed", "3", "--save", dir)
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"FAIL case 0, seed 3", "replay: offcard check --seed 3 --cases 1", "property: logits", "first failing step:", "shrunk schedule", "saved "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, " failed") || strings.HasSuffix(last, " 0 failed") {
		t.Fatalf("last line %q", last)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.script"))
	if len(files) == 0 {
		t.Fatal("nothing saved")
	}
	s, err := proptest.ReadScriptFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if f, _, err := proptest.RunScript(s, checkFactory); err != nil || f == nil {
		t.Fatalf("saved script on the bug: %v %v", f, err)
	}
	if f, _, err := proptest.RunScript(s, proptest.SimFactory); err != nil || f != nil {
		t.Fatalf("saved script on the engine: %v %v", f, err)
	}
	data, _ := os.ReadFile(files[0])
	if !strings.Contains(string(data), "# found by: offcard check --seed") {
		t.Fatalf("script lacks its origin:\n%s", data)
	}
}

// --json --times adds the wall time to the first failing command (before
// shrinking) at the top and per case; the rest is --json's document.
func TestCheckTimes(t *testing.T) {
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return plantedSUT{s, sc.BlockSize}, err
	}
	code, out, _ := runCLI(t, "check", "--cases", "3", "--seed", "3", "--json", "--times")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	var rep struct {
		Failed    int   `json:"failed"`
		TimeToRed int64 `json:"time_to_red_ns"`
		Elapsed   int64 `json:"elapsed_ns"`
		Results   []struct {
			Passed    bool  `json:"passed"`
			TimeToRed int64 `json:"time_to_red_ns"`
			Start     int64 `json:"start_ns"`
			Elapsed   int64 `json:"elapsed_ns"`
			Failure   *proptest.Failure
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Failed == 0 || rep.TimeToRed <= 0 || rep.TimeToRed > rep.Elapsed {
		t.Fatalf("time_to_red_ns %d, elapsed_ns %d, failed %d", rep.TimeToRed, rep.Elapsed, rep.Failed)
	}
	first := int64(-1)
	for _, r := range rep.Results {
		if r.Passed != (r.TimeToRed == 0) || r.Elapsed <= 0 || r.TimeToRed > r.Elapsed {
			t.Errorf("case times %+v", r)
		}
		if !r.Passed && (first < 0 || r.Start+r.TimeToRed < first) {
			first = r.Start + r.TimeToRed
		}
	}
	if first != rep.TimeToRed {
		t.Errorf("top-level time_to_red_ns %d, the cases' first red %d", rep.TimeToRed, first)
	}
	if _, plain, _ := runCLI(t, "check", "--cases", "3", "--seed", "3", "--json"); strings.Contains(plain, "_ns") {
		t.Errorf("--json without --times carries times:\n%s", plain)
	}
}

type plantedSUT struct {
	proptest.SUT
	bs int
}

type plantedDecoder struct {
	qwen3.Decoder
	bs int
}

func (p plantedSUT) Decoder() qwen3.Decoder { return plantedDecoder{p.SUT.Decoder(), p.bs} }

func (d plantedDecoder) fix(o []qwen3.Output) []qwen3.Output {
	for i := range o {
		if o[i].Pos > 0 && o[i].Pos%d.bs == 0 {
			o[i].Logits[3] += 1
		}
	}
	return o
}

func (d plantedDecoder) Prefill(p qwen3.Prefill) ([]qwen3.Output, error) {
	o, err := d.Decoder.Prefill(p)
	return d.fix(o), err
}

func (d plantedDecoder) Decode(b []qwen3.Step) ([]qwen3.Output, error) {
	o, err := d.Decoder.Decode(b)
	return d.fix(o), err
}

// --fail-fast stops at the first failing case: the report holds the cases
// up to it and says how many were not started.
func TestCheckFailFast(t *testing.T) {
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return plantedSUT{s, sc.BlockSize}, err
	}
	code, out, errs := runCLI(t, "check", "--cases", "6", "--seed", "3", "--fail-fast")
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "FAIL case 0, seed 3") || !strings.HasSuffix(strings.TrimSpace(out), "0 passed, 1 failed, 5 not started (--fail-fast)") {
		t.Fatalf("output:\n%s", out)
	}
}
