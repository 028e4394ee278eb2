// Command ttnn-table re-reads, in a tt-metal git directory at a given
// commit, the functions that package tt's checks table (tt/checks.tsv)
// lists, and prints every entry whose text, condition or line changed,
// the entries gone and the checks that are new. Exit status 0: the table
// matches that commit; 1: it does not (the changes are printed); 2: bad
// usage or unreadable source.
//
//	ttnn-table -git /path/to/tt-metal/.git [-commit REV]
//	ttnn-table -git DIR -commit REV -gen FUNCS  # rows for op/file/func lines
//	ttnn-table -git DIR -cites PATHS  # check tt-metal path:line citations
//
// With -cites, every tt-metal path:line citation in the files under the
// comma-separated PATHS (offcard's .go, .c, .h, .cpp and .md files) must
// name exactly one file of the commit, and its lines must lie inside that
// file; each bad one is printed (exit 1). make ttnn-cites runs it over
// sim, tt, tthw, qwen3, conform and the README.
//
// make ttnn-table TTMETAL=GITDIR [COMMIT=REV] runs it; no network.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/offcard/offcard/internal/ttnntable"
	"github.com/offcard/offcard/tt"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fl := flag.NewFlagSet("ttnn-table", flag.ContinueOnError)
	gitDir := fl.String("git", "", "tt-metal git directory (required)")
	commit := fl.String("commit", "", "commit to compare with (default: the table's pin)")
	gen := fl.String("gen", "", "file of op<TAB>file<TAB>func lines: print fresh table rows for them instead")
	cites := fl.String("cites", "", "comma-separated offcard files or folders: check their tt-metal path:line citations instead")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if *gitDir == "" || fl.NArg() != 0 {
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
	if *cites != "" {
		return checkCites(*gitDir, rev, strings.Split(*cites, ","))
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

func checkCites(gitDir, rev string, roots []string) int {
	tree, err := ttnntable.GitTree(gitDir, rev)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttnn-table:", err)
		return 2
	}
	var cites []ttnntable.Cite
	files := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch filepath.Ext(p) {
			case ".go", ".c", ".h", ".cpp", ".hpp", ".md", ".tsv":
			default:
				return nil
			}
			src, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files++
			cites = append(cites, ttnntable.FindCites(p, string(src))...)
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "ttnn-table:", err)
			return 2
		}
	}
	// offcard's own sources (tthw/loopback/ops.c:12) are not tt-metal's.
	own := func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}
	bad, err := ttnntable.CheckCites(cites, tree, own)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ttnn-table:", err)
		return 2
	}
	for _, b := range bad {
		fmt.Println(b)
	}
	fmt.Printf("ttnn-table: %d citations in %d files against %s: %d bad\n", len(cites), files, rev, len(bad))
	if len(bad) > 0 {
		return 1
	}
	return 0
}
