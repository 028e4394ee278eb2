package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a byte-level BPE tokenizer built from a tokenizer.json. It is
// immutable after Parse/Load and safe for concurrent use by multiple
// goroutines (the BPE cache is lock-free and bounded).
type Tokenizer struct {
	nfc bool

	pattern   string
	re        *regexp2.Regexp
	fastSplit bool // pattern == qwenPattern: use splitQwen instead of re

	byteID       [256]int32
	merges       map[uint64]uint64 // pairKey(a, b) -> rank<<32 | merged id
	ignoreMerges bool
	rawVocab     map[string]int32 // raw bytes -> id; only with ignore_merges

	modelSize      int
	decodeTok      []string // id -> token string as in the file ("" if none)
	decBytes       []byte   // decoded bytes of all ids, back to back
	decOff         []uint32 // id's bytes are decBytes[decOff[id]:decOff[id+1]]
	present        []bool   // id names a token
	addedByID      map[int32]*addedToken
	addedByContent map[string]*addedToken
	rawMatcher     *addedMatcher // added tokens with normalized=false
	normMatcher    *addedMatcher // added tokens with normalized=true

	cache   *bpeCache
	scratch sync.Pool // *bpeScratch
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// nfcString returns NFC(s), without allocating when s is already NFC.
func nfcString(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8.RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	if i > 0 {
		i-- // a mark may compose with the last ASCII letter
	}
	if norm.NFC.QuickSpanString(s[i:]) == len(s)-i {
		return s
	}
	return norm.NFC.String(s)
}

// VocabSize returns one more than the largest token id (model vocab and
// added tokens): the size an embedding table must have at least.
func (t *Tokenizer) VocabSize() int { return len(t.decodeTok) }

// TokenID returns the id of an added token given by its content (such as
// "<|im_end|>"), or of a model vocab entry given as the text it stands for
// (a linear scan of the vocab for the latter: not for hot paths).
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	if at, ok := t.addedByContent[s]; ok {
		return at.id, true
	}
	bl := byteLevelEncode([]byte(s))
	for id := 0; id < t.modelSize; id++ {
		if t.present[id] && t.decodeTok[id] == bl {
			return int32(id), true
		}
	}
	return 0, false
}

// IsSpecial reports whether id is an added token marked special:true (those
// that HF drops when decoding with skip_special_tokens).
func (t *Tokenizer) IsSpecial(id int32) bool {
	at, ok := t.addedByID[id]
	return ok && at.special
}

// Encode returns the token ids of text, as HF tokenizers'
// Tokenizer.encode(text, add_special_tokens=False) does (Qwen3's
// post-processor adds nothing either way). Invalid UTF-8 bytes in text are
// first replaced by U+FFFD, one per byte (HF only accepts valid strings).
func (t *Tokenizer) Encode(text string) []int32 {
	if !utf8.ValidString(text) {
		text = sanitizeUTF8(text)
	}
	out := make([]int32, 0, len(text)/3+4)
	sc := t.getScratch()
	t.rawMatcher.split(text, func(seg string, at *addedToken) {
		if at != nil {
			out = append(out, at.id)
			return
		}
		if t.nfc {
			seg = nfcString(seg)
		}
		t.normMatcher.split(seg, func(seg string, at *addedToken) {
			if at != nil {
				out = append(out, at.id)
				return
			}
			out = t.encodeSegment(out, seg, sc)
		})
	})
	if cap(sc.syms) <= maxPooledSymbols {
		t.scratch.Put(sc) // drop buffers grown by a huge piece
	}
	return out
}

const maxPooledSymbols = 1 << 14

// sanitizeUTF8 replaces each byte that is not part of a valid UTF-8
// sequence by U+FFFD.
func sanitizeUTF8(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// encodeSegment pre-tokenizes a normalized segment and appends the BPE ids
// of each piece.
func (t *Tokenizer) encodeSegment(out []int32, seg string, sc *bpeScratch) []int32 {
	if seg == "" {
		return out
	}
	if t.fastSplit {
		for i := 0; i < len(seg); {
			j := splitQwen(seg, i)
			out = t.encodePiece(out, seg[i:j], sc)
			i = j
		}
		return out
	}
	for _, p := range t.regexPieces(seg) {
		out = t.encodePiece(out, seg[p[0]:p[1]], sc)
	}
	return out
}

// regexPieces splits s with the Split regex, behaviour Isolated: every match
// is a piece, and so is every non-empty gap between matches.
func (t *Tokenizer) regexPieces(s string) [][2]int {
	locs, err := t.re.FindAllStringIndex(s, -1)
	if err != nil {
		// No timeout and no stack limit are set, so regexp2 has no error
		// to report; keep the text as one piece if it ever does.
		return [][2]int{{0, len(s)}}
	}
	pieces := make([][2]int, 0, 2*len(locs)+1)
	prev := 0
	for _, l := range locs {
		if l[0] > prev {
			pieces = append(pieces, [2]int{prev, l[0]})
		}
		if l[1] > l[0] {
			pieces = append(pieces, [2]int{l[0], l[1]})
		}
		prev = l[1]
	}
	if prev < len(s) {
		pieces = append(pieces, [2]int{prev, len(s)})
	}
	return pieces
}

// PreTokenize returns the pieces Encode runs BPE on, for tests and
// debugging: added-token split, NFC, then the Split regex.
func (t *Tokenizer) PreTokenize(text string) []string {
	if !utf8.ValidString(text) {
		text = sanitizeUTF8(text)
	}
	var out []string
	t.rawMatcher.split(text, func(seg string, at *addedToken) {
		if at != nil {
			out = append(out, seg)
			return
		}
		if t.nfc {
			seg = nfcString(seg)
		}
		t.normMatcher.split(seg, func(seg string, at *addedToken) {
			if at != nil {
				out = append(out, seg)
				return
			}
			out = append(out, t.splitPieces(seg, t.fastSplit)...)
		})
	})
	return out
}

// splitPieces splits a normalized segment with the scanner (fast) or regexp2.
func (t *Tokenizer) splitPieces(seg string, fast bool) []string {
	var out []string
	if fast {
		for i := 0; i < len(seg); {
			j := splitQwen(seg, i)
			out = append(out, seg[i:j])
			i = j
		}
		return out
	}
	for _, p := range t.regexPieces(seg) {
		out = append(out, seg[p[0]:p[1]])
	}
	return out
}

// Decode returns the text of ids: each token's bytes (byte-level characters
// mapped back to bytes; added tokens as their content), concatenated, then
// decoded as UTF-8 with every maximal invalid subsequence replaced by one
// U+FFFD, as HF's ByteLevel decoder does with String::from_utf8_lossy.
// Special tokens are kept (skip_special_tokens=False). Ids that name no token
// are skipped, as HF does.
func (t *Tokenizer) Decode(ids []int32) string {
	buf := make([]byte, 0, 4*len(ids))
	buf = t.AppendBytes(buf, ids)
	if utf8.Valid(buf) {
		return string(buf)
	}
	return string(appendLossyUTF8(make([]byte, 0, len(buf)+8), buf))
}

// AppendBytes appends the raw bytes of ids to dst, without UTF-8 repair. A
// streaming caller can use it to print text only once a character is
// complete.
func (t *Tokenizer) AppendBytes(dst []byte, ids []int32) []byte {
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.present) || !t.present[id] {
			continue
		}
		dst = append(dst, t.decBytes[t.decOff[id]:t.decOff[id+1]]...)
	}
	return dst
}
