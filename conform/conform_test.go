package conform_test

import (
	"testing"

	"github.com/offcard/offcard/conform"
	"github.com/offcard/offcard/tthw"
	"github.com/offcard/offcard/tthw/tthwtest"
)

// On the loopback every case passes, on both archs.
func TestLoopbackConforms(t *testing.T) {
	for _, arch := range []string{"wormhole", "blackhole"} {
		rep, err := conform.Run(conform.Options{Lib: tthwtest.Loopback(t), Tthw: tthw.Options{Arch: arch}}, conform.Cases(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Results {
			if !r.OK {
				t.Errorf("%s: %s: %s", arch, r.Name, r.Detail)
			} else {
				t.Logf("%s: %s: %s", arch, r.Name, r.Detail)
			}
		}
		if len(rep.Results) != len(conform.Cases()) {
			t.Errorf("%d results for %d cases", len(rep.Results), len(conform.Cases()))
		}
	}
}
