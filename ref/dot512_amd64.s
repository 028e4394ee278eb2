//go:build amd64 && !purego

#include "textflag.h"
#include "fold512_amd64.h"

// AVX-512 kernels of the canonical order. One ZMM register holds the 16
// lanes of one (row, input) pair: lane l receives a[j]·x[j] for j ≡ l
// (mod 16), j increasing, exactly as the pure-Go loop. A bf16 row is
// widened by zero-extending each 16-bit value into a 32-bit lane and
// shifting it left by 16 (exact).
//
// With fma == 0 each step is VMULPS then VADDPS (the pure-Go operations).
// With fma != 0 it is VFMADD231PS, which rounds once: the caller passes
// fma != 0 only when it has proved every product a[j]·x[j] exact in
// float32 (no underflow, no overflow, no Inf/NaN; see exactProducts), and
// then round(acc + p) is the same number either way.

// MULADD(w, x, acc, tmp): acc += w·x, rounded after the multiply and after the add.
#define MULADD(w, x, acc, tmp) VMULPS x, w, tmp; VADDPS tmp, acc, acc
// FMADD(w, x, acc): acc = round(acc + w·x).
#define FMADD(w, x, acc) VFMADD231PS x, w, acc

// WIDEN(mem, z): z = the 16 bf16 values at mem, widened to float32.
#define WIDEN(mem, z) VPMOVZXWD mem, z; VPSLLD $16, z, z

// ZERO4(a, b, c, d): four registers set to +0.
#define ZERO4(a, b, c, d) VPXORD a, a, a; VPXORD b, b, b; VPXORD c, c, c; VPXORD d, d, d

// func dotLanes512(a *bf16.BF16, x *float32, n int, acc *[16]float32)
TEXT ·dotLanes512(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ acc+24(FP), DX
	VPXORD Z0, Z0, Z0
	SHRQ $4, CX
	JZ   done1

loop1:
	WIDEN((SI), Z1)
	MULADD(Z1, (DI), Z0, Z2)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop1

done1:
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET

// func rows4x1x512(a *bf16.BF16, stride int, x *float32, n int, acc *[4][16]float32, fma int)
// Four rows (a, a+stride, a+2·stride, a+3·stride; stride in bytes) against
// one input: four independent chains, the input loaded once per step. Each
// step prefetches two lines of the next block (R13, from a + 4·stride, 128
// bytes per step: with contiguous rows, stride = 2·n, the whole block).
TEXT ·rows4x1x512(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x+16(FP), DI
	MOVQ n+24(FP), CX
	MOVQ acc+32(FP), DX
	MOVQ fma+40(FP), AX
	LEAQ (SI)(BX*1), R8
	LEAQ (SI)(BX*2), R9
	LEAQ (R8)(BX*2), R10
	LEAQ (SI)(BX*4), R13
	ZERO4(Z0, Z1, Z2, Z3)
	SHRQ $4, CX
	JZ   done41
	TESTQ AX, AX
	JNZ  fma41

loop41:
	PREFETCHT0 (R13)
	PREFETCHT0 64(R13)
	VMOVUPS (DI), Z8
	WIDEN((SI), Z4)
	WIDEN((R8), Z5)
	WIDEN((R9), Z6)
	WIDEN((R10), Z7)
	MULADD(Z4, Z8, Z0, Z12)
	MULADD(Z5, Z8, Z1, Z13)
	MULADD(Z6, Z8, Z2, Z14)
	MULADD(Z7, Z8, Z3, Z15)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $64, DI
	ADDQ $128, R13
	DECQ CX
	JNZ  loop41
	JMP  done41

fma41:
	PREFETCHT0 (R13)
	PREFETCHT0 64(R13)
	VMOVUPS (DI), Z8
	WIDEN((SI), Z4)
	WIDEN((R8), Z5)
	WIDEN((R9), Z6)
	WIDEN((R10), Z7)
	FMADD(Z4, Z8, Z0)
	FMADD(Z5, Z8, Z1)
	FMADD(Z6, Z8, Z2)
	FMADD(Z7, Z8, Z3)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $64, DI
	ADDQ $128, R13
	DECQ CX
	JNZ  fma41

done41:
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VZEROUPPER
	RET

// func rows2x4x512(a *bf16.BF16, stride int, x *[4]*float32, n int, acc *[2][4][16]float32, fma int)
// Two rows against four inputs: eight chains; each row is widened once per
// step for the four inputs. Each step prefetches one line of the next two
// rows (R13, from a + 2·stride, 64 bytes per step).
TEXT ·rows2x4x512(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x+16(FP), AX
	MOVQ n+24(FP), CX
	MOVQ acc+32(FP), DX
	MOVQ fma+40(FP), R12
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(BX*1), R13
	MOVQ 0(AX), DI
	MOVQ 8(AX), R9
	MOVQ 16(AX), R10
	MOVQ 24(AX), R11
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	SHRQ $4, CX
	JZ   done24
	TESTQ R12, R12
	JNZ  fma24

loop24:
	PREFETCHT0 (R13)
	VMOVUPS (DI), Z8
	VMOVUPS (R9), Z9
	VMOVUPS (R10), Z10
	VMOVUPS (R11), Z11
	WIDEN((SI), Z12)
	WIDEN((R8), Z13)
	MULADD(Z12, Z8, Z0, Z16)
	MULADD(Z12, Z9, Z1, Z17)
	MULADD(Z12, Z10, Z2, Z18)
	MULADD(Z12, Z11, Z3, Z19)
	MULADD(Z13, Z8, Z4, Z20)
	MULADD(Z13, Z9, Z5, Z21)
	MULADD(Z13, Z10, Z6, Z22)
	MULADD(Z13, Z11, Z7, Z23)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $64, DI
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R13
	DECQ CX
	JNZ  loop24
	JMP  done24

fma24:
	PREFETCHT0 (R13)
	VMOVUPS (DI), Z8
	VMOVUPS (R9), Z9
	VMOVUPS (R10), Z10
	VMOVUPS (R11), Z11
	WIDEN((SI), Z12)
	WIDEN((R8), Z13)
	FMADD(Z12, Z8, Z0)
	FMADD(Z12, Z9, Z1)
	FMADD(Z12, Z10, Z2)
	FMADD(Z12, Z11, Z3)
	FMADD(Z13, Z8, Z4)
	FMADD(Z13, Z9, Z5)
	FMADD(Z13, Z10, Z6)
	FMADD(Z13, Z11, Z7)
	ADDQ $32, SI
	ADDQ $32, R8
	ADDQ $64, DI
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R13
	DECQ CX
	JNZ  fma24

done24:
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VMOVUPS Z4, 256(DX)
	VMOVUPS Z5, 320(DX)
	VMOVUPS Z6, 384(DX)
	VMOVUPS Z7, 448(DX)
	VZEROUPPER
	RET

// INPUTS8 loads the eight input pointers of *x (R13) into AX, BX, DI,
// R8-R11 and R13, the bases MUL2x8/FMA2x8 and the one-row steps address.
#define INPUTS8 \
	MOVQ 0(R13), AX; \
	MOVQ 8(R13), BX; \
	MOVQ 16(R13), DI; \
	MOVQ 24(R13), R8; \
	MOVQ 32(R13), R9; \
	MOVQ 40(R13), R10; \
	MOVQ 48(R13), R11; \
	MOVQ 56(R13), R13

// func rows1x8x512(a *bf16.BF16, x *[8]*float32, n int, acc *[8][16]float32, fma int)
// One row against eight inputs: eight chains; the row is widened once per
// step for all eight. The inputs are addressed as base + 4·j (R12 = j).
TEXT ·rows1x8x512(SB), NOSPLIT, $0-40
	MOVQ a+0(FP), SI
	MOVQ x+8(FP), R13
	MOVQ n+16(FP), CX
	MOVQ fma+32(FP), DX
	INPUTS8
	XORQ R12, R12
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	TESTQ CX, CX
	JZ   done18
	TESTQ DX, DX
	JNZ  fma18

loop18:
	WIDEN((SI)(R12*2), Z8)
	MULADD(Z8, (AX)(R12*4), Z0, Z16)
	MULADD(Z8, (BX)(R12*4), Z1, Z17)
	MULADD(Z8, (DI)(R12*4), Z2, Z18)
	MULADD(Z8, (R8)(R12*4), Z3, Z19)
	MULADD(Z8, (R9)(R12*4), Z4, Z20)
	MULADD(Z8, (R10)(R12*4), Z5, Z21)
	MULADD(Z8, (R11)(R12*4), Z6, Z22)
	MULADD(Z8, (R13)(R12*4), Z7, Z23)
	ADDQ $16, R12
	CMPQ R12, CX
	JLT  loop18
	JMP  done18

fma18:
	WIDEN((SI)(R12*2), Z8)
	FMADD(Z8, (AX)(R12*4), Z0)
	FMADD(Z8, (BX)(R12*4), Z1)
	FMADD(Z8, (DI)(R12*4), Z2)
	FMADD(Z8, (R8)(R12*4), Z3)
	FMADD(Z8, (R9)(R12*4), Z4)
	FMADD(Z8, (R10)(R12*4), Z5)
	FMADD(Z8, (R11)(R12*4), Z6)
	FMADD(Z8, (R13)(R12*4), Z7)
	ADDQ $16, R12
	CMPQ R12, CX
	JLT  fma18

done18:
	MOVQ acc+24(FP), DX
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VMOVUPS Z4, 256(DX)
	VMOVUPS Z5, 320(DX)
	VMOVUPS Z6, 384(DX)
	VMOVUPS Z7, 448(DX)
	VZEROUPPER
	RET

// func reduce512(acc *float32, n int, out *float32)
// out[i] = the canonical tree reduction of the 16 lanes acc[16i..16i+15]:
// for h = 8, 4, 2, 1: lane[l] += lane[l+h] (l < h). Each step adds the
// upper half of the live lanes to the lower half, which is that tree
// (float32 addition is commutative).
TEXT ·reduce512(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ out+16(FP), DI
	TESTQ CX, CX
	JZ   doner

loopr:
	VMOVUPS (SI), Z0
	FOLD16(Z0, Y0, X0, Y1, X1)
	VMOVSS X0, (DI)
	ADDQ $64, SI
	ADDQ $4, DI
	DECQ CX
	JNZ  loopr

doner:
	VZEROUPPER
	RET

// func minMax512(p *bf16.BF16, n int, lo1, hi *[32]uint16)
// For the first n (a multiple of 32, > 0) values, with m = bits & 0x7FFF:
// lo1[k] = min over the values at k mod 32 of uint16(m-1) (0 wraps to
// 0xFFFF) and hi[k] = max of m; bf16Range folds the 32 lanes.
TEXT ·minMax512(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ lo1+16(FP), DI
	MOVQ hi+24(FP), DX
	MOVL $0x7FFF7FFF, AX
	VPBROADCASTD AX, Z3
	MOVL $0x00010001, AX
	VPBROADCASTD AX, Z4
	VPTERNLOGD $0xFF, Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	SHRQ $5, CX

loopm:
	VPANDD  (SI), Z3, Z2
	VPMAXUW Z2, Z1, Z1
	VPSUBW  Z4, Z2, Z2
	VPMINUW Z2, Z0, Z0
	ADDQ $64, SI
	DECQ CX
	JNZ  loopm

	VMOVDQU64 Z0, (DI)
	VMOVDQU64 Z1, (DX)
	VZEROUPPER
	RET

// MUL2x8(base, a0, a1), FMA2x8: the input's 16 values at base+4·j into Z20, then
// both rows' chains for input i: acc a0 (row 0) and a1 (row 1).
#define MUL2x8(base, a0, a1) VMOVUPS (base)(R12*4), Z20; MULADD(Z8, Z20, a0, Z21); MULADD(Z9, Z20, a1, Z22)
#define FMA2x8(base, a0, a1) VMOVUPS (base)(R12*4), Z20; FMADD(Z8, Z20, a0); FMADD(Z9, Z20, a1)

// func rows2x8x512(a *bf16.BF16, stride int, x *[8]*float32, n int, acc *[2][8][16]float32, fma, carry int)
// Two rows against eight inputs: sixteen chains (row r, input i in
// Z(8r+i) for r = 0, and Z(10+i) for r = 1); each input is loaded once per
// step for both rows, each row widened once for all eight inputs. Each step
// prefetches one line of the next two rows at the columns it reads, of one
// row and then the other (DX = a + 2·stride and R14 = DX + stride, swapped
// every step; R14 is free in ABI0 code): 64 bytes of each row every two
// steps, which covers the next pair as this one is read, whether the rows
// are contiguous or the call covers a block of their columns. The chains
// start from zero, or with carry != 0 from *acc (a column block continuing
// the lanes of the one before it: the same additions in the same order).
TEXT ·rows2x8x512(SB), NOSPLIT, $0-56
	MOVQ a+0(FP), SI
	MOVQ stride+8(FP), BX
	MOVQ x+16(FP), R13
	MOVQ n+24(FP), CX
	MOVQ acc+32(FP), DX
	CMPQ carry+48(FP), $0
	JNE  load28
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z10, Z11, Z12, Z13)
	ZERO4(Z14, Z15, Z16, Z17)
	JMP  start28

load28:
	VMOVUPS 0(DX), Z0
	VMOVUPS 64(DX), Z1
	VMOVUPS 128(DX), Z2
	VMOVUPS 192(DX), Z3
	VMOVUPS 256(DX), Z4
	VMOVUPS 320(DX), Z5
	VMOVUPS 384(DX), Z6
	VMOVUPS 448(DX), Z7
	VMOVUPS 512(DX), Z10
	VMOVUPS 576(DX), Z11
	VMOVUPS 640(DX), Z12
	VMOVUPS 704(DX), Z13
	VMOVUPS 768(DX), Z14
	VMOVUPS 832(DX), Z15
	VMOVUPS 896(DX), Z16
	VMOVUPS 960(DX), Z17

start28:
	LEAQ (SI)(BX*1), R15
	LEAQ (R15)(BX*1), DX
	LEAQ (DX)(BX*1), R14
	INPUTS8
	XORQ R12, R12
	TESTQ CX, CX
	JZ   done28
	CMPQ fma+40(FP), $0
	JNE  fma28

loop28:
	PREFETCHT0 (DX)(R12*2)
	XCHGQ DX, R14
	WIDEN((SI)(R12*2), Z8)
	WIDEN((R15)(R12*2), Z9)
	MUL2x8(AX, Z0, Z10)
	MUL2x8(BX, Z1, Z11)
	MUL2x8(DI, Z2, Z12)
	MUL2x8(R8, Z3, Z13)
	MUL2x8(R9, Z4, Z14)
	MUL2x8(R10, Z5, Z15)
	MUL2x8(R11, Z6, Z16)
	MUL2x8(R13, Z7, Z17)
	ADDQ $16, R12
	CMPQ R12, CX
	JLT  loop28
	JMP  done28

fma28:
	PREFETCHT0 (DX)(R12*2)
	XCHGQ DX, R14
	WIDEN((SI)(R12*2), Z8)
	WIDEN((R15)(R12*2), Z9)
	FMA2x8(AX, Z0, Z10)
	FMA2x8(BX, Z1, Z11)
	FMA2x8(DI, Z2, Z12)
	FMA2x8(R8, Z3, Z13)
	FMA2x8(R9, Z4, Z14)
	FMA2x8(R10, Z5, Z15)
	FMA2x8(R11, Z6, Z16)
	FMA2x8(R13, Z7, Z17)
	ADDQ $16, R12
	CMPQ R12, CX
	JLT  fma28

done28:
	MOVQ acc+32(FP), DX
	VMOVUPS Z0, 0(DX)
	VMOVUPS Z1, 64(DX)
	VMOVUPS Z2, 128(DX)
	VMOVUPS Z3, 192(DX)
	VMOVUPS Z4, 256(DX)
	VMOVUPS Z5, 320(DX)
	VMOVUPS Z6, 384(DX)
	VMOVUPS Z7, 448(DX)
	VMOVUPS Z10, 512(DX)
	VMOVUPS Z11, 576(DX)
	VMOVUPS Z12, 640(DX)
	VMOVUPS Z13, 704(DX)
	VMOVUPS Z14, 768(DX)
	VMOVUPS Z15, 832(DX)
	VMOVUPS Z16, 896(DX)
	VMOVUPS Z17, 960(DX)
	VZEROUPPER
	RET

// Batch-1 range kernel. The rows are contiguous (stride 2·n bytes) and
// walked in blocks of four: four chains (one ZMM of 16 lanes per row), two
// 16-column steps per iteration, then the canonical tree reduction of each
// row in registers. Each iteration prefetches, for each of the four rows,
// the cache line pf bytes past the one it reads (pf = 8·n: the same
// column of the next block's rows).

// LOAD4(xo, wo): the 16 values of x at xo(DI)(R11*2) into Z8 and the 16
// values of each row at wo(row)(R11*1), widened, into Z4-Z7.
#define LOAD4(xo, wo) \
	VMOVUPS xo(DI)(R11*2), Z8; \
	VPMOVZXWD wo(SI)(R11*1), Z4; \
	VPMOVZXWD wo(R8)(R11*1), Z5; \
	VPMOVZXWD wo(R9)(R11*1), Z6; \
	VPMOVZXWD wo(R10)(R11*1), Z7; \
	VPSLLD $16, Z4, Z4; \
	VPSLLD $16, Z5, Z5; \
	VPSLLD $16, Z6, Z6; \
	VPSLLD $16, Z7, Z7

// STEP4M(xo, wo): LOAD4, then multiply and add into the four chains.
#define STEP4M(xo, wo) \
	LOAD4(xo, wo); \
	MULADD(Z4, Z8, Z0, Z12); \
	MULADD(Z5, Z8, Z1, Z13); \
	MULADD(Z6, Z8, Z2, Z14); \
	MULADD(Z7, Z8, Z3, Z15)

// STEP4F(xo, wo): STEP4M with fused multiply-adds.
#define STEP4F(xo, wo) \
	LOAD4(xo, wo); \
	FMADD(Z4, Z8, Z0); \
	FMADD(Z5, Z8, Z1); \
	FMADD(Z6, Z8, Z2); \
	FMADD(Z7, Z8, Z3)

// PF4: prefetch the line at R11 of each row's prefetch pointer.
#define PF4 \
	PREFETCHT0 (AX)(R11*1); \
	PREFETCHT0 (DX)(R11*1); \
	PREFETCHT0 (R12)(R11*1); \
	PREFETCHT0 (R13)(R11*1)

// REDUCE(z, y, xr, off): out[off/4] = the canonical tree reduction of the
// 16 lanes of z (y, xr its YMM and XMM views), as reduce512; R15 = out.
#define REDUCE(z, y, xr, off) FOLD16(z, y, xr, Y4, X4); VMOVSS xr, off(R15)

// func rowsN1x512(a *bf16.BF16, x *float32, n, rows int, out *float32, pf, fma int)
// out[r] = the canonical dot product of row r (a + 2·n·r bytes) with x,
// for r < rows; n > 0 a multiple of 16, rows > 0 a multiple of 4. The
// arguments rows and out are updated in place as blocks complete.
TEXT ·rowsN1x512(SB), NOSPLIT, $0-56
	MOVQ a+0(FP), SI
	MOVQ x+8(FP), DI
	MOVQ n+16(FP), CX
	LEAQ (CX)(CX*1), BX
	SHRQ $4, CX

blockN1:
	LEAQ (SI)(BX*1), R8
	LEAQ (SI)(BX*2), R9
	LEAQ (R8)(BX*2), R10
	MOVQ pf+40(FP), AX
	LEAQ (R8)(AX*1), DX
	LEAQ (R9)(AX*1), R12
	LEAQ (R10)(AX*1), R13
	ADDQ SI, AX
	ZERO4(Z0, Z1, Z2, Z3)
	XORQ R11, R11
	CMPQ fma+48(FP), $0
	JNE  fmaN1
	TESTQ $1, CX
	JZ   loopN1
	PF4
	STEP4M(0, 0)
	MOVQ $32, R11
	CMPQ R11, BX
	JGE  reduceN1

loopN1:
	PF4
	STEP4M(0, 0)
	STEP4M(64, 32)
	ADDQ $64, R11
	CMPQ R11, BX
	JLT  loopN1
	JMP  reduceN1

fmaN1:
	TESTQ $1, CX
	JZ   loopN1F
	PF4
	STEP4F(0, 0)
	MOVQ $32, R11
	CMPQ R11, BX
	JGE  reduceN1

loopN1F:
	PF4
	STEP4F(0, 0)
	STEP4F(64, 32)
	ADDQ $64, R11
	CMPQ R11, BX
	JLT  loopN1F

reduceN1:
	MOVQ out+32(FP), R15
	REDUCE(Z0, Y0, X0, 0)
	REDUCE(Z1, Y1, X1, 4)
	REDUCE(Z2, Y2, X2, 8)
	REDUCE(Z3, Y3, X3, 12)
	ADDQ $16, R15
	MOVQ R15, out+32(FP)
	LEAQ (SI)(BX*4), SI
	SUBQ $4, rows+24(FP)
	JNZ  blockN1
	VZEROUPPER
	RET

// ATTSTEP(j, acc): acc += p[j]·(the 16 bf16 values at SI, widened); SI
// moves to the next row (R8 bytes on).
#define ATTSTEP(j, acc) WIDEN((SI), Z16); VBROADCASTSS (j*4)(BX), Z17; MULADD(Z16, Z17, acc, Z18); ADDQ R8, SI

// ATTTAIL(j, acc): ATTSTEP for the j-th of the last n%16 rows; done
// after the last.
#define ATTTAIL(j, acc) ATTSTEP(j, acc); DECQ CX; JZ attfold

// func attnOut512(out *[16]float32, p *float32, v *bf16.BF16, stride, n int)
// Attention's output for 16 columns: lane l (Zl) sums p[t]·v[t][0..16]
// over t ≡ l (mod 16), t increasing (rows stride bytes apart), a multiply
// then an add; the 16 lanes are then folded in reduceLanes' tree order,
// column by column, and out gets the 16 column results.
TEXT ·attnOut512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DX
	MOVQ p+8(FP), BX
	MOVQ v+16(FP), SI
	MOVQ stride+24(FP), R8
	MOVQ n+32(FP), CX
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	MOVQ CX, R9
	SHRQ $4, R9
	JZ   atttail

attgroup:
	ATTSTEP(0, Z0)
	ATTSTEP(1, Z1)
	ATTSTEP(2, Z2)
	ATTSTEP(3, Z3)
	ATTSTEP(4, Z4)
	ATTSTEP(5, Z5)
	ATTSTEP(6, Z6)
	ATTSTEP(7, Z7)
	ATTSTEP(8, Z8)
	ATTSTEP(9, Z9)
	ATTSTEP(10, Z10)
	ATTSTEP(11, Z11)
	ATTSTEP(12, Z12)
	ATTSTEP(13, Z13)
	ATTSTEP(14, Z14)
	ATTSTEP(15, Z15)
	ADDQ $64, BX
	DECQ R9
	JNZ  attgroup

atttail:
	ANDQ $15, CX
	JZ   attfold
	ATTTAIL(0, Z0)
	ATTTAIL(1, Z1)
	ATTTAIL(2, Z2)
	ATTTAIL(3, Z3)
	ATTTAIL(4, Z4)
	ATTTAIL(5, Z5)
	ATTTAIL(6, Z6)
	ATTTAIL(7, Z7)
	ATTTAIL(8, Z8)
	ATTTAIL(9, Z9)
	ATTTAIL(10, Z10)
	ATTTAIL(11, Z11)
	ATTTAIL(12, Z12)
	ATTTAIL(13, Z13)
	ATTSTEP(14, Z14)
attfold:
	// reduceLanes: a_l = acc_l + acc_{l+8}; a_l += a_{l+4}; a_l += a_{l+2}; a_0 += a_1.
	VADDPS Z8, Z0, Z0
	VADDPS Z9, Z1, Z1
	VADDPS Z10, Z2, Z2
	VADDPS Z11, Z3, Z3
	VADDPS Z12, Z4, Z4
	VADDPS Z13, Z5, Z5
	VADDPS Z14, Z6, Z6
	VADDPS Z15, Z7, Z7
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	VADDPS Z2, Z0, Z0
	VADDPS Z3, Z1, Z1
	VADDPS Z1, Z0, Z0
	VMOVUPS Z0, (DX)
	VZEROUPPER
	RET
