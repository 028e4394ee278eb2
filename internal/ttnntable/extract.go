// Package ttnntable reads the TT_FATAL / TT_THROW checks of named C++
// functions in tt-metal's source, and compares them with the table of
// checks that package tt embeds (tt/checks.tsv), so that moving the pinned
// tt-metal commit is a reviewed diff of the checks that changed.
//
// The reader is a small lexer, not a C++ parser: it finds a function's
// definition by its qualified name followed by "(", takes the body by
// brace matching (skipping string and character literals and comments),
// and splits each TT_FATAL / TT_THROW call's arguments at top-level
// commas. The condition is the first argument with its whitespace
// collapsed; the text is the concatenation of the adjacent string
// literals of the message argument, with C escapes decoded.
package ttnntable

import (
	"fmt"
	"strconv"
	"strings"
)

// Found is one TT_FATAL or TT_THROW in a function body.
type Found struct {
	Line int    // 1-based line of the macro name
	Kind string // "TT_FATAL" or "TT_THROW"
	Cond string // TT_FATAL's condition, whitespace collapsed ("" for TT_THROW)
	Text string // the message's string literals, joined and unescaped
}

// Extract returns the checks in the body of every definition of fn in src
// (fn is matched as a whole qualified name, e.g.
// "SdpaDecodeDeviceOperation::validate_on_program_cache_miss" or
// "ExecuteEmbedding::invoke"), in source order. It is an error if fn has
// no definition in src.
func Extract(src, fn string) ([]Found, error) {
	ds, err := definitions(src, fn)
	if err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("no definition of %s", fn)
	}
	var out []Found
	for _, d := range ds {
		fs, err := d.checks(src, fn)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// definition is one definition of a function in a source file: the
// offsets of its name and of its body's braces.
type definition struct{ start, open, close int }

func (d definition) checks(src, fn string) ([]Found, error) {
	fs, err := scanChecks(src, d.open, d.close)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	return fs, nil
}

// definitions finds every definition of fn in src, in source order: fn as
// a whole name, then a parameter list, qualifiers and perhaps a trailing
// return type, then "{" before any ";" (a declaration or a call is none).
func definitions(src, fn string) ([]definition, error) {
	var out []definition
	for from := 0; ; {
		i := strings.Index(src[from:], fn)
		if i < 0 {
			return out, nil
		}
		i += from
		from = i + len(fn)
		if i > 0 && isIdent(src[i-1]) {
			continue
		}
		j := skipSpace(src, i+len(fn))
		if j >= len(src) || src[j] != '(' {
			continue
		}
		end, ok := matchClose(src, j)
		if !ok {
			continue
		}
		k := end + 1
		for k < len(src) && src[k] != '{' && src[k] != ';' && src[k] != '}' {
			k++
		}
		if k >= len(src) || src[k] != '{' {
			continue
		}
		bodyEnd, ok := matchClose(src, k)
		if !ok {
			return nil, fmt.Errorf("%s: unbalanced body", fn)
		}
		out = append(out, definition{start: i, open: k, close: bodyEnd})
		from = bodyEnd
	}
}

func isIdent(c byte) bool {
	return c == '_' || c == ':' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipLiteral returns the index just past the comment or literal starting
// at i, or i when none starts there.
func skipLiteral(s string, i int) int {
	switch {
	case strings.HasPrefix(s[i:], "//"):
		if e := strings.IndexByte(s[i:], '\n'); e >= 0 {
			return i + e
		}
		return len(s)
	case strings.HasPrefix(s[i:], "/*"):
		if e := strings.Index(s[i+2:], "*/"); e >= 0 {
			return i + 2 + e + 2
		}
		return len(s)
	case s[i] == '"' || s[i] == '\'':
		if s[i] == '\'' && i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
			return i // a digit separator
		}
		if s[i] == '"' && i > 0 && s[i-1] == 'R' {
			// Raw string R"delim(...)delim".
			p := strings.IndexByte(s[i:], '(')
			if p < 0 {
				return len(s)
			}
			closer := ")" + s[i+1:i+p] + "\""
			if e := strings.Index(s[i+p:], closer); e >= 0 {
				return i + p + e + len(closer)
			}
			return len(s)
		}
		q := s[i]
		for j := i + 1; j < len(s); j++ {
			if s[j] == '\\' {
				j++
			} else if s[j] == q {
				return j + 1
			}
		}
		return len(s)
	}
	return i
}

// matchClose returns the index of the bracket closing the one at open.
func matchClose(s string, open int) (int, bool) {
	depth := 0
	for i := open; i < len(s); {
		if j := skipLiteral(s, i); j != i {
			i = j
			continue
		}
		switch s[i] {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
			if depth == 0 {
				return i, true
			}
		}
		i++
	}
	return 0, false
}

func scanChecks(src string, from, to int) ([]Found, error) {
	var out []Found
	for i := from; i < to; {
		if j := skipLiteral(src, i); j != i {
			i = j
			continue
		}
		kind := ""
		for _, k := range []string{"TT_FATAL", "TT_THROW"} {
			if strings.HasPrefix(src[i:], k) && !isIdent(src[i-1]) && i+len(k) < len(src) && !isIdent(src[i+len(k)]) {
				kind = k
			}
		}
		if kind == "" {
			i++
			continue
		}
		p := skipSpace(src, i+len(kind))
		if p >= to || src[p] != '(' {
			i++
			continue
		}
		end, ok := matchClose(src, p)
		if !ok {
			return nil, fmt.Errorf("line %d: unbalanced %s", lineOf(src, i), kind)
		}
		args := splitArgs(src[p+1 : end])
		f := Found{Line: lineOf(src, i), Kind: kind}
		msg := 0
		if kind == "TT_FATAL" {
			if len(args) < 2 {
				return nil, fmt.Errorf("line %d: TT_FATAL without a message", f.Line)
			}
			f.Cond = collapse(args[0])
			msg = 1
		}
		if len(args) > msg {
			f.Text = literals(args[msg])
		}
		out = append(out, f)
		i = end + 1
	}
	return out, nil
}

func lineOf(s string, i int) int { return strings.Count(s[:i], "\n") + 1 }

// splitArgs splits a macro's argument list at its top-level commas.
func splitArgs(s string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); {
		if j := skipLiteral(s, i); j != i {
			i = j
			continue
		}
		switch s[i] {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
		i++
	}
	return append(out, s[start:])
}

// collapse removes comments and collapses whitespace runs to one space.
func collapse(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "//") || strings.HasPrefix(s[i:], "/*") {
			i = skipLiteral(s, i)
			b.WriteByte(' ')
			continue
		}
		if j := skipLiteral(s, i); j != i {
			b.WriteString(s[i:j])
			i = j
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// literals joins the string literals of an argument (adjacent literals
// concatenate in C++); anything else in the argument is ignored.
func literals(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		j := skipLiteral(s, i)
		if j == i {
			i++
			continue
		}
		if s[i] == '"' {
			if u, err := strconv.Unquote(s[i:j]); err == nil {
				b.WriteString(u)
			} else {
				b.WriteString(s[i+1 : j-1])
			}
		}
		i = j
	}
	return b.String()
}
