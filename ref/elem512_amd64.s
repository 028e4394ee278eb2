//go:build amd64 && !purego

#include "textflag.h"
#include "fold512_amd64.h"
#include "elem512_amd64.h"

// AVX-512 elementwise kernels: the bf16 loops of RMSNorm, Rope, Add and
// SiluMul, 16 elements per step, each lane doing exactly the float32
// operations of the pure-Go loop (a multiply, an add, never fused).
//
// Every step works under the mask K1 of the elements left (all 16, or the
// last n%16): bf16 inputs are read with a zero-masked word load (masked-out
// words are neither read nor faulted on) and zero-extended into 32-bit
// lanes, and results are written with a masked narrowing store, so no
// element past n is touched and there is no tail loop.
//
// The rounding and mask macros are in elem512_amd64.h.

// func sumSquares512(x *bf16.BF16, n int) float32
// Dot(x, x) for n > 0 in the canonical order: lane l of Z0 sums x[j]² for
// j ≡ l (mod 16), j increasing, a multiply then an add (the tail step adds
// under K1 only); then reduceLanes' tree: l + (l+8), (l+4), (l+2), (l+1).
TEXT ·sumSquares512(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VPXORD Z0, Z0, Z0

sqLoop:
	MASK16(CX)
	LOADW((SI), Y1, Z1)
	VMULPS Z1, Z1, Z1
	VADDPS Z1, Z0, K1, Z0
	ADDQ $32, SI
	SUBQ $16, CX
	JGT  sqLoop

	FOLD16(Z0, Y0, X0, Y1, X1)
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func rmsScale512(dst, x, w *bf16.BF16, n int, s float32)
// RMSNorm's loop for n > 0: dst = R(w·R(x·s)).
TEXT ·rmsScale512(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTS
	VBROADCASTSS s+32(FP), Z5

rmsLoop:
	MASK16(CX)
	LOADW((SI), Y1, Z1)
	LOADW((DX), Y2, Z2)
	VMULPS Z5, Z1, Z1
	ROUNDF(Z1, Z3)
	VMULPS Z1, Z2, Z2
	ROUNDF(Z2, Z3)
	STOREW(Z2, Y2, (DI))
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $16, CX
	JGT  rmsLoop
	VZEROUPPER
	RET

// func add512(dst, a, b *bf16.BF16, n int)
// Add for n > 0: dst = R(a + b).
TEXT ·add512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	CONSTS

addLoop:
	MASK16(CX)
	LOADW((SI), Y1, Z1)
	LOADW((DX), Y2, Z2)
	VADDPS Z2, Z1, Z1
	ROUNDF(Z1, Z3)
	STOREW(Z1, Y1, (DI))
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $16, CX
	JGT  addLoop
	VZEROUPPER
	RET

// func siluMul512(dst, gate, up *bf16.BF16, n int, t *[1 << 16]float32)
// SiluMul for n > 0: dst = R(t[gate]·up), the table read with a gather
// (indices: the gate patterns, zero-extended; masked-out lanes read
// nothing).
TEXT ·siluMul512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ t+32(FP), R8
	CONSTS

siluLoop:
	MASK16(CX)
	VMOVDQU16.Z (SI), K1, Y1
	VPMOVZXWD Y1, Z1
	KMOVW K1, K3
	VPXORD Z4, Z4, Z4
	VGATHERDPS (R8)(Z1*4), K3, Z4
	LOADW((DX), Y2, Z2)
	VMULPS Z2, Z4, Z4
	ROUNDF(Z4, Z3)
	STOREW(Z4, Y4, (DI))
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $16, CX
	JGT  siluLoop
	VZEROUPPER
	RET

// func rope512(dst, x, cos, sin *bf16.BF16, half int)
// Rope for half > 0 (a head of 2·half elements, or 2·half+1 whose last
// element is left alone): for i < half, with x0 = x[i], x1 = x[i+half],
// dst[i] = R(R(x0·cos[i]) + R(-x1·sin[i])) and
// dst[i+half] = R(R(x1·cos[i+half]) + R(x0·sin[i+half])). Each step reads
// both halves before it writes them, so dst may be x.
TEXT ·rope512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ cos+16(FP), R8
	MOVQ sin+24(FP), R9
	MOVQ half+32(FP), CX
	LEAQ (CX)(CX*1), BX // half, in bytes
	CONSTS

ropeLoop:
	MASK16(CX)
	LOADW((SI), Y0, Z0)       // x0
	LOADW((SI)(BX*1), Y1, Z1) // x1
	LOADW((R8), Y2, Z2)       // cos[i]
	LOADW((R9), Y3, Z3)       // sin[i]
	VMULPS Z2, Z0, Z6
	ROUNDF(Z6, Z10)
	VPXORD Z27, Z1, Z7        // -x1
	VMULPS Z3, Z7, Z7
	ROUNDF(Z7, Z10)
	VADDPS Z7, Z6, Z6
	ROUNDF(Z6, Z10)
	LOADW((R8)(BX*1), Y2, Z2) // cos[i+half]
	LOADW((R9)(BX*1), Y3, Z3) // sin[i+half]
	VMULPS Z2, Z1, Z8
	ROUNDF(Z8, Z10)
	VMULPS Z3, Z0, Z9
	ROUNDF(Z9, Z10)
	VADDPS Z9, Z8, Z8
	ROUNDF(Z8, Z10)
	STOREW(Z6, Y6, (DI))
	STOREW(Z8, Y8, (DI)(BX*1))
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, DI
	SUBQ $16, CX
	JGT  ropeLoop
	VZEROUPPER
	RET

// func round512(dst *bf16.BF16, src *float32, n int)
// dst = R(src) for n > 0 float32 values, as bf16.FromFloat32 rounds each.
TEXT ·round512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CONSTS

roundLoop:
	MASK16(CX)
	VMOVUPS.Z (SI), K1, Z1
	ROUNDF(Z1, Z3)
	STOREW(Z1, Y1, (DI))
	ADDQ $64, SI
	ADDQ $32, DI
	SUBQ $16, CX
	JGT  roundLoop
	VZEROUPPER
	RET
