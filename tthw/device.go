package tthw

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/offcard/offcard/tt"
)

// Device is a tt.Device reached through an offcard_tt library.
var _ tt.Device = (*Device)(nil)

// Options configures Open. Zero fields take the library's defaults. The
// Fail* and ReportABI fields are fault injections the loopback understands
// (the ttnn shim refuses them).
type Options struct {
	// Arch is "wormhole" or "blackhole" (the loopback models either; the
	// shim reports what the card is and refuses a mismatch).
	Arch string
	// TraceRegionSize is the trace region in bytes (ttnn's
	// trace_region_size when opening the mesh device).
	TraceRegionSize uint64
	// DRAMBankSize is the loopback's bytes per DRAM bank.
	DRAMBankSize uint64
	// FailAlloc, FailOp, FailCapture make the Nth allocation, op, or
	// begin_trace_capture fail (1-based).
	FailAlloc, FailOp, FailCapture int
	// ReportABI makes the library report this ABI version.
	ReportABI uint32
}

// String renders the options as the ABI's "key=value;..." text.
func (o Options) String() string {
	var kv []string
	add := func(k string, v any, set bool) {
		if set {
			kv = append(kv, fmt.Sprintf("%s=%v", k, v))
		}
	}
	add("arch", o.Arch, o.Arch != "")
	add("trace_region", o.TraceRegionSize, o.TraceRegionSize != 0)
	add("dram_bank_size", o.DRAMBankSize, o.DRAMBankSize != 0)
	add("fail_alloc", o.FailAlloc, o.FailAlloc != 0)
	add("fail_op", o.FailOp, o.FailOp != 0)
	add("fail_capture", o.FailCapture, o.FailCapture != 0)
	add("abi", o.ReportABI, o.ReportABI != 0)
	return strings.Join(kv, ";")
}

// Error is a failure the library reported that is not a device refusal:
// a bad argument, an ABI mismatch, an injected fault, or an internal error
// (an exception the shim caught). Device refusals are *tt.Error.
type Error struct {
	Status int32
	Op     string
	Msg    string
}

func (e *Error) Error() string {
	kind := map[int32]string{statusArg: "bad argument", statusABI: "ABI mismatch", statusInjected: "injected fault", statusInternal: "internal error"}[e.Status]
	if kind == "" {
		kind = fmt.Sprintf("status %d", e.Status)
	}
	if e.Op != "" {
		return fmt.Sprintf("tthw: %s: %s: %s", e.Op, kind, e.Msg)
	}
	return fmt.Sprintf("tthw: %s: %s", kind, e.Msg)
}

// Injected reports whether err is a fault injected through Options.
func Injected(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == statusInjected
}

// Device is an open device of an offcard_tt library. It is not safe for
// concurrent use.
type Device struct {
	l      *lib
	h      uintptr
	closed bool
	facts  Facts
	info   map[string]string
}

// Facts are the device facts the library reports (offcard_tt_device_facts).
type Facts struct {
	Arch            string // "wormhole" or "blackhole"
	DRAMBanks       int
	DRAMAlignment   int
	L1Alignment     int
	L1Size          int64
	DRAMBankSize    int64
	GridX, GridY    int
	TraceRegionSize int64
}

// Leaks counts what was still live at Close (and was freed by it).
type Leaks struct {
	Tensors, Traces uint64
}

// call runs f with the goroutine locked to its OS thread and turns a
// non-zero status into an error read from that thread's last error.
func (d *Device) call(f func() int32) error {
	if d.closed {
		return errors.New("tthw: device is closed")
	}
	return d.l.call(f)
}

func (l *lib) call(f func() int32) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == statusOK {
		return nil
	}
	msg, op := l.errorText()
	if st == statusDevice {
		return &tt.Error{Op: op, Msg: msg}
	}
	return &Error{Status: st, Op: op, Msg: msg}
}

// Open loads the library at libPath, checks that it speaks this ABI
// version, and opens its device.
func Open(libPath string, opts Options) (*Device, error) {
	if abs, err := filepath.Abs(libPath); err == nil {
		libPath = abs
	}
	l, err := load(libPath)
	if err != nil {
		return nil, err
	}
	o := opts.String()
	var v uint32
	if err := l.call(func() int32 { return l.abiVersion(o, &v) }); err != nil {
		return nil, err
	}
	if v != abiVersion {
		return nil, fmt.Errorf("tthw: %s implements offcard_tt ABI %d, this offcard needs ABI %d: rebuild the library from this checkout", libPath, v, abiVersion)
	}
	d := &Device{l: l}
	if err := l.call(func() int32 { return l.open(abiVersion, o, &d.h) }); err != nil {
		return nil, err
	}
	if err := d.readInfo(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func (d *Device) readInfo() error {
	var f [9]int64
	if err := d.call(func() int32 { return d.l.deviceFacts(d.h, &f[0], uint32(len(f))) }); err != nil {
		return err
	}
	arch := map[int64]string{1: "wormhole", 2: "blackhole"}[f[0]]
	d.facts = Facts{Arch: arch, DRAMBanks: int(f[1]), DRAMAlignment: int(f[2]), L1Alignment: int(f[3]), L1Size: f[4],
		DRAMBankSize: f[5], GridX: int(f[6]), GridY: int(f[7]), TraceRegionSize: f[8]}
	var n uint64
	if err := d.call(func() int32 { return d.l.buildInfo(d.h, nil, 0, &n) }); err != nil {
		return err
	}
	buf := make([]byte, n+1)
	if err := d.call(func() int32 { return d.l.buildInfo(d.h, &buf[0], uint64(len(buf)), &n) }); err != nil {
		return err
	}
	d.info = map[string]string{}
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			d.info[k] = v
		}
	}
	return nil
}

// Facts returns the device facts.
func (d *Device) Facts() Facts { return d.facts }

// BuildInfo returns the library's build information (implementation,
// tt_metal_commit, arch, ...).
func (d *Device) BuildInfo() map[string]string {
	m := make(map[string]string, len(d.info))
	for k, v := range d.info {
		m[k] = v
	}
	return m
}

// Live counts the tensors and traces currently live on the device.
func (d *Device) Live() (Leaks, error) {
	var lk Leaks
	err := d.call(func() int32 { return d.l.live(d.h, &lk.Tensors, &lk.Traces) })
	return lk, err
}

// Close frees whatever is still live and closes the device; it reports
// what it had to free. A second Close is an error, not a crash.
func (d *Device) Close() (Leaks, error) {
	var lk Leaks
	if err := d.call(func() int32 { return d.l.close(d.h, &lk.Tensors, &lk.Traces) }); err != nil {
		return lk, err
	}
	d.closed = true
	d.h = 0
	return lk, nil
}

// Allocate implements tt.Device.
func (d *Device) Allocate(spec tt.Spec) (tt.Tensor, error) {
	w, err := specWords(spec)
	if err != nil {
		return tt.Tensor{}, err
	}
	var id, addr uint64
	if err := d.call(func() int32 { return d.l.allocate(d.h, &w[0], uint32(len(w)), &id, &addr) }); err != nil {
		return tt.Tensor{}, err
	}
	spec.Shape = append([]int(nil), spec.Shape...)
	return tt.Tensor{ID: tt.TensorID(id), Spec: spec, Addr: addr}, nil
}

// Free implements tt.Device.
func (d *Device) Free(t tt.Tensor) error {
	return d.call(func() int32 { return d.l.free(d.h, uint64(t.ID)) })
}

// Address implements tt.Device.
func (d *Device) Address(t tt.Tensor) (uint64, error) {
	var a uint64
	err := d.call(func() int32 { return d.l.address(d.h, uint64(t.ID), &a) })
	return a, err
}

// WriteHost implements tt.Device.
func (d *Device) WriteHost(dst tt.Tensor, src tt.HostTensor) error {
	if err := src.Check(); err != nil {
		return err
	}
	shape := make([]int64, len(src.Shape)+1)
	for i, x := range src.Shape {
		shape[i] = int64(x)
	}
	var p unsafe.Pointer
	if len(src.Data) > 0 {
		p = unsafe.Pointer(&src.Data[0])
	}
	err := d.call(func() int32 {
		return d.l.writeHost(d.h, uint64(dst.ID), &shape[0], uint32(len(src.Shape)), int32(src.DType), int32(src.Layout), p, uint64(len(src.Data)))
	})
	runtime.KeepAlive(src.Data)
	return err
}

// ReadHost implements tt.Device.
func (d *Device) ReadHost(src tt.Tensor) (tt.HostTensor, error) {
	spec, err := d.spec(src)
	if err != nil {
		if len(src.Spec.Shape) == 0 {
			return tt.HostTensor{}, err
		}
		// A freed handle has no spec to ask for; the read itself answers
		// with ttnn's text for a deallocated tensor.
		spec = src.Spec
	}
	data := make([]byte, spec.Volume()*spec.DType.Size())
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	err = d.call(func() int32 { return d.l.readHost(d.h, uint64(src.ID), p, uint64(len(data))) })
	runtime.KeepAlive(data)
	if err != nil {
		return tt.HostTensor{}, err
	}
	return tt.HostTensor{Shape: spec.Shape, DType: spec.DType, Layout: spec.Layout, Data: data}, nil
}

// spec asks the device for a tensor's spec (the handle's own may be stale
// or, for device-allocated outputs, absent).
func (d *Device) spec(t tt.Tensor) (tt.Spec, error) {
	var w [specHeader + maxRank]int64
	var n uint32
	if err := d.call(func() int32 { return d.l.tensorSpec(d.h, uint64(t.ID), &w[0], uint32(len(w)), &n) }); err != nil {
		return tt.Spec{}, err
	}
	return specFromWords(w[:n])
}

// Run implements tt.Device. For an Allocating op it returns the tensors
// the device allocated, with the specs the device reports for them.
func (d *Device) Run(op tt.Op) ([]tt.Tensor, error) {
	a, err := marshalOp(op)
	if err != nil {
		return nil, err
	}
	ints := a.ints
	for _, s := range a.outSpecs {
		w, err := specWords(s)
		if err != nil {
			return nil, err
		}
		ints = append(ints, w...)
	}
	outs := make([]uint64, len(a.outSpecs))
	if err := d.call1(a.code, a.tensors, ints, a.floats, outs); err != nil {
		return nil, err
	}
	if len(outs) == 0 {
		return nil, nil
	}
	res := make([]tt.Tensor, len(outs))
	for j, id := range outs {
		t := tt.Tensor{ID: tt.TensorID(id)}
		if t.Spec, err = d.spec(t); err == nil {
			t.Addr, err = d.Address(t)
		}
		if err != nil {
			for _, x := range outs {
				_ = d.Free(tt.Tensor{ID: tt.TensorID(x)})
			}
			return nil, err
		}
		res[j] = t
	}
	return res, nil
}

// call1 is one offcard_tt_run.
func (d *Device) call1(code int32, tensors []uint64, ints []int64, floats []float32, outs []uint64) error {
	var ts, outp *uint64
	var ia *int64
	var fa *float32
	if len(tensors) > 0 {
		ts = &tensors[0]
	}
	if len(ints) > 0 {
		ia = &ints[0]
	}
	if len(floats) > 0 {
		fa = &floats[0]
	}
	if len(outs) > 0 {
		outp = &outs[0]
	}
	err := d.call(func() int32 {
		return d.l.run(d.h, code, ts, uint32(len(tensors)), ia, uint32(len(ints)), fa, uint32(len(floats)), outp, uint32(len(outs)))
	})
	runtime.KeepAlive(tensors)
	runtime.KeepAlive(ints)
	runtime.KeepAlive(floats)
	runtime.KeepAlive(outs)
	return err
}

// BeginCapture implements tt.Device.
func (d *Device) BeginCapture() (tt.TraceID, error) {
	var id uint32
	err := d.call(func() int32 { return d.l.beginCapture(d.h, &id) })
	return tt.TraceID(id), err
}

// EndCapture implements tt.Device.
func (d *Device) EndCapture(id tt.TraceID) error {
	return d.call(func() int32 { return d.l.endCapture(d.h, uint32(id)) })
}

// Execute implements tt.Device.
func (d *Device) Execute(id tt.TraceID) error {
	return d.call(func() int32 { return d.l.execute(d.h, uint32(id)) })
}

// Release implements tt.Device.
func (d *Device) Release(id tt.TraceID) error {
	return d.call(func() int32 { return d.l.release(d.h, uint32(id)) })
}
