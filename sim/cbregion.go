package sim

import "github.com/offcard/offcard/tt"

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
