package safetensors

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// IndexFile is the conventional name of a sharded checkpoint's index.
const IndexFile = "model.safetensors.index.json"

// Index is a parsed model.safetensors.index.json.
type Index struct {
	// TotalSize is metadata.total_size (the tensors' data bytes, headers
	// excluded), or -1 when absent.
	TotalSize int64
	// WeightMap maps each tensor name to the file name of its shard.
	WeightMap map[string]string
}

// Shards returns the distinct shard file names in first-seen order of the
// sorted tensor names.
func (ix *Index) Shards() []string {
	names := make([]string, 0, len(ix.WeightMap))
	for n := range ix.WeightMap {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if s := ix.WeightMap[n]; !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// ParseIndex parses a sharded checkpoint's index. It requires a JSON object
// with a "weight_map" object of strings; a tensor listed twice (a duplicate
// key) is an error, as is a shard name that is not a plain file name (empty,
// ".", "..", or containing a path separator). "metadata" is optional;
// other keys are ignored.
func ParseIndex(data []byte) (*Index, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("index: not valid UTF-8")
	}
	if err := checkDuplicateKeys(data); err != nil {
		return nil, fmt.Errorf("index: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("index: not a JSON object: %v", err)
	}
	ix := &Index{TotalSize: -1}
	raw, ok := top["weight_map"]
	if !ok {
		return nil, errors.New("index: missing weight_map")
	}
	if err := json.Unmarshal(raw, &ix.WeightMap); err != nil || ix.WeightMap == nil {
		return nil, errors.New("index: weight_map must be an object mapping tensor names to shard file names")
	}
	for name, shard := range ix.WeightMap {
		if shard == "" || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return nil, fmt.Errorf("index: tensor %q: shard %q is not a plain file name", name, shard)
		}
	}
	if raw, ok := top["metadata"]; ok && string(raw) != "null" {
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, errors.New("index: metadata must be an object")
		}
		if ts, ok := meta["total_size"]; ok && string(ts) != "null" {
			v, err := strconv.ParseInt(string(ts), 10, 64)
			if err != nil || v < 0 {
				// Some writers emit total_size as a float; accept integral ones.
				f, ferr := strconv.ParseFloat(string(ts), 64)
				if ferr != nil || f < 0 || f != float64(int64(f)) {
					return nil, fmt.Errorf("index: metadata.total_size %s is not a non-negative integer", ts)
				}
				v = int64(f)
			}
			ix.TotalSize = v
		}
	}
	return ix, nil
}

// checkDuplicateKeys walks data's JSON tokens and reports the first object
// that has the same key twice.
func checkDuplicateKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		atKey  bool
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not valid JSON: %v", err)
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.object && top.atKey {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					continue
				}
				k := tok.(string)
				if top.keys[k] {
					return fmt.Errorf("duplicate key %q", k)
				}
				top.keys[k] = true
				top.atKey = false
				continue
			}
			if top.object {
				top.atKey = true // this token is the value
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, frame{object: true, keys: map[string]bool{}, atKey: true})
			case '[':
				stack = append(stack, frame{})
			case ']':
				stack = stack[:len(stack)-1]
			}
		}
	}
}
