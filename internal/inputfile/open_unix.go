//go:build unix

package inputfile

import (
	"os"

	"golang.org/x/sys/unix"
)

// openNonblock opens path read-only with O_NONBLOCK, so that opening a
// FIFO returns at once instead of waiting for a writer, then clears the
// flag (before os.NewFile sees the descriptor, which keeps it an ordinary
// blocking file; Open reads nothing from a file that is not regular).
func openNonblock(path string) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags&^unix.O_NONBLOCK)
	}
	if err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
