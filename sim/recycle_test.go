package sim

import (
	"bytes"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// A memory built from recycled chunks reads exactly as a new one: what a
// released memory held never shows through, never-written bytes read as
// the fresh pattern (poison or zeros), and the shadow and stamps start
// empty.
func TestRecycledChunksReadFresh(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // keep the pool's chunks
	const n = 16
	for _, fresh := range [][]byte{poisonChunk, zeroChunk} {
		old := newMemFresh(n*chunkSize, true, fresh)
		oldClock := uint64(9)
		old.clock = &oldClock // stamps the released stamps hold
		old.write(0, bytes.Repeat([]byte{0xAB}, n*chunkSize))
		was := map[uintptr]bool{}
		for _, dir := range old.chunks {
			for _, ch := range dir {
				if ch != nil {
					was[uintptr(unsafe.Pointer(&ch[0]))] = true
				}
			}
		}
		old.release()

		m := newMemFresh(n*chunkSize, true, fresh)
		clock := uint64(7)
		m.clock = &clock
		reused := 0
		for c := uint64(0); c < n; c++ {
			m.write(c*chunkSize+100, []byte{1, 2, 3})
			if was[uintptr(unsafe.Pointer(&m.chunks[0][c][0]))] {
				reused++
			}
		}
		if reused == 0 {
			t.Fatal("no chunk came from the pool: the test checks nothing")
		}
		want := make([]byte, chunkSize)
		copy(want, fresh)
		copy(want[100:], []byte{1, 2, 3})
		got := make([]byte, chunkSize)
		for c := uint64(0); c < n; c++ {
			m.read(c*chunkSize, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("chunk %d (%d of %d reused) does not read as a fresh chunk written at 100", c, reused, n)
			}
			if at, bad := m.unwritten(c*chunkSize, chunkSize); !bad || at != c*chunkSize {
				t.Fatalf("chunk %d: first unwritten byte %d, %v", c, at, bad)
			}
			if m.writtenSince(c*chunkSize+2048, 1024, 1) {
				t.Fatalf("chunk %d: a stripe never written has a stamp", c)
			}
		}
	}
}

// A recycled device cannot be used: every access to its memory panics
// (rather than read memory another device now owns).
func TestRecycledDevicePanics(t *testing.T) {
	d := newDev(t, Options{Arch: Wormhole, Strict: true})
	s := tt.Spec{Shape: []int{64, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	x := mustAlloc(t, d, s)
	h := tt.HostBF16(s.Shape, tt.Tile, make([]bf16.BF16, 64*64))
	if err := d.WriteHost(x, h); err != nil {
		t.Fatal(err)
	}
	d.Recycle()
	for name, use := range map[string]func(){
		"ReadHost":  func() { d.ReadHost(x) },
		"Peek":      func() { d.Peek(x) },
		"PeekInto":  func() { d.PeekInto(x, make([]byte, len(h.Data)), 0, nil) },
		"WriteHost": func() { d.WriteHost(x, h) },
		"Run":       func() { d.Run(tt.Add{A: x, B: x, Output: x}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s on a recycled device did not panic", name)
				}
			}()
			use()
		}()
	}
}
