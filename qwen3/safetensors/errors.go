package safetensors

import "fmt"

// Kind names the rule a file broke. The names follow the reference Rust
// reader's error variants.
type Kind int

// The kinds of validation failure.
const (
	// HeaderTooSmall: the input is shorter than the 8-byte length prefix.
	HeaderTooSmall Kind = iota + 1
	// HeaderTooLarge: the header length N exceeds MaxHeaderSize.
	HeaderTooLarge
	// InvalidHeaderLength: 8+N runs past the end of the input.
	InvalidHeaderLength
	// InvalidHeader: the header is not valid UTF-8.
	InvalidHeader
	// InvalidHeaderDeserialization: the header is not JSON of the required
	// form (unknown, missing, duplicate or mistyped keys, unknown dtype,
	// non-string metadata, trailing garbage).
	InvalidHeaderDeserialization
	// InvalidOffset: a tensor's data_offsets leave a gap, overlap the
	// previous tensor, or end before they begin.
	InvalidOffset
	// ValidationOverflow: the element count or bit size overflows.
	ValidationOverflow
	// MisalignedSlice: the tensor's size in bits is not a multiple of 8.
	MisalignedSlice
	// TensorInvalidInfo: data_offsets disagree with dtype × shape.
	TensorInvalidInfo
	// MetadataIncompleteBuffer: the tensors do not cover the byte buffer
	// exactly (trailing bytes, or a buffer too short).
	MetadataIncompleteBuffer
	// InvalidTensor: Write was given a tensor it cannot store.
	InvalidTensor
)

var kindNames = map[Kind]string{
	HeaderTooSmall:               "HeaderTooSmall",
	HeaderTooLarge:               "HeaderTooLarge",
	InvalidHeaderLength:          "InvalidHeaderLength",
	InvalidHeader:                "InvalidHeader",
	InvalidHeaderDeserialization: "InvalidHeaderDeserialization",
	InvalidOffset:                "InvalidOffset",
	ValidationOverflow:           "ValidationOverflow",
	MisalignedSlice:              "MisalignedSlice",
	TensorInvalidInfo:            "TensorInvalidInfo",
	MetadataIncompleteBuffer:     "MetadataIncompleteBuffer",
	InvalidTensor:                "InvalidTensor",
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error is a validation failure: which rule, which tensor (if any), and a
// human-readable detail.
type Error struct {
	Kind   Kind
	Tensor string // empty when no single tensor is at fault
	Detail string
}

func (e *Error) Error() string {
	if e.Tensor != "" {
		return fmt.Sprintf("safetensors: tensor %q: %s (%s)", e.Tensor, e.Detail, e.Kind)
	}
	return fmt.Sprintf("safetensors: %s (%s)", e.Detail, e.Kind)
}

func errf(k Kind, tensor, format string, args ...any) *Error {
	return &Error{Kind: k, Tensor: tensor, Detail: fmt.Sprintf(format, args...)}
}
