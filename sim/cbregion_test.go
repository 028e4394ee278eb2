package sim

import (
	"slices"
	"testing"

	"github.com/offcard/offcard/tt"
)

// lastProgram is the program the device enqueued last.
func lastProgram(d *Device) program {
	for k, id := range d.progIDs {
		if id == d.curProg {
			return d.progs[k]
		}
	}
	return nil
}

// ids is n zero token ids, UINT32 ROW_MAJOR [1,1,1,n].
func (f *ckFix) ids(n int) tt.Tensor {
	x := f.alloc(tt.UINT32, tt.RowMajor, dram, 1, 1, 1, n)
	if err := f.d.WriteHost(x, tt.HostUint32([]int{1, 1, 1, n}, tt.RowMajor, make([]uint32, n))); err != nil {
		f.t.Fatal(err)
	}
	return x
}

// table is a page table of rows×w INT32 entries, row r's entry i block i.
func (f *ckFix) table(rows, w int) tt.Tensor {
	x := f.alloc(tt.INT32, tt.RowMajor, dram, rows, w)
	v := make([]int32, rows*w)
	for i := range v {
		v[i] = int32(i % w)
	}
	if err := f.d.WriteHost(x, tt.HostInt32([]int{rows, w}, tt.RowMajor, v)); err != nil {
		f.t.Fatal(err)
	}
	return x
}

// TestComputeCBRegions: each op's static CB region ends where its factory's
// CBs, in creation order, end (sizes from the factories at the pin, see
// cbregion.go), and the first CB's core range is the factory's.
func TestComputeCBRegions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		arch  Arch
		op    func(f *ckFix) tt.Op
		size  uint64 // end - L1 unreserved base
		cores string
	}{
		{"add", Wormhole, func(f *ckFix) tt.Op {
			x := func() tt.Tensor { return f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64) }
			return tt.Add{A: x(), B: x(), Output: x()}
		}, 3 * 4096, "[0-0 - 7-7]"},
		{"add, all three sharded alike: native, no static CB", Wormhole, func(f *ckFix) tt.Op {
			x := func() tt.Tensor {
				return f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(1, [2]int{32, 64}), 1, 1, 32, 64)
			}
			return tt.Add{A: x(), B: x(), Output: x()}
		}, 0, "[0-0 - 7-7]"},
		{"add, a sharded alone: not native, all static", Wormhole, func(f *ckFix) tt.Op {
			x := func() tt.Tensor { return f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64) }
			return tt.Add{A: f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(1, [2]int{32, 64}), 1, 1, 32, 64), B: x(), Output: x()}
		}, 3 * 4096, "[0-0 - 7-7]"},
		{"silu_mul adds c_3", Blackhole, func(f *ckFix) tt.Op {
			x := func() tt.Tensor { return f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64) }
			return tt.SiluMul{Gate: x(), Up: x(), Output: x()}
		}, 3*4096 + 2048, "[0-0 - 12-9]"},
		{"embedding, row-major factory", Wormhole, func(f *ckFix) tt.Op {
			return tt.Embedding{Input: f.ids(ckB), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 8, ckD), Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, ckB, ckD)}
		}, 64 + 256, "[0-0 - 0-1]"},
		{"embedding, fused, one block", Wormhole, func(f *ckFix) tt.Op {
			return tt.Embedding{Input: f.ids(32), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 64, 128),
				Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 128)}
		}, 16384 + 128 + 16384, "[0-0 - 0-0]"},
		{"embedding, fused, 64 tiles still double-buffered", Wormhole, func(f *ckFix) tt.Op {
			return tt.Embedding{Input: f.ids(32), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 64, 2048), Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 2048)}
		}, 2*262144 + 128, "[0-0 - 0-0]"},
		{"embedding, fused, 72 tiles single-buffered", Wormhole, func(f *ckFix) tt.Op {
			return tt.Embedding{Input: f.ids(32), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 64, 2304), Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 2304)}
		}, 2*147456 + 128, "[0-0 - 0-0]"},
		{"embedding, fused, 32 blocks column-wise", Blackhole, func(f *ckFix) tt.Op {
			return tt.Embedding{Input: f.ids(1024), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 64, 32),
				Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1024, 32)}
		}, 4096 + 128 + 4096, "[0-0 - 2-9]"},
		{"argmax, TILE: single core", Wormhole, func(f *ckFix) tt.Op {
			return tt.Argmax{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64), Output: f.ids(32)}
		}, 2048 + 128, "[0-0 - 0-0]"},
		{"argmax, ROW_MAJOR: multi core", Wormhole, func(f *ckFix) tt.Op { return f.argmax(f.argIn(), f.argOut()) }, 32 + 32 + 128 + 128, "[0-0 - 0-3]"},
		{"fill_cache", Wormhole, func(f *ckFix) tt.Op {
			return tt.FillCache{Cache: f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 2, ckBS, ckD), Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 2, ckBS, ckD), BatchIdx: 1}
		}, 4096, "[0-0 - 1-0]"},
		{"paged_fill_cache", Wormhole, func(f *ckFix) tt.Op {
			return tt.PagedFillCache{Cache: f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 32, 128), Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 96, 128),
				PageTable: f.table(2, 4)}
		}, 16384 + 32, "[0-0 - 2-0]"},
		{"paged_fill_cache, batch-index tensor, Blackhole", Blackhole, func(f *ckFix) tt.Op {
			o := f.fill()
			o.PageTable = f.table(2, 4)
			bi := f.alloc(tt.INT32, tt.RowMajor, dram, 1)
			if err := f.d.WriteHost(bi, tt.HostInt32([]int{1}, tt.RowMajor, []int32{0})); err != nil {
				f.t.Fatal(err)
			}
			o.BatchIdxTensor = &bi
			return o
		}, 4096 + 64 + 4, "[0-0 - 0-0]"},
		{"rotary_embedding_hf decode, one tile of head_dim", Wormhole, func(f *ckFix) tt.Op {
			in, cs := f.ropeSpec(ckD)
			return f.rope(in, cs, cs)
		}, 4 * 2048, "[0-0 - 1-0]"},
		{"rotary_embedding_hf decode, Qwen3's head_dim and 32 users: the shard grid's bounding box", Blackhole, func(f *ckFix) tt.Op {
			return f.rope(rope32(16), rope32(1), rope32(1))
		}, (1 + 3*4) * 2048, "[0-0 - 12-2]"},
		{"rotary_embedding_llama decode", Wormhole, func(f *ckFix) tt.Op {
			return f.llama(func(in, cs, sn, tm *tt.Spec) {})
		}, 3 * 2048, "[0-0 - 1-0]"},
		// sdpa_program_factory.cpp's 16 CBs (sdpa_cbs.go); head_dim 128,
		// 16 query heads over 8 KV heads, chunks of 32.
		{"sdpa prefill, causal, one Q chunk", Wormhole, func(f *ckFix) tt.Op {
			return f.sdpaPre([]int{1, 16, 32, 128}, []int{1, 8, 32, 128}, []int{1, 8, 32, 128})
		}, 96256, "[0-0 - 7-7]"},
		{"sdpa prefill, causal, two Q chunks: Q double-buffered", Blackhole, func(f *ckFix) tt.Op {
			return f.sdpaPre([]int{1, 16, 64, 128}, []int{1, 8, 64, 128}, []int{1, 8, 64, 128})
		}, 104448, "[0-0 - 12-9]"},
		{"sdpa prefill, fp32 dest acc: no recip scratch, out one row of tiles", Wormhole, func(f *ckFix) tt.Op {
			o := f.sdpaPre([]int{1, 16, 32, 128}, []int{1, 8, 32, 128}, []int{1, 8, 32, 128})
			o.FP32DestAcc = true
			return o
		}, 86016, "[0-0 - 7-7]"},
		{"sdpa prefill, non-causal, 40 rows: a padding mask with a partial K tile", Wormhole, func(f *ckFix) tt.Op {
			o := f.sdpaPre([]int{1, 1, 40, 32}, []int{1, 1, 40, 32}, []int{1, 1, 40, 32})
			o.Causal = false
			return o
		}, 40960, "[0-0 - 7-7]"},
		{"chunked sdpa, integer start: the page table's 32 B after col_identity", Wormhole, func(f *ckFix) tt.Op {
			return f.chunked06(false)
		}, 96256 + 32, "[0-0 - 7-7]"},
		{"chunked sdpa, tensor start: the page table and two 32 B chunk-start CBs", Blackhole, func(f *ckFix) tt.Op {
			return f.chunked06(true)
		}, 96256 + 64 + 64 + 64, "[0-0 - 12-9]"},
		{"rotary_embedding_hf prefill, one tile of head_dim: 4 tile rows row-wise", Wormhole, func(f *ckFix) tt.Op {
			return f.ropePre(tt.DRAMInterleaved, 1, 4, 32, 32)
		}, 20480, "[0-0 - 3-0]"},
		{"rotary_embedding_hf prefill, Qwen3's head_dim, 16 heads: (10·Wt+4) tiles, two rows", Wormhole, func(f *ckFix) tt.Op {
			return f.ropePre(tt.DRAMInterleaved, 1, 16, 32, 128)
		}, 90112, "[0-0 - 7-1]"},
		{"rotary_embedding_hf prefill, 8 heads: exactly a row is one partial row", Wormhole, func(f *ckFix) tt.Op {
			return f.ropePre(tt.DRAMInterleaved, 1, 8, 32, 128)
		}, 90112, "[0-0 - 7-0]"},
		{"rotary_embedding_hf prefill, a sharded input (so output): c_0 and c_16 bound, the shard grid's cores", Blackhole, func(f *ckFix) tt.Op {
			return f.ropePre(tt.L1HeightShardedAt(2, 2, [2]int{32, 128}), 1, 1, 64, 128)
		}, 90112 - 2*16384, "[2-0 - 3-0]"},
		{"nlp_create_qkv_heads_decode, Wormhole: a face row is the DRAM alignment, no static CB", Wormhole, func(f *ckFix) tt.Op {
			return f.createHeads(tt.BF16, tt.Tile, dram)
		}, 0, "[0-0 - 1-0]"},
		{"nlp_create_qkv_heads_decode, Blackhole, DRAM input: two scratch CBs of (D/32+1)·64 B", Blackhole, func(f *ckFix) tt.Op {
			return f.createHeads(tt.BF16, tt.Tile, dram)
		}, 2 * 2 * 64, "[0-0 - 1-0]"},
		{"nlp_create_qkv_heads_decode, Blackhole, L1 input: no scratch", Blackhole, func(f *ckFix) tt.Op {
			return f.createHeads(tt.BF16, tt.Tile, tt.L1Interleaved)
		}, 0, "[0-0 - 1-0]"},
		{"nlp_create_qkv_heads_decode, the 0.6B shape, 32 users 8 wide on Blackhole", Blackhole, func(f *ckFix) tt.Op {
			m := tt.L1HeightSharded(32, [2]int{32, 128})
			m.Shard.GridWidth = 8
			return tt.NLPCreateQKVHeadsDecode{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 32*128), NumHeads: 16, NumKVHeads: 8, Memory: m}
		}, 2 * 5 * 64, "[0-0 - 7-3]"},
		{"nlp_create_qkv_heads prefill: c_1 of 4 tiles, one tile row", Wormhole, func(f *ckFix) tt.Op {
			return tt.NLPCreateQKVHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 8*32), NumHeads: 4, NumKVHeads: 2}
		}, 8192, "[0-0 - 0-0]"},
		{"nlp_create_qkv_heads prefill, TransposeK: c_0 and c_16 too", Wormhole, func(f *ckFix) tt.Op {
			return tt.NLPCreateQKVHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 8*32), NumHeads: 4, NumKVHeads: 2, TransposeK: true}
		}, 3 * 8192, "[0-0 - 0-0]"},
		{"nlp_create_qkv_heads prefill, the 0.6B shape, 128 rows: 4 tile rows column-wise", Blackhole, func(f *ckFix) tt.Op {
			return tt.NLPCreateQKVHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 128, 32*128), NumHeads: 16, NumKVHeads: 8}
		}, 8192, "[0-0 - 0-3]"},
		{"nlp_concat_heads prefill: c_0 of 2·heads·D/32 tiles", Wormhole, func(f *ckFix) tt.Op {
			return tt.NLPConcatHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 4, 32, 32)}
		}, 16384, "[0-0 - 0-0]"},
		{"nlp_concat_heads prefill, the 0.6B shape, 128 rows", Wormhole, func(f *ckFix) tt.Op {
			return tt.NLPConcatHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 16, 128, 128)}
		}, 262144, "[0-0 - 0-3]"},
		{"to_memory_config DRAM to height-sharded: the scratch c_1, 4·align(tile + 32, 32)", Wormhole, func(f *ckFix) tt.Op {
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 4, 1, 32), Memory: tt.L1HeightSharded(4, [2]int{32, 32})}
		}, 4 * 2080, "[0-0 - 3-0]"},
		{"to_memory_config DRAM to height-sharded, Blackhole: 4·align(tile + 64, 64)", Blackhole, func(f *ckFix) tt.Op {
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 4, 1, 32), Memory: tt.L1HeightSharded(4, [2]int{32, 32})}
		}, 4 * 2112, "[0-0 - 3-0]"},
		{"to_memory_config to 16 users 8 wide on Blackhole", Blackhole, func(f *ckFix) tt.Op {
			m := tt.L1HeightSharded(16, [2]int{32, 32})
			m.Shard.GridWidth = 8
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 16, 1, 32), Memory: m}
		}, 4 * 2112, "[0-0 - 7-1]"},
		{"to_memory_config to a grid from mid-row: the merged set's first range is the x = 0 block", Blackhole, func(f *ckFix) tt.Op {
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 16, 1, 32), Memory: tt.L1HeightShardedAt(5, 16, [2]int{32, 32})}
		}, 4 * 2112, "[0-1 - 7-1]"},
		{"to_memory_config to more cores than shards: the cores with data", Wormhole, func(f *ckFix) tt.Op {
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 64, 32), Memory: tt.L1HeightSharded(6, [2]int{32, 32})}
		}, 4 * 2080, "[0-0 - 1-0]"},
		{"to_memory_config sharded to interleaved: the input's shard bound, no static CB", Wormhole, func(f *ckFix) tt.Op {
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(4, [2]int{32, 32}), 1, 4, 1, 32), Memory: tt.L1Interleaved}
		}, 0, "[0-0 - 3-0]"},
		{"to_memory_config DRAM to L1 interleaved, TILE: c_0 two pages on the tiles column-wise", Wormhole, func(f *ckFix) tt.Op {
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 1024), Memory: tt.L1Interleaved}
		}, 2 * 2048, "[0-0 - 3-7]"},
		{"to_memory_config DRAM to L1 interleaved, ROW_MAJOR: c_0 a page, c_1 two aligned pages", Wormhole, func(f *ckFix) tt.Op {
			return tt.ToMemoryConfig{Input: f.alloc(tt.BF16, tt.RowMajor, dram, 4, 100), Memory: tt.L1Interleaved}
		}, 224 + 2*208, "[0-0 - 0-3]"},
		{"slice, TILE: c_0 of 2 tiles on the output's tiles column-wise", Wormhole, func(f *ckFix) tt.Op {
			return tt.Slice{Input: f.alloc(tt.BF16, tt.Tile, dram, 4, 2, 32, 32), Begin: []int{1, 0, 0, 0}, End: []int{2, 2, 32, 32}}
		}, 4096, "[0-0 - 0-1]"},
		{"slice, ROW_MAJOR, a misaligned first column: 2·32 pages of 64 B", Wormhole, func(f *ckFix) tt.Op {
			return tt.Slice{Input: f.alloc(tt.INT32, tt.RowMajor, dram, 4, 6, 10), Begin: []int{1, 2, 3}, End: []int{3, 6, 9}}
		}, 4096, "[0-0 - 0-7]"},
		{"slice, ROW_MAJOR, Blackhole: 2·32 pages of 128 B", Blackhole, func(f *ckFix) tt.Op {
			return tt.Slice{Input: f.alloc(tt.INT32, tt.RowMajor, dram, 4, 6, 10), Begin: []int{1, 2, 3}, End: []int{3, 6, 9}}
		}, 8192, "[0-0 - 0-7]"},
		{"slice, ROW_MAJOR, an aligned first column", Wormhole, func(f *ckFix) tt.Op {
			return tt.Slice{Input: f.alloc(tt.INT32, tt.RowMajor, dram, 4, 6, 16), Begin: []int{1, 2, 8}, End: []int{3, 6, 16}}
		}, 2 * 32 * 32, "[0-0 - 0-7]"},
		{"linear, tiny qkv 128→256 (M = 32): 1D, in0 multicast, 8 cores", Wormhole, func(f *ckFix) tt.Op {
			return f.mm(dram, 32, 128, 256)
		}, 8192 + 8192 + 2048, "[0-0 - 7-0]"},
		{"linear, 0.6B down 3072→1024: one tile a core on 32", Wormhole, func(f *ckFix) tt.Op {
			return f.mm(dram, 32, 3072, 1024)
		}, 8192 + 8192 + 2048, "[0-0 - 7-3]"},
		{"linear, 0.6B gate 1024→3072: two tiles a core on 48", Wormhole, func(f *ckFix) tt.Op {
			return f.mm(dram, 32, 1024, 3072)
		}, 8192 + 16384 + 4096, "[0-0 - 7-5]"},
		{"linear, 0.6B qkv 1024→4096 on Blackhole: one tile a core on 128, a partial last row", Blackhole, func(f *ckFix) tt.Op {
			return f.mm(dram, 32, 1024, 4096)
		}, 8192 + 8192 + 2048, "[0-0 - 12-8]"},
		{"linear, 64x64 by 64: not narrow, 2D on the used 2x2", Wormhole, func(f *ckFix) tt.Op {
			return f.mm(dram, 64, 64, 64)
		}, 4096 + 4096 + 2048, "[0-0 - 1-1]"},
		{"linear, the 0.6B decode o_proj of 16 width-sharded heads: c_2 bound, c_6 64 B", Wormhole, func(f *ckFix) tt.Op {
			return f.mm(tt.L1WidthSharded(16, [2]int{32, 128}), 32, 2048, 1024)
		}, 16384 + 32768 + 64 + 4096, "[0-0 - 7-1]"},
		{"linear, the same on Blackhole: the shard grid's 13-wide box", Blackhole, func(f *ckFix) tt.Op {
			return f.mm(tt.L1WidthSharded(16, [2]int{32, 128}), 32, 2048, 1024)
		}, 16384 + 32768 + 64 + 4096, "[0-0 - 12-0]"},
		{"linear, the tiny o_proj of 4 width-sharded heads", Wormhole, func(f *ckFix) tt.Op {
			return f.mm(tt.L1WidthSharded(4, [2]int{32, 32}), 32, 128, 128)
		}, 4096 + 4096 + 64 + 2048, "[0-0 - 3-0]"},
		{"linear under the multi-core config: c_0, c_1, c_16 of two tiles on the output's tiles", Wormhole, func(f *ckFix) tt.Op {
			o := f.mm(dram, 64, 32, 64)
			o.TransposeB, o.Weight = false, f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64)
			o.Output = f.alloc(tt.BF16, tt.Tile, tt.L1Interleaved, 1, 1, 64, 64)
			return o
		}, 3 * 4096, "[0-0 - 0-3]"},
		{"linear with a bias: taken to have no CB (the bias paths are not modelled)", Wormhole, func(f *ckFix) tt.Op {
			o := f.mm(dram, 32, 128, 256)
			o.Bias = f.p(f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1, 256))
			return o
		}, 0, "[0-0 - 0-0]"},
		{"nlp_concat_heads_decode: its one CB bound to the output, no static CB", Wormhole, func(f *ckFix) tt.Op {
			return f.concat(f.concatIn(tt.BF16, tt.Tile, tt.MemoryConfig{}))
		}, 0, "[0-0 - 0-0]"},
		{"plus_one", Wormhole, func(f *ckFix) tt.Op {
			return tt.PlusOne{Input: f.alloc(tt.INT32, tt.RowMajor, dram, 32)}
		}, 128, "[0-0 - 0-0]"},
	} {
		d, err := New(Options{Arch: tc.arch})
		if err != nil {
			t.Fatal(err)
		}
		f := &ckFix{t: t, d: d}
		if err := f.run(tc.op(f)); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		p := lastProgram(d)
		if got := p.cbEnd() - d.opt.L1UnreservedBase; got != tc.size {
			t.Errorf("%s: CB region of %d B, want %d", tc.name, got, tc.size)
		}
		if got := d.firstCBRange(p).String(); got != tc.cores {
			t.Errorf("%s: first CB on %s, want %s", tc.name, got, tc.cores)
		}
	}
}

// TestComputeCBRegionChecked: the region is checked at enqueue, with the
// op's own text.
func TestComputeCBRegionChecked(t *testing.T) {
	d, err := New(Options{Arch: Wormhole, L1Size: 120 << 10})
	if err != nil {
		t.Fatal(err)
	}
	f := &ckFix{t: t, d: d}
	err = f.run(tt.Embedding{Input: f.ids(32), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 64, 128),
		Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 128)})
	want := "embedding: Statically allocated circular buffers on core range [0-0 - 0-0] grow to 131200 B which is beyond max L1 size of 122880 B"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// mm is linear(x [1,1,m,k] in mx, w [1,1,n,k] transposed) into a DRAM
// output, all BF16 TILE.
func (f *ckFix) mm(mx tt.MemoryConfig, m, k, n int) tt.Linear {
	return tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, mx, 1, 1, m, k), Weight: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, n, k),
		Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, m, n), TransposeB: true}
}

// ropePre is a prefill rotary_embedding_hf of an input [b, heads, s, hd]
// in m, cos and sin [1, 1, s, hd] in DRAM.
func (f *ckFix) ropePre(m tt.MemoryConfig, b, heads, s, hd int) tt.RotaryEmbeddingHF {
	cs := func() tt.Tensor { return f.alloc(tt.BF16, tt.Tile, dram, 1, 1, s, hd) }
	return tt.RotaryEmbeddingHF{Input: f.alloc(tt.BF16, tt.Tile, m, b, heads, s, hd), Cos: cs(), Sin: cs(), Prefill: true}
}

// rope32 is a decode rotary operand of 32 users, heads heads of head_dim
// 128, one user per core.
func rope32(heads int) tt.Spec {
	return tt.Spec{Shape: []int{1, 32, heads, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(32, [2]int{32, 128})}
}

// TestRotaryDecodeBindsOutput: decode rotary's output CB is bound to the
// output's buffer (rotary_embedding_hf_sharded_program_factory.cpp:351-361),
// so the program build refuses an output outside L1, or one whose size per
// bank is less than a shard (tt_metal/impl/buffers/circular_buffer_config.cpp:
// 193-201, 217-222); validate does not check either. Each refusal leaves
// nothing allocated.
func TestRotaryDecodeBindsOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   tt.Spec
		mem  tt.MemoryConfig
		want string // "" accepted
	}{
		{"DRAM output", rope32(16), tt.DRAMInterleaved, "rotary_embedding_hf: Only L1 buffers can have an associated circular buffer!"},
		{"L1-interleaved output, 2 tiles per bank of a 4-tile shard", rope32(16), tt.L1Interleaved,
			"rotary_embedding_hf: Cannot set circular buffer size to 8192. This is larger than the associated dynamically allocated L1 buffer bank size of 4096 B"},
		{"L1-interleaved output, a tile per bank of a 1-tile shard", tt.Spec{Shape: []int{1, ckB, 1, ckD}, DType: tt.BF16, Layout: tt.Tile,
			Memory: tt.L1HeightSharded(ckB, [2]int{32, ckD})}, tt.L1Interleaved, ""},
		{"the input's config", rope32(16), tt.MemoryConfig{}, ""},
	} {
		d, err := New(Options{Arch: Wormhole})
		if err != nil {
			t.Fatal(err)
		}
		f := &ckFix{t: t, d: d}
		cs := ropeWith(tc.in, func(s *tt.Spec) { s.Shape[2] = 1 })
		o := f.rope(tc.in, cs, cs)
		o.Memory = tc.mem
		used := func() (n uint64) {
			for _, a := range []*allocator{d.dram, d.l1a} {
				_, x, _, _ := a.stats()
				n += x
			}
			return n
		}
		before := used()
		_, err = d.Run(o)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.want)
		case tc.want != "" && used() != before:
			t.Errorf("%s: %d B allocated after the refusal, %d B before", tc.name, used(), before)
		}
	}
}

// chunked06 is a chunked SDPA of the 0.6B's attention shape: 16 query
// heads over 8 KV heads of head_dim 128 (ckFix.chunkedOf).
func (f *ckFix) chunked06(tensor bool) tt.ChunkedSDPA { return f.chunkedOf(tensor, 16, 8, 128) }

// TestChunkedSDPAPageTableCB: the page-table CB is the seventh of chunked
// SDPA's CBs, after q_in, k_in, v_in, the causal mask and the two identity
// tiles (sdpa_program_factory.cpp:680-699): 49152 B above the base at
// head_dim 128 with one Q chunk per core, 57344 B with two (Q
// double-buffered, :334-352: 72 heads on 64 cores).
func TestChunkedSDPAPageTableCB(t *testing.T) {
	for _, tc := range []struct {
		heads int
		want  uint64
	}{{16, 49152}, {72, 57344}} {
		d, err := New(Options{Arch: Wormhole})
		if err != nil {
			t.Fatal(err)
		}
		f := &ckFix{t: t, d: d}
		o := f.chunked06(false)
		if tc.heads != 16 {
			o.Q = f.alloc(tt.BF16, tt.Tile, dram, 1, tc.heads, 32, 128)
		}
		if err := f.run(o); err != nil {
			t.Fatalf("%d heads: %v", tc.heads, err)
		}
		if got := lastProgram(d).(*chunkedProgram).ptCB - d.opt.L1UnreservedBase; got != tc.want {
			t.Errorf("%d heads: page-table CB at base + %d, want + %d", tc.heads, got, tc.want)
		}
	}
}

// TestLinearConfigFollowsFreeL1: linear's program config is chosen from
// the L1 free at the call (get_max_l1_space) and is part of the program
// key. M = 32, K = 64, N = 32768 on Wormhole, 16 tiles of N a core on 64
// cores: with L1 empty the out block is 1x16; with an L1 buffer leaving
// about 150 KB above the base, the 1x16 estimate (204800 B) no longer fits
// and the out block is 1x8, a new program (a miss), its smaller CBs below
// the buffer.
func TestLinearConfigFollowsFreeL1(t *testing.T) {
	d, err := New(Options{Arch: Wormhole})
	if err != nil {
		t.Fatal(err)
	}
	f := &ckFix{t: t, d: d}
	o := f.mm(dram, 32, 64, 32768)
	check := func(what string, size uint64, cores string, misses int) {
		t.Helper()
		_, m0 := d.ProgramCacheStats()
		if err := f.run(o); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		p := lastProgram(d)
		if got := p.cbEnd() - d.opt.L1UnreservedBase; got != size {
			t.Errorf("%s: CB region of %d B, want %d", what, got, size)
		}
		if got := d.firstCBRange(p).String(); got != cores {
			t.Errorf("%s: first CB on %s, want %s", what, got, cores)
		}
		if _, m := d.ProgramCacheStats(); m-m0 != misses {
			t.Errorf("%s: %d program-cache misses, want %d", what, m-m0, misses)
		}
	}
	check("empty L1", 4096+65536+32768, "[0-0 - 7-7]", 1)
	check("empty L1 again", 4096+65536+32768, "[0-0 - 7-7]", 0)
	perBank := (d.opt.L1Size - d.opt.L1UnreservedBase - 150000) / 2048 // tiles a bank
	f.alloc(tt.BF16, tt.Tile, tt.L1Interleaved, 1, 1, 32*int(perBank), 32*d.opt.NumCores)
	check("a low L1 buffer", 4096+32768+16384, "[0-0 - 7-7]", 1)
}

// TestUnmodelledCBsNamed: the linear calls whose static CBs sim does not
// lay out are named by UnmodelledCBs, once each, and the modelled ones are
// not.
func TestUnmodelledCBsNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(f *ckFix) tt.Linear
		want string // "" for none
	}{
		{"interleaved operands, 1D", func(f *ckFix) tt.Linear { return f.mm(dram, 32, 128, 256) }, ""},
		{"a width-sharded input over 4 cores", func(f *ckFix) tt.Linear {
			return f.mm(tt.L1WidthSharded(4, [2]int{32, 32}), 32, 128, 128)
		}, ""},
		{"a bias", func(f *ckFix) tt.Linear {
			o := f.mm(dram, 32, 128, 256)
			o.Bias = f.p(f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1, 256))
			return o
		}, "linear with a bias"},
		{"a width-sharded output", func(f *ckFix) tt.Linear {
			o := f.mm(dram, 32, 128, 128)
			o.Output = f.alloc(tt.BF16, tt.Tile, tt.L1WidthSharded(4, [2]int{32, 32}), 1, 1, 32, 128)
			return o
		}, "linear with a sharded output"},
		{"one tile by one into L1: the multi-core config, b transposed first", func(f *ckFix) tt.Linear {
			o := f.mm(dram, 32, 32, 32)
			o.Output = f.alloc(tt.BF16, tt.Tile, tt.L1Interleaved, 1, 1, 32, 32)
			return o
		}, ""},
		{"a height-sharded input", func(f *ckFix) tt.Linear {
			return f.mm(tt.L1HeightSharded(1, [2]int{32, 128}), 32, 128, 128)
		}, "linear with an input sharded other than WIDTH_SHARDED over more than one core"},
	} {
		d, err := New(Options{Arch: Wormhole})
		if err != nil {
			t.Fatal(err)
		}
		f := &ckFix{t: t, d: d}
		o := tc.op(f)
		for range 2 { // a hit names nothing new
			if err := f.run(o); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		var want []string
		if tc.want != "" {
			want = []string{tc.want}
		}
		if got := d.UnmodelledCBs(); !slices.Equal(got, want) {
			t.Errorf("%s: UnmodelledCBs %q, want %q", tc.name, got, want)
		}
	}
}
