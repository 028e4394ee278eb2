package sim

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// The serving ops: chunked_scaled_dot_product_attention (a prompt chunk
// over the paged caches), fill_cache (a block copy's write) and slice (a
// block copy's read). Paths and lines are tt-metal 622c6fb9's.

// ChunkStartTruncated is the strict finding of a chunk start that is not a
// multiple of the q chunk: the card computes the chunk as if it started at
// the multiple below (the factory's chunk_start_idx / q_chunk_size for the
// integer form, sdpa_program_factory.cpp:133; the reader's for the tensor
// form, kernels/dataflow/reader_interleaved.cpp:259-260).
const ChunkStartTruncated FindingClass = "chunk-start-truncated"

// ChunkKeysCut is the strict finding of a chunk whose queries lie past the
// key rows the program streams (valid_Skt_bound, reader_interleaved.cpp:
// 274-282, from the width compiled into a tensor-form program): the card's
// causal mask then ends at the last streamed row.
const ChunkKeysCut FindingClass = "chunk-keys-cut"

// ---- chunked_scaled_dot_product_attention ----

// chunkedProgram is the compiled chunked SDPA program: what the factory
// fixes at a miss. For the tensor form the program hash leaves out the
// page table (sdpa_device_operation.cpp:399), so a later call with a table
// of another width reuses the width compiled here (max_blocks_per_seq, the
// page-table stick size and Sk, sdpa_program_factory.cpp:208-217,
// 138-141): the card's behaviour, modelled.
type chunkedProgram struct {
	end   uint64
	w     int       // page-table width at the miss (padded_shape()[1])
	stick uint64    // page-table bytes the reader copies into L1
	ptCB  uint64    // the page-table CB's L1 address (sdpaProgramCBs)
	csCB  [2]uint64 // the tensor form's chunk-start CBs' addresses
}

func (p *chunkedProgram) cbEnd() uint64 { return p.end }

type chunkedLaunch struct {
	p                 *chunkedProgram
	q, k, v, pt, out  *buffer
	cs                *buffer // the tensor form's chunk start; nil: the integer form
	start             int64
	qChunk, kChunk    int
	scale             float32
	name              string
	ptCB              uint64 // the page-table CB's L1 address on core 0
	ptWidth, nblocks  uint32 // the live table's width, the cache's blocks
	kvh, bs, dh, nqh  int
	sq                int
	cacheTileAligned  uint32
	cacheTile         int
	outG, qG          geom
	cacheID, cacheVID tt.TensorID
}

// chunkedSDPA is ttnn.transformer.chunked_scaled_dot_product_attention
// (transformer/sdpa/sdpa.cpp:93-163: both overloads call prim::sdpa with is_causal true, the
// page table, and either the integer chunk_start_idx or the device tensor).
// Q BF16 TILE [1,H,Sq,D]; K, V the paged caches [blocks, kv_heads,
// block_size, D]; the page table [1, W] INT32 ROW_MAJOR (batch 1: the
// caller slices the user's row, as models/tt_transformers/tt/generator.py
// does). The chunk's query row i sits at position base+i, base =
// (start / q_chunk) * q_chunk (q_chunk 32 without a program config,
// sdpa_program_factory.cpp:178-181), and attends key rows 0..base+i read
// through the page table, tile row t from block page_table[0][t /
// (block_size/32)]. The reader copies the table's stick (the aligned page
// for the integer form, W*4 bytes for the tensor form,
// sdpa_program_factory.cpp:138-146) into an L1 CB and indexes it with no
// bound check: an index past the stick reads the L1 bytes after it (stale).
// Numerics are the reference's (ref.Attend per row, as scaled_dot_product_
// attention here), so a chunk's rows equal token-by-token decode's.
func (d *Device) chunkedSDPA(o tt.ChunkedSDPA, output tt.Tensor) error {
	name := o.Name()
	bs, err := d.operands(name, &o.Q, &o.K, &o.V, &o.PageTable, o.ChunkStartTensor, &output)
	if err != nil {
		return err
	}
	q, k, v, pt, cs, out := bs[0], bs[1], bs[2], bs[3], bs[4], bs[5]
	flex := cs != nil
	validate := func() error { return validateChunked(name, o, q, k, v, pt, cs) }
	qc, kc := o.QChunkSize, o.KChunkSize
	if qc == 0 && kc == 0 {
		qc, kc = tt.TileSize, tt.TileSize
	}
	attrs := attrKey{uint64(math.Float32bits(o.Scale))<<32 | uint64(uint16(qc))<<16 | uint64(uint16(kc)),
		b2u(o.ExactExp) | b2u(o.FP32DestAcc)<<1 | b2u(flex)<<2 | b2u(o.QChunkSize != 0 || o.KChunkSize != 0)<<3}
	var key []byte
	if flex {
		// compute_program_hash (sdpa_device_operation.cpp:399-400): the
		// tensor form hashes neither the page table nor the start.
		key = d.opKey(name, attrs, q, k, v, nil, out)
	} else {
		attrs[1] |= uint64(o.ChunkStart) << 4
		key = d.opKey(name, attrs, q, k, v, pt, out)
	}
	prog, err := d.lookup(name, key, validate, func() (program, error) {
		w := pt.spec.PaddedDim(1)
		p := &chunkedProgram{w: w, stick: pt.aligned}
		if flex {
			p.stick = uint64(4 * w)
			// sdpa_program_factory.cpp:141 (compute_chunked_params).
			if p.stick%32 != 0 {
				return nil, opErr(name, "page table stick size must be a multiple of 32")
			}
		}
		qs := q.spec.Shape
		specs, at := d.sdpaProgramCBs(sdpaShape{b: qs[0], nqh: qs[1], sq: qs[2], dh: qs[3], qChunk: qc, kChunk: kc,
			causal: true, fp32: o.FP32DestAcc, chunked: true, flexible: flex, stick: p.stick})
		cbs, end := d.placeCBs(specs)
		p.end, p.ptCB = end, cbs[at].addr
		if flex {
			p.csCB = [2]uint64{cbs[at+1].addr, cbs[at+2].addr}
		}
		return p, nil
	})
	if err != nil {
		return err
	}
	cp := prog.(*chunkedProgram)
	l := &chunkedLaunch{p: cp, q: snapshot(q), k: snapshot(k), v: snapshot(v), pt: snapshot(pt), out: snapshot(out),
		start: o.ChunkStart, qChunk: qc, kChunk: kc, scale: o.Scale, name: name,
		ptCB: cp.ptCB, ptWidth: uint32(pt.spec.Shape[1]),
		nblocks: uint32(k.spec.Shape[0]), kvh: k.spec.Shape[1], bs: k.spec.Shape[2], dh: q.spec.Shape[3], nqh: q.spec.Shape[1],
		sq: q.spec.Shape[2], cacheTileAligned: uint32(k.aligned), cacheTile: int(k.pageSize), outG: out.g, qG: q.g,
		cacheID: k.id, cacheVID: v.id}
	if flex {
		l.cs = snapshot(cs)
	}
	if l.scale == 0 {
		l.scale = ref.AttnScale(l.dh)
	}
	return d.enqueue(name, cp, l)
}

// validateChunked is SDPAOperation::validate_on_program_cache_miss
// (sdpa_device_operation.cpp:18-375) in chunked mode, in its order.
func validateChunked(name string, o tt.ChunkedSDPA, q, k, v, pt, cs *buffer) error {
	for _, b := range []*buffer{q, k, v} {
		s := b.spec
		if s.Layout != tt.Tile {
			return opErr(name, "Inputs to SDPA must be tilized")
		}
		if s.DType != tt.BF16 {
			return opErr(name, "Data type of input tensor must be BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is %v", s.DType)
		}
		if s.Memory.Sharded() {
			return opErr(name, "Operands to SDPA need to be DRAM/L1 interleaved")
		}
		if len(s.Shape) != 4 {
			return contractErr(name, "Q, K and V must be rank 4, got shape %v", s.Shape)
		}
	}
	if cs == nil && o.ChunkStart < 0 {
		return opErr(name, "chunk_start_idx must be non-negative")
	}
	if cs != nil {
		if cs.spec.DType != tt.INT32 {
			return opErr(name, "chunk_start_idx tensor must be int32. Got %v", cs.spec.DType)
		}
		if sh := cs.spec.Shape; len(sh) != 1 || sh[0] != 1 {
			return opErr(name, "chunk_start_idx tensor must have shape [1]. Got %s", ttShape(sh))
		}
	}
	ps := pt.spec
	if ps.Layout != tt.RowMajor {
		return opErr(name, "Page table must be row major")
	}
	if ps.DType != tt.INT32 {
		return opErr(name, "Page table must be int32")
	}
	if len(ps.Shape) != 2 {
		return contractErr(name, "Page table must be rank 2 [batch, max_blocks], got shape %v", ps.Shape)
	}
	qs, ks, vs := q.spec.Shape, k.spec.Shape, v.spec.Shape
	B, nqh, nkv, dh := qs[0], qs[1], ks[1], qs[3]
	if ks[2] != vs[2] {
		return opErr(name, "K page size must match V page size. Got K: %d, V: %d", ks[2], vs[2])
	}
	if ps.Shape[0] != B {
		return opErr(name, "Page table batch size must match input batch size. Got Page table: %d, Input: %d", ps.Shape[0], B)
	}
	kvLen := ps.Shape[1] * ks[2]
	if vs[1] != nkv {
		return opErr(name, "K and V num_heads must match. Got K: %d, V: %d", ks[1], vs[1])
	}
	if ks[3] != dh || vs[3] != dh {
		return opErr(name, "K and V hidden dim must match. Got K: %d, V: %d", ks[3], vs[3])
	}
	if nqh < nkv || nqh%nkv != 0 {
		return opErr(name, "Q num_heads must be >= K num_heads and divisible by K num_heads. Got Q: %d, K: %d", nqh, nkv)
	}
	if o.QChunkSize != 0 || o.KChunkSize != 0 { // a program config
		if o.QChunkSize%tt.TileSize != 0 {
			return opErr(name, "q_chunk_size must be divisible by TILE_SIZE. Got q_chunk_size: %d, TILE_SIZE: %d", o.QChunkSize, tt.TileSize)
		}
		if o.KChunkSize%tt.TileSize != 0 {
			return opErr(name, "k_chunk_size must be divisible by TILE_SIZE. Got k_chunk_size: %d, TILE_SIZE: %d", o.KChunkSize, tt.TileSize)
		}
		if o.QChunkSize <= 0 || o.KChunkSize <= 0 {
			return notImplemented(name, "a program config with chunk sizes %d and %d (the factory divides by them)", o.QChunkSize, o.KChunkSize)
		}
		if cs == nil {
			if o.ChunkStart%int64(o.QChunkSize) != 0 {
				return opErr(name, "chunk_start_idx must be a multiple of q_chunk_size. Got chunk_start_idx: %d, q_chunk_size: %d", o.ChunkStart, o.QChunkSize)
			}
			if o.ChunkStart%int64(o.KChunkSize) != 0 {
				return opErr(name, "chunk_start_idx must be a multiple of k_chunk_size. Got chunk_start_idx: %d, k_chunk_size: %d", o.ChunkStart, o.KChunkSize)
			}
		}
	} else if o.ExactExp {
		return contractErr(name, "exp_approx_mode needs a program config: set q_chunk_size and k_chunk_size")
	}
	if cs == nil {
		if int64(kvLen) < int64(qs[2])+o.ChunkStart {
			return opErr(name, "K's sequence length must be >= Q's sequence length + chunk_start_idx. Got K: %d, Q: %d, chunk_start_idx: %d", kvLen, qs[2], o.ChunkStart)
		}
	} else if kvLen < qs[2] {
		return opErr(name, "K's sequence length must be >= Q's sequence length. Got K: %d, Q: %d", kvLen, qs[2])
	}
	for _, b := range []*buffer{q, k, v} {
		if b.spec.Shape[3]%tt.TileSize != 0 {
			return opErr(name, "Padding is not supported on the head_dim dimension")
		}
	}
	// What the simulator models beyond ttnn's checks.
	if B != 1 {
		return notImplemented(name, "a batch of %d (the contract's chunked prefill is one user)", B)
	}
	if ks[2]%tt.TileSize != 0 {
		return contractErr(name, "block size %d must be a multiple of 32", ks[2])
	}
	if ps.Memory.Layout != tt.Interleaved || ps.Memory.Buffer != tt.DRAM {
		return notImplemented(name, "a page table outside DRAM interleaved")
	}
	return nil
}

// maxChunkedPositions bounds the positions the simulator streams (a garbage
// tensor start would make the card read for billions).
const maxChunkedPositions = 1 << 20

func (l *chunkedLaunch) exec(d *Device) error {
	x := &opIO{d: d, op: l.name}
	s := getScratch()
	defer putScratch(s)
	start := uint32(l.start)
	if l.cs != nil {
		// reader_interleaved.cpp:241-248: page 0 of the tensor, 4 bytes.
		x.checkReads = true
		w := s.u32(1)
		if err := x.readWords(s, l.cs, 0, w); err != nil {
			return err
		}
		x.checkReads = false
		start = w[0]
		// Into both chunk-start CBs (:241-256), which follow the page
		// table's: a read just past the stick sees the start.
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], start)
		for _, a := range l.p.csCB {
			if err := d.l1IO(l.name, 0, a, b[:], true); err != nil {
				return err
			}
		}
	}
	qc, kc := uint32(l.qChunk), uint32(l.kChunk)
	offset := start / qc
	base := offset * qc
	if d.opt.Strict && start != base {
		d.find(Finding{Class: ChunkStartTruncated, Op: l.name, Core: -1, User: 0, Index: int64(start), Tensor: l.q.id,
			Detail: fmt.Sprintf("chunk_start_idx %d is not a multiple of the q chunk %d: the kernels place the chunk's queries at positions %d.. (chunk offset %d), not %d..", start, qc, base, offset, start)})
	}
	sq := uint32(l.sq)
	if uint64(base)+uint64(sq) > maxChunkedPositions {
		return fmt.Errorf("sim: %s: chunk start %d (%#x): the card would stream K/V tiles for %d positions, the simulator stops at %d", l.name, int32(start), start, uint64(base)+uint64(sq), maxChunkedPositions)
	}
	// sdpa_program_factory.cpp:208-250 and reader_interleaved.cpp:274-401:
	// the tile rows of K/V the last q chunk streams.
	bsz := uint32(l.bs)
	sqChunkT, skChunkT := qc/tt.TileSize, kc/tt.TileSize
	var sk uint32
	if l.cs != nil {
		sk = sq + uint32(l.p.w)*bsz
	} else {
		sk = uint32(l.start) + sq
	}
	ceil := func(a, b uint32) uint32 { return (a + b - 1) / b }
	validSqt, validSkt := ceil(sq, tt.TileSize), ceil(sk, tt.TileSize)
	skt := ceil(sk, kc) * skChunkT
	var bound uint32
	if l.cs != nil {
		bound = min(offset*sqChunkT+validSqt, validSkt)
	} else {
		bound = validSkt + offset*sqChunkT
	}
	lastQ := offset + ceil(sq, qc) - 1
	qHigh := min(lastQ*sqChunkT+sqChunkT, skt)
	tiles := min(ceil(qHigh, skChunkT)*skChunkT, bound)
	if d.opt.Strict && base+sq > tiles*tt.TileSize {
		d.find(Finding{Class: ChunkKeysCut, Op: l.name, Core: -1, User: 0, Index: int64(base + sq - 1), Tensor: l.pt.id,
			Detail: fmt.Sprintf("the chunk's last query sits at position %d but the program streams key rows 0..%d only (Sk from a %d-block table compiled into the program): the later queries attend a cut prefix", base+sq-1, tiles*tt.TileSize-1, l.p.w)})
	}
	// The page-table stick into its CB on core 0 (reader_interleaved.cpp:
	// 305-312, read_page_table_for_batch).
	row := s.bytesN(0, int(l.p.stick))
	if err := d.dramIO(l.name, 0, 0, l.pt.addr, row, false); err != nil {
		return err
	}
	if d.opt.Strict {
		m, o := d.dramAt(0, l.pt.addr)
		if at, bad := m.unwritten(o, l.pt.pageSize); bad {
			d.find(Finding{Class: ReadUnwritten, Op: l.name, Core: 0, User: 0, Index: int64(at-o) / 4, Tensor: l.pt.id, Addr: l.pt.addr + (at - o),
				Detail: "page_table[0] read from DRAM bytes never written (poison)"})
		}
	}
	if err := d.l1IO(l.name, 0, l.ptCB, row, true); err != nil {
		return err
	}
	bst := bsz / tt.TileSize
	nvb := ceil(tiles, bst)
	phys := s.u32x(int(nvb))
	for vb := uint32(0); vb < nvb; vb++ {
		var e uint32
		if uint64(vb)*4+4 <= uint64(len(row)) {
			e = binary.LittleEndian.Uint32(row[4*vb:])
		} else {
			var w [4]byte
			if err := d.l1IO(l.name, 0, l.ptCB+4*uint64(vb), w[:], false); err != nil {
				return err
			}
			e = binary.LittleEndian.Uint32(w[:])
		}
		phys[vb] = e
		if !d.opt.Strict {
			continue
		}
		ea := l.ptCB + 4*uint64(vb)
		switch pastCB := uint64(vb)*4+4 > uint64(len(row)); {
		case pastCB || vb >= l.ptWidth:
			class, where := PTReadPastRow, "the page's DRAM padding"
			if pastCB {
				class, where = PTReadPastCB, fmt.Sprintf("L1 %#x, past the %d B page-table CB at %#x (stale L1)", ea, len(row), l.ptCB)
			}
			d.find(Finding{Class: class, Op: l.name, Core: 0, User: 0, Index: int64(vb), Tensor: l.pt.id, Addr: ea,
				Detail: fmt.Sprintf("page_table[0][%d] read for key rows up to %d; the row has %d entries and the program's stick %d; the value %#x came from %s", vb, base+sq-1, l.ptWidth, len(row)/4, e, where)})
		case e == 0xFFFFFFFF:
			d.find(Finding{Class: MinusOneNotSkipped, Op: l.name, Core: 0, User: 0, Index: int64(vb), Tensor: l.pt.id, Addr: ea,
				Detail: fmt.Sprintf("page_table[0][%d] = -1 is used as block id 0xffffffff (chunked SDPA does not skip -1 entries)", vb)})
		case e >= l.nblocks:
			d.find(Finding{Class: PTEntryOutsideCache, Op: l.name, Core: 0, User: 0, Index: int64(vb), Tensor: l.pt.id, Addr: ea,
				Detail: fmt.Sprintf("page_table[0][%d] = %d is not a block of the cache t%d (%d blocks)", vb, e, l.cacheID, l.nblocks)})
		}
	}
	// K and V rows 0..tiles*32-1 of every kv head, then each valid query
	// row attends its causal prefix.
	dh := l.dh
	dht := uint32(dh / tt.TileSize)
	nb := uint32(d.arch.nbanks)
	kvh := uint32(l.kvh)
	n := int(tiles) * tt.TileSize
	qv := s.buf(0, l.qG.size())
	if err := x.readPadded(s, l.q, qv); err != nil {
		return err
	}
	dst := s.buf(1, l.outG.size())
	clear(dst)
	kb, vbuf := s.buf(2, n*dh), s.buf(3, n*dh)
	pg := s.pageBuf(l.cacheTile)
	probs := s.floats(int(base + sq))
	group := l.nqh / l.kvh
	x.checkReads = true
	for h := uint32(0); h < kvh; h++ {
		for t := uint32(0); t < tiles; t++ {
			ph := phys[t/bst]
			for c := uint32(0); c < dht; c++ {
				id := ph*kvh*bst*dht + h*bst*dht + (t%bst)*dht + c
				for i, cache := range [2]*buffer{l.k, l.v} {
					addr := uint32(cache.addr) + (id/nb)*l.cacheTileAligned
					tl, err := x.tileAt(cache, 0, id, uint64(addr), pg)
					if err != nil {
						return err
					}
					into := kb
					if i == 1 {
						into = vbuf
					}
					untilizeTileRows(into[int(t)*tt.TileSize*dh+int(c)*tt.TileSize:], dh, bf16.FromBytes(tl), tt.TileSize)
				}
			}
		}
		for g := 0; g < group; g++ {
			qh := int(h)*group + g
			for i := 0; i < l.sq; i++ {
				qr := l.qG.prow(qh*l.sq+i) * l.qG.wp
				or := l.outG.prow(qh*l.sq+i) * l.outG.wp
				ref.Attend(dst[or:or+dh], qv[qr:qr+dh], kb, vbuf, min(int(base)+i+1, n), l.scale, probs)
			}
		}
	}
	x.checkReads = false
	return x.writePadded(s, l.out, dst, nil)
}

// ---- fill_cache ----

// fillCacheOp is ttnn.fill_cache (kv_cache.cpp:42-49: prim::update_cache
// with op_type FILL): Input [1, heads, S, D] TILE written over rows
// UpdateIdx..UpdateIdx+S-1 of batch BatchIdx of Cache [B, heads, Smax, D],
// whole tiles: input tile (h, t, w) to cache tile BatchIdx*heads*Ht*Wt +
// h*Ht*Wt + (UpdateIdx/32 + t)*Wt + w (kv_cache/device/
// fill_cache_multi_core_program_factory.cpp:40-45, 170-172). BatchIdx and UpdateIdx are runtime
// arguments (the hash holds the op type and the two tensors,
// update_cache_device_operation.cpp:160-164).
func (d *Device) fillCacheOp(o tt.FillCache) error {
	name := o.Name()
	bs, err := d.operands(name, &o.Cache, &o.Input)
	if err != nil {
		return err
	}
	cache, in := bs[0], bs[1]
	validate := func() error { return validateFill(name, o, cache, in) }
	key := d.opKey(name, attrKey{}, cache, in)
	p, err := d.lookup(name, key, validate, func() (program, error) {
		return d.fillCacheProgram(in), nil
	})
	if err != nil {
		return err
	}
	return d.enqueue(name, p, &fillTilesLaunch{name: name, cache: snapshot(cache), in: snapshot(in), batch: uint32(o.BatchIdx), upd: uint32(o.UpdateIdx)})
}

// validateFill is UpdateKVCacheOperation::validate_on_program_cache_miss
// (update_cache_device_operation.cpp:20-106), the FILL path, in its order.
func validateFill(name string, o tt.FillCache, cache, in *buffer) error {
	is, cs := in.spec, cache.spec
	if len(is.Shape) != 4 || len(cs.Shape) != 4 {
		return contractErr(name, "Input and cache tensors must be rank 4")
	}
	if o.BatchIdx < 0 || o.UpdateIdx < 0 {
		return contractErr(name, "batch_idx (%d) and update_idx (%d) are unsigned", o.BatchIdx, o.UpdateIdx)
	}
	if is.Layout != tt.Tile || cs.Layout != tt.Tile {
		return opErr(name, "Inputs to update_cache must be tilized")
	}
	if is.DType != tt.FP32 && is.DType != tt.BF16 {
		return opErr(name, "Input tensor dtype must be FLOAT32, BFLOAT16, or BFLOAT8_B but got %v", is.DType)
	}
	if cs.DType != tt.FP32 && cs.DType != tt.BF16 {
		return opErr(name, "Cache tensor dtype must be FLOAT32, BFLOAT16, or BFLOAT8_B but got %v", cs.DType)
	}
	ip, cp := is.PaddedShape(), cs.PaddedShape()
	if ip[3] != cp[3] {
		return opErr(name, "Input tensor width (%d) must equal cache tensor width (%d)", ip[3], cp[3])
	}
	if ip[0] != 1 {
		return opErr(name, "Input tensor batch size must be 1 but got %d", ip[0])
	}
	if ip[1] != cp[1] {
		return opErr(name, "Input tensor height (%d) must equal cache tensor height (%d)", ip[1], cp[1])
	}
	if cs.Memory.Layout != tt.Interleaved {
		return opErr(name, "Cache tensor memory layout must be INTERLEAVED, ND_SHARDED, or HEIGHT_SHARDED (created from ND shard spec) but got %v", cs.Memory.Layout)
	}
	if is.DType != cs.DType {
		return opErr(name, "Input and cache tensors must have same dtype!")
	}
	if is.Memory.Sharded() {
		if is.Memory.Layout == tt.WidthSharded {
			return opErr(name, "Input tensor memory layout must not be WIDTH_SHARDED but got %v", is.Memory.Layout)
		}
		if sw := is.Memory.Shard.Shape[1]; sw != ip[3] {
			return opErr(name, "Input tensor shard width (%d) must equal padded width (%d)", sw, ip[3])
		}
		if ip[2]%is.Memory.Shard.Shape[0] != 0 {
			return opErr(name, "Seq len must be divisible by shard height!")
		}
	}
	if o.BatchIdx >= cp[0] {
		return opErr(name, "Batch index (%d) must be less than cache tensor batch size (%d)", o.BatchIdx, cp[0])
	}
	if o.UpdateIdx%tt.TileSize != 0 {
		return opErr(name, "Fill update_idx (%d) must be a multiple of TILE_HEIGHT (%d)", o.UpdateIdx, tt.TileSize)
	}
	if o.UpdateIdx > cp[2] || ip[2] > cp[2]-o.UpdateIdx {
		return opErr(name, "Fill update_idx (%d) + input tensor height (%d) must be <= cache tensor height (%d)", o.UpdateIdx, ip[2], cp[2])
	}
	if is.Memory.Sharded() {
		return notImplemented(name, "a sharded input")
	}
	return nil
}

type fillTilesLaunch struct {
	name       string
	cache, in  *buffer
	batch, upd uint32
}

func (l *fillTilesLaunch) exec(d *Device) error {
	x := &opIO{d: d, op: l.name}
	s := getScratch()
	defer putScratch(s)
	cp, ip := l.cache.spec.PaddedShape(), l.in.spec.PaddedShape()
	heads, cht, wt := uint32(cp[1]), uint32(cp[2]/tt.TileSize), uint32(cp[3]/tt.TileSize)
	iht := uint32(ip[2] / tt.TileSize)
	first := l.batch*heads*cht*wt + (l.upd/tt.TileSize)*wt
	tile := s.pageBuf(int(l.in.pageSize))
	for h := uint32(0); h < heads; h++ {
		for t := uint32(0); t < iht; t++ {
			for w := uint32(0); w < wt; w++ {
				if err := x.pageIO(l.in, int(h*iht*wt+t*wt+w), tile, false); err != nil {
					return err
				}
				if err := x.pageIO(l.cache, int(first+h*cht*wt+t*wt+w), tile, true); err != nil {
					return err
				}
			}
		}
	}
	if d.opt.LogKV {
		// One record per cache row written (all heads, whole tiles): on a
		// paged cache [blocks, kv_heads, block_size, D] User and Physical
		// are the block (batch_idx) and Row the row inside it.
		for r := uint32(0); r < iht*tt.TileSize; r++ {
			d.kvlog = append(d.kvlog, KVWrite{Op: l.name, CacheAddr: l.cache.addr, Cache: l.cache.id, Trace: d.replaying,
				User: int(l.batch), Core: -1, Pos: l.upd + r, Physical: l.batch, Row: l.upd + r, FirstTile: l.batch * heads * cht * wt})
		}
	}
	return nil
}

// ---- slice ----

// sliceOp is ttnn.slice with unit steps on a TILE tensor whose box begins
// on tile boundaries (the device op's tile path, data_movement/slice/slice.cpp:236-243,
// slice_program_factory_tile.cpp): output tile (outer..., r, c) is input
// tile (outer+begin..., r+begin[-2]/32, c+begin[-1]/32). Other forms (row
// major, unaligned begins, strides, an empty or whole-tensor box) go
// through to_layout, a no-op or ttnn.empty in ttnn and are not modelled.
func (d *Device) sliceOp(o tt.Slice, output tt.Tensor) error {
	name := o.Name()
	bs, err := d.operands(name, &o.Input, &output)
	if err != nil {
		return err
	}
	in, out := bs[0], bs[1]
	key := d.opKey(name, sliceAttrs(o), in, out)
	p, err := d.lookup(name, key, func() error { return validateSliceDevice(name, o, in.spec) }, func() (program, error) {
		return d.sliceCBs(in, out, o.Begin), nil
	})
	if err != nil {
		return err
	}
	return d.enqueue(name, p, &sliceLaunch{name: name, in: snapshot(in), out: snapshot(out), begin: append([]int(nil), o.Begin...)})
}

type sliceLaunch struct {
	name    string
	in, out *buffer
	begin   []int
}

// sliceAttrs packs the box into the program key (the device op hashes its
// attributes).
func sliceAttrs(o tt.Slice) attrKey {
	var a attrKey
	for i := range o.Begin {
		a[0] = a[0]*1000003 + uint64(o.Begin[i])
	}
	for i := range o.End {
		a[1] = a[1]*1000003 + uint64(o.End[i])
	}
	return a
}

// validateSliceWrapper is ttnn::slice's checks (data_movement/slice/slice.cpp:102-109, 180-183,
// 236-243, 336-365), before the device op is launched (wrapperCheck);
// validateSliceDevice is SliceDeviceOperation::validate_on_program_cache_miss
// (data_movement/slice/device/slice_device_operation.cpp:95-174) for what
// reaches the device op.
func validateSliceWrapper(name string, o tt.Slice, in tt.Spec) error {
	rank := len(in.Shape)
	if rank != len(o.Begin) {
		return opErr(name, "Input rank %d and begins %d must have the same size", rank, len(o.Begin))
	}
	if len(o.Begin) != len(o.End) {
		return opErr(name, "Start %d and end %d must have the same size", len(o.Begin), len(o.End))
	}
	whole := true
	for i := range o.Begin {
		if o.Begin[i] < 0 || o.End[i] < 0 {
			return notImplemented(name, "a negative (wrapped) index")
		}
		whole = whole && o.Begin[i] == 0 && o.End[i] == in.Shape[i]
	}
	if whole {
		return notImplemented(name, "a box that is the whole tensor (ttnn returns the input)")
	}
	if in.Layout == tt.Tile && (rank < 2 || o.Begin[rank-1]%tt.TileSize != 0 || o.Begin[rank-2]%tt.TileSize != 0) {
		return notImplemented(name, "a TILE input's row-major detour (begins not on tile boundaries, data_movement/slice/slice.cpp:243)")
	}
	if in.Memory.Sharded() || (o.Memory != (tt.MemoryConfig{}) && o.Memory.Sharded()) {
		return notImplemented(name, "a sharded input or output")
	}
	for i := range o.Begin {
		if o.End[i] < o.Begin[i] {
			return opErr(name, "End %d must be greater than or equal to start %d", o.End[i], o.Begin[i])
		}
	}
	for i := range o.Begin {
		if o.End[i] == o.Begin[i] {
			return notImplemented(name, "an empty box (ttnn.empty)")
		}
	}
	return nil
}

func validateSliceDevice(name string, o tt.Slice, in tt.Spec) error {
	rank := len(in.Shape)
	p := in.PaddedShape()
	for i := range o.Begin {
		end := o.End[i]
		if in.Layout == tt.Tile && i >= rank-2 {
			end = (end + tt.TileSize - 1) / tt.TileSize * tt.TileSize // padded_ends, data_movement/slice/slice.cpp:325-329
		}
		if o.Begin[i] >= p[i] {
			return opErr(name, "Slice start[%d] (%d) must be less than input tensor shape[%d] (%d)", i, o.Begin[i], i, p[i])
		}
		if end > p[i] {
			return opErr(name, "Ends %d must be less than or equal to the shape of the tensor %d", end, p[i])
		}
	}
	if in.DType != tt.BF16 && in.DType != tt.FP32 && in.DType != tt.INT32 && in.DType != tt.UINT32 {
		return notImplemented(name, "dtype %v", in.DType)
	}
	return nil
}

// exec copies the box's tiles (a ROW_MAJOR input: its sticks).
func (l *sliceLaunch) exec(d *Device) error {
	x := &opIO{d: d, op: l.name}
	s := getScratch()
	defer putScratch(s)
	in, out := l.in, l.out
	if in.spec.Layout != tt.Tile {
		return l.execSticks(x, s)
	}
	ip, op := in.spec.PaddedShape(), out.spec.PaddedShape()
	rank := len(ip)
	begin := l.begin
	tilesOf := func(p []int) (outer []int, ht, wt int) {
		return p[:rank-2], p[rank-2] / tt.TileSize, p[rank-1] / tt.TileSize
	}
	iOuter, iht, iwt := tilesOf(ip)
	oOuter, oht, owt := tilesOf(op)
	nOuter := 1
	for _, v := range oOuter {
		nOuter *= v
	}
	pg := s.pageBuf(int(in.pageSize))
	idx := make([]int, len(oOuter))
	for n := 0; n < nOuter; n++ {
		// idx: n in oOuter's mixed radix; the input's outer index adds begin.
		r := n
		for i := len(oOuter) - 1; i >= 0; i-- {
			idx[i] = r % oOuter[i]
			r /= oOuter[i]
		}
		src := 0
		for i := range iOuter {
			src = src*iOuter[i] + idx[i] + begin[i]
		}
		for t := 0; t < oht; t++ {
			for c := 0; c < owt; c++ {
				sp := (src*iht+t+begin[rank-2]/tt.TileSize)*iwt + c + begin[rank-1]/tt.TileSize
				if err := x.pageIO(in, sp, pg, false); err != nil {
					return err
				}
				if err := x.pageIO(out, (n*oht+t)*owt+c, pg, true); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// execSticks is the row-major path (slice_program_factory_rm.cpp, its
// reader slice_reader_unary_unpad_dims_rm_interleaved_start_id.cpp): each
// output stick is the input stick at the box's index, from the box's first
// column on.
func (l *sliceLaunch) execSticks(x *opIO, s *scratch) error {
	in, out := l.in, l.out
	ish, osh := in.spec.Shape, out.spec.Shape
	rank := len(ish)
	e := in.spec.DType.Size()
	w := osh[rank-1] * e
	ipg, opg := s.pageBuf(int(in.pageSize)), make([]byte, out.pageSize)
	n := 1
	for _, v := range osh[:rank-1] {
		n *= v
	}
	for q := 0; q < n; q++ {
		// q in the output's outer radix; the input's stick adds begin.
		r, src, mul := q, 0, 1
		for i := rank - 2; i >= 0; i-- {
			src += (r%osh[i] + l.begin[i]) * mul
			r /= osh[i]
			mul *= ish[i]
		}
		if err := x.pageIO(in, src, ipg, false); err != nil {
			return err
		}
		copy(opg, ipg[l.begin[rank-1]*e:l.begin[rank-1]*e+w])
		if err := x.pageIO(out, q, opg, true); err != nil {
			return err
		}
	}
	return nil
}
