package sim

import (
	"encoding/binary"
	"fmt"

	"github.com/offcard/offcard/tt"
)

const opFillCache = "paged_fill_cache"

// fillCache is ttnn.experimental.paged_fill_cache (§1.6): Input [1, heads,
// S, D] TILE with the cache's dtype (a raw tile copy); Cache [blocks, heads,
// block_size, D] TILE; PageTable INT32 ROW_MAJOR [B, W] interleaved; the row
// is BatchIdx, or element 0 of BatchIdxTensor (read on the device at run
// time). For each head h, sequence tile st and column tile w, the writer
// reads page `batch` of the page table (aligned page bytes), takes
// physical = row[st / block_size_t] and, unless it is -1 (0xFFFFFFFF),
// copies the input tile to cache tile
// physical*heads*block_size_t*Wt + h*block_size_t*Wt + (st%block_size_t)*Wt + w
// (uint32 arithmetic, no bound check). BatchIdx is a runtime argument (not
// in the program-cache key).
func (d *Device) fillCache(o tt.PagedFillCache) error {
	const name = opFillCache
	bs, err := d.operands(name, &o.Cache, &o.Input, &o.PageTable, o.BatchIdxTensor)
	if err != nil {
		return err
	}
	cache, in, pt, bi := bs[0], bs[1], bs[2], bs[3]
	validate := func() error {
		cs, is, ps := cache.spec, in.spec, pt.spec
		// ttnn/cpp/ttnn/operations/experimental/paged_cache/device/
		// fill_cache/paged_fill_cache_device_operation.cpp
		// validate_on_program_cache_miss, in its order.
		if is.DType != tt.FP32 && is.DType != tt.BF16 {
			return opErr(name, "Data type of input tensor for fill cache must be FLOAT32, BFLOAT16, or BFLOAT8_b")
		}
		if is.Memory.Layout != tt.Interleaved {
			return opErr(name, "Expect input_tensor to have memory layout INTERLEAVED")
		}
		if ps.Memory.Layout != tt.Interleaved {
			return opErr(name, "Expect page_table_tensor to have memory layout INTERLEAVED")
		}
		if ps.DType != tt.INT32 {
			return opErr(name, "Expect page_table_tensor to have datatype INT32")
		}
		if len(cs.Shape) != 4 || len(is.Shape) != 4 || len(ps.Shape) != 2 {
			return contractErr(name, "Cache and input tensors must be rank 4 and the page table rank 2")
		}
		if o.BatchIdx < 0 || o.BatchIdx >= ps.PaddedDim(0) {
			return opErr(name, "Batch idx must be within the page_table batch size")
		}
		cp, ip := cs.PaddedShape(), is.PaddedShape()
		if cacheE, viewE := cp[1]*cp[2]*cp[3], ip[1]*cp[2]*ip[3]; cacheE != viewE {
			return opErr(name, "paged_fill_cache geometry mismatch: cache has %d elems/block (kv_heads=%d, block_size=%d, head_dim=%d) but input view is %d (kv_heads=%d, block_size=%d, head_dim=%d).",
				cacheE, cp[1], cp[2], cp[3], viewE, ip[1], cp[2], ip[3])
		}
		if ip[3]%tt.TileSize != 0 {
			return opErr(name, "input_tensor last dim (%d) must be a multiple of TILE_WIDTH (%d)", ip[3], tt.TileSize)
		}
		bsz := cp[2]
		if bsz%tt.TileSize != 0 {
			return opErr(name, "effective block_size (%d) must be a multiple of TILE_HEIGHT (%d)", bsz, tt.TileSize)
		}
		if ip[2] > bsz*ps.PaddedDim(1) {
			return opErr(name, "Input seq_len (%d) must fit in max_num_blocks_per_seq (%d) * block_size (%d)", ip[2], ps.PaddedDim(1), bsz)
		}
		if bi != nil {
			xs := bi.spec
			vol := 1 // physical_volume: the padded shape's
			for _, x := range xs.PaddedShape() {
				vol *= x
			}
			switch {
			case vol != ip[0]:
				return opErr(name, "Batch idx tensor must have input_tensor batch dim (%d) elements, got %d", ip[0], vol)
			case xs.DType != tt.INT32 && xs.DType != tt.UINT32:
				return opErr(name, "Batch idx tensor must be an integer type")
			case xs.Layout != tt.RowMajor:
				return opErr(name, "Batch idx tensor must be in ROW_MAJOR layout")
			case xs.Memory.Layout != tt.Interleaved:
				return opErr(name, "Batch idx tensor must have INTERLEAVED memory layout")
			case xs.Memory.Buffer != tt.DRAM:
				return opErr(name, "Batch idx tensor must be DRAM-resident")
			}
		}
		// What the simulator models beyond ttnn's checks: a cache of the
		// input's dtype, tilized, DRAM interleaved; one sequence's input.
		if is.DType != cs.DType {
			return contractErr(name, "Input tensor dtype (%v) must match cache tensor dtype (%v)", is.DType, cs.DType)
		}
		if cs.Memory != tt.DRAMInterleaved {
			return contractErr(name, "Only DRAM interleaved cache is modelled")
		}
		if cs.Layout != tt.Tile || is.Layout != tt.Tile {
			return contractErr(name, "Input and cache tensors must be tilized")
		}
		if ps.Layout != tt.RowMajor {
			return contractErr(name, "Page table must be ROW_MAJOR")
		}
		if is.Shape[0] != 1 {
			return contractErr(name, "Input tensor batch dim must be 1")
		}
		if pt.aligned%32 != 0 {
			return opErr(name, "page table page size in bytes must be a multiple of 32 due to address alignment")
		}
		return nil
	}
	key := d.opKey(name, attrKey{b2u(bi != nil)}, cache, in, pt, bi)
	p, err := d.lookup(name, key, validate, func() (program, error) {
		return d.pagedFillProgram(in, pt, bi != nil), nil
	})
	if err != nil {
		return err
	}
	l := &fillLaunch{batchIdx: uint32(o.BatchIdx), cache: snapshot(cache), in: snapshot(in), pt: snapshot(pt)}
	if bi != nil {
		l.bidx = snapshot(bi)
	}
	return d.enqueue(name, p, l)
}

type fillLaunch struct {
	batchIdx      uint32
	cache, in, pt *buffer
	bidx          *buffer
}

func (l *fillLaunch) exec(d *Device) error {
	x := &opIO{d: d, op: opFillCache, checkReads: true}
	s := getScratch()
	defer putScratch(s)
	batch := l.batchIdx
	if l.bidx != nil {
		w := s.u32(1)
		if err := x.readWords(s, l.bidx, 0, w); err != nil {
			return err
		}
		batch = w[0]
	}
	// Page `batch` of the page table, aligned page bytes (§1.6).
	nb := uint32(d.arch.nbanks)
	row := s.pageBuf(int(l.pt.aligned))
	ptAddr := uint32(l.pt.addr) + (batch/nb)*uint32(l.pt.aligned)
	if err := d.dramIO(opFillCache, 0, int(batch%nb), uint64(ptAddr), row, false); err != nil {
		return err
	}
	entries := s.u32(len(row) / 4)
	for i := range entries {
		entries[i] = binary.LittleEndian.Uint32(row[4*i:])
	}
	cp, ip := l.cache.spec.PaddedShape(), l.in.spec.PaddedShape()
	heads := uint32(cp[1])
	bst := uint32(cp[2] / tt.TileSize)
	wt := uint32(cp[3] / tt.TileSize)
	st := uint32(ip[2] / tt.TileSize)
	tileB := int(l.cache.pageSize)
	tileAligned := uint32(l.cache.aligned)
	nent := len(entries)
	tile := s.pageBuf(tileB) // the page-table row is decoded; its bytes are no longer needed
	for h := uint32(0); h < heads; h++ {
		for t := uint32(0); t < st; t++ {
			vb := t / bst
			if int(vb) >= nent {
				return fmt.Errorf("sim: %s: page-table entry %d lies past the %d B page read", opFillCache, vb, 4*nent)
			}
			phys := entries[vb]
			if phys == 0xFFFFFFFF {
				continue
			}
			if d.opt.Strict && phys >= uint32(cp[0]) {
				d.find(Finding{Class: PTEntryOutsideCache, Op: opFillCache, Core: -1, User: int(batch), Index: int64(vb), Tensor: l.pt.id,
					Addr:   uint64(ptAddr) + uint64(4*vb),
					Detail: fmt.Sprintf("page_table[%d][%d] = %d is not a block of the cache t%d (%d blocks)", batch, vb, phys, l.cache.id, cp[0])})
			}
			for w := uint32(0); w < wt; w++ {
				src := int(h*st*wt + t*wt + w)
				if err := x.pageIO(l.in, src, tile, false); err != nil {
					return err
				}
				id := phys*heads*bst*wt + h*bst*wt + (t%bst)*wt + w
				addr := uint32(l.cache.addr) + (id/nb)*tileAligned
				if err := d.dramIO(opFillCache, 0, int(id%nb), uint64(addr), tile, true); err != nil {
					return err
				}
			}
		}
	}
	if d.opt.LogKV {
		// One record per sequence row written (all heads), padding rows
		// of the last tile included: Pos is the row's sequence index.
		for r := uint32(0); r < st*tt.TileSize; r++ {
			vb := r / (bst * tt.TileSize)
			phys := entries[vb]
			if phys == 0xFFFFFFFF {
				continue
			}
			d.kvlog = append(d.kvlog, KVWrite{Op: opFillCache, CacheAddr: uint64(l.cache.addr), Cache: l.cache.id, User: int(batch), Core: -1,
				Pos: r, Virtual: vb, Physical: phys, Row: r % (bst * tt.TileSize), FirstTile: phys * heads * bst * wt})
		}
	}
	return nil
}
