package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/dlclark/regexp2/v2"
)

// onigSpace is Oniguruma's Unicode \s, written out: U+0009–U+000D, U+0085,
// and the categories Zs, Zl, Zp.
func onigSpace(r rune) bool {
	return (r >= 0x09 && r <= 0x0D) || r == 0x85 || unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp)
}

// TestSpaceClass checks, over every scalar value, that the scanner's \s and
// regexp2's \s (default options) both equal Oniguruma's set.
func TestSpaceClass(t *testing.T) {
	re := regexp2.MustCompile(`^\s$`)
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		want := onigSpace(r)
		if isOnigSpace(r) != want {
			t.Errorf("scanner \\s(%U) = %v, want %v", r, !want, want)
		}
		got, err := re.MatchString(string(r))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("regexp2 \\s(%U) = %v, want %v", r, got, want)
		}
	}
}

// splitPool holds characters of every class the pattern distinguishes,
// including the look-alikes that make engines differ.
var splitPool = []string{
	"a", "Z", "é", "ß", "中", "ア", "한", "Ω", "ſ", "K", // letters (ſ: long s, K: Kelvin)
	"s", "S", "t", "T", "r", "e", "v", "m", "l", "L", "d", "D", "E", "R", "V", "M", // contraction letters
	"0", "7", "٣", "①", "½", "Ⅻ", // numbers
	"'", "'", "'", "\u2019", ".", ",", "!", "-", "_", "$", "😀", "\u0301", "\u200d", "\ufeff", "\u00ad", // other
	" ", " ", " ", "\t", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f", // whitespace
	"\n", "\r", "\r\n", "\n", // newlines
}

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(splitPool[rng.IntN(len(splitPool))])
	}
	return b.String()
}

// TestSplitRandom compares the scanner with regexp2 on random texts.
// (regexp2 v2 case-folds U+017F ſ to s in (?i:'s) as Oniguruma does, so
// there is no exception; regexp2 v1 did not.)
func TestSplitRandom(t *testing.T) {
	re, err := regexp2.Compile(qwenPattern, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	tk := &Tokenizer{re: re}
	rng := rand.New(rand.NewPCG(1, 2))
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	for i := 0; i < iters; i++ {
		s := randomText(rng, 1+rng.IntN(24))
		fast, slow := tk.splitPieces(s, true), tk.splitPieces(s, false)
		if !slices.Equal(fast, slow) {
			t.Fatalf("split(%q):\nscanner %q\nregexp2 %q", s, fast, slow)
		}
	}
}

// TestSplitLongS pins the Oniguruma case-folding choice: "'ſ" is a
// contraction, so "'ſt" splits as "'ſ" | "t".
func TestSplitLongS(t *testing.T) {
	re := regexp2.MustCompile(qwenPattern)
	tk := &Tokenizer{re: re}
	for _, fast := range []bool{true, false} {
		if got := tk.splitPieces("'ſt", fast); !slices.Equal(got, []string{"'ſ", "t"}) {
			t.Errorf("split('ſt, fast=%v) = %q", fast, got)
		}
	}
}

func TestSplitExamples(t *testing.T) {
	tk := &Tokenizer{}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"Hello world  foo\n\n  bar   ", []string{"Hello", " world", " ", " foo", "\n\n", " ", " bar", "   "}},
		{"a\u00a0b", []string{"a", "\u00a0b"}},
		{"12345", []string{"1", "2", "3", "4", "5"}},
		{"I'LL don't", []string{"I", "'LL", " don", "'t"}},
		{" ...\n\nx", []string{" ...\n\n", "x"}},
		{"  \n  x", []string{"  \n", " ", " x"}},
		{"a \t", []string{"a", " \t"}},
		{"", nil},
	} {
		if got := tk.splitPieces(c.in, true); !slices.Equal(got, c.want) {
			t.Errorf("split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
