package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/offcard/offcard/bf16"
	"github.com/offcard/offcard/tt"
)

// mtFix is a linear of one tile by one into L1 with TransposeB: M = N = K =
// 32 and an L1 output give no core range and so the multi-core config
// (create_simple_matmul_program_config, operations/matmul/device/config/
// matmul_program_config.cpp), under which bound_matmul transposes b first
// (operations/matmul/matmul.cpp:209-253).
type mtFix struct {
	*ckFix
	op tt.Linear
	w  []bf16.BF16 // the weight's values, [n][k]
}

func newMTFix(t *testing.T, strict bool) *mtFix {
	d, err := New(Options{Arch: Wormhole, Strict: strict})
	if err != nil {
		t.Fatal(err)
	}
	f := &mtFix{ckFix: &ckFix{t: t, d: d}}
	f.op = tt.Linear{Input: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 32), Weight: f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 32),
		Output: f.alloc(tt.BF16, tt.Tile, l1, 1, 1, 32, 32), TransposeB: true}
	f.w = make([]bf16.BF16, 32*32)
	x := make([]bf16.BF16, 32*32)
	for i := range f.w {
		f.w[i] = bf16.FromFloat32(float32(i%37)/16 - 1)
		x[i] = bf16.FromFloat32(float32(i%11)/8 - 0.5)
	}
	f.write(f.op.Weight, f.w)
	f.write(f.op.Input, x)
	return f
}

func (f *mtFix) write(t tt.Tensor, v []bf16.BF16) {
	f.t.Helper()
	if err := f.d.WriteHost(t, tt.HostBF16(t.Spec.Shape, t.Spec.Layout, v)); err != nil {
		f.t.Fatal(err)
	}
}

func (f *mtFix) read(t tt.Tensor) []bf16.BF16 {
	f.t.Helper()
	h, err := f.d.ReadHost(t)
	if err != nil {
		f.t.Fatal(err)
	}
	return h.BF16s()
}

// TestLinearMultiCoreTransposesB: the call runs two programs (transpose,
// then the matmul; two misses), computes what the 1D config's call into
// DRAM computes, and leaves no tensor behind.
func TestLinearMultiCoreTransposesB(t *testing.T) {
	f := newMTFix(t, false)
	if c := f.d.linearConfigOf(&f.op); c.kind != mmMultiCore {
		t.Fatalf("config kind %d, want the multi-core config", c.kind)
	}
	live := liveCount(f.d)
	if err := f.run(f.op); err != nil {
		t.Fatal(err)
	}
	if _, m := f.d.ProgramCacheStats(); m != 2 {
		t.Errorf("%d program-cache misses, want 2 (transpose and matmul)", m)
	}
	if n := liveCount(f.d); n != live {
		t.Errorf("%d tensors live after the call, want %d", n, live)
	}
	got := f.read(f.op.Output)
	viaDRAM := f.op
	viaDRAM.Output = f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 32)
	if c := f.d.linearConfigOf(&viaDRAM); c.kind != mm1D && c.kind != mm2D {
		t.Fatalf("the DRAM call's config kind %d, want 1D or 2D", c.kind)
	}
	if err := f.run(viaDRAM); err != nil {
		t.Fatal(err)
	}
	if want := f.read(viaDRAM.Output); !slices.Equal(got, want) {
		t.Errorf("the multi-core call's output differs from the 1D call's")
	}
	if w := f.read(f.op.Weight); !slices.Equal(w, f.w) {
		t.Errorf("the weight changed")
	}
}

// TestLinearMultiCoreTransposeInCapture: captured, the transposed weight is
// allocated and freed inside the capture. A DRAM tensor allocated after the
// capture where it was is overwritten by every replay's transpose (the
// weight transposed, the card's bytes), and strict mode names the replay.
func TestLinearMultiCoreTransposeInCapture(t *testing.T) {
	f := newMTFix(t, true)
	if err := f.run(f.op); err != nil { // warm the program cache
		t.Fatal(err)
	}
	id, err := f.d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.run(f.op); err != nil {
		t.Fatal(err)
	}
	if err := f.d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	x := f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 32, 32)
	mine := make([]bf16.BF16, 32*32)
	for i := range mine {
		mine[i] = bf16.FromFloat32(7)
	}
	f.write(x, mine)
	f.d.ClearFindings()
	if err := f.d.Execute(id); err != nil {
		t.Fatal(err)
	}
	want := make([]bf16.BF16, 32*32)
	for i := range 32 {
		for j := range 32 {
			want[j*32+i] = f.w[i*32+j]
		}
	}
	if got := f.read(x); !slices.Equal(got, want) {
		t.Errorf("the tensor allocated where the transposed weight was is not the transposed weight after the replay (first value %v, want %v)", got[0], want[0])
	}
	fs := f.d.Findings()
	if len(fs) == 0 || fs[0].Class != TraceStaleAddress || !strings.Contains(fs[0].Detail, "freed during the capture") {
		t.Errorf("findings %v, want %s naming the freed transposed weight", fs, TraceStaleAddress)
	}
}

func liveCount(d *Device) int {
	n := 0
	d.bufs.all(func(*buffer) { n++ })
	return n
}

// TestLinearMultiCoreTransposeCBs: the transpose program's CBs (c_0 and
// c_16, two tiles each, 8192 B on the whole grid) come first, then the
// matmul's (c_0, c_1, c_16, 12288 B on the one output tile's core): with
// 10000 B or so of L1 free above the base the transpose runs and the
// matmul's region clashes; with less than 8192 B the transpose's does. An
// L1 weight's transposed copy is in L1 too (b's memory config) and takes
// the matmul's room.
func TestLinearMultiCoreTransposeCBs(t *testing.T) {
	for _, tc := range []struct {
		free     int
		l1Weight bool // the weight, and so its transposed copy, in L1
		want     string
	}{
		{10000, false, "linear: Statically allocated circular buffers in program 1 clash with L1 buffers on core range [0-0 - 0-0]."},
		{6000, false, "transpose: Statically allocated circular buffers in program 0 clash with L1 buffers on core range [0-0 - 7-7]."},
		// 12288 B free hold the matmul's 12288 B, but an L1 weight's copy
		// is allocated in L1 below them (a tile a bank) and leaves 10240.
		{12288, false, ""},
		{12288, true, "linear: Statically allocated circular buffers in program 1 clash with L1 buffers on core range [0-0 - 0-0]."},
	} {
		f := newMTFix(t, false)
		if tc.l1Weight {
			f.op.Weight = f.alloc(tt.BF16, tt.Tile, l1, 1, 1, 32, 32)
			f.write(f.op.Weight, f.w)
		}
		base := int(f.d.opt.L1UnreservedBase)
		tiles := (int(f.d.l1a.lowestUsed()) - base - tc.free) / 2048
		f.alloc(tt.BF16, tt.Tile, tt.L1Interleaved, 1, 1, 32*tiles, 32*f.d.opt.NumCores)
		err := f.run(f.op)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%d B free, weight in L1 %v: %v", tc.free, tc.l1Weight, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%d B free: %v, want %q", tc.free, err, tc.want)
		}
		var end uint64 = 8192
		if strings.HasPrefix(tc.want, "linear") {
			end = 12288
		}
		if err != nil && !strings.HasSuffix(err.Error(), "static circular buffer region ends at "+itoa(base+int(end))) {
			t.Errorf("%d B free: %v, want the region to end at base + %d", tc.free, err, end)
		}
	}
}

// TestLinearBiasPaths: ttnn checks a bias's layout and shape only where it
// gives the bias to the matmul device op (an unbatched bias one tile high,
// the input sharded or input and weight in DRAM interleaved:
// get_post_process_bias, operations/matmul/matmul.cpp:100-155); elsewhere it adds the
// bias after the matmul, and sim's own contract check speaks. A batched
// input or weight is not in the contract.
func TestLinearBiasPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(f *ckFix) tt.Linear
		want string
	}{
		{"fused: the padded width checked", func(f *ckFix) tt.Linear {
			o := f.linear()
			o.Bias = f.p(f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1, 32))
			return o
		}, "linear: Unsupported bias shape: padded last dimension of bias, 32, not equal to second input's padded last dimension, 64."},
		{"an L1 input: added after, sim's own check", func(f *ckFix) tt.Linear {
			o := f.linear()
			o.Input = f.alloc(tt.BF16, tt.Tile, l1, 1, 1, 32, 32)
			o.Bias = f.p(f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1, 32))
			return o
		}, "linear: " + tt.ContractPrefix + "Bias tensor has 32 elements, want 64"},
		{"a ROW_MAJOR bias 64 rows high: added after, so its layout is not refused", func(f *ckFix) tt.Linear {
			o := f.linear()
			o.Bias = f.p(f.alloc(tt.BF16, tt.RowMajor, dram, 1, 1, 64, 1))
			return o
		}, ""},
		{"a good fused bias", func(f *ckFix) tt.Linear {
			o := f.linear()
			o.Bias = f.p(f.alloc(tt.BF16, tt.Tile, dram, 1, 1, 1, 64))
			return o
		}, ""},
		{"a batched weight", func(f *ckFix) tt.Linear {
			o := f.linear()
			o.Weight = f.alloc(tt.BF16, tt.Tile, dram, 2, 1, 16, 64)
			return o
		}, "linear: " + tt.ContractPrefix + "Input and Weight must be [1,1,M,K] and [1,1,K,N] (no batch), got [1 1 32 32] and [2 1 16 64]"},
	} {
		d, err := New(Options{Arch: Wormhole})
		if err != nil {
			t.Fatal(err)
		}
		f := &ckFix{t: t, d: d}
		err = f.run(tc.op(f))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
