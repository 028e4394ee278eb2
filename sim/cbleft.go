package sim

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// What a modelled program's circular buffers leave in L1 (Options.L1 ==
// L1Stale). A program's CBs start at the L1 unreserved base on every core
// it runs on, in creation order (placeCBs); the bytes its kernels push stay
// there after it ends, up to the next program whose CBs cover them. So
// the word a later program reads past its own last CB (the KV-update
// reader's page_table_ptr[idx/block_size] past a one-column row) is a word
// of an earlier program's CB, at the same offset from the base.
//
// rms_norm is modelled CB by CB. Other compute ops still leave only their
// input pages (leaveInputs).

// rmsNormCBs is rms_norm's CB layout at the pin: ttnn::rms_norm
// (ttnn/cpp/ttnn/operations/normalization/rmsnorm/rmsnorm.cpp:16-20, 62-76:
// default compute config HiFi4, fp32_dest_acc_en false; the default
// program config, so no Welford: layernorm_common.cpp:13-15,
// layernorm_types.hpp:22) runs LayerNormMultiCoreProgramFactory for an
// interleaved input (layernorm/device/layernorm_op_multi_core.cpp) in
// RMSNORM mode with a gamma and neither beta nor residual. With
// fp32_dest_acc_en false, block_size is 8 and the intermediates are
// Float16_b (:148, 152); Wt_up is Wt rounded up to a block (:220). The
// CBs in creation order (:682-798), the sizes in tiles (:221-239):
//
//	c_0  in      Wt_up          (:684-685)
//	c_16 out     2*block_size   (:224, 698-699)
//	c_2  scaler  2              (:237, 719-722; not Welford)
//	c_3  eps     2              (:238, 725-726)
//	c_19 ex2     2              (:239, 731-733)
//	c_20 xmm2    Wt_up          (:226, 750-753; not Welford)
//	c_21 ex2pe   8              (:235, 756-757)
//	c_22 fusion  2*block_size   (:234, 783-786; a gamma)
//	c_5  gamma   Wt_up          (:227, 789-792)
//
// c_18 (not RMSNORM), c_24 (RMSNORM, no pre-add, not large), c_26 (not
// large), c_27/c_28 (a TILE input), c_23/c_1 (no residual) and c_25 (no
// Welford) are not created. A ROW_MAJOR gamma selects the rm_gb reader and
// skips the large-tensor variant (:217-218, 289), so these sizes hold for
// every width.
type rmsNormCBs struct {
	wt, wtUp, blk         int
	in, out, xmm2, fusion cb
	end                   uint64 // the static CB region's end
}

const rmsBlock = 8 // block_size with fp32_dest_acc_en false (:148)

func (d *Device) rmsNormLayout(in, out, gamma *buffer) rmsNormCBs {
	const tileB = uint64(tt.TileSize * tt.TileSize)
	wt := in.g.wp / tt.TileSize
	wtUp := (wt + rmsBlock - 1) / rmsBlock * rmsBlock
	single := tileB * 2 // Float16_b intermediates
	inT, outT := tileB*uint64(in.spec.DType.Size()), tileB*uint64(out.spec.DType.Size())
	gT := tileB * uint64(gamma.spec.DType.Size())
	cbs, end := d.placeCBs([]cbSpec{
		{indices: []int{0}, size: uint64(wtUp) * inT},
		{indices: []int{16}, size: 2 * rmsBlock * outT},
		{indices: []int{2}, size: 2 * tileB * 2},
		{indices: []int{3}, size: 2 * tileB * 2},
		{indices: []int{19}, size: 2 * single},
		{indices: []int{20}, size: uint64(wtUp) * single},
		{indices: []int{21}, size: 8 * single},
		{indices: []int{22}, size: 2 * rmsBlock * single},
		{indices: []int{5}, size: uint64(wtUp) * gT},
	})
	return rmsNormCBs{wt: wt, wtUp: wtUp, blk: rmsBlock, in: cbOf(cbs, 0), out: cbOf(cbs, 16), xmm2: cbOf(cbs, 20), fusion: cbOf(cbs, 22), end: end}
}

// rmsNormProgramCBs is rms_norm's static CB region (rmsNormLayout) and
// the core range of its first CB: every CB sits on all_cores, the cores
// split_work_to_cores gives the input's tile rows, row-wise from core 0 of
// the default grid (layernorm_op_multi_core.cpp:192-203, 667-675), so the
// first range of num_cores_to_corerangeset(min(rows, cores)).
func rmsNormProgramCBs(d *Device, bs []*buffer) simpleProgram {
	in, w, out := bs[0], bs[1], bs[2]
	lay := d.rmsNormLayout(in, out, w)
	rows := in.g.outer * in.g.hp / tt.TileSize // NC·Ht tile rows (:192)
	n := max(1, min(rows, d.opt.NumCores))
	return simpleProgram{end: lay.end, cores: d.rowwiseFirst(n)}
}

// cbOf is the placed CB with index i.
func cbOf(cbs []cb, i int) cb {
	for _, c := range cbs {
		for _, x := range c.indices {
			if x == i {
				return c
			}
		}
	}
	panic(fmt.Sprintf("sim: no CB c_%d", i))
}

// tileRowCores is split_work_to_cores(grid, rows, row_wise=true)
// (tt_metal/common/work_split.cpp:402-470) as the factory walks it
// (layernorm_op_multi_core.cpp:194-203, 565-612): the first rows % cores
// cores take one row more, and the rows go to cores 0, 1, ... in order.
// first[c] is core c's first tile row; first[c+1]-first[c] its count.
func tileRowCores(rows, cores int) []int {
	n := min(rows, cores)
	first := make([]int, n+1)
	q, r := rows/n, rows%n
	for c := 0; c < n; c++ {
		k := q
		if c < r {
			k++
		}
		first[c+1] = first[c] + k
	}
	return first
}

// leaveRMSNorm writes what rms_norm's kernels leave in c_0, c_20, c_22 and
// c_16 on each core it ran on. Per tile row, in the core's order:
//   - the reader pushes the row's Wt input tiles into c_0, one full block
//     at a time (reader_unary_interleaved_ln_rm_gb.cpp:97-111), so a row
//     fills slots 0..Wt-1 of the Wt_up-tile ring and the next row starts
//     at slot 0 again;
//   - compute packs x*x of each input tile into c_20 (kernels/compute/
//     layernorm.cpp:213-236, RMSNORM: cb_xmm is cb_in), the same slots;
//   - per block it packs x*rsqrt(mean(x^2)+eps) into c_22 (:269-303) and
//     that times gamma into c_16 (:311-350): a full block pushed and
//     popped each time, so block n of the core goes to slots
//     (n%2)*block_size.. of those 2*block_size-tile rings.
//
// The products are rounded to bf16 nearest-even (the card packs
// Float16_b; its FPU's last bit may differ); the inverse root is
// float32's, where the card's SFPU rsqrt is approximate: the c_22 bytes
// may differ from the card's in low mantissa bits. c_16 holds the output
// tiles' own bytes. Not modelled: c_2 (the reduce scaler), c_3 (eps), c_19,
// c_21 and c_5 (gamma): their bytes stay what earlier programs left.
func (d *Device) leaveRMSNorm(in, out, gamma *buffer, eps float32, s *scratch) {
	lay := d.rmsNormLayout(in, out, gamma)
	wt := lay.wt
	if wt == 0 || in.numPages%wt != 0 || out.numPages != in.numPages {
		return
	}
	if in.spec.DType != tt.BF16 || out.spec.DType != tt.BF16 {
		return // sim runs rms_norm in BF16 only
	}
	const tileE = tt.TileSize * tt.TileSize
	tileB := uint64(tileE * 2)
	rows := in.numPages / wt
	first := tileRowCores(rows, d.opt.NumCores)
	w := in.g.w // logical width: the reduce's scaler is 1/W over the logical columns
	row := s.bytesN(0, wt*int(tileB))
	sq := s.bytesN(1, int(tileB))
	pg := s.bytesN(2, int(tileB))
	var sum [tt.TileSize]float32
	for c := 0; c+1 < len(first); c++ {
		l1 := d.l1[c]
		nblk := 0
		for r := first[c]; r < first[c+1]; r++ {
			for j := 0; j < wt; j++ {
				m, a := d.memAt(d.pageLoc(in, r*wt+j))
				if !m.in(a, tileB) {
					return
				}
				m.read(a, row[j*int(tileB):(j+1)*int(tileB)])
			}
			sum = [tt.TileSize]float32{}
			for j := 0; j < wt; j++ {
				t := row[j*int(tileB) : (j+1)*int(tileB)]
				for rr := 0; rr < tt.TileSize; rr++ {
					for cc := 0; cc < tt.TileSize; cc++ {
						e := TileElem(rr, cc)
						x := bf16.BF16(binary.LittleEndian.Uint16(t[2*e:])).Float32()
						x2 := bf16.FromFloat32(x * x)
						binary.LittleEndian.PutUint16(sq[2*e:], x2.Bits())
						if j*tt.TileSize+cc < w {
							sum[rr] += x2.Float32()
						}
					}
				}
				l1.write(lay.in.addr+uint64(j)*tileB, t)
				l1.write(lay.xmm2.addr+uint64(j)*tileB, sq)
			}
			var inv [tt.TileSize]float32
			for rr := range inv {
				inv[rr] = float32(1 / math.Sqrt(float64(sum[rr]/float32(w)+eps)))
			}
			for j := 0; j < wt; j++ {
				slot := uint64((nblk+j/lay.blk)%2*lay.blk + j%lay.blk)
				t := row[j*int(tileB) : (j+1)*int(tileB)]
				for rr := 0; rr < tt.TileSize; rr++ {
					for cc := 0; cc < tt.TileSize; cc++ {
						e := TileElem(rr, cc)
						x := bf16.BF16(binary.LittleEndian.Uint16(t[2*e:])).Float32()
						binary.LittleEndian.PutUint16(sq[2*e:], bf16.FromFloat32(x*inv[rr]).Bits())
					}
				}
				l1.write(lay.fusion.addr+slot*tileB, sq)
				m, a := d.memAt(d.pageLoc(out, r*wt+j))
				if !m.in(a, tileB) {
					return
				}
				m.read(a, pg)
				l1.write(lay.out.addr+slot*tileB, pg)
			}
			nblk += (wt + lay.blk - 1) / lay.blk
		}
	}
}

func leaveRMSNormLaunch(d *Device, l *opLaunch, s *scratch) {
	d.leaveRMSNorm(l.bufs[0], l.bufs[2], l.bufs[1], l.eps, s)
}
