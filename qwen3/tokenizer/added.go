package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	id                                              int32
	content                                         string
	singleWord, lstrip, rstrip, normalized, special bool
}

// addedMatcher finds added tokens in text with leftmost-longest semantics,
// like the Aho-Corasick automaton (MatchKind::LeftmostLongest) HF builds. A
// handful of literal strings is expected, so candidates are indexed by their
// first byte and tried longest first.
type addedMatcher struct {
	first [256][]addedPattern
	any   bool
}

type addedPattern struct {
	text string // what is matched (normalized content for normalized tokens)
	tok  *addedToken
}

func newAddedMatcher(toks []*addedToken, normalize func(string) string) *addedMatcher {
	m := &addedMatcher{}
	for _, at := range toks {
		text := at.content
		if normalize != nil {
			text = normalize(text)
		}
		if text == "" {
			continue
		}
		m.first[text[0]] = append(m.first[text[0]], addedPattern{text, at})
		m.any = true
	}
	for i := range m.first {
		sort.SliceStable(m.first[i], func(a, b int) bool {
			return len(m.first[i][a].text) > len(m.first[i][b].text)
		})
	}
	return m
}

// longestAt returns the longest pattern that s[i:] starts with.
func (m *addedMatcher) longestAt(s string, i int) (addedPattern, bool) {
	for _, p := range m.first[s[i]] {
		if strings.HasPrefix(s[i:], p.text) {
			return p, true
		}
	}
	return addedPattern{}, false
}

// find returns the next added-token match in s, searching from byte i, for
// a scan whose text so far ends at startOffset: the token's span [start,
// stop) after lstrip/rstrip, where to resume searching, and the token (nil
// when there is none). It follows HF's AddedVocabulary::find_matches:
// non-overlapping leftmost-longest matches; a single_word match glued to a
// word character is discarded; lstrip/rstrip swallow adjacent whitespace.
func (m *addedMatcher) find(s string, i, startOffset int) (start, stop, next int, tok *addedToken) {
	if !m.any {
		return 0, 0, len(s), nil
	}
	for i < len(s) {
		if m.first[s[i]] == nil {
			i++
			continue
		}
		p, ok := m.longestAt(s, i)
		if !ok {
			i++
			continue
		}
		start, stop = i, i+len(p.text)
		i = stop
		at := p.tok
		if at.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if at.lstrip {
			start = max(leftmostSpaceAtEnd(s[:start]), startOffset)
		}
		if at.rstrip {
			stop += rightmostSpaceAtStart(s[stop:])
			i = stop // never match inside the swallowed whitespace
		}
		return start, stop, i, at
	}
	return 0, 0, len(s), nil
}

// split calls emit for each piece of s in order: plain text (tok == nil) or
// an added token's span (see find).
func (m *addedMatcher) split(s string, emit func(text string, tok *addedToken)) {
	pos, search := 0, 0
	for {
		start, stop, next, at := m.find(s, search, pos)
		if at == nil {
			break
		}
		if pos < start {
			emit(s[pos:start], nil)
		}
		emit(s[start:stop], at)
		pos, search = stop, next
	}
	if pos < len(s) {
		emit(s[pos:], nil)
	}
}

// isWordRune approximates the Rust regex crate's Unicode \w (letters, marks,
// decimal digits, connector punctuation, join controls).
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}

// leftmostSpaceAtEnd returns where the trailing whitespace of s starts.
func leftmostSpaceAtEnd(s string) int {
	i := len(s)
	for i > 0 {
		r, n := utf8.DecodeLastRuneInString(s[:i])
		if !unicode.IsSpace(r) {
			break
		}
		i -= n
	}
	return i
}

// rightmostSpaceAtStart returns the length of the leading whitespace of s.
func rightmostSpaceAtStart(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}
