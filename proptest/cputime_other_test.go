//go:build !linux

package proptest

import "time"

func cpuTime(int) time.Duration { return 0 }

func sysAndPeak() (time.Duration, int64) { return 0, 0 }
