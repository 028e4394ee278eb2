//go:build amd64 && !purego

#include "textflag.h"

// func dotLanesAVX2(a *bf16.BF16, x *float32, n int, acc *[16]float32)
TEXT ·dotLanesAVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SHRQ $4, CX
	JZ   done

loop:
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
	DECQ      CX
	JNZ       loop

done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET
