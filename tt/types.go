package tt

import (
	"fmt"
	"strconv"
)

// TileSize is the side of a tile (32x32 elements, §6.6).
const TileSize = 32

// FaceSize is the side of one of a tile's four faces (16x16, §6.6).
const FaceSize = 16

// DType is an element type (ttnn.DataType).
type DType uint8

// Element types. The zero DType is invalid.
const (
	BF16 DType = iota + 1
	FP32
	INT32
	UINT32
	UINT16
)

// Size is the byte size of one element.
func (d DType) Size() int {
	switch d {
	case BF16, UINT16:
		return 2
	case FP32, INT32, UINT32:
		return 4
	}
	return 0
}

// Valid reports whether d is one of the named types.
func (d DType) Valid() bool { return d.Size() != 0 }

// String is ttnn's name for the type (DataType.BFLOAT16, ...).
func (d DType) String() string {
	switch d {
	case BF16:
		return "BFLOAT16"
	case FP32:
		return "FLOAT32"
	case INT32:
		return "INT32"
	case UINT32:
		return "UINT32"
	case UINT16:
		return "UINT16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Layout is a tensor's page layout (ttnn.Layout).
type Layout uint8

// Layouts. The zero Layout is invalid.
const (
	Tile Layout = iota + 1
	RowMajor
)

// String is ttnn's name for the layout.
func (l Layout) String() string {
	switch l {
	case Tile:
		return "TILE"
	case RowMajor:
		return "ROW_MAJOR"
	}
	return fmt.Sprintf("Layout(%d)", uint8(l))
}

// BufferType says which memory a tensor lives in.
type BufferType uint8

// Buffer types.
const (
	DRAM BufferType = iota + 1
	L1
)

// String is tt-metal's name for the buffer type (as printed in the
// out-of-memory message, §6.4).
func (b BufferType) String() string {
	switch b {
	case DRAM:
		return "DRAM"
	case L1:
		return "L1"
	}
	return fmt.Sprintf("BufferType(%d)", uint8(b))
}

// MemoryLayout is ttnn's TensorMemoryLayout.
type MemoryLayout uint8

// Memory layouts.
const (
	Interleaved MemoryLayout = iota + 1
	HeightSharded
	// WidthSharded splits the 2-D view by columns: shard i holds columns
	// i*Shape[1] .. (i+1)*Shape[1]-1 of every row (nlp_concat_heads_decode's
	// output, ttnn/cpp/ttnn/operations/experimental/transformer/
	// nlp_concat_heads_decode/device/nlp_concat_heads_decode_device_operation.cpp).
	// The contract supports it for TILE tensors only.
	WidthSharded
)

// String is ttnn's name for the memory layout.
func (m MemoryLayout) String() string {
	switch m {
	case Interleaved:
		return "INTERLEAVED"
	case HeightSharded:
		return "HEIGHT_SHARDED"
	case WidthSharded:
		return "WIDTH_SHARDED"
	}
	return fmt.Sprintf("MemoryLayout(%d)", uint8(m))
}

// ShardSpec describes a sharded tensor. Height-sharded: shard i (rows
// i*Shape[0] .. (i+1)*Shape[0]-1 of the tensor's 2-D view) lives on grid
// core FirstCore+i; width-sharded: shard i (columns i*Shape[1] ..
// (i+1)*Shape[1]-1 of every row) lives on grid core FirstCore+i. Grid
// cores are numbered row-major over the leftmost GridWidth columns of the
// worker grid (ROW_MAJOR shard orientation, the only one
// paged_update_cache accepts, §1.1): grid core j is worker core
// (j mod GridWidth, j div GridWidth). The grid is the contiguous run
// FirstCore .. FirstCore+NumCores-1 of that numbering, ttnn's
// num_cores_to_corerangeset_in_subcoregrids over the rectangle (0,0) ..
// (GridWidth-1, last row), row-wise; paged_fused_update_cache puts its two
// inputs on two such grids (§1.5).
type ShardSpec struct {
	// NumCores is the number of cores of the shard grid.
	NumCores int
	// Shape is the shard shape [height, width] in elements.
	Shape [2]int
	// FirstCore is the index of the grid's first core in the numbering
	// above; zero, the default, is core (0,0).
	FirstCore int
	// GridWidth is the width of the numbering; zero, the default, is the
	// worker grid's own width (compute_with_storage_grid_size().x), so
	// that a grid spanning rows takes whole rows. tt_transformers shards
	// its users over an 8-wide rectangle on any arch
	// (models/tt_transformers/tt/model_config.py num_to_corerange): on
	// Blackhole, 16 users are then the single range (0,0)-(7,1), which
	// nlp_concat_heads_decode accepts, where the 13-wide walk is a row and
	// 3 cores, which it refuses. On a device whose grid is GridWidth wide,
	// GridWidth and zero name the same cores.
	GridWidth int
}

// MemoryConfig is ttnn's MemoryConfig. It is comparable with ==.
type MemoryConfig struct {
	Layout MemoryLayout
	Buffer BufferType
	// Shard is set for sharded layouts only.
	Shard ShardSpec
}

// Common memory configs.
var (
	DRAMInterleaved = MemoryConfig{Layout: Interleaved, Buffer: DRAM}
	L1Interleaved   = MemoryConfig{Layout: Interleaved, Buffer: L1}
)

// L1HeightSharded is a height-sharded L1 config over numCores cores with the
// given shard shape [height, width].
func L1HeightSharded(numCores int, shardShape [2]int) MemoryConfig {
	return MemoryConfig{Layout: HeightSharded, Buffer: L1, Shard: ShardSpec{NumCores: numCores, Shape: shardShape}}
}

// L1HeightShardedAt is L1HeightSharded on the cores firstCore ..
// firstCore+numCores-1.
func L1HeightShardedAt(firstCore, numCores int, shardShape [2]int) MemoryConfig {
	m := L1HeightSharded(numCores, shardShape)
	m.Shard.FirstCore = firstCore
	return m
}

// L1WidthSharded is a width-sharded L1 config over numCores cores with the
// given shard shape [height, width] (ttnn's default output of
// nlp_concat_heads_decode: num_heads cores, shard [32, head_dim]).
func L1WidthSharded(numCores int, shardShape [2]int) MemoryConfig {
	return MemoryConfig{Layout: WidthSharded, Buffer: L1, Shard: ShardSpec{NumCores: numCores, Shape: shardShape}}
}

// Sharded reports whether the config is sharded (height or width).
func (m MemoryConfig) Sharded() bool { return m.Layout == HeightSharded || m.Layout == WidthSharded }

// String renders the config, e.g. "DRAM_INTERLEAVED",
// "L1_HEIGHT_SHARDED(cores=8,shard=[32,128])", "L1_WIDTH_SHARDED(cores=16,shard=[32,64])" or, for a grid not starting at
// core 0, "L1_HEIGHT_SHARDED(cores=8,shard=[32,128],first=8)"; a grid
// width shows as ",width=8".
func (m MemoryConfig) String() string { return string(m.appendTo(nil)) }

func (m MemoryConfig) appendTo(b []byte) []byte {
	b = append(b, m.Buffer.String()...)
	b = append(b, '_')
	b = append(b, m.Layout.String()...)
	if m.Sharded() {
		b = fmt.Appendf(b, "(cores=%d,shard=[%d,%d]", m.Shard.NumCores, m.Shard.Shape[0], m.Shard.Shape[1])
		if m.Shard.FirstCore != 0 {
			b = fmt.Appendf(b, ",first=%d", m.Shard.FirstCore)
		}
		if m.Shard.GridWidth != 0 {
			b = fmt.Appendf(b, ",width=%d", m.Shard.GridWidth)
		}
		b = append(b, ')')
	}
	return b
}

// Spec is a device tensor's full description (ttnn TensorSpec). Shape is the
// logical shape.
type Spec struct {
	Shape  []int
	DType  DType
	Layout Layout
	Memory MemoryConfig
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// PaddedShape is the shape the pages hold: for TILE the last two dims are
// rounded up to 32 (§6.6); ROW_MAJOR is not padded.
func (s Spec) PaddedShape() []int {
	p := make([]int, len(s.Shape))
	for i := range p {
		p[i] = s.PaddedDim(i)
	}
	return p
}

// PaddedDim is PaddedShape()[i], without building the shape.
func (s Spec) PaddedDim(i int) int {
	if s.Layout == Tile && len(s.Shape) >= 2 && i >= len(s.Shape)-2 {
		return roundUp(s.Shape[i], TileSize)
	}
	return s.Shape[i]
}

// Volume is the number of logical elements.
func (s Spec) Volume() int {
	v := 1
	for _, d := range s.Shape {
		v *= d
	}
	return v
}

// Height and Width are the 2-D view of the padded shape (§6.6): Width is
// the last padded dim, Height the product of the others.
func (s Spec) Height() int {
	n := len(s.Shape)
	h := 1
	for i, d := range s.Shape[:n-1] {
		if i == n-2 {
			d = s.padDim(d)
		}
		h *= d
	}
	return h
}

// Width is the last padded dim.
func (s Spec) Width() int { return s.padDim(s.Shape[len(s.Shape)-1]) }

// padDim is one of the last two dims as PaddedShape gives it.
func (s Spec) padDim(d int) int {
	if s.Layout == Tile && len(s.Shape) >= 2 {
		return roundUp(d, TileSize)
	}
	return d
}

// PageSize is the byte size of one page (§6.6): a 32x32 tile for TILE; one
// row for ROW_MAJOR (one shard row when height-sharded). It is not aligned.
func (s Spec) PageSize() int {
	e := s.DType.Size()
	if s.Layout == Tile {
		return TileSize * TileSize * e
	}
	if s.Memory.Sharded() {
		return s.Memory.Shard.Shape[1] * e
	}
	return s.Width() * e
}

// NumPages is the number of pages: tiles in row-major order of the
// [Height/32, Width/32] grid for TILE, rows for ROW_MAJOR.
func (s Spec) NumPages() int {
	if s.Layout == Tile {
		return (s.Height() / TileSize) * (s.Width() / TileSize)
	}
	return s.Height()
}

// Validate checks that the spec describes a tensor a device can hold. Its
// messages are offcard's own (ttnn's TensorSpec checks are not quoted in the
// reference notes).
func (s Spec) Validate() error {
	if len(s.Shape) == 0 {
		return fmt.Errorf("tt: spec has rank 0")
	}
	for _, d := range s.Shape {
		if d <= 0 {
			return fmt.Errorf("tt: spec shape %v has a non-positive dim", s.Shape)
		}
	}
	if !s.DType.Valid() {
		return fmt.Errorf("tt: invalid dtype %v", s.DType)
	}
	switch s.Layout {
	case Tile:
		if len(s.Shape) < 2 {
			return fmt.Errorf("tt: TILE layout needs rank >= 2, got shape %v", s.Shape)
		}
	case RowMajor:
	default:
		return fmt.Errorf("tt: invalid layout %v", s.Layout)
	}
	m := s.Memory
	if m.Buffer != DRAM && m.Buffer != L1 {
		return fmt.Errorf("tt: invalid buffer type %v", m.Buffer)
	}
	switch m.Layout {
	case Interleaved:
		if m.Shard != (ShardSpec{}) {
			return fmt.Errorf("tt: interleaved memory config carries a shard spec")
		}
	case WidthSharded:
		if m.Buffer != L1 {
			return fmt.Errorf("tt: only L1 tensors can be width-sharded")
		}
		sh := m.Shard
		if s.Layout != Tile {
			return fmt.Errorf("tt: width-sharded tensors must be TILE in this contract")
		}
		if sh.NumCores <= 0 || sh.Shape[0] <= 0 || sh.Shape[1] <= 0 || sh.FirstCore < 0 || sh.GridWidth < 0 {
			return fmt.Errorf("tt: bad shard spec %+v", sh)
		}
		if sh.Shape[0] != s.Height() {
			return fmt.Errorf("tt: width-sharded shard height %d != tensor height %d", sh.Shape[0], s.Height())
		}
		if sh.Shape[1]%TileSize != 0 {
			return fmt.Errorf("tt: TILE shard width %d is not a multiple of 32", sh.Shape[1])
		}
		if sh.NumCores*sh.Shape[1] < s.Width() {
			return fmt.Errorf("tt: %d shards of width %d cannot hold width %d", sh.NumCores, sh.Shape[1], s.Width())
		}
	case HeightSharded:
		if m.Buffer != L1 {
			return fmt.Errorf("tt: only L1 tensors can be height-sharded")
		}
		sh := m.Shard
		if sh.NumCores <= 0 || sh.Shape[0] <= 0 || sh.Shape[1] <= 0 || sh.FirstCore < 0 || sh.GridWidth < 0 {
			return fmt.Errorf("tt: bad shard spec %+v", sh)
		}
		if sh.Shape[1] != s.Width() {
			return fmt.Errorf("tt: height-sharded shard width %d != tensor width %d", sh.Shape[1], s.Width())
		}
		if s.Layout == Tile && sh.Shape[0]%TileSize != 0 {
			return fmt.Errorf("tt: TILE shard height %d is not a multiple of 32", sh.Shape[0])
		}
		if sh.NumCores*sh.Shape[0] < s.Height() {
			return fmt.Errorf("tt: %d shards of height %d cannot hold height %d", sh.NumCores, sh.Shape[0], s.Height())
		}
	default:
		return fmt.Errorf("tt: invalid memory layout %v", m.Layout)
	}
	return nil
}

// Equal reports whether two specs are identical.
func (s Spec) Equal(o Spec) bool {
	if s.DType != o.DType || s.Layout != o.Layout || s.Memory != o.Memory || len(s.Shape) != len(o.Shape) {
		return false
	}
	for i := range s.Shape {
		if s.Shape[i] != o.Shape[i] {
			return false
		}
	}
	return true
}

// String renders the spec deterministically, e.g.
// "[1,8,32,128] BFLOAT16 TILE DRAM_INTERLEAVED"; it is also a valid cache key.
func (s Spec) String() string {
	b := make([]byte, 0, 64)
	b = append(b, '[')
	for i, d := range s.Shape {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(d), 10)
	}
	b = append(b, "] "...)
	b = append(b, s.DType.String()...)
	b = append(b, ' ')
	b = append(b, s.Layout.String()...)
	b = append(b, ' ')
	b = s.Memory.appendTo(b)
	return string(b)
}

// TensorID names a device tensor for its lifetime. IDs are never reused.
type TensorID uint64

// Tensor is a handle on a device tensor: its id, spec, and the address the
// allocator gave it (the same in every bank, §6.3).
type Tensor struct {
	ID   TensorID
	Spec Spec
	Addr uint64
}

// String renders the handle, e.g. "t7 [1,32] INT32 ROW_MAJOR DRAM_INTERLEAVED @0x1000".
func (t Tensor) String() string { return fmt.Sprintf("t%d %v @%#x", t.ID, t.Spec, t.Addr) }
