// Package tthw is the real Tenstorrent device behind tt.Device, reached
// through purego (no cgo) and the small C ABI of include/offcard_tt.h.
//
// Open loads a library implementing that ABI (dlopen RTLD_NOW|RTLD_LOCAL),
// checks its ABI version (a mismatch is a clear error), opens its device and
// returns a *Device, which implements tt.Device. Device refusals come back
// as *tt.Error carrying the device's own message text (read from the
// library's thread-local last error, with the goroutine locked to its OS
// thread around each call); bad arguments, ABI mismatches, injected faults
// and internal errors come back as *Error. Close frees whatever is still
// live and reports it (Leaks).
//
// Two libraries implement the ABI:
//   - loopback/ — the ABI in C on host memory, for CI: tt-metal's allocator
//     rules, interleaved and height-sharded pages, trace replay at baked
//     addresses, the paged ops with the kernels' page-table walk, plus_one
//     with the -1 skip, compute ops as plain float loops (not bit-exact with
//     ref, on purpose), and fault injection through Options. `make loopback`
//     builds it into build/; tests use $OFFCARD_LOOPBACK or build it with cc
//     (package tthwtest).
//   - ttnn/ — the C++ shim over ttnn at tt-metal 622c6fb9, built where
//     tt-metal is installed (ttnn/README.md).
//
// Import rule: tthw imports only tt (and purego).
package tthw
