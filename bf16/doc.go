// Package bf16 is the bfloat16 number type offcard computes in.
//
// Contract:
//   - FromFloat32 rounds to nearest, ties to even, exactly as PyTorch's scalar
//     c10::BFloat16 conversion; every NaN becomes the quiet NaN 0x7FC0.
//   - BF16.Float32 widens exactly (the 16 bits become the top of a float32).
//   - ULP gives the spacing of representable values at a value's magnitude.
//   - Steps counts the representable values between two numbers through a
//     monotone integer key, so +0 and -0 are 0 steps apart and a gap is
//     comparable across signs and binades.
//
// The package imports nothing internal.
package bf16
