package safetensors

import (
	"fmt"
	"os"
)

// Open memory-maps the file at path read-only (on Linux and macOS; other
// systems read it into memory) and parses it. Errors name the path. Close
// the File to unmap it.
func Open(path string) (*File, error) {
	data, release, err := mapFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		if release != nil {
			_ = release()
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.release = release
	return f, nil
}

// openFile opens path, a regular file, and returns it with its size. On
// error nothing is left open.
func openFile(path string) (*os.File, int, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	size, err := statSize(fd, path)
	if err != nil {
		fd.Close()
		return nil, 0, err
	}
	return fd, size, nil
}

func statSize(fd *os.File, path string) (int, error) {
	st, err := fd.Stat()
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size < 0 || size != int64(int(size)) {
		return 0, fmt.Errorf("%s: file of %d bytes is too large to map", path, size)
	}
	return int(size), nil
}
