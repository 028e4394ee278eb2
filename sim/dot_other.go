//go:build !amd64 || purego

package sim

var useAVX2 = false

// dotFast is dotWide (no assembly on this platform).
func dotFast(a, b []float32) float32 { return dotWide(a, b) }
