package conform

import (
	"fmt"
	"math/rand/v2"

	"github.com/offcard/offcard/tt"
)

// ServingCases are the conformance cases of the ops the serving schedules
// need (issue 35): chunked_scaled_dot_product_attention in both chunk_start
// forms, fill_cache and slice (a block copy is slice + fill_cache). They
// join Cases once the simulator implements the three ops; until then
// TestLoopbackConformsServing skips them, saying so.
func ServingCases() []Case {
	return []Case{
		{"chunked-sdpa", caseChunkedSDPA},
		{"block-copy-slice-fill-cache", caseBlockCopy},
		{"slice-row-major", caseSliceRowMajor},
	}
}

// chunkedSDPA is one chunk setup on both devices: Q [1,4,32,64], paged K
// and V caches [12,2,32,64] (GQA 2:1), a page table [1,8] of 4 permuted
// blocks padded with block 0 (the tensor form's stick must be whole 32 B).
type chunkedSDPA struct {
	q, k, v, pt [2]tt.Tensor
}

func newChunked(p *Pair, r *rand.Rand) (*chunkedSDPA, error) {
	c := &chunkedSDPA{}
	var err error
	if c.q, err = p.allocWrite(r, dram([]int{1, 4, 32, 64}, tt.BF16, tt.Tile), 1); err != nil {
		return nil, err
	}
	for _, t := range []*[2]tt.Tensor{&c.k, &c.v} {
		if *t, err = p.allocWrite(r, dram([]int{12, 2, 32, 64}, tt.BF16, tt.Tile), 1); err != nil {
			return nil, err
		}
	}
	if c.pt, err = p.alloc(dram([]int{1, 8}, tt.INT32, tt.RowMajor)); err != nil {
		return nil, err
	}
	row := []int32{9, 2, 11, 4, 0, 0, 0, 0}
	return c, p.write(c.pt, tt.HostInt32([]int{1, 8}, tt.RowMajor, row))
}

// caseChunkedSDPA: a chunk at 0, 64 and 96 through the page table, legacy
// (with and without a program config) and tensor form (the start written
// to a device tensor), plus the tensor form at 80, which the kernel places
// at the 32-row chunk below; then the legacy refusals of a start off the q
// chunk and of a table too short for start + Sq.
func caseChunkedSDPA(p *Pair) error {
	r := rand.New(rand.NewPCG(51, 52))
	c, err := newChunked(p, r)
	if err != nil {
		return err
	}
	start, err := p.alloc(dram([]int{1}, tt.INT32, tt.RowMajor))
	if err != nil {
		return err
	}
	const name = "chunked_scaled_dot_product_attention"
	for _, x := range []struct {
		start    int64
		tensor   bool
		qc, kc   int
		exactExp bool
	}{
		{0, false, 0, 0, false},
		{64, false, 32, 64, true},
		{96, false, 0, 0, false},
		{64, true, 0, 0, false},
		{80, true, 32, 32, false},
	} {
		if x.tensor {
			if err := p.write(start, tt.HostInt32([]int{1}, tt.RowMajor, []int32{int32(x.start)})); err != nil {
				return err
			}
		}
		out, err := p.allocOp(name, func(i int) tt.Op {
			op := tt.ChunkedSDPA{Q: c.q[i], K: c.k[i], V: c.v[i], PageTable: c.pt[i], ChunkStart: x.start, QChunkSize: x.qc, KChunkSize: x.kc, ExactExp: x.exactExp}
			if x.tensor {
				s := start[i]
				op.ChunkStart, op.ChunkStartTensor = 0, &s
			}
			return op
		})
		if err != nil {
			return err
		}
		if err := p.close(name, out[0]); err != nil {
			return fmt.Errorf("start %d (tensor form %v): %v", x.start, x.tensor, err)
		}
		if err := p.free(out[0]); err != nil {
			return err
		}
	}
	if err := p.refused(name+" (start 16, q_chunk_size 32)", func(i int) tt.Op {
		return tt.ChunkedSDPA{Q: c.q[i], K: c.k[i], V: c.v[i], PageTable: c.pt[i], ChunkStart: 16, QChunkSize: 32, KChunkSize: 32}
	}); err != nil {
		return err
	}
	return p.refused(name+" (start 240 + 32 rows past the table's 256)", func(i int) tt.Op {
		return tt.ChunkedSDPA{Q: c.q[i], K: c.k[i], V: c.v[i], PageTable: c.pt[i], ChunkStart: 240}
	})
}

// caseBlockCopy: copy-on-write as the engine runs it: slice block 5 out of
// a paged cache and fill_cache it into block 2 (exact); a fill at
// update_idx 32 of a 64-row cache; the refusal of an update_idx off the
// tile.
func caseBlockCopy(p *Pair) error {
	r := rand.New(rand.NewPCG(53, 54))
	cs := dram([]int{8, 2, 32, 64}, tt.BF16, tt.Tile)
	cache, err := p.allocWrite(r, cs, 1)
	if err != nil {
		return err
	}
	blk, err := p.allocOp("slice", func(i int) tt.Op {
		return tt.Slice{Input: cache[i], Begin: []int{5, 0, 0, 0}, End: []int{6, 2, 32, 64}}
	})
	if err != nil {
		return err
	}
	if err := p.exact("block 5 sliced out", blk[0]); err != nil {
		return err
	}
	if err := p.op("fill_cache", func(i int) tt.Op { return tt.FillCache{Cache: cache[i], Input: blk[0][i], BatchIdx: 2} }); err != nil {
		return err
	}
	if err := p.exact("cache after copying block 5 into block 2", cache); err != nil {
		return err
	}
	tall, err := p.allocWrite(r, dram([]int{2, 2, 64, 64}, tt.BF16, tt.Tile), 1)
	if err != nil {
		return err
	}
	if err := p.op("fill_cache (update_idx 32)", func(i int) tt.Op {
		return tt.FillCache{Cache: tall[i], Input: blk[0][i], BatchIdx: 1, UpdateIdx: 32}
	}); err != nil {
		return err
	}
	if err := p.exact("cache after a fill at update_idx 32", tall); err != nil {
		return err
	}
	return p.refused("fill_cache (update_idx 16)", func(i int) tt.Op {
		return tt.FillCache{Cache: tall[i], Input: blk[0][i], UpdateIdx: 16}
	})
}

// caseSliceRowMajor: an INT32 row-major box (exact), and the refusal of an
// end before its begin.
func caseSliceRowMajor(p *Pair) error {
	in, err := p.alloc(dram([]int{4, 6, 10}, tt.INT32, tt.RowMajor))
	if err != nil {
		return err
	}
	v := make([]int32, 240)
	for i := range v {
		v[i] = int32(i)
	}
	if err := p.write(in, tt.HostInt32([]int{4, 6, 10}, tt.RowMajor, v)); err != nil {
		return err
	}
	out, err := p.allocOp("slice", func(i int) tt.Op {
		return tt.Slice{Input: in[i], Begin: []int{1, 2, 3}, End: []int{3, 6, 9}}
	})
	if err != nil {
		return err
	}
	if err := p.exact("slice [1,2,3]..[3,6,9]", out[0]); err != nil {
		return err
	}
	return p.refused("slice (end 1 before begin 2)", func(i int) tt.Op {
		return tt.Slice{Input: in[i], Begin: []int{2, 0, 0}, End: []int{1, 6, 10}}
	})
}
