package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readmeNotRun lists the README's `offcard` command lines that
// TestReadmeCommandsRun does not run, each with the reason (placeholders,
// a card, minutes of work, or the test that covers it). A README command
// neither run nor listed here fails the test: a new example is run or
// explained.
var readmeNotRun = map[string]string{
	"go run ./cmd/offcard check":                                                                        "the main job: TestCampaign (proptest) runs the same 200-case campaign",
	"go install ./cmd/offcard":                                                                          "installs into GOPATH",
	"go install github.com/offcard/offcard/cmd/offcard@latest":                                          "needs the module published",
	"offcard check --cases 200 --seed 1":                                                                "TestCampaign runs this campaign; TestCheckJSONSeedsAsStrings the command",
	"offcard check --seed S --cases 1 --save proptest/testdata/regressions":                             "S is a placeholder; TestCheckSave runs --save",
	"offcard check --cases 2000 --fail-fast":                                                            "minutes of work; --fail-fast is tested by the mutant runner's checks",
	"offcard check --preset qwen3-0.6b --cases 20":                                                      "builds the 0.6B model (tens of seconds): TestModelDirPositionLimit and the preset tests",
	"offcard check --model DIR --cases 20":                                                              "DIR is a placeholder; the --model tests export one",
	"offcard replay proptest/testdata/regressions/NAME.script":                                          "NAME is a placeholder; TestRegressions replays every script",
	"offcard mutants":                                                                                   "TestCatalogKilled (proptest/mutants) runs the catalog",
	"offcard generate --model DIR --prompt \"Hello\"":                                                   "DIR is a placeholder (a real checkpoint with tokenizer.json)",
	"offcard adjudicate --ours mine.jsonl --oracle theirs.jsonl":                                        "theirs.jsonl is a placeholder; TestAdjudicateOwnGenerationClean and TestAdjudicateNearTie run two dumps",
	"echo \"Hello world\" | offcard tokenize --tokenizer tokenizer.json":                                "TestReadmeMatchesCommands runs it and checks its output",
	"offcard adjudicate --ours yours.jsonl --oracle ref.jsonl":                                          "yours.jsonl is a placeholder (your engine's dump)",
	"offcard check --engine 'python3 examples/python-engine/engine.py'":                                 "TestPythonEngine (refengines_test.go) runs a random campaign against it",
	"go build -o /tmp/offcard-engine ./cmd/offcard-engine":                                              "a build; TestEngineCampaign (proptest) runs offcard's engine behind the protocol",
	"offcard check --engine /tmp/offcard-engine":                                                        "TestEngineCampaign (proptest) runs offcard's engine behind the protocol",
	"offcard check --engine './my-engine --device 0' --cases 50 --timeout 2m --save regressions/":       "./my-engine is a placeholder",
	"offcard replay regressions/logits-123.script --engine './my-engine --device 0'":                    "placeholders",
	"offcard mutants --engine":                                                                          "minutes of work: TestEngineMutantsSchema and the mutants --engine tests",
	"OFFCARD_ENGINE_OFFER=cur_pos,kv_writes offcard mutants --engine":                                   "minutes of work: the mutants --engine CLI test restricts the offer",
	"offcard check --engine 'python3 examples/python-engine/engine.py --stdlib'":                        "TestPythonEngine runs the stdlib back end",
	"make cpp-engine && offcard check --engine './build/cpp-engine --exact'":                            "TestCppEngine (refengines_test.go) builds and runs it",
	"offcard replay examples/scripts/skip-reads-prompt-tile-padding.script --engine ./build/cpp-engine": "TestCppEngine replays it",
	"offcard conform --lib build/ttnn/liboffcard_tt_ttnn.so --junit conform.xml":                        "needs a card (TestConformLoopback runs the loopback)",
	"offcard check   --device tt --lib build/ttnn/liboffcard_tt_ttnn.so --cases 50":                     "needs a card (the card tests run the loopback)",
	"offcard mutants --device tt --lib build/ttnn/liboffcard_tt_ttnn.so":                                "needs a card",
}

// readmeCommands returns the command lines of the README's sh blocks that
// run offcard (comments cut).
func readmeCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		}
		if !in || !strings.Contains(line, "offcard") {
			continue
		}
		if c := strings.TrimSpace(cutComment(line)); c != "" {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// cutComment drops a shell comment (a # after white space, outside quotes).
func cutComment(line string) string {
	var q rune
	for i, r := range line {
		switch {
		case q != 0:
			if r == q {
				q = 0
			}
		case r == '\'' || r == '"':
			q = r
		case r == '#' && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}

// shellWords splits a command line as sh would for these examples: white
// space, single and double quotes.
func shellWords(s string) []string {
	var ws []string
	var b strings.Builder
	var q rune
	have := false
	for _, r := range s {
		switch {
		case q != 0 && r == q:
			q = 0
		case q != 0:
			b.WriteRune(r)
		case r == '\'' || r == '"':
			q, have = r, true
		case r == ' ' || r == '\t':
			if have || b.Len() > 0 {
				ws = append(ws, b.String())
				b.Reset()
				have = false
			}
		default:
			b.WriteRune(r)
		}
	}
	if have || b.Len() > 0 {
		ws = append(ws, b.String())
	}
	return ws
}

// TestReadmeCommandsRun: every `offcard` command line of the README is run
// here, in a scratch directory, and exits 0 as the README says — or is
// listed in readmeNotRun with the reason. Outputs the README writes to
// /tmp go into the scratch directory. Commands that read a file a later
// line writes run after it.
func TestReadmeCommandsRun(t *testing.T) {
	cmds := readmeCommands(t)
	dir := t.TempDir()
	t.Chdir(dir)
	var todo [][]string
	for _, c := range cmds {
		if _, ok := readmeNotRun[c]; ok {
			continue
		}
		w := shellWords(strings.ReplaceAll(c, "/tmp/", dir+"/"))
		if len(w) < 2 || w[0] != "offcard" {
			t.Errorf("README command %q: neither run here (not an offcard command) nor in readmeNotRun", c)
			continue
		}
		todo = append(todo, w[1:])
	}
	seen := map[string]bool{}
	for _, c := range cmds {
		seen[c] = true
	}
	for c := range readmeNotRun {
		if !seen[c] {
			t.Errorf("readmeNotRun names %q, which the README no longer shows", c)
		}
	}
	// Inputs: a command that reads a file no earlier command wrote waits
	// for a later one (the README shows the adjudicate example before the
	// sim run that writes its dump).
	reads := func(args []string) string {
		for i, a := range args[:len(args)-1] {
			if a == "--ours" || a == "--oracle" {
				return args[i+1]
			}
		}
		return ""
	}
	ran := 0
	for pass := 0; pass < 2 && len(todo) > 0; pass++ {
		var later [][]string
		for _, args := range todo {
			if in := reads(args); in != "" && pass == 0 {
				if _, err := os.Stat(filepath.Join(dir, in)); err != nil {
					later = append(later, args)
					continue
				}
			}
			code, out, errs := runCLI(t, args...)
			if code != 0 {
				t.Errorf("README's `offcard %s`: exit %d, want 0\n%s%s", strings.Join(args, " "), code, lastN(out, 10), errs)
			}
			ran++
		}
		todo = later
	}
	if ran < 8 {
		t.Errorf("ran %d README commands; the README's runnable examples are more", ran)
	}
}

func lastN(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n") + "\n"
}

// TestReadmeObservationTable: the README's table of what each observation
// buys names every catalog mutant (mutants --list --json), and its first
// row ("nothing else": full exact logits alone) names exactly the mutants
// whose seen_by is empty, with the count "N of M" of the catalog.
func TestReadmeObservationTable(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "|") && (len(rows) > 0 || strings.HasPrefix(l, "| you offer |")) {
			rows = append(rows, l)
		} else if len(rows) > 0 {
			break
		}
	}
	if len(rows) < 3 {
		t.Fatal("no \"| you offer |\" table in the README")
	}
	ticked := func(s string) map[string]bool {
		m := map[string]bool{}
		for i, p := range strings.Split(s, "`") {
			if i%2 == 1 {
				m[p] = true
			}
		}
		return m
	}
	table := ticked(strings.Join(rows[2:], "\n"))
	code, out, errs := runCLI(t, "mutants", "--list", "--json")
	if code != 0 {
		t.Fatalf("mutants --list --json: exit %d: %s", code, errs)
	}
	var cat []struct {
		Name   string   `json:"name"`
		SeenBy []string `json:"seen_by"`
	}
	if err := json.Unmarshal([]byte(out), &cat); err != nil {
		t.Fatal(err)
	}
	cells := strings.Split(rows[2], "|")
	if len(cells) < 4 || !strings.Contains(cells[1], "nothing else") {
		t.Fatalf("the table's first row is not the \"nothing else\" one: %s", rows[2])
	}
	first := ticked(cells[3])
	var bare []string
	for _, m := range cat {
		if !table[m.Name] {
			t.Errorf("catalog mutant %s is not in the README's observation table", m.Name)
		}
		if len(m.SeenBy) == 0 {
			bare = append(bare, m.Name)
			if !first[m.Name] {
				t.Errorf("%s needs no observation (seen_by empty) but is not in the first row", m.Name)
			}
		} else if first[m.Name] {
			t.Errorf("%s is in the first row but needs %v", m.Name, m.SeenBy)
		}
	}
	if want := fmt.Sprintf("%d of %d:", len(bare), len(cat)); !strings.Contains(cells[3], want) {
		t.Errorf("the first row does not say %q: %s", want, cells[3])
	}
	// Every whole-catalog count the README gives ("(N/N", "N of N die")
	// is the catalog's size.
	for _, m := range regexp.MustCompile(`\((\d+)/(\d+)(?: killed)?\)|(\d+) of (\d+) die`).FindAllStringSubmatch(string(data), -1) {
		for _, n := range m[1:] {
			if n != "" && n != strconv.Itoa(len(cat)) {
				t.Errorf("README says %q: the catalog has %d mutants", m[0], len(cat))
				break
			}
		}
	}
}
