package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// qwenPattern is the Split regex of Qwen2/Qwen2.5/Qwen3 tokenizer.json, as
// the regex engine sees it (single backslashes). When the file's pattern is
// exactly this string, Encode uses splitQwen, a hand-written scanner with the
// same semantics; any other pattern runs through regexp2. The tests check the
// two agree.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Character classes of the scanner.
const (
	clsOther   = iota // none of the below
	clsLetter         // \p{L}
	clsNumber         // \p{N}
	clsSpace          // \s other than \r, \n
	clsNewline        // \r or \n
)

// asciiClass is the class of each ASCII byte.
var asciiClass [128]uint8

func init() {
	for b := 0; b < 128; b++ {
		asciiClass[b] = runeClass(rune(b))
	}
}

// isOnigSpace reports Oniguruma's Unicode \s: U+0009–U+000D, U+0085 and the
// categories Zs, Zl, Zp. (That equals Unicode White_Space, and Go's
// unicode.IsSpace.)
func isOnigSpace(r rune) bool {
	return unicode.IsSpace(r)
}

func runeClass(r rune) uint8 {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case isOnigSpace(r):
		return clsSpace
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	}
	return clsOther
}

// classAt returns the class and byte size of the rune at s[i].
func classAt(s string, i int) (uint8, int) {
	c := s[i]
	if c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return runeClass(r), n
}

// contractionLen returns the length of a (?i:'s|'t|'re|'ve|'m|'ll|'d) match
// at s[i] (s[i] == '\”), or 0. Case folding follows Oniguruma's Unicode
// folding, in which U+017F LATIN SMALL LETTER LONG S folds to 's' (no other
// non-ASCII character folds to one of these letters).
func contractionLen(s string, i int) int {
	rest := s[i+1:]
	if len(rest) == 0 {
		return 0
	}
	lower := func(c byte) byte { return c | 0x20 }
	switch lower(rest[0]) {
	case 's', 't', 'm', 'd':
		return 2
	case 'r':
		if len(rest) >= 2 && lower(rest[1]) == 'e' {
			return 3
		}
	case 'v':
		if len(rest) >= 2 && lower(rest[1]) == 'e' {
			return 3
		}
	case 'l':
		if len(rest) >= 2 && lower(rest[1]) == 'l' {
			return 3
		}
	}
	if len(rest) >= 2 && rest[0] == 0xC5 && rest[1] == 0xBF { // ſ
		return 3
	}
	return 0
}

// splitQwen returns the end of the pre-token starting at s[i], following the
// alternatives of qwenPattern in order (leftmost-first, with backtracking):
//
//  1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
//  2. [^\r\n\p{L}\p{N}]?\p{L}+
//  3. \p{N}
//  4. ' '?[^\s\p{L}\p{N}]+[\r\n]*
//  5. \s*[\r\n]+
//  6. \s+(?!\S)
//  7. \s+
//
// Every character is a letter, number, whitespace or other, so some
// alternative always matches and the pieces cover s.
func splitQwen(s string, i int) int {
	c0, n0 := classAt(s, i)
	j := i + n0
	// 1. Contractions. The lower-casing trick above only applies to ASCII
	// letters; contractionLen checks exact letters so punctuation such as
	// '3' | 0x20 cannot alias.
	if s[i] == '\'' {
		if k := contractionLen(s, i); k > 0 && validContraction(s[i+1:i+k]) {
			return i + k
		}
	}
	// 2. Optional non-letter/number/newline prefix, then letters.
	if c0 == clsLetter {
		return letterRun(s, j)
	}
	if c0 != clsNumber && c0 != clsNewline && j < len(s) {
		if c1, n1 := classAt(s, j); c1 == clsLetter {
			return letterRun(s, j+n1)
		}
	}
	// 3. One number.
	if c0 == clsNumber {
		return j
	}
	// 4. Optional space, then others, then newlines.
	k := i
	if s[i] == ' ' && j < len(s) {
		if c1, _ := classAt(s, j); c1 == clsOther {
			k = j
		}
	}
	if c, n := classAt(s, k); c == clsOther {
		k += n
		for k < len(s) {
			c, n := classAt(s, k)
			if c != clsOther {
				break
			}
			k += n
		}
		for k < len(s) && (s[k] == '\r' || s[k] == '\n') {
			k++
		}
		return k
	}
	// Here s[i] is whitespace. Find the run and its last newline.
	end, lastNL, runes, lastStart := i, -1, 0, i
	for end < len(s) {
		c, n := classAt(s, end)
		if c != clsSpace && c != clsNewline {
			break
		}
		if c == clsNewline {
			lastNL = end
		}
		lastStart = end
		end += n
		runes++
	}
	// 5. \s*[\r\n]+: up to and including the run's last newline.
	if lastNL >= 0 {
		return lastNL + 1
	}
	// 6. \s+(?!\S): the whole run at end of text, else all but its last
	// character when that leaves at least one.
	if end == len(s) {
		return end
	}
	if runes >= 2 {
		return lastStart
	}
	// 7. \s+ (a single whitespace character before a non-space).
	return end
}

// validContraction checks the letters after the apostrophe exactly
// (ASCII case-insensitive, or ſ for s).
func validContraction(t string) bool {
	switch t {
	case "s", "S", "t", "T", "m", "M", "d", "D", "ſ",
		"re", "rE", "Re", "RE", "ve", "vE", "Ve", "VE", "ll", "lL", "Ll", "LL":
		return true
	}
	return false
}

func letterRun(s string, k int) int {
	for k < len(s) {
		c, n := classAt(s, k)
		if c != clsLetter {
			break
		}
		k += n
	}
	return k
}
