package sim

import (
	"slices"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// sharedChunks counts the chunks of a's DRAM that are the very arrays of
// b's at the same place.
func sharedChunks(a, b *Device) int {
	n := 0
	for i, m := range a.chans {
		for di, dir := range m.chunks {
			for ci, ch := range dir {
				if o := b.chans[i].chunks[di]; ch != nil && o != nil && o[ci] != nil && &o[ci][0] == &ch[0] {
					n++
				}
			}
		}
	}
	return n
}

// Two devices that upload the same weight share its chunks; a host write
// to one device's copy changes what that device reads and nothing the
// other reads, before and after the first device is recycled; an all-zero
// upload shares one chunk within a device.
func TestInternedChunksCopyOnWrite(t *testing.T) {
	s := tt.Spec{Shape: []int{4096, 1024}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved} // 8 MiB
	vals := make([]bf16.BF16, 4096*1024)
	for i := range vals {
		vals[i] = bf16.FromFloat32(float32(i%977) / 64)
	}
	host := tt.HostBF16(s.Shape, tt.Tile, vals)
	a, b := newDev(t, Options{Arch: Wormhole}), newDev(t, Options{Arch: Wormhole})
	xa, xb := mustAlloc(t, a, s), mustAlloc(t, b, s)
	for _, d := range []struct {
		dev *Device
		x   tt.Tensor
	}{{a, xa}, {b, xb}} {
		if err := d.dev.WriteHost(d.x, host); err != nil {
			t.Fatal(err)
		}
	}
	if n := sharedChunks(a, b); n == 0 {
		t.Fatalf("no chunk shared between two devices holding the same 8 MiB (%d): the test checks nothing", n)
	}
	other := slices.Clone(vals)
	for i := range other {
		other[i] = bf16.FromFloat32(-other[i].Float32() - 1)
	}
	if err := a.WriteHost(xa, tt.HostBF16(s.Shape, tt.Tile, other)); err != nil {
		t.Fatal(err)
	}
	read := func(d *Device, x tt.Tensor, want []bf16.BF16, what string) {
		t.Helper()
		got, err := d.ReadHost(x)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Data, tt.HostBF16(s.Shape, tt.Tile, want).Data) {
			t.Errorf("%s: the device does not read what was written to it", what)
		}
	}
	read(a, xa, other, "the written device")
	read(b, xb, vals, "the other device after a write to the first")
	a.Recycle()
	read(b, xb, vals, "the other device after the first is recycled")

	z := newDev(t, Options{Arch: Wormhole})
	xz := mustAlloc(t, z, s)
	if err := z.WriteHost(xz, tt.HostBF16(s.Shape, tt.Tile, make([]bf16.BF16, len(vals)))); err != nil {
		t.Fatal(err)
	}
	arrays, chunks := map[*byte]bool{}, 0
	for _, m := range z.chans {
		for _, dir := range m.chunks {
			for _, ch := range dir {
				if ch != nil {
					arrays[&ch[0]] = true
					chunks++
				}
			}
		}
	}
	if len(arrays) > chunks/4 {
		t.Errorf("a 8 MiB zero upload keeps %d arrays for %d chunks", len(arrays), chunks)
	}
	one := make([]bf16.BF16, len(vals))
	for i := 0; i < len(one); i += 1000 {
		one[i] = bf16.FromFloat32(1)
	}
	if err := z.WriteHost(xz, tt.HostBF16(s.Shape, tt.Tile, one)); err != nil {
		t.Fatal(err)
	}
	read(z, xz, one, "a zero upload written again")
	read(b, xb, vals, "the other device after a third wrote zeros and more")
}

// Chunks whose hashes collide but whose bytes differ stay private: with
// every chunk hashed alike, two devices uploading different weights each
// read their own.
func TestInternedChunksHashCollision(t *testing.T) {
	defer func(h func(*[chunkSize]byte) uint64) { chunkHash = h }(chunkHash)
	chunkHash = func(*[chunkSize]byte) uint64 { return 1 }
	s := tt.Spec{Shape: []int{4096, 1024}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved} // 8 MiB
	var devs []*Device
	var xs []tt.Tensor
	var hosts []tt.HostTensor
	for k := range 2 {
		vals := make([]bf16.BF16, 4096*1024)
		for i := range vals {
			vals[i] = bf16.FromFloat32(float32((i+k*7)%977) / 64)
		}
		d := newDev(t, Options{Arch: Wormhole})
		x := mustAlloc(t, d, s)
		h := tt.HostBF16(s.Shape, tt.Tile, vals)
		if err := d.WriteHost(x, h); err != nil {
			t.Fatal(err)
		}
		devs, xs, hosts = append(devs, d), append(xs, x), append(hosts, h)
	}
	for k, d := range devs {
		got, err := d.ReadHost(xs[k])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Data, hosts[k].Data) {
			t.Errorf("device %d does not read the weight it uploaded (a colliding chunk of the other's was shared)", k)
		}
	}
}
