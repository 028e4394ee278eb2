//go:build !(linux || darwin)

package safetensors

import "io"

func mapFile(path string) ([]byte, func() error, error) {
	fd, _, err := openFile(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	data, err := io.ReadAll(fd)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return nil }, nil
}
