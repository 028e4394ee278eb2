//go:build linux

package hugeheap

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"unsafe"
)

// modeFile is where the kernel states its huge-page policy, and
// overcommitFile its accounting of memory not yet touched.
var (
	modeFile       = "/sys/kernel/mm/transparent_hugepage/enabled"
	overcommitFile = "/proc/sys/vm/overcommit_memory"
)

// Advise advises the heap mapping for transparent huge pages after
// growing it by reserve bytes of untouched address space (see the package
// comment). advised reports whether it did; it does not when the policy
// is not "madvise", nor under strict overcommit accounting (mode 2), where
// the untouched reservation would count against the commit limit.
func Advise(reserve int) (advised bool, err error) {
	mode, err := os.ReadFile(modeFile)
	if err != nil || !bytes.Contains(mode, []byte("[madvise]")) {
		return false, nil // no huge pages, or all mappings get them already
	}
	if oc, err := os.ReadFile(overcommitFile); err != nil || string(bytes.TrimSpace(oc)) == "2" {
		return false, nil
	}
	// The reservation is taken in pieces: the runtime zeroes a large
	// allocation whole when any page of it was used before, and one of
	// reserve bytes that starts in a free gap of the heap would be zeroed
	// (touched: 2 s for 512 MB here). Only the pieces that land in such
	// gaps are, now.
	pieces := make([][]byte, 0, reserve/reservePiece+1)
	for n := 0; n < reserve; n += reservePiece {
		pieces = append(pieces, make([]byte, min(reservePiece, reserve-n)))
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false, fmt.Errorf("hugeheap: %w", err)
	}
	var done [][2]uintptr // the mappings advised
	for _, b := range pieces {
		addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		lo, hi, ok := mappingIn(maps, addr)
		if !ok {
			return false, fmt.Errorf("hugeheap: no mapping in /proc/self/maps holds %#x", addr)
		}
		if slices.Contains(done, [2]uintptr{lo, hi}) {
			continue
		}
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, syscall.MADV_HUGEPAGE); e != 0 {
			return false, fmt.Errorf("hugeheap: madvise: %w", e)
		}
		done = append(done, [2]uintptr{lo, hi})
	}
	runtime.KeepAlive(pieces)
	runtime.GC() // the pieces are dead: the reservation becomes free heap at once
	return true, nil
}

// reservePiece is the size of the allocations Advise reserves with.
const reservePiece = 4 << 20

// mappingIn is the range of the mapping that holds addr in the text of
// /proc/PID/maps (or smaps), whose mappings start lines "lo-hi ...".
func mappingIn(maps []byte, addr uintptr) (lo, hi uintptr, ok bool) {
	for line := range bytes.Lines(maps) {
		if lo, hi, ok := rangeOf(line); ok && lo <= addr && addr < hi {
			return lo, hi, true
		}
	}
	return 0, 0, false
}

// rangeOf reads the "lo-hi " that starts a mapping's line (hexadecimal).
func rangeOf(line []byte) (lo, hi uintptr, ok bool) {
	r, _, found := bytes.Cut(line, []byte(" "))
	a, b, dash := bytes.Cut(r, []byte("-"))
	if !found || !dash {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(string(a), 16, 64)
	h, err2 := strconv.ParseUint(string(b), 16, 64)
	if err1 != nil || err2 != nil || l > h {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}

// Eligible reports whether the kernel may back the mapping that holds
// addr with transparent huge pages (THPeligible in /proc/self/smaps).
func Eligible(addr uintptr) (bool, error) {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return false, fmt.Errorf("hugeheap: %w", err)
	}
	v, ok := eligibleIn(smaps, addr)
	if !ok {
		return false, fmt.Errorf("hugeheap: no THPeligible for %#x in /proc/self/smaps", addr)
	}
	return v, nil
}

// eligibleIn is the THPeligible field of the mapping that holds addr in
// the text of /proc/PID/smaps; ok is false when there is none.
func eligibleIn(smaps []byte, addr uintptr) (eligible, ok bool) {
	in := false
	for line := range bytes.Lines(smaps) {
		if lo, hi, isRange := rangeOf(line); isRange {
			in = lo <= addr && addr < hi
			continue
		}
		if v, field := bytes.CutPrefix(line, []byte("THPeligible:")); field && in {
			return string(bytes.TrimSpace(v)) == "1", true
		}
	}
	return false, false
}
