//go:build amd64 && !purego

package ref

import (
	"unsafe"

	"github.com/offcard/offcard/bf16"
	"golang.org/x/sys/cpu"
)

// useAVX2 selects the AVX2 kernels and useAVX512 the AVX-512 ones (which
// take precedence; besides AVX512F and BW they use VL's masked 32-byte
// loads and stores and BMI2's BZHI for their tail masks). Tests flip them
// to compare every path with pure Go.
var (
	useAVX2   = cpu.X86.HasAVX2
	useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasBMI2
)

// HasFastPath reports whether dotRow uses an assembly kernel.
var HasFastPath = useAVX2

// dotLanesAVX2 accumulates the first n (a multiple of 16, > 0) products
// a[j]·x[j] into acc[j%16], j increasing: lanes 0-7 in one YMM register and
// 8-15 in another, a multiply then a separate add (no FMA), so each lane
// sees exactly the float32 operations of the pure-Go loop.
//
//go:noescape
func dotLanesAVX2(a *bf16.BF16, x *float32, n int, acc *[Lanes]float32)

// dotRow is the matvec inner product used by the decoder's hot loop: dotF
// (and so Dot) bit for bit, with the 16-aligned prefix in AVX2.
func dotRow(a []bf16.BF16, xf []float32) float32 {
	n := len(a)
	xf = xf[:n]
	n16 := n &^ (Lanes - 1)
	if !useAVX2 || n16 == 0 {
		return dotF(a, xf)
	}
	var acc [Lanes]float32
	if useAVX512 {
		dotLanes512(&a[0], &xf[0], n16, &acc)
	} else {
		dotLanesAVX2(&a[0], &xf[0], n16, &acc)
	}
	return finishLanes(&acc, a, xf, n16)
}

// dotRowsFast sets out[t] to dotRow(k[t*hd:(t+1)*hd], xf) for the first
// n&^3 rows through rowsN1x512 (hd a multiple of 16) and returns how many
// rows it did (0 without AVX-512).
func dotRowsFast(out []float32, k []bf16.BF16, xf []float32, hd, n int) int {
	m := n &^ 3
	if !useAVX512 || hd == 0 || hd%Lanes != 0 || m == 0 {
		return 0
	}
	k, out, xf = k[:m*hd], out[:m], xf[:hd]
	rowsN1x512(&k[0], &xf[0], hd, m, &out[0], 8*hd, 0)
	return m
}

// attnOut512 is the output half of Attend for the 16 columns at v (rows
// stride bytes apart) over n > 0 positions with probabilities p: out[d] is
// reduceLanes of the lanes acc[l][d] = sum over t ≡ l (mod 16), t
// increasing, of p[t]·v[t][d] (a multiply, then an add).
//
//go:noescape
func attnOut512(out *[16]float32, p *float32, v *bf16.BF16, stride, n int)

// attendOutFast is attendOut through attnOut512, for a head size that is
// a multiple of 16; it reports false (doing nothing) otherwise.
func attendOutFast(dst []bf16.BF16, p []float32, v []bf16.BF16, n, hd int) bool {
	if !useAVX512 || hd%16 != 0 || n == 0 {
		return false
	}
	v = v[:n*hd]
	var out [16]float32
	for d0 := 0; d0 < hd; d0 += 16 {
		attnOut512(&out, &p[0], &v[d0], 2*hd, n)
		for i, x := range out {
			dst[d0+i] = bf16.FromFloat32(x)
		}
	}
	return true
}

// finishLanes adds the products a[j]·x[j] for j >= n16 (n16 a multiple of
// 16) to the lanes, in the canonical order, and reduces them.
func finishLanes(acc *[Lanes]float32, a []bf16.BF16, x []float32, n16 int) float32 {
	x = x[:len(a)]
	for j, l := n16, 0; j < len(a); j, l = j+1, l+1 {
		acc[l] += float32(a[j].Float32() * x[j])
	}
	return reduceLanes(acc)
}

//go:noescape
func dotLanesX4AVX2(a *bf16.BF16, x *[4]*float32, n int, acc *[4][Lanes]float32)

// dotRowX4 computes out[i] = dotRow(a, xs[i]) for i < 4, bit for bit,
// reading the row once.
func dotRowX4(a []bf16.BF16, xs [][]float32, out *[4]float32) {
	n := len(a)
	n16 := n &^ (Lanes - 1)
	xs = xs[:4]
	if !useAVX2 || n16 == 0 {
		for i := range out {
			out[i] = dotF(a, xs[i])
		}
		return
	}
	var ptrs [4]*float32
	for i := range ptrs {
		ptrs[i] = &xs[i][:n][0]
	}
	var acc [4][Lanes]float32
	dotLanesX4AVX2(&a[0], &ptrs, n16, &acc)
	for i := range out {
		x := xs[i][:n]
		ac := &acc[i]
		for j, l := n16, 0; j < n; j, l = j+1, l+1 {
			ac[l] += float32(a[j].Float32() * x[j])
		}
		out[i] = reduceLanes(ac)
	}
}

// The AVX-512 kernels (dot512_amd64.s). n is a multiple of 16; stride is
// the distance between rows in bytes; fma != 0 selects fused
// multiply-adds, allowed only when exactProducts holds.

//go:noescape
func dotLanes512(a *bf16.BF16, x *float32, n int, acc *[Lanes]float32)

//go:noescape
func rows4x1x512(a *bf16.BF16, stride int, x *float32, n int, acc *[4][Lanes]float32, fma int)

//go:noescape
func rows2x4x512(a *bf16.BF16, stride int, x *[4]*float32, n int, acc *[2][4][Lanes]float32, fma int)

//go:noescape
func rows1x8x512(a *bf16.BF16, x *[8]*float32, n int, acc *[8][Lanes]float32, fma int)

// rows2x8x512 starts its chains from *acc when carry != 0 (from zero
// otherwise), so a row's columns can be covered in blocks.
//
//go:noescape
func rows2x8x512(a *bf16.BF16, stride int, x *[8]*float32, n int, acc *[2][8][Lanes]float32, fma, carry int)

// rowsN1x512 sets out[r] to the canonical dot product of row r with x
// (reduced in assembly) for r < rows, the rows contiguous from a (stride
// 2·n bytes), n > 0 a multiple of 16, rows > 0 a multiple of 4, with a
// software prefetch of each row pf bytes ahead of where it reads.
//
//go:noescape
func rowsN1x512(a *bf16.BF16, x *float32, n, rows int, out *float32, pf, fma int)

// n1Prefetch is rowsN1x512's prefetch distance in bytes; n1Chunk is the
// number of rows per call (results staged as float32 on the stack).
var n1Prefetch = 0 // 0: one block ahead (8·cols)

// useN1 selects rowsN1x512 for batch 1 (tests and benchmarks turn it off to
// compare with the block kernels).
var useN1 = true

const n1Chunk = 256

// matRowsN1 is the batch-1, no-tail part of matRowsFast: rows lo..hi-1
// with (hi-lo)&^3 rows through rowsN1x512; it returns the first row left.
func matRowsN1(dst []bf16.BF16, w []bf16.BF16, x []float32, cols, lo, hi, fma int) int {
	n := (hi - lo) &^ 3
	dst = dst[lo : lo+n]
	var out [n1Chunk]float32
	for o := 0; o < n; o += n1Chunk {
		k := min(n1Chunk, n-o)
		pf := n1Prefetch
		if pf == 0 {
			pf = 8 * cols
		}
		rowsN1x512(&w[(lo+o)*cols], &x[0], cols, k, &out[0], pf, fma)
		round512(&dst[o : o+k][0], &out[0], k)
	}
	return lo + n
}

// perInputN1 reports whether matRowsFast takes each of n inputs in turn
// through the single-input kernel over rows lo..hi-1 of cols columns (see
// there), whole when they are all the matrix's rows: always for one
// input; for two or three over a small part; for more over a small whole
// matrix. The simulator's matrices (the tiny model's, at most 128 KiB)
// stay in the core's L2 from one launch to the next, where the
// single-input kernel takes a row a third faster than the blocked ones at
// 4 to 32 inputs (BenchmarkMatRows: 1.7 against 2.6 µs a row at 128x512).
// A chunk of a large matrix (the decoder's pool splits qwen3-0.6b's into
// parts of 64 to 128 rows at batch 8, as small) streams from memory: the
// blocked kernels read it once for four or eight inputs.
func perInputN1(n, cols, lo, hi int, whole bool) bool {
	return n == 1 || (n < 4 || whole) && (hi-lo)*2*cols <= n1SmallBytes
}

// n1SmallBytes bounds the matrix part that more than one input takes
// through the single-input kernel in turn (matRowsFast): it stays in the
// core's L2.
const n1SmallBytes = 256 << 10

// reduce512 sets out[i] = reduceLanes(lanes i) for the n lane arrays at acc.
//
//go:noescape
func reduce512(acc *float32, n int, out *float32)

// finishN rounds the results of n lane arrays (acc holds n·16 float32s)
// for row into out[i][o]: in assembly when there is no tail, through
// finishLanes otherwise.
func finishN(acc []float32, row []bf16.BF16, xs [][]float32, n16, o int, dsts [][]bf16.BF16) {
	n := len(acc) / Lanes
	if n16 == len(row) {
		var r [8]float32
		reduce512(&acc[0], n, &r[0])
		for i := range n {
			dsts[i][o] = bf16.FromFloat32(r[i])
		}
		return
	}
	for i := range n {
		dsts[i][o] = bf16.FromFloat32(finishLanes((*[Lanes]float32)(acc[i*Lanes:]), row, xs[i], n16))
	}
}

// Column blocking of the groups of eight inputs (matRows8Blocked). From
// colBlockMin columns on, eight inputs (32·cols bytes, 64 KB at 2048) no
// longer fit in the L1 cache beside the weights, and every pair of rows
// would read them again from L2. Instead the rows go in groups of
// colBlockRows and, per group, the columns in blocks of colBlock (a
// multiple of 16): each row pair's lanes are carried from one block to the
// next (rows2x8x512's carry), so every lane sees the same additions in the
// same order, and a block of the inputs (32 KB) is read from L2 once per
// group of rows. The sizes are measured (qwen3-0.6b o_proj and down_proj,
// 2048 and 3072 columns): 512-column blocks or groups of 16 rows gain less.
const (
	colBlock     = 1024
	colBlockRows = 64
	colBlockMin  = 2048
)

// matRows8Blocked computes the outputs of rows lo..hi-1 (hi-lo even) for
// the inputs xs (a multiple of eight of them) in blocks of block columns
// (a multiple of 16) and groups of group rows (even, <= colBlockRows).
func matRows8Blocked(dsts [][]bf16.BF16, w []bf16.BF16, xs [][]float32, cols, lo, hi, fma, block, group int) {
	n16 := cols &^ (Lanes - 1)
	stride := 2 * cols
	var acc [colBlockRows / 2][2][8][Lanes]float32 // 32 KB
	for g := lo; g < hi; g += group {
		ge := min(g+group, hi)
		for b := 0; b+8 <= len(xs); b += 8 {
			for c := 0; c < n16; c += block {
				var ptrs [8]*float32
				for i := range ptrs {
					ptrs[i] = &xs[b+i][c]
				}
				n, carry := min(block, n16-c), min(c, 1)
				for r := g; r < ge; r += 2 {
					rows2x8x512(&w[r*cols+c], stride, &ptrs, n, &acc[(r-g)/2], fma, carry)
				}
			}
			for r := g; r < ge; r++ {
				row := w[r*cols : (r+1)*cols]
				finishN(flat(acc[(r-g)/2][(r-g)%2][:]), row, xs[b:b+8], n16, r, dsts[b:b+8])
			}
		}
	}
}

// matRowsFast is matRowsF on the AVX-512 kernels: it walks the rows in
// blocks of four and, per block, covers the batch in groups of eight
// (two rows at a time), four (two rows) and one input (four rows), so that
// each block of weights is widened once per group while it sits in the L1
// cache (once for the whole batch up to eight sequences). The last rows
// (fewer than four) go one at a time: eight inputs, then single inputs.
// A batch of one with no column tail runs its blocks of four rows through
// matRowsN1 instead (useN1); from colBlockMin columns on, the groups of
// eight run the blocks of four rows through matRows8Blocked.
// It reports false, doing nothing, without AVX-512.
func matRowsFast(dsts [][]bf16.BF16, w []bf16.BF16, xs [][]float32, cols, lo, hi int, exact bool) bool {
	if !useAVX512 || lo >= hi {
		return useAVX512
	}
	n16 := cols &^ (Lanes - 1)
	if n16 == 0 {
		return false
	}
	fma := 0
	if exact {
		fma = 1
	}
	_ = w[:hi*cols]
	for _, x := range xs {
		_ = x[:cols] // the kernels read cols values of every input
	}
	stride := 2 * cols
	o := lo
	if useN1 && n16 == cols && perInputN1(len(xs), cols, lo, hi, lo == 0 && len(w) == hi*cols) {
		// One input streams the rows through the single-input kernel.
		// So do two or three inputs, in turn, over a small matrix part
		// (the simulator's): the blocked kernels share too little there,
		// and the rows stay in cache from one input to the next.
		// (Streamed from memory, as in a decode of qwen3-0.6b at batch 3,
		// the blocks of four rows below are faster: they read each row
		// once.) The kernel leaves the last (hi-lo)%4 rows of every input
		// to the loop of single rows at the end.
		for b, x := range xs {
			o = matRowsN1(dsts[b], w, x, cols, lo, hi, fma)
		}
	}
	b8 := 0 // the groups of eight done in column blocks for the blocks of four rows
	if len(xs) >= 8 && cols >= colBlockMin {
		b8 = len(xs) &^ 7
		matRows8Blocked(dsts, w, xs[:b8], cols, o, o+(hi-o)&^3, fma, colBlock, colBlockRows)
	}
	for ; o+4 <= hi; o += 4 {
		b := b8
		for ; b+8 <= len(xs); b += 8 {
			var ptrs [8]*float32
			for i := range ptrs {
				ptrs[i] = &xs[b+i][0]
			}
			for r := o; r < o+4; r += 2 {
				var acc [2][8][Lanes]float32
				rows2x8x512(&w[r*cols], stride, &ptrs, n16, &acc, fma, 0)
				for k := range acc {
					row := w[(r+k)*cols : (r+k+1)*cols]
					finishN(flat(acc[k][:]), row, xs[b:b+8], n16, r+k, dsts[b:b+8])
				}
			}
		}
		for ; b+4 <= len(xs); b += 4 {
			var ptrs [4]*float32
			for i := range ptrs {
				ptrs[i] = &xs[b+i][0]
			}
			for r := o; r < o+4; r += 2 {
				var acc [2][4][Lanes]float32
				rows2x4x512(&w[r*cols], stride, &ptrs, n16, &acc, fma)
				for k := range acc {
					row := w[(r+k)*cols : (r+k+1)*cols]
					finishN(flat(acc[k][:]), row, xs[b:b+4], n16, r+k, dsts[b:b+4])
				}
			}
		}
		for ; b < len(xs); b++ {
			var acc [4][Lanes]float32
			rows4x1x512(&w[o*cols], stride, &xs[b][0], n16, &acc, fma)
			for k := range acc {
				row := w[(o+k)*cols : (o+k+1)*cols]
				finishN(acc[k][:], row, xs[b:b+1], n16, o+k, dsts[b:b+1])
			}
		}
	}
	for ; o < hi; o++ {
		row := w[o*cols : (o+1)*cols]
		b := 0
		for ; b+8 <= len(xs); b += 8 {
			var ptrs [8]*float32
			for i := range ptrs {
				ptrs[i] = &xs[b+i][0]
			}
			var acc [8][Lanes]float32
			rows1x8x512(&row[0], &ptrs, n16, &acc, fma)
			finishN(flat(acc[:]), row, xs[b:b+8], n16, o, dsts[b:b+8])
		}
		for ; b < len(xs); b++ {
			var acc [Lanes]float32
			dotLanes512(&row[0], &xs[b][0], n16, &acc)
			dsts[b][o] = bf16.FromFloat32(finishLanes(&acc, row, xs[b], n16))
		}
	}
	return true
}

// flat views an array of lane arrays as one slice of float32s.
func flat(a [][Lanes]float32) []float32 {
	return unsafe.Slice(&a[0][0], len(a)*Lanes)
}

//go:noescape
func minMax512(p *bf16.BF16, n int, lo1, hi *[32]uint16)

// minMaxFast folds the first done values of v into bf16Range's lo1 and hi
// (min of m-1 and max of m, m = bits & 0x7FFF) at memory speed.
func minMaxFast(v []bf16.BF16) (lo1, hi uint16, done int) {
	done = len(v) &^ 31
	lo1 = 0xFFFF
	if !useAVX512 || done == 0 {
		return lo1, 0, 0
	}
	var l, h [32]uint16
	minMax512(&v[0], done, &l, &h)
	for k := range l {
		lo1, hi = min(lo1, l[k]), max(hi, h[k])
	}
	return lo1, hi, done
}

// sumSquares512 returns Dot(x, x) for n > 0 elements, bit for bit, and
// rmsScale512 is RMSNorm's loop dst = R(w·R(x·s)) (elem512_amd64.s).
//
//go:noescape
func sumSquares512(x *bf16.BF16, n int) float32

//go:noescape
func rmsScale512(dst, x, w *bf16.BF16, n int, s float32)

// rmsNormFast is RMSNorm through sumSquares512 and rmsScale512 (len(dst)
// and len(weight) equal to len(x)); it reports false, doing nothing,
// without AVX-512 or below rmsNormMin elements.
func rmsNormFast(dst, x, weight []bf16.BF16, eps float32) bool {
	n := len(x)
	if !useAVX512 || n < rmsNormMin {
		return false
	}
	s := rmsInvScale(sumSquares512(&x[0], n), n, eps)
	rmsScale512(&dst[:n][0], &x[0], &weight[:n][0], n, s)
	return true
}

// rmsNormMin is the shortest row rmsNormFast takes: below it the pure-Go
// loop costs about as much as the call (measured: BenchmarkElem).
const rmsNormMin = 8

// add512, siluMul512 and rope512 are Add, SiluMul (t = siluTable()) and
// Rope (half = len(x)/2) over n > 0 elements (elem512_amd64.s).
//
//go:noescape
func add512(dst, a, b *bf16.BF16, n int)

//go:noescape
func siluMul512(dst, gate, up *bf16.BF16, n int, t *[1 << 16]float32)

//go:noescape
func rope512(dst, x, cos, sin *bf16.BF16, half int)

// round512 rounds n > 0 float32 values to bf16 as bf16.FromFloat32 does
// (elem512_amd64.s).
//
//go:noescape
func round512(dst *bf16.BF16, src *float32, n int)

// The shortest rows the elementwise fast paths take (measured:
// BenchmarkElem): Add's, SiluMul's (its gather's latency makes it no
// faster than pure Go at 8 elements), and Rope's half head.
const (
	elemMin    = 8
	siluMulMin = 12
	ropeMin    = 4
)

// addFast is Add through add512 (len(a) and len(b) equal to len(dst)); it
// reports false, doing nothing, without AVX-512 or below elemMin.
func addFast(dst, a, b []bf16.BF16) bool {
	n := len(dst)
	if !useAVX512 || n < elemMin {
		return false
	}
	add512(&dst[0], &a[:n][0], &b[:n][0], n)
	return true
}

// siluMulFast is SiluMul through siluMul512, as addFast (below siluMulMin).
func siluMulFast(dst, gate, up []bf16.BF16, t *[1 << 16]float32) bool {
	n := len(dst)
	if !useAVX512 || n < siluMulMin {
		return false
	}
	siluMul512(&dst[0], &gate[:n][0], &up[:n][0], n, t)
	return true
}

// ropeFast is Rope through rope512 (dst, cos and sin at least as long as
// x); it reports false, doing nothing, without AVX-512 or for heads
// shorter than 2·ropeMin.
func ropeFast(dst, x, cos, sin []bf16.BF16) bool {
	n := len(x)
	half := n / 2
	if !useAVX512 || half < ropeMin {
		return false
	}
	rope512(&dst[:n][0], &x[0], &cos[:n][0], &sin[:n][0], half)
	return true
}

// Attend's softmax loops (softmax512_amd64.s): scaleMax512 over n > 0
// scores, expSum512 from t while whole groups of 16 are left, divRound512
// over n > 0 probabilities.
//
//go:noescape
func scaleMax512(p *float32, n int, scale float32) float32

//go:noescape
func expSum512(p *float32, t, n int, m float32, acc *[Lanes]float32) int

//go:noescape
func divRound512(p *float32, n int, s float32)

// scoresFast does Attend's score loop on p (scaled and rounded in place)
// and returns their maximum, or reports false (doing nothing).
func scoresFast(p []float32, scale float32) (float32, bool) {
	if !useAVX512 || len(p) == 0 {
		return 0, false
	}
	return scaleMax512(&p[0], len(p), scale), true
}

// expSumFast does Attend's exponential loop from t (a multiple of 16) over
// whole groups of 16 whose differences from m are all <= 0, and returns
// where it stopped (t without AVX-512).
func expSumFast(p []float32, t int, m float32, acc *[Lanes]float32) int {
	if !useAVX512 || len(p)-t < Lanes {
		return t
	}
	return expSum512(&p[0], t, len(p), m, acc)
}

// normFast does Attend's normalising loop on p, or reports false (doing
// nothing).
func normFast(p []float32, sum float32) bool {
	if !useAVX512 || len(p) == 0 {
		return false
	}
	divRound512(&p[0], len(p), sum)
	return true
}
