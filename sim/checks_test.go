package sim

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/offcard/offcard/tt"
)

// The checks table (tt/checks.tsv): every TT_FATAL / TT_THROW on the
// validate path of the contract's ops at tt-metal's pin. Each entry the
// table marks covered has a row here that feeds the simulator the offending
// input; the simulator must refuse it with the table's text (fmt
// placeholders filled with anything), as an *tt.Error. Entries left out
// carry their reason in the table.

// ckFix is a fresh device with helpers to allocate tensors of any spec.
type ckFix struct {
	t *testing.T
	d *Device
	// record: run keeps the op in last instead of running it.
	record bool
	last   tt.Op
}

func (f *ckFix) alloc(dt tt.DType, l tt.Layout, m tt.MemoryConfig, shape ...int) tt.Tensor {
	f.t.Helper()
	if m == (tt.MemoryConfig{}) {
		m = tt.DRAMInterleaved
	}
	x, err := f.d.Allocate(tt.Spec{Shape: shape, DType: dt, Layout: l, Memory: m})
	if err != nil {
		f.t.Fatalf("allocate %v %v %v %v: %v", dt, l, m, shape, err)
	}
	return x
}

func (f *ckFix) p(x tt.Tensor) *tt.Tensor { return &x }

func (f *ckFix) run(op tt.Op) error {
	if f.record {
		f.last = op
		return nil
	}
	_, err := f.d.Run(op)
	return err
}

var (
	dram = tt.DRAMInterleaved
	l1   = tt.L1Interleaved
)

const ckB, ckD = 2, 32

// Good ops, one per kind; each case changes one thing.

func (f *ckFix) embedding() tt.Embedding {
	return tt.Embedding{Input: f.alloc(tt.UINT32, tt.RowMajor, dram, 1, 1, 1, ckB), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 8, ckD),
		Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, ckB, ckD)}
}

func (f *ckFix) rmsNorm() tt.RMSNorm {
	return tt.RMSNorm{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, ckD), Weight: f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 1, ckD), Epsilon: 1e-6}
}

// mmW is linear of an input [1,1,m,k] in DRAM by a weight [1,1,k,n] in wm
// into DRAM.
func (f *ckFix) mmW(m, k, n int, wm tt.MemoryConfig) tt.Linear {
	return tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, m, k), Weight: f.alloc(tt.BF16, tt.Tile, wm, 1, 1, k, n),
		Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, m, n)}
}

func (f *ckFix) linear() tt.Linear {
	return tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 32), Weight: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64),
		Output: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64)}
}

// createHeads: 4 query heads over 2 KV heads of head_dim 32, ckB users.
func (f *ckFix) createHeads(dt tt.DType, l tt.Layout, m tt.MemoryConfig, shape ...int) tt.NLPCreateQKVHeadsDecode {
	if shape == nil {
		shape = []int{1, 1, ckB, 8 * ckD}
	}
	return tt.NLPCreateQKVHeadsDecode{Input: f.alloc(dt, l, m, shape...), NumHeads: 4, NumKVHeads: 2}
}

// rope: decode-mode rotary_embedding_hf on [1, B, 1, D] height-sharded.
func (f *ckFix) ropeSpec(d int) (tt.Spec, tt.Spec) {
	in := tt.Spec{Shape: []int{1, ckB, 1, d}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(ckB, [2]int{32, d})}
	return in, in
}

func (f *ckFix) rope(in, cos, sin tt.Spec) tt.RotaryEmbeddingHF {
	a := func(s tt.Spec) tt.Tensor {
		f.t.Helper()
		x, err := f.d.Allocate(s)
		if err != nil {
			f.t.Fatalf("allocate %v: %v", s, err)
		}
		return x
	}
	return tt.RotaryEmbeddingHF{Input: a(in), Cos: a(cos), Sin: a(sin)}
}

// llama: decode-mode rotary_embedding_llama on [1, B, 1, D].
func (f *ckFix) llama(fn func(in, cs, sn, tm *tt.Spec)) tt.RotaryEmbeddingLlama {
	in, cs := f.ropeSpec(ckD)
	sn := cs
	tm := tt.Spec{Shape: []int{1, 1, 32, 32}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(1, [2]int{32, 32})}
	in.Shape, cs.Shape, sn.Shape, tm.Shape = append([]int(nil), in.Shape...), append([]int(nil), cs.Shape...), append([]int(nil), sn.Shape...), append([]int(nil), tm.Shape...)
	fn(&in, &cs, &sn, &tm)
	a := func(s tt.Spec) tt.Tensor {
		f.t.Helper()
		x, err := f.d.Allocate(s)
		if err != nil {
			f.t.Fatalf("allocate %v: %v", s, err)
		}
		return x
	}
	return tt.RotaryEmbeddingLlama{Input: a(in), Cos: a(cs), Sin: a(sn), TransMat: a(tm)}
}

func ropeWith(s tt.Spec, fn func(*tt.Spec)) tt.Spec {
	s.Shape = append([]int(nil), s.Shape...)
	fn(&s)
	return s
}

// updateCache: 4 users, 2 KV heads of head_dim 64, blocks of 32, 8 blocks,
// 2 blocks a user.
func (f *ckFix) updateCache() tt.PagedUpdateCache {
	return tt.PagedUpdateCache{
		Cache:      f.alloc(tt.BF16, tt.Tile, dram, 8, 2, 32, 64),
		Input:      f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(4, [2]int{32, 64}), 1, 4, 2, 64),
		UpdateIdxs: f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 4)),
		PageTable:  f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 4, 2)),
	}
}

func (f *ckFix) ucInput(m tt.MemoryConfig, dt tt.DType, l tt.Layout) tt.Tensor {
	return f.alloc(dt, l, m, 1, 4, 2, 64)
}

func (f *ckFix) fill() tt.PagedFillCache {
	return tt.PagedFillCache{Cache: f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 32, 32), Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 32),
		PageTable: f.alloc(tt.INT32, tt.RowMajor, dram, 2, 4)}
}

// sdpa: paged SDPA decode, ckB users, 2 query heads over kvh KV heads.
func (f *ckFix) sdpa(kvh int) tt.PagedSDPADecode {
	return tt.PagedSDPADecode{Q: f.alloc(tt.BF16, tt.Tile, dram, 1, ckB, 2, ckD), K: f.alloc(tt.BF16, tt.Tile, dram, 4, kvh, 32, ckD),
		V: f.alloc(tt.BF16, tt.Tile, dram, 4, kvh, 32, ckD), PageTable: f.alloc(tt.INT32, tt.RowMajor, dram, ckB, 2),
		CurPos: f.alloc(tt.INT32, tt.RowMajor, dram, ckB)}
}

func (f *ckFix) concat(in tt.Tensor) tt.ConcatHeads {
	return tt.ConcatHeads{Input: in, Output: f.alloc(tt.BF16, tt.Tile, tt.L1WidthSharded(1, [2]int{32, ckD}), 1, 1, ckB, ckD), NumHeads: 1}
}

func (f *ckFix) concatIn(dt tt.DType, l tt.Layout, m tt.MemoryConfig, shape ...int) tt.Tensor {
	if shape == nil {
		shape = []int{1, ckB, 1, ckD}
	}
	if m == (tt.MemoryConfig{}) {
		m = tt.L1HeightSharded(shape[1], [2]int{32, ckD})
	}
	return f.alloc(dt, l, m, shape...)
}

func (f *ckFix) argmax(in, out tt.Tensor) tt.Argmax { return tt.Argmax{Input: in, Output: out} }

func (f *ckFix) argIn() tt.Tensor { return f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 1, 64) }

func (f *ckFix) argOut() tt.Tensor { return f.alloc(tt.UINT32, tt.RowMajor, dram, 1, 1, 1, 1) }

// ropePrefill: rotary_embedding_hf in prefill mode, [1, 2, 32, 32].
func (f *ckFix) ropePrefill() tt.RotaryEmbeddingHF {
	return tt.RotaryEmbeddingHF{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 2, 32, ckD), Cos: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, ckD),
		Sin: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, ckD), Prefill: true}
}

func (f *ckFix) sdpaPre(q, k, v []int) tt.SDPA {
	return tt.SDPA{Q: f.alloc(tt.BF16, tt.Tile, dram, q...), K: f.alloc(tt.BF16, tt.Tile, dram, k...), V: f.alloc(tt.BF16, tt.Tile, dram, v...), Causal: true}
}

// fusedCases: paged_fused_update_cache_device_operation.cpp makes the
// same checks on each (cache, input) pair; each of these entries is fed the
// paged_update_cache case named, as pair 1.
var fusedCases = map[string]string{
	"paged_fused_update_cache.4":  "paged_update_cache.5",
	"paged_fused_update_cache.5":  "paged_update_cache.6",
	"paged_fused_update_cache.6":  "paged_update_cache.7",
	"paged_fused_update_cache.7":  "paged_update_cache.8",
	"paged_fused_update_cache.11": "paged_update_cache.19",
	"paged_fused_update_cache.12": "paged_update_cache.20",
	"paged_fused_update_cache.14": "paged_update_cache.22",
	"paged_fused_update_cache.15": "paged_update_cache.23",
	"paged_fused_update_cache.17": "paged_update_cache.25",
	"paged_fused_update_cache.18": "paged_update_cache.27",
	"paged_fused_update_cache.19": "paged_update_cache.28",
	"paged_fused_update_cache.20": "paged_update_cache.29",
	"paged_fused_update_cache.21": "paged_update_cache.30",
	"paged_fused_update_cache.25": "paged_update_cache.34",
	"paged_fused_update_cache.28": "paged_update_cache.37",
	"paged_fused_update_cache.29": "paged_update_cache.38",
	"paged_fused_update_cache.30": "paged_update_cache.39",
	"paged_fused_update_cache.34": "paged_update_cache.44",
	"paged_fused_update_cache.35": "paged_update_cache.45",
}

func init() {
	for id, from := range fusedCases {
		checkCases[id] = fusedFrom(from)
	}
}

// fusedFrom builds a paged_fused_update_cache case from a paged_update_cache
// one: the faulty op's tensors and attributes as pair 1, a good pair 2 on
// cores 8-11.
func fusedFrom(id string) func(f *ckFix) error {
	return func(f *ckFix) error {
		f.record = true
		_ = checkCases[id](f)
		f.record = false
		o, ok := f.last.(tt.PagedUpdateCache)
		if !ok {
			f.t.Fatalf("%s builds no paged_update_cache op", id)
		}
		in2 := f.alloc(tt.BF16, tt.Tile, tt.L1HeightShardedAt(8, 4, [2]int{32, 64}), 1, 4, 2, 64)
		return f.run(tt.PagedFusedUpdateCache{Cache1: o.Cache, Input1: o.Input, Cache2: f.alloc(tt.BF16, tt.Tile, dram, 8, 2, 32, 64), Input2: in2,
			UpdateIdxs: o.UpdateIdxs, UpdateIdxsList: o.UpdateIdxsList, PageTable: o.PageTable, ShareCache: o.ShareCache, BatchOffset: o.BatchOffset})
	}
}

var (
	q4  = []int{1, 2, 32, ckD}
	kv4 = []int{1, 1, 32, ckD}
)

// checkCases maps a table id to the call that must fail with its text.
var checkCases = map[string]func(f *ckFix) error{
	// device_operation.hpp launch: every tensor argument, before the op.
	"launch.2": func(f *ckFix) error {
		o := f.rmsNorm()
		if err := f.d.Free(o.Weight); err != nil {
			f.t.Fatal(err)
		}
		return f.run(o)
	},
	// copy_host_to_device_tensor (tensor_apis.cpp enqueue_write_tensor).
	"write.2": func(f *ckFix) error {
		x := f.alloc(tt.INT32, tt.RowMajor, dram, 4)
		return f.d.WriteHost(x, tt.HostInt32([]int{3}, tt.RowMajor, []int32{1, 2, 3}))
	},
	"write.3": func(f *ckFix) error {
		x := f.alloc(tt.UINT32, tt.RowMajor, dram, 2)
		return f.d.WriteHost(x, tt.HostInt32([]int{2}, tt.RowMajor, []int32{1, 2}))
	},
	"write.4": func(f *ckFix) error {
		x := f.alloc(tt.INT32, tt.Tile, dram, 1, 32)
		return f.d.WriteHost(x, tt.HostInt32([]int{1, 32}, tt.RowMajor, make([]int32, 32)))
	},
	// Capture: a host write, a host read.
	"capture.1": func(f *ckFix) error {
		x := f.alloc(tt.INT32, tt.RowMajor, dram, 2)
		if _, err := f.d.BeginCapture(); err != nil {
			f.t.Fatal(err)
		}
		return f.d.WriteHost(x, tt.HostInt32([]int{2}, tt.RowMajor, []int32{1, 2}))
	},
	"capture.2": func(f *ckFix) error {
		x := f.alloc(tt.INT32, tt.RowMajor, dram, 2)
		if _, err := f.d.BeginCapture(); err != nil {
			f.t.Fatal(err)
		}
		_, err := f.d.ReadHost(x)
		return err
	},
	// Traces (mesh_device.cpp, mesh_trace.cpp).
	"trace.1": func(f *ckFix) error {
		if _, err := f.d.BeginCapture(); err != nil {
			f.t.Fatal(err)
		}
		_, err := f.d.BeginCapture()
		return err
	},
	"trace.3": func(f *ckFix) error {
		id, err := f.d.BeginCapture()
		if err != nil {
			f.t.Fatal(err)
		}
		return f.d.EndCapture(id + 1)
	},
	"trace.5": func(f *ckFix) error { return f.d.Execute(7) },
	"trace.6": func(f *ckFix) error {
		d, err := New(Options{TraceRegionSize: 1024})
		if err != nil {
			f.t.Fatal(err)
		}
		f.d = d
		x := f.alloc(tt.INT32, tt.RowMajor, dram, 4)
		if err := f.run(tt.PlusOne{Input: x}); err != nil { // warm the program cache
			f.t.Fatal(err)
		}
		id, err := f.d.BeginCapture()
		if err != nil {
			f.t.Fatal(err)
		}
		if err := f.run(tt.PlusOne{Input: x}); err != nil {
			f.t.Fatal(err)
		}
		return f.d.EndCapture(id)
	},
	// embedding_device_operation.cpp.
	"embedding.2": func(f *ckFix) error {
		o := f.embedding()
		o.Weight = f.alloc(tt.BF16, tt.Tile, dram, 8, ckD)
		return f.run(o)
	},
	"embedding.3": func(f *ckFix) error {
		o := f.embedding()
		o.Input = f.alloc(tt.INT32, tt.RowMajor, dram, 1, 1, 1, ckB)
		return f.run(o)
	},
	"embedding.4": func(f *ckFix) error {
		o := f.embedding()
		o.Weight = f.alloc(tt.FP32, tt.RowMajor, dram, 8, ckD)
		return f.run(o)
	},
	"embedding.5": func(f *ckFix) error {
		o := f.embedding()
		o.Input = f.alloc(tt.UINT32, tt.RowMajor, tt.L1HeightSharded(1, [2]int{1, ckB}), 1, 1, 1, ckB)
		return f.run(o)
	},
	"embedding.6": func(f *ckFix) error {
		o := f.embedding()
		o.Weight = f.alloc(tt.BF16, tt.RowMajor, tt.L1HeightSharded(8, [2]int{1, ckD}), 8, ckD)
		return f.run(o)
	},
	// rmsnorm.cpp, layernorm_device_operation.cpp.
	"rms_norm.1": func(f *ckFix) error {
		o := f.rmsNorm()
		o.Input = f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 32, ckD)
		return f.run(o)
	},
	"rms_norm.5": func(f *ckFix) error {
		o := f.rmsNorm()
		o.Input = f.alloc(tt.INT32, tt.Tile, dram, 1, 1, 32, ckD)
		return f.run(o)
	},
	"rms_norm.12": func(f *ckFix) error {
		o := f.rmsNorm()
		o.Weight = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64)
		return f.run(o)
	},
	"rms_norm.15": func(f *ckFix) error {
		o := f.rmsNorm()
		o.Weight = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 64, ckD)
		return f.run(o)
	},
	"rms_norm.17": func(f *ckFix) error {
		o := f.rmsNorm()
		o.Weight = f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 1, 64)
		return f.run(o)
	},
	"rms_norm.20": func(f *ckFix) error {
		o := f.rmsNorm()
		o.Weight = f.alloc(tt.INT32, tt.RowMajor, dram, 1, 1, 1, ckD)
		return f.run(o)
	},
	"rms_norm.31": func(f *ckFix) error {
		o := f.rmsNorm()
		o.Input = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(1, [2]int{32, ckD}), 1, 1, 32, ckD)
		return f.run(o)
	},
	// matmul_device_operation.cpp.
	"linear.3": func(f *ckFix) error {
		o := f.linear()
		o.Weight = f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 32, 64)
		return f.run(o)
	},
	"linear.13": func(f *ckFix) error {
		o := f.linear()
		o.Input = f.alloc(tt.INT32, tt.Tile, dram, 1, 1, 32, 32)
		return f.run(o)
	},
	// The bias checks, on the fused path (input and weight DRAM
	// interleaved, the bias one tile high: operations/matmul/matmul.cpp:100-155).
	"linear.27": func(f *ckFix) error {
		o := f.linear()
		o.Bias = f.p(f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 32, 2))
		return f.run(o)
	},
	"linear.30": func(f *ckFix) error {
		o := f.linear()
		o.Bias = f.p(f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1, 32))
		return f.run(o)
	},
	"linear.31": func(f *ckFix) error {
		o := f.linear()
		o.Bias = f.p(f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1, 40))
		return f.run(o)
	},
	// A sharded output under the config ttnn picks for interleaved
	// operands (create_simple_matmul_program_config).
	"linear.59": func(f *ckFix) error { // 4 blocks in a row: 1D, in0 multicast
		return f.run(tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 64), Weight: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 64, 2048),
			Output: f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(1, [2]int{32, 2048}), 1, 1, 32, 2048)})
	},
	"linear.75": func(f *ckFix) error { // 2 blocks in a column: 1D, in1 multicast
		return f.run(tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1024, 64), Weight: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 64, 64),
			Output: f.alloc(tt.BF16, tt.Tile, tt.L1WidthSharded(2, [2]int{1024, 32}), 1, 1, 1024, 64)})
	},
	"linear.123": func(f *ckFix) error { // 2x2 blocks: 2D
		return f.run(tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1024, 64), Weight: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 64, 1024),
			Output: f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(32, [2]int{32, 1024}), 1, 1, 1024, 1024)})
	},
	"linear.151": func(f *ckFix) error { // 65 blocks of 16 tile rows on 64 cores: multi-core
		return f.run(tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 33280, 64), Weight: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 64, 32),
			Output: f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(64, [2]int{544, 32}), 1, 1, 33280, 32)})
	},
	// A sharded weight under the config ttnn picks with the input and
	// output interleaved.
	"linear.63": func(f *ckFix) error { // a row of blocks: 1D, in0 multicast
		return f.run(f.mmW(32, 64, 2048, tt.L1HeightSharded(2, [2]int{32, 2048})))
	},
	"linear.64": func(f *ckFix) error {
		return f.run(f.mmW(32, 64, 2048, tt.L1WidthSharded(2, [2]int{64, 1024})))
	},
	"linear.79": func(f *ckFix) error { // a column of blocks: 1D, in1 multicast
		return f.run(f.mmW(1024, 64, 64, tt.L1HeightSharded(2, [2]int{32, 64})))
	},
	"linear.114": func(f *ckFix) error { // 2x2 blocks: 2D
		return f.run(f.mmW(1024, 64, 1024, tt.L1HeightSharded(2, [2]int{32, 1024})))
	},
	"linear.121": func(f *ckFix) error {
		return f.run(f.mmW(1024, 64, 1024, tt.L1WidthSharded(8, [2]int{64, 128})))
	},
	"linear.122": func(f *ckFix) error { // per_core_N 16 = the shard's width, on cores (7,0) and (0,1)
		m := tt.L1WidthSharded(2, [2]int{64, 512})
		m.Shard.FirstCore = 7
		return f.run(f.mmW(1024, 64, 1024, m))
	},
	"linear.150": func(f *ckFix) error { // one block into DRAM: the multi-core config
		return f.run(f.mmW(32, 64, 64, tt.L1HeightSharded(1, [2]int{64, 64})))
	},
	"linear.155": func(f *ckFix) error {
		o := f.linear()
		o.Weight = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 64, 64)
		return f.run(o)
	},
	// nlp_create_qkv_heads_decode.cpp and its device op.
	"nlp_create_qkv_heads_decode.1": func(f *ckFix) error {
		o := f.createHeads(tt.BF16, tt.Tile, dram)
		o.NumHeads = 3 // 3 + 2*2 = 7 does not divide 256
		return f.run(o)
	},
	"nlp_create_qkv_heads_decode.4": func(f *ckFix) error {
		return f.run(f.createHeads(tt.INT32, tt.Tile, dram))
	},
	"nlp_create_qkv_heads_decode.5": func(f *ckFix) error {
		return f.run(f.createHeads(tt.BF16, tt.RowMajor, dram))
	},
	"nlp_create_qkv_heads_decode.6": func(f *ckFix) error {
		o := f.createHeads(tt.BF16, tt.Tile, dram, 1, 1, ckB, 48)
		o.NumHeads, o.NumKVHeads = 2, 1 // the padded width 64 divides by 4; the logical 48 is not a tile multiple
		return f.run(o)
	},
	"nlp_create_qkv_heads_decode.7": func(f *ckFix) error {
		return f.run(f.createHeads(tt.BF16, tt.Tile, dram, 1, 1, 40, 8*ckD)) // 40 users
	},
	"nlp_create_qkv_heads_decode.8": func(f *ckFix) error {
		return f.run(f.createHeads(tt.BF16, tt.Tile, dram, 1, 2, ckB, 8*ckD))
	},
	"nlp_create_qkv_heads_decode.9": func(f *ckFix) error {
		return f.run(f.createHeads(tt.BF16, tt.Tile, dram, 2, 1, ckB, 8*ckD))
	},
	"nlp_create_qkv_heads_decode.10": func(f *ckFix) error {
		return f.run(f.createHeads(tt.BF16, tt.Tile, tt.L1HeightSharded(1, [2]int{32, 8 * ckD})))
	},
	"nlp_create_qkv_heads_decode.18": func(f *ckFix) error {
		o := f.createHeads(tt.BF16, tt.Tile, dram, 1, 1, ckB, 5*ckD)
		o.NumHeads, o.NumKVHeads = 1, 2
		return f.run(o)
	},
	// rotary_embedding_hf_device_operation.cpp, decode mode.
	"rotary_embedding_hf.17": func(f *ckFix) error {
		in, cs := f.ropeSpec(96)
		return f.run(f.rope(in, cs, cs))
	},
	"rotary_embedding_hf.19": func(f *ckFix) error {
		in, cs := f.ropeSpec(ckD)
		return f.run(f.rope(in, cs, ropeWith(cs, func(s *tt.Spec) { s.Shape[1] = 33; s.Memory = tt.L1HeightSharded(33, [2]int{32, ckD}) })))
	},
	"rotary_embedding_hf.20": func(f *ckFix) error {
		in, _ := f.ropeSpec(ckD)
		cs := ropeWith(in, func(s *tt.Spec) { s.Shape[0] = 2; s.Memory = tt.L1HeightSharded(2*ckB, [2]int{32, ckD}) })
		return f.run(f.rope(in, cs, cs))
	},
	"rotary_embedding_hf.21": func(f *ckFix) error {
		in, cs := f.ropeSpec(ckD)
		return f.run(f.rope(ropeWith(in, func(s *tt.Spec) { s.Memory = l1 }), cs, cs))
	},
	"rotary_embedding_hf.22": func(f *ckFix) error {
		in, cs := f.ropeSpec(ckD)
		return f.run(f.rope(ropeWith(in, func(s *tt.Spec) { s.Memory = tt.L1WidthSharded(1, [2]int{64, ckD}) }), cs, cs))
	},
	"rotary_embedding_hf.23": func(f *ckFix) error {
		in, cs := f.ropeSpec(ckD)
		return f.run(f.rope(in, ropeWith(cs, func(s *tt.Spec) { s.Memory = l1 }), cs))
	},
	"rotary_embedding_hf.24": func(f *ckFix) error {
		in, cs := f.ropeSpec(ckD)
		return f.run(f.rope(in, cs, ropeWith(cs, func(s *tt.Spec) { s.Memory = l1 })))
	},
	"rotary_embedding_hf.25": func(f *ckFix) error {
		in, cs := f.ropeSpec(ckD)
		c1 := ropeWith(cs, func(s *tt.Spec) { s.Shape[1] = 1; s.Memory = tt.L1HeightSharded(1, [2]int{32, ckD}) })
		return f.run(f.rope(in, c1, c1))
	},
	// rotary_embedding_hf_device_operation.cpp, prefill mode.
	"rotary_embedding_hf.14": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Input = f.alloc(tt.BF16, tt.RowMajor, dram, 1, 2, 32, ckD)
		return f.run(o)
	},
	"rotary_embedding_hf.15": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Cos = f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 32, ckD)
		return f.run(o)
	},
	"rotary_embedding_hf.16": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Sin = f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 32, ckD)
		return f.run(o)
	},
	"rotary_embedding_hf.18": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Cos = f.alloc(tt.FP32, tt.Tile, dram, 1, 1, 32, ckD)
		return f.run(o)
	},
	"rotary_embedding_hf.29": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Cos = f.alloc(tt.BF16, tt.Tile, dram, 1, 2, 32, ckD)
		o.Sin = f.alloc(tt.BF16, tt.Tile, dram, 1, 2, 32, ckD)
		return f.run(o)
	},
	"rotary_embedding_hf.31": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Cos = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 31, ckD)
		o.Sin = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 31, ckD)
		return f.run(o)
	},
	"rotary_embedding_hf.32": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Sin = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 31, ckD) // pads to the cos table's shape
		return f.run(o)
	},
	"rotary_embedding_hf.33": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Input = f.alloc(tt.BF16, tt.Tile, tt.L1WidthSharded(1, [2]int{64, ckD}), 1, 2, 32, ckD)
		return f.run(o)
	},
	"rotary_embedding_hf.34": func(f *ckFix) error {
		o := f.ropePrefill()
		o.Memory = tt.L1WidthSharded(1, [2]int{64, ckD})
		return f.run(o)
	},
	// rotary_embedding_llama_device_operation.cpp, decode mode.
	"rotary_embedding_llama.3": func(f *ckFix) error {
		return f.run(f.llama(func(in, _, _, _ *tt.Spec) {
			in.Layout = tt.RowMajor
			in.Memory = tt.L1HeightSharded(ckB, [2]int{1, ckD})
		}))
	},
	"rotary_embedding_llama.7": func(f *ckFix) error {
		return f.run(f.llama(func(_, cs, _, _ *tt.Spec) {
			cs.Layout = tt.RowMajor
			cs.Memory = tt.L1HeightSharded(ckB, [2]int{1, ckD})
		}))
	},
	"rotary_embedding_llama.11": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, sn, _ *tt.Spec) {
			sn.Layout = tt.RowMajor
			sn.Memory = tt.L1HeightSharded(ckB, [2]int{1, ckD})
		}))
	},
	"rotary_embedding_llama.15": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, _, tm *tt.Spec) { tm.Layout = tt.RowMajor; tm.Memory = tt.L1HeightSharded(32, [2]int{1, 32}) }))
	},
	"rotary_embedding_llama.17": func(f *ckFix) error {
		return f.run(f.llama(func(in, cs, sn, _ *tt.Spec) {
			for _, s := range []*tt.Spec{in, cs, sn} {
				s.Shape[3] = 288
				s.Memory = tt.L1HeightSharded(ckB, [2]int{32, 288})
			}
		}))
	},
	"rotary_embedding_llama.18": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, _, tm *tt.Spec) { tm.DType = tt.FP32 }))
	},
	"rotary_embedding_llama.19": func(f *ckFix) error {
		o := f.llama(func(_, _, _, _ *tt.Spec) {})
		o.Memory = dram
		return f.run(o)
	},
	"rotary_embedding_llama.23": func(f *ckFix) error {
		o := f.llama(func(in, _, _, _ *tt.Spec) { in.Memory = l1 })
		o.Memory = l1
		return f.run(o)
	},
	"rotary_embedding_llama.20": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, sn, _ *tt.Spec) { sn.Shape[1] = 1; sn.Memory = tt.L1HeightSharded(1, [2]int{32, ckD}) }))
	},
	"rotary_embedding_llama.22": func(f *ckFix) error {
		return f.run(f.llama(func(in, _, _, _ *tt.Spec) { in.Shape[0] = 2; in.Memory = tt.L1HeightSharded(2*ckB, [2]int{32, ckD}) }))
	},
	"rotary_embedding_llama.24": func(f *ckFix) error {
		return f.run(f.llama(func(_, cs, sn, _ *tt.Spec) { cs.Memory = l1; sn.Memory = l1 }))
	},
	"rotary_embedding_llama.25": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, sn, _ *tt.Spec) { sn.Memory = l1 }))
	},
	"rotary_embedding_llama.26": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, _, tm *tt.Spec) { tm.Memory = dram }))
	},
	"rotary_embedding_llama.28": func(f *ckFix) error {
		return f.run(f.llama(func(_, cs, sn, _ *tt.Spec) {
			for _, s := range []*tt.Spec{cs, sn} {
				s.Shape[1] = 1
				s.Memory = tt.L1HeightSharded(1, [2]int{32, ckD})
			}
		}))
	},
	"rotary_embedding_llama.30": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, _, tm *tt.Spec) { tm.Shape[1] = 2; tm.Memory = tt.L1HeightSharded(2, [2]int{32, 32}) }))
	},
	"rotary_embedding_llama.31": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, _, tm *tt.Spec) { tm.Shape[2] = 64; tm.Memory = tt.L1HeightSharded(1, [2]int{64, 32}) }))
	},
	"rotary_embedding_llama.32": func(f *ckFix) error {
		return f.run(f.llama(func(_, _, _, tm *tt.Spec) { tm.Shape[3] = 64; tm.Memory = tt.L1HeightSharded(1, [2]int{32, 64}) }))
	},
	// paged_update_cache_device_operation.cpp.
	"paged_update_cache.4": func(f *ckFix) error {
		o := f.updateCache()
		o.Input = f.ucInput(tt.L1HeightSharded(4, [2]int{2, 64}), tt.BF16, tt.RowMajor)
		return f.run(o)
	},
	"paged_update_cache.5": func(f *ckFix) error {
		o := f.updateCache()
		o.Cache = f.alloc(tt.BF16, tt.RowMajor, dram, 8, 2, 32, 64)
		return f.run(o)
	},
	"paged_update_cache.6": func(f *ckFix) error {
		o := f.updateCache()
		o.Cache = f.alloc(tt.INT32, tt.Tile, dram, 8, 2, 32, 64)
		return f.run(o)
	},
	"paged_update_cache.7": func(f *ckFix) error {
		o := f.updateCache()
		o.Input = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(8, [2]int{32, 64}), 2, 4, 2, 64)
		return f.run(o)
	},
	"paged_update_cache.8": func(f *ckFix) error {
		o := f.updateCache()
		o.Cache = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(16, [2]int{32, 64}), 8, 2, 32, 64)
		return f.run(o)
	},
	"paged_update_cache.12": func(f *ckFix) error {
		o := f.updateCache()
		o.Cache = f.alloc(tt.BF16, tt.Tile, dram, 8, 2, 32, 128)
		return f.run(o)
	},
	"paged_update_cache.15": func(f *ckFix) error {
		o := f.updateCache()
		o.PageTable = nil
		o.Cache = f.alloc(tt.BF16, tt.Tile, dram, 4, 2, 32, 128)
		return f.run(o)
	},
	"paged_update_cache.17": func(f *ckFix) error {
		o := f.updateCache()
		o.PageTable = nil
		o.ShareCache = true
		o.Cache = f.alloc(tt.BF16, tt.Tile, dram, 2, 2, 32, 64)
		return f.run(o)
	},
	"paged_update_cache.18": func(f *ckFix) error {
		o := f.updateCache()
		o.PageTable = nil
		o.Cache = f.alloc(tt.BF16, tt.Tile, dram, 3, 2, 32, 64)
		return f.run(o)
	},
	"paged_update_cache.19": func(f *ckFix) error {
		o := f.updateCache()
		o.ShareCache = true
		return f.run(o)
	},
	"paged_update_cache.20": func(f *ckFix) error {
		o := f.updateCache()
		o.UpdateIdxs, o.UpdateIdxsList = nil, []int32{0, 0, 0, 0}
		return f.run(o)
	},
	"paged_update_cache.22": func(f *ckFix) error {
		o := f.updateCache()
		o.PageTable = f.p(f.alloc(tt.UINT32, tt.RowMajor, dram, 4, 2))
		return f.run(o)
	},
	"paged_update_cache.23": func(f *ckFix) error {
		o := f.updateCache()
		o.PageTable = f.p(f.alloc(tt.INT32, tt.Tile, dram, 4, 2))
		return f.run(o)
	},
	"paged_update_cache.25": func(f *ckFix) error {
		o := f.updateCache()
		o.PageTable = f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 3, 2))
		return f.run(o)
	},
	"paged_update_cache.27": func(f *ckFix) error {
		o := f.updateCache()
		o.PageTable = f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 4, 9))
		return f.run(o)
	},
	"paged_update_cache.28": func(f *ckFix) error {
		o := f.updateCache()
		o.UpdateIdxsList = []int32{0, 0, 0, 0}
		return f.run(o)
	},
	"paged_update_cache.29": func(f *ckFix) error {
		o := f.updateCache()
		o.UpdateIdxs = f.p(f.alloc(tt.UINT32, tt.RowMajor, dram, 4))
		return f.run(o)
	},
	"paged_update_cache.30": func(f *ckFix) error {
		o := f.updateCache()
		o.UpdateIdxs = f.p(f.alloc(tt.INT32, tt.Tile, dram, 1, 4))
		return f.run(o)
	},
	"paged_update_cache.34": func(f *ckFix) error {
		o := f.updateCache()
		o.UpdateIdxs = f.p(f.alloc(tt.INT32, tt.RowMajor, l1, 4))
		return f.run(o)
	},
	"paged_update_cache.37": func(f *ckFix) error {
		o := f.updateCache()
		o.UpdateIdxs = f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 5))
		return f.run(o)
	},
	"paged_update_cache.38": func(f *ckFix) error {
		o := f.updateCache()
		o.Input = f.ucInput(l1, tt.BF16, tt.Tile)
		return f.run(o)
	},
	"paged_update_cache.39": func(f *ckFix) error {
		o := f.updateCache()
		o.Input = f.ucInput(tt.L1WidthSharded(2, [2]int{128, 32}), tt.BF16, tt.Tile)
		return f.run(o)
	},
	"paged_update_cache.43": func(f *ckFix) error {
		o := f.updateCache()
		o.Input = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(4, [2]int{32, 64}), 1, 2, 2, 64)
		o.PageTable = f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 2, 2))
		o.UpdateIdxs = f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 2))
		return f.run(o)
	},
	"paged_update_cache.44": func(f *ckFix) error {
		o := f.updateCache()
		o.Input = f.ucInput(tt.L1HeightSharded(4, [2]int{32, 64}), tt.INT32, tt.Tile)
		return f.run(o)
	},
	"paged_update_cache.45": func(f *ckFix) error {
		o := f.updateCache()
		o.BatchOffset = 2
		return f.run(o)
	},
	// paged_fused_update_cache_device_operation.cpp.
	"paged_fused_update_cache.38": func(f *ckFix) error {
		o := f.updateCache()
		in2 := f.alloc(tt.BF16, tt.Tile, tt.L1HeightShardedAt(2, 4, [2]int{32, 64}), 1, 4, 2, 64)
		return f.run(tt.PagedFusedUpdateCache{Cache1: o.Cache, Input1: o.Input, Cache2: f.alloc(tt.BF16, tt.Tile, dram, 8, 2, 32, 64), Input2: in2,
			UpdateIdxs: o.UpdateIdxs, PageTable: o.PageTable})
	},
	"paged_fused_update_cache.39": func(f *ckFix) error {
		o := f.updateCache()
		in2 := f.alloc(tt.BF16, tt.Tile, tt.L1HeightShardedAt(4, 8, [2]int{32, 64}), 1, 4, 2, 64)
		return f.run(tt.PagedFusedUpdateCache{Cache1: o.Cache, Input1: o.Input, Cache2: f.alloc(tt.BF16, tt.Tile, dram, 8, 2, 32, 64), Input2: in2,
			UpdateIdxs: o.UpdateIdxs, PageTable: o.PageTable})
	},
	// paged_fill_cache_device_operation.cpp.
	"paged_fill_cache.1": func(f *ckFix) error {
		o := f.fill()
		o.Input = f.alloc(tt.INT32, tt.Tile, dram, 1, 1, 32, 32)
		return f.run(o)
	},
	"paged_fill_cache.2": func(f *ckFix) error {
		o := f.fill()
		o.Input = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(1, [2]int{32, 32}), 1, 1, 32, 32)
		return f.run(o)
	},
	"paged_fill_cache.3": func(f *ckFix) error {
		o := f.fill()
		o.PageTable = f.alloc(tt.INT32, tt.RowMajor, tt.L1HeightSharded(2, [2]int{1, 4}), 2, 4)
		return f.run(o)
	},
	"paged_fill_cache.4": func(f *ckFix) error {
		o := f.fill()
		o.PageTable = f.alloc(tt.UINT32, tt.RowMajor, dram, 2, 4)
		return f.run(o)
	},
	"paged_fill_cache.5": func(f *ckFix) error {
		o := f.fill()
		o.BatchIdx = 2
		return f.run(o)
	},
	"paged_fill_cache.6": func(f *ckFix) error {
		o := f.fill()
		o.Input = f.alloc(tt.BF16, tt.Tile, dram, 1, 2, 32, 32)
		return f.run(o)
	},

	"paged_fill_cache.12": func(f *ckFix) error {
		o := f.fill()
		o.Input = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 160, 32)
		return f.run(o)
	},
	"paged_fill_cache.13": func(f *ckFix) error {
		o := f.fill()
		o.BatchIdxTensor = f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 2))
		return f.run(o)
	},
	"paged_fill_cache.14": func(f *ckFix) error {
		o := f.fill()
		o.BatchIdxTensor = f.p(f.alloc(tt.BF16, tt.RowMajor, dram, 1))
		return f.run(o)
	},

	"paged_fill_cache.16": func(f *ckFix) error {
		o := f.fill()
		o.BatchIdxTensor = f.p(f.alloc(tt.INT32, tt.RowMajor, tt.L1HeightSharded(1, [2]int{1, 1}), 1))
		return f.run(o)
	},
	"paged_fill_cache.17": func(f *ckFix) error {
		o := f.fill()
		o.BatchIdxTensor = f.p(f.alloc(tt.INT32, tt.RowMajor, l1, 1))
		return f.run(o)
	},
	// sdpa_decode.cpp, sdpa_decode_device_operation.cpp.
	"paged_sdpa_decode.1": func(f *ckFix) error {
		o := f.sdpa(1)
		o.KChunkSize = 96
		return f.run(o)
	},
	"paged_sdpa_decode.2": func(f *ckFix) error {
		o := f.sdpa(1)
		o.KChunkSize = 16
		return f.run(o)
	},
	"paged_sdpa_decode.8": func(f *ckFix) error {
		o := f.sdpa(1)
		o.K = f.alloc(tt.FP32, tt.Tile, dram, 4, 1, 32, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.9": func(f *ckFix) error {
		o := f.sdpa(1)
		o.V = f.alloc(tt.BF16, tt.RowMajor, dram, 4, 1, 32, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.13": func(f *ckFix) error {
		o := f.sdpa(1)
		o.Q = f.alloc(tt.BF16, tt.Tile, tt.L1WidthSharded(1, [2]int{64, ckD}), 1, ckB, 2, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.14": func(f *ckFix) error {
		o := f.sdpa(1)
		o.Q = f.alloc(tt.BF16, tt.Tile, l1, 1, ckB, 2, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.15": func(f *ckFix) error {
		o := f.sdpa(1)
		o.K = f.alloc(tt.BF16, tt.Tile, l1, 4, 1, 32, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.16": func(f *ckFix) error {
		o := f.sdpa(1)
		o.Memory = tt.L1WidthSharded(1, [2]int{64, ckD})
		return f.run(o)
	},
	"paged_sdpa_decode.33": func(f *ckFix) error {
		o := f.sdpa(1)
		o.CurPos = f.alloc(tt.UINT32, tt.RowMajor, dram, ckB)
		return f.run(o)
	},
	"paged_sdpa_decode.34": func(f *ckFix) error {
		o := f.sdpa(1)
		o.CurPos = f.alloc(tt.INT32, tt.Tile, dram, 1, ckB)
		return f.run(o)
	},
	"paged_sdpa_decode.35": func(f *ckFix) error {
		o := f.sdpa(1)
		o.CurPos = f.alloc(tt.INT32, tt.RowMajor, dram, 3)
		return f.run(o)
	},
	"paged_sdpa_decode.37": func(f *ckFix) error {
		o := f.sdpa(1)
		o.PageTable = f.alloc(tt.UINT32, tt.RowMajor, dram, ckB, 2)
		return f.run(o)
	},
	"paged_sdpa_decode.38": func(f *ckFix) error {
		o := f.sdpa(1)
		o.PageTable = f.alloc(tt.INT32, tt.Tile, dram, ckB, 2)
		return f.run(o)
	},
	"paged_sdpa_decode.40": func(f *ckFix) error {
		o := f.sdpa(1)
		o.PageTable = f.alloc(tt.INT32, tt.RowMajor, dram, 3, 2)
		return f.run(o)
	},
	"paged_sdpa_decode.41": func(f *ckFix) error {
		o := f.sdpa(1)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, 2, 1, 64, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.46": func(f *ckFix) error {
		o := f.sdpa(1)
		o.K = f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 32, 64)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 32, 64)
		return f.run(o)
	},
	"paged_sdpa_decode.47": func(f *ckFix) error {
		o := f.sdpa(1)
		o.K = f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 48, ckD)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 48, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.49": func(f *ckFix) error {
		o := f.sdpa(1)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 32, 64)
		return f.run(o)
	},
	"paged_sdpa_decode.58": func(f *ckFix) error {
		o := f.sdpa(1)
		o.Q = f.alloc(tt.BF16, tt.Tile, dram, 2, ckB, 2, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.66": func(f *ckFix) error {
		o := f.sdpa(2)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, 4, 1, 32, ckD)
		return f.run(o)
	},
	"paged_sdpa_decode.67": func(f *ckFix) error {
		o := f.sdpa(2)
		o.Memory = tt.L1HeightSharded(ckB, [2]int{32, ckD})
		return f.run(o)
	},
	"paged_sdpa_decode.69": func(f *ckFix) error {
		o := f.sdpa(2)
		o.Q = f.alloc(tt.BF16, tt.Tile, dram, 1, ckB, 3, ckD)
		return f.run(o)
	},
	// nlp_concat_heads_decode_device_operation.cpp.
	"nlp_concat_heads_decode.3": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.INT32, tt.Tile, tt.MemoryConfig{})))
	},
	"nlp_concat_heads_decode.4": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.RowMajor, tt.L1HeightSharded(ckB, [2]int{1, ckD}))))
	},
	"nlp_concat_heads_decode.5": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, tt.L1HeightSharded(2*ckB, [2]int{32, ckD}), 2, ckB, 1, ckD)))
	},
	"nlp_concat_heads_decode.6": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, tt.MemoryConfig{}, 1, 33, 1, ckD)))
	},
	"nlp_concat_heads_decode.8": func(f *ckFix) error {
		o := f.concat(f.concatIn(tt.BF16, tt.Tile, tt.MemoryConfig{}))
		o.NumHeads = 33
		return f.run(o)
	},
	"nlp_concat_heads_decode.9": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, l1)))
	},
	"nlp_concat_heads_decode.10": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, tt.L1WidthSharded(1, [2]int{64, ckD}))))
	},
	"nlp_concat_heads_decode.12": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, tt.L1HeightSharded(ckB, [2]int{64, ckD}))))
	},
	// Too many cores: on Wormhole, 10 cores are two ranges (the
	// sub-core-grid branch, :62), 3 cores one range from (0,0) (:68).
	"nlp_concat_heads_decode.13": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, tt.L1HeightSharded(10, [2]int{32, ckD}))))
	},
	"nlp_concat_heads_decode.16": func(f *ckFix) error {
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, tt.L1HeightSharded(3, [2]int{32, ckD}))))
	},
	// The users' grid not one rectangle from (0,0): one range from core 1,
	// then 10 users on Wormhole's 8-wide grid (the engine's grid for 10
	// slots).
	"nlp_concat_heads_decode.14": func(f *ckFix) error {
		if !f.record {
			in := f.concatIn(tt.BF16, tt.Tile, tt.L1HeightShardedAt(1, ckB, [2]int{32, ckD}))
			if err := f.run(f.concat(in)); err == nil || !strings.Contains(err.Error(), "Subcoregrids") {
				return fmt.Errorf("grid from core 1: %v", err)
			}
		}
		return f.run(f.concat(f.concatIn(tt.BF16, tt.Tile, tt.MemoryConfig{}, 1, 10, 1, ckD)))
	},
	// binary.cpp's wrapper: two ROW_MAJOR operands with an output, for add
	// and for the SILU multiply.
	"binary.14": func(f *ckFix) error {
		x := f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 2, 64)
		if !f.record {
			if err := f.run(tt.SiluMul{Gate: x, Up: x, Output: x}); err == nil || !strings.Contains(err.Error(), "Row Major input") {
				return fmt.Errorf("silu mul: %v", err)
			}
		}
		return f.run(tt.Add{A: x, B: x, Output: x})
	},
	// argmax_device_operation.cpp (a preallocated output).
	"argmax.7": func(f *ckFix) error {
		return f.run(f.argmax(f.alloc(tt.BF16, tt.RowMajor, tt.L1HeightSharded(1, [2]int{1, 64}), 1, 1, 1, 64), f.argOut()))
	},
	"argmax.15": func(f *ckFix) error {
		return f.run(f.argmax(f.argIn(), f.alloc(tt.INT32, tt.RowMajor, dram, 1, 1, 1, 1)))
	},
	"argmax.16": func(f *ckFix) error {
		return f.run(f.argmax(f.argIn(), f.alloc(tt.UINT32, tt.RowMajor, tt.L1HeightSharded(1, [2]int{1, 1}), 1, 1, 1, 1)))
	},
	"argmax.17": func(f *ckFix) error {
		return f.run(f.argmax(f.argIn(), f.alloc(tt.UINT32, tt.Tile, dram, 1, 1, 1, 1)))
	},
	// plusone_device_operation.cpp.
	"plus_one.1": func(f *ckFix) error { return f.run(tt.PlusOne{Input: f.alloc(tt.BF16, tt.RowMajor, dram, 4)}) },
	"plus_one.2": func(f *ckFix) error { return f.run(tt.PlusOne{Input: f.alloc(tt.INT32, tt.Tile, dram, 1, 32)}) },
	"plus_one.3": func(f *ckFix) error {
		return f.run(tt.PlusOne{Input: f.alloc(tt.INT32, tt.RowMajor, dram, 1, 1, 1, 1, 4)})
	},
	// nlp_create_qkv_heads.cpp and its device op (prefill form).
	"nlp_create_qkv_heads.4": func(f *ckFix) error {
		return f.run(tt.NLPCreateQKVHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 4*ckD), NumHeads: 3, NumKVHeads: 1})
	},
	"nlp_create_qkv_heads.7": func(f *ckFix) error {
		return f.run(tt.NLPCreateQKVHeads{Input: f.alloc(tt.INT32, tt.Tile, dram, 1, 1, 32, 4*ckD), NumHeads: 2, NumKVHeads: 1})
	},
	"nlp_create_qkv_heads.8": func(f *ckFix) error {
		return f.run(tt.NLPCreateQKVHeads{Input: f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 32, 4*ckD), NumHeads: 2, NumKVHeads: 1})
	},
	"nlp_create_qkv_heads.10": func(f *ckFix) error {
		return f.run(tt.NLPCreateQKVHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 2, 32, 4*ckD), NumHeads: 2, NumKVHeads: 1})
	},
	"nlp_create_qkv_heads.25": func(f *ckFix) error {
		return f.run(tt.NLPCreateQKVHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 4*ckD), NumHeads: 2, NumKVHeads: 1,
			Memory: tt.L1HeightSharded(2, [2]int{32, ckD})})
	},
	// nlp_concat_heads_device_operation.cpp (prefill form).
	"nlp_concat_heads.3": func(f *ckFix) error {
		return f.run(tt.NLPConcatHeads{Input: f.alloc(tt.INT32, tt.Tile, dram, 1, 2, 32, ckD)})
	},
	"nlp_concat_heads.4": func(f *ckFix) error {
		return f.run(tt.NLPConcatHeads{Input: f.alloc(tt.BF16, tt.RowMajor, dram, 1, 2, 32, ckD)})
	},
	"nlp_concat_heads.5": func(f *ckFix) error {
		return f.run(tt.NLPConcatHeads{Input: f.alloc(tt.BF16, tt.Tile, tt.L1WidthSharded(1, [2]int{64, ckD}), 1, 2, 32, ckD), Memory: dram})
	},
	"nlp_concat_heads.10": func(f *ckFix) error {
		return f.run(tt.NLPConcatHeads{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 2, 32, ckD), Memory: tt.L1HeightSharded(1, [2]int{32, 2 * ckD})})
	},
	// sdpa_device_operation.cpp (prefill).
	"sdpa.5": func(f *ckFix) error {
		o := f.sdpaPre(q4, kv4, kv4)
		o.K = f.alloc(tt.BF16, tt.RowMajor, dram, kv4...)
		return f.run(o)
	},
	"sdpa.6": func(f *ckFix) error {
		o := f.sdpaPre(q4, kv4, kv4)
		o.Q = f.alloc(tt.FP32, tt.Tile, dram, q4...)
		return f.run(o)
	},
	"sdpa.7": func(f *ckFix) error {
		o := f.sdpaPre(q4, kv4, kv4)
		o.V = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(1, [2]int{32, ckD}), kv4...)
		return f.run(o)
	},
	"sdpa.10": func(f *ckFix) error {
		return f.run(f.sdpaPre([]int{1, 2, 32, 48}, []int{1, 1, 32, 48}, []int{1, 1, 32, 48}))
	},
	"sdpa.22": func(f *ckFix) error { return f.run(f.sdpaPre(q4, []int{1, 1, 64, ckD}, []int{1, 1, 64, ckD})) },
	"sdpa.25": func(f *ckFix) error { return f.run(f.sdpaPre(q4, []int{2, 1, 32, ckD}, []int{2, 1, 32, ckD})) },
	"sdpa.26": func(f *ckFix) error { return f.run(f.sdpaPre(q4, kv4, []int{1, 2, 32, ckD})) },
	"sdpa.27": func(f *ckFix) error {
		o := f.sdpaPre(q4, kv4, []int{1, 1, 64, ckD})
		o.Causal = false
		return f.run(o)
	},
	"sdpa.28": func(f *ckFix) error { return f.run(f.sdpaPre(q4, kv4, []int{1, 1, 32, 64})) },
	"sdpa.29": func(f *ckFix) error {
		return f.run(f.sdpaPre([]int{1, 3, 32, ckD}, []int{1, 2, 32, ckD}, []int{1, 2, 32, ckD}))
	},
	"sdpa.30": func(f *ckFix) error {
		o := f.sdpaPre(q4, kv4, kv4)
		o.QChunkSize, o.KChunkSize = 48, 32
		return f.run(o)
	},
	"sdpa.31": func(f *ckFix) error {
		o := f.sdpaPre(q4, kv4, kv4)
		o.QChunkSize, o.KChunkSize = 32, 40
		return f.run(o)
	},
}

// wantText is the exact text ttnn prints for a covered entry's case: the
// table's text with fmt's "{{" and "}}" read as braces, or, when the text
// has format arguments, checkTexts' filled text (which must itself be an
// instance of the table's text).
func wantText(t *testing.T, c tt.Check) string {
	t.Helper()
	if w, ok := checkTexts[c.ID]; ok {
		if !c.TextPattern().MatchString(w) {
			t.Errorf("%s: checkTexts' %q is not an instance of the table's %q", c.ID, w, c.Text)
		}
		return w
	}
	lit := strings.NewReplacer("{{", "{", "}}", "}").Replace(c.Text)
	if strings.ContainsAny(lit, "{}") && strings.Contains(c.Text, "{") {
		for _, p := range regexp.MustCompile(`\{[^{}]*\}`).FindAllString(strings.NewReplacer("{{", "", "}}", "").Replace(c.Text), -1) {
			t.Errorf("%s: the text has the format argument %s but checkTexts has no filled text for it", c.ID, p)
		}
	}
	return lit
}

// TestChecksTable runs one case per covered entry and requires the entry's
// text exactly (its format arguments filled as ttnn fills them,
// checkTexts), and that the table and the cases name the same entries.
func TestChecksTable(t *testing.T) {
	checks, err := tt.Checks()
	if err != nil {
		t.Fatal(err)
	}
	if got := tt.ChecksCommit(); got != tt.TTMetalCommit {
		t.Fatalf("the table was read at %s, the contract's pin is %s", got, tt.TTMetalCommit)
	}
	covered := map[string]bool{}
	var left int
	for _, c := range checks {
		if c.Status != "covered" {
			left++
			if checkCases[c.ID] != nil {
				t.Errorf("%s: the table leaves it out (%s) but a case exists", c.ID, c.Note)
			}
			continue
		}
		covered[c.ID] = true
		run := checkCases[c.ID]
		if run == nil {
			t.Errorf("%s (%s:%d): covered in the table, no case", c.ID, c.File, c.Line)
			continue
		}
		d, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = run(&ckFix{t: t, d: d})
		var e *tt.Error
		switch {
		case err == nil:
			t.Errorf("%s (%s:%d): accepted, want %q", c.ID, c.File, c.Line, c.Text)
		case !errors.As(err, &e):
			t.Errorf("%s (%s:%d): %v is not a device error, want %q", c.ID, c.File, c.Line, err, c.Text)
		case e.Msg != wantText(t, c):
			t.Errorf("%s (%s:%d): got %q, want %q", c.ID, c.File, c.Line, e.Msg, wantText(t, c))
		}
	}
	for id := range checkTexts {
		if !covered[id] {
			t.Errorf("checkTexts names %s, not a covered entry of the table", id)
		}
	}
	var extra []string
	for id := range checkCases {
		if !covered[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(extra)
	for _, id := range extra {
		if !strings.Contains(id, ".") || func() bool {
			for _, c := range checks {
				if c.ID == id {
					return false
				}
			}
			return true
		}() {
			t.Errorf("case %s names no entry of the table", id)
		}
	}
	t.Logf("checks table at %.8s: %d entries, %d covered, %d left out", tt.ChecksCommit(), len(checks), len(covered), left)
	// The README states the counts.
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	claim := regexp.MustCompile(`\((\d+) entries: path:line, condition, text\),\s+(\d+) of them fed`).FindStringSubmatch(string(readme))
	if claim == nil || claim[1] != strconv.Itoa(len(checks)) || claim[2] != strconv.Itoa(len(covered)) {
		t.Errorf("README's counts %v, the table has %d entries, %d covered", claim, len(checks), len(covered))
	}
}

// TestSimTextsInTable: every refusal text package sim writes with opErr (or
// an update-cache ucArgs.err), with its format verbs read as fmt's {},
// is a text of the table — no paraphrase of ttnn's texts. Offcard's own
// refusals go through contractErr (tt.ContractPrefix) instead.
func TestSimTextsInTable(t *testing.T) {
	checks, err := tt.Checks()
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]bool{}
	for _, c := range checks {
		texts[c.Text] = true
	}
	// Texts ttnn raises outside the validate functions the table lists:
	// the program factories (a std::bad_optional_access from
	// nlp_concat_heads_decode's shard_spec().value(); the fill cache
	// factory's page-size check), and tt-metal's allocator and CB checks
	// (their own messages in package tt and sim/program.go).
	texts["bad optional access"] = true
	texts["page table page size in bytes must be a multiple of 32 due to address alignment"] = true
	texts["page table stick size must be a multiple of 32"] = true // sdpa_program_factory.cpp:141, the tensor form
	verb := regexp.MustCompile(`%[-+# 0-9.]*[dvsxq]`)
	fset := token.NewFileSet()
	files, _ := filepath.Glob("*.go")
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(x ast.Node) bool {
			call, ok := x.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			var fn string
			switch c := call.Fun.(type) {
			case *ast.Ident:
				fn = c.Name
			case *ast.SelectorExpr:
				fn = c.Sel.Name
			}
			arg := -1
			switch fn {
			case "opErr":
				arg = 1
			case "err":
				arg = 0
			}
			if arg < 0 {
				return true
			}
			lit, ok := call.Args[arg].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			n++
			want := verb.ReplaceAllString(s, "{}")
			// ttnn's texts print a literal "{" as "{{" in their format.
			if !texts[want] && !texts[strings.NewReplacer("{num_users, 1}", "{{num_users, 1}}").Replace(want)] {
				t.Errorf("%s: %q is not a text of the checks table", fset.Position(lit.Pos()), s)
			}
			return true
		})
	}
	if n < 50 {
		t.Fatalf("found only %d refusal texts: the scan is broken", n)
	}
}

// A covered check of an op's wrapper (the function a caller calls, not its
// device operation: the table's file is not under device/) runs before
// launch's allocation check, so it gives its text even when the op's first
// input is freed; a check of the device operation's validate gives
// "Input Tensor is not allocated" then (ttnn/api/ttnn/device_operation.hpp:450-451).
func TestWrapperChecksBeforeAllocation(t *testing.T) {
	checks, err := tt.Checks()
	if err != nil {
		t.Fatal(err)
	}
	wrappers, devices := 0, 0
	for _, c := range checks {
		if c.Status != "covered" || !strings.HasPrefix(c.File, "ttnn/cpp/ttnn/operations/") {
			continue
		}
		d, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		f := &ckFix{t: t, d: d, record: true}
		if checkCases[c.ID](f) != nil || f.last == nil || len(f.last.Inputs()) == 0 {
			continue // not a single op run on inputs
		}
		op := f.last
		if err := d.Free(op.Inputs()[0]); err != nil {
			t.Fatal(err)
		}
		want := tt.MsgInputNotAllocated
		if wrapper := !strings.Contains(c.File, "/device/"); wrapper {
			want = wantText(t, c)
			wrappers++
		} else {
			devices++
		}
		_, err = d.Run(op)
		var e *tt.Error
		if !errors.As(err, &e) || e.Msg != want {
			t.Errorf("%s (%s:%d) with its first input freed: got %v, want %q", c.ID, c.File, c.Line, err, want)
		}
	}
	if wrappers < 8 || devices == 0 {
		t.Errorf("%d wrapper checks and %d device checks tried; want the 8 wrapper checks and some device ones", wrappers, devices)
	}
}

// Where an input breaks two checks, the simulator gives the text ttnn
// reaches first: the wrapper's before the device operation's, and the
// device operation's in its validate's order.
func TestCheckOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(f *ckFix) error
		want string // a table id
	}{
		{"create heads: dtype (line 26) before the output config (line 108)", func(f *ckFix) error {
			return f.run(tt.NLPCreateQKVHeads{Input: f.alloc(tt.INT32, tt.Tile, dram, 1, 1, 32, 4*ckD), NumHeads: 2, NumKVHeads: 1,
				Memory: tt.MemoryConfig{Layout: tt.HeightSharded, Buffer: tt.L1}})
		}, "nlp_create_qkv_heads.7"},
		{"create heads: the wrapper's shape before the device op's dtype", func(f *ckFix) error {
			return f.run(tt.NLPCreateQKVHeads{Input: f.alloc(tt.INT32, tt.Tile, dram, 1, 1, 32, 4*ckD), NumHeads: 3, NumKVHeads: 1})
		}, "nlp_create_qkv_heads.4"},
		{"rms_norm: the wrapper's layout before the device op's dtype", func(f *ckFix) error {
			o := f.rmsNorm()
			o.Input = f.alloc(tt.INT32, tt.RowMajor, dram, 1, 1, 32, ckD)
			return f.run(o)
		}, "rms_norm.1"},
	} {
		d, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		c := checkByID(t, tc.want)
		err = tc.run(&ckFix{t: t, d: d})
		var e *tt.Error
		if !errors.As(err, &e) || e.Msg != wantText(t, c) {
			t.Errorf("%s: got %v, want %q (%s)", tc.name, err, wantText(t, c), tc.want)
		}
	}
}

func checkByID(t *testing.T, id string) tt.Check {
	t.Helper()
	checks, err := tt.Checks()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no check %s in the table", id)
	return tt.Check{}
}
