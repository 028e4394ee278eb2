package ttnntable

import (
	"bytes"
	"fmt"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Cite is one tt-metal path:line citation found in offcard's text: the
// path as written (a full path or a tail of one, "sdpa_decode.cpp"), its
// line ranges, and where it was found.
type Cite struct {
	Path   string
	Ranges [][2]int
	Where  string // file:line in offcard
}

func (c Cite) String() string {
	var b strings.Builder
	for i, r := range c.Ranges {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r[0]))
		if r[1] != r[0] {
			b.WriteString("-" + strconv.Itoa(r[1]))
		}
	}
	return c.Path + ":" + b.String()
}

// citeRE matches a source path with a C/C++/Python/CMake extension, a
// colon and line ranges ("a/b.cpp:12", "b.cpp:12-14, 20").
var citeRE = regexp.MustCompile(`([A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:cpp|hpp|h|cc|py|cmake|txt)):(\d+(?:-\d+)?(?:,\s*\d+(?:-\d+)?)*)`)

// commentLead is what starts a comment's continuation line.
var commentLead = regexp.MustCompile(`^[ \t]*(?://+|/?\*+|#+)?[ \t]*`)

// wrapTail is a path (or path:) that a comment line ends with and the
// next line continues: "ttnn/cpp/ttnn/operations/core/" or "op.hpp:".
var wrapTail = regexp.MustCompile(`[A-Za-z0-9_][A-Za-z0-9_./-]*(?:/|\.(?:cpp|hpp|h|cc|py):)$`)

// FindCites returns the citations in text (name is the file it came
// from). A path wrapped across comment lines ("…/core/" then
// "to_memory_config_op.cpp:257") is read whole; Where is the line the
// citation ends on.
func FindCites(name, text string) []Cite {
	var out []Cite
	carry := ""
	for i, line := range strings.Split(text, "\n") {
		body := line
		if carry != "" {
			body = carry + line[len(commentLead.FindString(line)):]
		}
		for _, m := range citeRE.FindAllStringSubmatch(body, -1) {
			c := Cite{Path: m[1], Where: fmt.Sprintf("%s:%d", name, i+1)}
			for _, r := range strings.Split(m[2], ",") {
				lo, hi, _ := strings.Cut(strings.TrimSpace(r), "-")
				a, _ := strconv.Atoi(lo)
				b := a
				if hi != "" {
					b, _ = strconv.Atoi(hi)
				}
				c.Ranges = append(c.Ranges, [2]int{a, b})
			}
			out = append(out, c)
		}
		carry = wrapTail.FindString(strings.TrimRight(body, " \t"))
	}
	return out
}

// Tree is the file list of a tt-metal commit with a way to count a file's
// lines.
type Tree struct {
	Files []string
	Lines func(path string) (int, error)
}

// GitTree lists the files of rev in gitDir.
func GitTree(gitDir, rev string) (Tree, error) {
	out, err := exec.Command("git", "--git-dir", gitDir, "ls-tree", "-r", "--name-only", rev).Output()
	if err != nil {
		return Tree{}, fmt.Errorf("git ls-tree %s: %v", rev, err)
	}
	files := strings.Split(strings.TrimSpace(string(out)), "\n")
	lines := func(p string) (int, error) {
		src, err := exec.Command("git", "--git-dir", gitDir, "show", rev+":"+p).Output()
		if err != nil {
			return 0, fmt.Errorf("git show %s:%s: %v", rev, p, err)
		}
		n := bytes.Count(src, []byte("\n"))
		if len(src) > 0 && src[len(src)-1] != '\n' {
			n++
		}
		return n, nil
	}
	return Tree{Files: files, Lines: lines}, nil
}

// CheckCites checks each citation against the tree: its path must name
// exactly one file (a full path, or a tail of one after a "/"), and each
// line range must lie inside that file. A tail that several files end
// with names the one of them that another citation in the same offcard
// file names unambiguously ("slice.cpp:181" after
// "ttnn/cpp/ttnn/operations/data_movement/slice/slice.cpp:83"). own
// reports paths that are offcard's own files (their citations are
// skipped). It returns one line per bad citation.
func CheckCites(cites []Cite, tree Tree, own func(string) bool) ([]string, error) {
	byBase := map[string][]string{}
	for _, f := range tree.Files {
		byBase[path.Base(f)] = append(byBase[path.Base(f)], f)
	}
	resolve := func(c Cite) []string {
		var hits []string
		for _, f := range byBase[path.Base(c.Path)] {
			if f == c.Path || strings.HasSuffix(f, "/"+c.Path) {
				hits = append(hits, f)
			}
		}
		return hits
	}
	named := map[string]map[string]bool{} // offcard file -> tt-metal files it names unambiguously
	for _, c := range cites {
		if hits := resolve(c); len(hits) == 1 {
			in, _, _ := strings.Cut(c.Where, ":")
			if named[in] == nil {
				named[in] = map[string]bool{}
			}
			named[in][hits[0]] = true
		}
	}
	counts := map[string]int{}
	var bad []string
	for _, c := range cites {
		if own(c.Path) {
			continue
		}
		hits := resolve(c)
		if len(hits) > 1 {
			in, _, _ := strings.Cut(c.Where, ":")
			var ctx []string
			for _, h := range hits {
				if named[in][h] {
					ctx = append(ctx, h)
				}
			}
			if len(ctx) == 1 {
				hits = ctx
			}
		}
		switch len(hits) {
		case 0:
			bad = append(bad, fmt.Sprintf("%s: %s: no such file at the commit", c.Where, c))
			continue
		case 1:
		default:
			sort.Strings(hits)
			bad = append(bad, fmt.Sprintf("%s: %s: ambiguous, %d files end so (%s)", c.Where, c, len(hits), strings.Join(hits, ", ")))
			continue
		}
		n, ok := counts[hits[0]]
		if !ok {
			var err error
			if n, err = tree.Lines(hits[0]); err != nil {
				return nil, err
			}
			counts[hits[0]] = n
		}
		for _, r := range c.Ranges {
			if r[0] < 1 || r[1] < r[0] || r[1] > n {
				bad = append(bad, fmt.Sprintf("%s: %s: lines %d-%d outside %s's %d lines", c.Where, c, r[0], r[1], hits[0], n))
				break
			}
		}
	}
	return bad, nil
}
