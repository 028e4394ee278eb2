//go:build !linux

package hugeheap

// Advise does nothing off Linux.
func Advise(reserve int) (advised bool, err error) { return false, nil }

// Eligible reports false off Linux.
func Eligible(addr uintptr) (bool, error) { return false, nil }
