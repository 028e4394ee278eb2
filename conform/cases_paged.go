package conform

import (
	"fmt"
	"math/rand/v2"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// kv is a paged KV setup on both devices: a cache [blocks, heads, bs, D],
// a height-sharded input [1, B, heads, D] (one user per core), an update
// index tensor [B] and a page table [B, W].
type kv struct {
	b, heads, d, bs, blocks, w int
	cache, input, idx, pt      [2]tt.Tensor
	rows                       [][]int32
}

func newKV(p *Pair, r *rand.Rand, b, blocks, w, firstCore int) (*kv, error) {
	return newKVOn(p, r, b, blocks, w, tt.L1HeightShardedAt(firstCore, b, [2]int{32, 64}))
}

// newKVOn is newKV with the input sharded by m (shard [32, 64]).
func newKVOn(p *Pair, r *rand.Rand, b, blocks, w int, m tt.MemoryConfig) (*kv, error) {
	k := &kv{b: b, heads: 2, d: 64, bs: 32, blocks: blocks, w: w}
	var err error
	cs := dram([]int{blocks, k.heads, k.bs, k.d}, tt.BF16, tt.Tile)
	if k.cache, err = p.alloc(cs); err != nil {
		return nil, err
	}
	if err := p.write(k.cache, tt.HostBF16(cs.Shape, tt.Tile, randBF16(r, cs.Volume(), 1))); err != nil {
		return nil, err
	}
	is := tt.Spec{Shape: []int{1, b, k.heads, k.d}, DType: tt.BF16, Layout: tt.Tile, Memory: m}
	if k.input, err = p.alloc(is); err != nil {
		return nil, err
	}
	if err := p.write(k.input, tt.HostBF16(is.Shape, tt.Tile, randBF16(r, is.Volume(), 1))); err != nil {
		return nil, err
	}
	if k.idx, err = p.alloc(dram([]int{b}, tt.INT32, tt.RowMajor)); err != nil {
		return nil, err
	}
	if k.pt, err = p.alloc(dram([]int{b, w}, tt.INT32, tt.RowMajor)); err != nil {
		return nil, err
	}
	perm := r.Perm(blocks)
	var flat []int32
	for u := 0; u < b; u++ {
		row := make([]int32, w)
		for j := range row {
			row[j] = int32(perm[(u*w+j)%blocks])
		}
		k.rows = append(k.rows, row)
		flat = append(flat, row...)
	}
	return k, p.write(k.pt, tt.HostInt32([]int{b, w}, tt.RowMajor, flat))
}

func (k *kv) positions(p *Pair, pos []int32) error {
	return p.write(k.idx, tt.HostInt32([]int{k.b}, tt.RowMajor, pos))
}

func (k *kv) update(i int) tt.Op {
	idx, pt := k.idx[i], k.pt[i]
	return tt.PagedUpdateCache{Cache: k.cache[i], Input: k.input[i], UpdateIdxs: &idx, PageTable: &pt}
}

// caseUpdateCache: tensor mode through the page table, users at block
// boundaries (rows 31, 32, 63, 64) and a -1 user that must be skipped.
func caseUpdateCache(p *Pair) error {
	r := rand.New(rand.NewPCG(7, 8))
	k, err := newKV(p, r, 4, 16, 4, 0)
	if err != nil {
		return err
	}
	for _, pos := range [][]int32{{31, -1, 32, 95}, {32, 0, 63, 64}, {-1, -1, 127, 96}} {
		if err := k.positions(p, pos); err != nil {
			return err
		}
		if err := p.op("paged_update_cache", k.update); err != nil {
			return err
		}
		if err := p.exact(fmt.Sprintf("cache after update at %v", pos), k.cache); err != nil {
			return err
		}
	}
	p.Note("3 updates of 4 users, boundary rows and -1 users")
	return nil
}

// caseUpdateCacheList: the list form (offsets baked on the host) on a
// non-paged cache [B, heads, S, D].
func caseUpdateCacheList(p *Pair) error {
	r := rand.New(rand.NewPCG(9, 10))
	const b = 4
	cs := dram([]int{b, 2, 64, 64}, tt.BF16, tt.Tile)
	cache, err := p.alloc(cs)
	if err != nil {
		return err
	}
	if err := p.write(cache, tt.HostBF16(cs.Shape, tt.Tile, randBF16(r, cs.Volume(), 1))); err != nil {
		return err
	}
	is := tt.Spec{Shape: []int{1, b, 2, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(b, [2]int{32, 64})}
	in, err := p.alloc(is)
	if err != nil {
		return err
	}
	if err := p.write(in, tt.HostBF16(is.Shape, tt.Tile, randBF16(r, is.Volume(), 1))); err != nil {
		return err
	}
	list := []int32{0, 31, 32, 63}
	if err := p.op("paged_update_cache (list)", func(i int) tt.Op {
		return tt.PagedUpdateCache{Cache: cache[i], Input: in[i], UpdateIdxsList: list}
	}); err != nil {
		return err
	}
	return p.exact("cache after list update", cache)
}

func caseFusedUpdateCache(p *Pair) error {
	r := rand.New(rand.NewPCG(11, 12))
	k, err := newKV(p, r, 4, 16, 4, 0)
	if err != nil {
		return err
	}
	v, err := newKV(p, r, 4, 16, 4, 4) // V's input on cores 4..7
	if err != nil {
		return err
	}
	if err := k.positions(p, []int32{33, -1, 0, 127}); err != nil {
		return err
	}
	if err := p.op("paged_fused_update_cache", func(i int) tt.Op {
		idx, pt := k.idx[i], k.pt[i]
		return tt.PagedFusedUpdateCache{Cache1: k.cache[i], Input1: k.input[i], Cache2: v.cache[i], Input2: v.input[i], UpdateIdxs: &idx, PageTable: &pt}
	}); err != nil {
		return err
	}
	if err := p.exact("K cache", k.cache); err != nil {
		return err
	}
	return p.exact("V cache", v.cache)
}

// caseFillCache: a prompt's tiles through a page-table row, a -1 block
// skipped; batch_idx as an attribute and as a tensor.
func caseFillCache(p *Pair) error {
	r := rand.New(rand.NewPCG(13, 14))
	k, err := newKV(p, r, 4, 16, 4, 0)
	if err != nil {
		return err
	}
	row := []int32{5, -1, 3, 0}
	flat := append(append(append(append([]int32{}, k.rows[0]...), k.rows[1]...), row...), k.rows[3]...)
	if err := p.write(k.pt, tt.HostInt32([]int{4, 4}, tt.RowMajor, flat)); err != nil {
		return err
	}
	is := dram([]int{1, 2, 96, 64}, tt.BF16, tt.Tile)
	in, err := p.alloc(is)
	if err != nil {
		return err
	}
	if err := p.write(in, tt.HostBF16(is.Shape, tt.Tile, randBF16(r, is.Volume(), 1))); err != nil {
		return err
	}
	if err := p.op("paged_fill_cache", func(i int) tt.Op {
		return tt.PagedFillCache{Cache: k.cache[i], Input: in[i], PageTable: k.pt[i], BatchIdx: 2}
	}); err != nil {
		return err
	}
	if err := p.exact("cache after fill (batch 2, block 1 = -1)", k.cache); err != nil {
		return err
	}
	bi, err := p.alloc(dram([]int{1}, tt.INT32, tt.RowMajor))
	if err != nil {
		return err
	}
	if err := p.write(bi, tt.HostInt32([]int{1}, tt.RowMajor, []int32{3})); err != nil {
		return err
	}
	if err := p.op("paged_fill_cache (batch_idx_tensor)", func(i int) tt.Op {
		b := bi[i]
		return tt.PagedFillCache{Cache: k.cache[i], Input: in[i], PageTable: k.pt[i], BatchIdxTensor: &b}
	}); err != nil {
		return err
	}
	return p.exact("cache after fill (batch_idx_tensor = 3)", k.cache)
}

// caseReplay: a captured paged_update_cache + plus_one replays at the
// addresses baked at capture; after the index tensor is freed and its
// address handed to a new tensor, the replay reads and increments that one.
func caseReplay(p *Pair) error {
	r := rand.New(rand.NewPCG(15, 16))
	k, err := newKV(p, r, 4, 16, 4, 0)
	if err != nil {
		return err
	}
	if err := k.positions(p, []int32{30, -1, 62, 95}); err != nil {
		return err
	}
	step := []func(int) tt.Op{k.update, func(i int) tt.Op { return tt.PlusOne{Input: k.idx[i], SkipNegativeEntries: true} }}
	for _, mk := range step { // warm the program cache
		if err := p.op("warm-up", mk); err != nil {
			return err
		}
	}
	var ids [2]tt.TraceID
	for i, d := range p.Devs() {
		if ids[i], err = d.BeginCapture(); err != nil {
			return err
		}
		for _, mk := range step {
			if err := run(d, mk(i)); err != nil {
				return fmt.Errorf("capture on %s: %v", []string{"sim", "device"}[i], err)
			}
		}
		if err := d.EndCapture(ids[i]); err != nil {
			return err
		}
	}
	for n := 0; n < 3; n++ {
		if err := sameErr("execute_trace", p.Sim.Execute(ids[0]), p.Card.Execute(ids[1])); err != nil {
			return err
		}
	}
	if err := p.exact("cache after 3 replays", k.cache); err != nil {
		return err
	}
	if err := p.exact("update index after 3 replays", k.idx); err != nil {
		return err
	}
	if err := p.free(k.idx); err != nil {
		return err
	}
	other, err := p.alloc(dram([]int{4}, tt.INT32, tt.RowMajor))
	if err != nil {
		return err
	}
	if other[1].Addr != k.idx[1].Addr {
		return fmt.Errorf("freed index address %#x not reused (got %#x)", k.idx[1].Addr, other[1].Addr)
	}
	if err := p.write(other, tt.HostInt32([]int{4}, tt.RowMajor, []int32{-1, 3, 64, -1})); err != nil {
		return err
	}
	if err := sameErr("execute_trace after free", p.Sim.Execute(ids[0]), p.Card.Execute(ids[1])); err != nil {
		return err
	}
	if err := p.exact("cache after a replay through a reused address", k.cache); err != nil {
		return err
	}
	if err := p.exact("the tensor now at the baked address", other); err != nil {
		return err
	}
	p.Note("4 replays, one through a reused address")
	return sameErr("release_trace", p.Sim.Release(ids[0]), p.Card.Release(ids[1]))
}

func caseEltwise(p *Pair, silu bool) error {
	r := rand.New(rand.NewPCG(17, 18))
	s := dram([]int{1, 1, 40, 96}, tt.BF16, tt.Tile)
	var ts [3][2]tt.Tensor
	for j := range ts {
		var err error
		if ts[j], err = p.alloc(s); err != nil {
			return err
		}
	}
	for j := 0; j < 2; j++ {
		if err := p.write(ts[j], tt.HostBF16(s.Shape, tt.Tile, randBF16(r, s.Volume(), 3))); err != nil {
			return err
		}
	}
	name := "add"
	if silu {
		name = "multiply"
	}
	if err := p.op(name, func(i int) tt.Op {
		if silu {
			return tt.SiluMul{Gate: ts[0][i], Up: ts[1][i], Output: ts[2][i]}
		}
		return tt.Add{A: ts[0][i], B: ts[1][i], Output: ts[2][i]}
	}); err != nil {
		return err
	}
	return p.close(name, ts[2])
}

func caseLinear(p *Pair) error {
	r := rand.New(rand.NewPCG(19, 20))
	const m, kk, n = 8, 256, 96
	in, err := p.alloc(dram([]int{1, 1, m, kk}, tt.BF16, tt.Tile))
	if err != nil {
		return err
	}
	for _, tr := range []bool{false, true} {
		ws := []int{1, 1, kk, n}
		if tr {
			ws = []int{1, 1, n, kk}
		}
		w, err := p.alloc(dram(ws, tt.BF16, tt.Tile))
		if err != nil {
			return err
		}
		out, err := p.alloc(dram([]int{1, 1, m, n}, tt.BF16, tt.Tile))
		if err != nil {
			return err
		}
		if err := p.write(in, tt.HostBF16([]int{1, 1, m, kk}, tt.Tile, randBF16(r, m*kk, 1))); err != nil {
			return err
		}
		if err := p.write(w, tt.HostBF16(ws, tt.Tile, randBF16(r, kk*n, 0.1))); err != nil {
			return err
		}
		if err := p.op("linear", func(i int) tt.Op { return tt.Linear{Input: in[i], Weight: w[i], Output: out[i], TransposeB: tr} }); err != nil {
			return err
		}
		if err := p.close("linear", out); err != nil {
			return fmt.Errorf("transpose_b=%v: %v", tr, err)
		}
	}
	return nil
}

// caseArgmax: distinct values, so the index is exact.
func caseArgmax(p *Pair) error {
	r := rand.New(rand.NewPCG(21, 22))
	const rows, w = 4, 200
	in, err := p.alloc(dram([]int{1, 1, rows, w}, tt.BF16, tt.Tile))
	if err != nil {
		return err
	}
	out, err := p.alloc(dram([]int{rows}, tt.UINT32, tt.RowMajor))
	if err != nil {
		return err
	}
	v := make([]bf16.BF16, rows*w)
	for i := 0; i < rows; i++ {
		for j, x := range r.Perm(w) {
			v[i*w+j] = bf16.FromFloat32(float32(x) / 8)
		}
	}
	if err := p.write(in, tt.HostBF16([]int{1, 1, rows, w}, tt.Tile, v)); err != nil {
		return err
	}
	if err := p.op("argmax", func(i int) tt.Op { return tt.Argmax{Input: in[i], Output: out[i]} }); err != nil {
		return err
	}
	return p.exact("argmax indices", out)
}
