package proptest

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParseScript: ParseScript never panics, refuses with one error, and
// what it accepts (sizes within what the device and the machine hold)
// prints back (Script.String) to a script that parses to the same. The
// committed corpus is testdata/fuzz/FuzzParseScript.
func FuzzParseScript(f *testing.F) {
	f.Add("model tiny seed=1\ndevice sim arch=wormhole\nengine block=32 blocks=4\nadmit seq=0 prompt=3\ndecode steps=2\n")
	f.Add("model tiny seed=1\ndevice sim arch=wormhole\nengine block=32 blocks=2000000\nadmit seq=0 prompt=3\n")
	f.Add("model tiny seed=1\ndevice sim arch=blackhole\nengine block=1048576 blocks=1\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseScript(strings.NewReader(in))
		if err != nil {
			return
		}
		back, err := ParseScript(strings.NewReader(s.String()))
		if err != nil {
			t.Fatalf("the printed script does not parse: %v\n%s", err, s)
		}
		if !reflect.DeepEqual(s.Commands, back.Commands) || s.Scenario.String() != back.Scenario.String() {
			t.Fatalf("round trip changed the script:\n%s\n%s", s, back)
		}
	})
}
