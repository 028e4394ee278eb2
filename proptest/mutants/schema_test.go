package mutants

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A schema build runs the unmutated program with the switch unset and
// exactly one mutant's edits with it set: methods with variadic
// parameters, named results, functions without results, one mutant
// editing two functions, two mutants editing one function; an edit
// outside any function body is left to its own build.
func TestSchemaSwitches(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program; skipped with -short")
	}
	dir := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
	}
	write("go.mod", "module example.com/schema\n\ngo 1.22\n")
	write("p/p.go", `package p

type T struct{ N int }

func (t *T) Add(xs ...int) int {
	s := t.N
	for _, x := range xs {
		s += x
	}
	return s
}

func Twice(x int) (y int) {
	y = 2 * x
	return
}

func Note(s *[]string, x string) {
	*s = append(*s, x)
}

var K = 3
`)
	write("main.go", `package main

import (
	"fmt"

	"example.com/schema/p"
)

func main() {
	var notes []string
	p.Note(&notes, "x")
	fmt.Println((&p.T{N: 1}).Add(1, 2), p.Twice(5), notes, p.K)
}
`)
	ms := []Mutant{
		{Name: "a", Edits: []Edit{{File: "p/p.go", Old: "s += x", New: "s -= x"}}},
		{Name: "b", Edits: []Edit{{File: "p/p.go", Old: "2 * x", New: "3 * x"}, {File: "p/p.go", Old: "append(*s, x)", New: "append(*s, x, x)"}}},
		{Name: "c", Edits: []Edit{{File: "p/p.go", Old: "s := t.N", New: "s := t.N + 100"}}},
		{Name: "d", Edits: []Edit{{File: "p/p.go", Old: "var K = 3", New: "var K = 4"}}},
		// Adds a declaration and edits through an anchor that starts in
		// the signature: both fold.
		{Name: "e", Edits: []Edit{
			{File: "p/p.go", Old: "var K = 3\n", New: "var K = 3\n\nvar extra = 7\n"},
			{File: "p/p.go", Old: "func Twice(x int) (y int) {\n\ty = 2 * x", New: "func Twice(x int) (y int) {\n\ty = 2*x + extra"},
		}},
	}
	s, err := BuildSchema(dir, ms)
	require.NoError(t, err)
	require.Len(t, s.Folded, 4)
	require.Len(t, s.Rest, 1)
	require.Equal(t, "d", s.Rest[0].Name)
	require.Contains(t, s.Why["d"], "outside every function body")

	ov, err := s.Overlay(dir, t.TempDir())
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "schema"+exeSuffix())
	build := exec.Command(goCommand(Config{}), "build", "-overlay", ov, "-o", bin, ".")
	build.Dir = dir
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, tc := range []struct{ mutant, want string }{
		{"", "4 10 [x] 3"},
		{"a", "-2 10 [x] 3"},
		{"b", "4 15 [x x] 3"},
		{"c", "104 10 [x] 3"},
		{"d", "4 10 [x] 3"}, // not folded: the schema runs it unmutated
		{"e", "4 17 [x] 3"},
		{"no-such-mutant", "4 10 [x] 3"},
	} {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), SwitchEnv+"="+tc.mutant)
		got, err := cmd.Output()
		require.NoError(t, err)
		require.Equal(t, tc.want, strings.TrimSpace(string(got)), "mutant %q", tc.mutant)
	}
}

// The catalog folds into one schema build but for the mutants whose edits
// lie outside a function body (or in a signature).
func TestCatalogSchema(t *testing.T) {
	s, err := BuildSchema(root(t), Catalog)
	require.NoError(t, err)
	require.Equal(t, len(Catalog), len(s.Folded)+len(s.Rest))
	require.GreaterOrEqual(t, len(s.Folded), len(Catalog)-4, "most of the catalog should fold: %v", s.Why)
}

// Engine mutants fold too: the schema build of offcard-engine (over the
// whole catalog, as TestCatalogKilled's, so its packages come from the
// build cache) runs under an unmutated checker, and the switch reaches the
// engine process through the environment `offcard check --engine` passes
// on.
func TestEngineMutantsSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("builds offcard and offcard-engine; skipped with -short")
	}
	r := root(t)
	c := Config{Root: r, Cases: 10, Engine: true, Checker: filepath.Join(t.TempDir(), "offcard"+exeSuffix())}
	build := exec.Command(goCommand(c), "build", "-o", c.Checker, "./cmd/offcard")
	build.Dir = r
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	s, err := BuildSchema(r, Catalog)
	require.NoError(t, err)
	sb := buildSchema(context.Background(), c, s)
	defer sb.cleanup()
	require.NoError(t, sb.err)
	// token-rewritten-in-replay: only protocol version 2's regime and
	// host_writes show it.
	for _, n := range []string{"reseed-off-by-one", "rope-not-advanced", "token-rewritten-in-replay"} {
		m, ok := ByName(n)
		require.True(t, ok, n)
		res := sb.check(context.Background(), c, m)
		require.Equal(t, Killed, res.Status, "%s: %s", n, res.Summary())
		require.True(t, res.Schema)
	}
}
