package ref

import (
	"math"
	"sync"

	"github.com/offcard/offcard/bf16"
)

// Lanes is the number of float32 accumulators of the canonical reduction
// order (see Dot).
const Lanes = 16

// R rounds a float32 to bf16 and widens it back (the R(·) of the numerics notes).
func r(f float32) float32 { return bf16.Round(f) }

// reduceLanes folds the 16 lane accumulators in the canonical tree order:
// for h = 8, 4, 2, 1: acc[l] += acc[l+h] for l < h. The result is acc[0].
// Written out (the loop costs more than the adds at the reduction lengths
// of the tiny model); the same additions in the same order.
func reduceLanes(acc *[Lanes]float32) float32 {
	a0, a1, a2, a3 := acc[0]+acc[8], acc[1]+acc[9], acc[2]+acc[10], acc[3]+acc[11]
	a4, a5, a6, a7 := acc[4]+acc[12], acc[5]+acc[13], acc[6]+acc[14], acc[7]+acc[15]
	a0, a1, a2, a3 = a0+a4, a1+a5, a2+a6, a3+a7
	a0, a1 = a0+a2, a1+a3
	return a0 + a1
}

// Dot returns the dot product of a and b (len(b) >= len(a)) in the canonical
// accumulation order, which is the numerics contract of this package:
//
//	acc[j%16] += float32(a[j]*b[j])   for j = 0, 1, ..., len(a)-1
//	for h = 8, 4, 2, 1: acc[l] += acc[l+h] for l < h
//	result = acc[0]
//
// Every product of two bf16 values is exact in float32, and the explicit
// float32 conversion forbids the compiler to fuse the multiply into the add.
// The order depends only on the length. Any other implementation (assembly,
// the simulator) must reproduce it bit for bit.
func Dot(a, b []bf16.BF16) float32 {
	n := len(a)
	b = b[:n]
	var acc [Lanes]float32
	j := 0
	if n >= Lanes {
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		var a8, a9, a10, a11, a12, a13, a14, a15 float32
		for ; j+Lanes <= n; j += Lanes {
			x := a[j : j+Lanes : j+Lanes]
			y := b[j : j+Lanes : j+Lanes]
			a0 += float32(x[0].Float32() * y[0].Float32())
			a1 += float32(x[1].Float32() * y[1].Float32())
			a2 += float32(x[2].Float32() * y[2].Float32())
			a3 += float32(x[3].Float32() * y[3].Float32())
			a4 += float32(x[4].Float32() * y[4].Float32())
			a5 += float32(x[5].Float32() * y[5].Float32())
			a6 += float32(x[6].Float32() * y[6].Float32())
			a7 += float32(x[7].Float32() * y[7].Float32())
			a8 += float32(x[8].Float32() * y[8].Float32())
			a9 += float32(x[9].Float32() * y[9].Float32())
			a10 += float32(x[10].Float32() * y[10].Float32())
			a11 += float32(x[11].Float32() * y[11].Float32())
			a12 += float32(x[12].Float32() * y[12].Float32())
			a13 += float32(x[13].Float32() * y[13].Float32())
			a14 += float32(x[14].Float32() * y[14].Float32())
			a15 += float32(x[15].Float32() * y[15].Float32())
		}
		acc = [Lanes]float32{a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15}
	}
	for l := 0; j < n; j, l = j+1, l+1 {
		acc[l] += float32(a[j].Float32() * b[j].Float32())
	}
	return reduceLanes(&acc)
}

// DotWidened is Dot(a, b) for a b given already widened to float32
// (x[j] == b[j].Float32(), exactly): the same lanes and order, bit for bit,
// through the AVX2 path where there is one. It spares callers that reuse one
// input across many rows (a matrix-vector product) the per-product widening.
// len(x) must be at least len(a).
func DotWidened(a []bf16.BF16, x []float32) float32 { return dotRow(a, x) }

// dotF is Dot with b already widened to float32 (xf[j] == b[j].Float32()).
// Widening is exact, so dotF(a, xf) == Dot(a, b) bit for bit.
func dotF(a []bf16.BF16, xf []float32) float32 {
	n := len(a)
	xf = xf[:n]
	var acc [Lanes]float32
	j := 0
	if n >= Lanes {
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		var a8, a9, a10, a11, a12, a13, a14, a15 float32
		for ; j+Lanes <= n; j += Lanes {
			x := a[j : j+Lanes : j+Lanes]
			y := xf[j : j+Lanes : j+Lanes]
			a0 += float32(x[0].Float32() * y[0])
			a1 += float32(x[1].Float32() * y[1])
			a2 += float32(x[2].Float32() * y[2])
			a3 += float32(x[3].Float32() * y[3])
			a4 += float32(x[4].Float32() * y[4])
			a5 += float32(x[5].Float32() * y[5])
			a6 += float32(x[6].Float32() * y[6])
			a7 += float32(x[7].Float32() * y[7])
			a8 += float32(x[8].Float32() * y[8])
			a9 += float32(x[9].Float32() * y[9])
			a10 += float32(x[10].Float32() * y[10])
			a11 += float32(x[11].Float32() * y[11])
			a12 += float32(x[12].Float32() * y[12])
			a13 += float32(x[13].Float32() * y[13])
			a14 += float32(x[14].Float32() * y[14])
			a15 += float32(x[15].Float32() * y[15])
		}
		acc = [Lanes]float32{a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15}
	}
	for l := 0; j < n; j, l = j+1, l+1 {
		acc[l] += float32(a[j].Float32() * xf[j])
	}
	return reduceLanes(&acc)
}

// MatVec computes dst[o] = R(Dot(w[o*cols:(o+1)*cols], x)) for every row o,
// with rows = len(dst), cols = len(x) and w row-major [rows, cols] (Hugging
// Face's [out, in] layout of a linear weight).
func MatVec(dst, w, x []bf16.BF16) {
	cols := len(x)
	_ = w[:len(dst)*cols]
	for o := range dst {
		dst[o] = bf16.FromFloat32(Dot(w[o*cols:(o+1)*cols], x))
	}
}

// MatRows computes dsts[b][o] = R(Dot(w[o*cols:(o+1)*cols], x_b)) for every
// row o < len(w)/cols and input b, where xs[b] holds input b widened to
// float32 (cols values): MatVec bit for bit, each weight row read once for
// the whole batch.
func MatRows(dsts [][]bf16.BF16, w []bf16.BF16, xs [][]float32, cols int) {
	if len(xs) == 0 || cols == 0 {
		return
	}
	rows := len(w) / cols
	for b := range xs {
		_, _ = xs[b][:cols], dsts[b][:rows]
	}
	matRowsF(dsts, w, xs, cols, 0, rows, false)
}

// matRowsF computes rows lo..hi-1 of w·x for each (x, dst) pair, with every
// x already widened: dsts[b][o] = R(dotF(row o, xs[b])). The weight row is
// reused across the batch while it is in cache. Bit-identical to MatVec.
// exact may be true only if exactProducts holds for the rows and every x
// (it lets an assembly path fuse multiply and add; see exact.go).
func matRowsF(dsts [][]bf16.BF16, w []bf16.BF16, xs [][]float32, cols, lo, hi int, exact bool) {
	if matRowsFast(dsts, w, xs, cols, lo, hi, exact) {
		return
	}
	for o := lo; o < hi; o++ {
		row := w[o*cols : (o+1)*cols : (o+1)*cols]
		b := 0
		var r4 [4]float32
		for ; b+4 <= len(xs); b += 4 {
			dotRowX4(row, xs[b:b+4], &r4)
			dsts[b][o] = bf16.FromFloat32(r4[0])
			dsts[b+1][o] = bf16.FromFloat32(r4[1])
			dsts[b+2][o] = bf16.FromFloat32(r4[2])
			dsts[b+3][o] = bf16.FromFloat32(r4[3])
		}
		for ; b < len(xs); b++ {
			dsts[b][o] = bf16.FromFloat32(dotRow(row, xs[b]))
		}
	}
}

// RMSNorm computes Qwen3RMSNorm over all of x: with var = Dot(x, x)/n and
// s = float32(1/sqrt(var+eps)), y = R(x·s) and dst = R(weight·y) (two
// roundings, as HF's eager path). dst may alias x.
func RMSNorm(dst, x, weight []bf16.BF16, eps float32) {
	n := len(x)
	dst = dst[:n]
	weight = weight[:n]
	if rmsNormFast(dst, x, weight, eps) {
		return
	}
	rmsNormGo(dst, x, weight, eps)
}

// rmsNormGo is RMSNorm in pure Go (len(dst) and len(weight) equal to
// len(x)): the definition every assembly path must equal bit for bit.
func rmsNormGo(dst, x, weight []bf16.BF16, eps float32) {
	n := len(x)
	dst = dst[:n]
	weight = weight[:n]
	s := rmsInvScale(Dot(x, x), n, eps)
	for i, xi := range x {
		y := r(xi.Float32() * s)
		dst[i] = bf16.FromFloat32(weight[i].Float32() * y)
	}
}

// rmsInvScale is RMSNorm's s for a sum of squares sumSq = Dot(x, x) over
// n elements: with var = sumSq/n, float32(1/sqrt(var+eps)).
func rmsInvScale(sumSq float32, n int, eps float32) float32 {
	v := sumSq / float32(n)
	return float32(1 / math.Sqrt(float64(v+eps)))
}

// RopeTable fills cos and sin (len headDim each) for position pos as HF's
// default rotary embedding does: inv_freq[i] = 1/theta^(2i/headDim) in
// float32 (the power taken in float64 and rounded to float32), freq =
// float32(pos)·inv_freq[i] in float32, cos = R(float32(cos(freq))) and
// likewise sin, duplicated at i and i+headDim/2.
func RopeTable(theta float64, headDim, pos int, cos, sin []bf16.BF16) {
	half := headDim / 2
	cos = cos[:headDim]
	sin = sin[:headDim]
	fp := float32(pos)
	for i := 0; i < half; i++ {
		e := float32(2*i) / float32(headDim)
		p := float32(math.Pow(theta, float64(e)))
		inv := 1 / p
		f := fp * inv
		c := bf16.FromFloat32(float32(math.Cos(float64(f))))
		s := bf16.FromFloat32(float32(math.Sin(float64(f))))
		cos[i], cos[i+half] = c, c
		sin[i], sin[i+half] = s, s
	}
}

// Rope applies the half-split (rotate_half) rotary embedding to one head:
// rot[i] = -x[i+half], rot[i+half] = x[i], dst = R(R(x·cos) + R(rot·sin)).
// dst may alias x.
func Rope(dst, x, cos, sin []bf16.BF16) {
	n := len(x)
	dst = dst[:n]
	cos = cos[:n]
	sin = sin[:n]
	if ropeFast(dst, x, cos, sin) {
		return
	}
	ropeGo(dst, x, cos, sin)
}

// ropeGo is Rope in pure Go (dst, cos and sin as long as x): the
// definition every assembly path must equal bit for bit.
func ropeGo(dst, x, cos, sin []bf16.BF16) {
	n := len(x)
	half := n / 2
	dst = dst[:n]
	cos = cos[:n]
	sin = sin[:n]
	for i := 0; i < half; i++ {
		x0, x1 := x[i].Float32(), x[i+half].Float32()
		lo := r(x0*cos[i].Float32()) + r(-x1*sin[i].Float32())
		hi := r(x1*cos[i+half].Float32()) + r(x0*sin[i+half].Float32())
		dst[i] = bf16.FromFloat32(lo)
		dst[i+half] = bf16.FromFloat32(hi)
	}
}

// Add computes dst = R(a + b) elementwise. dst may alias a or b.
func Add(dst, a, b []bf16.BF16) {
	n := len(dst)
	a, b = a[:n], b[:n]
	if addFast(dst, a, b) {
		return
	}
	addGo(dst, a, b)
}

// addGo is Add in pure Go: the definition of every assembly path.
func addGo(dst, a, b []bf16.BF16) {
	n := len(dst)
	a, b = a[:n], b[:n]
	for i := range dst {
		dst[i] = bf16.FromFloat32(a[i].Float32() + b[i].Float32())
	}
}

// Silu returns g/(1+exp(-g)) in float32, the exponential taken in float64
// and rounded to float32.
func Silu(g float32) float32 {
	e := float32(math.Exp(float64(-g)))
	return g / (1 + e)
}

// SiluMul computes dst = R(R(silu(gate))·up) elementwise (the SwiGLU
// activation of Qwen3's MLP). dst may alias gate or up.
//
// R(silu(gate)) depends on the 16 bits of the gate only, so it is read from
// a table of all 65536 gate patterns built once with the same expression
// (bit-identical by construction; TestSiluTable checks every entry).
func SiluMul(dst, gate, up []bf16.BF16) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	t := siluTable()
	if siluMulFast(dst, gate, up, t) {
		return
	}
	siluMulGo(dst, gate, up, t)
}

// siluMulGo is SiluMul in pure Go with the table t = siluTable(): the
// definition of every assembly path.
func siluMulGo(dst, gate, up []bf16.BF16, t *[1 << 16]float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	for i := range dst {
		dst[i] = bf16.FromFloat32(t[gate[i]] * up[i].Float32())
	}
}

// siluTable maps every bf16 gate pattern g to R(silu(g)) as float32.
var siluTable = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for g := range t {
		t[g] = r(Silu(bf16.BF16(g).Float32()))
	}
	return t
})

// AttnScale is the softmax scale of a head of size headDim: float32(1/sqrt(headDim)).
func AttnScale(headDim int) float32 { return float32(1 / math.Sqrt(float64(headDim))) }

// Attend computes one query head's attention over n cached positions, with
// q of length headDim, k and v contiguous [n, headDim] and dst of length
// headDim. scratch must hold at least n float32s; it receives the
// probabilities p_t (bf16 values widened).
//
//	S_t = R(R(Dot(q, k_t))·scale)                 (scale applied in float32)
//	m = max_t S_t;  e_t = float32(exp(S_t - m))
//	sum = Σ e_t in the Dot lane order over t      (acc[t%16], tree reduction)
//	p_t = R(e_t / sum)
//	dst[d] = R(Σ_t p_t·v[t][d])                   (Dot order over t)
//
// so dst[d] equals R(Dot(p, column d of v)) bit for bit.
func Attend(dst, q, k, v []bf16.BF16, n int, scale float32, scratch []float32) {
	hd := len(q)
	dst = dst[:hd]
	k = k[:n*hd]
	v = v[:n*hd]
	p := scratch[:n]
	if n == 0 {
		for d := range dst {
			dst[d] = 0
		}
		return
	}
	// q widened once: dotRow(k_t, qf) is Dot(k_t, q) bit for bit (Dot's
	// products commute exactly), on the vector path where there is one.
	var qbuf [512]float32
	var qf []float32
	if hd <= len(qbuf) {
		qf = qbuf[:hd]
	} else {
		qf = make([]float32, hd)
	}
	bf16.ToFloat32s(qf, q)
	for t := dotRowsFast(p, k, qf, hd, n); t < n; t++ {
		p[t] = dotRow(k[t*hd:(t+1)*hd], qf)
	}
	// The softmax, each loop in assembly where there is a path: the fast
	// exponential loop leaves groups of 16 holding a NaN (and the tail) to
	// the loop here, which continues the same lanes.
	m, ok := scoresFast(p, scale)
	if !ok {
		m = float32(math.Inf(-1))
		for t := 0; t < n; t++ {
			s := r(r(p[t]) * scale)
			p[t] = s
			if s > m {
				m = s
			}
		}
	}
	var acc [Lanes]float32
	for t := 0; t < n; {
		t = expSumFast(p, t, m, &acc)
		for e := min(t+Lanes, n); t < e; t++ {
			x := float32(math.Exp(float64(p[t] - m)))
			p[t] = x
			acc[t%Lanes] += x
		}
	}
	sum := reduceLanes(&acc)
	if !normFast(p, sum) {
		for t := 0; t < n; t++ {
			p[t] = r(p[t] / sum)
		}
	}
	if !attendOutFast(dst, p, v, n, hd) {
		attendOut(dst, p, v, n, hd)
	}
}

// attendOut is Attend's output: dst[d] = R(reduceLanes over lanes l of
// the sum over t ≡ l (mod 16), t increasing, of p[t]·v[t][d]).
func attendOut(dst []bf16.BF16, p []float32, v []bf16.BF16, n, hd int) {
	// Columns are processed in chunks of 8 so that v is read row by row;
	// each (lane, d) accumulator still sums over t in increasing order.
	const chunk = 8
	for d0 := 0; d0 < hd; d0 += chunk {
		w := min(chunk, hd-d0)
		var ac [Lanes][chunk]float32
		for t := 0; t < n; t++ {
			pt := p[t]
			row := v[t*hd+d0 : t*hd+d0+w]
			a := &ac[t%Lanes]
			for dd, x := range row {
				a[dd] += float32(pt * x.Float32())
			}
		}
		for dd := 0; dd < w; dd++ {
			var lane [Lanes]float32
			for l := range lane {
				lane[l] = ac[l][dd]
			}
			dst[d0+dd] = bf16.FromFloat32(reduceLanes(&lane))
		}
	}
}

// Embedding copies row id of table (row width len(dst)) into dst.
func Embedding(dst []bf16.BF16, table []bf16.BF16, id int) {
	h := len(dst)
	copy(dst, table[id*h:(id+1)*h])
}
