package sim

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

const opUpdateCache = "paged_update_cache"

// Fault is an access the simulated hardware cannot perform: a DRAM address
// outside its channel (what Watcher reports as "(NOC target address
// overflow).", §9.1) or an L1 load outside a core's L1. The run stops there.
type Fault struct {
	Op    string
	Core  int
	Space string // "DRAM bank N" or "L1"
	Addr  uint64
	Len   int
}

func (f *Fault) Error() string {
	return fmt.Sprintf("sim: %s on core %d: %d B at %s address %#x is outside the device memory (NOC target address overflow).",
		f.Op, f.Core, f.Len, f.Space, f.Addr)
}

// dramIO reads (write=false) or writes one interleaved page slot. The
// kernels that write DRAM here write whole cache tiles (paged_update_cache
// the tiles it read and modified, paged_fill_cache the prompt's), so a
// write goes through mem.rewrite: the stripes a write leaves as they were
// keep their stamps, and PeekInto re-reads only their stripes. Memory
// ends the same as after a plain write, and strict marks the whole slot
// written, as the card's write of the whole tile does.
func (d *Device) dramIO(op string, core, bank int, addr uint64, buf []byte, write bool) error {
	m, off := d.dramAt(bank, addr)
	if !m.in(off, uint64(len(buf))) {
		return &Fault{Op: op, Core: core, Space: "DRAM bank " + strconv.Itoa(bank), Addr: addr, Len: len(buf)}
	}
	if write {
		m.rewrite(off, buf)
	} else {
		m.read(off, buf)
	}
	return nil
}

func (d *Device) l1IO(op string, core int, addr uint64, buf []byte, write bool) error {
	m := d.l1[core]
	if !m.in(addr, uint64(len(buf))) {
		return &Fault{Op: op, Core: core, Space: "L1", Addr: addr, Len: len(buf)}
	}
	if write {
		m.write(addr, buf)
	} else {
		m.read(addr, buf)
	}
	return nil
}

// ---- host side: validation (§1.1, §1.5), program (§1.2), runtime args ----

const opFusedUpdateCache = "paged_fused_update_cache"

// ucArgs is one paged_update_cache or paged_fused_update_cache call with its
// operands resolved: pair 0 (Cache/Input, or Cache1/Input1) and, fused only,
// pair 1 (Cache2/Input2).
type ucArgs struct {
	op             string
	fused          bool
	caches, inputs [2]*buffer
	idx, pt        *buffer
	list           []int32
	share          bool
	batchOffset    int
	fp32           bool
	gridX          int // the worker grid's width (the shard grids' CoreRangeSets)
}

func (a *ucArgs) pairs() int {
	if a.fused {
		return 2
	}
	return 1
}

func (a *ucArgs) err(format string, v ...any) error { return opErr(a.op, format, v...) }

func (d *Device) operand(op string, t tt.Tensor) (*buffer, error) {
	b, ok := d.live(t)
	if !ok {
		return nil, tt.Errorf(op, tt.MsgInputNotAllocated) // device_operation.hpp launch
	}
	return b, nil
}

// validateUpdateCache is validate_on_program_cache_miss (§1.1), in the
// notes' order, once per (cache, input) pair; the fused op (§1.5) runs the
// same checks on both pairs, then requires two disjoint one-user-per-core
// grids of the same size. Texts the notes quote are exact; the others
// (marked ~) are offcard's paraphrase of the checked condition.
func validateUpdateCache(a *ucArgs) error {
	for i := 0; i < a.pairs(); i++ {
		if err := validateUCPair(a, a.caches[i], a.inputs[i]); err != nil {
			return err
		}
	}
	if !a.fused {
		return nil
	}
	// paged_fused_update_cache_device_operation.cpp: the overlap, then
	// the core counts ({} prints each CoreRangeSet).
	g1, g2 := a.inputs[0].spec.Memory.Shard, a.inputs[1].spec.Memory.Shard
	if rangesIntersect(shardRanges(g1, a.gridX), shardRanges(g2, a.gridX)) {
		return a.err("input_tensor1 (%s) and input_tensor2 (%s) must not overlap", coreRangeSet(g1, a.gridX), coreRangeSet(g2, a.gridX))
	}
	if g1.NumCores != g2.NumCores {
		return a.err("input_tensor1 (%s) and input_tensor2 (%s) must have same number of cores", coreRangeSet(g1, a.gridX), coreRangeSet(g2, a.gridX))
	}
	if !a.caches[0].spec.Equal(a.caches[1].spec) || a.inputs[0].spec.Memory.Shard.Shape != a.inputs[1].spec.Memory.Shard.Shape ||
		a.inputs[0].spec.DType != a.inputs[1].spec.DType || !shapeEqual(a.inputs[0].spec.Shape, a.inputs[1].spec.Shape) {
		return contractErr(a.op, "cache_tensor1/input_tensor1 and cache_tensor2/input_tensor2 must have the same specs (the simulator's one program serves both)")
	}
	return nil
}

// coreRangeSet prints a shard grid as the shim builds it and as its fmt
// formatter prints it at the pin. The grid is num_cores_to_corerangeset(
// start, n, grid, row_wise) (tt_metal/common/work_split.cpp:77-143): a
// partial first row when the start is not at column 0 and the cores
// overflow it, then the full rows when more than a row is left, then the
// rest as a partial row. CoreRangeSet::str() is "{" + each
// CoreRange::str() joined by ", " + "}", CoreRange::str() "[" + start +
// " - " + end + "]" (tt_metal/common/core_coord.cpp:115, 354-365, 663-668),
// and a CoreCoord is umd's xy_pair, whose str() is "x-y" (tt-umd at
// 44455fa1, the pin's tt_metal/third_party/umd: device/types/xy_pair.cpp,
// line 11).
func coreRangeSet(g tt.ShardSpec, gridX int) string {
	b := []byte("{")
	for i, r := range shardRanges(g, gridX) {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, r.String()...)
	}
	return string(append(b, '}'))
}

// coreRange is a CoreRange, from its start core to its end core.
type coreRange [2]struct{ x, y int }

// rangesIntersect reports whether two lists of core ranges share a core
// (CoreRangeSet::intersects).
func rangesIntersect(as, bs []coreRange) bool {
	for _, a := range as {
		for _, b := range bs {
			if a[0].x <= b[1].x && b[0].x <= a[1].x && a[0].y <= b[1].y && b[0].y <= a[1].y {
				return true
			}
		}
	}
	return false
}

// shardCore is the worker core (row-major index over the whole worker
// grid, the index of d.l1) of core FirstCore+i of sh's grid numbering
// (tt.ShardSpec).
func (d *Device) shardCore(sh tt.ShardSpec, i int) int {
	gx := d.gridX()
	w := sh.GridWidth
	if w == 0 {
		w = gx
	}
	j := sh.FirstCore + i
	return j/w*gx + j%w
}

// onGrid reports whether worker core lies on sh's grid.
func (d *Device) onGrid(sh tt.ShardSpec, core int) bool {
	for i := range sh.NumCores {
		if d.shardCore(sh, i) == core {
			return true
		}
	}
	return false
}

// sameCores is m with a grid width equal to the worker grid's spelled as
// zero: the two name the same cores (tt.ShardSpec.GridWidth), so the card's
// MemoryConfig (a CoreRangeSet) cannot tell them apart.
func (d *Device) sameCores(m tt.MemoryConfig) tt.MemoryConfig {
	if m.Shard.GridWidth == d.gridX() {
		m.Shard.GridWidth = 0
	}
	return m
}

// String is CoreRange::str(): "[" + start + " - " + end + "]", each core
// as umd's "x-y".
func (r coreRange) String() string {
	return fmt.Sprintf("[%d-%d - %d-%d]", r[0].x, r[0].y, r[1].x, r[1].y)
}

// boundingBox is the smallest range holding every range of rs
// (CoreRangeSet::bounding_box).
func boundingBox(rs []coreRange) coreRange {
	b := rs[0]
	for _, r := range rs[1:] {
		b[0].x, b[0].y = min(b[0].x, r[0].x), min(b[0].y, r[0].y)
		b[1].x, b[1].y = max(b[1].x, r[1].x), max(b[1].y, r[1].y)
	}
	return b
}

// shardRanges is num_cores_to_corerangeset's ranges for a shard grid (see
// coreRangeSet).
func shardRanges(g tt.ShardSpec, gridX int) []coreRange {
	type xy = struct{ x, y int }
	var rs []coreRange
	if g.GridWidth != 0 {
		// The walk over the leftmost GridWidth columns
		// (num_cores_to_corerangeset_in_subcoregrids, row-wise, then its
		// merge of rows with the same x span: tt_metal/common/
		// work_split.cpp:150-310): the same ranges as the whole-grid walk
		// of a grid that wide.
		gridX = g.GridWidth
	}
	s := xy{g.FirstCore % gridX, g.FirstCore / gridX}
	left := g.NumCores
	if s.x != 0 && left > gridX-s.x {
		rs = append(rs, coreRange{s, {gridX - 1, s.y}})
		left -= gridX - s.x
		s = xy{0, s.y + 1}
	}
	if left > gridX {
		rows := left / gridX
		rs = append(rs, coreRange{s, {gridX - 1, s.y + rows - 1}})
		left -= rows * gridX
		s = xy{0, s.y + rows}
	}
	if left > 0 {
		rs = append(rs, coreRange{s, {s.x + left - 1, s.y}})
	}
	return rs
}

// gridX is the width of the worker grid, compute_with_storage_grid_size().x:
// Wormhole 8 (8x8), Blackhole 13 (13x10).
func (d *Device) gridX() int {
	if d.opt.Arch == Blackhole {
		return 13
	}
	return 8
}

func validateUCPair(a *ucArgs, cache, in *buffer) error {
	cs, is := cache.spec, in.spec
	if is.Layout != tt.Tile {
		if a.fused {
			return fmt.Errorf("sim: %s: ROW_MAJOR inputs (the row-major factory) are not implemented", a.op)
		}
		return a.err("Input tensor in non-fused update_cache must be tilized")
	}
	if cs.Layout != tt.Tile {
		return a.err("Cache tensor in update_cache must be tilized")
	}
	if cs.DType != tt.FP32 && cs.DType != tt.BF16 {
		return a.err("Data type of cache tensor must be FLOAT32, BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is %v", cs.DType)
	}
	if len(cs.Shape) != 4 || len(is.Shape) != 4 {
		return contractErr(a.op, "Cache and input tensors must be rank 4")
	}
	cp, ip := padded4(cs), padded4(is)
	if ip[0] != 1 {
		return a.err("Dim 0 of input tensor must be 1")
	}
	if cs.Memory.Layout != tt.Interleaved {
		return a.err("Only interleaved cache is supported")
	}
	headDim := ip[3]
	paged := a.pt != nil
	if paged && !a.fused {
		numKV, bs := cp[1], cp[2]
		if cacheE, viewE := numKV*bs*cp[3], numKV*bs*headDim; cacheE != viewE {
			return a.err("paged_update_cache geometry mismatch: cache has %d elems/block (kv_heads=%d, block_size=%d, head_dim=%d) but call view is %d (kv_heads=%d, block_size=%d, head_dim=%d).",
				cacheE, numKV, bs, cp[3], viewE, numKV, bs, headDim)
		}
		if bs%tt.TileSize != 0 {
			return a.err("effective block_size (%d) must be a multiple of TILE_HEIGHT (%d)", bs, tt.TileSize)
		}
	} else if ip[3] != cp[3] {
		// Non-paged, and the fused op's rule.
		if a.fused {
			return a.err("Last dim of input tensor must match last dim of cache tensor")
		}
		return a.err("Last dim of input tensor (%d) must match last dim of cache tensor (%d) in non-paged mode", ip[3], cp[3])
	}
	if headDim%tt.TileSize != 0 {
		return a.err("input_tensor last dim (%d) must be a multiple of TILE_WIDTH (%d)", headDim, tt.TileSize)
	}
	if !paged {
		if a.share {
			if cs.Shape[0] != 1 {
				return a.err("Share cache feature expects cache tensor to have batch of 1")
			}
		} else if is.Shape[1] != cs.Shape[0] {
			return a.err("Expect batch in input tensor match the batch in cache tensor")
		}
	} else {
		if a.share {
			return a.err("share_cache not supported with paged cache")
		}
		if a.idx == nil {
			return a.err("Paged cache requires update_idxs tensor")
		}
		ps := a.pt.spec
		if ps.Memory.Sharded() {
			return fmt.Errorf("sim: %s: sharded (UINT16) page tables are not implemented", a.op)
		}
		if ps.DType != tt.INT32 {
			return a.err("Expect page table to have datatype INT32")
		}
		if ps.Layout != tt.RowMajor {
			return a.err("Expect page table to have memory layout in ROW MAJOR")
		}
		if len(ps.Shape) != 2 {
			return contractErr(a.op, "Page table must be rank 2 [batch, max_num_blocks_per_seq]")
		}
		pp := [2]int{ps.PaddedDim(0), ps.PaddedDim(1)}
		if pp[0] != ip[1] {
			return a.err("Batch size between page_table and input_tensor must match")
		}
		if pp[1] > cp[0] {
			return a.err("max_num_blocks_per_seq must be less than max_num_blocks: max_num_blocks_per_seq=%d, max_num_blocks=%d", pp[1], cp[0])
		}
	}
	if (a.idx == nil) == (a.list == nil) {
		return a.err("Only an update tensor or an update vector can be provided. Not both or neither.")
	}
	numIndices := len(a.list)
	if a.idx != nil {
		xs := a.idx.spec
		if xs.DType != tt.INT32 {
			return a.err("Expected update_idxs to have datatype INT32")
		}
		if xs.Layout != tt.RowMajor {
			return a.err("Expected update_idxs to have memory layout in ROW MAJOR")
		}
		if xs.Memory.Sharded() {
			return fmt.Errorf("sim: %s: a sharded update_idxs tensor is not implemented", a.op)
		}
		if xs.Memory.Layout != tt.Interleaved {
			return a.err("Expect update_idxs to be DRAM INTERLEAVED")
		}
		if xs.Memory.Buffer != tt.DRAM {
			return a.err("Expect update_idxs to have buffer type DRAM")
		}
		numIndices = xs.PaddedDim(0)
	}
	if ip[1] != numIndices {
		return a.err("Number of update_idxs (%d) should match batch size (%d)", numIndices, ip[1])
	}
	m := is.Memory
	if !m.Sharded() {
		return a.err("Expect input_tensor to be sharded")
	}
	if m.Layout == tt.WidthSharded { // paged_update_cache_device_operation.cpp:257-259 (fused: :181-183)
		return a.err("Expect input_tensor to NOT have memory layout WIDTH SHARDED")
	}
	if m.Shard.Shape[1] != headDim {
		return a.err("Expect input_tensor to have shard width (%d) equal to the last dimension of the input tensor padded shape (%d)", m.Shard.Shape[1], headDim)
	}
	if h := padded4(is)[0] * ip[1] * ip[2]; m.Shard.Shape[0] == 0 || h%m.Shard.Shape[0] != 0 {
		return a.err("Input tensor's height must be divisible by the number of shards along the height dimension. Got height = %d, number of shards = %d.", h, m.Shard.Shape[0])
	}
	if !a.fused && m.Shard.NumCores != ip[1] {
		return a.err("Input tensor shard grid must have num_cores (%d) equal to the number of users / batch (%d). The kernel dispatches one user per core; use a {num_users, 1} grid (or any CoreRangeSet whose num_cores == num_users).", m.Shard.NumCores, ip[1])
	}
	if m.Shard.Shape[0] != ip[2] {
		return contractErr(a.op, "Input shard height (%d) must be one tile row (%d): the simulator models one user per core", m.Shard.Shape[0], ip[2])
	}
	if is.DType != tt.FP32 && is.DType != tt.BF16 {
		return a.err("Data type of input tensor for update cache must be FLOAT32 or BFLOAT16")
	}
	if a.batchOffset != 0 {
		return a.err("batch_offset must be 0")
	}
	return nil
}

// ucProgram is the compiled program of paged_update_cache (§1.2) or
// paged_fused_update_cache (§1.5): the compile-time arguments and the CB
// layout. The fused factory creates the same CBs in the same order on the
// union of both grids (c_1 and c_2 alias the two input shards and are not
// placed), so every core sees the non-fused layout; both halves use the
// compile-time arguments taken from pair 1.
type ucProgram struct {
	op                string
	paged, tensorMode bool
	share             bool // share_cache: the users' cores are chained by a semaphore
	cores             int  // B: core i of each grid <-> batch row i
	wt, st            uint32
	numHeads          uint32
	blockSize         uint32
	cacheBatchTiles   uint32
	ptStick           uint64 // page_table.padded_shape[-1] * 4, not aligned
	idxStick          uint64 // index tensor aligned page size
	cacheDT, inDT     tt.DType
	interm            tt.DType // Float16_b, or Float32 with fp32_dest_acc_en
	wbytes            uint32
	cacheBlocks       uint32 // cache.padded_shape[0], for findings only
	ptWidth           uint32 // page_table.padded_shape[1], for findings only

	c0, c16, c2, c3 cb // placed CBs the kernels write
	end             uint64
	// cbCores is the core range of the program's first CB, whose
	// allocator ProgramImpl::validate_circular_buffer_region checks first
	// (its text prints it): the input's shard grid's first range
	// (update_cache/paged_update_cache_program_factory.cpp:166, 186), or
	// for the fused op the bounding box of both inputs' grids
	// (fused_update_cache/paged_tiled_fused_update_cache_program_factory.cpp:169-197).
	cbCores coreRange
}

func (p *ucProgram) cbEnd() uint64 { return p.end }

// ucPart is one (cache, input) pair of a launch: its runtime addresses and
// its input's shard grid.
type ucPart struct {
	cacheAddr, inputAddr uint64
	grid                 tt.ShardSpec
	cacheID              tt.TensorID // for findings and the KV log only
}

// ucLaunch is one launch: program + runtime args. On a program-cache hit
// override_runtime_arguments refreshes every address (cache, index, page
// table, the inputs' dynamic CB addresses) and, in list mode,
// cache_start_id and tile_update_offset_B (§1.2, §1.5); nothing else.
type ucLaunch struct {
	p     *ucProgram
	parts []ucPart // paged_update_cache: one; fused: K (cores1) then V (cores2)
	// Reader args [2] index addr, [4] page table addr; list mode: per core
	// cache_start_id (reader/writer [1]) and tile_update_offset_B (writer [2]).
	idxAddr, ptAddr           uint64
	startID, offsetB, listPos []uint32
	// Tensor ids, for findings only (the kernels never use them).
	ptID, idxID tt.TensorID
}

// padded4 is a rank-4 spec's padded shape (tt.Spec.PaddedShape) as an
// array.
func padded4(s tt.Spec) [4]int {
	return [4]int{s.PaddedDim(0), s.PaddedDim(1), s.PaddedDim(2), s.PaddedDim(3)}
}

func (d *Device) buildUpdateCache(a *ucArgs) *ucProgram {
	cache, in, idx, pt := a.caches[0], a.inputs[0], a.idx, a.pt
	cp, ip := padded4(cache.spec), padded4(in.spec)
	p := &ucProgram{op: a.op, paged: pt != nil, tensorMode: idx != nil, share: a.share, cores: ip[1], cacheDT: cache.spec.DType, inDT: in.spec.DType}
	rs := shardRanges(in.spec.Memory.Shard, a.gridX)
	p.cbCores = rs[0]
	if a.fused {
		p.cbCores = boundingBox(append(rs, shardRanges(a.inputs[1].spec.Memory.Shard, a.gridX)...))
	}
	p.wt = uint32(ip[3] / tt.TileSize)
	p.numHeads = uint32(cp[1])
	p.blockSize = uint32(cp[2])
	if p.paged {
		p.st = p.blockSize / tt.TileSize
		p.ptStick = uint64(pt.spec.PaddedDim(1)) * 4
		if a.fused {
			// The fused factories read the page table's aligned page
			// (paged_tiled_fused_update_cache_program_factory.cpp:
			// page_table.buffer()->aligned_page_size()), so entries past
			// the row up to the slot's end come from its DRAM padding.
			p.ptStick = pt.aligned
		}
		p.ptWidth = uint32(pt.spec.PaddedDim(1))
	} else {
		p.st = uint32(cp[2] / tt.TileSize)
	}
	if !a.share {
		p.cacheBatchTiles = uint32(cache.numPages / cp[0])
	}
	p.cacheBlocks = uint32(cp[0])
	p.interm = tt.BF16
	if a.fp32 {
		p.interm = tt.FP32
	}
	p.wbytes = uint32(ip[3] * p.interm.Size())
	if idx != nil {
		p.idxStick = idx.aligned
	}
	tile := func(dt tt.DType) uint64 { return uint64(tt.TileSize * tt.TileSize * dt.Size()) }
	wt := uint64(p.wt)
	specs := []cbSpec{
		{indices: []int{0}, size: 2 * wt * tile(p.cacheDT)}, // cache tiles
		{indices: []int{1}, global: true},                   // input shard
	}
	if a.fused {
		specs = append(specs, cbSpec{indices: []int{2}, global: true}) // input2 shard
	}
	specs = append(specs,
		cbSpec{indices: []int{24, 25}, size: 2 * wt * tile(p.interm)},            // untilized interm
		cbSpec{indices: []int{26}, size: 2 * wt * tile(p.interm)},                // untilized cache
		cbSpec{indices: []int{16}, size: uint64(p.cores) * wt * tile(p.cacheDT)}, // output
	)
	out := len(specs) - 1
	if p.tensorMode {
		idxCB := tile(tt.INT32) // one Int32 tile
		if a.fused {
			idxCB = p.idxStick // fused: c_3 is index_stick_size, the index tensor's aligned page
		}
		specs = append(specs, cbSpec{indices: []int{2}, size: idxCB})
	}
	if p.paged {
		specs = append(specs, cbSpec{indices: []int{3}, size: p.ptStick}) // one stick, created last (fused: c_4)
	}
	cbs, end := d.placeCBs(specs)
	p.end = end
	p.c0, p.c16 = cbs[0], cbs[out]
	if p.tensorMode {
		p.c2 = cbs[out+1]
	}
	if p.paged {
		p.c3 = cbs[len(cbs)-1]
	}
	return p
}

// ucKey appends the program hash (§1.1) to the device's key buffer: op
// attributes and tensor specs, never addresses, contents or the list values
// (the list length is keyed so a wrong-length list cannot index past it).
func (d *Device) ucKey(a *ucArgs) []byte {
	k := append(d.kb[:0], a.op...)
	for i := 0; i < a.pairs(); i++ {
		k = append(append(k, "|cache="...), a.caches[i].key...)
		k = append(append(k, "|input="...), a.inputs[i].key...)
	}
	if a.idx != nil {
		k = append(append(k, "|idx="...), a.idx.key...)
	} else {
		k = strconv.AppendInt(append(k, "|list="...), int64(len(a.list)), 10)
	}
	if a.pt != nil {
		k = append(append(k, "|pt="...), a.pt.key...)
	}
	k = strconv.AppendBool(append(k, "|share="...), a.share)
	k = strconv.AppendBool(append(k, "|fp32="...), a.fp32)
	d.kb = k
	return k
}

func (d *Device) resolveUC(a *ucArgs, caches, inputs []tt.Tensor, idx, pt *tt.Tensor) error {
	var err error
	for i := range caches {
		if a.caches[i], err = d.operand(a.op, caches[i]); err != nil {
			return err
		}
		if a.inputs[i], err = d.operand(a.op, inputs[i]); err != nil {
			return err
		}
	}
	if idx != nil {
		if a.idx, err = d.operand(a.op, *idx); err != nil {
			return err
		}
	}
	if pt != nil {
		if a.pt, err = d.operand(a.op, *pt); err != nil {
			return err
		}
	}
	return nil
}

func (d *Device) pagedUpdateCache(o *tt.PagedUpdateCache) error {
	a := &ucArgs{op: opUpdateCache, list: o.UpdateIdxsList, share: o.ShareCache, batchOffset: o.BatchOffset, fp32: o.FP32DestAcc, gridX: d.gridX()}
	if err := d.resolveUC(a, []tt.Tensor{o.Cache}, []tt.Tensor{o.Input}, o.UpdateIdxs, o.PageTable); err != nil {
		return err
	}
	return d.runUpdateCache(a)
}

// pagedFusedUpdateCache is paged_fused_update_cache (§1.5): Input1 into
// Cache1 on Input1's cores, Input2 into Cache2 on Input2's cores, one
// program, the same index tensor and page table, the same unchecked
// page-table indexing as paged_update_cache.
func (d *Device) pagedFusedUpdateCache(o *tt.PagedFusedUpdateCache) error {
	a := &ucArgs{op: opFusedUpdateCache, fused: true, list: o.UpdateIdxsList, share: o.ShareCache, batchOffset: o.BatchOffset, fp32: o.FP32DestAcc, gridX: d.gridX()}
	if err := d.resolveUC(a, []tt.Tensor{o.Cache1, o.Cache2}, []tt.Tensor{o.Input1, o.Input2}, o.UpdateIdxs, o.PageTable); err != nil {
		return err
	}
	return d.runUpdateCache(a)
}

func (d *Device) runUpdateCache(a *ucArgs) error {
	pr, err := d.lookup(a.op, d.ucKey(a),
		func() error { return validateUpdateCache(a) },
		func() (program, error) { return d.buildUpdateCache(a), nil })
	if err != nil {
		return err
	}
	p := pr.(*ucProgram)
	// override_runtime_arguments: addresses and list-mode offsets only.
	// Eagerly the launch runs now, from a device-owned value (its parts'
	// memory kept for the next); a capture records a launch of its own.
	var l *ucLaunch
	if d.capturing {
		l = &ucLaunch{p: p}
	} else {
		d.eagerUC = ucLaunch{p: p, parts: d.eagerUC.parts[:0]}
		l = &d.eagerUC
	}
	for i := 0; i < a.pairs(); i++ {
		l.parts = append(l.parts, ucPart{cacheAddr: a.caches[i].addr, inputAddr: a.inputs[i].addr,
			grid: a.inputs[i].spec.Memory.Shard, cacheID: a.caches[i].id})
	}
	if a.idx != nil {
		l.idxAddr, l.idxID = a.idx.addr, a.idx.id
	}
	if a.pt != nil {
		l.ptAddr, l.ptID = a.pt.addr, a.pt.id
	}
	if !p.tensorMode {
		l.startID = make([]uint32, p.cores)
		l.offsetB = make([]uint32, p.cores)
		l.listPos = make([]uint32, p.cores)
		for i := 0; i < p.cores; i++ {
			u := uint32(a.list[i])
			l.listPos[i] = u
			l.startID[i] = uint32(i)*p.cacheBatchTiles + (u/tt.TileSize)*p.wt
			l.offsetB[i] = (u % tt.TileSize) * p.wbytes
		}
	}
	return d.enqueue(a.op, p, l)
}

// ---- device side: reader §1.3, compute + writer §1.4 ----

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// exec runs each part's cores: each reads its index, page-table entry and
// cache tiles and splices its row; the write-backs follow (flush). Core i of
// a part is core i of its input's grid (Device.shardCore): its L1 holds the CBs; i is
// my_batch_idx, the row of the index and page table.
func (l *ucLaunch) exec(d *Device) error {
	p := l.p
	nb := uint32(d.arch.nbanks)
	tileB := uint32(tt.TileSize * tt.TileSize * p.cacheDT.Size())
	tileAligned := uint32(alignUp(uint64(tileB), d.arch.dramAlign))
	inTileB := uint32(tt.TileSize * tt.TileSize * p.inDT.Size())
	s := getScratch()
	defer putScratch(s)
	tiles := s.bytesN(0, int(p.wt*tileB))
	inRow := s.bytesN(1, int(p.wt*inTileB))
	stick := s.bytesN(2, int(p.idxStick))
	var word [4]byte
	pend, pendBytes := s.ucPend[:0], s.ucBytes[:0]
	for part, pa := range l.parts {
		for user := 0; user < p.cores; user++ {
			core := d.shardCore(pa.grid, user)
			if core >= len(d.l1) {
				return &Fault{Op: p.op, Core: core, Space: "L1", Addr: pa.inputAddr, Len: len(inRow)}
			}
			var cacheID, row, pos, virt, phys uint32
			skip := false
			if p.tensorMode {
				// Page 0 of the index tensor into c_2, then index_ptr[my_batch_idx].
				if err := d.dramIO(p.op, core, 0, l.idxAddr, stick, false); err != nil {
					return err
				}
				if err := d.l1IO(p.op, core, p.c2.addr, stick, true); err != nil {
					return err
				}
				d.checkWritten(p.op, core, user, 0, l.idxAddr, uint64(4*user), 4, l.idxID, func() string { return "update index of user " + itoa(user) })
				if err := d.l1IO(p.op, core, p.c2.addr+uint64(4*user), word[:], false); err != nil {
					return err
				}
				raw := le32(word[:])
				pos = raw
				if raw == 0xFFFFFFFF {
					skip = true
				} else if p.paged {
					var err error
					virt = raw / p.blockSize
					if phys, err = d.readPageTableEntry(l, pa, core, user, virt, s); err != nil {
						return err
					}
					cacheID = phys*p.numHeads*p.st*p.wt + ((raw%p.blockSize)/tt.TileSize)*p.wt
					row = raw % tt.TileSize
				} else {
					phys = uint32(user)
					cacheID = uint32(user)*p.cacheBatchTiles + (raw/tt.TileSize)*p.wt
					row = raw % tt.TileSize
				}
			} else {
				cacheID = l.startID[user]
				row = l.offsetB[user] / p.wbytes
				phys = uint32(user)
				pos = l.listPos[user]
			}
			if skip {
				continue
			}
			if d.opt.LogKV {
				d.kvlog = append(d.kvlog, KVWrite{Op: p.op, Part: part, CacheAddr: pa.cacheAddr, Cache: pa.cacheID, User: user, Core: core, Pos: pos,
					Virtual: virt, Physical: phys, Row: pos % max(p.blockSize, 1), FirstTile: cacheID, Trace: d.replaying})
			}
			// The input shard on this core: Wt tiles, row h = head h.
			if err := d.l1IO(p.op, core, pa.inputAddr, inRow, false); err != nil {
				return err
			}
			for h := uint32(0); h < p.numHeads; h++ {
				for w := uint32(0); w < p.wt; w++ {
					id := cacheID + w
					addr := uint32(pa.cacheAddr) + (id/nb)*tileAligned
					if err := d.dramIO(p.op, core, int(id%nb), uint64(addr), tiles[w*tileB:(w+1)*tileB], false); err != nil {
						return err
					}
				}
				// Reader pushes into c_0 (ring of 2*Wt tiles: head h in half h%2).
				if err := d.l1IO(p.op, core, p.c0.addr+uint64(h%2)*uint64(len(tiles)), tiles, true); err != nil {
					return err
				}
				p.replaceRow(tiles, inRow, h, row)
				// Compute packs the re-tilized tiles into c_16 (ring of B*Wt tiles).
				slot := (uint64(h) * uint64(p.wt)) % (uint64(p.cores) * uint64(p.wt))
				if err := d.l1IO(p.op, core, p.c16.addr+slot*uint64(tileB), tiles, true); err != nil {
					return err
				}
				for w := uint32(0); w < p.wt; w++ {
					id := cacheID + w
					addr := uint32(pa.cacheAddr) + (id/nb)*tileAligned
					pend = append(pend, ucWrite{user: user, core: core, bank: int(id % nb), addr: uint64(addr), off: len(pendBytes)})
					pendBytes = append(pendBytes, tiles[w*tileB:(w+1)*tileB]...)
				}
				cacheID += p.wt * p.st
			}
			if p.share {
				// share_cache chains the cores: core i waits for core
				// i-1's signal before reading the cache, and signals after
				// its write barrier (paged_update_cache_program_factory.cpp:
				// 380-395; paged_cache/device/kernels/dataflow/
				// reader_update_cache_interleaved_start_id.cpp:125-130 and
				// paged_cache/device/kernels/dataflow/
				// writer_update_cache_interleaved_start_id.cpp:146-161):
				// each user's tiles land before the next reads.
				for _, w := range pend {
					if err := d.dramIO(p.op, w.core, w.bank, w.addr, pendBytes[w.off:w.off+int(tileB)], true); err != nil {
						return err
					}
				}
				pend, pendBytes = pend[:0], pendBytes[:0]
			}
		}
		if err := l.flush(d, part, pend, pendBytes, int(tileB)); err != nil {
			return err
		}
		pend, pendBytes = pend[:0], pendBytes[:0]
	}
	s.ucPend, s.ucBytes = pend, pendBytes
	return nil
}

// ucWrite is one tile write-back of a user's read-modify-write.
type ucWrite struct {
	user, core, bank int
	addr             uint64
	off              int // into the pending bytes
}

// flush writes a part's tiles back. In paged mode the cores run
// concurrently with no ordering (the semaphore chain exists only with
// share_cache, which paged mode forbids: paged_update_cache_program_factory.cpp
// sets wait_to_start/send_signal only when share_cache), so every core has
// read its tiles before any writes back: the interleaving modelled is
// "all reads, then the writes in an order drawn from the device seed and
// the launch count". Two users whose rows share a cache tile then race, and
// the later writer's tile (holding only its own row) wins: the other row is
// lost, as on the card. Strict names the aliasing. Without a race the result
// equals any serial order.
func (l *ucLaunch) flush(d *Device, part int, pend []ucWrite, data []byte, tileB int) error {
	p := l.p
	d.ucLaunches++
	users := make([]int, 0, p.cores)
	seen := make(map[int]bool, p.cores)
	for _, w := range pend {
		if !seen[w.user] {
			seen[w.user] = true
			users = append(users, w.user)
		}
	}
	if p.paged && len(users) > 1 {
		r := rand.New(rand.NewPCG(d.opt.Seed, d.ucLaunches))
		r.Shuffle(len(users), func(i, j int) { users[i], users[j] = users[j], users[i] })
	}
	var owner map[[2]uint64]int
	if d.opt.Strict {
		owner = map[[2]uint64]int{}
	}
	for _, u := range users {
		for _, w := range pend {
			if w.user != u {
				continue
			}
			if owner != nil {
				k := [2]uint64{uint64(w.bank), w.addr}
				if o, ok := owner[k]; ok && o != u {
					d.find(Finding{Class: KVTileRace, Op: p.op, Core: w.core, User: u, Index: int64(o), Tensor: l.parts[part].cacheID, Addr: w.addr,
						Detail: fmt.Sprintf("users %d and %d read-modify-write the same cache tile (DRAM bank %d %#x) in one launch; their cores are unordered, so one row is lost", o, u, w.bank, w.addr)})
					owner = nil // once per launch
				} else {
					owner[k] = u
				}
			}
			if err := d.dramIO(p.op, w.core, w.bank, w.addr, data[w.off:w.off+tileB], true); err != nil {
				return err
			}
		}
	}
	return nil
}

// readPageTableEntry is the reader's page-table step (§1.3 step 4): page
// my_batch_idx of the page table, page_table_stick_size bytes, into c_3; then
// a uint32 load from L1 at c_3 + 4*virt with no bound check.
func (d *Device) readPageTableEntry(l *ucLaunch, pa ucPart, core, user int, virt uint32, s *scratch) (uint32, error) {
	p := l.p
	nb := uint32(d.arch.nbanks)
	stick := s.bytesN(3, int(p.ptStick))
	slot := uint32(alignUp(p.ptStick, d.arch.dramAlign))
	bank, addr := int(uint32(user)%nb), uint64(uint32(l.ptAddr)+(uint32(user)/nb)*slot)
	if err := d.dramIO(p.op, core, bank, addr, stick, false); err != nil {
		return 0, err
	}
	if err := d.l1IO(p.op, core, p.c3.addr, stick, true); err != nil {
		return 0, err
	}
	ea := uint64(uint32(p.c3.addr) + 4*virt) // 32-bit pointer arithmetic
	if d.opt.Strict && virt >= p.ptWidth {
		where := fmt.Sprintf("past the %d B page-table CB at %#x (stale L1, not the host's table)", p.ptStick, p.c3.addr)
		if uint64(4*virt)+4 <= p.ptStick {
			where = fmt.Sprintf("inside the %d B page-table CB at %#x: the DRAM padding of the row's page slot, not the host's table", p.ptStick, p.c3.addr)
		}
		d.find(Finding{Class: PTReadPastRow, Op: p.op, Core: core, User: user, Index: int64(virt), Tensor: l.ptID, Addr: ea,
			Detail: fmt.Sprintf("page_table[%d][%d] read but the row has %d entries; the kernel loaded L1 %#x, %s",
				user, virt, p.ptWidth, ea, where)})
	}
	var word [4]byte
	if err := d.l1IO(p.op, core, ea, word[:], false); err != nil {
		return 0, err
	}
	if d.opt.Strict {
		if at, bad := d.l1[core].unwritten(ea, 4); bad {
			d.find(Finding{Class: ReadUnwritten, Op: p.op, Core: core, User: user, Index: int64(virt), Tensor: l.ptID, Addr: at,
				Detail: "page-table entry loaded from L1 bytes never written (poison)"})
		} else if virt < p.ptWidth {
			d.checkWritten(p.op, core, user, bank, addr, uint64(4*virt), 4, l.ptID, func() string { return fmt.Sprintf("page_table[%d][%d]", user, virt) })
		}
	}
	phys := le32(word[:])
	if d.opt.Strict {
		switch {
		case phys == 0xFFFFFFFF:
			d.find(Finding{Class: MinusOneNotSkipped, Op: p.op, Core: core, User: user, Index: int64(virt), Tensor: l.ptID, Addr: ea,
				Detail: fmt.Sprintf("page_table[%d][%d] = -1 is used as block id 0xffffffff (%s skips only a -1 update index)", user, virt, p.op)})
		case phys >= p.cacheBlocks:
			d.find(Finding{Class: PTEntryOutsideCache, Op: p.op, Core: core, User: user, Index: int64(virt), Tensor: l.ptID, Addr: ea,
				Detail: fmt.Sprintf("page_table[%d][%d] = %d is not a block of the cache t%d (%d blocks)", user, virt, phys, pa.cacheID, p.cacheBlocks)})
		}
	}
	return phys, nil
}

// checkWritten reports (strict) a DRAM read of never-written bytes at byte
// off of the page slot at (bank, addr); what names the value read (it is
// called only for a finding).
func (d *Device) checkWritten(op string, core, user, bank int, addr, off, n uint64, id tt.TensorID, what func() string) {
	if !d.opt.Strict {
		return
	}
	m, o := d.dramAt(bank, addr)
	if !m.in(o+off, n) {
		return
	}
	if at, bad := m.unwritten(o+off, n); bad {
		d.find(Finding{Class: ReadUnwritten, Op: op, Core: core, User: user, Index: int64(off / 4), Tensor: id, Addr: addr + (at - o),
			Detail: what() + " read from DRAM bytes never written (poison)"})
	}
}

// replaceRow is §1.4: row r of the Wt cache tiles takes head h's input row;
// every element goes through the intermediate format (unpack/pack round trip).
func (p *ucProgram) replaceRow(tiles, inRow []byte, h, r uint32) {
	ce, ie := p.cacheDT.Size(), p.inDT.Size()
	tileElems := tt.TileSize * tt.TileSize
	lossless := p.cacheDT == p.inDT && (p.interm == tt.FP32 || p.cacheDT == tt.BF16)
	for w := 0; w < int(p.wt); w++ {
		ct := tiles[w*tileElems*ce : (w+1)*tileElems*ce]
		it := inRow[w*tileElems*ie : (w+1)*tileElems*ie]
		if !lossless {
			for i := 0; i < tileElems; i++ {
				setElem(ct, i, p.cacheDT, roundTo(getElem(ct, i, p.cacheDT), p.interm))
			}
		}
		for c := 0; c < tt.TileSize; c++ {
			ci, ii := TileElem(int(r), c), TileElem(int(h), c)
			if lossless {
				copy(ct[ci*ce:(ci+1)*ce], it[ii*ie:(ii+1)*ie])
				continue
			}
			setElem(ct, ci, p.cacheDT, roundTo(getElem(it, ii, p.inDT), p.interm))
		}
	}
}

func getElem(b []byte, i int, dt tt.DType) float32 {
	if dt == tt.BF16 {
		return bf16.BF16(binary.LittleEndian.Uint16(b[2*i:])).Float32()
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func setElem(b []byte, i int, dt tt.DType, v float32) {
	if dt == tt.BF16 {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(bf16.FromFloat32(v)))
		return
	}
	binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
}

// roundTo passes v through the intermediate format (round to nearest even
// for Float16_b; the packer's rounding mode is not in the notes).
func roundTo(v float32, dt tt.DType) float32 {
	if dt == tt.BF16 {
		return bf16.Round(v)
	}
	return v
}
