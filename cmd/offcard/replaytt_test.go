package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/tthw/tthwtest"
)

// A script saved by check --device tt replays (issue 33 point 7), as
// help replay says: on the card with --device tt --lib L (or --lib L
// alone: the script's device line says tt), and without a library on
// the simulator, saying so.
func TestReplayCardScript(t *testing.T) {
	lib := tthwtest.Loopback(t)
	s, ok := proptest.GenerateScript(5, proptest.Base{Device: proptest.CardDevice})
	if !ok {
		t.Fatal("no script")
	}
	if !strings.Contains(s.String(), "device tt") {
		t.Fatalf("not a card script:\n%s", s)
	}
	p := filepath.Join(t.TempDir(), "card.script")
	if err := os.WriteFile(p, []byte(s.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		device string
	}{
		{[]string{"replay", p}, "device sim"},
		{[]string{"replay", p, "--device", "tt", "--lib", lib}, "device tt"},
		{[]string{"replay", p, "--lib", lib}, "device tt"},
		{[]string{"replay", p, "--device", "sim"}, "device sim"},
	} {
		code, out, errs := runCLI(t, c.args...)
		if code != 0 || !strings.Contains(out, c.device) || !strings.HasSuffix(out, "1 passed, 0 failed\n") {
			t.Errorf("%v: exit %d\n%s%s", c.args, code, out, errs)
		}
	}
	code, out, errs := runCLI(t, "replay", p)
	if code != 0 || !strings.Contains(out, "--lib") {
		t.Errorf("replay without --lib does not say how to run it on the card:\n%s%s", out, errs)
	}
	for _, args := range [][]string{
		{"replay", p, "--device", "tt"},
		{"replay", p, "--device", "sim", "--lib", lib},
	} {
		if code, out, errs := runCLI(t, args...); code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
}
