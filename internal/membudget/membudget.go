// Package membudget is the memory offcard lets an input make it take: a
// size that comes from a file or a flag (KV blocks of a script, a dump's
// positions, a config's dimensions) is turned into the bytes it implies
// and checked here before anything is allocated, so that a tiny input
// cannot make offcard eat the machine or die of Go's "out of memory".
//
// The budget is the memory the kernel reports available for a new
// workload (MemAvailable of /proc/meminfo on Linux); where that is not
// known, DefaultBudget. The package imports nothing of offcard's.
package membudget

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
)

// DefaultBudget is the budget where the available memory is not known.
const DefaultBudget = 16 << 30

// Available is the memory available in bytes, 0 when unknown. A variable
// so that tests can state a machine.
var Available = func() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseMemAvailable(b)
}

// Budget is the most memory an input may make offcard take, in bytes.
func Budget() int64 {
	if a := Available(); a > 0 {
		return a
	}
	return DefaultBudget
}

// Check returns an error when need bytes are more than Budget: "needs
// about 3.5 GiB of memory, more than the 2.0 GiB available".
func Check(need int64) error {
	if b := Budget(); need > b {
		return fmt.Errorf("needs about %s of memory, more than the %s available", Size(need), Size(b))
	}
	return nil
}

// Mul is a·b·…, saturating at math.MaxInt64 (and 0 when any factor is ≤ 0),
// for products of sizes that come from input.
func Mul(f ...int64) int64 {
	p := uint64(1)
	for _, x := range f {
		if x <= 0 {
			return 0
		}
		hi, lo := bits.Mul64(p, uint64(x))
		if hi != 0 || lo > math.MaxInt64 {
			return math.MaxInt64
		}
		p = lo
	}
	return int64(p)
}

// Add is a+b+…, saturating at math.MaxInt64 (terms ≥ 0).
func Add(t ...int64) int64 {
	var s int64
	for _, x := range t {
		if x > math.MaxInt64-s {
			return math.MaxInt64
		}
		s += x
	}
	return s
}

// parseMemAvailable is the MemAvailable line of /proc/meminfo's text in
// bytes; 0 when there is none or it does not read so.
func parseMemAvailable(meminfo []byte) int64 {
	for line := range bytes.Lines(meminfo) {
		rest, ok := bytes.CutPrefix(line, []byte("MemAvailable:"))
		if !ok {
			continue
		}
		kb, ok := bytes.CutSuffix(bytes.TrimSpace(rest), []byte(" kB"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(kb)), 10, 64)
		if !ok || err != nil || n < 0 || n > math.MaxInt64>>10 {
			return 0
		}
		return n << 10
	}
	return 0
}

// Size formats a byte count for a message: "512 B", "64.0 MiB", "3.5 GiB".
func Size(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return fmt.Sprintf("%d B", n)
	case n < k*k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	case n < k*k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	case n < k*k*k*k:
		return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
	}
	return fmt.Sprintf("%.1f TiB", float64(n)/(k*k*k*k))
}
