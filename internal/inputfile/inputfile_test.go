package inputfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// within fails the test when f does not return within d (a blocked open
// of a FIFO); unblock, if set, is called then to release it.
func within(t *testing.T, d time.Duration, unblock func(), f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		if unblock != nil {
			unblock()
		}
		t.Fatalf("did not return within %v", d)
		return nil
	}
}

func TestFIFORefusedWithoutBlocking(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no FIFOs")
	}
	p := filepath.Join(t.TempDir(), "config.json")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skip(err)
	}
	unblock := func() { // a writer releases a blocked reader's open
		if w, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
	}
	err := within(t, 5*time.Second, unblock, func() error { _, err := ReadFile(p, MaxJSON, "a config.json"); return err })
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("got %v, want not a regular file (a named pipe) naming %s", err, p)
	}
}

func TestDeviceSymlinkRefused(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.Symlink("/dev/zero", p); err != nil {
		t.Skip(err)
	}
	err := within(t, 5*time.Second, nil, func() error { _, err := ReadFile(p, MaxTokenizer, "a tokenizer.json"); return err })
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "character device") {
		t.Fatalf("got %v, want not a regular file (a character device)", err)
	}
	dir := filepath.Join(t.TempDir(), "d")
	os.Mkdir(dir, 0o755)
	if _, _, err := Open(dir, -1, "a dump"); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "directory") {
		t.Fatalf("directory: got %v", err)
	}
}

func TestSizeBound(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "big")
	f, _ := os.Create(p)
	if err := f.Truncate(2 << 30); err != nil { // sparse: no disk used
		t.Skip(err)
	}
	f.Close()
	_, err := ReadFile(p, MaxJSON, "a config.json")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "2.0 GiB, more than the 64.0 MiB a config.json may be") {
		t.Fatalf("got %v", err)
	}
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("0123456789"), 0o644)
	b, err := ReadFile(small, 10, "x")
	if err != nil || string(b) != "0123456789" {
		t.Fatalf("exactly at the bound: %q, %v", b, err)
	}
	if _, err := ReadFile(small, 9, "x"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte over: %v", err)
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	if b, err := ReadFile(empty, 10, "x"); err != nil || len(b) != 0 {
		t.Fatalf("empty: %q, %v", b, err)
	}
	if _, _, err := Open(filepath.Join(dir, "nope"), 1, "x"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
