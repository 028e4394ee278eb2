//go:build linux || darwin

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

func mapFile(path string) ([]byte, func() error, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close() // the mapping outlives the descriptor
	size, err := statSize(fd, path)
	if err != nil {
		return nil, nil, err
	}
	if size == 0 {
		return nil, nil, nil // Parse reports HeaderTooSmall
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
