package conform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// Cases are the conformance cases, in the order they run.
func Cases() []Case {
	return []Case{
		{"facts", caseFacts},
		{"allocator", caseAllocator},
		{"one-address-across-banks", caseBanks},
		{"host-round-trip", caseRoundTrip},
		{"host-write-refusals", caseWriteRefusals},
		{"capture-refusals", caseCaptureRefusals},
		{"plus-one", casePlusOne},
		{"embedding", func(p *Pair) error { return caseEmbedding(p, tt.Tile) }},
		{"embedding-row-major-output", func(p *Pair) error { return caseEmbedding(p, tt.RowMajor) }},
		{"embedding-tile-sticks", caseEmbeddingSticks},
		{"paged-update-cache", caseUpdateCache},
		{"paged-update-cache-list", caseUpdateCacheList},
		{"paged-fused-update-cache", caseFusedUpdateCache},
		{"paged-fill-cache", caseFillCache},
		{"trace-replay-baked-addresses", caseReplay},
		{"add", func(p *Pair) error { return caseEltwise(p, false) }},
		{"silu-mul", func(p *Pair) error { return caseEltwise(p, true) }},
		{"linear", caseLinear},
		{"argmax", caseArgmax},
		{"create-qkv-heads", caseCreateHeads},
		{"concat-heads", caseConcatHeads},
		{"users-grid-8-wide", caseUsersGrid8Wide},
		{"to-memory-config", caseToMemoryConfig},
		{"to-memory-config-same-config", caseToMemoryConfigSame},
		{"rms-norm", caseRMSNorm},
		{"rotary-embedding-hf", func(p *Pair) error { return caseRotary(p, false) }},
		{"rotary-embedding-llama", func(p *Pair) error { return caseRotary(p, true) }},
		{"sdpa-decode", caseSDPA},
		{"prefill-create-concat-heads", casePrefillHeads},
		{"rotary-embedding-hf-prefill", caseRotaryPrefill},
		{"sdpa-prefill", caseSDPAPrefill},
		{"refusal-texts", caseRefusalTexts},
		{"freed-handle", caseFreedHandle},
		{"out-of-memory", caseOutOfMemory},
	}
}

// archFacts is what each arch must report (tt-metal's soc descriptors).
var archFacts = map[string]struct{ banks, align int }{
	"wormhole":  {12, 32},
	"blackhole": {8, 64},
}

func caseFacts(p *Pair) error {
	f := p.Card.Facts()
	want, ok := archFacts[f.Arch]
	if !ok {
		return fmt.Errorf("device reports arch %q (want wormhole or blackhole)", f.Arch)
	}
	if f.DRAMBanks != want.banks || f.DRAMAlignment != want.align {
		return fmt.Errorf("%s: device reports %d DRAM banks, %d B alignment; the arch has %d and %d", f.Arch, f.DRAMBanks, f.DRAMAlignment, want.banks, want.align)
	}
	if f.TraceRegionSize != p.TraceRegion {
		return fmt.Errorf("device reports a %d B trace region, %d B were requested", f.TraceRegionSize, p.TraceRegion)
	}
	if f.GridX <= 0 || f.GridY <= 0 || f.L1Size <= 0 {
		return fmt.Errorf("device reports grid %dx%d and L1 %d B", f.GridX, f.GridY, f.L1Size)
	}
	bi := p.Card.BuildInfo()
	if !strings.HasPrefix(bi["tt_metal_commit"], PinnedCommit) {
		return fmt.Errorf("library built against tt-metal %q, offcard's contract is pinned to %s", bi["tt_metal_commit"], PinnedCommit)
	}
	if bi["arch"] != f.Arch {
		return fmt.Errorf("build info says arch %q, facts say %q", bi["arch"], f.Arch)
	}
	p.Note("%s: %d banks, %d B alignment, grid %dx%d, L1 %d B, tt-metal %s", f.Arch, f.DRAMBanks, f.DRAMAlignment, f.GridX, f.GridY, f.L1Size, bi["tt_metal_commit"][:8])
	return nil
}

func dram(shape []int, dt tt.DType, l tt.Layout) tt.Spec {
	return tt.Spec{Shape: shape, DType: dt, Layout: l, Memory: tt.DRAMInterleaved}
}

// caseAllocator: a sequence of allocations and frees of assorted sizes in
// DRAM and L1 must give the same addresses (first fit by address,
// alignment, immediate reuse, coalescing, L1 top-down).
func caseAllocator(p *Pair) error {
	r := rand.New(rand.NewPCG(1, 2))
	var live [][2]tt.Tensor
	for i := 0; i < 60; i++ {
		if len(live) > 0 && r.IntN(3) == 0 {
			k := r.IntN(len(live))
			if err := p.free(live[k]); err != nil {
				return err
			}
			live = append(live[:k], live[k+1:]...)
			continue
		}
		spec := dram([]int{1 + r.IntN(3), 1 + r.IntN(100), 1 + r.IntN(300)}, []tt.DType{tt.BF16, tt.FP32, tt.INT32}[r.IntN(3)], []tt.Layout{tt.Tile, tt.RowMajor}[r.IntN(2)])
		if r.IntN(3) == 0 {
			spec.Memory = tt.L1Interleaved
			spec.Shape = []int{1 + r.IntN(64), 32}
		}
		t, err := p.alloc(spec)
		if err != nil {
			return fmt.Errorf("step %d: %v", i, err)
		}
		live = append(live, t)
	}
	p.Note("60 steps, %d live, same addresses", len(live))
	return nil
}

// caseBanks: an interleaved buffer reserves ceil(pages/banks) aligned pages
// in every bank at one address, so the next buffer starts right after.
func caseBanks(p *Pair) error {
	f := p.Card.Facts()
	spec := dram([]int{f.DRAMBanks*3 + 1, 8}, tt.INT32, tt.RowMajor) // pages of 32 B
	a, err := p.alloc(spec)
	if err != nil {
		return err
	}
	b, err := p.alloc(spec)
	if err != nil {
		return err
	}
	want := a[1].Addr + 4*uint64(f.DRAMAlignment)
	if b[1].Addr != want {
		return fmt.Errorf("%d pages of 32 B over %d banks: next buffer at %#x, want %#x (4 aligned pages per bank)", spec.Shape[0], f.DRAMBanks, b[1].Addr, want)
	}
	v := make([]int32, spec.Volume())
	for i := range v {
		v[i] = int32(i * 7)
	}
	if err := p.write(a, tt.HostInt32(spec.Shape, tt.RowMajor, v)); err != nil {
		return err
	}
	p.Note("%d banks, per-bank 4 pages", f.DRAMBanks)
	return p.exact("interleaved pages", a)
}

func randBF16(r *rand.Rand, n int, scale float32) []bf16.BF16 {
	v := make([]bf16.BF16, n)
	for i := range v {
		v[i] = bf16.FromFloat32((r.Float32()*2 - 1) * scale)
	}
	return v
}

func hostOf(r *rand.Rand, spec tt.Spec) tt.HostTensor {
	n := spec.Volume()
	switch spec.DType {
	case tt.BF16:
		return tt.HostBF16(spec.Shape, spec.Layout, randBF16(r, n, 4))
	case tt.FP32:
		v := make([]float32, n)
		for i := range v {
			v[i] = r.Float32()*8 - 4
		}
		return tt.HostFP32(spec.Shape, spec.Layout, v)
	case tt.UINT32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = r.Uint32()
		}
		return tt.HostUint32(spec.Shape, spec.Layout, v)
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(r.Uint32())
	}
	return tt.HostInt32(spec.Shape, spec.Layout, v)
}

func caseRoundTrip(p *Pair) error {
	r := rand.New(rand.NewPCG(3, 4))
	specs := []tt.Spec{
		dram([]int{1, 3, 37, 70}, tt.BF16, tt.Tile),
		dram([]int{5, 33}, tt.FP32, tt.Tile),
		dram([]int{4, 9}, tt.INT32, tt.RowMajor),
		dram([]int{1, 1, 1, 8}, tt.UINT32, tt.RowMajor),
		{Shape: []int{1, 8, 32, 64}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1HeightSharded(8, [2]int{32, 64})},
		{Shape: []int{2, 40}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.L1Interleaved},
	}
	for _, s := range specs {
		t, err := p.alloc(s)
		if err != nil {
			return err
		}
		h := hostOf(r, s)
		if err := p.write(t, h); err != nil {
			return err
		}
		if err := p.exact("round trip "+s.String(), t); err != nil {
			return err
		}
		hc, _ := p.Card.ReadHost(t[1])
		if string(hc.Data) != string(h.Data) {
			return fmt.Errorf("round trip %v: the device does not give back what was written", s)
		}
	}
	p.Note("%d specs", len(specs))
	return nil
}

func caseWriteRefusals(p *Pair) error {
	spec := dram([]int{3, 40}, tt.FP32, tt.Tile)
	t, err := p.alloc(spec)
	if err != nil {
		return err
	}
	for _, h := range []tt.HostTensor{
		tt.HostFP32([]int{40, 3}, tt.Tile, make([]float32, 120)),
		tt.HostInt32([]int{3, 40}, tt.Tile, make([]int32, 120)),
		tt.HostFP32([]int{3, 40}, tt.RowMajor, make([]float32, 120)),
	} {
		es, ec := p.Sim.WriteHost(t[0], h), p.Card.WriteHost(t[1], h)
		if es == nil {
			return fmt.Errorf("sim accepted %v %v %v", h.Shape, h.DType, h.Layout)
		}
		if err := sameErr("write "+fmt.Sprint(h.Shape, h.DType, h.Layout), es, ec); err != nil {
			return err
		}
	}
	p.Note("shape, dtype, page config")
	return nil
}

func caseCaptureRefusals(p *Pair) error {
	spec := dram([]int{8}, tt.INT32, tt.RowMajor)
	t, err := p.alloc(spec)
	if err != nil {
		return err
	}
	h := tt.HostInt32([]int{8}, tt.RowMajor, make([]int32, 8))
	if err := p.write(t, h); err != nil {
		return err
	}
	var ids [2]tt.TraceID
	for i, d := range p.Devs() {
		if ids[i], err = d.BeginCapture(); err != nil {
			return fmt.Errorf("begin_trace_capture on %s: %v", []string{"sim", "device"}[i], err)
		}
	}
	checks := []struct {
		what string
		f    func(i int, d tt.Device) error
	}{
		{"write during capture", func(i int, d tt.Device) error { return d.WriteHost(t[i], h) }},
		{"read during capture", func(i int, d tt.Device) error { _, err := d.ReadHost(t[i]); return err }},
		{"nested begin_trace_capture", func(i int, d tt.Device) error { _, err := d.BeginCapture(); return err }},
		{"program-cache miss during capture", func(i int, d tt.Device) error { return run(d, tt.PlusOne{Input: t[i]}) }},
	}
	for _, c := range checks {
		es, ec := c.f(0, p.Sim), c.f(1, p.Card)
		if es == nil {
			return fmt.Errorf("%s: sim did not refuse", c.what)
		}
		if err := sameErr(c.what, es, ec); err != nil {
			return err
		}
	}
	for i, d := range p.Devs() {
		if err := d.EndCapture(ids[i]); err != nil {
			return err
		}
	}
	es, ec := p.Sim.EndCapture(ids[0]), p.Card.EndCapture(ids[1])
	if err := sameErr("end_trace_capture twice", es, ec); err != nil {
		return err
	}
	// An id that names no trace: execute_trace fails with replay_mesh_trace's
	// text; release_trace succeeds (the pool's erase of an absent id,
	// tt_metal/distributed/mesh_device.cpp).
	const unknown = 99
	es, ec = p.Sim.Execute(unknown), p.Card.Execute(unknown)
	if es == nil {
		return fmt.Errorf("execute_trace of an unknown id: sim did not refuse")
	}
	if err := sameErr("execute_trace of an unknown id", es, ec); err != nil {
		return err
	}
	if err := sameErr("release_trace of an unknown id", p.Sim.Release(unknown), p.Card.Release(unknown)); err != nil {
		return err
	}
	p.Note("%d refusals, same texts; release of an unknown id succeeds on both", len(checks)+2)
	return nil
}

func casePlusOne(p *Pair) error {
	spec := dram([]int{2, 8}, tt.INT32, tt.RowMajor)
	t, err := p.alloc(spec)
	if err != nil {
		return err
	}
	v := []int32{0, 5, -1, 7, math.MaxInt32, -5, 31, 32, 63, -1, 0, 1, 2, math.MaxInt32 - 1, -2, 100}
	for _, skip := range []bool{true, false} {
		if err := p.write(t, tt.HostInt32(spec.Shape, tt.RowMajor, v)); err != nil {
			return err
		}
		for k := 0; k < 2; k++ {
			if err := p.op("plus_one", func(i int) tt.Op { return tt.PlusOne{Input: t[i], SkipNegativeEntries: skip} }); err != nil {
				return err
			}
		}
		if err := p.exact(fmt.Sprintf("plus_one skip=%v", skip), t); err != nil {
			return err
		}
	}
	u, err := p.alloc(dram([]int{4}, tt.FP32, tt.RowMajor))
	if err != nil {
		return err
	}
	if err := p.op("plus_one on FLOAT32", func(i int) tt.Op { return tt.PlusOne{Input: u[i]} }); err == nil {
		if run(p.Sim, tt.PlusOne{Input: u[0]}) == nil {
			return fmt.Errorf("plus_one on FLOAT32: sim accepted it")
		}
	} else {
		return err
	}
	p.Note("-1 and INT32_MAX skipped with skip_negative_entries, wrap without")
	return nil
}

// caseEmbedding: 32 ids, a whole tile, so a TILE output is tilized by
// ttnn's fused kernel (embedding.cpp:46-58 at 622c6fb9); a ROW_MAJOR output
// takes ttnn's stick kernel directly.
func caseEmbedding(p *Pair, layout tt.Layout) error {
	return embeddingCase(p, layout, append([]uint32{0, 39, 7, 7, 21, 1}, make([]uint32, 32-6)...), false)
}

// caseEmbeddingSticks: 6 ids (not a whole tile) into a TILE output take
// ttnn's row-major kernel (embedding.cpp:46-58 at 622c6fb9), which writes
// each id's row as one stick of the output's padded width at page i
// (embeddings_rm_program_factory.cpp): the first three sticks fill the
// start of the output's three tiles, the other three land past its pages.
// What a read of the output then shows is the card's bytes, not the rows
// (the output is filled first, so that the bytes no stick covers agree).
func caseEmbeddingSticks(p *Pair) error {
	return embeddingCase(p, tt.Tile, []uint32{3, 39, 7, 7, 21, 1}, true)
}

// embeddingCase looks up idv in a 40×96 table into a [1,1,len(idv),96]
// output of the layout, filled with values first when fill is set.
func embeddingCase(p *Pair, layout tt.Layout, idv []uint32, fill bool) error {
	r := rand.New(rand.NewPCG(5, 6))
	const vocab, hidden = 40, 96
	b := len(idv)
	w, err := p.alloc(dram([]int{vocab, hidden}, tt.BF16, tt.RowMajor))
	if err != nil {
		return err
	}
	ids, err := p.alloc(dram([]int{1, 1, 1, b}, tt.UINT32, tt.RowMajor))
	if err != nil {
		return err
	}
	out, err := p.alloc(dram([]int{1, 1, b, hidden}, tt.BF16, layout))
	if err != nil {
		return err
	}
	if err := p.write(w, tt.HostBF16([]int{vocab, hidden}, tt.RowMajor, randBF16(r, vocab*hidden, 2))); err != nil {
		return err
	}
	if fill {
		if err := p.write(out, tt.HostBF16([]int{1, 1, b, hidden}, layout, randBF16(r, b*hidden, 2))); err != nil {
			return err
		}
	}
	if err := p.write(ids, tt.HostUint32([]int{1, 1, 1, b}, tt.RowMajor, idv)); err != nil {
		return err
	}
	if err := p.op("embedding", func(i int) tt.Op { return tt.Embedding{Input: ids[i], Weight: w[i], Output: out[i]} }); err != nil {
		return err
	}
	return p.exact("embedding output", out)
}
