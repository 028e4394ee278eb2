package main

import (
	"strings"
	"testing"
)

func TestSimDynamicAcrossBoundaries(t *testing.T) {
	code, out, errs := runCLI(t, "sim", "--width", "dynamic", "--batch", "3", "--prompt-len", "30", "--steps", "40", "--strict")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"strict mode: no findings", "replay", "capture", "1 retired (1 freed after their trace, 0 still held)"} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAILED") {
		t.Errorf("a step differs from ref:\n%s", out)
	}
	// Same arguments, same transcript.
	_, again, _ := runCLI(t, "sim", "--width", "dynamic", "--batch", "3", "--prompt-len", "30", "--steps", "40", "--strict")
	if again != out {
		t.Error("two identical runs printed different transcripts")
	}
}

func TestSimModes(t *testing.T) {
	for _, args := range [][]string{
		{"--mode", "eager", "--width", "fixed:256", "--block-size", "64", "--arch", "blackhole"},
		{"--mode", "captured", "--recapture-every", "3", "--width", "fixed:4", "--batch", "4", "--prompt-len", "62"},
		// A correct engine is bit-exact whatever fresh L1 holds.
		{"--l1", "zero", "--batch", "3"},
		{"--l1", "stale", "--batch", "3"},
	} {
		code, out, errs := runCLI(t, append([]string{"sim", "--steps", "12", "--strict"}, args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
}

func TestSimBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--width", "fixed:0"},
		{"--width", "wide"},
		{"--mode", "turbo"},
		{"--arch", "grayskull"},
		{"--l1", "random"},
		{"--block-size", "48"},
		{"--batch", "0"},
		{"--steps", "-2"},
		{"--synth", "huge"},
	} {
		code, _, errs := runCLI(t, append([]string{"sim"}, args...)...)
		if code != 2 || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, errs)
		}
	}
}
