package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// file assembles a safetensors file from a header and a byte buffer.
func file(header string, buf []byte) []byte {
	out := make([]byte, 8, 8+len(header)+len(buf))
	binary.LittleEndian.PutUint64(out, uint64(len(header)))
	out = append(out, header...)
	return append(out, buf...)
}

// withN is a file whose length prefix says n whatever follows.
func withN(n uint64, rest string) []byte {
	out := make([]byte, 8)
	binary.LittleEndian.PutUint64(out, n)
	return append(out, rest...)
}

func TestParseReferenceExample(t *testing.T) {
	// The example in the reference crate's documentation: an unpadded
	// 60-byte header and a 2×2 I32 tensor of zeros.
	data := file(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, make([]byte, 16))
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	tn, ok := f.Tensor("test")
	if !ok || tn.DType != "I32" || !slices.Equal(tn.Shape, []int{2, 2}) || len(tn.Data) != 16 {
		t.Fatalf("got %+v, %v", tn, ok)
	}
	if f.HeaderSize() != 60 || f.Len() != 1 || f.Metadata() != nil {
		t.Fatalf("header %d, len %d, metadata %v", f.HeaderSize(), f.Len(), f.Metadata())
	}
}

func TestParseValid(t *testing.T) {
	cases := map[string][]byte{
		"empty header":        file(`{}`, nil),
		"padded":              file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}      `, []byte{1, 2}),
		"leading whitespace":  file(` {"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}}`, []byte{7}),
		"null metadata":       file(`{"__metadata__":null}`, nil),
		"zero-size tensors":   file(`{"z":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"y":{"dtype":"F32","shape":[3,0],"data_offsets":[0,0]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{9}),
		"any order in header": file(`{"b":{"data_offsets":[2,4],"shape":[1],"dtype":"BF16"},"a":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}}`, []byte{1, 2, 3, 4}),
		"F4 pair":             file(`{"q":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}`, []byte{0x21}),
		"F6 quad":             file(`{"q":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}`, []byte{1, 2, 3}),
		"escaped key":         file(`{"a":{"dtyp\u0065":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1}),
	}
	for name, data := range cases {
		if _, err := Parse(data); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	u8 := func(name string, b, e int) string {
		return `"` + name + `":{"dtype":"U8","shape":[` + itoa(e-b) + `],"data_offsets":[` + itoa(b) + `,` + itoa(e) + `]}`
	}
	cases := []struct {
		name   string
		data   []byte
		kind   Kind
		tensor string
		detail string
	}{
		{"empty file", nil, HeaderTooSmall, "", ""},
		{"truncated prefix", []byte{1, 0, 0}, HeaderTooSmall, "", ""},
		{"header past end", withN(100, `{}`), InvalidHeaderLength, "", "runs past"},
		{"header one past end", withN(3, `{}`), InvalidHeaderLength, "", ""},
		{"header over 100 MB", withN(MaxHeaderSize+1, `{}`), HeaderTooLarge, "", ""},
		{"header 2^63", withN(1<<63, `{}`), HeaderTooLarge, "", ""},
		{"header 2^64-1", withN(^uint64(0), `{}`), HeaderTooLarge, "", ""},
		{"truncated data", file(`{`+u8("a", 0, 4)+`}`, []byte{1, 2}), MetadataIncompleteBuffer, "", "need 4 bytes"},
		{"trailing bytes", file(`{`+u8("a", 0, 2)+`}`, []byte{1, 2, 3}), MetadataIncompleteBuffer, "", "1 trailing"},
		{"overlap", file(`{`+u8("a", 0, 2)+`,`+u8("b", 1, 3)+`}`, make([]byte, 3)), InvalidOffset, "b", "overlap"},
		{"gap", file(`{`+u8("a", 0, 2)+`,`+u8("b", 3, 5)+`}`, make([]byte, 5)), InvalidOffset, "b", "gap"},
		{"not from zero", file(`{`+u8("a", 1, 3)+`}`, make([]byte, 3)), InvalidOffset, "a", "gap"},
		{"end before begin", file(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,0]},`+u8("b", 0, 2)+`}`, make([]byte, 2)), InvalidOffset, "a", "end before"},
		{"unknown dtype", file(`{"a":{"dtype":"F12","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", "unknown dtype"},
		{"lower-case dtype", file(`{"a":{"dtype":"bf16","shape":[1],"data_offsets":[0,2]}}`, []byte{0, 0}), InvalidHeaderDeserialization, "a", "unknown dtype"},
		{"shape product overflow", file(`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil), ValidationOverflow, "a", ""},
		{"bits overflow", file(`{"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,0]}}`, nil), ValidationOverflow, "a", ""},
		{"dim past int", file(`{"a":{"dtype":"U8","shape":[18446744073709551615,0],"data_offsets":[0,0]}}`, nil), ValidationOverflow, "a", ""},
		{"bytes/shape mismatch", file(`{"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}}`, make([]byte, 4)), TensorInvalidInfo, "a", "needs 6"},
		{"misaligned F4", file(`{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}`, make([]byte, 2)), MisalignedSlice, "a", ""},
		{"duplicate tensor", file(`{`+u8("a", 0, 1)+`,`+u8("a", 1, 2)+`}`, make([]byte, 2)), InvalidHeaderDeserialization, "a", "duplicate"},
		{"duplicate field", file(`{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1)), InvalidHeaderDeserialization, "a", "duplicate"},
		{"duplicate metadata", file(`{"__metadata__":{"k":"1"},"__metadata__":{"k":"1"}}`, nil), InvalidHeaderDeserialization, "__metadata__", "duplicate"},
		{"duplicate metadata key", file(`{"__metadata__":{"k":"1","k":"2"}}`, nil), InvalidHeaderDeserialization, "", "duplicate"},
		{"non-string metadata", file(`{"__metadata__":{"format":1}}`, nil), InvalidHeaderDeserialization, "", "must be a string"},
		{"nested metadata", file(`{"__metadata__":{"format":{"a":"b"}}}`, nil), InvalidHeaderDeserialization, "", "must be a string"},
		{"metadata array", file(`{"__metadata__":["a"]}`, nil), InvalidHeaderDeserialization, "", ""},
		{"invalid UTF-8 header", file("{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", []byte{0}), InvalidHeader, "", ""},
		{"not JSON", file(`not json`, nil), InvalidHeaderDeserialization, "", ""},
		{"truncated JSON", file(`{"a":{"dtype":"U8"`, nil), InvalidHeaderDeserialization, "a", "unexpected EOF"},
		{"two objects", file(`{}{}`, nil), InvalidHeaderDeserialization, "", "after"},
		{"trailing garbage", file(`{} x`, nil), InvalidHeaderDeserialization, "", ""},
		{"NUL padding", file("{}\x00\x00", nil), InvalidHeaderDeserialization, "", ""},
		{"top-level array", file(`[]`, nil), InvalidHeaderDeserialization, "", ""},
		{"unknown field", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}`, []byte{0}), InvalidHeaderDeserialization, "a", "unknown key"},
		{"case variant field", file(`{"a":{"DTYPE":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", "unknown key"},
		{"missing dtype", file(`{"a":{"shape":[1],"data_offsets":[0,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", "missing key \"dtype\""},
		{"missing shape", file(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", "missing key \"shape\""},
		{"missing offsets", file(`{"a":{"dtype":"U8","shape":[1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", "missing key \"data_offsets\""},
		{"negative dim", file(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", ""},
		{"fractional dim", file(`{"a":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", ""},
		{"exponent offset", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1e0]}}`, []byte{0}), InvalidHeaderDeserialization, "a", ""},
		{"three offsets", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", ""},
		{"string dim", file(`{"a":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}`, []byte{0}), InvalidHeaderDeserialization, "a", ""},
		{"tensor not object", file(`{"a":3}`, nil), InvalidHeaderDeserialization, "a", ""},
		{"offset past 2^64", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,18446744073709551616]}}`, []byte{0}), InvalidHeaderDeserialization, "a", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Parse(c.data)
			if err == nil {
				t.Fatalf("parsed: %+v", f.Tensors())
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if se.Kind != c.kind || se.Tensor != c.tensor || !strings.Contains(se.Detail, c.detail) {
				t.Fatalf("got %v (kind %v, tensor %q), want kind %v, tensor %q, detail containing %q", err, se.Kind, se.Tensor, c.kind, c.tensor, c.detail)
			}
		})
	}
}

// A huge declared header is rejected before anything is allocated for it.
func TestHugeHeaderDoesNotAllocate(t *testing.T) {
	for _, n := range []uint64{MaxHeaderSize + 1, 1 << 40, 1 << 63} {
		data := withN(n, `{}`)
		allocs := testing.AllocsPerRun(20, func() { _, _ = Parse(data) })
		if allocs > 4 {
			t.Errorf("N=%d: %v allocations", n, allocs)
		}
	}
	// The same for a header that fits the limit but not the file.
	data := withN(MaxHeaderSize, `{}`)
	if allocs := testing.AllocsPerRun(20, func() { _, _ = Parse(data) }); allocs > 4 {
		t.Errorf("N past end: %v allocations", allocs)
	}
}

func TestWriteLayout(t *testing.T) {
	// Same bytes as the reference crate writes for its documented example,
	// padded to a multiple of 8.
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "test", DType: "I32", Shape: []int{2, 2}, Data: make([]byte, 16)}}, nil); err != nil {
		t.Fatal(err)
	}
	want := file(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}    `, make([]byte, 16))
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got\n%q\nwant\n%q", buf.Bytes(), want)
	}

	// Order: dtype descending in the reference's enum order, then name.
	ts := []Tensor{
		{Name: "b8", DType: "U8", Shape: []int{1}, Data: []byte{1}},
		{Name: "a16", DType: "BF16", Shape: []int{1}, Data: []byte{2, 3}},
		{Name: "c64", DType: "F64", Shape: []int{1}, Data: make([]byte, 8)},
		{Name: "a8", DType: "U8", Shape: []int{1}, Data: []byte{4}},
		{Name: "z16", DType: "F16", Shape: []int{1}, Data: []byte{5, 6}},
		{Name: "x", DType: "C64", Shape: []int{}, Data: make([]byte, 8)},
	}
	buf.Reset()
	if err := Write(&buf, ts, map[string]string{"format": "pt", "a<b": "c&d"}); err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(buf.Bytes())
	header := string(buf.Bytes()[8 : 8+n])
	if n%8 != 0 || !strings.HasPrefix(header, `{"__metadata__":{"a<b":"c&d","format":"pt"},"c64":`) {
		t.Fatalf("header %q (N=%d)", header, n)
	}
	last := -1
	for _, name := range []string{"c64", "x", "a16", "z16", "a8", "b8"} {
		i := strings.Index(header, `"`+name+`"`)
		if i < last {
			t.Fatalf("%s out of order in %s", name, header)
		}
		last = i
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range ts {
		got, ok := f.Tensor(want.Name)
		if !ok || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s: got %+v", want.Name, got)
		}
		// Every tensor is aligned to its element size within the file.
		off := uintptr(unsafe.Pointer(unsafe.SliceData(got.Data))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf.Bytes())))
		if bits, _ := DTypeBits(got.DType); off%uintptr(bits/8) != 0 {
			t.Errorf("%s at file offset %d, not aligned", got.Name, off)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	cases := map[string][]Tensor{
		"bad size":       {{Name: "a", DType: "BF16", Shape: []int{2}, Data: make([]byte, 3)}},
		"unknown dtype":  {{Name: "a", DType: "X", Shape: []int{1}, Data: make([]byte, 1)}},
		"duplicate":      {{Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: "U8", Shape: []int{1}, Data: []byte{1}}},
		"metadata name":  {{Name: "__metadata__", DType: "U8", Shape: []int{1}, Data: []byte{1}}},
		"negative dim":   {{Name: "a", DType: "U8", Shape: []int{-1}, Data: nil}},
		"odd F4":         {{Name: "a", DType: "F4", Shape: []int{1}, Data: nil}},
		"invalid UTF-8":  {{Name: "a\xff", DType: "U8", Shape: []int{1}, Data: []byte{1}}},
		"shape overflow": {{Name: "a", DType: "U8", Shape: []int{1 << 62, 1 << 62}, Data: nil}},
	}
	for name, ts := range cases {
		var buf bytes.Buffer
		if err := Write(&buf, ts, nil); err == nil {
			t.Errorf("%s: accepted", name)
		} else if buf.Len() != 0 {
			t.Errorf("%s: wrote %d bytes before failing", name, buf.Len())
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	var buf bytes.Buffer
	ts := []Tensor{{Name: "w", DType: "BF16", Shape: []int{2, 2}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}
	if err := Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.Tensor("w")
	if !bytes.Equal(w.Data, ts[0].Data) || f.Metadata()["format"] != "pt" {
		t.Fatalf("got %+v %v", w, f.Metadata())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil { // idempotent
		t.Fatal(err)
	}

	// Errors name the path; an empty file is HeaderTooSmall.
	empty := filepath.Join(dir, "empty.safetensors")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(empty)
	var se *Error
	if err == nil || !strings.Contains(err.Error(), empty) || !errors.As(err, &se) || se.Kind != HeaderTooSmall {
		t.Fatalf("empty file: %v", err)
	}
	if err := os.WriteFile(path, buf.Bytes()[:buf.Len()-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !errors.As(err, &se) || se.Kind != MetadataIncompleteBuffer {
		t.Fatalf("truncated file: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file opened")
	}
	if _, err := Open(dir); err == nil {
		t.Fatal("directory opened")
	}
}

func TestParseIndex(t *testing.T) {
	ix, err := ParseIndex([]byte(`{"metadata":{"total_size":12,"other":"x"},"weight_map":{"b":"s2.safetensors","a":"s1.safetensors","c":"s1.safetensors"},"extra":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if ix.TotalSize != 12 || len(ix.WeightMap) != 3 || !slices.Equal(ix.Shards(), []string{"s1.safetensors", "s2.safetensors"}) {
		t.Fatalf("%+v %v", ix, ix.Shards())
	}
	bad := map[string]string{
		"duplicate":     `{"weight_map":{"a":"s1","a":"s2"}}`,
		"no weight_map": `{"metadata":{}}`,
		"path escape":   `{"weight_map":{"a":"../x"}}`,
		"subdir":        `{"weight_map":{"a":"d/x"}}`,
		"empty shard":   `{"weight_map":{"a":""}}`,
		"non-string":    `{"weight_map":{"a":1}}`,
		"not JSON":      `weights`,
		"bad total":     `{"metadata":{"total_size":-1},"weight_map":{}}`,
		"case variant":  `{"Weight_Map":{"a":"s"}}`,
	}
	for name, in := range bad {
		if _, err := ParseIndex([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func itoa(i int) string {
	return string(appendInt(nil, i))
}

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}
