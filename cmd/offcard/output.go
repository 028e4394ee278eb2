package main

import (
	"os"
	"path/filepath"

	"golang.org/x/term"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// atomicFile writes to a temporary file beside path and renames it into place
// on Commit, so a failed command never leaves a half-written output.
type atomicFile struct {
	*os.File
	path string
}

func createAtomic(path string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, badInput{err}
	}
	return &atomicFile{File: f, path: path}, nil
}

// Commit closes the file and moves it into place.
func (a *atomicFile) Commit() error {
	if err := a.File.Close(); err != nil {
		os.Remove(a.File.Name())
		return err
	}
	return os.Rename(a.File.Name(), a.path)
}

// Abort closes and removes the temporary file; safe after Commit.
func (a *atomicFile) Abort() {
	a.File.Close()
	os.Remove(a.File.Name())
}
