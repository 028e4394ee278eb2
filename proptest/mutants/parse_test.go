package mutants_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/offcard/offcard/proptest"
	"github.com/offcard/offcard/proptest/mutants"
)

// checkDoc is offcard check's --json document as cmd/offcard writes it (the
// results are proptest.CaseResult values, so their JSON tags are checked
// here against the parser).
func checkDoc(t *testing.T, rs []proptest.CaseResult) []byte {
	t.Helper()
	passed, failed := proptest.Summary(rs)
	b, err := json.Marshal(map[string]any{"device": "sim", "seed": 1, "cases": len(rs),
		"passed": passed, "failed": failed, "results": rs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCheck(t *testing.T) {
	script := "# caught\nmodel tiny seed=1\ndevice sim arch=wormhole strict\nengine block=32 blocks=8 width=dynamic capacity=1 mode=captured\nadmit seq=0 prompt=31\ndecode steps=2\n"
	rs := []proptest.CaseResult{
		{Index: 0, Seed: 1, Passed: true},
		{Index: 1, Seed: 77, Failure: &proptest.Failure{Property: proptest.PropKVWrite, Command: 2, Cmd: "decode steps=2",
			SubStep: 2, DeviceStep: 32, Seq: 0, Pos: 32, Regime: "replay", Width: 1, Detail: "d", Finding: "f\nsecond line"},
			ScriptText: script},
		{Index: 2, Seed: 78, Failure: &proptest.Failure{Property: proptest.PropLogits}},
	}
	rep, err := mutants.ParseCheck(checkDoc(t, rs))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cases != 3 || rep.Failed != 2 || rep.First == nil {
		t.Fatalf("report %+v", rep)
	}
	f := rep.First
	if f.Index != 1 || f.Seed != "77" || f.Property != proptest.PropKVWrite || f.Step != 32 || f.Pos != 32 || f.Seq != 0 ||
		f.Regime != "replay" || f.Finding != "f second line" || f.ShrunkLen != 2 || f.Script != script {
		t.Errorf("first failure %+v", f)
	}
	if f.Replay != "offcard check --seed 77 --cases 1" {
		t.Errorf("replay %q", f.Replay)
	}
	if want := rs[1].Failure.Where(); f.Where != want {
		t.Errorf("where %q, want %q", f.Where, want)
	}

	rep, err = mutants.ParseCheck(checkDoc(t, rs[:1]))
	if err != nil || rep.First != nil || rep.Cases != 1 || rep.Failed != 0 {
		t.Errorf("all passed: %+v %v", rep, err)
	}
	for _, bad := range []string{"", "not json", "42"} {
		if _, err := mutants.ParseCheck([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestScriptLen(t *testing.T) {
	s := proptest.Script{Scenario: proptest.Scenario{Model: "tiny", Device: "sim", Arch: "wormhole", BlockSize: 32, NumBlocks: 8, Capacity: 1},
		Commands: []proptest.Cmd{{Kind: proptest.Admit, Seq: 0, Prompt: 3}, {Kind: proptest.Decode, Steps: 4}, {Kind: proptest.Recapture}},
		Comments: []string{"a comment"}}
	if n := mutants.ScriptLen(s.String()); n != 3 {
		t.Errorf("ScriptLen = %d, want 3:\n%s", n, s)
	}
}

// The table's columns are fixed; only the TIME column varies between runs.
func TestWriteTable(t *testing.T) {
	rs := []mutants.Result{
		{Name: "a", Status: mutants.Killed, Property: "strict", Step: 32, ShrunkLen: 2, Finding: "page-table-read-past-row: x", TimeToRed: 1234 * time.Millisecond},
		{Name: "bb", Status: mutants.Survived, Step: -1, ShrunkLen: -1, Cases: 200},
		{Name: "c", Status: mutants.Error, Step: -1, ShrunkLen: -1, Error: "does not build"},
	}
	var b bytes.Buffer
	if err := mutants.WriteTable(&b, rs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("table:\n%s", b.String())
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[0] != "a" || f[1] != "killed" || f[2] != "32" || f[3] != "strict" || f[4] != "2" || f[5] != "1.23s" {
		t.Errorf("killed row %q", lines[1])
	}
	if !strings.HasPrefix(lines[4], "3 mutants: 1 killed, 1 survived, 1 error") {
		t.Errorf("summary %q", lines[4])
	}
	if mutants.AllKilled(rs) || !mutants.AllKilled(rs[:1]) {
		t.Error("AllKilled")
	}
}
