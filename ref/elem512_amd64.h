// Macros shared by the AVX-512 elementwise kernels (elem512_amd64.s) and
// Attend's softmax loops (softmax512_amd64.s).
//
// Rounding to bf16 is done on the integer bits, exactly as
// bf16.FromFloat32: u + 0x7FFF + ((u>>16)&1), the upper half kept, and
// every NaN lane replaced by 0x7FC0 (bf16.QuietNaN). No AVX-512 BF16
// conversion is used: it flushes denormal inputs.

// CONSTS loads the rounding constants: Z31 = 0x7FFF, Z30 = 1,
// Z29 = 0xFFFF0000, Z28 = 0x7FC00000 (QuietNaN widened), Z27 = 0x80000000.
#define CONSTS \
	MOVL $0x7FFF, AX; \
	VPBROADCASTD AX, Z31; \
	MOVL $1, AX; \
	VPBROADCASTD AX, Z30; \
	MOVL $0xFFFF0000, AX; \
	VPBROADCASTD AX, Z29; \
	MOVL $0x7FC00000, AX; \
	VPBROADCASTD AX, Z28; \
	MOVL $0x80000000, AX; \
	VPBROADCASTD AX, Z27

// MASK16(cnt): K1 = the low min(cnt, 16) bits set (cnt > 0). Uses AX, R10.
#define MASK16(cnt) \
	MOVQ $16, R10; \
	CMPQ cnt, R10; \
	CMOVQLT cnt, R10; \
	MOVL $0xFFFF, AX; \
	BZHIL R10, AX, AX; \
	KMOVD AX, K1

// LOADW(mem, y, z): z = the (up to) 16 bf16 values at mem under K1,
// widened to float32 (exact); masked-out lanes are +0. y is z's YMM view.
#define LOADW(mem, y, z) \
	VMOVDQU16.Z mem, K1, y; \
	VPMOVZXWD y, z; \
	VPSLLD $16, z, z

// ROUNDF(z, t): z = R(z), float32 lanes rounded to bf16 and widened back
// (low 16 bits zero), NaN lanes set to QuietNaN; t and K2 are clobbered.
#define ROUNDF(z, t) \
	VCMPPS $3, z, z, K2; \
	VPSRLD $16, z, t; \
	VPANDD Z30, t, t; \
	VPADDD Z31, z, z; \
	VPADDD t, z, z; \
	VPANDD Z29, z, z; \
	VMOVDQA32 Z28, K2, z

// STOREW(z, mem): the bf16 lanes of z (as left by ROUNDF) to mem under K1.
#define STOREW(z, y, mem) \
	VPSRLD $16, z, z; \
	VPMOVDW z, y; \
	VMOVDQU16 y, K1, mem
