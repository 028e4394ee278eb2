package conform

import (
	"fmt"
	"strings"

	"github.com/offcard/offcard/tt"
)

// caseRefusalTexts feeds both devices refusals whose texts carry each kind
// of format argument ttnn fills in its own way (sim's TestChecksTable holds
// sim to ttnn's filled text; this holds the device to sim's, whole): a
// DataType ("DataType::UINT32", tt_metal/impl/tensor/tensor_types.cpp:126),
// a Layout, a TensorMemoryLayout and a BufferType (enchantum's scoped
// names, tt_stl/tt_stl/fmt.hpp:54-64), and a CoreRangeSet spanning two rows
// of the worker grid (tt_metal/common/core_coord.cpp:354-365,
// tt_metal/common/work_split.cpp:77-143).
func caseRefusalTexts(p *Pair) error {
	const b, d = 2, 32
	type mk func() (func(i int) tt.Op, error)
	t := func(s tt.Spec) ([2]tt.Tensor, error) { return p.alloc(s) }
	spec := func(dt tt.DType, l tt.Layout, m tt.MemoryConfig, shape ...int) tt.Spec {
		return tt.Spec{Shape: shape, DType: dt, Layout: l, Memory: m}
	}
	dramT := func(dt tt.DType, l tt.Layout, shape ...int) tt.Spec { return spec(dt, l, tt.DRAMInterleaved, shape...) }
	// sdpa: paged SDPA decode, b users, 2 query heads over one KV head, with
	// one operand or the output config changed by edit.
	sdpa := func(edit func(o []*tt.PagedSDPADecode, ts map[string][2]tt.Tensor) error) mk {
		return func() (func(i int) tt.Op, error) {
			ts := map[string][2]tt.Tensor{}
			for name, s := range map[string]tt.Spec{
				"q": dramT(tt.BF16, tt.Tile, 1, b, 2, d), "k": dramT(tt.BF16, tt.Tile, 4, 1, 32, d), "v": dramT(tt.BF16, tt.Tile, 4, 1, 32, d),
				"pt": dramT(tt.INT32, tt.RowMajor, b, 2), "pos": dramT(tt.INT32, tt.RowMajor, b),
			} {
				x, err := t(s)
				if err != nil {
					return nil, err
				}
				ts[name] = x
			}
			var ops [2]tt.PagedSDPADecode
			for i := range ops {
				ops[i] = tt.PagedSDPADecode{Q: ts["q"][i], K: ts["k"][i], V: ts["v"][i], PageTable: ts["pt"][i], CurPos: ts["pos"][i]}
			}
			if err := edit([]*tt.PagedSDPADecode{&ops[0], &ops[1]}, ts); err != nil {
				return nil, err
			}
			return func(i int) tt.Op { return ops[i] }, nil
		}
	}
	swap := func(field string, s tt.Spec) func(o []*tt.PagedSDPADecode, ts map[string][2]tt.Tensor) error {
		return func(o []*tt.PagedSDPADecode, ts map[string][2]tt.Tensor) error {
			x, err := t(s)
			if err != nil {
				return err
			}
			for i := range o {
				switch field {
				case "q":
					o[i].Q = x[i]
				case "pos":
					o[i].CurPos = x[i]
				}
			}
			return nil
		}
	}
	argmax := func(out tt.Spec) mk {
		return func() (func(i int) tt.Op, error) {
			in, err := t(dramT(tt.BF16, tt.RowMajor, 1, 1, 1, 64))
			if err != nil {
				return nil, err
			}
			o, err := t(out)
			if err != nil {
				return nil, err
			}
			return func(i int) tt.Op { return tt.Argmax{Input: in[i], Output: o[i]} }, nil
		}
	}
	// fused: two update pairs whose input grids differ in size, the second
	// from core 4 over 8 cores (a row's end and the next row's start).
	fused := func() (func(i int) tt.Op, error) {
		var ts [6][2]tt.Tensor
		var err error
		for j, s := range []tt.Spec{
			dramT(tt.BF16, tt.Tile, 8, 2, 32, 64),
			spec(tt.BF16, tt.Tile, tt.L1HeightSharded(4, [2]int{32, 64}), 1, 4, 2, 64),
			dramT(tt.BF16, tt.Tile, 8, 2, 32, 64),
			spec(tt.BF16, tt.Tile, tt.L1HeightShardedAt(4, 8, [2]int{32, 64}), 1, 4, 2, 64),
			dramT(tt.INT32, tt.RowMajor, 4),
			dramT(tt.INT32, tt.RowMajor, 4, 2),
		} {
			if ts[j], err = t(s); err != nil {
				return nil, err
			}
		}
		return func(i int) tt.Op {
			return tt.PagedFusedUpdateCache{Cache1: ts[0][i], Input1: ts[1][i], Cache2: ts[2][i], Input2: ts[3][i], UpdateIdxs: &ts[4][i], PageTable: &ts[5][i]}
		}, nil
	}
	// concat: nlp_concat_heads_decode of an input sharded by m, users
	// users of one head (the refusals come before the output's checks).
	concat := func(users int, m tt.MemoryConfig) mk {
		return func() (func(i int) tt.Op, error) {
			in, err := t(spec(tt.BF16, tt.Tile, m, 1, users, 1, d))
			if err != nil {
				return nil, err
			}
			out, err := t(spec(tt.BF16, tt.Tile, tt.L1WidthSharded(1, [2]int{32, d}), 1, 1, 32, d))
			if err != nil {
				return nil, err
			}
			return func(i int) tt.Op { return tt.ConcatHeads{Input: in[i], Output: out[i], NumHeads: 1} }, nil
		}
	}
	// rope: decode rotary_embedding_hf of users users, heads heads of
	// head_dim hd, one user per core, into an output of config m.
	rope := func(users, heads, hd int, m tt.MemoryConfig) mk {
		return func() (func(i int) tt.Op, error) {
			sh := tt.L1HeightSharded(users, [2]int{32, hd})
			in, err := t(spec(tt.BF16, tt.Tile, sh, 1, users, heads, hd))
			if err != nil {
				return nil, err
			}
			cs, err := t(spec(tt.BF16, tt.Tile, sh, 1, users, 1, hd))
			if err != nil {
				return nil, err
			}
			return func(i int) tt.Op { return tt.RotaryEmbeddingHF{Input: in[i], Cos: cs[i], Sin: cs[i], Memory: m} }, nil
		}
	}
	// linear: [1,1,32,32]·[1,1,32,64] in DRAM, the weight's and bias's
	// specs given (bias nil: none).
	linear := func(w tt.Spec, bias *tt.Spec) mk {
		return func() (func(i int) tt.Op, error) {
			var ts [4][2]tt.Tensor
			var err error
			specs := []tt.Spec{dramT(tt.BF16, tt.Tile, 1, 1, 32, 32), w, dramT(tt.BF16, tt.Tile, 1, 1, 32, 64)}
			if bias != nil {
				specs = append(specs, *bias)
			}
			for j, s := range specs {
				if ts[j], err = t(s); err != nil {
					return nil, err
				}
			}
			return func(i int) tt.Op {
				o := tt.Linear{Input: ts[0][i], Weight: ts[1][i], Output: ts[2][i]}
				if bias != nil {
					o.Bias = &ts[3][i]
				}
				return o
			}, nil
		}
	}
	w64 := dramT(tt.BF16, tt.Tile, 1, 1, 32, 64)
	biasOf := func(l tt.Layout, shape ...int) *tt.Spec { s := dramT(tt.BF16, l, shape...); return &s }
	for _, c := range []struct {
		name string
		mk   mk
	}{
		{"linear, a ROW_MAJOR bias one tile high (fused: its layout)", linear(w64, biasOf(tt.RowMajor, 1, 1, 32, 2))},
		{"linear, a bias one tile narrower (fused: its padded width)", linear(w64, biasOf(tt.Tile, 1, 1, 1, 32))},
		{"linear, a bias narrower inside its tile (fused: its width)", linear(w64, biasOf(tt.Tile, 1, 1, 1, 40))},
		{"linear, a batched weight (not in the contract)", linear(dramT(tt.BF16, tt.Tile, 2, 1, 16, 64), nil)},
		{"decode rotary into DRAM (its output CB is bound to the output's buffer)", rope(b, 1, d, tt.DRAMInterleaved)},
		{"decode rotary of 32 users into L1 interleaved: fewer tiles per bank than a shard", rope(32, 16, 128, tt.L1Interleaved)},
		{"add of two ROW_MAJOR operands into an output", func() (func(i int) tt.Op, error) {
			x, err := t(dramT(tt.BF16, tt.RowMajor, 1, 1, 2, 64))
			if err != nil {
				return nil, err
			}
			return func(i int) tt.Op { return tt.Add{A: x[i], B: x[i], Output: x[i]} }, nil
		}},
		{"concat heads, users' grid from core 1 (on_subcoregrids without sub-core grids)", concat(b, tt.L1HeightShardedAt(1, b, [2]int{32, d}))},
		{"concat heads, 14 users' grid past a row of either arch", concat(14, tt.L1HeightSharded(14, [2]int{32, d}))},
		{"concat heads, 12 users 8 wide: a row and 4 cores", concat(12, func() tt.MemoryConfig {
			m := tt.L1HeightSharded(12, [2]int{32, d})
			m.Shard.GridWidth = 8
			return m
		}())},
		{"concat heads, more cores than users", concat(b, tt.L1HeightSharded(b+1, [2]int{32, d}))},
		{"concat heads, a shard two tiles high", concat(b, tt.L1HeightSharded(b, [2]int{64, d}))},
		{"sdpa decode, a UINT32 cur_pos (DataType)", sdpa(swap("pos", dramT(tt.UINT32, tt.RowMajor, b)))},
		{"sdpa decode, a TILE cur_pos (Layout)", sdpa(swap("pos", dramT(tt.INT32, tt.Tile, 1, b)))},
		{"sdpa decode, an L1-interleaved Q (BufferType)", sdpa(swap("q", spec(tt.BF16, tt.Tile, tt.L1Interleaved, 1, b, 2, d)))},
		{"sdpa decode, a width-sharded output (TensorMemoryLayout)", sdpa(func(o []*tt.PagedSDPADecode, _ map[string][2]tt.Tensor) error {
			for i := range o {
				o[i].Memory = tt.L1WidthSharded(1, [2]int{64, d})
			}
			return nil
		})},
		{"argmax, an INT32 output (DataType)", argmax(dramT(tt.INT32, tt.RowMajor, 1, 1, 1, 1))},
		{"argmax, a TILE output (Layout)", argmax(dramT(tt.UINT32, tt.Tile, 1, 1, 1, 1))},
		{"fused update cache, grids of 4 and 8 cores (CoreRangeSet)", fused},
	} {
		op, err := c.mk()
		if err != nil {
			return fmt.Errorf("%s: %v", c.name, err)
		}
		if err := p.refused(c.name, op); err != nil {
			return err
		}
	}
	return nil
}

// caseFreedHandle: a freed tensor is a deallocated ttnn tensor. An op
// through it fails at ttnn's launch ("Input Tensor is not allocated",
// ttnn/api/ttnn/device_operation.hpp:451), a write or read of it at its
// storage ("Tensor is not allocated", ttnn/core/tensor/storage.cpp:165),
// on both devices with the same text.
func caseFreedHandle(p *Pair) error {
	s := tt.Spec{Shape: []int{4}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}
	x, err := p.alloc(s)
	if err != nil {
		return err
	}
	if err := p.free(x); err != nil {
		return err
	}
	if err := p.refused("plus_one of a freed tensor", func(i int) tt.Op { return tt.PlusOne{Input: x[i]} }); err != nil {
		return err
	}
	h := tt.HostInt32([]int{4}, tt.RowMajor, []int32{1, 2, 3, 4})
	es, ec := p.Sim.WriteHost(x[0], h), p.Card.WriteHost(x[1], h)
	if err := sameErr("write of a freed tensor", es, ec); err != nil {
		return err
	}
	_, es = p.Sim.ReadHost(x[0])
	_, ec = p.Card.ReadHost(x[1])
	if err := sameErr("read of a freed tensor", es, ec); err != nil {
		return err
	}
	if es == nil {
		return fmt.Errorf("read of a freed tensor: accepted by both")
	}
	p.Note("op, write and read of a freed tensor refused alike: %v", es)
	return nil
}

// caseOutOfMemory: an allocation no bank can hold is refused with
// BankManager's text, the bank's size and its allocator's statistics
// filled in (tt_metal/impl/allocator/bank_manager.cpp:449-462,
// algorithms/free_list_opt.cpp:402-431), in DRAM and in L1, with a small
// tensor live so the statistics are not the empty bank's.
func caseOutOfMemory(p *Pair) error {
	x, err := p.alloc(tt.Spec{Shape: []int{32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1Interleaved})
	if err != nil {
		return err
	}
	for _, s := range []tt.Spec{
		{Shape: []int{1 << 22, 1 << 12}, DType: tt.FP32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved},
		{Shape: []int{1 << 18, 1 << 10}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1Interleaved},
	} {
		_, err := p.alloc(s)
		if err == nil {
			return fmt.Errorf("allocate %v: accepted by both", s)
		}
		if !tt.HasMsg(err, "Out of Memory: Not enough space to allocate ") || !strings.Contains(err.Error(), "largest free block: ") {
			return err
		}
		p.Note("%v refused alike: %v", s, err)
	}
	return p.free(x)
}
