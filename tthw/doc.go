// Package tthw will be the real Tenstorrent device behind tt.Device, reached
// through purego and the small C ABI in offcard_tt.h: loopback/ is a C
// implementation of that ABI on host memory (for CI), ttnn/ the C++ shim over
// ttnn built where tt-metal is installed.
//
// Status: not implemented yet; nothing in offcard depends on it. It may import
// only tt.
package tthw
