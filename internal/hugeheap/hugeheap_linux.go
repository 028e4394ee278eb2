//go:build linux

package hugeheap

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
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
	b := make([]byte, reserve)
	lo, hi, err := mapping(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	if err != nil {
		return false, err
	}
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, syscall.MADV_HUGEPAGE); e != 0 {
		return false, fmt.Errorf("hugeheap: madvise: %w", e)
	}
	runtime.KeepAlive(b)
	runtime.GC() // b is dead: the reservation becomes free heap at once
	return true, nil
}

// mapping is the range [lo, hi) of the mapping that holds addr, from
// /proc/self/maps.
func mapping(addr uintptr) (lo, hi uintptr, err error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, 0, fmt.Errorf("hugeheap: %w", err)
	}
	for line := range bytes.Lines(maps) {
		if n, _ := fmt.Sscanf(string(line), "%x-%x", &lo, &hi); n == 2 && lo <= addr && addr < hi {
			return lo, hi, nil
		}
	}
	return 0, 0, fmt.Errorf("hugeheap: no mapping in /proc/self/maps holds %#x", addr)
}

// Eligible reports whether the kernel may back the mapping that holds
// addr with transparent huge pages (THPeligible in /proc/self/smaps).
func Eligible(addr uintptr) (bool, error) {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return false, fmt.Errorf("hugeheap: %w", err)
	}
	in := false
	for line := range bytes.Lines(smaps) {
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(string(line), "%x-%x ", &lo, &hi); n == 2 { // a mapping's first line
			in = lo <= addr && addr < hi
			continue
		}
		if v, ok := bytes.CutPrefix(line, []byte("THPeligible:")); ok && in {
			return string(bytes.TrimSpace(v)) == "1", nil
		}
	}
	return false, fmt.Errorf("hugeheap: no THPeligible for %#x in /proc/self/smaps", addr)
}
