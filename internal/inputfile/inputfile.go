package inputfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/offcard/offcard/internal/membudget"
)

// Bounds of the files offcard reads, in bytes.
const (
	// MaxJSON bounds small JSON documents: config.json,
	// model.safetensors.index.json.
	MaxJSON = 64 << 20
	// MaxTokenizer bounds tokenizer.json (Qwen3's is 11 MB).
	MaxTokenizer = 256 << 20
	// MaxScript bounds a property-test script.
	MaxScript = 64 << 20
	// MaxDump bounds a token dump (about 40 bytes a step record without
	// top logits, 200 with them: millions of positions).
	MaxDump = 4 << 30
)

// ErrNotRegular is wrapped by the error for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file larger than its bound.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading when it is a regular file of at most max
// bytes (max < 0: no bound), and returns it with its size. what names the
// kind of file in the size error ("a config.json"). On error nothing is
// left open.
func Open(path string, max int64, what string) (*os.File, int64, error) {
	f, err := openNonblock(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(st.Mode()))}
	}
	if max >= 0 && st.Size() > max {
		f.Close()
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s, more than the %s %s may be", ErrTooLarge, membudget.Size(st.Size()), membudget.Size(max), what)}
	}
	return f, st.Size(), nil
}

// ReadFile reads the whole of path, a regular file of at most max bytes
// (see Open).
func ReadFile(path string, max int64, what string) ([]byte, error) {
	f, size, err := Open(path, max, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	limit := size + 1 // one byte more shows a file that grew
	if max >= 0 {
		limit = max + 1
	}
	b := make([]byte, 0, size+1)
	b, err = readAll(io.LimitReader(f, limit), b)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if max >= 0 && int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: grew past the %s %s may be while it was read", ErrTooLarge, membudget.Size(max), what)}
	}
	return b, nil
}

func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// kind names a file mode that is not a regular file.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.String()
}
