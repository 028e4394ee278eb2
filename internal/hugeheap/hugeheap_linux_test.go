//go:build linux

package hugeheap

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
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
	got := smapsField(t, addr, "THPeligible:")
	if strings.Contains(string(real), "[never]") {
		t.Logf("transparent huge pages are off here (%s); THPeligible %s", strings.TrimSpace(string(real)), got)
		return
	}
	if got != "1" {
		t.Errorf("THPeligible %q for a heap object made after Advise, want 1", got)
	}
	modeFile = filepath.Join(dir, "missing")
	if got, err := Advise(1 << 20); got || err != nil {
		t.Errorf("no mode file: advised %v, %v", got, err)
	}
}

// smapsField is the value of field in /proc/self/smaps for the mapping
// that holds addr.
func smapsField(t *testing.T, addr uintptr, field string) string {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, field) {
			return strings.TrimSpace(strings.TrimPrefix(line, field))
		}
	}
	t.Fatalf("no %s for %#x in /proc/self/smaps", field, addr)
	return ""
}
