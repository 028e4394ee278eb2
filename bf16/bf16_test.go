package bf16

import (
	"bytes"
	"math"
	"testing"
)

// Vectors from the numerics notes §3.2.
func TestFromFloat32Vectors(t *testing.T) {
	cases := []struct {
		in   uint32
		want BF16
	}{
		{0x3F800000, 0x3F80},
		{0x3F808000, 0x3F80}, // tie, to even
		{0x3F818000, 0x3F82}, // tie, to even (up)
		{0x3F808008, 0x3F81}, // just above the tie
		{0x41A08000, 0x41A0}, // 20.0625 -> 20.0
		{0x41A18000, 0x41A2}, // 20.1875 -> 20.25
		{0x3DCCCCCD, 0x3DCD}, // 0.1
		{0x3DB504F3, 0x3DB5}, // 1/sqrt(128)
		{0x7F7F7FFF, 0x7F7F}, // max finite
		{0x7F7F8000, 0x7F80}, // overflow to +Inf
		{0x7F800000, 0x7F80}, // +Inf
		{0xFF800000, 0xFF80}, // -Inf
		{0x80000000, 0x8000}, // -0
		{0x7FC00001, 0x7FC0}, // NaN
		{0xFFC00000, 0x7FC0}, // negative NaN
		{0x7F800001, 0x7FC0}, // signalling NaN must not become Inf
		{0x7FFFFFFF, 0x7FC0}, // NaN with big payload must not wrap to -0
		{0x00018000, 0x0002}, // subnormal tie
		{0x00008000, 0x0000}, // subnormal tie to even
	}
	for _, c := range cases {
		if got := FromFloat32(math.Float32frombits(c.in)); got != c.want {
			t.Errorf("FromFloat32(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
}

func TestWideningIsExact(t *testing.T) {
	for u := 0; u < 1<<16; u++ {
		b := BF16(u)
		f := b.Float32()
		if math.Float32bits(f) != uint32(u)<<16 {
			t.Fatalf("%#04x widened to %#08x", u, math.Float32bits(f))
		}
		if b.IsNaN() {
			if FromFloat32(f) != QuietNaN {
				t.Fatalf("NaN %#04x did not round to quiet NaN", u)
			}
			continue
		}
		if FromFloat32(f) != b {
			t.Fatalf("round trip of %#04x gave %#04x", u, FromFloat32(f))
		}
	}
}

// ToFloat32s widens every element, at every length (its four-at-a-time
// body and its tail), and writes nothing past len(src).
func TestToFloat32s(t *testing.T) {
	src := make([]BF16, 1<<16)
	for u := range src {
		src[u] = BF16(u)
	}
	for n := 0; n <= 40; n++ {
		for _, off := range []int{0, 1, 3, 1 << 15, 1<<16 - 40} {
			dst := make([]float32, n+1)
			dst[n] = -1
			ToFloat32s(dst, src[off:off+n])
			for i := 0; i < n; i++ {
				if math.Float32bits(dst[i]) != uint32(off+i)<<16 {
					t.Fatalf("n %d: element %d of %#04x: %#08x", n, i, off+i, math.Float32bits(dst[i]))
				}
			}
			if dst[n] != -1 {
				t.Fatalf("n %d: wrote past the end", n)
			}
		}
	}
	all := make([]float32, len(src))
	ToFloat32s(all, src)
	for u, f := range all {
		if math.Float32bits(f) != uint32(u)<<16 {
			t.Fatalf("%#04x widened to %#08x", u, math.Float32bits(f))
		}
	}
}

// Narrow undoes ToFloat32s for every pattern (NaN payloads too), keeps
// the top 16 bits of other values (truncating, not rounding), and writes
// nothing past len(src).
func TestNarrow(t *testing.T) {
	src := make([]BF16, 1<<16)
	for u := range src {
		src[u] = BF16(u)
	}
	wide := make([]float32, len(src))
	ToFloat32s(wide, src)
	back := make([]BF16, len(src)+1)
	back[len(src)] = 0x1234
	Narrow(back, wide)
	for u := range src {
		if back[u] != src[u] {
			t.Fatalf("%#04x came back as %#04x", u, back[u])
		}
	}
	if back[len(src)] != 0x1234 {
		t.Fatal("wrote past the end")
	}
	var one [1]BF16
	Narrow(one[:], []float32{math.Float32frombits(0x3F80FFFF)}) // rounds up to 0x3F81
	if one[0] != 0x3F80 {
		t.Fatalf("0x3F80FFFF narrowed to %#04x, want the truncation 0x3F80", one[0])
	}
}

// Every float32 rounds to one of its two bf16 neighbours, the nearer one, and
// on a tie the even one. Checked on a dense sweep against float64 arithmetic.
func TestRoundingIsNearestEven(t *testing.T) {
	for u := uint32(0); u < 0x7F7F8000; u += 0x3FF1 {
		f := math.Float32frombits(u)
		got := FromFloat32(f)
		lo := BF16(u >> 16)
		hi := lo + 1
		dl := float64(f) - float64(lo.Float32())
		dh := float64(hi.Float32()) - float64(f)
		want := lo
		if dh < dl || (dh == dl && lo&1 == 1) {
			want = hi
		}
		if got != want {
			t.Fatalf("FromFloat32(%#08x) = %#04x, want %#04x", u, got, want)
		}
	}
}

func TestULP(t *testing.T) {
	cases := []struct {
		v    float32
		want float32
	}{
		{0.75, 0.00390625},
		{1, 0.0078125},
		{1.5, 0.0078125},
		{5, 0.03125},
		{20, 0.125},
		{-20, 0.125},
		{40, 0.25},
		{100, 0.5},
		{0, float32(math.Ldexp(1, -133))},
	}
	for _, c := range cases {
		if got := ULP(FromFloat32(c.v)); got != c.want {
			t.Errorf("ULP(%v) = %v, want %v", c.v, got, c.want)
		}
	}
	if !math.IsInf(float64(ULP(PosInf)), 1) || !math.IsNaN(float64(ULP(QuietNaN))) {
		t.Error("ULP of Inf/NaN")
	}
	if got := ULP(MaxValue); got != float32(math.Ldexp(1, 120)) {
		t.Errorf("ULP(max) = %v", got)
	}
}

func TestSteps(t *testing.T) {
	cases := []struct {
		a, b BF16
		want int
	}{
		{0x41A0, 0x41A2, 2}, // 20 vs 20.25
		{0x417F, 0x4180, 1}, // across a binade
		{0x0000, 0x8000, 0}, // +0 vs -0
		{0x0001, 0x8001, 2}, // smallest subnormals of either sign
		{0x3F80, 0x3F80, 0},
		// Across zero, in steps of the larger magnitude (issue 33: 0.7646
		// nats were 31,601 steps): 1 and -1 are 2 / 2^-7 apart.
		{0x3F80, 0xBF80, 256},
		{0x3F00, FromFloat32(-0.2646), 196}, // 0.5 and -0.2646: ⌈0.7646 / 2^-8⌉
		{0x3F00, 0x0000, 128},               // 0.5 and +0: 0.5 / 2^-8
		{0x3F00, 0x8000, 128},               // and -0
		{0x3F80, 0x8001, 128},               // 1 and the smallest negative subnormal: as 1 and 0
		{0x7F7F, 0xFF7F, 510},               // the widest finite gap across zero: 2·(2^8-1)
		{0x7F80, 0x3F80, 0x7F80 - 0x3F80},   // +Inf, same sign: counted
		{0x7F80, 0xBF80, math.MaxInt32},     // +Inf across zero
		{QuietNaN, 0x3F80, math.MaxInt32},
		{0x4040, 0x3F3D, 0x4040 - 0x3F3D}, // 3 and 0.738, same sign: 259 values (unchanged)
	}
	for _, c := range cases {
		if got := Steps(c.a, c.b); got != c.want {
			t.Errorf("Steps(%#04x,%#04x) = %d, want %d", c.a, c.b, got, c.want)
		}
		if Steps(c.b, c.a) != c.want {
			t.Errorf("Steps not symmetric for %#04x,%#04x", c.a, c.b)
		}
	}
	// Key is monotone over all non-NaN values.
	prev := float32(math.Inf(-1))
	prevKey := Key(NegInf)
	for k := int32(-0x7F80); k <= 0x7F80; k++ {
		var b BF16
		if k < 0 {
			b = BF16(uint16(-k) | 0x8000)
		} else {
			b = BF16(k)
		}
		if Key(b) != k {
			t.Fatalf("Key(%#04x) = %d, want %d", b, Key(b), k)
		}
		if b.Float32() < prev || Key(b) < prevKey {
			t.Fatalf("not monotone at %#04x", b)
		}
		prev, prevKey = b.Float32(), Key(b)
	}
}

func TestBytesRoundTrip(t *testing.T) {
	s := []BF16{0x3F80, 0x7FC0, 0x8000, 0x1234}
	p := Bytes(s)
	if p[0] != 0x80 || p[1] != 0x3F {
		t.Fatalf("not little-endian: % x", p[:2])
	}
	for _, off := range []int{0, 1} { // aligned and misaligned
		buf := make([]byte, len(p)+1)
		copy(buf[off:], p)
		got := FromBytes(buf[off : off+len(p)])
		for i := range s {
			if got[i] != s[i] {
				t.Fatalf("offset %d: got %#04x want %#04x", off, got[i], s[i])
			}
		}
	}
}

func TestView(t *testing.T) {
	s := []BF16{0x3F80, 0x7FC0, 0x8000, 0x1234}
	if v := View(s); !bytes.Equal(v, Bytes(s)) {
		t.Fatalf("View % x, Bytes % x", v, Bytes(s))
	}
	if View(nil) != nil || View(s[:0]) != nil {
		t.Fatal("empty view not nil")
	}
}

// TestEqualIsBitwise: Equal agrees with comparing every element's bits,
// for a difference at every index (the first byte, the second byte, a NaN
// payload, the sign of zero), at lengths around a word.
func TestEqualIsBitwise(t *testing.T) {
	for n := 0; n < 40; n++ {
		a := make([]BF16, n)
		for i := range a {
			a[i] = BF16(0x3F80 + i)
		}
		if !Equal(a, append([]BF16(nil), a...)) {
			t.Fatalf("n=%d: equal slices differ", n)
		}
		for i := 0; i < n; i++ {
			for _, flip := range []BF16{0x0001, 0x0100, 0x8000} {
				b := append([]BF16(nil), a...)
				b[i] ^= flip
				if Equal(a, b) || Equal(b, a) {
					t.Fatalf("n=%d: a change of %#04x at %d is not seen", n, flip, i)
				}
			}
		}
		if n > 0 && Equal(a, a[:n-1]) {
			t.Fatalf("n=%d: slices of other lengths are equal", n)
		}
	}
	if Equal([]BF16{0x0000}, []BF16{0x8000}) || !Equal([]BF16{0x7FC1}, []BF16{0x7FC1}) {
		t.Fatal("Equal is not bitwise on zeros or NaNs")
	}
}
