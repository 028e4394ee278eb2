package ttnntable

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/offcard/offcard/tt"
)

// Source reads a file of tt-metal at the commit under review.
type Source func(path string) (string, error)

// GitSource reads files with git show REV:path from the git directory
// gitDir (a bare mirror or a work tree's .git).
func GitSource(gitDir, rev string) Source {
	return func(path string) (string, error) {
		out, err := exec.Command("git", "--git-dir", gitDir, "show", rev+":"+path).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return "", fmt.Errorf("git show %s:%s: %s", rev, path, strings.TrimSpace(string(ee.Stderr)))
			}
			return "", fmt.Errorf("git show %s:%s: %v", rev, path, err)
		}
		return string(out), nil
	}
}

// ExtractFunc extracts the checks of a table's func field: "Name" (every
// definition of Name) or "Name#k" (the k-th definition only).
func ExtractFunc(src, fn string) ([]Found, error) {
	name, k, ok := strings.Cut(fn, "#")
	if !ok {
		return Extract(src, name)
	}
	var nth int
	if _, err := fmt.Sscanf(k, "%d", &nth); err != nil || nth < 1 {
		return nil, fmt.Errorf("bad definition index in %q", fn)
	}
	return extractNth(src, name, nth)
}

func extractNth(src, name string, nth int) ([]Found, error) {
	ds, err := definitions(src, name)
	if err != nil {
		return nil, err
	}
	if nth > len(ds) {
		return nil, fmt.Errorf("no definition %d of %s", nth, name)
	}
	return ds[nth-1].checks(src, name)
}

// Change is one difference between the table and the source.
type Change struct {
	Kind  string // "text", "cond", "line", "gone", "new"
	Check tt.Check
	Found Found // the source's check (zero for "gone")
}

func (c Change) String() string {
	switch c.Kind {
	case "gone":
		return fmt.Sprintf("gone  %s %s:%d (%s) %q", c.Check.ID, c.Check.File, c.Check.Line, c.Check.Func, c.Check.Text)
	case "new":
		return fmt.Sprintf("new   %s:%d (%s) %s if !(%s): %q", c.Check.File, c.Found.Line, c.Check.Func, c.Found.Kind, c.Found.Cond, c.Found.Text)
	case "line":
		return fmt.Sprintf("line  %s %s:%d -> %d", c.Check.ID, c.Check.File, c.Check.Line, c.Found.Line)
	case "cond":
		return fmt.Sprintf("cond  %s %s:%d -> %d\n      was: %s\n      now: %s", c.Check.ID, c.Check.File, c.Check.Line, c.Found.Line, c.Check.Cond, c.Found.Cond)
	default:
		return fmt.Sprintf("text  %s %s:%d -> %d\n      was: %q\n      now: %q", c.Check.ID, c.Check.File, c.Check.Line, c.Found.Line, c.Check.Text, c.Found.Text)
	}
}

// Diff re-reads every (file, func) the table lists and reports the
// entries whose text, condition or line changed, the entries gone and the
// checks that are new, in table order.
func Diff(checks []tt.Check, read Source) ([]Change, error) {
	type key struct{ file, fn string }
	var order []key
	groups := map[key][]tt.Check{}
	for _, c := range checks {
		k := key{c.File, c.Func}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], c)
	}
	files := map[string]string{}
	var out []Change
	for _, k := range order {
		src, ok := files[k.file]
		if !ok {
			s, err := read(k.file)
			if err != nil {
				return nil, err
			}
			src, files[k.file] = s, s
		}
		found, err := ExtractFunc(src, k.fn)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k.file, err)
		}
		out = append(out, match(groups[k], found)...)
	}
	return out, nil
}

// match pairs a function's table entries with the checks found: first
// those equal in condition and text (a different line is a "line"
// change), then, in order, those equal in one of them.
func match(tab []tt.Check, found []Found) []Change {
	usedT := make([]bool, len(tab))
	usedF := make([]bool, len(found))
	res := make([]*Change, len(tab))
	pass := func(same func(tt.Check, Found) bool, kind func(tt.Check, Found) string) {
		for i, c := range tab {
			if usedT[i] {
				continue
			}
			for j, f := range found {
				if !usedF[j] && c.Kind == f.Kind && same(c, f) {
					usedT[i], usedF[j] = true, true
					if kd := kind(c, f); kd != "" {
						res[i] = &Change{Kind: kd, Check: c, Found: f}
					}
					break
				}
			}
		}
	}
	pass(func(c tt.Check, f Found) bool { return c.Cond == f.Cond && c.Text == f.Text },
		func(c tt.Check, f Found) string {
			if c.Line != f.Line {
				return "line"
			}
			return ""
		})
	pass(func(c tt.Check, f Found) bool { return c.Text == f.Text },
		func(tt.Check, Found) string { return "cond" })
	pass(func(c tt.Check, f Found) bool { return c.Cond == f.Cond },
		func(tt.Check, Found) string { return "text" })
	var out []Change
	for i, c := range tab {
		if !usedT[i] {
			out = append(out, Change{Kind: "gone", Check: c})
		} else if res[i] != nil {
			out = append(out, *res[i])
		}
	}
	for j, f := range found {
		if !usedF[j] {
			out = append(out, Change{Kind: "new", Check: tab[0], Found: f})
		}
	}
	return out
}

// Rows renders the checks found in one (file, func) as table rows with
// ids op.n (n from first), status left and note "unreviewed": the
// starting point for a new op's entries.
func Rows(op, file, fn string, found []Found, first int) []string {
	var out []string
	for i, f := range found {
		out = append(out, strings.Join([]string{
			fmt.Sprintf("%s.%d", op, first+i), op, file, fn, fmt.Sprint(f.Line), f.Kind,
			tt.EscapeField(f.Cond), tt.EscapeField(f.Text), "left", "unreviewed",
		}, "\t"))
	}
	return out
}
