package sim

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

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

// dramIO reads (write=false) or writes one interleaved page slot.
func (d *Device) dramIO(op string, core, bank int, addr uint64, buf []byte, write bool) error {
	m, off := d.dramAt(bank, addr)
	if !m.in(off, uint64(len(buf))) {
		return &Fault{Op: op, Core: core, Space: "DRAM bank " + strconv.Itoa(bank), Addr: addr, Len: len(buf)}
	}
	if write {
		m.write(off, buf)
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

// ---- host side: validation (§1.1), program (§1.2), runtime args ----

func ucErr(format string, a ...any) error { return tt.Errorf(opUpdateCache, format, a...) }

func (d *Device) operand(t tt.Tensor) (*buffer, error) {
	b, ok := d.live(t)
	if !ok {
		return nil, ucErr("Operands to update_cache need to be allocated in buffers on device!")
	}
	return b, nil
}

func dims(s tt.Spec) string {
	p := s.PaddedShape()
	parts := make([]string, len(p))
	for i, v := range p {
		parts[i] = strconv.Itoa(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// validateUpdateCache is validate_on_program_cache_miss (§1.1), in the
// notes' order. Texts the notes quote are exact; the others (marked ~) are
// offcard's paraphrase of the checked condition.
func validateUpdateCache(o tt.PagedUpdateCache, cache, in *buffer, idx, pt *buffer) error {
	cs, is := cache.spec, in.spec
	if is.Layout != tt.Tile {
		return ucErr("Input tensor in non-fused update_cache must be tilized")
	}
	if cs.Layout != tt.Tile {
		return ucErr("Cache tensor in update_cache must be tilized") // ~
	}
	if cs.DType != tt.FP32 && cs.DType != tt.BF16 {
		return ucErr("Data type of cache tensor must be FLOAT32, BFLOAT16, BFLOAT8_B or BFLOAT4_B") // ~
	}
	if is.DType != tt.FP32 && is.DType != tt.BF16 {
		return ucErr("Data type of input tensor must be FLOAT32 or BFLOAT16") // ~
	}
	if len(cs.Shape) != 4 || len(is.Shape) != 4 {
		return ucErr("Cache and input tensors must be rank 4") // ~ (implied by the indexing)
	}
	cp, ip := cs.PaddedShape(), is.PaddedShape()
	if ip[0] != 1 {
		return ucErr("Dim 0 of input tensor must be 1") // ~
	}
	if cs.Memory.Layout != tt.Interleaved {
		return ucErr("Only interleaved cache is supported")
	}
	headDim := ip[3]
	paged := pt != nil
	if paged {
		numKV, bs := cp[1], cp[2]
		if numKV*bs*headDim != cs.Shape[1]*cs.Shape[2]*cs.Shape[3] {
			return ucErr("paged_update_cache geometry mismatch: num_kv_heads (%d) * block_size (%d) * head_dim (%d) != cache.shape[1]*cache.shape[2]*cache.shape[3] (%d)",
				numKV, bs, headDim, cs.Shape[1]*cs.Shape[2]*cs.Shape[3])
		}
		if bs%tt.TileSize != 0 {
			return ucErr("block_size (%d) must be a multiple of 32", bs) // ~
		}
	} else if ip[3] != cp[3] {
		return ucErr("Input and cache head dims must match: %d vs %d", ip[3], cp[3]) // ~
	}
	if headDim%tt.TileSize != 0 {
		return ucErr("Head dim (%d) must be a multiple of 32", headDim) // ~
	}
	if !paged {
		if o.ShareCache {
			if cs.Shape[0] != 1 {
				return ucErr("Cache batch must be 1 with share_cache") // ~
			}
		} else if is.Shape[1] != cs.Shape[0] {
			return ucErr("Input batch (%d) must match cache batch (%d)", is.Shape[1], cs.Shape[0]) // ~
		}
	} else {
		if o.ShareCache {
			return ucErr("share_cache not supported with paged cache")
		}
		if idx == nil {
			return ucErr("Paged cache requires update_idxs tensor")
		}
		ps := pt.spec
		if ps.Memory.Sharded() {
			return fmt.Errorf("sim: %s: sharded (UINT16) page tables are not implemented", opUpdateCache)
		}
		if ps.DType != tt.INT32 {
			return ucErr("Page table must be INT32 when interleaved") // ~
		}
		if ps.Layout != tt.RowMajor {
			return ucErr("Page table must be ROW_MAJOR") // ~
		}
		if len(ps.Shape) != 2 {
			return ucErr("Page table must be rank 2 [batch, max_num_blocks_per_seq]") // ~
		}
		pp := ps.PaddedShape()
		if pp[0] != ip[1] {
			return ucErr("Batch size between page_table and input_tensor must match")
		}
		if pp[1] > cp[0] {
			return ucErr("max_num_blocks_per_seq must be less than max_num_blocks: max_num_blocks_per_seq=%d, max_num_blocks=%d", pp[1], cp[0])
		}
	}
	if (idx == nil) == (o.UpdateIdxsList == nil) {
		return ucErr("Only an update tensor or an update vector can be provided. Not both or neither.")
	}
	numIndices := len(o.UpdateIdxsList)
	if idx != nil {
		xs := idx.spec
		if xs.DType != tt.INT32 {
			return ucErr("update_idxs tensor must be INT32") // ~
		}
		if xs.Layout != tt.RowMajor {
			return ucErr("update_idxs tensor must be ROW_MAJOR") // ~
		}
		if xs.Memory.Sharded() {
			return fmt.Errorf("sim: %s: a sharded update_idxs tensor is not implemented", opUpdateCache)
		}
		if xs.Memory.Buffer != tt.DRAM {
			return ucErr("update_idxs tensor must be DRAM interleaved") // ~
		}
		numIndices = xs.PaddedShape()[0]
	}
	if ip[1] != numIndices {
		return ucErr("Number of update_idxs (%d) should match batch size (%d)", numIndices, ip[1])
	}
	m := is.Memory
	if !m.Sharded() {
		return ucErr("Input tensor must be sharded") // ~
	}
	if m.Shard.Shape[1] != headDim {
		return ucErr("Input shard width (%d) must equal head_dim (%d)", m.Shard.Shape[1], headDim) // ~
	}
	if m.Shard.NumCores != ip[1] {
		return ucErr("Input shard grid must have one core per user: %d cores for batch %d", m.Shard.NumCores, ip[1]) // ~
	}
	if m.Shard.Shape[0] != ip[2] {
		return ucErr("Input shard height (%d) must be one tile row (%d)", m.Shard.Shape[0], ip[2]) // ~
	}
	if o.BatchOffset != 0 {
		return ucErr("batch_offset must be 0")
	}
	return nil
}

// ucProgram is paged_update_cache's compiled program (§1.2): the
// compile-time arguments and the CB layout.
type ucProgram struct {
	paged, tensorMode bool
	cores             int // B: core i <-> batch row i
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
}

func (p *ucProgram) cbEnd() uint64 { return p.end }

// ucLaunch is one paged_update_cache launch: program + runtime args.
type ucLaunch struct {
	p *ucProgram
	// Reader args [0] cache addr, [2] index addr, [4] page table addr; the
	// input CB's dynamic address (the input shard); list mode: per core
	// cache_start_id (reader/writer [1]) and tile_update_offset_B (writer [2]).
	cacheAddr, idxAddr, ptAddr, inputAddr uint64
	startID, offsetB, listPos             []uint32
	// Tensor ids, for findings only (the kernels never use them).
	cacheID, ptID, idxID tt.TensorID
}

func (d *Device) buildUpdateCache(o tt.PagedUpdateCache, cache, in, idx, pt *buffer) *ucProgram {
	cp, ip := cache.spec.PaddedShape(), in.spec.PaddedShape()
	p := &ucProgram{paged: pt != nil, tensorMode: idx != nil, cores: ip[1], cacheDT: cache.spec.DType, inDT: in.spec.DType}
	p.wt = uint32(ip[3] / tt.TileSize)
	p.numHeads = uint32(cp[1])
	p.blockSize = uint32(cp[2])
	if p.paged {
		p.st = p.blockSize / tt.TileSize
		p.ptStick = uint64(pt.spec.PaddedShape()[1]) * 4
		p.ptWidth = uint32(pt.spec.PaddedShape()[1])
	} else {
		p.st = uint32(cp[2] / tt.TileSize)
	}
	if !o.ShareCache {
		p.cacheBatchTiles = uint32(cache.numPages / cp[0])
	}
	p.cacheBlocks = uint32(cp[0])
	p.interm = tt.BF16
	if o.FP32DestAcc {
		p.interm = tt.FP32
	}
	p.wbytes = uint32(ip[3] * p.interm.Size())
	if idx != nil {
		p.idxStick = idx.aligned
	}
	tile := func(dt tt.DType) uint64 { return uint64(tt.TileSize * tt.TileSize * dt.Size()) }
	wt := uint64(p.wt)
	specs := []cbSpec{
		{indices: []int{0}, size: 2 * wt * tile(p.cacheDT)},                // cache tiles
		{indices: []int{1}, global: true},                                  // input shard
		{indices: []int{24, 25}, size: 2 * wt * tile(p.interm)},            // untilized interm
		{indices: []int{26}, size: 2 * wt * tile(p.interm)},                // untilized cache
		{indices: []int{16}, size: uint64(p.cores) * wt * tile(p.cacheDT)}, // output
	}
	if p.tensorMode {
		specs = append(specs, cbSpec{indices: []int{2}, size: tile(tt.INT32)}) // one Int32 tile
	}
	if p.paged {
		specs = append(specs, cbSpec{indices: []int{3}, size: p.ptStick}) // one stick, created last
	}
	cbs, end := d.placeCBs(specs)
	p.end = end
	p.c0, p.c16 = cbs[0], cbs[4]
	if p.tensorMode {
		p.c2 = cbs[5]
	}
	if p.paged {
		p.c3 = cbs[len(cbs)-1]
	}
	return p
}

func ucKey(o tt.PagedUpdateCache, cache, in, idx, pt *buffer) string {
	var b strings.Builder
	b.WriteString(opUpdateCache)
	b.WriteString("|cache=" + cache.spec.String())
	b.WriteString("|input=" + in.spec.String())
	if idx != nil {
		b.WriteString("|idx=" + idx.spec.String())
	} else {
		// The list values are excluded from the hash; its length is implied
		// by the input spec when valid. Keyed here so a wrong-length list
		// cannot index past it.
		fmt.Fprintf(&b, "|list=%d", len(o.UpdateIdxsList))
	}
	if pt != nil {
		b.WriteString("|pt=" + pt.spec.String())
	}
	fmt.Fprintf(&b, "|share=%t|fp32=%t", o.ShareCache, o.FP32DestAcc)
	return b.String()
}

func (d *Device) pagedUpdateCache(o tt.PagedUpdateCache) error {
	cache, err := d.operand(o.Cache)
	if err != nil {
		return err
	}
	in, err := d.operand(o.Input)
	if err != nil {
		return err
	}
	var idx, pt *buffer
	if o.UpdateIdxs != nil {
		if idx, err = d.operand(*o.UpdateIdxs); err != nil {
			return err
		}
	}
	if o.PageTable != nil {
		if pt, err = d.operand(*o.PageTable); err != nil {
			return err
		}
	}
	key := ucKey(o, cache, in, idx, pt)
	pr, err := d.lookup(opUpdateCache, key,
		func() error { return validateUpdateCache(o, cache, in, idx, pt) },
		func() (program, error) { return d.buildUpdateCache(o, cache, in, idx, pt), nil })
	if err != nil {
		return err
	}
	p := pr.(*ucProgram)
	// override_runtime_arguments: addresses and list-mode offsets only.
	l := &ucLaunch{p: p, cacheAddr: cache.addr, inputAddr: in.addr, cacheID: cache.id}
	if idx != nil {
		l.idxAddr, l.idxID = idx.addr, idx.id
	}
	if pt != nil {
		l.ptAddr, l.ptID = pt.addr, pt.id
	}
	if !p.tensorMode {
		l.startID = make([]uint32, p.cores)
		l.offsetB = make([]uint32, p.cores)
		l.listPos = make([]uint32, p.cores)
		for i := 0; i < p.cores; i++ {
			u := uint32(o.UpdateIdxsList[i])
			l.listPos[i] = u
			l.startID[i] = uint32(i)*p.cacheBatchTiles + (u/tt.TileSize)*p.wt
			l.offsetB[i] = (u % tt.TileSize) * p.wbytes
		}
	}
	return d.enqueue(opUpdateCache, p, l)
}

// ---- device side: reader §1.3, compute + writer §1.4 ----

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// exec runs the cores in order 0..B-1: the kernels chain cores with a
// semaphore (wait_to_start / send_signal), so core i+1 reads the cache after
// core i wrote it.
func (l *ucLaunch) exec(d *Device) error {
	p := l.p
	nb := uint32(d.arch.nbanks)
	tileB := uint32(tt.TileSize * tt.TileSize * p.cacheDT.Size())
	tileAligned := uint32(alignUp(uint64(tileB), d.arch.dramAlign))
	inTileB := uint32(tt.TileSize * tt.TileSize * p.inDT.Size())
	tiles := make([]byte, p.wt*tileB)
	inRow := make([]byte, p.wt*inTileB)
	var word [4]byte
	for core := 0; core < p.cores; core++ {
		var cacheID, row, pos, virt, phys uint32
		skip := false
		if p.tensorMode {
			// Page 0 of the index tensor into c_2, then index_ptr[my_batch_idx].
			stick := make([]byte, p.idxStick)
			if err := d.dramIO(opUpdateCache, core, 0, l.idxAddr, stick, false); err != nil {
				return err
			}
			if err := d.l1IO(opUpdateCache, core, p.c2.addr, stick, true); err != nil {
				return err
			}
			d.checkWritten(core, 0, l.idxAddr, uint64(4*core), 4, l.idxID, "update index of user "+itoa(core))
			if err := d.l1IO(opUpdateCache, core, p.c2.addr+uint64(4*core), word[:], false); err != nil {
				return err
			}
			raw := le32(word[:])
			pos = raw
			if raw == 0xFFFFFFFF {
				skip = true
			} else if p.paged {
				var err error
				virt = raw / p.blockSize
				if phys, err = d.readPageTableEntry(l, core, virt); err != nil {
					return err
				}
				cacheID = phys*p.numHeads*p.st*p.wt + ((raw%p.blockSize)/tt.TileSize)*p.wt
				row = raw % tt.TileSize
			} else {
				phys = uint32(core)
				cacheID = uint32(core)*p.cacheBatchTiles + (raw/tt.TileSize)*p.wt
				row = raw % tt.TileSize
			}
		} else {
			cacheID = l.startID[core]
			row = l.offsetB[core] / p.wbytes
			phys = uint32(core)
			pos = l.listPos[core]
		}
		if skip {
			continue
		}
		if d.opt.LogKV {
			d.kvlog = append(d.kvlog, KVWrite{Op: opUpdateCache, CacheAddr: l.cacheAddr, User: core, Pos: pos,
				Virtual: virt, Physical: phys, Row: pos % max(p.blockSize, 1), FirstTile: cacheID})
		}
		// The input shard on this core: Wt tiles, row h = head h.
		if err := d.l1IO(opUpdateCache, core, l.inputAddr, inRow, false); err != nil {
			return err
		}
		for h := uint32(0); h < p.numHeads; h++ {
			for w := uint32(0); w < p.wt; w++ {
				id := cacheID + w
				addr := uint32(l.cacheAddr) + (id/nb)*tileAligned
				if err := d.dramIO(opUpdateCache, core, int(id%nb), uint64(addr), tiles[w*tileB:(w+1)*tileB], false); err != nil {
					return err
				}
			}
			// Reader pushes into c_0 (ring of 2*Wt tiles: head h in half h%2).
			if err := d.l1IO(opUpdateCache, core, p.c0.addr+uint64(h%2)*uint64(len(tiles)), tiles, true); err != nil {
				return err
			}
			p.replaceRow(tiles, inRow, h, row)
			// Compute packs the re-tilized tiles into c_16 (ring of B*Wt tiles).
			slot := (uint64(h) * uint64(p.wt)) % (uint64(p.cores) * uint64(p.wt))
			if err := d.l1IO(opUpdateCache, core, p.c16.addr+slot*uint64(tileB), tiles, true); err != nil {
				return err
			}
			for w := uint32(0); w < p.wt; w++ {
				id := cacheID + w
				addr := uint32(l.cacheAddr) + (id/nb)*tileAligned
				if err := d.dramIO(opUpdateCache, core, int(id%nb), uint64(addr), tiles[w*tileB:(w+1)*tileB], true); err != nil {
					return err
				}
			}
			cacheID += p.wt * p.st
		}
	}
	return nil
}

// readPageTableEntry is the reader's page-table step (§1.3 step 4): page
// my_batch_idx of the page table, page_table_stick_size bytes, into c_3; then
// a uint32 load from L1 at c_3 + 4*virt with no bound check.
func (d *Device) readPageTableEntry(l *ucLaunch, core int, virt uint32) (uint32, error) {
	p := l.p
	nb := uint32(d.arch.nbanks)
	stick := make([]byte, p.ptStick)
	slot := uint32(alignUp(p.ptStick, d.arch.dramAlign))
	bank, addr := int(uint32(core)%nb), uint64(uint32(l.ptAddr)+(uint32(core)/nb)*slot)
	if err := d.dramIO(opUpdateCache, core, bank, addr, stick, false); err != nil {
		return 0, err
	}
	if err := d.l1IO(opUpdateCache, core, p.c3.addr, stick, true); err != nil {
		return 0, err
	}
	ea := uint64(uint32(p.c3.addr) + 4*virt) // 32-bit pointer arithmetic
	if d.opt.Strict && virt >= p.ptWidth {
		d.find(Finding{Class: PTReadPastRow, Op: opUpdateCache, Core: core, User: core, Index: int64(virt), Tensor: l.ptID, Addr: ea,
			Detail: fmt.Sprintf("page_table[%d][%d] read but the row has %d entries; the kernel loaded L1 %#x, past the %d B page-table CB at %#x (stale L1, not the host's table)",
				core, virt, p.ptWidth, ea, p.ptStick, p.c3.addr)})
	}
	var word [4]byte
	if err := d.l1IO(opUpdateCache, core, ea, word[:], false); err != nil {
		return 0, err
	}
	if d.opt.Strict {
		if at, bad := d.l1[core].unwritten(ea, 4); bad {
			d.find(Finding{Class: ReadUnwritten, Op: opUpdateCache, Core: core, User: core, Index: int64(virt), Tensor: l.ptID, Addr: at,
				Detail: "page-table entry loaded from L1 bytes never written (poison)"})
		} else if virt < p.ptWidth {
			d.checkWritten(core, bank, addr, uint64(4*virt), 4, l.ptID, fmt.Sprintf("page_table[%d][%d]", core, virt))
		}
	}
	phys := le32(word[:])
	if d.opt.Strict {
		switch {
		case phys == 0xFFFFFFFF:
			d.find(Finding{Class: MinusOneNotSkipped, Op: opUpdateCache, Core: core, User: core, Index: int64(virt), Tensor: l.ptID, Addr: ea,
				Detail: fmt.Sprintf("page_table[%d][%d] = -1 is used as block id 0xffffffff (paged_update_cache skips only a -1 update index)", core, virt)})
		case phys >= p.cacheBlocks:
			d.find(Finding{Class: PTEntryOutsideCache, Op: opUpdateCache, Core: core, User: core, Index: int64(virt), Tensor: l.ptID, Addr: ea,
				Detail: fmt.Sprintf("page_table[%d][%d] = %d is not a block of the cache t%d (%d blocks)", core, virt, phys, l.cacheID, p.cacheBlocks)})
		}
	}
	return phys, nil
}

// checkWritten reports (strict) a DRAM read of never-written bytes at byte
// off of the page slot at (bank, addr).
func (d *Device) checkWritten(core, bank int, addr, off, n uint64, id tt.TensorID, what string) {
	if !d.opt.Strict {
		return
	}
	m, o := d.dramAt(bank, addr)
	if !m.in(o+off, n) {
		return
	}
	if at, bad := m.unwritten(o+off, n); bad {
		d.find(Finding{Class: ReadUnwritten, Op: opUpdateCache, Core: core, User: core, Index: int64(off / 4), Tensor: id, Addr: addr + (at - o),
			Detail: what + " read from DRAM bytes never written (poison)"})
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
