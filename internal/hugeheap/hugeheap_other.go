//go:build !linux

package hugeheap

// Advise does nothing off Linux.
func Advise(reserve int) (advised bool, err error) { return false, nil }
