package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// FuzzParse: Parse never panics; whatever it accepts has every tensor's data
// inside the input, and Write of the result gives a file Parse accepts with
// the same tensors and metadata. Seeds live in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(file(`{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}`, make([]byte, 16)))
	f.Add(file(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`, []byte{1, 2, 3, 4}))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(data)
		// Open's check of the header alone, before the file is read,
		// finds exactly Parse's errors.
		head := data
		if len(data) >= 8 {
			head = data[:8]
			if n := binary.LittleEndian.Uint64(data); n <= MaxHeaderSize && n <= uint64(len(data)-8) {
				head = data[:8+n]
			}
		}
		if hf, herr := parse(head, len(data)); fmt.Sprint(herr) != fmt.Sprint(err) || (hf != nil) != (len(head) == len(data) && err == nil) {
			t.Fatalf("header check: %v, Parse: %v", herr, err)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		base := uintptr(unsafe.Pointer(unsafe.SliceData(data)))
		ts := pf.Tensors()
		if !slices.IsSortedFunc(ts, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) }) {
			t.Fatal("tensors not sorted by name")
		}
		for _, tn := range ts {
			p := uintptr(unsafe.Pointer(unsafe.SliceData(tn.Data)))
			if len(tn.Data) > 0 && (p < base+8 || p+uintptr(len(tn.Data)) > base+uintptr(len(data))) {
				t.Fatalf("%s: data out of bounds", tn.Name)
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, ts, pf.Metadata()); err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		again, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("rewritten file does not parse: %v", err)
		}
		if again.HeaderSize()%8 != 0 {
			t.Fatalf("rewritten header of %d bytes not padded", again.HeaderSize())
		}
		if !maps.Equal(again.Metadata(), pf.Metadata()) {
			t.Fatalf("metadata %v became %v", pf.Metadata(), again.Metadata())
		}
		ts2 := again.Tensors()
		if len(ts2) != len(ts) {
			t.Fatalf("%d tensors became %d", len(ts), len(ts2))
		}
		for i := range ts {
			a, b := ts[i], ts2[i]
			if a.Name != b.Name || a.DType != b.DType || !slices.Equal(a.Shape, b.Shape) || !bytes.Equal(a.Data, b.Data) {
				t.Fatalf("tensor %q changed in the rewrite", a.Name)
			}
		}
	})
}
