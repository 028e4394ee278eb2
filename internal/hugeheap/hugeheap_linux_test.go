//go:build linux

package hugeheap

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func TestAdvise(t *testing.T) {
	real, err := os.ReadFile(modeFile)
	if err != nil {
		t.Fatalf("no transparent huge pages here: %v", err)
	}
	defer func(m, o string) { modeFile, overcommitFile = m, o }(modeFile, overcommitFile)
	dir := t.TempDir()
	// Strict overcommit accounting: nothing is reserved.
	modeFile, overcommitFile = filepath.Join(dir, "enabled"), filepath.Join(dir, "overcommit")
	for _, f := range []struct{ path, text string }{{modeFile, "always [madvise] never\n"}, {overcommitFile, "2\n"}} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := Advise(64 << 20); got || err != nil {
		t.Fatalf("overcommit 2: advised %v, %v", got, err)
	}
	if err := os.WriteFile(overcommitFile, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode string
		want bool
	}{
		{"always madvise [never]\n", false},
		{"[always] madvise never\n", false},
		{"", false},
		{"always [madvise] never\n", true}, // last: the heap stays advised
	} {
		modeFile = filepath.Join(dir, "enabled")
		if err := os.WriteFile(modeFile, []byte(c.mode), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := Advise(64 << 20); err != nil || got != c.want {
			t.Fatalf("mode %q: advised %v, %v; want %v", c.mode, got, err, c.want)
		}
	}
	// A heap object made after Advise lies in advised memory: eligible for
	// huge pages wherever the kernel gives them at all.
	b := make([]byte, 4<<20)
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	got, err := Eligible(addr)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(real), "[never]") {
		t.Logf("transparent huge pages are off here (%s); eligible %v", strings.TrimSpace(string(real)), got)
		return
	}
	if !got {
		t.Error("a heap object made after Advise is not eligible for huge pages")
	}
	modeFile = filepath.Join(dir, "missing")
	if got, err := Advise(1 << 20); got || err != nil {
		t.Errorf("no mode file: advised %v, %v", got, err)
	}
}

func TestProcParsers(t *testing.T) {
	const smaps = `7f5168000000-7f5168021000 rw-p 00000000 00:00 0
Size:                132 kB
THPeligible:    0
2904ec000000-2904f7c00000 rw-p 00000000 00:00 0
AnonHugePages:    4096 kB
THPeligible:    1
55eeae044000-55eeae046000 r--p 00000000 fe:00 247278                     /usr/bin/head
Size:                  8 kB
`
	for _, c := range []struct {
		addr           uintptr
		lo, hi         uintptr
		inMap          bool
		eligible, elOK bool
	}{
		{0x7f5168000000, 0x7f5168000000, 0x7f5168021000, true, false, true},
		{0x2904f7bfffff, 0x2904ec000000, 0x2904f7c00000, true, true, true},
		{0x2904f7c00000, 0, 0, false, false, false}, // hi is outside
		{0x55eeae045000, 0x55eeae044000, 0x55eeae046000, true, false, false},
		{0x1000, 0, 0, false, false, false},
	} {
		lo, hi, ok := mappingIn([]byte(smaps), c.addr)
		if lo != c.lo || hi != c.hi || ok != c.inMap {
			t.Errorf("%#x: mapping %#x-%#x %v, want %#x-%#x %v", c.addr, lo, hi, ok, c.lo, c.hi, c.inMap)
		}
		if el, ok := eligibleIn([]byte(smaps), c.addr); el != c.eligible || ok != c.elOK {
			t.Errorf("%#x: eligible %v %v, want %v %v", c.addr, el, ok, c.eligible, c.elOK)
		}
	}
}

// FuzzProcParsers: mappingIn and eligibleIn never panic, a mapping found
// holds the address, and eligibility is found only inside a mapping.
// Seeds live in testdata/fuzz/FuzzProcParsers.
func FuzzProcParsers(f *testing.F) {
	f.Add([]byte("2904ec000000-2904f7c00000 rw-p 00000000 00:00 0\nTHPeligible:    1\n"), uint64(0x2904ec000010))
	f.Fuzz(func(t *testing.T, text []byte, addr uint64) {
		a := uintptr(addr)
		lo, hi, ok := mappingIn(text, a)
		if ok && !(lo <= a && a < hi) {
			t.Fatalf("mapping %#x-%#x does not hold %#x", lo, hi, a)
		}
		if _, found := eligibleIn(text, a); found && !ok {
			t.Fatalf("THPeligible found for %#x outside any mapping", a)
		}
	})
}

// rss is the process's resident memory in bytes (/proc/self/statm).
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := bytes.Fields(b)
	n, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n * int64(os.Getpagesize())
}

// TestAdviseDoesNotTouch: the reservation costs no memory even when the
// heap has free pages it used before (where the runtime zeroes a large
// allocation that starts, touching all of it).
func TestAdviseDoesNotTouch(t *testing.T) {
	defer func(m, o string) { modeFile, overcommitFile = m, o }(modeFile, overcommitFile)
	dir := t.TempDir()
	if oc, err := os.ReadFile(overcommitFile); err == nil && string(bytes.TrimSpace(oc)) == "2" {
		t.Skip("strict overcommit accounting: a 512 MiB reservation would count against the limit")
	}
	modeFile, overcommitFile = filepath.Join(dir, "enabled"), filepath.Join(dir, "overcommit")
	for _, f := range []struct{ path, text string }{{modeFile, "always [madvise] never\n"}, {overcommitFile, "0\n"}} {
		if err := os.WriteFile(f.path, []byte(f.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		// used, then free: a gap of pages the runtime must zero to reuse
		junk := make([]byte, 16<<20)
		for i := range junk {
			junk[i] = 1
		}
		runtime.KeepAlive(junk)
		junk = nil
		runtime.GC()
		before := rss(t)
		if ok, err := Advise(512 << 20); !ok || err != nil {
			t.Fatalf("advised %v, %v", ok, err)
		}
		if grew := rss(t) - before; grew > 64<<20 {
			t.Fatalf("Advise(512 MiB) grew the resident set by %d MiB", grew>>20)
		}
	}
}
