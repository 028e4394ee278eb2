// Package bf16 is the bfloat16 number type offcard computes in.
//
// Contract:
//   - FromFloat32 rounds to nearest, ties to even, exactly as PyTorch's scalar
//     c10::BFloat16 conversion; every NaN becomes the quiet NaN 0x7FC0.
//   - BF16.Float32 widens exactly (the 16 bits become the top of a float32).
//   - ULP gives the spacing of representable values at a value's magnitude.
//   - Steps is the distance in bf16 steps: between two numbers of the same
//     sign, the representable values between them (through a monotone
//     integer key, so a gap is comparable across binades); across zero
//     (opposite signs, or one of them zero), the gap in steps of the larger
//     magnitude, so that the many tiny values near zero do not count (+0
//     and -0 are 0 steps apart). This is the distance adjudicate's gaps,
//     dump's gap_steps and the property suite's logit tolerance are
//     measured in.
//
// The package imports nothing internal.
package bf16
