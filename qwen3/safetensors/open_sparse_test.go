package safetensors

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 33: a 2 GiB sparse model.safetensors whose header length is -1
// was read whole (2 GB) before its first 8 bytes were checked; Open now
// checks the header against the file's size first. So does a valid
// header whose tensors do not cover the file.
func TestOpenChecksHeaderBeforeReading(t *testing.T) {
	dir := t.TempDir()
	sparse := func(name string, head []byte) string {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(head)
		if err := f.Truncate(2 << 30); err != nil {
			t.Skip(err)
		}
		f.Close()
		return p
	}
	minus1 := make([]byte, 8)
	binary.LittleEndian.PutUint64(minus1, ^uint64(0))
	hdr := `{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}`
	short := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	short = append(short, hdr...)
	saved := memAvailable
	memAvailable = func() int { return 64 << 30 } // read, not mapped, when the check is missing
	defer func() { memAvailable = saved }()
	for _, c := range []struct {
		name string
		head []byte
		kind Kind
		msg  string
	}{
		{"minus1", minus1, HeaderTooLarge, "header length 18446744073709551615 exceeds the limit"},
		{"trailing", short, MetadataIncompleteBuffer, "trailing bytes"},
	} {
		p := sparse(c.name, c.head)
		start := time.Now()
		_, err := Open(p)
		var e *Error
		if !errors.As(err, &e) || e.Kind != c.kind || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want %v naming the file", c.name, err, c.kind)
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("%s: Open took %v: the file was read before its header was checked", c.name, el)
		}
	}
}
