package sim

import (
	"slices"

	"github.com/offcard/offcard/tt"
)

// The static CB regions of the compute ops other than rms_norm (cbleft.go),
// for validate_circular_buffer_region (checkCBRegion). Each op's program
// factory at the pin builds a ProgramDescriptor whose CBs Program(desc)
// adds in vector order (tt_metal/impl/program/program.cpp:315-321); a CB
// with a buffer is globally allocated and takes no place in the region
// (program.cpp:1333-1344). Every CB of these programs sits on the same
// cores, so placeCBs' single chain is the card's placement.

// tileBytes is one tile of dt.
func tileBytes(dt tt.DType) uint64 { return uint64(tt.TileSize * tt.TileSize * dt.Size()) }

// colwiseFirst is the first range of split_work_to_cores(grid, n) with its
// default row_wise = false (tt_metal/api/tt-metalium/work_split.hpp:46-47;
// tt_metal/common/work_split.cpp:337-399, num_cores_to_corerangeset
// :77-143): cores fill column by column.
func (d *Device) colwiseFirst(n int) coreRange {
	gx := d.gridX()
	gy := (d.opt.NumCores + gx - 1) / gx
	switch {
	case n >= gx*gy:
		return coreRange{{}, {gx - 1, gy - 1}}
	case n > gy:
		return coreRange{{}, {n/gy - 1, gy - 1}}
	}
	return coreRange{{}, {0, max(n, 1) - 1}}
}

// wholeGrid is the compute grid as one range, CoreRange({0, 0},
// {grid.x - 1, grid.y - 1}).
func (d *Device) wholeGrid() coreRange {
	gx := d.gridX()
	return coreRange{{}, {min(d.opt.NumCores, gx) - 1, (d.opt.NumCores - 1) / gx}}
}

// UnmodelledCBs names, in first-seen order, the programs built so far whose
// static CBs sim does not lay out (it takes them to have none, so an L1
// buffer reaching down into their CBs passes): today linear with a bias, a
// sharded weight or output, the MatmulMultiCoreProgramConfig, or an input
// sharded other than WIDTH_SHARDED over more than one core.
func (d *Device) UnmodelledCBs() []string { return append([]string(nil), d.unmodelled...) }

func (d *Device) unmodelledCB(what string) {
	if !slices.Contains(d.unmodelled, what) {
		d.unmodelled = append(d.unmodelled, what)
	}
}

// cbRegion is the program whose CBs are specs, in creation order, the
// first on cores.
func (d *Device) cbRegion(specs []cbSpec, cores coreRange) simpleProgram {
	_, end := d.placeCBs(specs)
	return simpleProgram{end: end, cores: cores}
}

// eltwiseCBs: ttnn::add and ttnn::multiply go through binary_ng, in
// ttnn/cpp/ttnn/operations/eltwise/binary_ng/device/, whose one factory
// (eltwise/binary_ng/device/binary_ng_device_operation.hpp:67-74) puts
// every CB on the worker grid, the whole compute grid for these calls
// (eltwise/binary_ng/device/binary_ng_device_operation.cpp:113-196). In
// creation order (binary_ng_program_factory.cpp): c_0 2 tiles of a
// (:559-572); c_3 one tile of a after the LHS activations, only when there
// are some (silu: :574-588); c_1 2 tiles of b (:590-603); c_2 2 tiles of c
// (:650-663). When all three are sharded alike in L1 (native sharding,
// eltwise/binary_ng/device/binary_ng_utils.cpp:757-844) each of c_0, c_1,
// c_2 is the tensor's shard (globally allocated) and c_3 holds
// num_tiles_per_cycle = 2 tiles (SFPU, :530-552).
var binaryNGCBs = [2]func(d *Device, bs []*buffer) simpleProgram{eltwiseCBs(false), eltwiseCBs(true)}

func eltwiseCBs(silu bool) func(d *Device, bs []*buffer) simpleProgram {
	return func(d *Device, bs []*buffer) simpleProgram {
		a, b, c := bs[0], bs[1], bs[2]
		native := a.spec.Memory.Sharded() && d.sameCores(a.spec.Memory) == d.sameCores(b.spec.Memory) && d.sameCores(a.spec.Memory) == d.sameCores(c.spec.Memory)
		t := func(x *buffer) uint64 { return tileBytes(x.spec.DType) }
		specs := []cbSpec{{indices: []int{0}, size: 2 * t(a), global: native}}
		if silu {
			n := uint64(1)
			if native {
				n = 2
			}
			specs = append(specs, cbSpec{indices: []int{3}, size: n * t(a)})
		}
		specs = append(specs, cbSpec{indices: []int{1}, size: 2 * t(b), global: native},
			cbSpec{indices: []int{2}, size: 2 * t(c), global: native})
		return d.cbRegion(specs, d.wholeGrid())
	}
}

// embeddingCBs: the fused factory (embeddings_fused_program_factory.cpp)
// or the row-major one (embeddings_rm_program_factory.cpp), as embedFused
// picks. n_ids is the ids' padded[0]·padded[-1] after the wrapper's
// reshape to [shape[0],1,1,shape[-1]] (embedding.cpp:38-43; fused :55-57).
//   - fused: Wt = the table's width in tiles; tiles_per_chunk Wt and a
//     buffering of 2 (1 above 64 tiles), or chunks of 64 double-buffered
//     past 1 MiB (:101-131); c_0 buffering·tpc tiles (:133-143), c_1 32
//     ids (:145-154), c_2 as c_0 in the output's tiles, the output's
//     buffer when sharded (:156-175). Cores: split_work_to_cores over the
//     n_ids/32 blocks (:63, 73-81), the shard grid for a sharded output.
//   - row-major: al = the ids buffer's alignment (:60), a row of
//     align(2·width, al) in chunks of at most 1 MiB (:99-110), doubled
//     when a core takes more than one id (:121); c_0 that (the output's
//     buffer when sharded, :98-136), c_1 (al/id size)·32 (:138-148).
//     Cores: split_work_to_cores over n_ids blocks (:69-90).
func embeddingCBs(d *Device, bs []*buffer) simpleProgram {
	in, w, out := bs[0], bs[1], bs[2]
	sh := in.spec.Shape
	nIDs := sh[0] * sh[len(sh)-1]
	idSize := uint64(in.spec.DType.Size())
	outSharded := out.spec.Memory.Sharded()
	cores := func(blocks int) coreRange {
		if outSharded {
			return shardRanges(out.spec.Memory.Shard, d.gridX())[0]
		}
		return d.colwiseFirst(blocks)
	}
	if embedFused(in, w, out) {
		wt := uint64(w.spec.Width() / tt.TileSize)
		tpc, buf := wt, uint64(2)
		switch {
		case 2*wt*2048 > 1<<20:
			tpc = 64
		case wt > 64:
			buf = 1
		}
		return d.cbRegion([]cbSpec{
			{indices: []int{0}, size: buf * tpc * tileBytes(tt.BF16)},
			{indices: []int{1}, size: 32 * idSize},
			{indices: []int{2}, size: buf * tpc * tileBytes(out.spec.DType), global: outSharded},
		}, cores(nIDs/tt.TileSize))
	}
	al := d.alignOf(in.spec.Memory.Buffer)
	chunk := alignUp(uint64(w.spec.Width())*2, al)
	if chunk > 1<<20 && !outSharded {
		chunk = 1 << 20
	}
	buf := uint64(1)
	if nIDs > d.opt.NumCores {
		buf = 2
	}
	return d.cbRegion([]cbSpec{
		{indices: []int{0}, size: buf * chunk, global: outSharded},
		{indices: []int{1}, size: al / idSize * 32},
	}, cores(nIDs))
}

// argmaxCBs: a TILE input runs ArgMaxSingleCoreProgramFactory, a
// ROW_MAJOR one ArgMaxMultiCoreProgramFactory (argmax_device_operation.cpp:
// 16-26, 76-82).
//   - single core, on core (0,0) (argmax_single_core_program_factory.cpp:
//     131-134): c_0 one input page (:144-153), c_1 one output page, its
//     padded last dim of uint32 (:155-164).
//   - multi core (argmax_multi_core_program_factory.cpp), keepdim false as
//     tt_transformers calls it (models/common/sampling/tt_sampling.py:
//     487-492), so L = the input's rows: the row of V elements is cut in
//     units of m = al/2 elements (al: the input buffer's alignment,
//     :186-192) spread over the cores column-wise; c_0 the first core
//     group's units (:215-226; the second group's c_0 is smaller and never
//     moves the region's end), c_1 rnd32(4L) (:242-252), c_2 rnd32(4L)·T
//     (:254-265), c_3 rnd32(2L)·T (:267-278), T the cores used. The range
//     is the first group's first.
func argmaxCBs(d *Device, bs []*buffer) simpleProgram {
	in, out := bs[0], bs[1]
	if in.spec.Layout == tt.Tile {
		osh := out.spec.Shape
		return d.cbRegion([]cbSpec{
			{indices: []int{0}, size: tileBytes(in.spec.DType)},
			{indices: []int{1}, size: 4 * uint64(osh[len(osh)-1])},
		}, coreRange{})
	}
	sh := in.spec.Shape
	v := sh[len(sh)-1]
	l := 1
	if len(sh) >= 2 {
		l = sh[len(sh)-2]
	}
	al := d.alignOf(in.spec.Memory.Buffer)
	m := int(al / 2)
	u := (v + m - 1) / m
	n := d.opt.NumCores
	used := min(u, n)
	units0 := u / used * m
	first := used
	if u >= n && u%n != 0 {
		units0 = (u/n + 1) * m
		first = u % n
	}
	rnd32 := func(x int) uint64 { return uint64((x + 31) / 32 * 32) }
	return d.cbRegion([]cbSpec{
		{indices: []int{0}, size: rnd32(2 * units0)},
		{indices: []int{1}, size: rnd32(4 * l)},
		{indices: []int{2}, size: rnd32(4*l) * uint64(used)},
		{indices: []int{3}, size: rnd32(2*l) * uint64(used)},
	}, d.colwiseFirst(first))
}

// plusOneCBs: PlusOneProgramFactory on core (0,0)
// (plusone_program_factory.cpp:28): c_0 one row of the input,
// align(4·W, the buffer's alignment), the input's buffer when sharded
// (:36-66).
func plusOneCBs(d *Device, bs []*buffer) simpleProgram {
	in := bs[0]
	al := d.alignOf(in.spec.Memory.Buffer)
	sh := in.spec.Shape
	return d.cbRegion([]cbSpec{{indices: []int{0}, size: alignUp(4*uint64(sh[len(sh)-1]), al), global: in.spec.Memory.Sharded()}}, coreRange{})
}

// rowwiseFirst is the first range of split_work_to_cores(grid, n,
// row_wise = true): cores fill row by row from (0,0).
func (d *Device) rowwiseFirst(n int) coreRange {
	return shardRanges(tt.ShardSpec{FirstCore: 0, NumCores: max(1, min(n, d.opt.NumCores))}, d.gridX())[0]
}

// fillCacheProgram: ttnn::fill_cache is update_cache in FILL mode
// (ttnn/cpp/ttnn/operations/kv_cache/kv_cache.cpp:42-49), whose
// FillCacheMultiCoreProgramFactory (kv_cache/device/
// update_cache_device_operation.cpp:12-18) makes one CB, c_0, of 2 input
// tiles for an interleaved input (fill_cache_multi_core_program_factory.cpp:
// 82, 96-105), on the cores split_work_to_cores gives the input's
// padded[1]·padded[-2]/32 tile rows row-wise (:38, 72-81).
func (d *Device) fillCacheProgram(in *buffer) simpleProgram {
	return d.cbRegion([]cbSpec{{indices: []int{0}, size: 2 * tileBytes(in.spec.DType)}}, d.rowwiseFirst(in.g.outer*in.g.hp/tt.TileSize))
}

// pagedFillProgram: PagedFillCacheProgramFactory
// (paged_cache/device/fill_cache/paged_fill_cache_device_operation.cpp:
// 17-24; paged_fill_cache_program_factory.cpp): c_0 2·Wt input tiles
// (:151, 157-165), c_1 one aligned page-table page (:101, 166-174), c_2
// the batch-index tensor's 4 bytes when one is given (:117-126, 175-187),
// on the cores split_work_to_cores gives padded[0]·heads·S/32 tile rows
// row-wise (:81-97, 147-150).
func (d *Device) pagedFillProgram(in, pt *buffer, bidx bool) simpleProgram {
	specs := []cbSpec{{indices: []int{0}, size: 2 * uint64(in.g.wp/tt.TileSize) * tileBytes(in.spec.DType)}, {indices: []int{1}, size: pt.aligned}}
	if bidx {
		specs = append(specs, cbSpec{indices: []int{2}, size: 4})
	}
	return d.cbRegion(specs, d.rowwiseFirst(in.g.outer*in.g.hp/tt.TileSize))
}

// rotaryDecodeCBs: the decode factories of rotary_embedding_hf
// (ttnn/cpp/ttnn/operations/experimental/transformer/rotary_embedding_hf/
// device/rotary_embedding_hf_sharded_program_factory.cpp; one tile of
// head_dim :78-169, more :269-361) and rotary_embedding_llama
// (.../rotary_embedding_llama/device/
// rotary_embedding_llama_sharded_program_factory.cpp:78-172). Every CB sits
// on the bounding box of the input's shard grid (hf :61, :250; llama :55).
// Dt = shard width / 32 (1 for hf's single-tile form), n = shard height /
// 32. In creation order: c_0 the input (n·Dt tiles), c_1 cos and c_2 sin
// (Dt·users per core tiles each), bound to their buffers; then static: hf
// with one tile c_3 (the transformation matrix the reader builds) and c_24,
// c_25, c_26 of a tile each; hf with more, c_3 one Float16_b scalar tile
// and c_24, c_25, c_26 of Dt tiles; llama c_3 bound to the matrix, c_24,
// c_25, c_26 of Dt tiles; last c_16 the output (n·Dt tiles), bound to its
// buffer.
type rotaryCBs struct {
	dt, n, perCore int
	cores          coreRange
}

func (d *Device) rotaryCBsOf(in *buffer) rotaryCBs {
	sh := in.spec.Memory.Shard
	box := boundingBox(shardRanges(sh, d.gridX()))
	users := in.spec.PaddedDim(1)
	par := min(users, (box[1].x-box[0].x+1)*(box[1].y-box[0].y+1))
	return rotaryCBs{dt: sh.Shape[1] / tt.TileSize, n: sh.Shape[0] / tt.TileSize, perCore: (users + par - 1) / par, cores: box}
}

var rotaryDecodePrograms = [2]func(d *Device, bs []*buffer) simpleProgram{rotaryDecodeCBs(false), rotaryDecodeCBs(true)}

func rotaryDecodeCBs(llama bool) func(d *Device, bs []*buffer) simpleProgram {
	return func(d *Device, bs []*buffer) simpleProgram {
		r := d.rotaryCBsOf(bs[0])
		t := tileBytes(tt.BF16)
		interm := uint64(r.dt) * t
		var specs []cbSpec
		if !llama { // hf: the matrix (one tile of head_dim) or the scalar, one Float16_b tile
			specs = append(specs, cbSpec{indices: []int{3}, size: t})
		}
		for _, i := range []int{24, 25, 26} {
			specs = append(specs, cbSpec{indices: []int{i}, size: interm})
		}
		return d.cbRegion(specs, r.cores)
	}
}

// rotaryBound is what binding rotary decode's CBs to their buffers
// refuses, in creation order (the factories above):
// CircularBufferConfig(const CBDescriptor&) binds a CB with a buffer
// through set_globally_allocated_address_and_total_size, which throws for
// a buffer not in L1 and then for a CB larger than the buffer's aligned
// size per bank (tt_metal/impl/buffers/circular_buffer_config.cpp:65-75,
// 193-201, 217-229). Input, cos and sin are sharded in L1 (validate says
// so), so on the card it is the output (a DRAM output, or an L1-interleaved
// one smaller per bank than a shard) and llama's matrix that fail here.
// bs: input, cos, sin, output and (llama) the matrix.
func rotaryBound(d *Device, name string, bs []*buffer) error {
	r := d.rotaryCBsOf(bs[0])
	t := tileBytes(tt.BF16)
	type bind struct {
		b     *buffer
		tiles int
	}
	binds := [5]bind{{bs[0], r.n * r.dt}, {bs[1], r.dt * r.perCore}, {bs[2], r.dt * r.perCore}, {bs[3], r.n * r.dt}}
	n := 4
	if len(bs) == 5 { // llama: the matrix before the output
		binds[3], binds[4], n = bind{bs[4], 1}, binds[3], 5
	}
	for _, c := range binds[:n] {
		if c.b.bt != tt.L1 {
			return opErr(name, tt.MsgCBNotL1)
		}
		if size := uint64(c.tiles) * t; size > c.b.perBank {
			return opErr(name, tt.MsgCBBankSize, size, c.b.perBank)
		}
	}
	return nil
}

// rotaryPrefillCBs: rotary_embedding_hf outside decode mode takes
// RotaryEmbeddingHfMultiCore (ttnn/cpp/ttnn/operations/experimental/
// transformer/rotary_embedding_hf/device/
// rotary_embedding_hf_device_operation.cpp:15-21), in
// rotary_embedding_hf_multi_core_program_factory.cpp: one tile of head_dim
// (Wt = 1, :48-182) or more (:350-500). The cores: the shard grid of the
// input, else of the output (:64-79, :375-387), else split_work_to_cores of
// the input's tile rows, row-wise (:81-90). c_0 the input (2·Wt tiles;
// bound to a sharded input), then Wt = 1: c_1 the transformation matrix
// (one Float16_b tile for a bf16 input), c_2 cos and c_3 sin (a tile each),
// c_24, c_25, c_26 (a tile each); Wt > 1: c_1 the rotated input, c_2 cos,
// c_3 sin (2·Wt tiles each), c_4 one Float16_b scalar tile, c_24, c_25,
// c_26 (a tile each); last c_16 the output (2·Wt tiles; bound to a sharded
// output). sim computes bf16 only (every tile below is bf16's).
func rotaryPrefillCBs(d *Device, bs []*buffer) simpleProgram {
	in, out := bs[0], bs[3]
	wt := uint64(in.g.wp / tt.TileSize)
	t := tileBytes(tt.BF16)
	var cores coreRange
	switch {
	case in.spec.Memory.Sharded():
		cores = shardRanges(in.spec.Memory.Shard, d.gridX())[0]
	case out.spec.Memory.Sharded():
		cores = shardRanges(out.spec.Memory.Shard, d.gridX())[0]
	default:
		cores = d.rowwiseFirst(in.g.outer * in.g.hp / tt.TileSize)
	}
	specs := []cbSpec{{indices: []int{0}, size: 2 * wt * t, global: in.spec.Memory.Sharded()}}
	if wt == 1 {
		for _, i := range []int{1, 2, 3, 24, 25, 26} {
			specs = append(specs, cbSpec{indices: []int{i}, size: t})
		}
	} else {
		for _, i := range []int{1, 2, 3} {
			specs = append(specs, cbSpec{indices: []int{i}, size: 2 * wt * t})
		}
		for _, i := range []int{4, 24, 25, 26} {
			specs = append(specs, cbSpec{indices: []int{i}, size: t})
		}
	}
	specs = append(specs, cbSpec{indices: []int{16}, size: 2 * wt * t, global: out.spec.Memory.Sharded()})
	return d.cbRegion(specs, cores)
}

// createHeadsDecodeCBs: nlp_create_qkv_heads_decode of an interleaved
// input takes NLPCreateQKVHeadsDecodeInterleavedProgramFactory
// (ttnn/cpp/ttnn/operations/experimental/transformer/
// nlp_create_qkv_heads_decode/device/
// nlp_create_qkv_heads_decode_device_operation.cpp:12-25), whose c_16, c_17
// and c_18 are bound to Q, K and V on Q's grid, and which adds two static
// scratch CBs, c_0 and c_1 of (head_dim/32 + 1) DRAM-aligned chunks each,
// when the input is in DRAM and a face row (16 elements) is shorter than
// the DRAM alignment: bf16 on Blackhole, never on Wormhole
// (nlp_create_qkv_heads_decode_interleaved_program_factory.cpp:36-132).
// bs: input, Q, K, V.
func createHeadsDecodeCBs(d *Device, bs []*buffer) simpleProgram {
	in, q := bs[0], bs[1]
	cores := shardRanges(q.spec.Memory.Shard, d.gridX())[0]
	if in.bt != tt.DRAM || uint64(16*in.spec.DType.Size()) >= d.arch.dramAlign {
		return d.cbRegion(nil, cores)
	}
	scratch := uint64(q.spec.Shape[3]/tt.TileSize+1) * d.arch.dramAlign
	return d.cbRegion([]cbSpec{{indices: []int{0}, size: scratch}, {indices: []int{1}, size: scratch}}, cores)
}

// createHeadsPrefillCBs: nlp_create_qkv_heads of an interleaved input
// (its Interleaved factory, ttnn/cpp/ttnn/operations/experimental/
// transformer/nlp_create_qkv_heads/device/
// nlp_create_qkv_heads_program_factory.cpp): c_1 of 4 tiles (micro-block 1,
// quadruple-buffered), with TransposeK also c_0 and c_16 of 4 tiles each
// (:172-216); on the cores split_work_to_cores gives the input's
// padded[0]·padded[1]·padded[2]/32 tile rows, column-wise (:70-74).
var createHeadsPrefillPrograms = [2]func(d *Device, bs []*buffer) simpleProgram{createHeadsPrefillCBs(false), createHeadsPrefillCBs(true)}

func createHeadsPrefillCBs(transposeK bool) func(d *Device, bs []*buffer) simpleProgram {
	return func(d *Device, bs []*buffer) simpleProgram {
		in := bs[0]
		t := 4 * tileBytes(in.spec.DType)
		specs := []cbSpec{{indices: []int{1}, size: t}}
		if transposeK {
			specs = append(specs, cbSpec{indices: []int{0}, size: t}, cbSpec{indices: []int{16}, size: t})
		}
		return d.cbRegion(specs, d.colwiseFirst(in.g.outer*in.g.hp/tt.TileSize))
	}
}

// concatHeadsPrefillCBs: nlp_concat_heads (ttnn/cpp/ttnn/operations/
// experimental/transformer/nlp_concat_heads/device/
// nlp_concat_heads_program_factory.cpp) of an interleaved input [B, heads,
// S, D]: c_0 of heads·D/32 tiles, double-buffered (:36, :135-151), on the
// cores split_work_to_cores gives padded[0]·padded[2]/32 tile rows,
// column-wise (:49, :61-68). The interleaved output has no CB.
func concatHeadsPrefillCBs(d *Device, bs []*buffer) simpleProgram {
	in := bs[0]
	ps := in.spec.PaddedShape()
	tiles := uint64(ps[1] * ps[3] / tt.TileSize)
	return d.cbRegion([]cbSpec{{indices: []int{0}, size: 2 * tiles * tileBytes(in.spec.DType)}}, d.colwiseFirst(ps[0]*ps[2]/tt.TileSize))
}

// toMemoryConfigCBs: ttnn::to_memory_config to another config
// (ttnn/cpp/ttnn/operations/core/to_memory_config/to_memory_config_op.cpp:
// 249-348) runs one of four programs, in ttnn/cpp/ttnn/operations/
// data_movement/:
//   - interleaved to sharded (sharded/interleaved_to_sharded/device/
//     interleaved_to_sharded_program_factory.cpp:60-191): c_0 the output's
//     shard, bound to it; c_1 a scratch of 4 pages of align(unit + DRAM
//     alignment, DRAM alignment), unit a tile or, ROW_MAJOR, a shard row
//     (keep_l1_aligned is forced on, :65, so always); on the output's cores
//     that hold data (get_optimal_worker_cores_for_sharded_tensor), a
//     CoreRangeSet built from cores and merged into a std::set, so its first
//     range is the one whose start is least by x, then y
//     (tt_metal/common/core_coord.cpp:169-177, 193-256; umd's xy_pair
//     operator<);
//   - sharded to interleaved (sharded/sharded_to_interleaved/device/
//     sharded_to_interleaved_program_factory.cpp:139-160): c_0 bound to the
//     input: no static CB;
//   - sharded to sharded (sharded/reshard/device/): TILE, c_0 or c_16 bound
//     to the output: none; ROW_MAJOR height-sharded to height-sharded, c_1 a
//     scratch of the input's shard rows of align(row, 16) when a row is not
//     a multiple of 16 B (data_movement/sharded/reshard/device/reshard_program_factory_same_width.cpp:79-112);
//   - interleaved to interleaved (copy/device/): TILE, c_0 two aligned input
//     pages (copy_default_tilized_program_factory.cpp:47-82), on the cores
//     split_work_to_cores gives the logical tiles column-wise; ROW_MAJOR, c_0
//     one input page and c_1 two aligned output pages, each at most 256 KiB
//     (copy_default_row_major_program_factory.cpp:70-121), on the logical
//     rows column-wise.
//
// (A dtype conversion adds CBs; to_memory_config keeps the dtype.)
func toMemoryConfigCBs(d *Device, bs []*buffer) simpleProgram {
	in, out := bs[0], bs[1]
	inSh, outSh := in.spec.Memory.Sharded(), out.spec.Memory.Sharded()
	switch {
	case !inSh && outSh:
		unit := in.pageSize
		if in.spec.Layout == tt.RowMajor {
			unit = uint64(out.spec.Memory.Shard.Shape[1] * in.spec.DType.Size())
		}
		a := d.arch.dramAlign
		return d.cbRegion([]cbSpec{{indices: []int{0}, global: true}, {indices: []int{1}, size: 4 * alignUp(unit+a, a)}}, d.coresWithData(out))
	case inSh && !outSh:
		return d.cbRegion(nil, d.coresWithData(in))
	case inSh && outSh:
		row := uint64(in.spec.Memory.Shard.Shape[1] * in.spec.DType.Size())
		if in.spec.Layout == tt.RowMajor && in.spec.Memory.Layout == tt.HeightSharded && out.spec.Memory.Layout == tt.HeightSharded && row%16 != 0 {
			return d.cbRegion([]cbSpec{{indices: []int{0}, global: true}, {indices: []int{1}, size: uint64(in.spec.Memory.Shard.Shape[0]) * alignUp(row, 16)}}, d.coresWithData(out))
		}
		return d.cbRegion(nil, d.coresWithData(out))
	}
	if in.spec.Layout == tt.Tile {
		sh := in.spec.Shape
		tiles := 1
		for i, x := range sh {
			if i >= len(sh)-2 {
				x = (x + tt.TileSize - 1) / tt.TileSize
			}
			tiles *= x
		}
		return d.cbRegion([]cbSpec{{indices: []int{0}, size: 2 * in.aligned}}, d.colwiseFirst(tiles))
	}
	const maxSubblock = 65536 * 4
	sh := in.spec.Shape
	return d.cbRegion([]cbSpec{{indices: []int{0}, size: min(in.pageSize, maxSubblock)}, {indices: []int{1}, size: 2 * min(out.aligned, maxSubblock)}},
		d.colwiseFirst(in.spec.Volume()/sh[len(sh)-1]))
}

// coresWithData is the first range of the cores of b's shard grid that
// hold a shard (buffer_distribution_spec().cores_with_data(),
// ttnn/core/tensor/tensor_utils.cpp:54-75) as a merged CoreRangeSet: the
// range whose start is least by x, then y.
func (d *Device) coresWithData(b *buffer) coreRange {
	sh := b.spec.Memory.Shard
	sh.NumCores = min(sh.NumCores, (b.numPages+b.shardPage-1)/b.shardPage)
	rs := shardRanges(sh, d.gridX())
	first := rs[0]
	for _, r := range rs[1:] {
		if r[0].x < first[0].x || (r[0].x == first[0].x && r[0].y < first[0].y) {
			first = r
		}
	}
	return first
}

// sliceCBs: slice's device op (ttnn/cpp/ttnn/operations/data_movement/
// slice/device/slice_device_operation.cpp:266-295) takes, for a TILE
// input, SliceTileProgramFactory: c_0 of 2 input tiles
// (data_movement/slice/device/slice_program_factory_tile.cpp:44-57) on the cores split_work_to_cores
// gives the output's tiles column-wise (:25-31); for a ROW_MAJOR one
// SliceRmProgramFactory: c_0 of 2·k pages of the output row rounded up to
// the larger of the two buffers' alignments (twice that when the box's
// first column is not aligned in the source), k the most rows per read
// (merge_num_sticks_to_read over the per-core rows rounded up to 32, at
// most 4096 B a read: tt_metal/common/work_split.cpp:22-32), on the
// output's rows column-wise (data_movement/slice/device/slice_program_factory_rm.cpp:163-242).
func (d *Device) sliceCBs(in, out *buffer, begin []int) simpleProgram {
	if in.spec.Layout == tt.Tile {
		return d.cbRegion([]cbSpec{{indices: []int{0}, size: 2 * tileBytes(in.spec.DType)}}, d.colwiseFirst(out.numPages))
	}
	srcA, dstA := d.alignOf(in.bt), d.alignOf(out.bt)
	a1 := max(srcA, dstA)
	a := a1
	el := uint64(in.spec.DType.Size())
	if uint64(begin[len(begin)-1])*el%srcA != 0 {
		a *= 2
	}
	row := uint64(out.g.wp) * el
	page, stride := alignUp(row, a), alignUp(row, a1)
	sticks := out.spec.Volume() / out.spec.Shape[len(out.spec.Shape)-1]
	perCore := (sticks + d.opt.NumCores - 1) / d.opt.NumCores
	n := uint64((perCore + 31) / 32 * 32)
	k := uint64(1)
	for m := uint64(1); m*stride <= 4096; m++ {
		if n%m == 0 {
			k = m
		}
	}
	return d.cbRegion([]cbSpec{{indices: []int{0}, size: 2 * k * page}}, d.colwiseFirst(sticks))
}
