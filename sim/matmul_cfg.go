package sim

import (
	"slices"

	"github.com/offcard/offcard/tt"
)

// The program config ttnn::linear picks when the caller gives none, and the
// static CBs of the program it builds (ttnn/cpp/ttnn/operations/matmul/ at
// the pin).
//
// linear -> bound_matmul -> get_program_config -> generate_matmul_program_config
// (operations/matmul/matmul.cpp:200-206; operations/matmul/device/config/matmul_program_config.cpp:884-939): an unsharded input takes
// create_simple_matmul_program_config over the device grid (operations/matmul/device/config/matmul_program_config.cpp:897,
// 913-924, 1068-1303), a sharded one get_matmul_program_config
// (operations/matmul/device/config/matmul_program_config.cpp:926-938, 606-719). Both read the L1 the allocator leaves free
// (get_max_l1_space, operations/matmul/device/utilities/matmul_utilities.cpp:79-85: the lowest occupied L1 address, or the
// L1 size when nothing is allocated, less the unreserved base), so the same
// call picks smaller blocks, or another factory, when L1 buffers sit low.
// The config is one of the device operation's attributes and so part of
// its program hash (operations/matmul/device/matmul_device_operation.cpp:2127-2150): a call whose
// config changed misses the program cache.

// mmKind is the program config's type.
type mmKind uint8

const (
	mmUnmodelled mmKind = iota // a config sim does not lay out (no static CBs)
	mm1D                       // MatmulMultiCoreReuseMultiCast1DProgramConfig
	mm2D                       // MatmulMultiCoreReuseMultiCastProgramConfig
	mmMultiCore                // MatmulMultiCoreProgramConfig (operations/matmul/matmul.cpp:209-253 transposes b first)
)

// mmConfig is the chosen program config, in tiles: grid the config's
// compute grid, kw in0_block_w, pm and pn per_core_M and per_core_N, oh
// and ow the out block. The subblock does not size any CB and is left out.
type mmConfig struct {
	kind       mmKind
	mcastIn0   bool
	gx, gy     int
	kw, pm, pn int
	oh, ow     int
	shardW     int // in0's shard width in tiles when it is sharded, else 0
	shardCores int // in0's shard grid's core count when it is sharded
	mt, kt, nt int
	why        string // what sim does not lay out, when kind is mmUnmodelled
}

// key is the config as program-cache key words.
func (c mmConfig) key() uint64 {
	h := uint64(c.kind)
	for _, x := range []int{b2i(c.mcastIn0), c.gx, c.gy, c.kw, c.pm, c.pn, c.oh, c.ow} {
		h = h*1000003 + uint64(x)
	}
	return h
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

const mmTile = 2048 // a bf16 tile; sim's linear is bf16 throughout, and the interm tile is max(Float16_b, out) (operations/matmul/device/utilities/matmul_utilities.cpp:66-77)

// maxL1Space is get_max_l1_space (operations/matmul/device/utilities/matmul_utilities.cpp:79-85).
func (d *Device) maxL1Space() int {
	return int(d.l1a.lowestUsed()) - int(d.opt.L1UnreservedBase)
}

// mmEstimate is get_estimated_size_of_cbs (operations/matmul/device/utilities/matmul_utilities.cpp:18-64) for bf16
// operands, no bias, no transpose_a: double-buffered in0 and in1 blocks, the
// out and interm blocks, and in0's shard rows when it is sharded.
func mmEstimate(pm, pn, kw, shardW int) int {
	return pm*kw*2*mmTile + pn*kw*2*mmTile + 2*pm*pn*mmTile + pm*shardW*mmTile
}

// matmulConfig is the config linear(in, w, out) gets with the L1 as it is
// now (w is [.., N, K] when transposeB).
func (d *Device) matmulConfig(in, w, out *buffer, transposeB bool) mmConfig {
	c := mmConfig{mt: in.g.outer * in.g.hp / tt.TileSize, kt: in.g.wp / tt.TileSize}
	if transposeB {
		c.nt = w.g.hp / tt.TileSize
	} else {
		c.nt = w.g.wp / tt.TileSize
	}
	if c.mt == 0 || c.kt == 0 || c.nt == 0 {
		return c
	}
	maxL1 := d.maxL1Space()
	im, wm, om := in.spec.Memory, w.spec.Memory, out.spec.Memory
	if wm.Sharded() && (im.Sharded() || om.Sharded()) {
		c.why = "a sharded weight"
		return c
	}
	if im.Sharded() {
		if om.Sharded() {
			c.why = "a sharded output"
			return c
		}
		return d.shardedMatmulConfig(c, in, maxL1)
	}
	// create_simple_matmul_program_config (operations/matmul/device/config/matmul_program_config.cpp:1068-1303) with the
	// input and weight interleaved. A sharded output steers the choice
	// (:1097-1099, 1133-1135, 1176-1188) and is refused by the config's
	// checks when it does not suit it (linearOutputChecks); its CBs (the
	// output's bound) are not laid out.
	outSh := om.Sharded()
	switch {
	case outSh:
		c.why = "a sharded output"
	case wm.Sharded():
		c.why = "a sharded weight" // steers nothing but all_interleaved; refused or accepted by linearWeightChecks
	}
	gx, gy := d.gridX(), d.opt.NumCores/d.gridX()
	allDRAM := im.Buffer == tt.DRAM && wm.Buffer == tt.DRAM && om.Buffer == tt.DRAM
	h, wd := c.mt*tt.TileSize, c.nt*tt.TileSize
	ratio := wd / h
	if h > wd {
		ratio = h / wd
	}
	narrow := ratio > 8 || (allDRAM && (h <= tt.TileSize || wd <= tt.TileSize)) // is_narrow_shape, operations/matmul/device/config/matmul_program_config.cpp:28-43
	// all_interleaved && is_narrow:
	wide := narrow && !outSh && !wm.Sharded() && wd > h
	tall := narrow && !outSh && !wm.Sharded() && !wide
	kw := 2
	f := 1 // get_per_core_factor, operations/matmul/device/config/matmul_program_config.cpp:45-71
	for p := 16; p > 1; p /= 2 {
		if mmEstimate(p, p, kw, 0) < maxL1 {
			f = p
			break
		}
	}
	nby, nbx := (c.mt-1)/f+1, (c.nt-1)/f+1
	if (outSh || nby > 1 || nbx > 1) && c.kt%kw != 0 {
		kw = 1
	}
	if !(allDRAM || (nbx*nby <= gx*gy && c.kt%kw == 0)) {
		c.kind = mmMultiCore
		return c
	}
	ry, rx := 0, 0 // get_core_range
	if !(nby == 1 && nbx == 1) && nby <= gy && nbx <= gx {
		ry, rx = nby, nbx
	}
	switch {
	case ry == 1 || wide || (ry == 0 && om.Layout == tt.WidthSharded):
		return d.mcast1DConfig(c, true, gx, gy, maxL1)
	case rx == 1 || tall || (ry == 0 && om.Layout == tt.HeightSharded):
		return d.mcast1DConfig(c, false, gx, gy, maxL1)
	case (ry > 0 && nbx <= gx && nby <= gy) || allDRAM:
		c.kind, c.gx, c.gy = mm2D, gx, gy
		c.kw, c.pm, c.pn, c.oh, c.ow = kw, f, f, f, f
		if allDRAM {
			c.kw = 1
			if c.kt%gx == 0 {
				c.kw = c.kt / gx
			}
			c.pm, c.pn = (c.mt+gy-1)/gy, (c.nt+gx-1)/gx
			c.oh, c.ow, c.kw = mmMultiDim(c.pm, c.pn, c.kw, 0, maxL1, true)
		}
		return c
	}
	c.kind = mmMultiCore
	return c
}

// mcast1DConfig is get_mcast_1d_config (operations/matmul/device/config/matmul_program_config.cpp:296-401) over the device
// grid, without a user shard spec.
func (d *Device) mcast1DConfig(c mmConfig, in0 bool, gx, gy, maxL1 int) mmConfig {
	c.kind, c.mcastIn0, c.gx, c.gy = mm1D, in0, gx, gy
	n := gx * gy
	if in0 {
		c.pm = c.mt
		c.pn = ((c.nt*tt.TileSize+n-1)/n + tt.TileSize - 1) / tt.TileSize
	} else {
		c.pm = ((c.mt*tt.TileSize+n-1)/n + tt.TileSize - 1) / tt.TileSize
		c.pn = c.nt
	}
	c.kw = 1
	if c.kt%2 == 0 {
		c.kw = 2
	}
	c.oh, c.ow, _ = mmMultiDim(c.pm, c.pn, c.kw, 0, maxL1, false)
	return c
}

// shardedMatmulConfig is get_matmul_program_config's 1D branch for a
// WIDTH_SHARDED in0 on a grid of more than one core (operations/matmul/device/config/matmul_program_config.cpp:606-719):
// the grid is the shard grid's bounding box, per_core_M all of M,
// per_core_N N over the shard cores, in0_block_w gcd(shard width, K).
// Other sharded inputs are not modelled.
func (d *Device) shardedMatmulConfig(c mmConfig, in *buffer, maxL1 int) mmConfig {
	sh := in.spec.Memory.Shard
	box := boundingBox(shardRanges(sh, d.gridX()))
	gx, gy := box[1].x-box[0].x+1, box[1].y-box[0].y+1
	if in.spec.Memory.Layout != tt.WidthSharded || gx*gy == 1 {
		c.why = "an input sharded other than WIDTH_SHARDED over more than one core"
		return c
	}
	c.kind, c.mcastIn0, c.gx, c.gy = mm1D, true, gx, gy
	c.shardW, c.shardCores = sh.Shape[1]/tt.TileSize, sh.NumCores
	c.pm = c.mt
	c.pn = (c.nt + sh.NumCores - 1) / sh.NumCores
	c.kw = gcd(c.shardW, c.kt)
	c.oh, c.ow, _ = mmMultiDim(c.pm, c.pn, c.kw, c.shardW, maxL1, false)
	return c
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// mmMultiDim is get_multi_dim_per_core_factor (operations/matmul/device/config/matmul_program_config.cpp:73-162): the
// per-core block as given when it fits, else the largest m·n (m | pm,
// n | pn, the squarest pair of each product, later pairs winning ties) that
// fits, with k from kw down (to 1 when adjust) over the divisors of kw;
// {1, 1, 1} when none fits. "Fits" is an estimate below maxL1.
func mmMultiDim(pm, pn, kw, shardW, maxL1 int, adjust bool) (int, int, int) {
	if mmEstimate(pm, pn, kw, shardW) < maxL1 {
		return pm, pn, kw
	}
	factors := func(x int) []int {
		fs := []int{x, 1}
		for f := x / 2; f > 1; f-- {
			if x%f == 0 {
				fs = append(fs, f)
			}
		}
		return fs
	}
	type pair struct{ m, n int }
	best := map[int]pair{}
	ratio := func(p pair) float32 { return float32(max(p.m, p.n)) / float32(min(p.m, p.n)) }
	for _, m := range factors(pm) {
		for _, n := range factors(pn) {
			p := pair{m, n}
			if e, ok := best[m*n]; ok && ratio(e) < ratio(p) {
				continue
			}
			best[m*n] = p
		}
	}
	prods := make([]int, 0, len(best))
	for k := range best {
		prods = append(prods, k)
	}
	slices.Sort(prods)
	minK := kw
	if adjust {
		minK = 1
	}
	for k := kw; k >= minK; k-- {
		if kw%k != 0 {
			continue
		}
		for i := len(prods) - 1; i >= 0; i-- {
			p := best[prods[i]]
			if mmEstimate(p.m, p.n, k, shardW) < maxL1 {
				return p.m, p.n, k
			}
		}
	}
	return 1, 1, 1
}

// linearConfigOf is the config of o's call now; the zero config (no CBs)
// when an operand is not live (launchOp then refuses the call) or with a
// bias (its tile enters the estimate and adds c_3: not modelled).
func (d *Device) linearConfigOf(o *tt.Linear) mmConfig {
	if o.Bias != nil {
		return mmConfig{why: "a bias"}
	}
	var bs [3]*buffer
	for i, t := range []tt.Tensor{o.Input, o.Weight, o.Output} {
		b, err := d.operandOf("linear", t)
		if err != nil {
			return mmConfig{}
		}
		bs[i] = b
	}
	return d.matmulConfig(bs[0], bs[1], bs[2], o.TransposeB)
}

// linearProgram is linear's program at a miss: the config again (the same
// L1, so the same config as the key's), laid out.
func linearProgram(transposeB bool) func(d *Device, bs []*buffer) simpleProgram {
	return func(d *Device, bs []*buffer) simpleProgram {
		c := mmConfig{why: "a bias"} // not modelled (linearConfigOf)
		if bs[3] == nil {
			c = d.matmulConfig(bs[0], bs[1], bs[2], transposeB)
		}
		if c.why != "" {
			d.unmodelledCB("linear with " + c.why)
		}
		return d.linearCBs(c)
	}
}

var linearPrograms = [2]func(d *Device, bs []*buffer) simpleProgram{linearProgram(false), linearProgram(true)}

// linearCBs lays out the static CBs of the program for config c, in
// creation order (BF16, no bias, interleaved output; c_4 and c_5 share one
// CB, out_block tiles, since the interm format is the output's):
//   - 1D, in0 multicast (operations/matmul/device/factory/matmul_multicore_reuse_mcast_1d_program_factory.cpp:2979-3034, 3562-3667): c_0 oh·kw tiles, c_1
//     ow·kw, each doubled when K takes more than one block; with in0
//     sharded c_2 (its shard, bound to it) and c_6 (64 B); then c_4+c_5.
//   - 1D, in1 multicast (operations/matmul/device/factory/matmul_multicore_reuse_mcast_1d_program_factory.cpp:3993-4064, 4441-4534): c_0 oh·kw, c_1
//     ow·kw (doubled likewise), c_4+c_5.
//   - 2D (operations/matmul/device/factory/matmul_multicore_reuse_mcast_2d_program_factory.cpp:146-263, 934-1042): c_0 oh·kw, c_1 ow·kw (doubled
//     likewise), c_4+c_5, on the one range (0,0)-(nbx-1, nby-1).
//
// The 1D programs put every CB on the used cores walked row-wise from
// (0,0) over the config's grid (num_cores_to_corerangeset_in_subcoregrids,
// operations/matmul/device/factory/matmul_multicore_reuse_mcast_1d_program_factory.cpp:3023-3056, 4057-4064): nbx·nby cores, at least the shard's.
func (d *Device) linearCBs(c mmConfig) simpleProgram {
	if c.why != "" {
		return d.cbRegion(nil, coreRange{})
	}
	if c.kind == mmMultiCore {
		// matmul_multicore_program_factory.cpp (operations/matmul/device/factory/matmul_multicore_program_factory.cpp:79-130):
		// c_0, c_1 and c_16 of two tiles each on split_work_to_cores of
		// the output's tiles.
		t := uint64(mmTile)
		return d.cbRegion([]cbSpec{{indices: []int{0}, size: 2 * t}, {indices: []int{1}, size: 2 * t}, {indices: []int{16}, size: 2 * t}},
			d.colwiseFirst(c.mt*c.nt))
	}
	if c.kind != mm1D && c.kind != mm2D {
		return d.cbRegion(nil, coreRange{})
	}
	db := 1
	if c.kt/c.kw > 1 {
		db = 2
	}
	t := uint64(mmTile)
	specs := []cbSpec{{indices: []int{0}, size: uint64(c.oh*c.kw*db) * t}, {indices: []int{1}, size: uint64(c.ow*c.kw*db) * t}}
	if c.kind == mm1D && c.mcastIn0 && c.shardW > 0 {
		specs = append(specs, cbSpec{indices: []int{2}, size: uint64(c.pm*c.shardW) * t, global: true}, cbSpec{indices: []int{6}, size: 64})
	}
	specs = append(specs, cbSpec{indices: []int{4, 5}, size: uint64(c.oh*c.ow) * t})
	nbx, nby := (c.nt-1)/c.pn+1, (c.mt-1)/c.pm+1
	if c.kind == mm2D {
		return d.cbRegion(specs, coreRange{{}, {nbx - 1, nby - 1}})
	}
	n := max(nbx*nby, c.shardCores)
	return d.cbRegion(specs, shardRanges(tt.ShardSpec{NumCores: n, GridWidth: c.gx}, d.gridX())[0])
}

// linearOutputChecks: the checks of validate_on_program_cache_miss that the
// chosen config makes of a sharded output, with the input and weight
// interleaved (operations/matmul/device/matmul_device_operation.cpp): the 1D
// in0-multicast config wants it WIDTH_SHARDED (:1239), the in1-multicast
// one HEIGHT_SHARDED (:1321), the 2D one BLOCK_SHARDED (:1611, which tt
// cannot express), the multi-core one interleaved (:1768). The subblock
// and block checks after them (:1252-1258, 1328-1334) are not modelled.
func linearOutputChecks(name string, c mmConfig, out *buffer) error {
	m := out.spec.Memory
	if !m.Sharded() {
		return nil
	}
	switch {
	case c.kind == mm1D && c.mcastIn0 && m.Layout != tt.WidthSharded:
		return opErr(name, "Error: Output memory layout must be WIDTH_SHARDED or BLOCK_SHARDED on a 1-row grid. Provided tensor memory layout: %v", m.Layout)
	case c.kind == mm1D && !c.mcastIn0 && m.Layout != tt.HeightSharded:
		return opErr(name, "Error: Output memory layout must be HEIGHT_SHARDED or BLOCK_SHARDED on a 1-column grid.")
	case c.kind == mm2D:
		return opErr(name, "Output memory layout must be BLOCK_SHARDED, got: %v", m.Layout)
	case c.kind == mmMultiCore:
		return opErr(name, "Output memory layout must be INTERLEAVED, got: %v", m.Layout)
	}
	return nil
}

// linearWeightChecks: the checks the chosen config makes of a sharded
// weight, with the input and output interleaved (operations/matmul/device/matmul_device_operation.cpp):
// the 1D in0-multicast config takes an L1 weight only WIDTH_SHARDED
// (:1261) and per_core_N shards wide (:1264); the in1-multicast one only
// interleaved (:1335); the 2D one a HEIGHT_SHARDED weight only in DRAM
// (:1537; tt shards live in L1), a WIDTH_SHARDED one per_core_N wide
// (:1592) on one row of cores (:1600); the multi-core one only interleaved
// (:1764).
func (d *Device) linearWeightChecks(name string, c mmConfig, w *buffer) error {
	m := w.spec.Memory
	if !m.Sharded() {
		return nil
	}
	shardN := m.Shard.Shape[1] / tt.TileSize
	switch {
	case c.kind == mm1D && c.mcastIn0:
		if m.Layout != tt.WidthSharded {
			return opErr(name, "Operand B can only be interleaved or L1 width sharded.")
		}
		if c.pn != shardN {
			return opErr(name, "Shard width must match per core N.")
		}
	case c.kind == mm1D:
		return opErr(name, "Error: Operand B must be interleaved.")
	case c.kind == mm2D:
		if m.Layout == tt.HeightSharded {
			return opErr(name, "HEIGHT_SHARDED input B is only supported in DRAM, got: %v", m.Buffer)
		}
		if c.pn != shardN {
			return opErr(name, "per_core_N (%d) must equal input tensor B shard shape[1] / in1_tile.get_width() (%d)", c.pn, shardN)
		}
		box := boundingBox(shardRanges(m.Shard, d.gridX()))
		if box[0].y != box[1].y {
			return opErr(name, "Width-sharded input tensor B grid bounding box must have equal start and end y coordinates, got start: %d vs end: %d", box[0].y, box[1].y)
		}
	case c.kind == mmMultiCore:
		return opErr(name, "Input B memory layout must be INTERLEAVED, got: %v", m.Layout)
	}
	return nil
}
