package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/term"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// outputMode is the mode of every file the CLI writes (as export's).
const outputMode = 0o644

// atomicFile is the one way the CLI writes a user's output file: to a
// temporary file beside path, renamed into place on Commit with mode
// 0644, so a failed command never leaves a half-written output. Errors
// name the user's path, never the temporary file.
// An interrupt removes the temporary file (atInterrupt).
type atomicFile struct {
	*os.File
	path string
	done func()
}

func createAtomic(path string) (*atomicFile, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, badInput{fmt.Errorf("create %s: is a directory", path)}
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, badInput{fmt.Errorf("create %s: %v", path, pathErr(err))}
	}
	tmp := f.Name()
	return &atomicFile{File: f, path: path, done: atInterrupt(func() { os.Remove(tmp) })}, nil
}

// Commit closes the file and moves it into place.
func (a *atomicFile) Commit() error {
	defer a.done()
	tmp := a.File.Name()
	err := a.File.Chmod(outputMode)
	if cerr := a.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, a.path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %v", a.path, pathErr(err))
	}
	return nil
}

// Abort closes and removes the temporary file; safe after Commit.
func (a *atomicFile) Abort() {
	defer a.done()
	a.File.Close()
	os.Remove(a.File.Name())
}

// writeFileAtomic writes data to path through an atomicFile.
func writeFileAtomic(path string, data []byte) error {
	f, err := createAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %v", path, pathErr(err))
	}
	return f.Commit()
}

// pathErr is err without the path an *fs.PathError or *os.LinkError
// names (the temporary file's), for messages that name the user's path.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// checkOutputFiles makes sure each non-empty path can be created (its
// directory exists and is writable, the path is no directory) before a
// command's work starts; nothing is left behind.
func checkOutputFiles(paths ...string) error {
	for _, p := range paths {
		if p == "" {
			continue
		}
		f, err := createAtomic(p)
		if err != nil {
			return err
		}
		f.Abort()
	}
	return nil
}

// checkOutputDir makes sure dir (an output flag's directory) is a
// directory a file can be written into, creating it if missing; flag
// names the flag in the error. Run before the job starts.
func checkOutputDir(flag, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return bad("%s %s: %v", flag, dir, pathErr(err))
	}
	probe, err := createAtomic(filepath.Join(dir, "probe"))
	if err != nil {
		return bad("%s %s: not writable: %v", flag, dir, pathErr(err))
	}
	probe.Abort()
	return nil
}

// positiveTimeout refuses a --timeout given as zero or less (zero is
// not "the default": leave the flag out for that).
func positiveTimeout(f *flags, d time.Duration) error {
	if flagSet(f, "timeout") && d <= 0 {
		return bad("--timeout %v: want a positive duration (leave it out for the default)", d)
	}
	return nil
}

// plural is noun for n == 1, else noun+"s" ("1 command", "2 commands").
func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
