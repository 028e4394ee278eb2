//go:build !amd64 || purego

package sim

import "github.com/offcard/offcard/bf16"

var useAVX2 = false

// dotRowFast is dotRow (no assembly on this platform).
func dotRowFast(a []bf16.BF16, x []float32) float32 { return dotRow(a, x) }
