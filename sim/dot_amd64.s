//go:build amd64 && !purego

#include "textflag.h"

// func dotLanesAVX2(a, b *float32, n int, acc *[16]float32)
//
// For j = 0, 16, 32, ... < n (n a positive multiple of 16): lane l (0..15)
// of acc accumulates a[j+l]*b[j+l]. Lanes 0-7 live in Y0, 8-15 in Y1, both
// starting at +0; each step is one VMULPS then one VADDPS (never a fused
// multiply-add), so every lane sees exactly the float32 operations of
// dotWide's scalar loop, in the same order.
TEXT ·dotLanesAVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

loop:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VMULPS  (DI), Y2, Y2
	VMULPS  32(DI), Y3, Y3
	VADDPS  Y2, Y0, Y0
	VADDPS  Y3, Y1, Y1
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     loop

	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET
