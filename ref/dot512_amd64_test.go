//go:build amd64 && !purego

package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/offcard/offcard/bf16"
)

func need512(t *testing.T) {
	t.Helper()
	if !useAVX512 {
		t.Skip("no AVX-512 on this machine")
	}
}

// bf16Gens are the value generators of the random-pattern tests: any bit
// pattern (NaN and Inf included), denormals and zeros, typical values,
// the smallest normals.
func bf16Gens(rng *rand.Rand) []func() bf16.BF16 {
	return []func() bf16.BF16{
		func() bf16.BF16 { return bf16.BF16(rng.Uint32()) },
		func() bf16.BF16 { return bf16.BF16(rng.Uint32() & 0x807F) },
		func() bf16.BF16 { return bf16.FromFloat32(float32(rng.NormFloat64())) },
		func() bf16.BF16 { return bf16.BF16(rng.Uint32()&0x807F | 0x0080) },
	}
}

// exactGen returns values whose exponent fields lie in [lo, hi] (signs,
// mantissas and some zeros random): the guard's edge cases when lo+lo is
// 128 or hi+hi is 380.
func exactGen(rng *rand.Rand, lo, hi int) func() bf16.BF16 {
	return func() bf16.BF16 {
		if rng.IntN(16) == 0 {
			return bf16.BF16(rng.Uint32() & 0x8000) // ±0
		}
		e := lo + rng.IntN(hi-lo+1)
		return bf16.BF16(uint16(rng.Uint32())&0x807F | uint16(e)<<7)
	}
}

// checkRows runs matRowsFast on (w, xs) and compares every output with the
// pure-Go dotF, rounded.
func checkRows(t *testing.T, what string, w []bf16.BF16, xs [][]float32, rows, cols int, exact bool) {
	t.Helper()
	dsts := make([][]bf16.BF16, len(xs))
	for i := range dsts {
		dsts[i] = make([]bf16.BF16, rows)
	}
	lo := 0
	if rows > 1 {
		lo = 1 // a range that does not start at row 0
	}
	if !matRowsFast(dsts, w, xs, cols, lo, rows, exact) {
		if cols >= Lanes {
			t.Fatalf("%s: matRowsFast declined %d columns", what, cols)
		}
		return // shorter rows are left to the pure-Go loop
	}
	for b := range xs {
		for o := lo; o < rows; o++ {
			want := bf16.FromFloat32(dotF(w[o*cols:(o+1)*cols], xs[b]))
			got := dsts[b][o]
			if got != want && !(got.IsNaN() && want.IsNaN()) {
				t.Fatalf("%s: rows=%d cols=%d batch=%d exact=%v: out[%d][%d] = %#04x, pure Go %#04x",
					what, rows, cols, len(xs), exact, b, o, uint16(got), uint16(want))
			}
		}
	}
}

// Every AVX-512 kernel (groups of 8, 4 and 1 inputs, blocks of 4 rows and
// single rows, tails of any length) equals the pure-Go order bit for bit on
// random bit patterns (denormals, Inf, NaN, products that overflow) with
// the separate multiply and add; NaNs compare as a class.
func TestKernels512EqualPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(51, 52))
	gen := bf16Gens(rng)
	for trial := range 400 {
		rows := 1 + rng.IntN(11)
		cols := rng.IntN(80)
		if trial%2 == 0 {
			cols &^= Lanes - 1 // no tail: the lanes are reduced in assembly
		}
		if trial%20 == 0 {
			cols = 1024 + rng.IntN(20)
		}
		batch := 1 + rng.IntN(19)
		ga, gb := gen[rng.IntN(len(gen))], gen[rng.IntN(len(gen))]
		if trial%4 == 0 {
			// Products at the overflow edge, where a fused multiply-add
			// gives other bits: the unguarded loops must not fuse.
			ga, gb = exactGen(rng, 190, 191), exactGen(rng, 190, 191)
		}
		w := make([]bf16.BF16, rows*cols)
		for i := range w {
			w[i] = ga()
		}
		xs := make([][]float32, batch)
		for b := range xs {
			xs[b] = make([]float32, cols+rng.IntN(3)) // inputs may be longer
			for j := range xs[b] {
				xs[b][j] = gb().Float32()
			}
		}
		checkRows(t, fmt.Sprintf("trial %d (seed 51,52)", trial), w, xs, rows, cols, false)
		// Whatever the guard says is what the decoder passes.
		guard := exactProducts(bf16Range(w), f32Range(xs[0]))
		checkRows(t, fmt.Sprintf("trial %d guarded", trial), w, xs, rows, cols, guard)
	}
}

// With fused multiply-adds (exact = true), the kernels still equal the
// pure-Go order on every input the guard admits, including the edges of
// the guard (exponent sums of 128 and 380) and accumulators that overflow
// to infinity.
func TestKernels512FMAWhereGuardHolds(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(53, 54))
	ranges := []struct{ wlo, whi, xlo, xhi int }{
		{64, 64, 64, 64},     // products at 2^-126..2^-124: the underflow edge
		{60, 70, 58, 68},     // around it, both sides of the guard
		{190, 190, 190, 190}, // products near 2^126..2^128: the overflow edge
		{100, 140, 100, 140}, // typical magnitudes
		{1, 254, 1, 254},     // anything finite and normal
	}
	admitted := 0
	for trial := range 300 {
		rg := ranges[trial%len(ranges)]
		rows := 1 + rng.IntN(9)
		cols := 16*rng.IntN(5) + rng.IntN(17)
		batch := 1 + rng.IntN(17)
		gw, gx := exactGen(rng, rg.wlo, rg.whi), exactGen(rng, rg.xlo, rg.xhi)
		w, xs, xr := randProblem(rng, rows, cols, batch, false, gw, gx)
		if !exactProducts(bf16Range(w), xr) {
			continue
		}
		admitted++
		checkRows(t, fmt.Sprintf("trial %d (seed 53,54)", trial), w, xs, rows, cols, true)
	}
	if admitted < 100 {
		t.Fatalf("only %d of 300 trials passed the guard; the FMA path is not exercised", admitted)
	}
}

// bf16GensSigned is bf16Gens with ±Inf and ±0 of random sign.
func bf16GensSigned(rng *rand.Rand) []func() bf16.BF16 {
	return append(bf16Gens(rng),
		func() bf16.BF16 { return bf16.BF16(rng.Uint32()&0x8000 | 0x7F80) }, // ±Inf
		func() bf16.BF16 { return bf16.BF16(rng.Uint32() & 0x8000) },        // ±0
	)
}

// randProblem draws a rows×cols weight matrix from gw and batch inputs
// from gx (widened), with the inputs' exponent range over their first cols
// values; longer inputs are up to two values longer than cols.
func randProblem(rng *rand.Rand, rows, cols, batch int, longer bool, gw, gx func() bf16.BF16) (w []bf16.BF16, xs [][]float32, xr expRange) {
	w = make([]bf16.BF16, rows*cols)
	for i := range w {
		w[i] = gw()
	}
	xs = make([][]float32, batch)
	xr = emptyRange
	for b := range xs {
		n := cols
		if longer {
			n += rng.IntN(3)
		}
		xs[b] = make([]float32, n)
		for j := range xs[b] {
			xs[b][j] = gx().Float32()
		}
		xr = xr.union(f32Range(xs[b][:cols]))
	}
	return w, xs, xr
}

// overflowCase builds rows×batch dot products that tell a fused
// multiply-add from a separate multiply and add in every (row, input)
// pair: input b is zero except at its lane l in the last two 16-column
// chunks, where the products are -1.5·2^127 (finite) and then 1.5·2^128
// (infinite when rounded alone). The canonical order gives +Inf; a fused
// add gives 1.5·2^127.
func overflowCase(rng *rand.Rand, rows, batch int) (w []bf16.BF16, xs [][]float32, cols int) {
	k := rng.IntN(3)
	cols = 16*(k+2) + rng.IntN(5)
	w = make([]bf16.BF16, rows*cols)
	for o := range rows {
		for l := range Lanes {
			w[o*cols+16*k+l] = bf16.FromFloat32(-1.5 * (1 << 62) * 4)
			w[o*cols+16*(k+1)+l] = bf16.FromFloat32(1.5 * (1 << 62) * 4)
		}
	}
	xs = make([][]float32, batch)
	for b := range xs {
		xs[b] = make([]float32, cols)
		l := rng.IntN(Lanes)
		xs[b][16*k+l] = 1 << 63
		xs[b][16*(k+1)+l] = 1 << 63 * 2
	}
	return w, xs, cols
}

// The unguarded loops of every kernel shape never fuse: on overflowCase
// every output is the canonical +Inf. With exact = true (which the guard
// would never allow here) the fused loops give finite values, so this test
// sees a fused operation in any accumulator of any kernel.
func TestKernels512UnfusedAndFused(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(55, 56))
	for _, batch := range []int{1, 2, 4, 5, 8, 9, 12, 13, 16, 17} {
		for rows := 1; rows <= 9; rows++ {
			w, xs, cols := overflowCase(rng, rows, batch)
			if exactProducts(bf16Range(w), f32Range(xs[0])) {
				t.Fatal("guard admits products of 2^128")
			}
			checkRows(t, fmt.Sprintf("overflow case batch=%d rows=%d (seed 55,56)", batch, rows), w, xs, rows, cols, false)
			dsts := make([][]bf16.BF16, batch)
			for i := range dsts {
				dsts[i] = make([]bf16.BF16, rows)
			}
			matRowsFast(dsts, w, xs, cols, 0, rows, true)
			for b := range xs {
				for o := range rows {
					if want := bf16.FromFloat32(dotF(w[o*cols:(o+1)*cols], xs[b])); want != bf16.PosInf {
						t.Fatalf("pure Go gives %#04x, want +Inf", uint16(want))
					}
					fused := dsts[b][o]
					// Rows past the last block of four use the unfused
					// single-row kernel, except in groups of eight inputs.
					if (o < rows&^3 || b < batch&^7) && (fused == bf16.PosInf || fused.IsNaN()) {
						t.Fatalf("batch=%d rows=%d: fused kernel out[%d][%d] = %#04x, want finite", batch, rows, b, o, uint16(fused))
					}
				}
			}
		}
	}
}

// The batch-1 range kernel (rowsN1x512, rows in blocks of four, columns a
// multiple of 16, chunks of n1Chunk rows, an odd or even number of 16-column
// steps) equals the pure-Go order bit for bit on random bit patterns
// (denormals, ±0, Inf, NaN, products that overflow), unfused and with
// whatever the guard admits; and against the block kernels it replaces.
func TestRowsN1EqualPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(57, 58))
	gen := bf16GensSigned(rng)
	for trial := range 300 {
		rows := 1 + rng.IntN(14)
		if trial%25 == 0 {
			rows = 2*n1Chunk + 1 + rng.IntN(9) // several calls
		}
		cols := 16 * (1 + rng.IntN(9))
		if trial%30 == 0 {
			cols = 1024 + 16*rng.IntN(3)
		}
		ga, gb := gen[rng.IntN(len(gen))], gen[rng.IntN(len(gen))]
		if trial%5 == 0 {
			ga, gb = exactGen(rng, 190, 191), exactGen(rng, 190, 191) // the overflow edge
		}
		w := make([]bf16.BF16, rows*cols)
		for i := range w {
			w[i] = ga()
		}
		xs := [][]float32{make([]float32, cols+rng.IntN(3))}
		for j := range xs[0] {
			xs[0][j] = gb().Float32()
		}
		what := fmt.Sprintf("trial %d (seed 57,58)", trial)
		checkRows(t, what, w, xs, rows, cols, false)
		checkRows(t, what+" guarded", w, xs, rows, cols, exactProducts(bf16Range(w), f32Range(xs[0])))
	}
}

// With fused multiply-adds the batch-1 kernel equals the pure-Go order on
// every input the guard admits (the edges of the guard included), and on
// overflowCase its unfused loop gives the canonical +Inf where a fused one
// would not.
func TestRowsN1FMAAndUnfused(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(59, 60))
	ranges := []struct{ lo, hi int }{{64, 64}, {58, 70}, {190, 190}, {100, 140}, {1, 254}}
	admitted := 0
	for trial := range 200 {
		rg := ranges[trial%len(ranges)]
		rows, cols := 4+rng.IntN(9), 16*(1+rng.IntN(6))
		gw, gx := exactGen(rng, rg.lo, rg.hi), exactGen(rng, rg.lo, rg.hi)
		w := make([]bf16.BF16, rows*cols)
		for i := range w {
			w[i] = gw()
		}
		xs := [][]float32{make([]float32, cols)}
		for j := range xs[0] {
			xs[0][j] = gx().Float32()
		}
		if !exactProducts(bf16Range(w), f32Range(xs[0])) {
			continue
		}
		admitted++
		checkRows(t, fmt.Sprintf("trial %d (seed 59,60)", trial), w, xs, rows, cols, true)
	}
	if admitted < 60 {
		t.Fatalf("only %d of 200 trials passed the guard", admitted)
	}
	for rows := 4; rows <= 13; rows++ {
		w, xs, cols := overflowCase(rng, rows, 1)
		cols16 := cols &^ (Lanes - 1)
		// Keep the deciding chunks, drop the tail: a row of cols16 columns.
		w16 := make([]bf16.BF16, rows*cols16)
		for o := range rows {
			copy(w16[o*cols16:(o+1)*cols16], w[o*cols:])
		}
		xs[0] = xs[0][:cols16]
		checkRows(t, fmt.Sprintf("overflow case rows=%d", rows), w16, xs, rows, cols16, false)
		dst := [][]bf16.BF16{make([]bf16.BF16, rows)}
		matRowsFast(dst, w16, xs, cols16, 0, rows, true)
		for o := range rows &^ 3 {
			if f := dst[0][o]; f == bf16.PosInf || f.IsNaN() {
				t.Fatalf("rows=%d: fused kernel out[%d] = %#04x, want finite", rows, o, uint16(f))
			}
		}
	}
}

// The column-blocked batch-8 path (matRows8Blocked: blocks of any multiple
// of 16 columns, groups of rows, the lanes carried from block to block)
// equals the pure-Go order bit for bit, for column counts that are and are
// not multiples of the block or of 16, on random bit patterns (denormals,
// ±0, ±Inf, NaN, products at the overflow edge) unfused, and on values the
// guard admits (its edges included) fused; and through matRowsFast from
// colBlockMin columns on. A block that started its lanes from zero instead
// of carrying them would fail every row of more than one block.
func TestColumnBlocksEqualPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(61, 62))
	gen := bf16GensSigned(rng)
	ranges := []struct{ lo, hi int }{{190, 191}, {64, 64}, {58, 70}, {100, 140}, {1, 254}}
	fused := 0
	for trial := range 120 {
		block := 16 * []int{1, 2, 3, 32, colBlock / 16}[trial%5]
		group := []int{2, 4, 6, colBlockRows}[rng.IntN(4)]
		cols := block*(1+rng.IntN(3)) + rng.IntN(2)*rng.IntN(40)
		if trial%10 == 0 {
			cols = []int{2048, 3072, 2048 + 7, colBlock - 16}[trial/10%4]
		}
		rows := 2 * (1 + rng.IntN(9))
		if trial%7 == 0 {
			rows = 2*colBlockRows + 6 // several groups of the default size
		}
		batch := 8 * (1 + rng.IntN(2))
		ga, gb := gen[rng.IntN(len(gen))], gen[rng.IntN(len(gen))]
		if trial%2 == 0 {
			rg := ranges[trial/2%len(ranges)]
			ga, gb = exactGen(rng, rg.lo, rg.hi), exactGen(rng, rg.lo, rg.hi)
		}
		w, xs, xr := randProblem(rng, rows, cols, batch, true, ga, gb)
		guard := exactProducts(bf16Range(w), xr)
		if guard {
			fused++
		}
		for _, exact := range []bool{false, guard} {
			fma := 0
			if exact {
				fma = 1
			}
			dsts := make([][]bf16.BF16, batch)
			for i := range dsts {
				dsts[i] = make([]bf16.BF16, rows)
			}
			matRows8Blocked(dsts, w, xs, cols, 0, rows, fma, block, group)
			for b := range xs {
				for o := range rows {
					want := bf16.FromFloat32(dotF(w[o*cols:(o+1)*cols], xs[b]))
					if got := dsts[b][o]; got != want && !(got.IsNaN() && want.IsNaN()) {
						t.Fatalf("trial %d (seed 61,62): block=%d group=%d rows=%d cols=%d batch=%d exact=%v: out[%d][%d] = %#04x, pure Go %#04x",
							trial, block, group, rows, cols, batch, exact, b, o, uint16(got), uint16(want))
					}
				}
			}
		}
		if cols >= colBlockMin {
			what := fmt.Sprintf("trial %d (seed 61,62) matRowsFast", trial)
			checkRows(t, what, w, xs, rows, cols, false) // from row 1: a tail of rows
			checkRows(t, what+" guarded", w, xs, rows, cols, guard)
		}
	}
	if fused < 25 {
		t.Fatalf("only %d of 120 trials passed the guard; the fused blocks are not exercised", fused)
	}
}

// TestAttendOutEqualsPureGo: the AVX-512 attention output gives attendOut's
// bits on random patterns (probabilities and values from every generator:
// NaN, ±Inf, denormals, ±0), every count of positions around the 16-lane
// groups, head sizes 16 to 128; and Attend with and without it agrees.
func TestAttendOutEqualsPureGo(t *testing.T) {
	need512(t)
	rng := rand.New(rand.NewPCG(31, 32))
	gens := bf16GensSigned(rng)
	for trial := 0; trial < 300; trial++ {
		hd := 16 * (1 + rng.IntN(8))
		n := 1 + rng.IntN(70)
		gp, gv := gens[rng.IntN(len(gens))], gens[rng.IntN(len(gens))]
		p := make([]float32, n)
		for i := range p {
			p[i] = gp().Float32()
			if rng.IntN(2) == 0 {
				p[i] = rng.Float32() // a probability's range, all 24 bits
			}
		}
		v := make([]bf16.BF16, n*hd+rng.IntN(3)) // rows past n are not read
		for i := range v {
			v[i] = gv()
		}
		want, got := make([]bf16.BF16, hd), make([]bf16.BF16, hd)
		attendOut(want, p, v, n, hd)
		if !attendOutFast(got, p, v, n, hd) {
			t.Fatalf("attendOutFast declined head size %d", hd)
		}
		for d := range want {
			if got[d] != want[d] {
				t.Fatalf("trial %d (n %d, head %d): column %d = %#04x, want %#04x", trial, n, hd, d, uint16(got[d]), uint16(want[d]))
			}
		}
	}
	if attendOutFast(make([]bf16.BF16, 24), make([]float32, 3), make([]bf16.BF16, 72), 3, 24) {
		t.Fatal("attendOutFast took a head size off 16")
	}
}

// TestAttendFastPathEqualsPureGo: Attend with the AVX-512 scores
// (dotRowsFast), softmax loops (softmax512_amd64.s) and output gives the
// pure-Go Attend's bits, on random
// patterns (specials included, and products that underflow or overflow,
// where a fused multiply-add would differ), position counts around the groups of four
// rows and of 16 lanes, head sizes 16 to 128 and one off 16.
func TestAttendFastPathEqualsPureGo(t *testing.T) {
	need512(t)
	defer func(a2, a512 bool) { useAVX2, useAVX512 = a2, a512 }(useAVX2, useAVX512)
	rng := rand.New(rand.NewPCG(33, 34))
	gens := bf16GensSigned(rng)
	for trial := 0; trial < 300; trial++ {
		hd := 16 * (1 + rng.IntN(8))
		if trial%10 == 0 {
			hd = 24
		}
		n := 1 + rng.IntN(70)
		if trial%3 == 0 {
			n = 1 + rng.IntN(300) // many groups of 16 for the softmax loops
		}
		gq, gk, gv := gens[rng.IntN(len(gens))], gens[rng.IntN(len(gens))], gens[rng.IntN(len(gens))]
		switch rng.IntN(4) {
		case 0:
			gq, gk = gens[2], gens[2] // typical values: finite scores
		case 1:
			gq, gk = exactGen(rng, 50, 75), exactGen(rng, 50, 75) // products in float32's denormal range
		case 2:
			gq, gk = exactGen(rng, 185, 195), exactGen(rng, 185, 195) // products around float32's overflow
		}
		q, k, v := make([]bf16.BF16, hd), make([]bf16.BF16, n*hd), make([]bf16.BF16, n*hd)
		for i := range q {
			q[i] = gq()
		}
		for i := range k {
			k[i], v[i] = gk(), gv()
		}
		// The scores before rounding: dotRowsFast's rows are dotF's, bit
		// for bit (a NaN's payload aside: every consumer rounds NaN to
		// bf16's one quiet NaN).
		qf := make([]float32, hd)
		bf16.ToFloat32s(qf, q)
		dots := make([]float32, n)
		for r := 0; r < dotRowsFast(dots, k, qf, hd, n); r++ {
			want := dotF(k[r*hd:(r+1)*hd], qf)
			if math.Float32bits(dots[r]) != math.Float32bits(want) && !(dots[r] != dots[r] && want != want) {
				t.Fatalf("trial %d (n %d, head %d): row %d dot %#08x, want %#08x", trial, n, hd, r, math.Float32bits(dots[r]), math.Float32bits(want))
			}
		}
		scale := AttnScale(hd)
		useAVX2, useAVX512 = false, false
		want := make([]bf16.BF16, hd)
		Attend(want, q, k, v, n, scale, make([]float32, n))
		useAVX2, useAVX512 = true, true
		got := make([]bf16.BF16, hd)
		Attend(got, q, k, v, n, scale, make([]float32, n))
		for d := range want {
			if got[d] != want[d] {
				t.Fatalf("trial %d (n %d, head %d): column %d = %#04x, want %#04x", trial, n, hd, d, uint16(got[d]), uint16(want[d]))
			}
		}
	}
}
