package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/tt"
)

// Help goes to stdout with exit 0, for every command, both as
// `offcard help CMD` and as `CMD --help`; a bare `offcard` is bad usage.
func TestHelpOnStdout(t *testing.T) {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, args := range [][]string{{n, "--help"}, {"help", n}, {n, "-h"}} {
			code, out, errs := runCLI(t, args...)
			if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: offcard "+n) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
			}
		}
	}
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		code, out, errs := runCLI(t, args...)
		if code != 0 || errs != "" || !strings.Contains(out, "replay") || !strings.Contains(out, "exit codes") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	for _, args := range [][]string{{}, {"help", "nosuch"}, {"help", "check", "extra"}} {
		if code, out, errs := runCLI(t, args...); code != 2 || out != "" || errs == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

// A panic inside a command is exit 3 with one line, as the usage says.
func TestInternalErrorExit3(t *testing.T) {
	commands["panic-test"] = command{"", func(*env, []string) error { panic("boom") }}
	defer delete(commands, "panic-test")
	code, _, errs := runCLI(t, "panic-test")
	if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "internal error") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

func TestVersion(t *testing.T) {
	defer func(f func() (*debug.BuildInfo, bool)) { buildInfo = f }(buildInfo)
	buildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Path: "github.com/offcard/offcard", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	code, out, errs := runCLI(t, "version")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"v1.2.3", "github.com/offcard/offcard", "abc123 (modified)", "go1.99", tt.TTMetalCommit} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runCLI(t, "version", "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if v["vcs_revision"] != "abc123" || v["tt_metal_commit"] != tt.TTMetalCommit || v["go_version"] != "go1.99" || v["version"] != "v1.2.3" {
		t.Errorf("version --json %v", v)
	}
	if len(tt.TTMetalCommit) != 40 {
		t.Errorf("tt.TTMetalCommit %q is not a full commit hash", tt.TTMetalCommit)
	}
	// A binary without VCS stamps says so instead of printing nothing.
	buildInfo = func() (*debug.BuildInfo, bool) { return &debug.BuildInfo{GoVersion: "go1.99"}, true }
	if _, out, _ := runCLI(t, "version"); !strings.Contains(out, "revision: unknown") {
		t.Errorf("no revision: %s", out)
	}
}

// replay runs a saved script and reports like check: exit 0 and the
// summary on the engine, exit 1 with property and step on a planted bug,
// exit 2 on a bad script or flag.
func TestReplay(t *testing.T) {
	script := "../../proptest/testdata/regressions/boundary-captured-dynamic.script"
	code, out, errs := runCLI(t, "replay", script)
	if code != 0 || errs != "" || !strings.HasSuffix(out, "1 passed, 0 failed\n") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = runCLI(t, "replay", "--json", script)
	var rep replayReport
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !rep.Passed || rep.DeviceSteps == 0 {
		t.Fatalf("--json: exit %d, %v, %+v", code, err, rep)
	}

	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return plantedSUT{s, sc.BlockSize}, err
	}
	code, out, _ = runCLI(t, "replay", script, "--device", "sim")
	for _, want := range []string{"FAIL ", "property: logits", "first failing step: ", "0 passed, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay on the planted bug lacks %q:\n%s", want, out)
		}
	}
	if code != 1 {
		t.Errorf("replay on the planted bug: exit %d", code)
	}

	dir := t.TempDir()
	invalid := filepath.Join(dir, "invalid.script")
	os.WriteFile(invalid, []byte("model tiny seed=1\ndecode steps=1\n"), 0o644)
	for _, args := range [][]string{
		{},
		{filepath.Join(dir, "missing.script")},
		{"../../go.mod"},
		{invalid},
		{script, "--device", "tt"},
		{script, "--device", "tt", "--lib", "x.so"},
		{script, "--device", "gpu"},
		{script, "--lib", "x.so"},
		{script, "extra"},
	} {
		code, out, errs := runCLI(t, append([]string{"replay"}, args...)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("replay %v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

// check --save names a file, or --dump a file that cannot be created:
// exit 2 before the campaign, stdout empty.
// A save that fails after the campaign does not hide the verdict.
func TestCheckSave(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	t0 := time.Now()
	code, out, errs := runCLI(t, "check", "--cases", "200", "--save", file)
	if code != 2 || out != "" || !strings.Contains(errs, file) {
		t.Fatalf("--save FILE: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	noDir := filepath.Join(dir, "no", "such", "d.jsonl")
	if code, out, errs := runCLI(t, "check", "--cases", "200", "--dump", noDir); code != 2 || out != "" || !strings.Contains(errs, noDir) {
		t.Fatalf("--dump in a missing directory: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if el := time.Since(t0); el > 10*time.Second {
		t.Logf("--save FILE took %v: was the campaign run first?", el) // not a timed assertion
	}

	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return plantedSUT{s, sc.BlockSize}, err
	}
	// The script's name is taken by a directory: its save fails.
	saveDir := filepath.Join(dir, "saves")
	os.MkdirAll(filepath.Join(saveDir, "logits-3.script", "x"), 0o755)
	code, out, errs = runCLI(t, "check", "--cases", "1", "--seed", "3", "--save", saveDir)
	if code != 1 || !strings.Contains(out, "FAIL case 0, seed 3") || !strings.HasSuffix(out, "0 passed, 1 failed\n") {
		t.Fatalf("exit %d, stdout:\n%s", code, out)
	}
	if !strings.Contains(errs, "save: create "+filepath.Join(saveDir, "logits-3.script")+": is a directory") || strings.Contains(errs, ".tmp") {
		t.Errorf("save error %q", errs)
	}
}

// check --json writes seeds as strings (exact past 2^53) and each case's
// replay command; every key is snake_case.
func TestCheckJSONSeedsAsStrings(t *testing.T) {
	const seed = "18446744073709551557" // > 2^53
	code, out, errs := runCLI(t, "check", "--cases", "2", "--seed", seed, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["seed"] != seed {
		t.Errorf("seed %v (%T), want the string %s", doc["seed"], doc["seed"], seed)
	}
	rs := doc["results"].([]any)
	c0 := rs[0].(map[string]any)
	if c0["seed"] != seed || c0["replay"] != "offcard check --seed "+seed+" --cases 1" {
		t.Errorf("case 0: seed %v, replay %v", c0["seed"], c0["replay"])
	}
	if _, ok := rs[1].(map[string]any)["seed"].(string); !ok {
		t.Errorf("case 1 seed is not a string")
	}
	checkSnake(t, "check --json", doc)
}

// mutants --list --json uses snake_case keys.
func TestMutantsListJSONSnakeCase(t *testing.T) {
	code, out, errs := runCLI(t, "mutants", "--list", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	checkSnake(t, "mutants --list --json", doc)
	if !strings.Contains(out, `"edits"`) || !strings.Contains(out, `"old"`) {
		t.Errorf("list lacks the edits:\n%.400s", out)
	}
}

// checkSnake checks that every object key under v is snake_case (the
// reach map's event names included).
func checkSnake(t *testing.T, what string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k != strings.ToLower(k) || strings.ContainsAny(k, " -") {
				t.Errorf("%s: key %q is not snake_case", what, k)
			}
			checkSnake(t, what, e)
		}
	case []any:
		for _, e := range x {
			checkSnake(t, what, e)
		}
	}
}

// Usage errors found before any work: mutants --seed abc, --cases 0
// (with an empty module dir, anything built would fail differently).
func TestMutantsEarlyUsage(t *testing.T) {
	for _, args := range [][]string{{"--seed", "abc"}, {"--cases", "0"}, {"--cases", "-3"}, {"--seed", "-1"}} {
		code, out, errs := runCLI(t, append([]string{"mutants", "--repo", t.TempDir()}, args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, args[0]) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

// Every file the CLI writes is 0644 and errors name the user's path.
func TestOutputFilesMode(t *testing.T) {
	dir := t.TempDir()
	dump, logits := filepath.Join(dir, "d.jsonl"), filepath.Join(dir, "l.f32")
	if code, _, errs := runCLI(t, "generate", "--synth", "tiny", "--prompt-ids", "1", "--steps", "2", "--dump", dump, "--logits-out", logits); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// The tokenizer copy too, from a 0600 source (when make testdata
	// fetched the real one; the other files are checked regardless).
	out := filepath.Join(dir, "model")
	args := []string{"export", "--synth", "tiny", "--out", out}
	paths := []string{dump, logits, filepath.Join(out, "config.json"), filepath.Join(out, "model.safetensors")}
	if src, err := os.ReadFile("../../qwen3/tokenizer/testdata/tokenizer.json"); err == nil {
		tok := filepath.Join(dir, "tokenizer.json")
		os.WriteFile(tok, src, 0o600)
		args = append(args, "--tokenizer", tok)
		paths = append(paths, filepath.Join(out, "tokenizer.json"))
	}
	if code, _, errs := runCLI(t, args...); code != 0 {
		t.Fatalf("export: exit %d: %s", code, errs)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v, want 0644", filepath.Base(p), fi.Mode().Perm())
		}
	}
	bad := filepath.Join(dir, "no", "such", "dir", "d.jsonl")
	code, _, errs := runCLI(t, "generate", "--synth", "tiny", "--prompt-ids", "1", "--dump", bad)
	if code != 2 || !strings.Contains(errs, bad) || strings.Contains(errs, ".tmp") {
		t.Errorf("exit %d, stderr %q: want the user's path, not the temporary file", code, errs)
	}
}

// generate says when it starts from BOS alone, and refuses to run past
// max_position_embeddings.
func TestGeneratePromptAndLength(t *testing.T) {
	code, _, errs := runCLI(t, "generate", "--synth", "tiny", "--steps", "1")
	if code != 0 || !strings.Contains(errs, "BOS") {
		t.Errorf("no prompt: exit %d, stderr %q", code, errs)
	}
	code, out, errs := runCLI(t, "generate", "--synth", "tiny", "--prompt-ids", "1,2", "--steps", "4096")
	if code != 2 || out != "" || !strings.Contains(errs, "max_position_embeddings 4096") {
		t.Errorf("past max positions: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// tokenize --decode rejects ids outside the vocabulary.
func TestTokenizeDecodeOutOfRange(t *testing.T) {
	tok := realTokenizer(t)
	for _, c := range []struct {
		args []string
		in   string
	}{
		{[]string{"--decode"}, "9707 99999999"},
		{[]string{"--decode", "--jsonl"}, "[9707, 99999999]\n"},
	} {
		withStdin(t, c.in)
		code, out, errs := runCLI(t, append([]string{"tokenize", "--tokenizer", tok}, c.args...)...)
		if code != 2 || out != "" || !strings.Contains(errs, "99999999") {
			t.Errorf("%v < %q: exit %d, stdout %q, stderr %q", c.args, c.in, code, out, errs)
		}
	}
}

// The README's command examples name only commands that exist, every
// command appears in it, and its tokenize example prints what it says.
func TestReadmeMatchesCommands(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	for n := range commands {
		if !strings.Contains(readme, "offcard "+n) {
			t.Errorf("README never shows offcard %s", n)
		}
	}
	inCode := false
	for _, line := range strings.Split(readme, "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if f := strings.Fields(line); inCode && len(f) > 1 && f[0] == "offcard" {
			if _, ok := commands[f[1]]; !ok && f[1] != "help" && f[1] != "--help" {
				t.Errorf("README example names no command: %q", line)
			}
		}
		if strings.HasPrefix(line, `echo "Hello world" | offcard tokenize`) {
			want := strings.TrimSpace(strings.SplitN(strings.SplitN(line, "#", 2)[1], "(", 2)[0])
			withStdin(t, "Hello world\n")
			code, out, errs := runCLI(t, "tokenize", "--tokenizer", realTokenizer(t))
			if code != 0 || strings.TrimSpace(out) != want {
				t.Errorf("README's tokenize example says %q, tokenize prints %q (exit %d, %s)", want, out, code, errs)
			}
		}
	}
	if !strings.HasPrefix(readme, "# offcard\n\n```sh\ngo run ./cmd/offcard check") {
		t.Errorf("the README no longer starts with the two setup commands")
	}
}
