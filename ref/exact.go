package ref

import (
	"math"

	"github.com/offcard/offcard/bf16"
)

// The fused multiply-add guard.
//
// The canonical order rounds twice per term: p = float32(a·x), then
// acc + p. A fused multiply-add rounds once: round(acc + a·x). The two
// agree whenever the product a·x is exactly representable in float32,
// because then p == a·x and both round the same real number acc + a·x.
//
// For bf16 a and x (8-bit significands) the product has at most 16
// significant bits, so it is exact unless it leaves float32's normal range.
// With E the biased exponent field (1..254 for a normal value), a normal
// value lies in [2^(E-127), 2^(E-126)), so a product of two normal values
// lies in [2^(Ea+Ex-254), 2^(Ea+Ex-252)). It is therefore a normal float32
// (no underflow) when Ea+Ex >= 128, and below 2^128 (no overflow: the
// largest 16-bit significand below 2^128 is representable) when
// Ea+Ex <= 380. Zeros give exact (signed) zero products either way.
// Denormals, infinities and NaNs are excluded outright.
//
// expRange summarises a vector by the smallest and largest exponent field
// of its nonzero values, so that one comparison per (matrix part, batch)
// decides whether every product of a matrix-vector product is exact.
// TestExactProductsGuard checks the bounds over every exponent pair.

// expRange is the exponent-field range of the nonzero values of a vector
// of widened bf16 values. bad is set if any value is a denormal, an
// infinity, a NaN, or (for float32 input) not a widened bf16. An all-zero
// vector has lo > hi.
type expRange struct {
	lo, hi int
	bad    bool
}

// emptyRange is the range of a vector with no nonzero values.
var emptyRange = expRange{lo: math.MaxInt32, hi: math.MinInt32}

// union is the range of the concatenation of two vectors.
func (r expRange) union(s expRange) expRange {
	return expRange{lo: min(r.lo, s.lo), hi: max(r.hi, s.hi), bad: r.bad || s.bad}
}

// bf16Range is the expRange of v.
func bf16Range(v []bf16.BF16) expRange {
	// The magnitudes m = bits & 0x7FFF order like the values' sizes; the
	// smallest nonzero one is found as min(m-1)+1 with 0-1 wrapping to the
	// top, which keeps the loop free of branches.
	lo1, hi, done := minMaxFast(v)
	for _, b := range v[done:] {
		m := uint16(b) & 0x7FFF
		lo1 = min(lo1, m-1)
		hi = max(hi, m)
	}
	if hi == 0 {
		return emptyRange
	}
	lo := lo1 + 1
	r := expRange{lo: int(lo >> 7), hi: int(hi >> 7)}
	r.bad = r.lo == 0 || r.hi == 0xFF
	return r
}

// f32Range is the expRange of v, whose values should be widened bf16.
func f32Range(v []float32) expRange {
	var lo1 uint32 = math.MaxUint32
	var hi, low uint32
	for _, f := range v {
		b := math.Float32bits(f)
		low |= b
		m := b & 0x7FFF_FFFF
		lo1 = min(lo1, m-1)
		hi = max(hi, m)
	}
	if hi == 0 {
		return expRange{lo: emptyRange.lo, hi: emptyRange.hi, bad: low&0xFFFF != 0}
	}
	lo := lo1 + 1
	r := expRange{lo: int(lo >> 23), hi: int(hi >> 23)}
	r.bad = r.lo == 0 || r.hi == 0xFF || low&0xFFFF != 0
	return r
}

// exactProducts reports whether every product of a value of a vector with
// range a and a value of a vector with range b is exact in float32, so
// that a fused multiply-add gives the bits of the canonical order.
func exactProducts(a, b expRange) bool {
	if a.bad || b.bad {
		return false
	}
	if a.lo > a.hi || b.lo > b.hi {
		return true // one side is all zeros
	}
	return a.lo+b.lo >= 128 && a.hi+b.hi <= 380
}
