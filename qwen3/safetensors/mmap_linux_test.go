//go:build linux

package safetensors

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"

	"github.com/offcard/offcard/internal/hugeheap"
)

// TestOpenLinux opens one file both ways Linux has (read into huge-page
// memory; mapped, when memory is short): each gives the file's bytes,
// read-only, on a huge-page boundary or not as it should, and the read
// copy is eligible for transparent huge pages where the kernel has them.
func TestOpenLinux(t *testing.T) {
	// A tensor over many huge pages, so the file is not all header.
	data := make([]byte, 9*hugePage+6) // three pieces of readAll, and a bit
	for i := range data {
		data[i] = byte(i * 7)
	}
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "w", DType: "BF16", Shape: []int{len(data) / 2}, Data: data}}, nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "m.safetensors")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		avail int // memAvailable's answer
		read  bool
	}{
		{"read", 1 << 40, true},
		{"mapped: memory short", 2*buf.Len() - 1, false},
		{"mapped: memory unknown", 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			saved := memAvailable
			memAvailable = func() int { return c.avail }
			defer func() { memAvailable = saved }()
			f, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w, _ := f.Tensor("w")
			if !bytes.Equal(w.Data, data) {
				t.Fatal("tensor bytes differ from the file's")
			}
			start := uintptr(unsafe.Pointer(unsafe.SliceData(w.Data))) - uintptr(8+f.HeaderSize())
			if c.read && start%hugePage != 0 {
				t.Errorf("the read copy starts at %#x, not on a huge page", start)
			}
			if got, want := smapsPath(t, start), map[bool]string{true: "", false: path}[c.read]; got != want {
				t.Errorf("the data is in a mapping of %q, want %q", got, want)
			}
			if !faults(func() { w.Data[0]++ }) {
				t.Error("the tensor's memory is writable")
			}
			if c.read && thpEnabled(t) {
				if ok, err := hugeheap.Eligible(start); err != nil || !ok {
					t.Errorf("the read copy is not eligible for huge pages (%v)", err)
				}
			}
		})
	}
}

// faults reports whether f faulted (a write to read-only memory).
func faults(f func()) (faulted bool) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() { faulted = recover() != nil }()
	f()
	return false
}

// thpEnabled reports whether the kernel gives transparent huge pages to
// advised memory ([always] or [madvise]).
func thpEnabled(t *testing.T) bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Logf("no transparent huge pages: %v", err)
		return false
	}
	on := !strings.Contains(string(b), "[never]")
	if !on {
		t.Logf("transparent huge pages off: %s", b)
	}
	return on
}

// smapsPath is the path of the file mapped at addr ("" for anonymous
// memory), from /proc/self/maps.
func smapsPath(t *testing.T, addr uintptr) string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && lo <= addr && addr < hi {
			if f := strings.Fields(line); len(f) >= 6 {
				return f[5]
			}
			return ""
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return ""
}

func TestParseMemAvailable(t *testing.T) {
	const head = "MemTotal:       24683620 kB\nMemFree:        20684496 kB\n"
	for _, c := range []struct {
		text string
		want int
	}{
		{head + "MemAvailable:   24179916 kB\nBuffers:           26132 kB\n", 24179916 << 10},
		{"MemAvailable: 1 kB", 1 << 10},
		{head, 0},
		{"MemAvailable:   12 MB\n", 0},
		{"MemAvailable:   -3 kB\n", 0},
		{"MemAvailable:   kB\n", 0},
		{"MemAvailable:   99999999999999999999 kB\n", 0},
		{"MemAvailable:   9007199254740993 kB\n", 0}, // past MaxInt bytes
		{"XMemAvailable:   5 kB\n", 0},
	} {
		if got := parseMemAvailable([]byte(c.text)); got != c.want {
			t.Errorf("%q: %d, want %d", c.text, got, c.want)
		}
	}
	if memAvailable() <= 0 {
		t.Error("this machine's /proc/meminfo gives no MemAvailable")
	}
}

// FuzzParseMemAvailable: parseMemAvailable never panics, gives a
// non-negative whole number of KiB, and more than 0 only from a
// MemAvailable line. Seeds live in testdata/fuzz/FuzzParseMemAvailable.
func FuzzParseMemAvailable(f *testing.F) {
	f.Add([]byte("MemTotal:       24683620 kB\nMemAvailable:   24179916 kB\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		n := parseMemAvailable(text)
		if n < 0 || n%1024 != 0 {
			t.Fatalf("%d bytes", n)
		}
		if n > 0 && !bytes.Contains(text, []byte("MemAvailable:")) {
			t.Fatalf("%d bytes without a MemAvailable line", n)
		}
	})
}
