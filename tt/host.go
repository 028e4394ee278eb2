package tt

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/offcard/offcard/bf16"
)

// HostTensor is a tensor in host memory (a ttnn tensor on host storage).
// Data holds the logical elements in row-major order, little-endian, each
// DType.Size() bytes: len(Data) == volume(Shape) * DType.Size(). Layout is
// the page config the host tensor claims (ttnn host tensors carry one), which
// WriteHost compares with the device tensor's (§7); the bytes are always
// logical, the device tilizes and pads them.
type HostTensor struct {
	Shape  []int
	DType  DType
	Layout Layout
	Data   []byte
}

// Volume is the number of elements.
func (h HostTensor) Volume() int {
	v := 1
	for _, d := range h.Shape {
		v *= d
	}
	return v
}

// Check reports a malformed host tensor (wrong byte count, bad dtype).
func (h HostTensor) Check() error {
	if !h.DType.Valid() {
		return fmt.Errorf("tt: host tensor has invalid dtype %v", h.DType)
	}
	if want := h.Volume() * h.DType.Size(); len(h.Data) != want {
		return fmt.Errorf("tt: host tensor %v %v holds %d bytes, want %d", h.Shape, h.DType, len(h.Data), want)
	}
	return nil
}

func cloneShape(s []int) []int { return append([]int(nil), s...) }

// HostBF16 builds a BF16 host tensor.
func HostBF16(shape []int, layout Layout, v []bf16.BF16) HostTensor {
	b := make([]byte, 2*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(x))
	}
	return HostTensor{Shape: cloneShape(shape), DType: BF16, Layout: layout, Data: b}
}

// HostFP32 builds an FP32 host tensor.
func HostFP32(shape []int, layout Layout, v []float32) HostTensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return HostTensor{Shape: cloneShape(shape), DType: FP32, Layout: layout, Data: b}
}

// HostInt32 builds an INT32 host tensor.
func HostInt32(shape []int, layout Layout, v []int32) HostTensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return HostTensor{Shape: cloneShape(shape), DType: INT32, Layout: layout, Data: b}
}

// HostUint32 builds a UINT32 host tensor.
func HostUint32(shape []int, layout Layout, v []uint32) HostTensor {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return HostTensor{Shape: cloneShape(shape), DType: UINT32, Layout: layout, Data: b}
}

// BF16s decodes the data as BF16 values (any 2-byte dtype is reinterpreted).
func (h HostTensor) BF16s() []bf16.BF16 {
	v := make([]bf16.BF16, len(h.Data)/2)
	for i := range v {
		v[i] = bf16.BF16(binary.LittleEndian.Uint16(h.Data[2*i:]))
	}
	return v
}

// Int32s decodes the data as int32 values (any 4-byte dtype is reinterpreted).
func (h HostTensor) Int32s() []int32 {
	v := make([]int32, len(h.Data)/4)
	for i := range v {
		v[i] = int32(binary.LittleEndian.Uint32(h.Data[4*i:]))
	}
	return v
}

// Uint32s decodes the data as uint32 values.
func (h HostTensor) Uint32s() []uint32 {
	v := make([]uint32, len(h.Data)/4)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(h.Data[4*i:])
	}
	return v
}

// Float32s decodes the data as float32 values.
func (h HostTensor) Float32s() []float32 {
	v := make([]float32, len(h.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(h.Data[4*i:]))
	}
	return v
}
