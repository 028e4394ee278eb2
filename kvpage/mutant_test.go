package kvpage

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Mutants of this package: each is a one-idea source edit that
// TestPoolHistories must kill (lessons rule 2: a test that guards a bug is
// shown red on the bug). TestMutants applies each through `go test -overlay`
// (the tree is never edited) and runs TestPoolHistories against it.
// Skipped with -short; run alone with
//
//	go test ./kvpage -run TestMutants -v
var mutants = []struct {
	name, file, from, to string
}{
	{"free-not-returned", "pool.go",
		"\tp.put(id)\n\treturn nil",
		"\tp.state[id] = stateFree\n\treturn nil"},
	{"free-noop", "pool.go",
		"\tp.put(id)\n\treturn nil",
		"\treturn nil"},
	{"grow-floor-not-ceil", "table.go",
		"need := BlocksFor(length, t.pool.blockSize) - len(t.blocks)",
		"need := length/t.pool.blockSize - len(t.blocks)"},
	{"grow-partial-on-exhaustion", "table.go",
		"if free := t.pool.NumFree(); need > free {",
		"if free := t.pool.NumFree(); need > free {\n\t\tfor range free {\n\t\t\tt.blocks = append(t.blocks, t.pool.take(stateTable))\n\t\t}"},
	{"release-keeps-length", "table.go",
		"\tt.blocks = t.blocks[:0]\n\tt.length = 0",
		"\tt.blocks = t.blocks[:0]"},
	{"free-ignores-table-owner", "pool.go",
		"\tcase stateTable:\n\t\treturn fmt.Errorf(\"kvpage: free of block %d: %w; release the table instead\", id, ErrOwnedByTable)\n",
		""},
	{"alloc-skips-exhaustion-check", "pool.go",
		"\tif len(p.free) == 0 {\n\t\treturn 0, &ExhaustedError{NumBlocks: len(p.state), Free: 0, Need: 1}\n\t}\n\treturn p.take(stateLoose), nil",
		"\tif len(p.free) == 0 {\n\t\treturn 0, nil\n\t}\n\treturn p.take(stateLoose), nil"},
}

func TestMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("mutants build the package once each; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(m.file)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), m.from); n != 1 {
				t.Fatalf("mutant anchor found %d times in %s (the source moved; update the mutant)", n, m.file)
			}
			dir := t.TempDir()
			mutated := filepath.Join(dir, m.file)
			if err := os.WriteFile(mutated, []byte(strings.Replace(string(src), m.from, m.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			abs, err := filepath.Abs(m.file)
			if err != nil {
				t.Fatal(err)
			}
			overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: mutated}})
			overlayPath := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goBin, "test", "-count=1", "-overlay="+overlayPath,
				"-run=^TestPoolHistories$", ".")
			cmd.Env = append(os.Environ(), "KVPAGE_SEED=") // a fresh seed each run
			out, err := cmd.CombinedOutput()
			switch {
			case err == nil:
				t.Fatalf("mutant survived TestPoolHistories:\n%s", out)
			case !strings.Contains(string(out), "failed with initial seed"):
				t.Fatalf("mutant did not fail through the property (build error?):\n%s", out)
			}
			t.Logf("killed:\n%s", lastLines(string(out), 12))
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
