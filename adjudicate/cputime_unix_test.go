//go:build unix

package adjudicate

import (
	"syscall"
	"time"
)

// processCPU is the user+system CPU time of this process so far, so that a
// benchmark on a shared machine can report CPU time next to wall time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
