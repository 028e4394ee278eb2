package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/qwen3"
	"github.com/offcard/offcard/tthw/tthwtest"
)

// Every output flag is checked before the job starts (issue 33 point 6):
// a directory where a file goes, a missing parent, a file where a
// directory goes are exit 2 with one line, and nothing of the job ran
// (no report on stdout, no build).
func TestOutputsCheckedBeforeWork(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(file, "sub")
	missing := filepath.Join(dir, "nodir", "out")
	cases := [][]string{
		{"check", "--cases", "1", "--junit", dir},
		{"check", "--cases", "1", "--junit", missing},
		{"check", "--cases", "1", "--dump", dir},
		{"check", "--cases", "1", "--save", file},
		{"check", "--cases", "1", "--save", sub},
		{"sim", "--steps", "2", "--dump", dir},
		{"sim", "--steps", "2", "--dump", sub},
		{"mutants", "--only", "pad-one", "--keep", sub},
		{"mutants", "--only", "pad-one", "--junit", dir},
		{"mutants", "--only", "pad-one", "--overlay", sub},
		{"export", "--synth", "tiny", "--out", sub},
		{"generate", "--synth", "tiny", "--prompt-ids", "1,2", "--steps", "1", "--dump", dir},
		{"generate", "--synth", "tiny", "--prompt-ids", "1,2", "--steps", "1", "--logits-out", dir},
		{"conform", "--lib", tthwtest.Loopback(t), "--junit", dir},
	}
	for _, args := range cases {
		code, out, errs := runCLI(t, args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, want 2 before any work\nstdout: %q\nstderr: %q", args, code, out, errs)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the bad runs left files behind: %v", ents)
	}
}

// failingSUT refuses every call: a case fails before the engine produced
// any token.
type failingSUT struct{ proptest.SUT }

func (s failingSUT) Decoder() qwen3.Decoder { return failingDecoder{s.SUT.Decoder()} }

type failingDecoder struct{ qwen3.Decoder }

func (failingDecoder) Prefill(qwen3.Prefill) ([]qwen3.Output, error) {
	return nil, errors.New("planted: engine refuses every prefill")
}

func (failingDecoder) Decode([]qwen3.Step) ([]qwen3.Output, error) {
	return nil, errors.New("planted: engine refuses every decode")
}

// check --dump writes no empty dump and advertises no adjudicate command
// when the shrunk case fails before any token.
func TestCheckDumpNothingToDump(t *testing.T) {
	dp := filepath.Join(t.TempDir(), "d.jsonl")
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return failingSUT{s}, err
	}
	code, out, errs := runCLI(t, "check", "--cases", "1", "--seed", "3", "--dump", dp)
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(dp); err == nil {
		b, _ := os.ReadFile(dp)
		t.Errorf("a dump of %d bytes was written", len(b))
	}
	if strings.Contains(out+errs, "adjudicate") || !strings.Contains(out+errs, "no dump written") {
		t.Errorf("output:\n%s%s", out, errs)
	}
}
