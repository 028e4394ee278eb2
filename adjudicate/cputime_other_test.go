//go:build !unix

package adjudicate

import "time"

func processCPU() time.Duration { return 0 }
