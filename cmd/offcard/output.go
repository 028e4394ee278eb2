package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

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
