//go:build linux

package hugeheap

import (
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
