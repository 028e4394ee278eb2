// Command ttnn-table re-reads, in a tt-metal git directory at a given
// commit, the functions that package tt's checks table (tt/checks.tsv)
// lists, and prints every entry whose text, condition or line changed,
// the entries gone and the checks that are new. Exit status 0: the table
// matches that commit; 1: it does not (the changes are printed); 2: bad
// usage or unreadable source.
//
//	ttnn-table -git /path/to/tt-metal/.git [-commit REV]
//	ttnn-table -git DIR -commit REV -gen FUNCS  # rows for op/file/func lines
//
// make ttnn-table TTMETAL=GITDIR [COMMIT=REV] runs it; no network.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/offcard/offcard/internal/ttnntable"
	"github.com/offcard/offcard/tt"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("ttnn-table", flag.ContinueOnError)
	gitDir := fs.String("git", "", "tt-metal git directory (required)")
	commit := fs.String("commit", "", "commit to compare with (default: the table's pin)")
	gen := fs.String("gen", "", "file of op<TAB>file<TAB>func lines: print fresh table rows for them instead")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *gitDir == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "ttnn-table: usage: ttnn-table -git GITDIR [-commit REV] [-gen FUNCS]")
		return 2
	}
	rev := *commit
	if rev == "" {
		rev = tt.ChecksCommit()
	}
	read := ttnntable.GitSource(*gitDir, rev)
	if *gen != "" {
		return generate(*gen, read)
	}
	checks, err := tt.Checks()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttnn-table:", err)
		return 2
	}
	changes, err := ttnntable.Diff(checks, read)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttnn-table:", err)
		return 2
	}
	for _, c := range changes {
		fmt.Println(c)
	}
	fmt.Printf("ttnn-table: %d entries (pin %.8s) against %s: %d changed\n", len(checks), tt.ChecksCommit(), rev, len(changes))
	if len(changes) > 0 {
		return 1
	}
	return 0
}

func generate(path string, read ttnntable.Source) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttnn-table:", err)
		return 2
	}
	defer f.Close()
	next := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		p := strings.Split(line, "\t")
		if len(p) != 3 {
			fmt.Fprintf(os.Stderr, "ttnn-table: %s: want op<TAB>file<TAB>func: %q\n", path, line)
			return 2
		}
		src, err := read(p[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "ttnn-table:", err)
			return 2
		}
		found, err := ttnntable.ExtractFunc(src, p[2])
		if err != nil {
			fmt.Fprintf(os.Stderr, "ttnn-table: %s: %v\n", p[1], err)
			return 2
		}
		if next[p[0]] == 0 {
			next[p[0]] = 1
		}
		for _, r := range ttnntable.Rows(p[0], p[1], p[2], found, next[p[0]]) {
			fmt.Println(r)
		}
		next[p[0]] += len(found)
	}
	return 0
}
