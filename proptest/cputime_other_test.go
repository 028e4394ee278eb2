//go:build !linux

package proptest

import "time"

func cpuTime(int) time.Duration { return 0 }

func sysTime() time.Duration { return 0 }

func peakRSS() int64 { return 0 }
