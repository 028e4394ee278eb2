package tokenizer

import (
	"slices"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestVectors checks Encode against ids produced by the npm tokenizer
// (testdata/gen/vectors.js), or HF's ids where that tokenizer is known to be
// wrong, and that Decode(Encode(s)) == NFC(s).
func TestVectors(t *testing.T) {
	tk := needReal(t)
	for _, v := range loadVectors(t) {
		if v.Kind == "decode" {
			if got := tk.Decode(v.IDs); got != v.Text {
				t.Errorf("Decode(%v) = %q, want %q", v.IDs, got, v.Text)
			}
			continue
		}
		got := tk.Encode(v.Text)
		if !slices.Equal(got, v.IDs) {
			t.Errorf("Encode(%q)\n got %v\nwant %v\npieces %q", v.Text, got, v.IDs, tk.PreTokenize(v.Text))
		}
		if dec, want := tk.Decode(got), norm.NFC.String(v.Text); dec != want {
			t.Errorf("Decode(Encode(%q)) = %q, want %q", v.Text, dec, want)
		}
	}
}

// TestSplitMatchesRegexp2 checks the hand-written scanner against regexp2
// running the file's pattern, on the vectors.
func TestSplitMatchesRegexp2(t *testing.T) {
	tk := needReal(t)
	if !tk.fastSplit {
		t.Fatal("Qwen3's pattern did not select the fast scanner")
	}
	for _, v := range loadVectors(t) {
		if v.Kind == "decode" {
			continue
		}
		s := norm.NFC.String(v.Text)
		fast, slow := tk.splitPieces(s, true), tk.splitPieces(s, false)
		if !slices.Equal(fast, slow) {
			t.Errorf("split(%q):\nscanner %q\nregexp2 %q", s, fast, slow)
		}
	}
}
