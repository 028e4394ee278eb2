package sim

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/ref"
	"github.com/offcard/offcard/tt"
)

// The serving ops' checks (tt/checks.tsv rows fill_cache.*, slice.*, and
// the chunked-mode sdpa.* rows): each case changes one thing of a good op.

const ckBlocks, ckBS = 4, 32

// chunked is a good chunked SDPA: Q [1,2,32,D] at start 32 over caches
// [4,1,32,D] through a [1,2] table; tensor: the flexible form ([1,8]
// table).
func (f *ckFix) chunked(tensor bool) tt.ChunkedSDPA { return f.chunkedOf(tensor, 2, 1, ckD) }

// chunkedOf is chunked with qh query heads over kvh KV heads of head_dim
// dh; the table's row holds blocks 0, 1, ... (ckFix.table).
func (f *ckFix) chunkedOf(tensor bool, qh, kvh, dh int) tt.ChunkedSDPA {
	cache := []int{ckBlocks, kvh, ckBS, dh}
	o := tt.ChunkedSDPA{Q: f.alloc(tt.BF16, tt.Tile, dram, 1, qh, 32, dh), K: f.alloc(tt.BF16, tt.Tile, dram, cache...),
		V: f.alloc(tt.BF16, tt.Tile, dram, cache...), ChunkStart: 32}
	w := 2
	if tensor {
		w = 8
		cs := f.alloc(tt.INT32, tt.RowMajor, dram, 1)
		if err := f.d.WriteHost(cs, tt.HostInt32([]int{1}, tt.RowMajor, []int32{32})); err != nil {
			f.t.Fatal(err)
		}
		o.ChunkStartTensor = &cs
	}
	o.PageTable = f.table(1, w)
	return o
}

func (f *ckFix) fillC() tt.FillCache {
	return tt.FillCache{Cache: f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 1, ckBS, ckD), Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, ckBS, ckD), BatchIdx: 1}
}

func (f *ckFix) slice() tt.Slice {
	return tt.Slice{Input: f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 1, ckBS, ckD), Begin: []int{1, 0, 0, 0}, End: []int{2, 1, ckBS, ckD}}
}

var servingCases = map[string]func(f *ckFix) error{
	"sdpa.34": func(f *ckFix) error { o := f.chunked(false); o.ChunkStart = -32; return f.run(o) },
	"sdpa.38": func(f *ckFix) error {
		o := f.chunked(true)
		o.ChunkStartTensor = f.p(f.alloc(tt.UINT32, tt.RowMajor, dram, 1))
		return f.run(o)
	},
	"sdpa.39": func(f *ckFix) error {
		o := f.chunked(true)
		o.ChunkStartTensor = f.p(f.alloc(tt.INT32, tt.RowMajor, dram, 2))
		return f.run(o)
	},
	"sdpa.42": func(f *ckFix) error {
		o := f.chunked(false)
		o.PageTable = f.alloc(tt.INT32, tt.Tile, dram, 1, 32)
		return f.run(o)
	},
	"sdpa.43": func(f *ckFix) error {
		o := f.chunked(false)
		o.PageTable = f.alloc(tt.UINT32, tt.RowMajor, dram, 1, 2)
		return f.run(o)
	},
	"sdpa.45": func(f *ckFix) error {
		o := f.chunked(false)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 1, 64, ckD)
		return f.run(o)
	},
	"sdpa.46": func(f *ckFix) error {
		o := f.chunked(false)
		o.PageTable = f.alloc(tt.INT32, tt.RowMajor, dram, 2, 2)
		return f.run(o)
	},
	"sdpa.47": func(f *ckFix) error {
		o := f.chunked(false)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 2, ckBS, ckD)
		return f.run(o)
	},
	"sdpa.48": func(f *ckFix) error {
		o := f.chunked(false)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 1, ckBS, 64)
		return f.run(o)
	},
	"sdpa.49": func(f *ckFix) error {
		o := f.chunked(false)
		o.Q = f.alloc(tt.BF16, tt.Tile, dram, 1, 3, 32, ckD)
		o.K = f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 2, ckBS, ckD)
		o.V = f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 2, ckBS, ckD)
		return f.run(o)
	},
	"sdpa.50": func(f *ckFix) error { o := f.chunked(false); o.QChunkSize, o.KChunkSize = 48, 32; return f.run(o) },
	"sdpa.51": func(f *ckFix) error { o := f.chunked(false); o.QChunkSize, o.KChunkSize = 32, 40; return f.run(o) },
	"sdpa.52": func(f *ckFix) error {
		o := f.chunked(false)
		o.QChunkSize, o.KChunkSize, o.ChunkStart = 64, 32, 32
		return f.run(o)
	},
	"sdpa.53": func(f *ckFix) error {
		o := f.chunked(false)
		o.QChunkSize, o.KChunkSize, o.ChunkStart = 32, 64, 32
		return f.run(o)
	},
	"sdpa.54": func(f *ckFix) error { o := f.chunked(false); o.ChunkStart = 64; return f.run(o) },
	"sdpa.55": func(f *ckFix) error {
		o := f.chunked(true)
		o.Q = f.alloc(tt.BF16, tt.Tile, dram, 1, 2, 9*ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.4": func(f *ckFix) error {
		o := f.fillC()
		o.Input = f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.5": func(f *ckFix) error {
		o := f.fillC()
		o.Input = f.alloc(tt.INT32, tt.Tile, dram, 1, 1, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.6": func(f *ckFix) error {
		o := f.fillC()
		o.Cache = f.alloc(tt.INT32, tt.Tile, dram, ckBlocks, 1, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.7": func(f *ckFix) error {
		o := f.fillC()
		o.Input = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, ckBS, 64)
		return f.run(o)
	},
	"fill_cache.8": func(f *ckFix) error {
		o := f.fillC()
		o.Input = f.alloc(tt.BF16, tt.Tile, dram, 2, 1, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.9": func(f *ckFix) error {
		o := f.fillC()
		o.Input = f.alloc(tt.BF16, tt.Tile, dram, 1, 2, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.10": func(f *ckFix) error {
		o := f.fillC()
		o.Cache = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(ckBlocks, [2]int{ckBS, ckD}), ckBlocks, 1, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.11": func(f *ckFix) error {
		o := f.fillC()
		o.Input = f.alloc(tt.FP32, tt.Tile, dram, 1, 1, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.12": func(f *ckFix) error {
		o := f.fillC()
		o.Input = f.alloc(tt.BF16, tt.Tile, tt.L1WidthSharded(1, [2]int{ckBS, ckD}), 1, 1, ckBS, ckD)
		return f.run(o)
	},
	"fill_cache.14": func(f *ckFix) error {
		o := f.fillC()
		o.Cache = f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 1, 96, ckD)
		o.Input = f.alloc(tt.BF16, tt.Tile, tt.L1HeightSharded(2, [2]int{64, ckD}), 1, 1, 96, ckD)
		return f.run(o)
	},
	"fill_cache.15": func(f *ckFix) error { o := f.fillC(); o.BatchIdx = ckBlocks; return f.run(o) },
	"fill_cache.16": func(f *ckFix) error {
		o := f.fillC()
		o.Cache = f.alloc(tt.BF16, tt.Tile, dram, ckBlocks, 1, 64, ckD)
		o.UpdateIdx = 16
		return f.run(o)
	},
	"fill_cache.17": func(f *ckFix) error { o := f.fillC(); o.UpdateIdx = 32; return f.run(o) },
	"slice.1":       func(f *ckFix) error { o := f.slice(); o.Begin = o.Begin[:3]; return f.run(o) },
	"slice.2":       func(f *ckFix) error { o := f.slice(); o.End = o.End[:3]; return f.run(o) },
	"slice.6":       func(f *ckFix) error { o := f.slice(); o.Begin[0], o.End[0] = 2, 1; return f.run(o) },
	"slice.12":      func(f *ckFix) error { o := f.slice(); o.Begin[0], o.End[0] = ckBlocks, ckBlocks+1; return f.run(o) },
	"slice.13":      func(f *ckFix) error { o := f.slice(); o.End[0] = ckBlocks + 1; return f.run(o) },
}

func init() {
	for id, c := range servingCases {
		if checkCases[id] != nil {
			panic("two cases for " + id)
		}
		checkCases[id] = c
	}
}

// The good ops the cases change run.
func TestServingGoodOps(t *testing.T) {
	for name, op := range map[string]func(f *ckFix) tt.Op{
		"chunked/int":    func(f *ckFix) tt.Op { return f.chunked(false) },
		"chunked/tensor": func(f *ckFix) tt.Op { return f.chunked(true) },
		"fill_cache":     func(f *ckFix) tt.Op { return f.fillC() },
		"slice":          func(f *ckFix) tt.Op { return f.slice() },
	} {
		f := &ckFix{t: t, d: cDev(t, Options{})}
		if err := f.run(op(f)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// chunkFix is a paged cache of random K and V (blocks 6, 2 kv heads, block
// 32 or 64, D 64) with a shuffled table, and a chunk's Q (4 query heads).
type chunkFix struct {
	d              *Device
	k, v           tt.Tensor
	kv, vv         []bf16.BF16 // host copies, [block][head][row][D]
	table          []int32
	blocks, bs, dh int
}

const chunkKVH, chunkQH = 2, 4

func newChunkFix(t *testing.T, o Options, bs int) *chunkFix {
	t.Helper()
	const blocks, dh = 6, 64
	r := rand.New(rand.NewPCG(uint64(bs), 9))
	d := cDev(t, o)
	f := &chunkFix{d: d, blocks: blocks, bs: bs, dh: dh, table: []int32{4, 1, 5, 0, 2, 3}}
	n := blocks * chunkKVH * bs * dh
	f.kv, f.vv = cRand(r, n, false), cRand(r, n, false)
	f.k = cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, chunkKVH, bs, dh), f.kv)
	f.v = cUpload(t, d, cSpec(tt.BF16, tt.Tile, blocks, chunkKVH, bs, dh), f.vv)
	return f
}

// want is what row i of a chunk at position base+i attends: ref.Attend over
// the rows 0..base+i gathered through the host's table.
func (f *chunkFix) want(q []bf16.BF16, sq, base int) []bf16.BF16 {
	n := base + sq
	out := make([]bf16.BF16, chunkQH*sq*f.dh)
	probs := make([]float32, n)
	for h := 0; h < chunkQH; h++ {
		g := h / (chunkQH / chunkKVH)
		keys, vals := make([]bf16.BF16, n*f.dh), make([]bf16.BF16, n*f.dh)
		for p := 0; p < n; p++ {
			src := ((int(f.table[p/f.bs])*chunkKVH+g)*f.bs + p%f.bs) * f.dh
			copy(keys[p*f.dh:], f.kv[src:src+f.dh])
			copy(vals[p*f.dh:], f.vv[src:src+f.dh])
		}
		for i := 0; i < sq; i++ {
			r := (h*sq + i) * f.dh
			ref.Attend(out[r:r+f.dh], q[r:r+f.dh], keys, vals, base+i+1, ref.AttnScale(f.dh), probs)
		}
	}
	return out
}

func (f *chunkFix) run(t *testing.T, q tt.Tensor, w int, start int, tensor bool, qc int) ([]bf16.BF16, error) {
	t.Helper()
	row := make([]int32, w)
	copy(row, f.table[:min(w, len(f.table))])
	op := tt.ChunkedSDPA{Q: q, K: f.k, V: f.v, PageTable: cUploadI32(t, f.d, cSpec(tt.INT32, tt.RowMajor, 1, w), row)}
	if qc != 0 {
		op.QChunkSize, op.KChunkSize = qc, qc
	}
	if tensor {
		cs := cUploadI32(t, f.d, cSpec(tt.INT32, tt.RowMajor, 1), []int32{int32(start)})
		op.ChunkStartTensor = &cs
	} else {
		op.ChunkStart = int64(start)
	}
	outs, err := f.d.Run(op)
	if err != nil {
		return nil, err
	}
	return cDown(t, f.d, outs[0]), nil
}

// Both forms, chunk lengths on and off tile and block boundaries, block
// sizes 32 and 64, q chunks 32 and 64: every row equals ref.Attend over its
// causal prefix gathered through the table, bit for bit; strict finds
// nothing.
func TestChunkedSDPAEqualsRef(t *testing.T) {
	for _, bs := range []int{32, 64} {
		f := newChunkFix(t, Options{Strict: true}, bs)
		r := rand.New(rand.NewPCG(3, uint64(bs)))
		for _, c := range []struct{ start, sq, qc int }{{32, 1, 0}, {64, 33, 0}, {bs, 5, 0}, {128, 64, 64}, {2 * bs, 40, 0}, {0, 17, 0}} {
			if c.start%bs != 0 && c.qc == 0 && c.start%32 != 0 {
				continue
			}
			q := cRand(r, chunkQH*c.sq*f.dh, false)
			qt := cUpload(t, f.d, cSpec(tt.BF16, tt.Tile, 1, chunkQH, c.sq, f.dh), q)
			want := f.want(q, c.sq, c.start)
			need := (c.start+c.sq-1)/bs + 1
			for _, tensor := range []bool{false, true} {
				w := need
				if tensor {
					w = 8
				}
				got, err := f.run(t, qt, w, c.start, tensor, c.qc)
				if err != nil {
					t.Fatalf("bs %d start %d sq %d tensor %v: %v", bs, c.start, c.sq, tensor, err)
				}
				cSame(t, "chunked sdpa", got, want)
			}
		}
		if fs := f.d.Findings(); len(fs) > 0 {
			t.Fatalf("bs %d: findings %v", bs, fs)
		}
	}
}

// The tensor form with a start off the q chunk computes the chunk as if it
// started at the multiple of 32 below (the reader's integer division,
// reader_interleaved.cpp:259-260): the card's wrong answer; strict names
// it. The integer form without a program config does the same (no check
// without one, sdpa_device_operation.cpp:262; the factory's division,
// sdpa_program_factory.cpp:133).
func TestChunkedSDPAStartTruncated(t *testing.T) {
	f := newChunkFix(t, Options{Strict: true}, 32)
	r := rand.New(rand.NewPCG(5, 5))
	q := cRand(r, chunkQH*8*f.dh, false)
	qt := cUpload(t, f.d, cSpec(tt.BF16, tt.Tile, 1, chunkQH, 8, f.dh), q)
	for _, tensor := range []bool{true, false} {
		f.d.ClearFindings()
		got, err := f.run(t, qt, 8, 40, tensor, 0)
		if err != nil {
			t.Fatal(err)
		}
		cSame(t, "start 40 read as 32", got, f.want(q, 8, 32))
		fs := f.d.Findings()
		if len(fs) != 1 || fs[0].Class != ChunkStartTruncated {
			t.Fatalf("tensor %v: findings %v, want one %s", tensor, fs, ChunkStartTruncated)
		}
	}
}

// The tensor form checks only that the table covers Q (sdpa/device/
// sdpa_device_operation.cpp:308): a chunk whose keys lie past the table's 8 entries
// reads the L1 after the page-table CB (strict: past the CB). There sit
// the two chunk-start CBs, which the reader fills with the start first
// (sdpa_program_factory.cpp:697-704, reader_interleaved.cpp:241-256): on
// Wormhole the 32-byte stick ends where the first begins, so entry 8 is
// the chunk start itself (256, a block id the cache does not have); on
// Blackhole the CBs are 64-byte aligned and entry 8 falls in the gap. A
// table entry that is no block of the cache is named too.
func TestChunkedSDPATableHazards(t *testing.T) {
	for _, arch := range []Arch{Blackhole, Wormhole} {
		f := newChunkFix(t, Options{Strict: true, Arch: arch}, 32)
		r := rand.New(rand.NewPCG(6, 6))
		q := cRand(r, chunkQH*32*f.dh, false)
		qt := cUpload(t, f.d, cSpec(tt.BF16, tt.Tile, 1, chunkQH, 32, f.dh), q)
		_, _ = f.run(t, qt, 8, 8*32, true, 0)
		i := slices.IndexFunc(f.d.Findings(), func(f Finding) bool { return f.Class == PTReadPastCB })
		if i < 0 {
			t.Fatalf("%v: findings %v, want %s", arch, f.d.Findings(), PTReadPastCB)
		}
		if got, start := f.d.Findings()[i].Detail, "the value 0x100 came from"; strings.Contains(got, start) != (arch == Wormhole) {
			t.Errorf("%v: %s", arch, got)
		}
	}
	f := newChunkFix(t, Options{Strict: true}, 32)
	r := rand.New(rand.NewPCG(6, 6))
	q := cRand(r, chunkQH*32*f.dh, false)
	qt := cUpload(t, f.d, cSpec(tt.BF16, tt.Tile, 1, chunkQH, 32, f.dh), q)
	f.table[1] = 99
	_, _ = f.run(t, qt, 2, 32, false, 0)
	if !hasClass(f.d.Findings(), PTEntryOutsideCache) {
		t.Fatalf("findings %v, want %s", f.d.Findings(), PTEntryOutsideCache)
	}
}

// The tensor form's program hash leaves the page table out (sdpa/device/
// sdpa_device_operation.cpp:399): a program compiled for an 8-wide table serves a
// 16-wide one with the 8-entry stick, so keys past block 8 come from past
// the CB (the card's behaviour; strict names it).
func TestChunkedSDPATensorFormKeepsCompiledWidth(t *testing.T) {
	f := newChunkFix(t, Options{Strict: true}, 32)
	f.table = append(f.table, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3)
	r := rand.New(rand.NewPCG(7, 7))
	q := cRand(r, chunkQH*32*f.dh, false)
	qt := cUpload(t, f.d, cSpec(tt.BF16, tt.Tile, 1, chunkQH, 32, f.dh), q)
	if _, err := f.run(t, qt, 8, 32, true, 0); err != nil {
		t.Fatal(err)
	}
	if fs := f.d.Findings(); len(fs) > 0 {
		t.Fatalf("8-wide: %v", fs)
	}
	_, _ = f.run(t, qt, 16, 9*32, true, 0)
	if !hasClass(f.d.Findings(), PTReadPastCB) {
		t.Fatalf("16-wide table on the 8-wide program: findings %v, want %s", f.d.Findings(), PTReadPastCB)
	}
}

func hasClass(fs []Finding, c FindingClass) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return f.Class == c })
}

// A block copy as slice + fill_cache: block 4's tiles land in block 1 bit
// for bit, every other block is unchanged, and the KV log records one
// fill_cache write per row of block 1 (Physical 1, rows 0..bs-1).
func TestBlockCopySliceFill(t *testing.T) {
	for _, bs := range []int{32, 64} {
		f := newChunkFix(t, Options{Strict: true, LogKV: true}, bs)
		sl := cOut(t, f.d, tt.Slice{Input: f.k, Begin: []int{4, 0, 0, 0}, End: []int{5, chunkKVH, bs, f.dh}})
		cRun(t, f.d, tt.FillCache{Cache: f.k, Input: sl, BatchIdx: 1})
		got := cDown(t, f.d, f.k)
		n := chunkKVH * bs * f.dh
		want := slices.Clone(f.kv)
		copy(want[1*n:2*n], f.kv[4*n:5*n])
		cSame(t, "cache after copy 4->1", got, want)
		log := f.d.KVLog()
		if len(log) != bs {
			t.Fatalf("bs %d: %d KV writes, want %d", bs, len(log), bs)
		}
		for i, w := range log {
			if w.Op != "fill_cache" || w.Physical != 1 || w.Row != uint32(i) || w.Cache != f.k.ID {
				t.Fatalf("bs %d: write %d = %+v", bs, i, w)
			}
		}
		if fs := f.d.Findings(); len(fs) > 0 {
			t.Fatalf("findings %v", fs)
		}
	}
}

// fill_cache at update_idx 32 of a 64-row block writes rows 32..63 of
// that block only (the factory's update_idx/32 tile offset,
// fill_cache_multi_core_program_factory.cpp:44-45).
func TestFillCacheUpdateIdx(t *testing.T) {
	f := newChunkFix(t, Options{Strict: true, LogKV: true}, 64)
	r := rand.New(rand.NewPCG(8, 8))
	in := cRand(r, chunkKVH*32*f.dh, false)
	it := cUpload(t, f.d, cSpec(tt.BF16, tt.Tile, 1, chunkKVH, 32, f.dh), in)
	cRun(t, f.d, tt.FillCache{Cache: f.v, Input: it, BatchIdx: 2, UpdateIdx: 32})
	want := slices.Clone(f.vv)
	for h := 0; h < chunkKVH; h++ {
		for i := 0; i < 32; i++ {
			dst := ((2*chunkKVH+h)*64 + 32 + i) * f.dh
			copy(want[dst:dst+f.dh], in[(h*32+i)*f.dh:(h*32+i+1)*f.dh])
		}
	}
	cSame(t, "cache after fill at 32", cDown(t, f.d, f.v), want)
	if log := f.d.KVLog(); len(log) != 32 || log[0].Row != 32 || log[31].Row != 63 || log[0].Physical != 2 {
		t.Fatalf("KV log %+v", log)
	}
}
