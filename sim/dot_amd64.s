//go:build amd64 && !purego

#include "textflag.h"

// func dotLanesBF16AVX2(a *bf16.BF16, x *float32, n int, acc *[16]float32)
//
// For j = 0, 16, 32, ... < n (n a positive multiple of 16): lane l (0..15)
// of acc accumulates a[j+l]*x[j+l], a[j+l] widened exactly from bf16
// (zero-extend to 32 bits, shift left 16). Lanes 0-7 live in Y0, 8-15 in
// Y1, both starting at +0; each step is one VMULPS (a first) then one VADDPS
// (accumulator first), never a fused multiply-add, so every lane sees
// exactly the float32 operations of dotRow's scalar loop, in the same order.
TEXT ·dotLanesBF16AVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

loopb:
	VPMOVZXWD (SI), Y2
	VPMOVZXWD 16(SI), Y3
	VPSLLD    $16, Y2, Y2
	VPSLLD    $16, Y3, Y3
	VMULPS    (DI), Y2, Y2
	VMULPS    32(DI), Y3, Y3
	VADDPS    Y2, Y0, Y0
	VADDPS    Y3, Y1, Y1
	ADDQ      $32, SI
	ADDQ      $64, DI
	SUBQ      $16, CX
	JNZ       loopb

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET
