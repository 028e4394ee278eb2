package safetensors

import (
	"encoding/binary"
	"fmt"
	"os"

	"github.com/offcard/offcard/internal/inputfile"
)

// Open memory-maps the file at path read-only (on Linux and macOS; other
// systems read it into memory) and parses it. The file must be a regular
// file (inputfile.Open), and its header is read and validated against the
// file's size before the rest is read or mapped, so that a bad header
// length or tensor table costs nothing whatever the file's size. Errors
// name the path. Close the File to unmap it.
func Open(path string) (*File, error) {
	if err := checkHeader(path); err != nil {
		return nil, err
	}
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

// checkHeader validates the header of the file at path (its 8-byte length
// N against the file's size, then the N bytes of JSON and the tensor table
// against it) reading only those 8+N bytes.
func checkHeader(path string) error {
	fd, size, err := openFile(path)
	if err != nil {
		return err
	}
	defer fd.Close()
	var head []byte
	if size >= 8 {
		var b [8]byte
		if _, err := fd.ReadAt(b[:], 0); err != nil {
			return fmt.Errorf("%s: read: %w", path, err)
		}
		head = b[:]
		if n := binary.LittleEndian.Uint64(b[:]); n <= MaxHeaderSize && n <= uint64(size-8) {
			head = make([]byte, 8+n)
			if _, err := fd.ReadAt(head, 0); err != nil {
				return fmt.Errorf("%s: read: %w", path, err)
			}
		}
	}
	if _, err := parse(head, size); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// openFile opens path, a regular file (inputfile.Open: a FIFO or a device
// is refused without blocking), and returns it with its size. On error
// nothing is left open.
func openFile(path string) (*os.File, int, error) {
	fd, size, err := inputfile.Open(path, -1, "a safetensors file")
	if err != nil {
		return nil, 0, err
	}
	if size != int64(int(size)) {
		fd.Close()
		return nil, 0, fmt.Errorf("%s: file of %d bytes is too large to map", path, size)
	}
	return fd, int(size), nil
}
