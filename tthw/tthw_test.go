package tthw_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/offcard/offcard/tt"
	"github.com/offcard/offcard/tthw"
	"github.com/offcard/offcard/tthw/tthwtest"
)

func open(t *testing.T, o tthw.Options) *tthw.Device {
	t.Helper()
	d, err := tthw.Open(tthwtest.Loopback(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestOpenFactsBuildInfo(t *testing.T) {
	for _, c := range []struct {
		arch         string
		banks, align int
	}{{"wormhole", 12, 32}, {"blackhole", 8, 64}} {
		d := open(t, tthw.Options{Arch: c.arch})
		f := d.Facts()
		if f.Arch != c.arch || f.DRAMBanks != c.banks || f.DRAMAlignment != c.align {
			t.Errorf("%s: facts %+v", c.arch, f)
		}
		bi := d.BuildInfo()
		if bi["implementation"] != "loopback" || !strings.HasPrefix(bi["tt_metal_commit"], "622c6fb9") || bi["arch"] != c.arch {
			t.Errorf("%s: build info %v", c.arch, bi)
		}
	}
	if _, err := tthw.Open(tthwtest.Loopback(t), tthw.Options{Arch: "grayskull"}); err == nil || !strings.Contains(err.Error(), "unknown arch") {
		t.Errorf("bad arch: %v", err)
	}
	if _, err := tthw.Open("/nonexistent/lib.so", tthw.Options{}); err == nil {
		t.Error("missing library opened")
	}
}

// The allocator: one address across banks, DRAM bottom-up first fit,
// immediate reuse of a freed address, L1 top-down.
func TestAllocatorReuse(t *testing.T) {
	d := open(t, tthw.Options{})
	spec := tt.Spec{Shape: []int{1, 1, 32, 128}, DType: tt.BF16, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	a, err := d.Allocate(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := d.Allocate(spec)
	if a.Addr != 32 || b.Addr <= a.Addr {
		t.Fatalf("addresses %#x %#x", a.Addr, b.Addr)
	}
	if err := d.Free(a); err != nil {
		t.Fatal(err)
	}
	c, _ := d.Allocate(spec)
	if c.Addr != a.Addr || c.ID == a.ID {
		t.Errorf("freed address not reused at once: %v after %v", c, a)
	}
	l1 := spec
	l1.Memory = tt.L1Interleaved
	x, _ := d.Allocate(l1)
	y, _ := d.Allocate(l1)
	if y.Addr >= x.Addr {
		t.Errorf("L1 not top-down: %#x then %#x", x.Addr, y.Addr)
	}
	if got, _ := d.Address(c); got != c.Addr {
		t.Errorf("Address %#x want %#x", got, c.Addr)
	}
	big := tt.Spec{Shape: []int{1 << 20, 1 << 12}, DType: tt.FP32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}
	if _, err := d.Allocate(big); !tt.HasMsg(err, "Out of Memory: Not enough space to allocate") {
		t.Errorf("huge allocation: %v", err)
	}
}

func TestHostRoundTripAndChecks(t *testing.T) {
	d := open(t, tthw.Options{})
	spec := tt.Spec{Shape: []int{3, 40}, DType: tt.FP32, Layout: tt.Tile, Memory: tt.DRAMInterleaved}
	x, err := d.Allocate(spec)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, 120)
	for i := range v {
		v[i] = float32(i) - 7.5
	}
	h := tt.HostFP32([]int{3, 40}, tt.Tile, v)
	if err := d.WriteHost(x, h); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadHost(x)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Float32s(), v) || !reflect.DeepEqual(got.Shape, []int{3, 40}) {
		t.Errorf("round trip: %v", got.Float32s()[:8])
	}
	for _, c := range []struct {
		h   tt.HostTensor
		msg string
	}{
		{tt.HostFP32([]int{40, 3}, tt.Tile, v), tt.MsgHostShape},
		{tt.HostInt32([]int{3, 40}, tt.Tile, make([]int32, 120)), tt.MsgHostDType},
		{tt.HostFP32([]int{3, 40}, tt.RowMajor, v), tt.MsgHostPageConfig},
	} {
		if err := d.WriteHost(x, c.h); !tt.HasMsg(err, c.msg) {
			t.Errorf("want %q, got %v", c.msg, err)
		}
	}
	id, err := d.BeginCapture()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.WriteHost(x, h); !tt.HasMsg(err, tt.MsgWritesDuringCapture) {
		t.Errorf("write during capture: %v", err)
	}
	if _, err := d.ReadHost(x); !tt.HasMsg(err, tt.MsgReadsDuringCapture) {
		t.Errorf("read during capture: %v", err)
	}
	if _, err := d.BeginCapture(); !tt.HasMsg(err, "CQ 0 is already being used for tracing") {
		t.Errorf("nested capture: %v", err)
	}
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(id); err != nil {
		t.Fatal(err)
	}
	var te *tt.Error
	if err := d.Free(tt.Tensor{ID: 999}); err == nil || errors.As(err, &te) {
		t.Errorf("free of unknown handle: %v (want a tthw argument error)", err)
	}
}

// A trace replays at the addresses baked at capture: plus_one recorded on
// a tensor that is then freed writes into whoever got its address.
func TestTraceReplayBakedAddress(t *testing.T) {
	d := open(t, tthw.Options{})
	spec := tt.Spec{Shape: []int{8}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}
	pos, _ := d.Allocate(spec)
	if err := d.WriteHost(pos, tt.HostInt32([]int{8}, tt.RowMajor, []int32{0, 5, -1, 7, 0, 0, 0, 2147483647})); err != nil {
		t.Fatal(err)
	}
	op := tt.PlusOne{Input: pos, SkipNegativeEntries: true}
	if _, err := d.Run(op); err != nil { // warm: program cache
		t.Fatal(err)
	}
	id, _ := d.BeginCapture()
	if _, err := d.Run(op); err != nil {
		t.Fatal(err)
	}
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	got, _ := d.ReadHost(pos)
	if want := []int32{1, 6, -1, 8, 1, 1, 1, 2147483647}; !reflect.DeepEqual(got.Int32s(), want) {
		t.Fatalf("after eager+capture %v want %v (capture must not execute)", got.Int32s(), want)
	}
	if err := d.Execute(id); err != nil {
		t.Fatal(err)
	}
	got, _ = d.ReadHost(pos)
	if want := []int32{2, 7, -1, 9, 2, 2, 2, 2147483647}; !reflect.DeepEqual(got.Int32s(), want) {
		t.Errorf("after replay %v want %v", got.Int32s(), want)
	}
	d.Free(pos)
	other, _ := d.Allocate(spec)
	if other.Addr != pos.Addr {
		t.Fatalf("address not reused")
	}
	d.WriteHost(other, tt.HostInt32([]int{8}, tt.RowMajor, make([]int32, 8)))
	if err := d.Execute(id); err != nil {
		t.Fatal(err)
	}
	got, _ = d.ReadHost(other)
	if got.Int32s()[0] != 1 {
		t.Errorf("replay did not write through the stale address: %v", got.Int32s())
	}
	// a program-cache miss during capture is refused with tt-metal's text
	id2, _ := d.BeginCapture()
	if _, err := d.Run(tt.PlusOne{Input: other}); !tt.HasMsg(err, fmt.Sprintf(tt.MsgProgramCacheMissDuringCapture, id2)) {
		t.Errorf("miss during capture: %v", err)
	}
	d.EndCapture(id2)
}

func TestFaultInjection(t *testing.T) {
	lib := tthwtest.Loopback(t)
	spec := tt.Spec{Shape: []int{8}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}

	if _, err := tthw.Open(lib, tthw.Options{ReportABI: 99}); err == nil || !strings.Contains(err.Error(), "ABI 99") {
		t.Errorf("wrong ABI accepted: %v", err)
	}

	d := open(t, tthw.Options{FailAlloc: 2})
	if _, err := d.Allocate(spec); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Allocate(spec); !tthw.Injected(err) {
		t.Errorf("2nd allocation: %v", err)
	}
	if _, err := d.Allocate(spec); err != nil {
		t.Errorf("3rd allocation: %v", err)
	}

	d = open(t, tthw.Options{FailOp: 1})
	x, _ := d.Allocate(spec)
	if _, err := d.Run(tt.PlusOne{Input: x}); !tthw.Injected(err) {
		t.Errorf("1st op: %v", err)
	}
	if _, err := d.Run(tt.PlusOne{Input: x}); err != nil {
		t.Errorf("2nd op: %v", err)
	}

	d = open(t, tthw.Options{FailCapture: 1})
	if _, err := d.BeginCapture(); !tthw.Injected(err) {
		t.Errorf("capture: %v", err)
	}
	if id, err := d.BeginCapture(); err != nil || d.EndCapture(id) != nil {
		t.Errorf("2nd capture: %v", err)
	}
}

func TestCloseReportsLeaks(t *testing.T) {
	d, err := tthw.Open(tthwtest.Loopback(t), tthw.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec := tt.Spec{Shape: []int{8}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}
	a, _ := d.Allocate(spec)
	d.Allocate(spec)
	d.Free(a)
	id, _ := d.BeginCapture()
	d.EndCapture(id)
	lk, err := d.Close()
	if err != nil || lk != (tthw.Leaks{Tensors: 1, Traces: 1}) {
		t.Errorf("leaks %+v err %v", lk, err)
	}
	if _, err := d.Close(); err == nil {
		t.Error("second close succeeded")
	}
	if _, err := d.Allocate(spec); err == nil {
		t.Error("allocate after close succeeded")
	}
}

// BenchmarkCallPurego is one call through purego (offcard_tt_address: a
// handle lookup in C) against BenchmarkCallGo, a direct Go call doing the
// same map-free lookup.
func BenchmarkCallPurego(b *testing.B) {
	d, err := tthw.Open(tthwtest.Loopback(b), tthw.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	x, _ := d.Allocate(tt.Spec{Shape: []int{8}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved})
	b.ResetTimer()
	for b.Loop() {
		if _, err := d.Address(x); err != nil {
			b.Fatal(err)
		}
	}
}

type goDev struct{ addrs []uint64 }

//go:noinline
func (g *goDev) Address(t tt.Tensor) (uint64, error) {
	if int(t.ID) >= len(g.addrs) {
		return 0, errors.New("no")
	}
	return g.addrs[t.ID], nil
}

func BenchmarkCallGo(b *testing.B) {
	g := &goDev{addrs: []uint64{0, 32}}
	x := tt.Tensor{ID: 1}
	for b.Loop() {
		if _, err := g.Address(x); err != nil {
			b.Fatal(err)
		}
	}
}

// Close ends an open capture and counts it with the leaked traces; Live
// counts captured traces only.
func TestCloseCountsAnOpenCapture(t *testing.T) {
	d, err := tthw.Open(tthwtest.Loopback(t), tthw.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := d.BeginCapture()
	if err := d.EndCapture(id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.BeginCapture(); err != nil {
		t.Fatal(err)
	}
	if lk, err := d.Live(); err != nil || lk.Traces != 1 {
		t.Errorf("live during the second capture: %+v %v", lk, err)
	}
	lk, err := d.Close()
	if err != nil || lk != (tthw.Leaks{Traces: 2}) {
		t.Errorf("leaks %+v err %v, want the captured trace and the open capture", lk, err)
	}
}

// The trace region asked for at open is the one the device reports.
func TestFactsReportTheTraceRegion(t *testing.T) {
	for _, size := range []uint64{0, 1 << 20} {
		d, err := tthw.Open(tthwtest.Loopback(t), tthw.Options{TraceRegionSize: size})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Facts().TraceRegionSize; got != int64(size) {
			t.Errorf("asked for %d B, device reports %d B", size, got)
		}
		d.Close()
	}
}

// A failed end (the trace region too small) leaves what the card leaves:
// the trace's bytes in the device's trace buffers size, the trace kept
// (bufferless, not executable) until released, ids counted from 0 — the
// same answers as sim's (sim TestTraceRegionBudget).
func TestTraceRegionFailedEnd(t *testing.T) {
	d := open(t, tthw.Options{TraceRegionSize: 1024})
	spec := tt.Spec{Shape: []int{8}, DType: tt.INT32, Layout: tt.RowMajor, Memory: tt.DRAMInterleaved}
	pos, _ := d.Allocate(spec)
	op := tt.PlusOne{Input: pos}
	if _, err := d.Run(op); err != nil {
		t.Fatal(err)
	}
	id, err := d.BeginCapture()
	if err != nil || id != 0 {
		t.Fatalf("first capture: id %d, %v; want id 0", id, err)
	}
	if _, err := d.Run(op); err != nil {
		t.Fatal(err)
	}
	if err := d.EndCapture(id); !tt.HasMsg(err, "Creating trace buffers of size 2048B on MeshDevice 0, but only 1024B is allocated for trace region.") {
		t.Fatalf("end: %v", err)
	}
	if err := d.Execute(id); err == nil || !strings.Contains(err.Error(), "end_trace_capture failed") {
		t.Errorf("execute of the failed trace: %v", err)
	}
	if err := d.Release(id); err != nil {
		t.Fatal(err)
	}
	id2, err := d.BeginCapture()
	if err != nil || id2 != 1 {
		t.Fatalf("second capture: id %d, %v; want id 1", id2, err)
	}
	if err := d.EndCapture(id2); !tt.HasMsg(err, "Creating trace buffers of size 3072B on MeshDevice 0, but only 1024B is allocated for trace region.") {
		t.Fatalf("empty capture after a failed end: %v", err)
	}
}
