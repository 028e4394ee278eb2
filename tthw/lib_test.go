package tthw_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/offcard/offcard/tt"
	"github.com/offcard/offcard/tthw"
	"github.com/offcard/offcard/tthw/tthwtest"
)

// A library whose offcard_tt_last_error returns a garbage pointer (an
// unmapped address, a near-nil one, a string without end) gives an error
// that says so, never a crash or a panic of offcard (issue 33 point 9).
func TestGarbageLastError(t *testing.T) {
	edits := []tthwtest.Edit{{File: "loopback.c",
		Old: "const char *offcard_tt_last_error(void) { return err_msg; }",
		New: `static char big[1 << 20];
const char *offcard_tt_last_error(void) {
  const char *m = getenv("OFFCARD_TEST_LAST_ERROR");
  if (m && !strcmp(m, "unmapped")) return (const char *)0xdeadbeef0;
  if (m && !strcmp(m, "near-nil")) return (const char *)16;
  memset(big, 'x', sizeof big);
  return big;
}`}}
	lib, err := tthwtest.Build(filepath.Join(t.TempDir(), "garbage.so"), edits...)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, want string }{
		{"unmapped", "unreadable pointer"},
		{"near-nil", "unreadable pointer"},
		{"no-nul", "xxxxxxxx"},
	} {
		t.Setenv("OFFCARD_TEST_LAST_ERROR", c.mode)
		d, err := tthw.Open(lib, tthw.Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.mode, err)
		}
		err = d.Free(tt.Tensor{ID: 12345})
		if err == nil || !strings.Contains(err.Error(), c.want) || len(err.Error()) > 70<<10 {
			t.Errorf("%s: free of an unknown tensor: %.200v", c.mode, err)
		}
		d.Close()
	}
}
