package main

import (
	"errors"
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
