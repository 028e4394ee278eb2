package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest"
)

// exportedTiny is `offcard export --synth tiny --seed 2` into a temporary
// directory.
func exportedTiny(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny2")
	if code, out, errs := runCLI(t, "export", "--synth", "tiny", "--seed", "2", "--out", dir); code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, out, errs)
	}
	return dir
}

// --preset and --model: bad values are one line and exit 2, before any
// case runs.
func TestCheckModelFlagsRefused(t *testing.T) {
	dir := exportedTiny(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--preset", "qwen3-7b"}, "--preset: unknown model preset"},
		{[]string{"--preset", "tiny", "--model", dir}, "--preset and --model: give one"},
		{[]string{"--model", filepath.Join(dir, "missing")}, "--model: "},
		{[]string{"--model", t.TempDir()}, "config.json"},
	} {
		code, out, errs := runCLI(t, append([]string{"check", "--cases", "1"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.args, code, out, errs, c.want)
		}
	}
}

// check --model DIR runs every case on the checkpoint (its scripts name
// the directory) and passes, on sim and through --engine (the hello names
// the directory; offcard's engine loads it from there); --preset tiny is
// the default campaign.
func TestCheckModelDir(t *testing.T) {
	dir := exportedTiny(t)
	code, out, errs := runCLI(t, "check", "--model", dir, "--cases", "2", "--seed", "4", "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	var doc struct {
		Results []struct {
			Scenario string `json:"scenario"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Results) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	for _, r := range doc.Results {
		if !strings.HasPrefix(r.Scenario, "model dir="+dir+"\n") {
			t.Fatalf("scenario %q", r.Scenario)
		}
	}
	code, out, errs = runCLI(t, "check", "--engine", testEngine(t, "ok"), "--model", dir, "--cases", "2", "--seed", "4")
	if code != 0 || !strings.HasSuffix(out, "2 passed, 0 failed\n") {
		t.Fatalf("--engine: exit %d\n%s%s", code, out, errs)
	}
	_, a, _ := runCLI(t, "check", "--cases", "2", "--seed", "4", "--json")
	_, b, _ := runCLI(t, "check", "--preset", "tiny", "--cases", "2", "--seed", "4", "--json")
	if a != b {
		t.Fatal("--preset tiny is not the default campaign")
	}
}

// A failure's replay command names the model, and the saved script does
// too, so that `offcard replay` and the replay command reproduce it.
func TestCheckModelReplay(t *testing.T) {
	dir := exportedTiny(t)
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return plantedSUT{s, sc.BlockSize}, err
	}
	save := t.TempDir()
	code, out, errs := runCLI(t, "check", "--model", dir, "--cases", "2", "--seed", "3", "--save", save)
	if code != 1 || !strings.Contains(out, "replay: offcard check --model "+dir+" --seed ") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	files, _ := filepath.Glob(filepath.Join(save, "*.script"))
	if len(files) == 0 {
		t.Fatal("no script saved")
	}
	b, _ := os.ReadFile(files[0])
	if !strings.Contains(string(b), "\nmodel dir="+dir+"\n") {
		t.Fatalf("saved script:\n%s", b)
	}
	if code, out, errs := runCLI(t, "replay", files[0]); code != 1 || !strings.Contains(out, "logits") {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	for m, want := range map[campaignModel]string{{}: "", {preset: "tiny"}: "", {preset: "qwen3-0.6b"}: "--preset qwen3-0.6b", {dir: "/d"}: "--model /d"} {
		if got := m.replayArgs(); got != want {
			t.Errorf("%+v: replay args %q, want %q", m, got, want)
		}
	}
}
