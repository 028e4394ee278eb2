package proptest

import "testing"

// FuzzPageTableWidths decodes bytes into a page-table width sequence and a
// schedule (ScriptFromBytes) and checks every property on the engine on
// sim. The committed corpus is testdata/fuzz/FuzzPageTableWidths.
func FuzzPageTableWidths(f *testing.F) {
	// dynamic, captured: admit to width 1 (31), grow to 2 and 3, finish
	// the longest (shrink), recapture, one more step.
	f.Add([]byte{0x04, 0x01, 0x00, 0x02, 0x00, 0x45, 0x46, 0x80, 0xc0, 0xc4})
	// fixed:2, eager, 64-position blocks, two sequences.
	f.Add([]byte{0x02, 0x01, 0x01, 0x00, 0x04, 0x08, 0x41, 0x81, 0x41})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := ScriptFromBytes(data)
		fail, _, err := RunScript(s, SimFactory)
		if err != nil {
			t.Fatalf("decoded an invalid script: %v\n%s", err, s)
		}
		if fail != nil {
			t.Fatalf("%v\nscript:\n%s", fail, s)
		}
	})
}
