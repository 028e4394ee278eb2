package dump

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzRead: Read never panics, its errors are one line, and what it
// accepts survives a round trip through Writer unchanged.
func FuzzRead(f *testing.F) {
	f.Add([]byte(good))
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Read(bytes.NewReader(in))
		if err != nil {
			if bytes.ContainsRune([]byte(err.Error()), '\n') {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		back := roundTrip(t, d)
		normalize(d)
		normalize(back)
		if !reflect.DeepEqual(d, back) {
			t.Fatalf("round trip changed the dump:\n got %+v\nwant %+v", back, d)
		}
	})
}
