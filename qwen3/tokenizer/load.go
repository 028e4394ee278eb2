package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/dlclark/regexp2/v2"
	"github.com/offcard/offcard/internal/inputfile"
)

// fileJSON is the subset of tokenizer.json that this package reads.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
}

type addedJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int64 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// component is any normalizer / pre_tokenizer / decoder / post_processor node.
type component struct {
	Type          string          `json:"type"`
	Normalizers   json.RawMessage `json:"normalizers"`
	Pretokenizers json.RawMessage `json:"pretokenizers"`
	Processors    json.RawMessage `json:"processors"`
	Decoders      json.RawMessage `json:"decoders"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// isNull reports whether a raw JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// Load reads and parses a Hugging Face tokenizer.json file.
func Load(path string) (*Tokenizer, error) {
	data, err := inputfile.ReadFile(path, inputfile.MaxTokenizer, "a tokenizer.json")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return t, nil
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("tokenizer: "+format, args...)
}

// Parse builds a Tokenizer from the bytes of a tokenizer.json document.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, errorf("not valid JSON: %v (offset %d)", err, se.Offset)
		}
		return nil, errorf("malformed tokenizer.json: %v", err)
	}
	if isNull(f.Model) {
		return nil, errorf("tokenizer.json has no \"model\"")
	}
	var mt struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(f.Model, &mt); err != nil {
		return nil, errorf("malformed model: %v", err)
	}
	if mt.Type != "BPE" {
		return nil, errorf("model.type is %q; only \"BPE\" is supported", mt.Type)
	}
	m := new(modelJSON)
	if err := json.Unmarshal(f.Model, m); err != nil {
		return nil, errorf("malformed model: %v", err)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, errorf("model.dropout %v is not supported (encoding would be random)", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return nil, errorf("model.continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil, errorf("model.end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}
	if len(m.Vocab) == 0 {
		return nil, errorf("model.vocab is missing or empty")
	}

	t := &Tokenizer{ignoreMerges: m.IgnoreMerges}

	// Normalizer: NFC or none.
	if !isNull(f.Normalizer) {
		var c component
		if err := json.Unmarshal(f.Normalizer, &c); err != nil {
			return nil, errorf("malformed normalizer: %v", err)
		}
		switch c.Type {
		case "NFC":
			t.nfc = true
		default:
			return nil, errorf("normalizer type %q is not supported (want NFC or null)", c.Type)
		}
	}

	if err := t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err := checkPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if err := t.buildModel(m); err != nil {
		return nil, err
	}
	if err := t.buildAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	t.cache = newBPECache(cacheSlots)
	return t, nil
}

// parsePreTokenizer accepts exactly the byte-level shape Qwen2/Qwen3 use:
// Sequence[Split(Regex, Isolated, invert=false), ByteLevel(use_regex=false,
// add_prefix_space=false)].
func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return errorf("pre_tokenizer is missing; a Sequence[Split, ByteLevel] is required")
	}
	var top component
	if err := json.Unmarshal(raw, &top); err != nil {
		return errorf("malformed pre_tokenizer: %v", err)
	}
	if top.Type != "Sequence" {
		return errorf("pre_tokenizer type %q is not supported (want Sequence[Split, ByteLevel])", top.Type)
	}
	var steps []component
	if err := json.Unmarshal(top.Pretokenizers, &steps); err != nil {
		return errorf("malformed pre_tokenizer.pretokenizers: %v", err)
	}
	if len(steps) != 2 || steps[0].Type != "Split" || steps[1].Type != "ByteLevel" {
		names := make([]string, len(steps))
		for i, s := range steps {
			names[i] = s.Type
		}
		return errorf("pre_tokenizer Sequence%v is not supported (want [Split ByteLevel])", names)
	}
	sp, bl := steps[0], steps[1]
	if sp.Pattern == nil || (sp.Pattern.Regex == nil && sp.Pattern.String == nil) {
		return errorf("pre_tokenizer Split has no pattern.Regex")
	}
	var pattern string
	if sp.Pattern.Regex != nil {
		pattern = *sp.Pattern.Regex
	} else {
		pattern = regexp2.Escape(*sp.Pattern.String)
	}
	if pattern == "" {
		return errorf("pre_tokenizer Split pattern is empty")
	}
	if sp.Behavior != "Isolated" {
		return errorf("pre_tokenizer Split behavior %q is not supported (want Isolated)", sp.Behavior)
	}
	if sp.Invert {
		return errorf("pre_tokenizer Split invert=true is not supported")
	}
	if bl.AddPrefixSpace {
		return errorf("pre_tokenizer ByteLevel add_prefix_space=true is not supported")
	}
	if bl.UseRegex == nil || *bl.UseRegex {
		return errorf("pre_tokenizer ByteLevel use_regex must be false (the Split step does the splitting)")
	}
	// Default options only: RE2 and ECMAScript would change \s. No
	// backtracking-stack limit: the pattern's backtracking is linear in the
	// length of a whitespace run.
	re, err := regexp2.Compile(pattern, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		return errorf("pre_tokenizer Split regex does not compile: %v", err)
	}
	t.pattern = pattern
	t.re = re
	t.fastSplit = pattern == qwenPattern
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return errorf("decoder is missing; ByteLevel is required")
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return errorf("malformed decoder: %v", err)
	}
	if c.Type != "ByteLevel" {
		return errorf("decoder type %q is not supported (want ByteLevel)", c.Type)
	}
	return nil
}

func checkPostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return errorf("malformed post_processor: %v", err)
	}
	if c.Type != "ByteLevel" {
		// TemplateProcessing and friends would add tokens around the text.
		return errorf("post_processor type %q is not supported (want ByteLevel or null)", c.Type)
	}
	return nil
}

// parseMerges accepts both the array-of-pairs form [["a","b"], …] and the
// older "a b" string form.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		out := make([][2]string, len(pairs))
		for i, p := range pairs {
			if len(p) != 2 {
				return nil, errorf("model.merges[%d] has %d elements, want 2", i, len(p))
			}
			out[i] = [2]string{p[0], p[1]}
		}
		return out, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, errorf("model.merges is neither a list of pairs nor a list of strings")
	}
	out := make([][2]string, len(lines))
	for i, l := range lines {
		a, b, ok := strings.Cut(l, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, errorf("model.merges[%d] = %q is not two space-separated tokens", i, l)
		}
		out[i] = [2]string{a, b}
	}
	return out, nil
}

func (t *Tokenizer) buildModel(m *modelJSON) error {
	maxID := int64(-1)
	for tok, id := range m.Vocab {
		if id < 0 || id > 1<<30 {
			return errorf("model.vocab[%q] = %d is out of range", tok, id)
		}
		maxID = max(maxID, id)
	}
	n := int(maxID) + 1
	t.modelSize = n
	tokens := make([]string, n)
	seen := make([]bool, n)
	for tok, id := range m.Vocab {
		if seen[id] {
			return errorf("model.vocab gives id %d to both %q and %q", id, tokens[id], tok)
		}
		seen[id] = true
		tokens[id] = tok
	}
	// Initial symbols: one per byte.
	for b := 0; b < 256; b++ {
		s := string(byteToRune[b])
		id, ok := m.Vocab[s]
		if !ok {
			return errorf("model.vocab lacks the byte-level token %q for byte 0x%02X", s, b)
		}
		t.byteID[b] = int32(id)
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return err
	}
	t.merges = make(map[uint64]uint64, len(merges))
	for rank, p := range merges {
		a, ok := m.Vocab[p[0]]
		if !ok {
			return errorf("model.merges[%d] names unknown token %q", rank, p[0])
		}
		b, ok := m.Vocab[p[1]]
		if !ok {
			return errorf("model.merges[%d] names unknown token %q", rank, p[1])
		}
		c, ok := m.Vocab[p[0]+p[1]]
		if !ok {
			return errorf("model.merges[%d] produces %q, which is not in model.vocab", rank, p[0]+p[1])
		}
		// A later duplicate overwrites an earlier one, as in HF.
		t.merges[pairKey(int32(a), int32(b))] = uint64(rank)<<32 | uint64(uint32(c))
	}
	if t.ignoreMerges {
		t.rawVocab = make(map[string]int32, len(m.Vocab))
		for tok, id := range m.Vocab {
			if raw, ok := byteLevelDecode(tok); ok {
				t.rawVocab[string(raw)] = int32(id)
			}
		}
	}
	t.decodeTok = tokens
	return nil
}

func (t *Tokenizer) buildAdded(list []addedJSON) error {
	t.addedByID = map[int32]*addedToken{}
	t.addedByContent = map[string]*addedToken{}
	for i, a := range list {
		if a.ID == nil {
			return errorf("added_tokens[%d] (%q) has no id", i, a.Content)
		}
		if *a.ID < 0 || *a.ID > 1<<30 {
			return errorf("added_tokens[%d] (%q) has id %d out of range", i, a.Content, *a.ID)
		}
		if a.Content == "" {
			continue // HF ignores empty added tokens
		}
		id := int32(*a.ID)
		if prev, dup := t.addedByID[id]; dup && prev.content != a.Content {
			return errorf("added_tokens give id %d to both %q and %q", id, prev.content, a.Content)
		}
		at := &addedToken{id: id, content: a.Content, singleWord: a.SingleWord,
			lstrip: a.LStrip, rstrip: a.RStrip, normalized: a.Normalized, special: a.Special}
		t.addedByID[id] = at
		t.addedByContent[a.Content] = at
	}
	// Decode table covers the model vocab and every added id.
	n := t.modelSize
	for id := range t.addedByID {
		n = max(n, int(id)+1)
	}
	for len(t.decodeTok) < n {
		t.decodeTok = append(t.decodeTok, "")
	}
	for id, at := range t.addedByID {
		t.decodeTok[id] = at.content
	}
	t.buildDecodeTable()

	var raw, norm []*addedToken
	ids := make([]int32, 0, len(t.addedByID))
	for id := range t.addedByID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		at := t.addedByID[id]
		if at.normalized {
			norm = append(norm, at)
		} else {
			raw = append(raw, at)
		}
	}
	t.rawMatcher = newAddedMatcher(raw, nil)
	if t.nfc {
		t.normMatcher = newAddedMatcher(norm, nfcString)
	} else {
		t.normMatcher = newAddedMatcher(norm, nil)
	}
	return nil
}

// buildDecodeTable stores every id's decoded bytes contiguously. HF's
// ByteLevel decoder maps a token's characters back to bytes, or keeps the
// token's own UTF-8 bytes when some character is outside the byte alphabet.
func (t *Tokenizer) buildDecodeTable() {
	t.decOff = make([]uint32, len(t.decodeTok)+1)
	size := 0
	for _, s := range t.decodeTok {
		size += len(s)
	}
	t.decBytes = make([]byte, 0, size)
	for i, s := range t.decodeTok {
		if raw, ok := byteLevelDecode(s); ok {
			t.decBytes = append(t.decBytes, raw...)
		} else {
			t.decBytes = append(t.decBytes, s...)
		}
		t.decOff[i+1] = uint32(len(t.decBytes))
	}
	t.present = make([]bool, len(t.decodeTok))
	for i := range t.present {
		t.present[i] = i < t.modelSize && t.decodeTok[i] != ""
	}
	for id := range t.addedByID {
		t.present[id] = true
	}
}
