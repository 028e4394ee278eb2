package bf16

import (
	"math"
	"unsafe"
)

// BF16 is a bfloat16 value held as its 16-bit pattern.
type BF16 uint16

// Named bit patterns.
const (
	QuietNaN BF16 = 0x7FC0
	PosInf   BF16 = 0x7F80
	NegInf   BF16 = 0xFF80
	MaxValue BF16 = 0x7F7F // 3.3895313892515355e38
	One      BF16 = 0x3F80
)

// FromFloat32 rounds f to the nearest bfloat16, ties to even. NaN gives QuietNaN.
func FromFloat32(f float32) BF16 {
	u := math.Float32bits(f)
	if u&0x7FFFFFFF > 0x7F800000 {
		return QuietNaN
	}
	bias := uint32(0x7FFF) + (u>>16)&1
	return BF16((u + bias) >> 16)
}

// Float32 widens b to float32 exactly.
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// Bits returns the bit pattern.
func (b BF16) Bits() uint16 { return uint16(b) }

// IsNaN reports whether b is a NaN.
func (b BF16) IsNaN() bool { return b&0x7FFF > 0x7F80 }

// Round rounds f to bfloat16 and widens it back: the R(·) of the numerics notes.
func Round(f float32) float32 { return FromFloat32(f).Float32() }

// Key maps b to an integer that is monotone in b's value: +0 and -0 both map to 0.
// NaNs have no meaningful key.
func Key(b BF16) int32 {
	m := int32(b & 0x7FFF)
	if b&0x8000 != 0 {
		return -m
	}
	return m
}

// Steps is the distance between a and b in bf16 steps:
//
//   - a and b of the same sign, both nonzero: the number of representable
//     bfloat16 values between them, |Key(a) - Key(b)| (one step per value
//     passed, whatever the binade);
//   - of opposite signs, or one of them ±0 (a gap across zero): the gap in
//     steps of the larger magnitude, ⌈|a - b| / ULP(larger)⌉. Counting the
//     representable values would count every tiny and subnormal value near
//     zero (0.5 and -0.2646, 0.76 apart, are 31,601 values apart; in steps
//     of 0.5's spacing, 2^-8, they are 196). A gap across zero is so at most
//     2·2^8 = 512 steps.
//
// Equal values (and +0, -0) are 0 steps apart; a nonzero gap is at least 1
// step. A NaN, or an infinity across zero, is math.MaxInt32 steps from
// anything.
func Steps(a, b BF16) int {
	if a.IsNaN() || b.IsNaN() {
		return math.MaxInt32
	}
	ka, kb := int(Key(a)), int(Key(b))
	if (ka > 0 && kb > 0) || (ka < 0 && kb < 0) {
		return abs(ka - kb)
	}
	if ka == 0 && kb == 0 {
		return 0
	}
	larger := a
	if abs(kb) > abs(ka) {
		larger = b
	}
	u := float64(ULP(larger))
	gap := math.Abs(float64(a.Float32()) - float64(b.Float32()))
	if math.IsInf(u, 0) || math.IsInf(gap, 0) {
		return math.MaxInt32
	}
	return int(math.Ceil(gap / u))
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// ULP is the distance from |b| to the next representable value of larger
// magnitude (for the largest finite value, the spacing below it). It is NaN for
// NaN and +Inf for infinities.
func ULP(b BF16) float32 {
	switch {
	case b.IsNaN():
		return float32(math.NaN())
	case b&0x7FFF == 0x7F80:
		return float32(math.Inf(1))
	}
	m := b & 0x7FFF
	if m == MaxValue {
		return m.Float32() - (m - 1).Float32()
	}
	return (m + 1).Float32() - m.Float32()
}

// ToFloat32s widens each element of src into dst (len(dst) >= len(src)).
func ToFloat32s(dst []float32, src []BF16) {
	dst = dst[:len(src)]
	i := 0
	for ; i+4 <= len(src); i += 4 { // four at a time: one bounds check each
		s, d := src[i:i+4:i+4], dst[i:i+4:i+4]
		d[0], d[1], d[2], d[3] = s[0].Float32(), s[1].Float32(), s[2].Float32(), s[3].Float32()
	}
	for ; i < len(src); i++ {
		dst[i] = src[i].Float32()
	}
}

// Narrow is ToFloat32s' inverse: it keeps the top 16 bits of each element
// of src in dst (len(dst) >= len(src)), exact for values widened from
// bfloat16, NaN payloads included; other values are truncated, not rounded
// (FromFloat32 rounds).
func Narrow(dst []BF16, src []float32) {
	dst = dst[:len(src)]
	for i, f := range src {
		dst[i] = BF16(math.Float32bits(f) >> 16)
	}
}

// FromBytes views little-endian bytes as bfloat16 values without copying when
// the slice is 2-byte aligned, and copies otherwise. len(p) must be even.
func FromBytes(p []byte) []BF16 {
	n := len(p) / 2
	if n == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&p[0]))%2 == 0 && littleEndian {
		return unsafe.Slice((*BF16)(unsafe.Pointer(&p[0])), n)
	}
	out := make([]BF16, n)
	for i := range out {
		out[i] = BF16(uint16(p[2*i]) | uint16(p[2*i+1])<<8)
	}
	return out
}

// View returns the little-endian bytes of s: s's own memory on a
// little-endian machine (no copy: the bytes are read only, for as long as s
// is), a copy otherwise.
func View(s []BF16) []byte {
	if len(s) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 2*len(s))
	}
	return Bytes(s)
}

// Equal reports whether a and b hold the same bit patterns (so a NaN
// equals the same NaN, and +0 differs from -0), comparing memory at once.
func Equal(a, b []BF16) bool {
	if len(a) != len(b) {
		return false
	}
	return string(View(a)) == string(View(b))
}

// Bytes returns the little-endian bytes of s (a copy).
func Bytes(s []BF16) []byte {
	out := make([]byte, 2*len(s))
	for i, b := range s {
		out[2*i] = byte(b)
		out[2*i+1] = byte(b >> 8)
	}
	return out
}

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
