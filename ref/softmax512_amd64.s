//go:build amd64 && !purego

#include "textflag.h"
#include "elem512_amd64.h"

// Attend's softmax loops, 16 scores per step, each lane doing exactly the
// operations of Attend's pure-Go loops.

// func scaleMax512(p *float32, n int, scale float32) float32
// For n > 0: p[t] = R(R(p[t])·scale) and the largest of them, taken as
// Attend's loop takes it (m = s when s > m, from -Inf): per lane with
// VMAXPS (s > m ? s : m, so a NaN never wins), then across the lanes. The
// lanes' order can only decide between +0 and -0, which Attend subtracts
// from the scores and then exponentiates: the same bits either way.
TEXT ·scaleMax512(SB), NOSPLIT, $0-28
	MOVQ p+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS scale+16(FP), Z5
	CONSTS
	MOVL $0xFF800000, AX // -Inf
	VPBROADCASTD AX, Z6

smLoop:
	MASK16(CX)
	VMOVUPS.Z (DI), K1, Z1
	ROUNDF(Z1, Z3)
	VMULPS Z5, Z1, Z1
	ROUNDF(Z1, Z3)
	VMOVUPS Z1, K1, (DI)
	VMAXPS Z6, Z1, K1, Z6
	ADDQ $64, DI
	SUBQ $16, CX
	JGT  smLoop

	VEXTRACTF64X4 $1, Z6, Y7
	VMAXPS Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VMAXPS X7, X6, X6
	VPERMILPS $0x4E, X6, X7
	VMAXPS X7, X6, X6
	VPERMILPS $0xB1, X6, X7
	VMAXPS X7, X6, X6
	VMOVSS X6, ret+24(FP)
	VZEROUPPER
	RET

// The constants of math.Exp's amd64 code (src/math/exp_amd64.s): log2(e),
// ln 2 in an upper and a lower part, the reduction 1/16, the Taylor
// coefficients 1/9! .. 1/3!, 1/2, 1, 2, and the exponent bias.
DATA expc<>+0(SB)/8, $1.4426950408889634073599246810018920
DATA expc<>+8(SB)/8, $0.69314718055966295651160180568695068359375
DATA expc<>+16(SB)/8, $0.28235290563031577122588448175013436025525412068e-12
DATA expc<>+24(SB)/8, $0.0625
DATA expc<>+32(SB)/8, $2.4801587301587301587e-5
DATA expc<>+40(SB)/8, $1.9841269841269841270e-4
DATA expc<>+48(SB)/8, $1.3888888888888888889e-3
DATA expc<>+56(SB)/8, $8.3333333333333333333e-3
DATA expc<>+64(SB)/8, $4.1666666666666666667e-2
DATA expc<>+72(SB)/8, $1.6666666666666666667e-1
DATA expc<>+80(SB)/8, $0.5
DATA expc<>+88(SB)/8, $1.0
DATA expc<>+96(SB)/8, $2.0
DATA expc<>+104(SB)/8, $1023
GLOBL expc<>(SB), RODATA|NOPTR, $112

// EXPPD(x, ky, kz, p): the 8 float64 lanes of x set to math.Exp(x) as
// math's amd64 code computes it when the CPU has FMA, for
// -110 <= x <= 0 (where the result is a normal number and no special case
// applies): k = round(x·log2e); x = x - k·ln2u - k·ln2l (fused);
// x = x/16; Horner's rule over the coefficients (fused); x = x·poly;
// then x = x·(x+2) three times and x = x·(x+2) + 1 (fused); times 2^k.
// (Without FMA math.Exp takes unfused steps; rounded to float32 both give
// the same values on this range, so no CPU check is needed.)
// ky, kz (k's YMM and ZMM views) and p are scratch. Needs Z9-Z22 from
// EXPCONSTS.
#define EXPPD(x, ky, kz, p) \
	VMULPD Z9, x, p; \
	VCVTPD2DQ p, ky; \
	VCVTDQ2PD ky, p; \
	VFNMADD231PD Z10, p, x; \
	VFNMADD231PD Z11, p, x; \
	VMULPD Z12, x, x; \
	VMOVAPD Z13, p; \
	VFMADD213PD Z14, x, p; \
	VFMADD213PD Z15, x, p; \
	VFMADD213PD Z16, x, p; \
	VFMADD213PD Z17, x, p; \
	VFMADD213PD Z18, x, p; \
	VFMADD213PD Z19, x, p; \
	VFMADD213PD Z20, x, p; \
	VMULPD p, x, x; \
	VADDPD Z21, x, p; \
	VMULPD p, x, x; \
	VADDPD Z21, x, p; \
	VMULPD p, x, x; \
	VADDPD Z21, x, p; \
	VMULPD p, x, x; \
	VADDPD Z21, x, p; \
	VFMADD213PD Z20, p, x; \
	VPMOVSXDQ ky, kz; \
	VPADDQ Z22, kz, kz; \
	VPSLLQ $52, kz, kz; \
	VMULPD kz, x, x

#define EXPCONSTS \
	VBROADCASTSD expc<>+0(SB), Z9; \
	VBROADCASTSD expc<>+8(SB), Z10; \
	VBROADCASTSD expc<>+16(SB), Z11; \
	VBROADCASTSD expc<>+24(SB), Z12; \
	VBROADCASTSD expc<>+32(SB), Z13; \
	VBROADCASTSD expc<>+40(SB), Z14; \
	VBROADCASTSD expc<>+48(SB), Z15; \
	VBROADCASTSD expc<>+56(SB), Z16; \
	VBROADCASTSD expc<>+64(SB), Z17; \
	VBROADCASTSD expc<>+72(SB), Z18; \
	VBROADCASTSD expc<>+80(SB), Z19; \
	VBROADCASTSD expc<>+88(SB), Z20; \
	VBROADCASTSD expc<>+96(SB), Z21; \
	VPBROADCASTQ expc<>+104(SB), Z22

// func expSum512(p *float32, t, n int, m float32, acc *[16]float32) int
// From t on, while 16 scores are left and every one of them gives
// d = p[i] - m <= 0 (no NaN): p[i] = float32(math.Exp(float64(d))), +0
// when d < -110 (the float64 result is then below float32's least
// denormal and rounds to +0), and acc[i%16] += p[i], i increasing (t is
// a multiple of 16). Returns the index it stopped at.
TEXT ·expSum512(SB), NOSPLIT, $0-48
	MOVQ p+0(FP), DI
	MOVQ t+8(FP), BX
	MOVQ n+16(FP), CX
	VBROADCASTSS m+24(FP), Z5
	MOVQ acc+32(FP), SI
	VMOVUPS (SI), Z6
	VPXORD Z7, Z7, Z7
	MOVL $0xC2DC0000, AX // -110
	VPBROADCASTD AX, Z8
	EXPCONSTS

esLoop:
	MOVQ CX, AX
	SUBQ BX, AX
	CMPQ AX, $16
	JLT  esDone
	VMOVUPS (DI)(BX*4), Z1
	VSUBPS Z5, Z1, Z1
	VCMPPS $2, Z7, Z1, K2 // d <= 0, false for NaN
	KORTESTW K2, K2
	JCC  esDone
	VCMPPS $1, Z8, Z1, K3 // d < -110
	VCVTPS2PD Y1, Z2
	VEXTRACTF64X4 $1, Z1, Y3
	VCVTPS2PD Y3, Z3
	EXPPD(Z2, Y24, Z24, Z25)
	EXPPD(Z3, Y24, Z24, Z25)
	VCVTPD2PS Z2, Y2
	VCVTPD2PS Z3, Y3
	VINSERTF64X4 $1, Y3, Z2, Z2
	VMOVAPS Z7, K3, Z2
	VMOVUPS Z2, (DI)(BX*4)
	VADDPS Z2, Z6, Z6
	ADDQ $16, BX
	JMP  esLoop

esDone:
	VMOVUPS Z6, (SI)
	MOVQ BX, ret+40(FP)
	VZEROUPPER
	RET

// func divRound512(p *float32, n int, s float32)
// For n > 0: p[t] = R(p[t]/s).
TEXT ·divRound512(SB), NOSPLIT, $0-20
	MOVQ p+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Z5
	CONSTS

drLoop:
	MASK16(CX)
	VMOVUPS.Z (DI), K1, Z1
	VDIVPS Z5, Z1, Z1
	ROUNDF(Z1, Z3)
	VMOVUPS Z1, K1, (DI)
	ADDQ $64, DI
	SUBQ $16, CX
	JGT  drLoop
	VZEROUPPER
	RET
