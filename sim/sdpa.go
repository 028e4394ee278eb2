package sim

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

const opSDPA = "paged_scaled_dot_product_attention_decode"

// sdpaDecode is ttnn.transformer.paged_scaled_dot_product_attention_decode
// (§3), causal, page table interleaved.
//
// Shapes as built: Q BF16 [1,B,H,D] (TILE, DRAM or height-sharded L1);
// K and V BF16 TILE DRAM caches [blocks, KVH, block_size, D]; PageTable
// INT32 ROW_MAJOR [B, W] DRAM interleaved; CurPos INT32 ROW_MAJOR [B] (page 0
// holds the B positions); Output BF16 [1,B,H,D]. H = Q.Shape[2] counts as
// the query heads (as ttnn takes the logical shape), H % KVH == 0, and query
// head h reads kv head h / (H/KVH).
//
// Per user b (on core b): cur_pos = CurPos[b] as uint32; 0xFFFFFFFF (-1)
// skips the user and nothing of its output is written. Otherwise the
// reader copies its Q tiles into c_0 and page b of the page table
// (aligned_page_size bytes: the row and the DRAM padding of its slot) into
// the page-table CB c_9 in that core's L1 (past it: c_10, written only for
// a ROW_MAJOR Q, so stale L1 for the engine's TILE Q), and looks up entries for every K/V tile row up to
// round_up(cur_pos+1, k_chunk)/32 - 1: entry k is a uint32 load at
// c_9 + 4k (past the CB it is whatever the L1 holds). The tile of row s,
// column tile c of kv head h is physical*KVH*bst*DHt + h*bst*DHt +
// (s%bst)*DHt + c (uint32, no bound check, -1 not special). Positions
// 0..cur_pos are gathered into contiguous scratch and each query head runs
// ref.Attend with the op's scale (0 means float32(1/sqrt(D)), ref.AttnScale).
// Tiles of the chunk beyond cur_pos are masked on the card (-inf); the
// reader fetches them (an address outside the bank faults) but their
// contents never reach the output.
//
// KChunkSize 0 (dynamic) takes Sk_chunk_t = the smallest power of two >=
// cur_pos/32+1, capped at dst_size (validLen).
func (d *Device) sdpaDecode(o tt.PagedSDPADecode, output tt.Tensor) error {
	const name = opSDPA
	bs, err := d.operands(name, &o.Q, &o.K, &o.V, &o.PageTable, &o.CurPos, &output)
	if err != nil {
		return err
	}
	q, k, v, pt, cp, out := bs[0], bs[1], bs[2], bs[3], bs[4], bs[5]
	validate := func() error { return validateSDPA(o, q, k, v, pt, cp, out) }
	attrs := attrKey{uint64(math.Float32bits(o.Scale)), uint64(int64(o.KChunkSize))<<1 | b2u(o.FP32DestAcc)}
	// compute_program_hash hashes q, k, v, the page table, the output
	// config and the cur_pos tensor (its tensor_spec, and its logical shape
	// again): sdpa_decode_device_operation.cpp:515-520, 553-554 (a
	// Tensor's attribute_names are storage and tensor_spec,
	// ttnn/api/ttnn/tensor/tensor.hpp:256). A cur_pos of a new spec misses.
	key := d.opKey(name, attrs, q, k, v, pt, out, cp)
	pr, err := d.lookup(name, key, validate, func() (program, error) { return d.buildSDPA(o, q, k, pt, cp, out), nil })
	if err != nil {
		return err
	}
	p := pr.(*sdpaProgram)
	if d.capturing {
		l := &sdpaLaunch{p: p, q: snapshot(q), k: snapshot(k), v: snapshot(v), pt: snapshot(pt), cp: snapshot(cp), out: snapshot(out)}
		return d.enqueue(name, p, l)
	}
	// Eagerly the launch runs now, on the live buffers, from a
	// device-owned value (as runSimple's).
	d.eagerSDPA = sdpaLaunch{p: p, q: q, k: k, v: v, pt: pt, cp: cp, out: out}
	err = d.enqueue(name, p, &d.eagerSDPA)
	d.eagerSDPA = sdpaLaunch{}
	return err
}

// checkKChunk is the wrapper's check of a user's k_chunk_size
// (ttnn/cpp/ttnn/operations/transformer/sdpa_decode/sdpa_decode.cpp:143-152),
// before the device op validates (wrapperCheck).
func checkKChunk(o tt.PagedSDPADecode) error {
	if o.KChunkSize < 0 || (o.KChunkSize > 0 && o.KChunkSize&(o.KChunkSize-1) != 0) {
		return opErr(opSDPA, "User provided k_chunk_size must be power of 2, got: %d", o.KChunkSize)
	}
	if o.KChunkSize%tt.TileSize != 0 {
		return opErr(opSDPA, "User provided k_chunk_size must be multiple of 32, got: %d", o.KChunkSize)
	}
	return nil
}

func validateSDPA(o tt.PagedSDPADecode, q, k, v, pt, cp, out *buffer) error {
	const name = opSDPA
	for i, b := range []*buffer{q, k, v, out} {
		if err := wantRank(name, []string{"Q", "K", "V", "Output"}[i], b, 4); err != nil {
			return err
		}
	}
	// SdpaDecodeDeviceOperation::validate_on_program_cache_miss
	// (…/sdpa_decode/device/sdpa_decode_device_operation.cpp), in its order.
	for _, b := range []*buffer{q, k, v} {
		if b.spec.DType != tt.BF16 { // or BFLOAT8_B / BFLOAT4_B, which tt has no name for
			return opErr(name, "Unsupported data type %v.", b.spec.DType)
		}
	}
	if k.spec.Layout != tt.Tile || v.spec.Layout != tt.Tile {
		return opErr(name, "Inputs to SDPA must be tilized except for Q")
	}
	if qm := q.spec.Memory; qm.Sharded() && qm.Layout != tt.HeightSharded {
		return opErr(name, "Q tensor memory layout must be HEIGHT_SHARDED when sharded but got %v", qm.Layout)
	} else if !qm.Sharded() && qm.Buffer != tt.DRAM {
		return opErr(name, "Q tensor buffer type must be DRAM when not sharded but got %v", qm.Buffer)
	}
	for i, b := range []*buffer{k, v} {
		if b.spec.Memory.Buffer != tt.DRAM {
			return opErr(name, "Input tensor %d buffer type must be DRAM but got %v", i+1, b.spec.Memory.Buffer)
		}
	}
	if om := out.spec.Memory; om.Sharded() && om.Layout != tt.HeightSharded {
		return opErr(name, "Output memory config layout must be HEIGHT_SHARDED when sharded but got %v", om.Layout)
	}
	if k.spec.Memory != tt.DRAMInterleaved || v.spec.Memory != tt.DRAMInterleaved {
		return contractErr(name, "K and V caches must be DRAM interleaved")
	}
	// The output is checked only when sharded, so an L1-interleaved output
	// is allowed (sdpa_decode_device_operation.cpp:103-109).
	ps := pt.spec
	if cp.spec.DType != tt.INT32 {
		return opErr(name, "Expect cur_pos to be INT32, got %v", cp.spec.DType)
	}
	if cp.spec.Layout != tt.RowMajor {
		return opErr(name, "Expect cur_pos to be ROW_MAJOR, got %v", cp.spec.Layout)
	}
	batch := q.spec.Shape[1]
	if n := cp.spec.PaddedDim(len(cp.spec.Shape) - 1); n != batch {
		return opErr(name, "cur_pos must have batch size equal to Q, got %d and %d", n, batch)
	}
	if cp.spec.Memory.Sharded() {
		return fmt.Errorf("sim: %s: a sharded cur_pos tensor is not implemented", name)
	}
	if ps.Memory.Sharded() {
		return fmt.Errorf("sim: %s: sharded (UINT16) page tables are not implemented", name)
	}
	if ps.DType != tt.INT32 {
		return opErr(name, "Error: SDPA currently only supports INT32 datatype")
	}
	if ps.Layout != tt.RowMajor {
		return opErr(name, "Page table tensor layout must be ROW_MAJOR but got %v", ps.Layout)
	}
	if len(ps.Shape) != 2 {
		return contractErr(name, "Page table must be rank 2 [batch, max_num_blocks_per_seq]")
	}
	qs, ks, vs := q.spec.Shape, k.spec.Shape, v.spec.Shape
	if ps.PaddedDim(0) != batch {
		return opErr(name, "Page_table must have batch size equal to Q")
	}
	if ks[2] != vs[2] {
		return opErr(name, "K and V must have same block size")
	}
	if cacheE, viewE := ks[1]*ks[2]*ks[3], ks[1]*ks[2]*q.spec.PaddedDim(3); cacheE != viewE {
		return opErr(name, "paged_scaled_dot_product_attention_decode geometry mismatch: cache has %d elems/block (kv_heads=%d, block_size=%d, head_dim=%d) but call view is %d (kv_heads=%d, block_size=%d, head_dim=%d from Q.padded_shape[-1]).",
			cacheE, ks[1], ks[2], ks[3], viewE, ks[1], ks[2], q.spec.PaddedDim(3))
	}
	if ks[2]%tt.TileSize != 0 {
		return opErr(name, "effective block_size (%d) must be a multiple of TILE_HEIGHT (%d)", ks[2], tt.TileSize)
	}
	if d := q.spec.PaddedDim(3); d%tt.TileSize != 0 {
		return opErr(name, "Q last dim (%d) must be a multiple of TILE_WIDTH (%d)", d, tt.TileSize)
	}
	if ks[3] != vs[3] || ks[3] != qs[3] {
		return opErr(name, "Q, K, V must have same hidden size")
	}
	if qs[0] != 1 {
		return opErr(name, "Q tensor batch size must be 1 for decode mode but got %d", qs[0])
	}
	if ks[1] != vs[1] {
		return opErr(name, "Flash decode expects K and V to have same number of heads, but got %d and %d", ks[1], vs[1])
	}
	if ks[1] > 1 {
		// GQA.
		if q.spec.DType != tt.BF16 {
			return opErr(name, "GQA expects BFLOAT16 input tensor, but got %v", q.spec.DType)
		}
		if qs[2]%ks[1] != 0 {
			return opErr(name, "GQA expects Q to have a multiple of K heads, but got %d and %d", qs[2], ks[1])
		}
	}
	// More than one KV head is GQA: no sharded output
	// (sdpa_decode_device_operation.cpp:403-405).
	if ks[1] > 1 && out.spec.Memory.Sharded() {
		return opErr(name, "Sharded output not supported for GQA")
	}
	if ks[0] != vs[0] {
		return contractErr(name, "K and V caches must have the same number of blocks")
	}
	if err := wantBF16(name, "Output", out); err != nil {
		return err
	}
	if !shapeEqual(out.spec.Shape, qs) {
		return contractErr(name, "Output shape %v must equal Q shape %v", out.spec.Shape, qs)
	}
	return nil
}

// sdpaProgram holds the compile-time state of a paged SDPA decode program:
// geometry and the placed page-table CB (§3.2: c_9, one aligned page).
type sdpaProgram struct {
	heads, kvh, dh   int
	bs               uint32 // block size
	blocks           uint32 // cache blocks (findings only)
	ptWidth          uint32 // page-table row width (findings only)
	kchunk           int
	scale            float32
	ptCB, ptCBSize   uint64
	end              uint64
	cacheTile        uint32 // tile bytes of the caches
	cacheTileAligned uint32
	ptAligned        uint64
	maxChunkT        int    // cap of the dynamic chunk, in tiles
	qCB, qCBSize     uint64 // the Q CB c_0, the first CB
	cbs              []cb   // every CB, in creation order
}

func (p *sdpaProgram) cbEnd() uint64 { return p.end }

// buildSDPA places the program's CBs as the factory creates them at the pin
// (ttnn/cpp/ttnn/operations/transformer/sdpa_decode/device/
// sdpa_decode_program_factory.cpp:538-611), for the causal paged case with
// no attention sink, no sliding window, a block size of whole tiles and one
// core per user: c_0 Q, c_1 K and c_2 V (a k chunk each, double-buffered),
// c_3 mask, c_5 scale, c_6 and c_7 statistics, c_8 and c_15 cur_pos (one
// aligned page each), c_9 page table (one aligned page), c_10 tilized Q
// (used only for a ROW_MAJOR Q), c_11 and c_12 scalars, the intermediates
// c_24..c_31, c_21..c_23, the outputs c_16..c_18 and c_20 (aliasing a
// sharded output). Tile sizes (:385-387, 414-461): a k chunk of
// k_chunk_size/32 tiles, or dst_size (8, 4 with fp32 accumulation) when
// 0; Q, mask, scalar, statistics and intermediate tiles are half tiles
// (16x32, 1024 B) when at most 16 query heads, else full (2048 B); K, V,
// the column identity c_11 and the output are full tiles. L1 just past
// the page-table CB is c_10.
func (d *Device) buildSDPA(o tt.PagedSDPADecode, q, k, pt, cp, out *buffer) *sdpaProgram {
	qs, ks := q.spec.Shape, k.spec.Shape
	p := &sdpaProgram{heads: qs[2], kvh: ks[1], dh: qs[3], bs: uint32(ks[2]), blocks: uint32(ks[0]),
		ptWidth: uint32(pt.spec.Shape[1]), kchunk: o.KChunkSize, scale: o.Scale}
	if p.scale == 0 {
		p.scale = ref.AttnScale(p.dh)
	}
	p.cacheTile = uint32(k.pageSize)
	p.cacheTileAligned = uint32(k.aligned)
	p.ptAligned = pt.aligned
	const full = uint64(tt.TileSize * tt.TileSize * 2)
	half := full
	if p.heads <= 16 { // use_half_tile: causal, num_q_heads <= 16, BF16 Q (:443)
		half = full / 2
	}
	dht := uint64(p.dh / tt.TileSize)
	pnht := uint64(q.spec.PaddedDim(2) / tt.TileSize) // PNH/32 (:93, 160)
	p.maxChunkT = 8                                   // dst_size: 8 tiles, 4 with fp32 accumulation
	if o.FP32DestAcc {
		p.maxChunkT = 4
	}
	chunkT := uint64(p.maxChunkT) // Sk_chunk_t_cb_size
	if o.KChunkSize > 0 {
		chunkT = uint64(o.KChunkSize / tt.TileSize)
	}
	qT, outT, stats := pnht*dht, pnht*dht, pnht*half
	specs := []cbSpec{
		{indices: []int{0}, size: qT * half},               // Q
		{indices: []int{1}, size: chunkT * dht * 2 * full}, // K, double-buffered
		{indices: []int{2}, size: chunkT * dht * 2 * full}, // V, double-buffered
		{indices: []int{3}, size: pnht * chunkT * half},    // mask
		{indices: []int{5}, size: half},                    // scale
		{indices: []int{6}, size: stats},                   // m_in
		{indices: []int{7}, size: stats},                   // l_in
		{indices: []int{8}, size: cp.aligned},              // cur_pos (writer)
		{indices: []int{15}, size: cp.aligned},             // cur_pos (compute)
		{indices: []int{9}, size: pt.aligned},              // page table
		{indices: []int{10}, size: qT * half},              // tilized Q
		{indices: []int{11}, size: full},                   // column identity
		{indices: []int{12}, size: half},
		{indices: []int{24}, size: pnht * chunkT * half},
		{indices: []int{25}, size: outT * half},
		{indices: []int{26}, size: outT * half},
		{indices: []int{27}, size: stats}, {indices: []int{28}, size: stats}, {indices: []int{29}, size: stats},
		{indices: []int{30}, size: stats}, {indices: []int{31}, size: stats}, {indices: []int{21}, size: stats},
		{indices: []int{22}, size: stats},
		{indices: []int{23}, size: outT * half},
		{indices: []int{16}, size: outT * half},
		{indices: []int{17}, size: stats}, {indices: []int{18}, size: stats},
		{indices: []int{20}, size: outT * full, global: out.spec.Memory.Sharded()},
	}
	cbs, end := d.placeCBs(specs)
	p.end, p.cbs = end, cbs
	p.qCB, p.qCBSize = cbs[0].addr, cbs[0].size
	p.ptCB, p.ptCBSize = cbs[9].addr, cbs[9].size
	return p
}

// maxSDPAPositions bounds cur_pos: a garbage position (poison, a wrapped
// plus_one) would make the kernel stream tiles for up to 2^32 positions.
const maxSDPAPositions = 1 << 20

type sdpaLaunch struct {
	p                    *sdpaProgram
	q, k, v, pt, cp, out *buffer
}

// validLen is round_up(cur_pos+1, k_chunk) (§3.2), in uint64 so a huge
// cur_pos cannot wrap.
func (p *sdpaProgram) validLen(cur uint32) uint64 {
	n := uint64(cur) + 1
	chunk := uint64(p.kchunk)
	if chunk == 0 {
		// get_dynamic_Sk_chunk_t: nearest_pow_of_2_up_to_8 of the tiles
		// holding 0..cur_pos, capped at dst_size (8 tiles, 4 with fp32
		// accumulation).
		t := uint64(cur)/tt.TileSize + 1
		ct := uint64(1)
		if t > 1 {
			ct = 1 << (64 - bits.LeadingZeros64(t-1)) // smallest power of two >= t
		}
		chunk = tt.TileSize * min(ct, uint64(p.maxChunkT))
	}
	return (n + chunk - 1) / chunk * chunk
}

func (l *sdpaLaunch) exec(d *Device) error {
	p := l.p
	x := &opIO{d: d, op: opSDPA}
	s := getScratch()
	defer putScratch(s)

	// cur_pos: page 0 of the cur_pos tensor.
	batch := l.pt.spec.Shape[0]
	pos := s.u32(batch)
	x.checkReads = true
	if err := x.readWords(s, l.cp, 0, pos); err != nil {
		return err
	}
	x.checkReads = false // Q rows of skipped users may be garbage
	gq, gout := l.q.g, l.out.g
	qv := s.buf(0, gq.size())
	if err := x.readRows(s, l.q, qv); err != nil {
		return err
	}
	dst := s.buf(1, gout.size())
	clear(dst)
	dh := p.dh
	group := p.heads / p.kvh
	bst := p.bs / tt.TileSize
	dht := uint32(dh / tt.TileSize)
	nb := uint32(d.arch.nbanks)
	active := 0
	for b := 0; b < batch; b++ {
		cur := pos[b]
		if cur == 0xFFFFFFFF {
			continue
		}
		active++
		if cur >= maxSDPAPositions {
			return fmt.Errorf("sim: %s: user %d has cur_pos %d (%#x); the card would stream K/V tiles for billions of positions, the simulator stops at %d",
				opSDPA, b, int32(cur), cur, maxSDPAPositions)
		}
		core := b % len(d.l1)
		// The reader fills the Q CB c_0 (user b's Q tile row) before it
		// reads the page table.
		if err := l.fillQCB(d, x, s, b, core); err != nil {
			return err
		}
		entries, err := l.pageTableRow(d, x, s, b, core)
		if err != nil {
			return err
		}
		nvalid := p.validLen(cur)
		used := uint64(cur)/tt.TileSize + 1 // tile rows holding positions 0..cur
		rowsT := (nvalid + tt.TileSize - 1) / tt.TileSize
		// Entries for every virtual block the chunked reader touches.
		nvb := (rowsT + uint64(bst) - 1) / uint64(bst)
		phys := s.u32x(int(nvb))
		for vb := uint64(0); vb < nvb; vb++ {
			e, err := l.entry(d, s, entries, b, core, uint32(vb), vb*uint64(bst) < used)
			if err != nil {
				return err
			}
			phys[vb] = e
		}
		n := int(cur) + 1
		kb := s.buf(2, int(used)*tt.TileSize*dh)
		vbuf := s.buf(3, int(used)*tt.TileSize*dh)
		probs := s.floats(n)
		pg := s.pageBuf(int(p.cacheTile))
		// Stale L1: the reader streams K and V tiles through the rings c_1
		// and c_2 (one k chunk, double-buffered); what they hold after
		// the program is the last tiles streamed.
		stale := d.opt.L1 == L1Stale
		kvIdx := uint64(0)
		leave := func(t []byte, i int) error {
			if !stale {
				return nil
			}
			c := p.cbs[1+i]
			ring := c.size / uint64(len(t))
			return d.l1IO(opSDPA, core, c.addr+(kvIdx%ring)*uint64(len(t)), t, true)
		}
		for h := 0; h < p.kvh; h++ {
			for row := uint64(0); row < rowsT; row++ {
				st := uint32(row)
				ph := phys[st/bst]
				for c := uint32(0); c < dht; c++ {
					id := ph*uint32(p.kvh)*bst*dht + uint32(h)*bst*dht + (st%bst)*dht + c
					addr := uint32(l.k.addr) + (id/nb)*p.cacheTileAligned
					vaddr := uint32(l.v.addr) + (id/nb)*p.cacheTileAligned
					if row >= used {
						// The card fetches the masked tile rows of the
						// last chunk too (-inf masks them after QK^T):
						// an address out of the bank faults.
						if d.opt.Strict {
							l.checkMaskedTile(d, b, core, id, addr, vaddr)
						}
						for i, a := range [2]uint32{addr, vaddr} {
							t, err := x.tileAt(l.k, core, id, uint64(a), pg)
							if err != nil {
								return err
							}
							if err := leave(t, i); err != nil {
								return err
							}
						}
						kvIdx++
						continue
					}
					for i, cache := range [2]*buffer{l.k, l.v} {
						a := addr
						into := kb
						if i == 1 {
							a, into = vaddr, vbuf
						}
						t, err := x.tileAt(cache, core, id, uint64(a), pg)
						if err != nil {
							return err
						}
						// Attend reads positions 0..cur only: of the last
						// tile row, the rows up to cur.
						untilizeTileRows(into[int(row)*tt.TileSize*dh+int(c)*tt.TileSize:], dh, bf16.FromBytes(t), min(tt.TileSize, n-int(row)*tt.TileSize))
						if err := leave(t, i); err != nil {
							return err
						}
					}
					kvIdx++
				}
			}
			for g := 0; g < group; g++ {
				qh := h*group + g
				qr := gq.prow(b*gq.h+qh) * gq.wp
				or := gout.prow(b*gout.h+qh) * gout.wp
				ref.Attend(dst[or:or+dh], qv[qr:qr+dh], kb, vbuf, n, p.scale, probs)
			}
		}
	}
	if active == 0 {
		return nil
	}
	// Write only the pages of users that ran.
	return x.writePadded(s, l.out, dst, func(pg int) bool {
		var row int
		if l.out.spec.Layout == tt.Tile {
			row = (pg / (gout.wp / tt.TileSize)) * tt.TileSize
		} else {
			row = pg
		}
		u := row / gout.hp
		return u < batch && pos[u] != 0xFFFFFFFF
	})
}

// fillQCB copies user b's Q tile row (its pages of Q) into the Q CB of its
// core, as the reader does before it reads the page table.
func (l *sdpaLaunch) fillQCB(d *Device, x *opIO, s *scratch, b, core int) error {
	q := l.q
	if q.spec.Layout != tt.Tile {
		return nil
	}
	wt := q.spec.Width() / tt.TileSize
	pg := s.pageBuf(int(q.pageSize))
	tb := l.p.qCBSize / uint64(wt) // a full tile, or the half tile (rows 0..15: faces 0 and 1)
	for c := 0; c < wt; c++ {
		at := l.p.qCB + uint64(c)*tb
		if err := x.pageIO(q, b*wt+c, pg, false); err != nil {
			return err
		}
		if err := d.l1IO(opSDPA, core, at, pg[:tb], true); err != nil {
			return err
		}
	}
	return nil
}

// pageTableRow is the reader's page-table step: page b of the page table,
// aligned_page_size bytes (the row plus the DRAM padding of its slot), read
// into the page-table CB on the user's core. It returns the bytes read.
func (l *sdpaLaunch) pageTableRow(d *Device, x *opIO, s *scratch, b, core int) ([]byte, error) {
	p := l.p
	nb := uint32(d.arch.nbanks)
	if cap(s.ptRow) < int(p.ptAligned) {
		s.ptRow = make([]byte, p.ptAligned)
	}
	row := s.ptRow[:p.ptAligned]
	addr := uint32(l.pt.addr) + (uint32(b)/nb)*uint32(p.ptAligned)
	if err := d.dramIO(opSDPA, core, int(uint32(b)%nb), uint64(addr), row, false); err != nil {
		return nil, err
	}
	if d.opt.Strict && !x.reported {
		m, o := d.dramAt(int(uint32(b)%nb), uint64(addr))
		if at, bad := m.unwritten(o, l.pt.pageSize); bad {
			x.reported = true
			d.find(Finding{Class: ReadUnwritten, Op: opSDPA, Core: core, User: b, Index: int64(at-o) / 4, Tensor: l.pt.id, Addr: uint64(addr) + (at - o),
				Detail: fmt.Sprintf("page_table[%d] read from DRAM bytes never written (poison)", b)})
		}
	}
	if err := d.l1IO(opSDPA, core, p.ptCB, row, true); err != nil {
		return nil, err
	}
	return row, nil
}

// entry is page_table_ptr[vb]: from the CB when it lies inside the page
// read, else a plain L1 load past the CB. used says whether the block holds
// positions <= cur_pos (its tiles are read) or only masked ones.
func (l *sdpaLaunch) entry(d *Device, s *scratch, row []byte, b, core int, vb uint32, used bool) (uint32, error) {
	p := l.p
	ea := uint64(uint32(p.ptCB) + 4*vb)
	var e uint32
	if uint64(vb)*4+4 <= uint64(len(row)) {
		e = binary.LittleEndian.Uint32(row[4*vb:])
	} else {
		var w [4]byte
		if err := d.l1IO(opSDPA, core, ea, w[:], false); err != nil {
			if used {
				return 0, err
			}
			e = 0xFFFFFFFF
		} else {
			e = binary.LittleEndian.Uint32(w[:])
		}
	}
	if !d.opt.Strict {
		return e, nil
	}
	mask := ""
	if !used {
		mask = " (a masked block of the last k-chunk, fetched but not attended)"
	}
	if vb >= p.ptWidth {
		class := PTReadPastRow
		where := "the DRAM padding of the row's page slot"
		if uint64(vb)*4+4 > uint64(len(row)) {
			class = PTReadPastCB
			where = fmt.Sprintf("L1 %#x, past the %d B page-table CB at %#x (stale L1)", ea, p.ptCBSize, p.ptCB)
		}
		d.find(Finding{Class: class, Op: opSDPA, Core: core, User: b, Index: int64(vb), Tensor: l.pt.id, Addr: ea,
			Detail: fmt.Sprintf("page_table[%d][%d] read but the row has %d entries; the value %#x came from %s%s", b, vb, p.ptWidth, e, where, mask)})
		return e, nil
	}
	switch {
	case e == 0xFFFFFFFF:
		d.find(Finding{Class: MinusOneNotSkipped, Op: opSDPA, Core: core, User: b, Index: int64(vb), Tensor: l.pt.id, Addr: ea,
			Detail: fmt.Sprintf("page_table[%d][%d] = -1 is used as block id 0xffffffff (SDPA decode does not skip -1 entries)%s", b, vb, mask)})
	case e >= p.blocks:
		d.find(Finding{Class: PTEntryOutsideCache, Op: opSDPA, Core: core, User: b, Index: int64(vb), Tensor: l.pt.id, Addr: ea,
			Detail: fmt.Sprintf("page_table[%d][%d] = %d is not a block of the cache t%d (%d blocks)%s", b, vb, e, l.k.id, p.blocks, mask)})
	}
	return e, nil
}

// checkMaskedTile reports (strict) a masked tile fetch whose address lies
// outside the DRAM bank: the card fetches it even though it is masked.
func (l *sdpaLaunch) checkMaskedTile(d *Device, b, core int, id, kaddr, vaddr uint32) {
	bank := int(id % uint32(d.arch.nbanks))
	for _, a := range []uint32{kaddr, vaddr} {
		m, o := d.dramAt(bank, uint64(a))
		if !m.in(o, uint64(l.p.cacheTile)) || uint64(a)+uint64(l.p.cacheTile) > d.opt.DRAMBankSize {
			d.find(Finding{Class: PTEntryOutsideCache, Op: opSDPA, Core: core, User: b, Index: int64(id), Tensor: l.k.id, Addr: uint64(a),
				Detail: fmt.Sprintf("masked K/V tile %d maps to DRAM bank %d address %#x, outside the bank", id, bank, a)})
			return
		}
	}
}

// tileAt reads one cache tile by id at a kernel-computed address (bank id %
// nbanks); it faults outside the bank. Strict: a tile never written is a
// Finding (once per launch). The tile's bytes are returned in place where
// they lie in one chunk (read only), else read into pg.
func (x *opIO) tileAt(cache *buffer, core int, id uint32, addr uint64, pg []byte) ([]byte, error) {
	d := x.d
	bank := int(id % uint32(d.arch.nbanks))
	n := uint64(len(pg))
	m, o := d.dramAt(bank, addr)
	if addr+n > d.opt.DRAMBankSize || !m.in(o, n) {
		return nil, &Fault{Op: x.op, Core: core, Space: "DRAM bank " + itoa(bank), Addr: addr, Len: len(pg)}
	}
	t, ok := m.view(o, n)
	if !ok {
		m.read(o, pg)
		t = pg
	}
	if d.opt.Strict && !x.reported {
		if at, bad := m.unwritten(o, n); bad {
			x.reported = true
			d.find(Finding{Class: ReadUnwritten, Op: x.op, Core: core, User: -1, Index: int64(id), Tensor: cache.id, Addr: addr + (at - o),
				Detail: fmt.Sprintf("cache tile %d (DRAM bank %d) was never written (poison)", id, bank)})
		}
	}
	return t, nil
}
