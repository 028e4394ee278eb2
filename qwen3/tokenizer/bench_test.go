package tokenizer

import (
	"encoding/binary"
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

var corpusOut = flag.String("corpus-out", "", "TestWriteCorpus: write the benchmark corpus to this path and its Go ids to path+\".ids\" (int32 little-endian)")

// Building blocks of the benchmark corpus.
var (
	proseWords = strings.Fields(`the of and to in is that for it as was with be by on not he I this are or his
		from at which but have an they you were her she there been one all we their has would when if so no
		what up out can more about into than them time only could new some these two may first then do any
		like my now over such our man me even most made after also did many before must through back years
		where much your way well down should because each just those people Mr how too little state good very
		make world still own see men work long get here between both life being under never day same another
		know while last might us great old year off come since against go came right used take three tokenizer
		Transformer attention gradient embedding don't it's we'll they're I've you'd She'll HE'S`)
	codeLines = []string{
		"func (t *Tokenizer) Encode(text string) []int32 {",
		"\tfor i := 0; i < len(s); i++ {",
		"\t\tif err != nil {\n\t\t\treturn nil, fmt.Errorf(\"load: %w\", err)\n\t\t}",
		"def forward(self, x: torch.Tensor) -> torch.Tensor:",
		"    return self.norm(x + self.attn(x, mask=None))",
		"const result = items.filter((x) => x.id !== 0).map(x => x.value * 2);",
		"SELECT id, name FROM users WHERE created_at > '2024-01-01' ORDER BY id;",
		"#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
		"    }\n}\n",
		"// TODO(someone): handle the edge case where len(buf) == 0",
		"<div class=\"container\"><span id='x'>&nbsp;</span></div>",
		"{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
	}
	cjk = []string{"你好，世界！", "机器学习模型的推理速度", "日本語のテキストです。", "カタカナとひらがな", "한국어 문장입니다.",
		"自然语言处理", "東京都", "大规模语言模型（LLM）", "这是一个测试。"}
	emoji = []string{"😀", "🚀", "✨", "👍🏽", "❤️", "👨‍👩‍👧‍👦", "🇯🇵", "🏳️‍🌈", "🤖", "🎉🎉"}
	other = []string{"Привет, мир!", "Ελληνικά", "مرحبا", "Ünïcödé", "café", "naïve", "e\u0301", "Å", "Straße", "\u00a0", "\u3000", "—", "…", "€12,50"}
	seps  = []string{" ", " ", " ", " ", ", ", ". ", "\n", "  ", "\t", "\n\n", "\r\n", "   ", "! ", "? ", ": "}
)

// benchCorpus returns a deterministic mixed corpus of at least n bytes:
// English-like prose, code, CJK, emoji, numbers and other scripts.
func benchCorpus(n int) string {
	rng := rand.New(rand.NewPCG(2026, 5))
	var b strings.Builder
	b.Grow(n + 256)
	for b.Len() < n {
		switch k := rng.IntN(100); {
		case k < 55:
			w := proseWords[rng.IntN(len(proseWords))]
			if rng.IntN(8) == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
		case k < 67:
			b.WriteString(codeLines[rng.IntN(len(codeLines))])
			b.WriteString("\n")
		case k < 77:
			b.WriteString(cjk[rng.IntN(len(cjk))])
		case k < 81:
			b.WriteString(emoji[rng.IntN(len(emoji))])
		case k < 90:
			switch rng.IntN(3) {
			case 0:
				b.WriteString(strconv.Itoa(rng.IntN(1000000)))
			case 1:
				b.WriteString(strconv.FormatFloat(rng.Float64()*1000, 'f', 3, 64))
			default:
				b.WriteString("2024-" + strconv.Itoa(1+rng.IntN(12)) + "-" + strconv.Itoa(1+rng.IntN(28)))
			}
		default:
			b.WriteString(other[rng.IntN(len(other))])
		}
		b.WriteString(seps[rng.IntN(len(seps))])
	}
	return b.String()
}

const benchCorpusSize = 1 << 20 // 1 MiB

// TestWriteCorpus writes the benchmark corpus and Go's ids for it, for
// testdata/gen/bench.js:
//
//	go test -run TestWriteCorpus -corpus-out=testdata/corpus.txt .
func TestWriteCorpus(t *testing.T) {
	if *corpusOut == "" {
		t.Skip("set -corpus-out to write the corpus")
	}
	tk := needReal(t)
	corpus := benchCorpus(benchCorpusSize)
	if err := os.WriteFile(*corpusOut, []byte(corpus), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(path string, ids []int32) {
		buf := make([]byte, 4*len(ids))
		for i, id := range ids {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(id))
		}
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ids := tk.Encode(corpus)
	write(*corpusOut+".ids", ids)
	var lineIDs []int32
	for _, line := range strings.SplitAfter(corpus, "\n") {
		lineIDs = append(lineIDs, tk.Encode(line)...)
	}
	write(*corpusOut+".lines.ids", lineIDs)
	t.Logf("wrote %s (%d bytes, %d tokens; %d tokens line by line)", *corpusOut, len(corpus), len(ids), len(lineIDs))
}

// BenchmarkEncode encodes the 1 MiB mixed corpus in one call; bytes/op gives
// MB/s, and allocs/op over tokens/op gives allocations per token.
func BenchmarkEncode(b *testing.B) {
	tk := needReal(b)
	corpus := benchCorpus(benchCorpusSize)
	ntok := len(tk.Encode(corpus))
	b.SetBytes(int64(len(corpus)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tk.Encode(corpus)
	}
	b.ReportMetric(float64(ntok), "tokens/op")
}

// BenchmarkEncodeLines encodes the corpus line by line (each line keeps its
// "\n"), one Encode call per line.
func BenchmarkEncodeLines(b *testing.B) {
	tk := needReal(b)
	lines := strings.SplitAfter(benchCorpus(benchCorpusSize), "\n")
	b.SetBytes(int64(benchCorpusSize))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			tk.Encode(l)
		}
	}
	b.ReportMetric(float64(len(lines)), "lines/op")
}

// BenchmarkEncodeColdCache measures BPE without the piece cache's help.
func BenchmarkEncodeColdCache(b *testing.B) {
	tk := needReal(b)
	corpus := benchCorpus(benchCorpusSize)
	b.SetBytes(int64(len(corpus)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		tk.cache = newBPECache(cacheSlots)
		b.StartTimer()
		tk.Encode(corpus)
	}
}

// BenchmarkEncodeShort encodes short chat-sized messages one at a time.
func BenchmarkEncodeShort(b *testing.B) {
	tk := needReal(b)
	msg := "<|im_start|>user\nWhat's the capital of France? Answer briefly.<|im_end|>\n<|im_start|>assistant\n"
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		tk.Encode(msg)
	}
}

func BenchmarkDecode(b *testing.B) {
	tk := needReal(b)
	corpus := benchCorpus(benchCorpusSize)
	ids := tk.Encode(corpus)
	b.SetBytes(int64(len(corpus)))
	b.ReportAllocs()
	for b.Loop() {
		tk.Decode(ids)
	}
}

// BenchmarkEncodeRegexp2 is BenchmarkEncode with the generic regexp2 split
// instead of the hand-written scanner.
func BenchmarkEncodeRegexp2(b *testing.B) {
	tk := needReal(b)
	tk.fastSplit = false
	defer func() { tk.fastSplit = true }()
	corpus := benchCorpus(benchCorpusSize)
	b.SetBytes(int64(len(corpus)))
	b.ReportAllocs()
	for b.Loop() {
		tk.Encode(corpus)
	}
}
