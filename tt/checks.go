package tt

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// checksTSV is the table of every TT_FATAL / TT_THROW on the validate path
// of each op in this package (and of the device calls the contract names:
// the launch check every op shares, trace capture, host writes), as read
// from tt-metal's source at ChecksCommit. One row per check, tab-separated:
//
//	id  op  file  func  line  kind  cond  text  status  note
//
// file:line is the macro's line at the pin; func the definition it is in
// ("Name#k": the k-th definition of that name in the file); cond the
// condition with whitespace collapsed; text the message's string literals
// verbatim (fmt-style {} placeholders, filled by the device as ttnn fills
// them); status "covered" (package sim makes this check with this text, and
// sim's table test feeds it the offending input) or "left" (note says why).
// Tabs, newlines and backslashes inside fields are written \t, \n, \\.
//
//go:embed checks.tsv
var checksTSV string

// Check is one row of the checks table.
type Check struct {
	ID, Op, File, Func string
	Line               int
	Kind, Cond, Text   string
	Status, Note       string
}

// ChecksCommit is the tt-metal commit the table was read at (the first
// line of the file, "# commit <sha>").
func ChecksCommit() string {
	first, _, _ := strings.Cut(checksTSV, "\n")
	return strings.TrimPrefix(first, "# commit ")
}

// Checks parses the embedded table.
func Checks() ([]Check, error) { return ParseChecks(checksTSV) }

// ParseChecks parses a checks table (the format of checks.tsv).
func ParseChecks(s string) ([]Check, error) {
	var out []Check
	seen := map[string]bool{}
	for n, line := range strings.Split(s, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 10 {
			return nil, fmt.Errorf("checks line %d: %d fields, want 10", n+1, len(f))
		}
		if f[0] == "id" {
			continue // the header
		}
		for i := range f {
			f[i] = UnescapeField(f[i])
		}
		ln, err := strconv.Atoi(f[4])
		if err != nil {
			return nil, fmt.Errorf("checks line %d: line %q", n+1, f[4])
		}
		c := Check{ID: f[0], Op: f[1], File: f[2], Func: f[3], Line: ln, Kind: f[5], Cond: f[6], Text: f[7], Status: f[8], Note: f[9]}
		if seen[c.ID] {
			return nil, fmt.Errorf("checks line %d: duplicate id %s", n+1, c.ID)
		}
		seen[c.ID] = true
		if c.Status != "covered" && c.Status != "left" {
			return nil, fmt.Errorf("checks line %d: status %q", n+1, c.Status)
		}
		if c.Status == "left" && c.Note == "" {
			return nil, fmt.Errorf("checks line %d: %s left without a reason", n+1, c.ID)
		}
		out = append(out, c)
	}
	return out, nil
}

// EscapeField writes a field for the table (tab, newline, backslash).
func EscapeField(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`).Replace(s)
}

// UnescapeField is EscapeField's inverse.
func UnescapeField(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			switch s[i] {
			case 't':
				b.WriteByte('\t')
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TextPattern is a regular expression matching the text as the device
// prints it: the literal parts verbatim, each fmt placeholder ({}, {:x},
// ...) any run of characters.
func (c Check) TextPattern() *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	s := c.Text
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "{{"), strings.HasPrefix(s[i:], "}}"):
			b.WriteString(regexp.QuoteMeta(s[i : i+1])) // fmt's escaped brace
			i++
		case s[i] == '{' && strings.IndexByte(s[i:], '}') > 0:
			b.WriteString("(.*?)")
			i += strings.IndexByte(s[i:], '}')
		default:
			b.WriteString(regexp.QuoteMeta(s[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}
