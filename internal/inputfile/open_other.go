//go:build !unix

package inputfile

import "os"

// openNonblock stats path before opening it, where there is no
// O_NONBLOCK (Open checks the opened file again).
func openNonblock(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	return os.Open(path)
}
