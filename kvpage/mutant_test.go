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
// TestPoolHistories (or, for shared blocks, TestSharedHistories) must kill
// (lessons rule 2: a test that guards a bug is shown red on the bug).
// TestMutants applies each through `go test -overlay` (the tree is never
// edited) and runs the property against it. Skipped with -short; run alone
// with
//
//	go test ./kvpage -run TestMutants -v
//	KVPAGE_ALL_MUTANTS=1 go test ./kvpage -run TestMutants -v   # with the extra ones
var mutants = []struct {
	name, file, from, to string
	// test is the property that must kill it (default TestPoolHistories); a
	// trailing "*" marks a mutant run only with KVPAGE_ALL_MUTANTS=1, to keep
	// make test's cost down (each mutant is a build).
	test string
}{
	{"free-not-returned", "pool.go",
		"\tp.put(id)\n\treturn nil",
		"\tp.state[id] = stateFree\n\treturn nil", ""},
	{"free-noop", "pool.go",
		"\tp.put(id)\n\treturn nil",
		"\treturn nil", ""},
	{"grow-floor-not-ceil", "table.go",
		"need := BlocksFor(length, t.pool.blockSize) - len(t.blocks)",
		"need := length/t.pool.blockSize - len(t.blocks)", ""},
	{"grow-partial-on-exhaustion", "table.go",
		"if free := t.pool.NumFree(); need > free {",
		"if free := t.pool.NumFree(); need > free {\n\t\tfor range free {\n\t\t\tt.blocks = append(t.blocks, t.pool.take(stateTable))\n\t\t}", ""},
	{"release-keeps-length", "table.go",
		"\tt.blocks = t.blocks[:0]\n\tt.length = 0",
		"\tt.blocks = t.blocks[:0]", ""},
	{"free-ignores-table-owner", "pool.go",
		"\tcase stateTable:\n\t\treturn fmt.Errorf(\"kvpage: free of block %d: %w; release the table instead\", id, ErrOwnedByTable)\n",
		"", ""},
	{"alloc-skips-exhaustion-check", "pool.go",
		"\tif len(p.free) == 0 {\n\t\treturn 0, &ExhaustedError{NumBlocks: len(p.state), Free: 0, Need: 1}\n\t}\n\treturn p.take(stateLoose), nil",
		"\tif len(p.free) == 0 {\n\t\treturn 0, nil\n\t}\n\treturn p.take(stateLoose), nil", ""},
	// Shared blocks (share.go), killed by TestSharedHistories.
	{"cow-skipped", "share.go",
		"\t\tif t.pool.refs[t.blocks[i]] > 1 {\n\t\t\tshared = append(shared, i)",
		"\t\tif t.pool.refs[t.blocks[i]] > 1 && false {\n\t\t\tshared = append(shared, i)", "TestSharedHistories"},
	{"cow-src-not-unref", "share.go",
		"\t\tt.pool.unref(src)\n", "", "TestSharedHistories*"},
	{"unref-not-decremented", "share.go",
		"\tp.refs[id]--\n\tif p.refs[id] == 0 {", "\tif p.refs[id] == 1 {", "TestSharedHistories"},
	{"fork-no-ref", "share.go",
		"\tc := &Table{pool: t.pool, blocks: t.Blocks(), length: t.length}\n\tfor _, id := range c.blocks {\n\t\tt.pool.ref(id)",
		"\tc := &Table{pool: t.pool, blocks: t.Blocks(), length: t.length}\n\tfor _, id := range c.blocks {\n\t\t_ = id", "TestSharedHistories"},
	{"prefix-hit-rounds-down", "share.go",
		"\tn := BlocksFor(length, t.pool.blockSize)\n", "\tn := length / t.pool.blockSize\n", "TestSharedHistories*"},
	{"truncate-keeps-blocks", "share.go",
		"\tkeep := BlocksFor(length, t.pool.blockSize)\n", "\tkeep := len(t.blocks)\n", "TestSharedHistories"},
	{"cow-only-last-block", "share.go",
		"\tfirst, end := from/bs, min(BlocksFor(to, bs), len(t.blocks))",
		"\tfirst, end := max(from/bs, len(t.blocks)-1), min(BlocksFor(to, bs), len(t.blocks))", "TestSharedHistories*"},
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
			test, extra := strings.CutSuffix(m.test, "*")
			if extra && os.Getenv("KVPAGE_ALL_MUTANTS") != "1" {
				t.Skip("an extra mutant: set KVPAGE_ALL_MUTANTS=1 to run it")
			}
			if test == "" {
				test = "TestPoolHistories"
			}
			cmd := exec.Command(goBin, "test", "-count=1", "-overlay="+overlayPath,
				"-run=^"+test+"$", ".")
			cmd.Env = append(os.Environ(), "KVPAGE_SEED=") // a fresh seed each run
			out, err := cmd.CombinedOutput()
			switch {
			case err == nil:
				t.Fatalf("mutant survived %s:\n%s", test, out)
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
