package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/proptest/mutants"
)

// The union of `check --shard K/N` over K is the unsharded check, case for
// case (same indices, seeds, scenarios and verdicts), in the --json
// document a CI job would collect.
func TestCheckShardsUnion(t *testing.T) {
	type doc struct {
		Cases   int               `json:"cases"`
		Shard   string            `json:"shard"`
		Passed  int               `json:"passed"`
		Results []json.RawMessage `json:"results"`
	}
	get := func(args ...string) doc {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"check", "--cases", "5", "--seed", "21", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var d doc
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	whole := get()
	var union []json.RawMessage
	for _, k := range []string{"1/2", "2/2"} {
		d := get("--shard", k)
		if d.Shard != k || d.Cases != 5 || d.Passed != len(d.Results) {
			t.Fatalf("shard %s: %+v", k, d)
		}
		union = append(union, d.Results...)
	}
	index := func(r json.RawMessage) int {
		var c struct{ Index int }
		if err := json.Unmarshal(r, &c); err != nil {
			t.Fatal(err)
		}
		return c.Index
	}
	slices.SortFunc(union, func(a, b json.RawMessage) int { return index(a) - index(b) })
	if len(union) != len(whole.Results) {
		t.Fatalf("shards ran %d cases, the whole campaign %d", len(union), len(whole.Results))
	}
	for i := range union {
		if string(union[i]) != string(whole.Results[i]) {
			t.Fatalf("case %d:\nshards: %s\nwhole:  %s", i, union[i], whole.Results[i])
		}
	}
	code, out, _ := runCLI(t, "check", "--cases", "5", "--seed", "21", "--shard", "2/2")
	if code != 0 || !strings.HasPrefix(out, "offcard check: device sim, seed 21, 5 cases, shard 2/2 (2 cases)\n") || !strings.HasSuffix(out, "2 passed, 0 failed\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestCheckShardJUnitUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--shard", "0/2"},
		{"--shard", "3/2"},
		{"--shard", "1"},
		{"--shard", "x/y"},
		{"--junit", filepath.Join(dir, "no", "such", "dir", "out.xml")},
	} {
		code, out, errs := runCLI(t, append([]string{"check", "--cases", "1"}, args...)...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || strings.Contains(errs, "panic") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	code, out, errs := runCLI(t, "mutants", "--junit", filepath.Join(dir, "no", "such", "dir", "out.xml"))
	if code != 2 || out != "" || strings.Count(errs, "\n") != 1 {
		t.Errorf("mutants --junit into a missing directory: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("bad usage left %v", ents)
	}
}

// parseJUnit reads a report back with the JUnit schema's required
// attributes, and checks the counts add up.
func parseJUnit(t *testing.T, path string) junitSuites {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `<?xml version="1.0" encoding="UTF-8"?>`) {
		t.Fatalf("no XML declaration:\n%s", b)
	}
	var d junitSuites
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatalf("not XML: %v\n%s", err, b)
	}
	if len(d.Suites) != 1 {
		t.Fatalf("%d suites", len(d.Suites))
	}
	s := d.Suites[0]
	f, e := 0, 0
	for _, c := range s.Cases {
		if c.Name == "" || c.Classname == "" || c.Time == "" {
			t.Errorf("test case lacks a required attribute: %+v", c)
		}
		if c.Failure != nil {
			f++
		}
		if c.Error != nil {
			e++
		}
	}
	if s.Name == "" || s.Tests != len(s.Cases) || s.Failures != f || s.Errors != e || d.Tests != s.Tests || d.Failures != f || d.Errors != e {
		t.Fatalf("counts do not add up: %+v", d)
	}
	return d
}

// check --junit: one test case per case of the shard, a failing case's
// failure carrying its report; the file appears whole (no temporary file
// is left beside it).
func TestCheckJUnit(t *testing.T) {
	defer func(f proptest.Factory) { checkFactory = f }(checkFactory)
	checkFactory = func(sc proptest.Scenario) (proptest.SUT, error) {
		s, err := proptest.SimFactory(sc)
		return plantedSUT{s, sc.BlockSize}, err
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "check.xml")
	code, _, errs := runCLI(t, "check", "--cases", "5", "--seed", "3", "--shard", "1/2", "--junit", path)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	d := parseJUnit(t, path)
	s := d.Suites[0]
	if s.Tests != 3 || s.Failures == 0 || s.Cases[0].Name != "case 0 seed 3" || s.Cases[1].Name[:7] != "case 2 " {
		t.Fatalf("suite %+v", s)
	}
	for _, c := range s.Cases {
		if c.Failure != nil && (!strings.Contains(c.Failure.Text, "replay: offcard check --seed") || c.Failure.Type != "logits") {
			t.Errorf("failure %+v", c.Failure)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("directory holds %v", ents)
	}
}

// mutants --junit: a killed mutant passes, a survivor fails, an error is
// an error; markup and control characters in texts stay valid XML.
func TestMutantsJUnit(t *testing.T) {
	rs := []mutants.Result{
		{Name: "pt-one-column", Status: mutants.Killed, Property: "kv-write", Step: 32, Where: "command 2 `decode steps=1`", Script: "model tiny seed=1\n<&>\n", BuildTime: time.Second},
		{Name: "plus-one-no-skip", Status: mutants.Survived, Cases: 200},
		{Name: "stale-tail", Status: mutants.Error, Error: "does not build: \x01 <bad>"},
	}
	path := filepath.Join(t.TempDir(), "m.xml")
	f, err := openJUnit(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeJUnit(f, mutantsJUnit(time.Now(), time.Second, rs)); err != nil {
		t.Fatal(err)
	}
	d := parseJUnit(t, path)
	cs := d.Suites[0].Cases
	if len(cs) != 3 || cs[0].Failure != nil || cs[0].Error != nil || !strings.Contains(cs[0].SystemOut, "<&>") ||
		cs[1].Failure == nil || cs[1].Failure.Type != "survived" || cs[2].Error == nil || d.Failures != 1 || d.Errors != 1 {
		t.Fatalf("%+v", d)
	}
}
