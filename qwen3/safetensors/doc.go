// Package safetensors reads and writes Hugging Face safetensors files,
// validating them exactly as the reference Rust reader
// (SafeTensors::read_metadata) does, and a little more strictly where Go's
// encoding/json would otherwise be lax.
//
// File layout: an 8-byte little-endian header length N, N bytes of UTF-8
// JSON, then the byte buffer. The JSON maps each tensor name to an object
// with exactly the keys "dtype", "shape" and "data_offsets", plus an optional
// "__metadata__" object of string values.
//
// Contract of Parse (and Open):
//   - the input has at least 8 bytes; N ≤ 100,000,000 (checked before any
//     allocation); 8+N ≤ len(input);
//   - the header is valid UTF-8 and one JSON object, optionally followed by
//     whitespace; keys are matched byte-exactly (no case folding), duplicate
//     keys at any level are rejected, unknown keys inside a tensor entry are
//     rejected, "__metadata__" holds only string values;
//   - dtype is one of the names in DTypes; shape entries and offsets are
//     non-negative base-10 integers (no sign, fraction or exponent);
//   - sorted by data_offsets, the tensors start at 0 and are contiguous (gaps
//     and overlaps are rejected), end ≥ begin, the element count and bit size
//     are computed with overflow checks, the bit size is a multiple of 8 and
//     equals 8·(end−begin);
//   - the last end + 8 + N equals len(input) exactly: no trailing bytes.
//
// After a successful Parse every Tensor.Data is an in-bounds sub-slice of
// the input (no copy). Data must be treated as read-only.
//
// Open holds the file's bytes read-only: on Linux it reads them into
// anonymous memory advised for transparent huge pages (a decoder streams
// every weight at every step, and 4 KiB pages cost it a TLB miss per
// page), unless the file is larger than half the memory available, which
// it maps instead; elsewhere it maps the file (or reads it, where Go has
// no mmap). Alignment is not required: a reader that
// reinterprets Data as wider elements must check it (the reference writer,
// and Write, align every tensor to its element size).
//
// Every validation failure is an *Error carrying the rule (a Kind named
// after the Rust reader's error) and, where one is involved, the tensor.
//
// Write lays a file out as the reference writer does: tensors sorted by
// dtype (descending in the reference's alignment order) then by name,
// packed contiguously from offset 0, header padded with spaces to a
// multiple of 8.
//
// ParseIndex reads a sharded checkpoint's model.safetensors.index.json.
package safetensors
