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


// func dotLanesX4AVX2(a *bf16.BF16, x *[4]*float32, n int, acc *[4][16]float32)
// One row a against four inputs x[0..3]: input i's lanes 0-7 in Y(2i) and
// 8-15 in Y(2i+1), each a separate chain in the canonical order; the row is
// loaded and widened once for the four inputs.
TEXT ·dotLanesX4AVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ x+8(FP), AX
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DX
	MOVQ 0(AX), DI
	MOVQ 8(AX), R8
	MOVQ 16(AX), R9
	MOVQ 24(AX), R10
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	SHRQ $4, CX
	JZ   donex4

loopx4:
	VPMOVZXWD (SI), Y8
	VPMOVZXWD 16(SI), Y9
	VPSLLD    $16, Y8, Y8
	VPSLLD    $16, Y9, Y9
	VMULPS    (DI), Y8, Y10
	VMULPS    32(DI), Y9, Y11
	VADDPS    Y10, Y0, Y0
	VADDPS    Y11, Y1, Y1
	VMULPS    (R8), Y8, Y10
	VMULPS    32(R8), Y9, Y11
	VADDPS    Y10, Y2, Y2
	VADDPS    Y11, Y3, Y3
	VMULPS    (R9), Y8, Y10
	VMULPS    32(R9), Y9, Y11
	VADDPS    Y10, Y4, Y4
	VADDPS    Y11, Y5, Y5
	VMULPS    (R10), Y8, Y10
	VMULPS    32(R10), Y9, Y11
	VADDPS    Y10, Y6, Y6
	VADDPS    Y11, Y7, Y7
	ADDQ $32, SI
	ADDQ $64, DI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	DECQ CX
	JNZ  loopx4

donex4:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET
