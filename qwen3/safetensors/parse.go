package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header length N accepted, as in the
// reference reader.
const MaxHeaderSize = 100_000_000

// Tensor is one named tensor. After Parse, Data aliases the parsed input.
type Tensor struct {
	Name  string
	DType string // one of DTypes, e.g. "BF16"
	Shape []int  // row-major; empty for a scalar
	Data  []byte // little-endian elements, len = elements × bits / 8
}

// File is a parsed safetensors file.
type File struct {
	tensors   []Tensor // sorted by name
	byName    map[string]int
	metadata  map[string]string
	headerLen int
	release   func() error
}

// Tensors returns the tensors sorted by name. The slice is a fresh copy; the
// Data slices alias the file.
func (f *File) Tensors() []Tensor { return slices.Clone(f.tensors) }

// Tensor returns the named tensor.
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.byName[name]
	if !ok {
		return Tensor{}, false
	}
	return f.tensors[i], true
}

// Len is the number of tensors.
func (f *File) Len() int { return len(f.tensors) }

// Metadata returns a copy of the __metadata__ map (nil when absent).
func (f *File) Metadata() map[string]string { return maps.Clone(f.metadata) }

// HeaderSize is N, the JSON header's length in bytes; the byte buffer starts
// at file offset 8+N.
func (f *File) HeaderSize() int { return f.headerLen }

// Close releases the memory behind f, if Open made it. The Data slices
// of f's tensors must not be used after.
func (f *File) Close() error {
	if f == nil || f.release == nil {
		return nil
	}
	r := f.release
	f.release = nil
	return r()
}

type entry struct {
	name       string
	dtype      string
	shape      []int
	begin, end uint64
}

// Parse validates data as a safetensors file and returns its tensors, whose
// Data slices alias data.
func Parse(data []byte) (*File, error) { return parse(data, len(data)) }

// parse is Parse of a file of size bytes whose first len(data) bytes are
// data: all of it, or (for a check before the file is read) at least its
// header, 8+N bytes; then it validates the header against size and
// returns a nil File when it is valid.
func parse(data []byte, size int) (*File, error) {
	if size < 8 {
		return nil, errf(HeaderTooSmall, "", "input is %d bytes, shorter than the 8-byte header length", size)
	}
	n64 := binary.LittleEndian.Uint64(data[:8])
	if n64 > MaxHeaderSize {
		return nil, errf(HeaderTooLarge, "", "header length %d exceeds the limit of %d bytes", n64, MaxHeaderSize)
	}
	n := int(n64)
	if n > size-8 {
		return nil, errf(InvalidHeaderLength, "", "header length %d runs past the end of the %d-byte input", n, size)
	}
	header := data[8 : 8+n]
	if !utf8.Valid(header) {
		return nil, errf(InvalidHeader, "", "header is not valid UTF-8")
	}
	entries, meta, err := parseHeader(header)
	if err != nil {
		return nil, err
	}

	// Validate offsets in data_offsets order, as the reference does; ties
	// (zero-sized tensors) are broken by name so errors are deterministic.
	slices.SortFunc(entries, func(a, b entry) int {
		if c := cmp.Compare(a.begin, b.begin); c != 0 {
			return c
		}
		if c := cmp.Compare(a.end, b.end); c != 0 {
			return c
		}
		return cmp.Compare(a.name, b.name)
	})
	var start uint64
	for _, e := range entries {
		switch {
		case e.begin > start:
			return nil, errf(InvalidOffset, e.name, "data_offsets [%d, %d] leave a gap: the previous tensor ends at %d", e.begin, e.end, start)
		case e.begin < start:
			return nil, errf(InvalidOffset, e.name, "data_offsets [%d, %d] overlap the previous tensor, which ends at %d", e.begin, e.end, start)
		case e.end < e.begin:
			return nil, errf(InvalidOffset, e.name, "data_offsets [%d, %d] end before they begin", e.begin, e.end)
		}
		start = e.end
		count := uint64(1)
		for _, d := range e.shape {
			hi, lo := bits.Mul64(count, uint64(d))
			if hi != 0 {
				return nil, errf(ValidationOverflow, e.name, "element count of shape %v overflows", e.shape)
			}
			count = lo
		}
		hi, nbits := bits.Mul64(count, uint64(dtypes[e.dtype].bits))
		if hi != 0 {
			return nil, errf(ValidationOverflow, e.name, "size in bits of %d %s elements overflows", count, e.dtype)
		}
		if nbits%8 != 0 {
			return nil, errf(MisalignedSlice, e.name, "%d %s elements are %d bits, not a whole number of bytes", count, e.dtype, nbits)
		}
		if e.end-e.begin != nbits/8 {
			return nil, errf(TensorInvalidInfo, e.name, "data_offsets [%d, %d] hold %d bytes, but %s %v needs %d", e.begin, e.end, e.end-e.begin, e.dtype, e.shape, nbits/8)
		}
	}
	if bufLen := uint64(size - 8 - n); start != bufLen {
		if start < bufLen {
			return nil, errf(MetadataIncompleteBuffer, "", "tensors cover %d bytes of a %d-byte buffer: %d trailing bytes", start, bufLen, bufLen-start)
		}
		return nil, errf(MetadataIncompleteBuffer, "", "tensors need %d bytes but the buffer after the header has %d", start, bufLen)
	}
	if len(data) < size {
		return nil, nil // the header alone, valid
	}
	buf := data[8+n:]

	f := &File{
		tensors:   make([]Tensor, len(entries)),
		byName:    make(map[string]int, len(entries)),
		metadata:  meta,
		headerLen: n,
	}
	slices.SortFunc(entries, func(a, b entry) int { return cmp.Compare(a.name, b.name) })
	for i, e := range entries {
		if e.begin > e.end || e.end > uint64(len(buf)) { // unreachable after the checks above
			return nil, errf(InvalidOffset, e.name, "data_offsets [%d, %d] out of bounds", e.begin, e.end)
		}
		f.tensors[i] = Tensor{Name: e.name, DType: e.dtype, Shape: e.shape, Data: buf[e.begin:e.end:e.end]}
		f.byName[e.name] = i
	}
	return f, nil
}

// parseHeader walks the header's JSON tokens. Working at the token level
// gives byte-exact key matching and duplicate-key detection, which
// encoding/json's Unmarshal does not.
func parseHeader(header []byte) ([]entry, map[string]string, error) {
	p := &tokens{dec: json.NewDecoder(bytes.NewReader(header))}
	p.dec.UseNumber()
	if err := p.delim('{', ""); err != nil {
		return nil, nil, err
	}
	var (
		entries []entry
		meta    map[string]string
		seen    = map[string]bool{}
	)
	for p.dec.More() {
		key, err := p.key("")
		if err != nil {
			return nil, nil, err
		}
		if seen[key] {
			return nil, nil, errf(InvalidHeaderDeserialization, key, "duplicate key in header")
		}
		seen[key] = true
		if key == "__metadata__" {
			if meta, err = p.metadata(); err != nil {
				return nil, nil, err
			}
			continue
		}
		e, err := p.tensor(key)
		if err != nil {
			return nil, nil, err
		}
		entries = append(entries, e)
	}
	if err := p.delim('}', ""); err != nil {
		return nil, nil, err
	}
	if tok, err := p.dec.Token(); err != io.EOF {
		if err != nil {
			return nil, nil, errf(InvalidHeaderDeserialization, "", "after the header object: %v", err)
		}
		return nil, nil, errf(InvalidHeaderDeserialization, "", "unexpected %v after the header object", tok)
	}
	return entries, meta, nil
}

type tokens struct{ dec *json.Decoder }

func (p *tokens) next(tensor string) (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, errf(InvalidHeaderDeserialization, tensor, "header is not valid JSON: %v", err)
	}
	return tok, nil
}

func (p *tokens) delim(want json.Delim, tensor string) error {
	tok, err := p.next(tensor)
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return errf(InvalidHeaderDeserialization, tensor, "want %q, got %s", want, describe(tok))
	}
	return nil
}

func (p *tokens) key(tensor string) (string, error) {
	tok, err := p.next(tensor)
	if err != nil {
		return "", err
	}
	s, ok := tok.(string)
	if !ok { // cannot happen: the decoder only yields strings in key position
		return "", errf(InvalidHeaderDeserialization, tensor, "want a key, got %s", describe(tok))
	}
	return s, nil
}

func (p *tokens) metadata() (map[string]string, error) {
	tok, err := p.next("__metadata__")
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, nil // null: no metadata, as serde's Option allows
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errf(InvalidHeaderDeserialization, "", "__metadata__ must be an object of strings, got %s", describe(tok))
	}
	meta := map[string]string{}
	for p.dec.More() {
		k, err := p.key("")
		if err != nil {
			return nil, err
		}
		if _, dup := meta[k]; dup {
			return nil, errf(InvalidHeaderDeserialization, "", "__metadata__: duplicate key %q", k)
		}
		tok, err := p.next("")
		if err != nil {
			return nil, err
		}
		v, ok := tok.(string)
		if !ok {
			if d, isDelim := tok.(json.Delim); isDelim {
				return nil, errf(InvalidHeaderDeserialization, "", "__metadata__[%q] must be a string, got %q", k, d)
			}
			return nil, errf(InvalidHeaderDeserialization, "", "__metadata__[%q] must be a string, got %s", k, describe(tok))
		}
		meta[k] = v
	}
	return meta, p.delim('}', "")
}

func (p *tokens) tensor(name string) (entry, error) {
	e := entry{name: name}
	tok, err := p.next(name)
	if err != nil {
		return e, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return e, errf(InvalidHeaderDeserialization, name, "entry must be an object with dtype, shape and data_offsets, got %s", describe(tok))
	}
	var haveDtype, haveShape, haveOffsets bool
	for p.dec.More() {
		k, err := p.key(name)
		if err != nil {
			return e, err
		}
		switch k {
		case "dtype":
			if haveDtype {
				return e, errf(InvalidHeaderDeserialization, name, "duplicate key \"dtype\"")
			}
			haveDtype = true
			tok, err := p.next(name)
			if err != nil {
				return e, err
			}
			s, ok := tok.(string)
			if !ok {
				return e, errf(InvalidHeaderDeserialization, name, "dtype must be a string, got %s", describe(tok))
			}
			if _, known := dtypes[s]; !known {
				return e, errf(InvalidHeaderDeserialization, name, "unknown dtype %q", s)
			}
			e.dtype = s
		case "shape":
			if haveShape {
				return e, errf(InvalidHeaderDeserialization, name, "duplicate key \"shape\"")
			}
			haveShape = true
			dims, err := p.uints(name, "shape")
			if err != nil {
				return e, err
			}
			e.shape = make([]int, len(dims))
			for i, d := range dims {
				if d > math.MaxInt {
					return e, errf(ValidationOverflow, name, "shape dimension %d does not fit an int", d)
				}
				e.shape[i] = int(d)
			}
		case "data_offsets":
			if haveOffsets {
				return e, errf(InvalidHeaderDeserialization, name, "duplicate key \"data_offsets\"")
			}
			haveOffsets = true
			offs, err := p.uints(name, "data_offsets")
			if err != nil {
				return e, err
			}
			if len(offs) != 2 {
				return e, errf(InvalidHeaderDeserialization, name, "data_offsets must be [begin, end], got %d numbers", len(offs))
			}
			e.begin, e.end = offs[0], offs[1]
		default:
			return e, errf(InvalidHeaderDeserialization, name, "unknown key %q (want exactly dtype, shape, data_offsets)", k)
		}
	}
	if err := p.delim('}', name); err != nil {
		return e, err
	}
	switch {
	case !haveDtype:
		return e, errf(InvalidHeaderDeserialization, name, "missing key \"dtype\"")
	case !haveShape:
		return e, errf(InvalidHeaderDeserialization, name, "missing key \"shape\"")
	case !haveOffsets:
		return e, errf(InvalidHeaderDeserialization, name, "missing key \"data_offsets\"")
	}
	if e.shape == nil {
		e.shape = []int{}
	}
	return e, nil
}

// uints reads an array of non-negative base-10 integers.
func (p *tokens) uints(name, field string) ([]uint64, error) {
	if err := p.delim('[', name); err != nil {
		return nil, errf(InvalidHeaderDeserialization, name, "%s must be an array of non-negative integers", field)
	}
	var out []uint64
	for p.dec.More() {
		tok, err := p.next(name)
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, errf(InvalidHeaderDeserialization, name, "%s must hold non-negative integers, got %s", field, describe(tok))
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, errf(InvalidHeaderDeserialization, name, "%s: %s is not a non-negative integer that fits 64 bits", field, num)
		}
		out = append(out, v)
	}
	if err := p.delim(']', name); err != nil {
		return nil, err
	}
	return out, nil
}

func describe(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return strconv.Quote(string(t))
	case string:
		return "string " + strconv.Quote(t)
	case json.Number:
		return "number " + string(t)
	case bool:
		return strconv.FormatBool(t)
	}
	return "unexpected token"
}
