package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
)

// check's text output ends with a per-property tally and the reach table
// (issue 33 point 11), as --json has them, then the summary line.
func TestCheckTextTallyAndReach(t *testing.T) {
	code, out, errs := runCLI(t, "check", "--cases", "3", "--seed", "3")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(out, "by property: every property held in every case\n") {
		t.Errorf("no tally:\n%s", out)
	}
	i := strings.Index(out, "reach (")
	if i < 0 {
		t.Fatalf("no reach table:\n%s", out)
	}
	for _, k := range proptest.AllReachKinds {
		if !strings.Contains(out[i:], " "+k+" ") {
			t.Errorf("reach table lacks %s:\n%s", k, out[i:])
		}
	}
	if !strings.HasSuffix(out, "\n3 passed, 0 failed\n") {
		t.Errorf("summary not last:\n%s", out)
	}
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return failingSUT{s}, err
	}
	code, out, _ = runCLI(t, "check", "--cases", "2", "--seed", "3")
	if code != 1 || !strings.Contains(out, "by property: sut-error 2 cases\n") {
		t.Errorf("exit %d, tally of two failing cases:\n%s", code, out)
	}
}

// An empty shard is refused like --cases 0, and one case is "1 case".
func TestCheckEmptyShardAndPlurals(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--cases", "1", "--shard", "2/2"},
		{"check", "--cases", "3", "--shard", "4/5"},
		{"check", "--cases", "0"},
	} {
		if code, out, errs := runCLI(t, args...); code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	code, out, errs := runCLI(t, "check", "--cases", "1")
	if code != 0 || !strings.HasPrefix(out, "offcard check: device sim, seed 1, 1 case\n") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "check", "--cases", "2", "--shard", "2/2")
	if code != 0 || !strings.HasPrefix(out, "offcard check: device sim, seed 1, 2 cases, shard 2/2 (1 case)\n") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
	one := filepath.Join(t.TempDir(), "one.script")
	os.WriteFile(one, []byte("model tiny seed=1\ndevice sim\nengine block=32 blocks=4 width=dynamic capacity=1 mode=eager\nadmit seq=0 prompt=3\n"), 0o644)
	code, out, errs = runCLI(t, "replay", one)
	if code != 0 || !strings.HasPrefix(out, "offcard replay: "+one+", device sim, 1 command\n") {
		t.Errorf("exit %d\n%s%s", code, out, errs)
	}
}

// slowSUT fails every prefill after a pause: a run that lasts.
type slowSUT struct{ proptest.SUT }

func (s slowSUT) Decoder() qwen3.Decoder { return slowDecoder{s.SUT.Decoder()} }

type slowDecoder struct{ qwen3.Decoder }

func (slowDecoder) Prefill(qwen3.Prefill) ([]qwen3.Output, error) {
	time.Sleep(20 * time.Millisecond)
	return nil, errors.New("planted: slow refusal")
}

// A check whose stderr is not a terminal prints a progress line at most
// every progressEvery once it runs longer than that, and each failing
// case as it happens (issue 33 point 11); a shorter run prints nothing.
func TestCheckProgressWhenPiped(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 100 * time.Millisecond
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return slowSUT{s}, err
	}
	code, out, errs := runCLI(t, "check", "--cases", "2", "--seed", "3")
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	var ticks, fails int
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "check: ") && strings.Contains(l, " elapsed"):
			ticks++
		case strings.HasPrefix(l, "check: case ") && strings.Contains(l, "failed: sut-error"):
			fails++
		default:
			t.Errorf("stray stderr line %q", l)
		}
	}
	if ticks == 0 || fails != 2 {
		t.Errorf("%d progress lines, %d failure lines:\n%s", ticks, fails, errs)
	}
	progressEvery = time.Hour
	if _, _, errs := runCLI(t, "check", "--cases", "1", "--seed", "3"); errs != "" {
		t.Errorf("a short run printed progress: %q", errs)
	}
}

// Small refusals of issue 33 point 11: --timeout 0s like -1s, generate
// from a model without a BOS token and no prompt up front in one line,
// errors that name the file and line (replay's over-long line,
// adjudicate's out-of-vocabulary token).
func TestRefusalsNamePathAndLine(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"check", "--engine", "cat", "--timeout", "0s", "--cases", "1"},
		{"check", "--engine", "cat", "--timeout", "-1s", "--cases", "1"},
		{"check", "--timeout", "0s", "--cases", "1"},
		{"replay", "x.script", "--engine", "cat", "--timeout", "0s"},
	} {
		code, out, errs := runCLI(t, args...)
		if code != 2 || out != "" || !strings.Contains(errs, "--timeout") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}

	model := filepath.Join(dir, "m")
	if code, _, errs := runCLI(t, "export", "--synth", "tiny", "--out", model); code != 0 {
		t.Fatal(errs)
	}
	cfgPath := filepath.Join(model, "config.json")
	b, _ := os.ReadFile(cfgPath)
	b = regexp.MustCompile(`"bos_token_id": *[0-9]+`).ReplaceAll(b, []byte(`"bos_token_id": null`))
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil || !bytes.Contains(b, []byte(`"bos_token_id": null`)) {
		t.Fatalf("%v\n%s", err, b)
	}
	code, out, errs := runCLI(t, "generate", "--model", model, "--steps", "2")
	if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "bos_token_id") || !strings.Contains(errs, cfgPath) {
		t.Errorf("generate without BOS: exit %d\n%s%s", code, out, errs)
	}

	long := filepath.Join(dir, "long.script")
	os.WriteFile(long, []byte("model tiny seed=1\ndevice sim\nengine block=32 blocks=4 width=dynamic capacity=1 mode=eager\n"+strings.Repeat("x", 100000)+"\n"), 0o644)
	code, out, errs = runCLI(t, "replay", long)
	if code != 2 || out != "" || !strings.Contains(errs, long+": line 4:") || strings.Count(errs, "\n") != 1 {
		t.Errorf("replay over-long line: exit %d\n%s%s", code, out, errs)
	}

	a := filepath.Join(dir, "a.jsonl")
	if code, _, errs := runCLI(t, "generate", "--synth", "tiny", "--prompt-ids", "1,2,3", "--steps", "3", "--dump", a); code != 0 {
		t.Fatal(errs)
	}
	lines := strings.Split(strings.TrimSpace(string(must(os.ReadFile(a)))), "\n")
	lines[2] = regexp.MustCompile(`"token":[0-9]+`).ReplaceAllString(lines[2], `"token":99999`)
	bad := filepath.Join(dir, "oov.jsonl")
	os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	code, out, errs = runCLI(t, "adjudicate", "--ours", bad, "--synth", "tiny")
	if code != 2 || out != "" || !strings.Contains(errs, bad+":3:") || !strings.Contains(errs, "99999") {
		t.Errorf("adjudicate out-of-vocabulary: exit %d\n%s%s", code, out, errs)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// export reports its long steps on stderr when they outlast progressEvery
// (issue 33 point 11: building and writing the 0.6B model printed nothing
// for 98 s): synthesising the weights, then writing them, with the bytes
// written so far.
func TestExportProgress(t *testing.T) {
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = time.Nanosecond
	out := filepath.Join(t.TempDir(), "m")
	code, stdout, errs := runCLI(t, "export", "--synth", "tiny", "--out", out)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d\n%s%s", code, stdout, errs)
	}
	if !regexp.MustCompile(`(?m)^offcard export: synthesising the tiny weights \(seed 1\) \(\d+s(, done)?\)$`).MatchString(errs) ||
		!regexp.MustCompile(`(?m)^offcard export: writing .*: \d+ MB so far \(\d+s(, done)?\)$`).MatchString(errs) {
		t.Errorf("stderr:\n%s", errs)
	}
	progressEvery = time.Hour
	if _, _, errs := runCLI(t, "export", "--synth", "tiny", "--out", out); errs != "" {
		t.Errorf("a short export printed progress: %q", errs)
	}
}
