// Package tthwtest builds the C loopback (tthw/loopback) for tests: the
// library named by $OFFCARD_LOOPBACK when set (make test sets it), or one
// compiled with cc from this checkout's sources into a temporary directory.
// Mutants of the C code are built the same way from edited sources.
package tthwtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Env names the prebuilt loopback library.
const Env = "OFFCARD_LOOPBACK"

// Dir is the directory of tthw (holding include/ and loopback/).
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

var (
	once    sync.Once
	built   string
	buildEr error
)

// Loopback returns the path of a loopback library, building it once per
// test binary when $OFFCARD_LOOPBACK is unset.
func Loopback(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv(Env); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("%s=%s: %v", Env, p, err)
		}
		return p
	}
	once.Do(func() {
		// One build per source version, shared by the test binaries of a
		// run: the file name carries a hash of the sources.
		h, err := sourceHash()
		if err != nil {
			buildEr = err
			return
		}
		out := filepath.Join(os.TempDir(), "offcard-loopback-"+h+".so")
		if _, err := os.Stat(out); err == nil {
			built = out
			return
		}
		tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
		if _, buildEr = Build(tmp); buildEr == nil {
			buildEr = os.Rename(tmp, out)
			built = out
		}
	})
	if buildEr != nil {
		tb.Fatalf("building the loopback: %v", buildEr)
	}
	return built
}

// Edit is a text edit of one loopback source file: Old must occur exactly
// once in the file (after the edits before it) and becomes New.
type Edit struct {
	File, Old, New string
}

// Build compiles the loopback into out with cc (-O2; mutants, built from
// edits applied in order, with -O0 to keep tests quick).
func Build(out string, edits ...Edit) (string, error) {
	src := filepath.Join(Dir(), "loopback")
	dir := src
	if len(edits) > 0 {
		tmp, err := os.MkdirTemp("", "offcard-loopback-mutant-")
		if err != nil {
			return "", err
		}
		ents, err := os.ReadDir(src)
		if err != nil {
			return "", err
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				return "", err
			}
			s := string(b)
			for _, ed := range edits {
				if ed.File != e.Name() {
					continue
				}
				if strings.Count(s, ed.Old) != 1 {
					return "", fmt.Errorf("mutant anchor %q occurs %d times in %s", ed.Old, strings.Count(s, ed.Old), e.Name())
				}
				s = strings.Replace(s, ed.Old, ed.New, 1)
			}
			if err := os.WriteFile(filepath.Join(tmp, e.Name()), []byte(s), 0o644); err != nil {
				return "", err
			}
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	opt := "-O2"
	if len(edits) > 0 {
		opt = "-O0"
	}
	args := []string{"-std=c11", opt, "-fPIC", "-shared", "-I", filepath.Join(Dir(), "include"), "-o", out,
		filepath.Join(dir, "loopback.c"), filepath.Join(dir, "ops.c"), "-lm"}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return out, nil
}

// sourceHash is a short hash of the loopback's sources and the ABI header.
func sourceHash() (string, error) {
	h := sha256.New()
	files, err := filepath.Glob(filepath.Join(Dir(), "loopback", "*"))
	if err != nil {
		return "", err
	}
	files = append(files, filepath.Join(Dir(), "include", "offcard_tt.h"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
