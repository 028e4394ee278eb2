package safetensors

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Write writes tensors and metadata as one safetensors file, laid out as the
// reference writer does: tensors sorted by dtype (descending in DTypes
// order) then by name, packed contiguously from offset 0, the header
// compact JSON ("__metadata__" first, its keys sorted) padded with spaces
// to a multiple of 8 bytes. metadata may be nil. Write checks each tensor
// first (unique valid-UTF-8 name other than "__metadata__", known dtype,
// len(Data) matching dtype × shape) and writes nothing if one is bad.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	order := make([]int, len(tensors))
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		order[i] = i
		if err := checkTensor(t); err != nil {
			return err
		}
		if seen[t.Name] {
			return errf(InvalidTensor, t.Name, "duplicate tensor name")
		}
		seen[t.Name] = true
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return errf(InvalidTensor, "", "__metadata__ entry %q is not valid UTF-8", k)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		ta, tb := tensors[a], tensors[b]
		if c := cmp.Compare(dtypes[tb.DType].rank, dtypes[ta.DType].rank); c != 0 {
			return c
		}
		return cmp.Compare(ta.Name, tb.Name)
	})

	var h bytes.Buffer
	h.WriteByte('{')
	first := true
	comma := func() {
		if !first {
			h.WriteByte(',')
		}
		first = false
	}
	if metadata != nil {
		comma()
		h.WriteString(`"__metadata__":{`)
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				h.WriteByte(',')
			}
			writeString(&h, k)
			h.WriteByte(':')
			writeString(&h, metadata[k])
		}
		h.WriteByte('}')
	}
	var offset uint64
	for _, i := range order {
		t := tensors[i]
		comma()
		writeString(&h, t.Name)
		h.WriteString(`:{"dtype":`)
		writeString(&h, t.DType)
		h.WriteString(`,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		end := offset + uint64(len(t.Data))
		h.WriteString(`],"data_offsets":[`)
		h.WriteString(strconv.FormatUint(offset, 10))
		h.WriteByte(',')
		h.WriteString(strconv.FormatUint(end, 10))
		h.WriteString(`]}`)
		offset = end
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	if h.Len() > MaxHeaderSize {
		return errf(HeaderTooLarge, "", "header would be %d bytes, over the limit of %d", h.Len(), MaxHeaderSize)
	}

	bw := bufio.NewWriterSize(w, 1<<20)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(h.Len()))
	if _, err := bw.Write(n[:]); err != nil {
		return err
	}
	if _, err := bw.Write(h.Bytes()); err != nil {
		return err
	}
	for _, i := range order {
		if _, err := bw.Write(tensors[i].Data); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func checkTensor(t Tensor) error {
	if t.Name == "__metadata__" {
		return errf(InvalidTensor, t.Name, "a tensor cannot be named __metadata__")
	}
	if !utf8.ValidString(t.Name) {
		return errf(InvalidTensor, t.Name, "name is not valid UTF-8")
	}
	d, ok := dtypes[t.DType]
	if !ok {
		return errf(InvalidTensor, t.Name, "unknown dtype %q", t.DType)
	}
	count := uint64(1)
	for _, dim := range t.Shape {
		if dim < 0 {
			return errf(InvalidTensor, t.Name, "negative dimension in shape %v", t.Shape)
		}
		hi, lo := bits.Mul64(count, uint64(dim))
		if hi != 0 {
			return errf(ValidationOverflow, t.Name, "element count of shape %v overflows", t.Shape)
		}
		count = lo
	}
	hi, nbits := bits.Mul64(count, uint64(d.bits))
	if hi != 0 {
		return errf(ValidationOverflow, t.Name, "size in bits of shape %v overflows", t.Shape)
	}
	if nbits%8 != 0 {
		return errf(MisalignedSlice, t.Name, "%d %s elements are not a whole number of bytes", count, t.DType)
	}
	if uint64(len(t.Data)) != nbits/8 {
		return errf(TensorInvalidInfo, t.Name, "data is %d bytes, but %s %v needs %d", len(t.Data), t.DType, t.Shape, nbits/8)
	}
	return nil
}

// writeString writes s as a JSON string without HTML escaping.
func writeString(b *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a valid-UTF-8 string always encodes
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
}
