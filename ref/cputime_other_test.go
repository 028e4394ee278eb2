//go:build !unix

package ref

import "time"

func processCPU() time.Duration { return 0 }
