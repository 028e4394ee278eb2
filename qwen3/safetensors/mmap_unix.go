//go:build linux || darwin

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

// mmapFile maps size bytes of the open file fd read-only.
func mmapFile(fd *os.File, path string, size int) ([]byte, func() error, error) {
	data, err := syscall.Mmap(int(fd.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
