package sim

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// Under stale L1, rms_norm leaves its circular buffers where the pin's
// factory places them (ttnn/cpp/ttnn/operations/normalization/layernorm/
// device/layernorm_op_multi_core.cpp:221-239, 682-798; block_size 8 and
// Float16_b intermediates: normalization/rmsnorm/rmsnorm.cpp:16-20): from the CB base c_0 (Wt_up
// tiles), c_16 (16), c_2 (2), c_3 (2), c_19 (2), c_20 (Wt_up), c_21 (8),
// c_22 (16), c_5 (Wt_up). With head_dim 128 (Wt 4, Wt_up 8) that puts c_20
// at +60 KiB, where paged_update_cache's one-stick page-table CB ends at
// the qwen3-0.6b geometry with one user, so the word past a one-column row
// is x*x of the K head norm's input. Six tile rows on four cores
// (split_work_to_cores: cores 0 and 1 take two rows, 2 and 3 one,
// tt_metal/common/work_split.cpp:402-470): each core's c_0 and c_20 hold
// its last row's input and x*x tiles in slots 0..3; c_16 and c_22 are
// rings of two blocks, so a core with two rows holds row 0's tiles in
// slots 0..3 and row 1's in slots 8..11. Under zero nothing is left.
func TestRMSNormStaleLeavesCBs(t *testing.T) {
	const (
		W, rows, cores = 128, 6, 4
		wt             = W / 32
		tileB          = 2048
		eps            = float32(1e-6)
	)
	const ( // offsets from the CB base, in the pin's creation order
		offIn, offOut, offXmm2, offFusion = 0, 8 * tileB, 8*tileB + 16*tileB + 6*tileB, 8*tileB + 16*tileB + 6*tileB + 8*tileB + 8*tileB
	)
	r := rand.New(rand.NewPCG(9, 10))
	x := make([]bf16.BF16, rows*32*W)
	for i := range x {
		x[i] = bf16.FromFloat32(float32(r.NormFloat64()))
	}
	g := make([]bf16.BF16, W)
	for i := range g {
		g[i] = bf16.FromFloat32(float32(0.5 + r.Float64()))
	}
	// tile is the TILE bytes of tile (R, j) of a [rows*32, W] matrix v,
	// each element through f.
	tile := func(v []bf16.BF16, R, j int, f func(rr int, e bf16.BF16) bf16.BF16) []byte {
		b := make([]byte, tileB)
		for rr := 0; rr < 32; rr++ {
			for cc := 0; cc < 32; cc++ {
				binary.LittleEndian.PutUint16(b[2*TileElem(rr, cc):], f(rr, v[(R*32+rr)*W+j*32+cc]).Bits())
			}
		}
		return b
	}
	id := func(_ int, e bf16.BF16) bf16.BF16 { return e }
	square := func(_ int, e bf16.BF16) bf16.BF16 { return bf16.FromFloat32(e.Float32() * e.Float32()) }
	for _, mode := range []L1Init{L1Zero, L1Stale} {
		for _, arch := range []Arch{Wormhole, Blackhole} {
			d := newDev(t, Options{Arch: arch, L1: mode, NumCores: cores})
			in := cUpload(t, d, cSpec(tt.BF16, tt.Tile, 1, 1, rows*32, W), x)
			w := cUpload(t, d, cSpec(tt.BF16, tt.RowMajor, 1, 1, W/32, 32), g)
			out := cOut(t, d, tt.RMSNorm{Input: in, Weight: w, Epsilon: eps})
			y := cDown(t, d, out)
			base := alignUp(d.opt.L1UnreservedBase, d.arch.dramAlign)
			at := func(core int, off uint64, slot int) []byte {
				b := make([]byte, tileB)
				d.l1[core].read(base+off+uint64(slot)*tileB, b)
				return b
			}
			check := func(what string, core int, off uint64, slot int, want []byte) {
				t.Helper()
				got := at(core, off, slot)
				if mode == L1Zero {
					want = make([]byte, tileB)
				}
				if string(got) != string(want) {
					t.Fatalf("%v %v: core %d %s slot %d: got % x..., want % x...", arch, mode, core, what, slot, got[:8], want[:8])
				}
			}
			coreRows := [][]int{{0, 1}, {2, 3}, {4}, {5}}
			for c, rs := range coreRows {
				last := rs[len(rs)-1]
				for j := 0; j < wt; j++ {
					check("c_0", c, offIn, j, tile(x, last, j, id))
					check("c_20", c, offXmm2, j, tile(x, last, j, square))
				}
				for k, R := range rs {
					var inv [32]float32
					for rr := range inv {
						var s float32
						for cc := 0; cc < W; cc++ {
							s += square(0, x[(R*32+rr)*W+cc]).Float32()
						}
						inv[rr] = float32(1 / math.Sqrt(float64(s/W+eps)))
					}
					norm := func(rr int, e bf16.BF16) bf16.BF16 { return bf16.FromFloat32(e.Float32() * inv[rr]) }
					for j := 0; j < wt; j++ {
						check("c_16", c, offOut, k*8+j, tile(y, R, j, id))
						check("c_22", c, offFusion, k*8+j, tile(x, R, j, norm))
					}
				}
			}
			// The word the KV-update reader loads past a one-column row
			// at this geometry (c_20 + 4 on core 0): x*x of row 0,
			// columns 2 and 3 of the last row on core 0.
			if mode == L1Stale {
				var word [4]byte
				d.l1[0].read(base+offXmm2+4, word[:])
				want := uint32(square(0, x[32*W+2]).Bits()) | uint32(square(0, x[32*W+3]).Bits())<<16
				if got := binary.LittleEndian.Uint32(word[:]); got != want {
					t.Fatalf("%v: word at c_20+4 %#x, want %#x", arch, got, want)
				}
			}
		}
	}
}
