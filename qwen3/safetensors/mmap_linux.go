//go:build linux

package safetensors

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// On Linux, Open reads the file into anonymous memory advised for
// transparent huge pages (MADV_HUGEPAGE) and then made read-only, rather
// than mapping the file. A decoder streams every weight at every step;
// through the file mapping's 4 KiB page-cache pages it pays a TLB miss
// every 4 KiB, through 2 MiB pages almost none (ref's batch-1 decode of
// qwen3-0.6b on two threads ran 5 to 50% faster so, in alternating runs).
// The price is the read at Open: about 0.35 s for qwen3-0.6b's 1.2 GB on
// two cores, where a mapping pays its page faults during the first step.
//
// A file larger than half the memory the kernel reports available
// (MemAvailable) is mapped as before, so a checkpoint larger than memory
// still opens and pages in from the file; so is one where the anonymous
// memory cannot be had.

// hugePage is the size (and alignment) of a transparent huge page on the
// architectures Go supports on Linux with them (amd64, arm64 with 4 KiB
// base pages).
const hugePage = 2 << 20

// memAvailable is the kernel's estimate of the bytes available for a new
// workload without swapping, 0 when unknown. A variable so tests can take
// the mapping path.
var memAvailable = func() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parseMemAvailable(b)
}

// parseMemAvailable is the MemAvailable line of /proc/meminfo's text
// ("MemAvailable:   24179916 kB") in bytes; 0 when there is no such line
// or it does not read so.
func parseMemAvailable(meminfo []byte) int {
	for line := range bytes.Lines(meminfo) {
		rest, ok := bytes.CutPrefix(line, []byte("MemAvailable:"))
		if !ok {
			continue
		}
		kb, ok := bytes.CutSuffix(bytes.TrimSpace(rest), []byte(" kB"))
		n, err := strconv.Atoi(string(bytes.TrimSpace(kb)))
		if !ok || err != nil || n < 0 || n > math.MaxInt>>10 {
			return 0
		}
		return n << 10
	}
	return 0
}

// readResident reads the open file fd (size bytes) into anonymous memory
// advised for huge pages and made read-only; ok is false, with nothing
// done, when the file is to be mapped instead.
func readResident(fd *os.File, path string, size int) (data []byte, release func() error, ok bool, err error) {
	if size > memAvailable()/2 {
		return nil, nil, false, nil
	}
	region, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, false, nil
	}
	release = func() error { return syscall.Munmap(region) }
	// The data starts on a huge-page boundary; the kernel backs aligned
	// 2 MiB spans of an advised region with huge pages.
	off := (hugePage - int(uintptr(unsafe.Pointer(&region[0]))%hugePage)) % hugePage
	data = region[off : off+size : off+size]
	_ = syscall.Madvise(data, syscall.MADV_HUGEPAGE) // advice: without it, 4 KiB pages
	if err := readAll(fd, data); err != nil {
		_ = release()
		return nil, nil, false, fmt.Errorf("%s: read: %w", path, err)
	}
	if err := syscall.Mprotect(region, syscall.PROT_READ); err != nil {
		_ = release()
		return nil, nil, false, fmt.Errorf("%s: mprotect: %w", path, err)
	}
	return data, release, true, nil
}

// readAll fills data from the start of fd, in huge-page-aligned pieces
// read by up to GOMAXPROCS goroutines (the kernel's page faults and copy
// are per core).
func readAll(fd *os.File, data []byte) error {
	const piece = 4 * hugePage
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				lo := int(next.Add(piece)) - piece
				if lo >= len(data) {
					return
				}
				hi := min(lo+piece, len(data))
				if _, err := fd.ReadAt(data[lo:hi], int64(lo)); err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
