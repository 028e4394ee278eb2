package proptest

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) of this process plus, when pid
// is not 0, of process pid (from /proc; 0 when unreadable).
func cpuTime(pid int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	t := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if pid == 0 {
		return t
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut) // fields 14 and 15 of stat (utime, stime), in clock ticks
	fmt.Sscan(f[12], &st)
	return t + time.Duration(ut+st)*10*time.Millisecond // USER_HZ is 100 on Linux
}

// sysAndPeak are this process's system CPU time and its peak resident
// memory in bytes (0, 0 when unreadable). On a VM whose host backs guest
// memory lazily (a Firecracker VM with free page reporting), the kernel's
// zeroing of a process's fresh pages runs at a few hundred MB/s, so a
// campaign's system time follows its peak memory.
func sysAndPeak() (time.Duration, int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Stime.Nano()), ru.Maxrss << 10 // KiB on Linux
}
