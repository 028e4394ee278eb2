// Package ref is the oracle of offcard: a bit-exact bf16 CPU reference
// decoder for Qwen3, a paged CPU KV store, and the bf16 kernels both are
// built from.
//
// # Contract
//
// Storage is bf16 at every op boundary and arithmetic is float32, with the
// rounding points of Hugging Face's eager Qwen3 path (R(·) = round to
// nearest even bf16):
//
//   - linear: y[o] = R(Dot(W[o], x)) (MatVec)
//   - RMSNorm: s = float32(1/sqrt(Dot(x,x)/n + eps)); y = R(x·s); out = R(w·y)
//   - q_norm/k_norm per head over head_dim, before RoPE
//   - RoPE tables: inv_freq and freq in float32, cos/sin rounded to bf16;
//     half-split rotate: out = R(R(x·cos) + R(rot·sin))
//   - attention scores R(R(q·k)·scale) with scale = float32(1/sqrt(head_dim));
//     float32 softmax; p = R(e/sum); out = R(Σ p·v)
//   - residual adds R(a+b); MLP R(R(silu(g))·u)
//   - logits R(x·W_lm), returned widened to float32; token = first argmax
//
// Every reduction (dot products, the sum of squares of RMSNorm, the softmax
// denominator, the P·V sum) uses one canonical order, fixed by Dot: 16
// float32 lanes, acc[j%16] += float32(a[j]·b[j]) for j increasing, then a
// tree reduction acc[l] += acc[l+h] for h = 8, 4, 2, 1. The order depends
// only on the reduction length: never on batch size, thread count, the
// other sequences of a batch, or the block layout of the cache. Therefore:
//
//   - prefill then decode equals token-by-token decode, bit for bit;
//   - a sequence's logits do not depend on the rest of its batch;
//   - any Threads / GOMAXPROCS gives the same bits;
//   - any block table (permuted, non-contiguous) gives the same bits as a
//     contiguous one.
//
// Any faster implementation of these kernels (assembly, the simulator's
// ops) must reproduce this order bit for bit; the simulator calls these
// kernels in the same decomposition, so engine-on-sim equals ref exactly.
// On amd64 the decoder's matrix-vector products run in assembly. With
// AVX-512 one ZMM register holds the 16 lanes of a (row, input) pair; the
// kernels take four rows against one input, or two rows against four or
// eight inputs, so a batch of up to eight sequences widens each block of
// weights once (the weights stay in the loaded file's image; they are not
// repacked). The lanes are reduced in the canonical tree in assembly too.
// A single sequence's product runs whole row ranges in one assembly call
// (blocks of four rows, reduced in registers), and its outputs are rounded
// to bf16 in assembly too (round512, the elementwise kernels' rounding). Every kernel prefetches the
// rows it reads next in software: the rows are short (2-6 KB) and read as
// interleaved streams, which the hardware prefetcher alone follows at well
// under memory speed.
// With AVX2 only, lanes 0-7 and
// 8-15 sit in two YMM registers. Every kernel multiplies and then adds,
// which is the float32 operation sequence of the pure-Go loop, except where
// a fused multiply-add is proved to give the same bits: the product of two
// bf16 values has at most 16 significant bits, so it is exact in float32
// unless it underflows or overflows, and then round(acc + a·x) is the same
// either way. The decoder fuses only when the exponent ranges of a weight
// part and of the batch's inputs rule out underflow, overflow, denormals,
// infinities and NaNs (exact.go states the bounds). Tests compare every
// kernel with the pure-Go loop on random bit patterns (denormals,
// infinities, NaNs, overflowing products), check the guard over every pair
// of exponents, and show that fusing without it changes bits.
// The elementwise kernels (RMSNorm with its sum of squares, Rope, Add,
// SiluMul) have AVX-512 paths too (elem512_amd64.s, from a few elements
// on): 16 lanes per step, the tail under a mask, the float32 operations of
// the pure-Go loop lane by lane (never fused), and the rounding to bf16
// done on the integer bits exactly as bf16.FromFloat32 (not the AVX-512
// BF16 conversion, which flushes denormals). Each is tested bit for bit
// against its pure-Go twin (rmsNormGo, ropeGo, addGo, siluMulGo).
// Attend's softmax loops (the scaled, rounded scores and their maximum,
// the exponentials with their lane sums, the normalising division) have
// AVX-512 paths as well (softmax512_amd64.s). The exponential follows the
// operations of math.Exp's amd64 code (src/math/exp_amd64.s, its FMA path)
// in float64 lanes; it equals float32(math.Exp(float64(d))) for every
// float32 d from -110 to 0 (on either of math's paths: with and without
// FMA they round to the same float32 values there), and gives +0 below.
// A group of 16 holding a NaN is left to the Go loop. Build with -tags
// purego to use pure Go only; results are identical.
//
// # The decoder
//
// Decoder processes each position of a prompt with exactly the decode path
// (prefill is a loop of single-position steps), keeps the KV cache in a
// KVStore laid out by the caller's block tables, and runs a step's work
// on a persistent worker pool: every matrix product by contiguous
// output-row ranges (one per thread at batch 1; at a larger batch, chunks
// of four-row blocks that the threads take from a shared counter), each
// layer's attention by (sequence, kv head) items, and the work between
// matrix products (norms, residual adds, SwiGLU, the logits and argmax) by
// sequences. Every item computes its outputs the same way whichever thread
// runs it, so the split never changes a bit (TestThreadsInvariant,
// TestBatchThreadsInvariant). Only the key heads and the cache writes run
// on the caller, in batch order, before any attention reads. Activation
// buffers are preallocated; a step allocates only the returned outputs
// (one logits slice per sequence).
//
// # What is not guaranteed
//
// Bit equality with PyTorch is not claimed. PyTorch's bf16 matmuls
// accumulate in an implementation-defined (blocked) order, its fp32 mean
// and rsqrt may differ in the last float32 bit, and its default attention
// backend (SDPA) has different rounding points from the eager path mirrored
// here. Against PyTorch or hardware, compare in bf16 ULPs (a few steps in
// the logits after many layers are normal), never bit for bit. NaN payloads
// of intermediate float32 values are not specified; bf16 NaNs are always
// the quiet NaN 0x7FC0.
package ref
