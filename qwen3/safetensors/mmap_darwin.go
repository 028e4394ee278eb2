//go:build darwin

package safetensors

import "os"

func mapFile(path string) ([]byte, func() error, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close() // the mapping outlives the descriptor
	size, err := statSize(fd, path)
	if err != nil || size == 0 {
		return nil, nil, err // size 0: Parse reports HeaderTooSmall
	}
	return mmapFile(fd, path, size)
}
