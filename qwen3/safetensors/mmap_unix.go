//go:build linux || darwin

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

func mapFile(path string) ([]byte, func() error, error) {
	fd, size, err := openFile(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close() // a mapping outlives the descriptor
	if size == 0 {
		return nil, nil, nil // Parse reports HeaderTooSmall
	}
	if data, release, ok, err := readResident(fd, path, size); ok || err != nil {
		return data, release, err
	}
	return mmapFile(fd, path, size)
}

// mmapFile maps size bytes of the open file fd read-only.
func mmapFile(fd *os.File, path string, size int) ([]byte, func() error, error) {
	data, err := syscall.Mmap(int(fd.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
