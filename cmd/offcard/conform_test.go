package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/conform"
	"github.com/offcard/offcard/tthw/tthwtest"
)

func TestConformLoopback(t *testing.T) {
	lib := tthwtest.Loopback(t)
	out := filepath.Join(t.TempDir(), "conform.xml")
	code, stdout, stderr := runCLI(t, "conform", "--lib", lib, "--junit", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	n := len(conform.Cases())
	if !strings.HasPrefix(lines[len(lines)-1], fmt.Sprintf("conform: %d cases, %d passed, 0 failed (loopback, wormhole", n, n)) {
		t.Errorf("summary %q", lines[len(lines)-1])
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var s conformSuite
	if err := xml.Unmarshal(b, &s); err != nil {
		t.Fatalf("JUnit does not parse: %v", err)
	}
	if s.Tests != n || s.Failures != 0 || len(s.Cases) != n {
		t.Errorf("JUnit: %d tests, %d failures, %d cases", s.Tests, s.Failures, len(s.Cases))
	}

	code, stdout, _ = runCLI(t, "conform", "--lib", lib, "--json", "--only", "paged", "--arch", "blackhole")
	var doc conformReport
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil || code != 0 {
		t.Fatalf("exit %d, json: %v\n%s", code, err, stdout)
	}
	if doc.Arch != "blackhole" || doc.Cases != 4 || doc.Passed != 4 || doc.BuildInfo["implementation"] != "loopback" {
		t.Errorf("json %+v", doc)
	}
}

// A broken loopback (the -1 skip of paged_update_cache removed) exits 1,
// names the case, and the JUnit report marks it failed.
func TestConformMutantExits1(t *testing.T) {
	dir := t.TempDir()
	lib, err := tthwtest.Build(filepath.Join(dir, "mut.so"), tthwtest.Edit{File: "ops.c", Old: "if (raw == 0xFFFFFFFFu) continue;"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "c.xml")
	code, stdout, _ := runCLI(t, "conform", "--lib", lib, "--only", "paged-update-cache", "--junit", out)
	if code != 1 || !strings.Contains(stdout, "FAIL  paged-update-cache ") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	var s conformSuite
	b, _ := os.ReadFile(out)
	if err := xml.Unmarshal(b, &s); err != nil || s.Failures == 0 || s.Cases[0].Failure == nil {
		t.Errorf("JUnit: %v %+v", err, s)
	}
}

func TestConformUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"conform"}, "--lib is required"},
		{[]string{"conform", "--lib", "/nonexistent.so"}, "--lib"},
		{[]string{"conform", "--lib", "/etc/passwd"}, "tthw: load"},
		{[]string{"conform", "--lib", tthwtest.Loopback(t), "--arch", "grayskull"}, "--arch"},
		{[]string{"conform", "--lib", tthwtest.Loopback(t), "--only", "nothing-matches"}, "matches no case"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.msg) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
	}
	if code, stdout, stderr := runCLI(t, "conform", "--help"); code != 0 || !strings.Contains(stdout+stderr, "usage: offcard conform") {
		t.Errorf("--help: exit %d %q", code, stdout+stderr)
	}
}
