package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// miniJSON builds a small byte-level BPE tokenizer.json. vocab holds the 256
// byte tokens plus extra; merges and the other parts can be overridden.
func miniJSON(mod func(m map[string]string)) []byte {
	var vocab []string
	for b := 0; b < 256; b++ {
		vocab = append(vocab, fmt.Sprintf("%q: %d", string(byteToRune[b]), b))
	}
	vocab = append(vocab, `"he": 256`, `"ll": 257`, `"hell": 258`, `"Ġw": 259`)
	parts := map[string]string{
		"added_tokens":   `[{"id": 260, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}]`,
		"normalizer":     `{"type": "NFC"}`,
		"pre_tokenizer":  `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "` + strings.ReplaceAll(qwenPattern, `\`, `\\`) + `"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]}`,
		"post_processor": `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`,
		"decoder":        `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`,
		"model_type":     `"BPE"`,
		"vocab":          "{" + strings.Join(vocab, ", ") + "}",
		"merges":         `[["h", "e"], ["l", "l"], ["he", "ll"], ["Ġ", "w"]]`,
	}
	if mod != nil {
		mod(parts)
	}
	model := `{"type": ` + parts["model_type"] + `, "dropout": null, "unk_token": null, "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": ` + parts["vocab"] + `, "merges": ` + parts["merges"] + `}`
	if m, ok := parts["model"]; ok {
		model = m
	}
	return []byte(`{"version": "1.0", "truncation": null, "padding": null, "added_tokens": ` + parts["added_tokens"] +
		`, "normalizer": ` + parts["normalizer"] + `, "pre_tokenizer": ` + parts["pre_tokenizer"] +
		`, "post_processor": ` + parts["post_processor"] + `, "decoder": ` + parts["decoder"] + `, "model": ` + model + `}`)
}

func TestMini(t *testing.T) {
	tk, err := Parse(miniJSON(nil))
	if err != nil {
		t.Fatal(err)
	}
	b := func(c byte) int32 { return tk.byteID[c] }
	for _, c := range []struct {
		in   string
		want []int32
	}{
		{"hello", []int32{258, b('o')}},
		{"hello world<|end|>", []int32{258, b('o'), 259, b('o'), b('r'), b('l'), b('d'), 260}},
		{"", []int32{}},
	} {
		if got := tk.Encode(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
		if got := tk.Decode(c.want); got != c.in {
			t.Errorf("Decode(%v) = %q, want %q", c.want, got, c.in)
		}
	}
	// The string form of merges is accepted too.
	tk2, err := Parse(miniJSON(func(m map[string]string) { m["merges"] = `["h e", "l l", "he ll", "Ġ w"]` }))
	if err != nil {
		t.Fatal(err)
	}
	if got := tk2.Encode("hello"); !slices.Equal(got, []int32{258, b('o')}) {
		t.Errorf("string merges: Encode(hello) = %v", got)
	}
	// Unknown ids are skipped by Decode.
	if got := tk.Decode([]int32{-1, 256, 99999, 257}); got != "hell" {
		t.Errorf("Decode with unknown ids = %q", got)
	}
}

// TestAddedTokenFlags exercises lstrip, rstrip, single_word and normalized on
// a mini tokenizer (Qwen3's file sets none of them).
func TestAddedTokenFlags(t *testing.T) {
	tk, err := Parse(miniJSON(func(m map[string]string) {
		m["added_tokens"] = `[
			{"id": 260, "content": "<L>", "lstrip": true, "normalized": false, "special": true},
			{"id": 261, "content": "<R>", "rstrip": true, "normalized": false, "special": false},
			{"id": 262, "content": "word", "single_word": true, "normalized": false, "special": false},
			{"id": 263, "content": "é", "normalized": true, "special": false},
			{"id": 264, "content": "<LL>", "normalized": false, "special": false}]`
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"a  <L>b", []string{"a", "  <L>", "b"}},
		{"a<R>  b", []string{"a", "<R>  ", "b"}},
		{"a word b", []string{"a", " ", "word", " b"}},
		{"swordfish", []string{"swordfish"}},
		{"e\u0301!", []string{"é", "!"}}, // matched after NFC
		{"<LL>", []string{"<LL>"}},       // longest match
	} {
		if got := tk.PreTokenize(c.in); !slices.Equal(got, c.want) {
			t.Errorf("PreTokenize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if !tk.IsSpecial(260) || tk.IsSpecial(261) {
		t.Error("IsSpecial wrong")
	}
}

func TestBadJSON(t *testing.T) {
	cases := []struct {
		name string
		doc  []byte
		want string // substring of the error
	}{
		{"not json", []byte("{not json"), "not valid JSON"},
		{"empty", []byte(""), "JSON"},
		{"array", []byte("[1,2]"), "malformed"},
		{"no model", []byte(`{"version": "1.0"}`), `no "model"`},
		{"wordpiece", miniJSON(func(m map[string]string) { m["model_type"] = `"WordPiece"` }), `"WordPiece"; only "BPE"`},
		{"unigram", miniJSON(func(m map[string]string) { m["model"] = `{"type": "Unigram", "vocab": [["a", 0.0]]}` }), `"Unigram"`},
		{"no vocab", miniJSON(func(m map[string]string) { m["vocab"] = `{}` }), "vocab is missing"},
		{"vocab wrong type", miniJSON(func(m map[string]string) { m["vocab"] = `["a"]` }), "malformed"},
		{"merge unknown left", miniJSON(func(m map[string]string) { m["merges"] = `[["zz", "e"]]` }), `unknown token "zz"`},
		{"merge unknown right", miniJSON(func(m map[string]string) { m["merges"] = `[["h", "qq"]]` }), `unknown token "qq"`},
		{"merge result unknown", miniJSON(func(m map[string]string) { m["merges"] = `[["a", "b"]]` }), `produces "ab"`},
		{"merge triple", miniJSON(func(m map[string]string) { m["merges"] = `[["h", "e", "l"]]` }), "3 elements"},
		{"merge string bad", miniJSON(func(m map[string]string) { m["merges"] = `["hel"]` }), "two space-separated"},
		{"merges wrong type", miniJSON(func(m map[string]string) { m["merges"] = `{"a": 1}` }), "neither"},
		{"missing byte token", miniJSON(func(m map[string]string) { m["vocab"] = `{"a": 0}`; m["merges"] = `[]` }), "lacks the byte-level token"},
		{"no pre_tokenizer", miniJSON(func(m map[string]string) { m["pre_tokenizer"] = `null` }), "pre_tokenizer is missing"},
		{"no regex", miniJSON(func(m map[string]string) {
			m["pre_tokenizer"] = `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]}`
		}), "no pattern.Regex"},
		{"bad regex", miniJSON(func(m map[string]string) {
			m["pre_tokenizer"] = `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]}`
		}), "does not compile"},
		{"whitespace pretok", miniJSON(func(m map[string]string) { m["pre_tokenizer"] = `{"type": "Whitespace"}` }), `"Whitespace" is not supported`},
		{"removed behavior", miniJSON(func(m map[string]string) {
			m["pre_tokenizer"] = `{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Removed", "invert": false}, {"type": "ByteLevel", "use_regex": false}]}`
		}), `behavior "Removed"`},
		{"nfkc", miniJSON(func(m map[string]string) { m["normalizer"] = `{"type": "NFKC"}` }), `normalizer type "NFKC"`},
		{"no decoder", miniJSON(func(m map[string]string) { m["decoder"] = `null` }), "decoder is missing"},
		{"template post", miniJSON(func(m map[string]string) { m["post_processor"] = `{"type": "TemplateProcessing"}` }), `"TemplateProcessing"`},
		{"added no id", miniJSON(func(m map[string]string) { m["added_tokens"] = `[{"content": "<x>"}]` }), "has no id"},
		{"dropout", miniJSON(func(m map[string]string) {
			m["model"] = `{"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []}`
		}), "dropout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk, err := Parse(c.doc)
			if err == nil {
				t.Fatalf("Parse succeeded (%p), want error containing %q", tk, c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "tokenizer: ") {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
	if _, err := Load("testdata/does-not-exist.json"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}

func TestLossyUTF8(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"abc", "abc"},
		{"a\xe2\x82b", "a\ufffdb"},
		{"\xe2\x82", "\ufffd"},
		{"\xf0\x9f\x98", "\ufffd"},
		{"\xc0\x80", "\ufffd\ufffd"},
		{"\xed\xa0\x80", "\ufffd\ufffd\ufffd"},
		{"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"},
		{"\xe0\x80\x80", "\ufffd\ufffd\ufffd"},
		{"\xf1\x80\x80\xe1\x80\xc2a", "\ufffd\ufffd\ufffda"},
		{"\xff", "\ufffd"},
	} {
		if got := string(appendLossyUTF8(nil, []byte(c.in))); got != c.want {
			t.Errorf("lossy(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRealBasics(t *testing.T) {
	tk := needReal(t)
	if tk.VocabSize() != 151669 {
		t.Errorf("VocabSize = %d, want 151669", tk.VocabSize())
	}
	for s, want := range map[string]int32{"<|im_end|>": 151645, "<think>": 151667, "<|endoftext|>": 151643, " world": 1879, "Hello": 9707} {
		if id, ok := tk.TokenID(s); !ok || id != want {
			t.Errorf("TokenID(%q) = %d, %v; want %d", s, id, ok, want)
		}
	}
	if !tk.IsSpecial(151645) || tk.IsSpecial(151667) || tk.IsSpecial(9707) {
		t.Error("IsSpecial wrong")
	}
	// Invalid UTF-8 input: each bad byte becomes U+FFFD.
	if got, want := tk.Encode("a\xffb"), tk.Encode("a\ufffdb"); !slices.Equal(got, want) {
		t.Errorf("Encode(a\\xffb) = %v, want %v", got, want)
	}
	// Chat example from the notes.
	want := []int32{151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271}
	if got := tk.Encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"); !slices.Equal(got, want) {
		t.Errorf("chat prompt = %v, want %v", got, want)
	}
	// A long piece (no cache, long BPE) round-trips.
	long := strings.Repeat("ab", 5000) + strings.Repeat(" ", 3000) + strings.Repeat("7", 100)
	if got := tk.Decode(tk.Encode(long)); got != long {
		t.Error("long text does not round-trip")
	}
}

// TestConcurrent encodes from several goroutines at once (run with -race).
func TestConcurrent(t *testing.T) {
	tk := needReal(t)
	vs := loadVectors(t)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				for k := range vs {
					v := vs[(k+g*37)%len(vs)]
					if v.Kind == "decode" {
						continue
					}
					if got := tk.Encode(v.Text); !slices.Equal(got, v.IDs) {
						select {
						case errs <- fmt.Sprintf("goroutine %d: Encode(%q) = %v", g, v.Text, got):
						default:
						}
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// FuzzEncode: Encode never panics, and for valid UTF-8,
// Decode(Encode(s)) == NFC(s) (NFC applied between added tokens, as Encode
// does; for text without added tokens that is NFC(s)).
func FuzzEncode(f *testing.F) {
	tk := needReal(f)
	for _, v := range loadVectors(f) {
		if v.Kind == "" {
			f.Add(v.Text)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tk.Encode(s)
		if !utf8.ValidString(s) {
			return
		}
		got := tk.Decode(ids)
		var want strings.Builder
		tk.rawMatcher.split(s, func(seg string, at *addedToken) {
			if at != nil {
				want.WriteString(seg)
			} else {
				want.WriteString(norm.NFC.String(seg))
			}
		})
		if got != want.String() {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q (ids %v)", s, got, want.String(), ids)
		}
	})
}
