package tthw

import (
	"fmt"
	"runtime/debug"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// abiVersion is OFFCARD_TT_ABI_VERSION of include/offcard_tt.h.
const abiVersion = 4

// Status codes of offcard_tt.h.
const (
	statusOK       = 0
	statusDevice   = 1
	statusArg      = 2
	statusABI      = 3
	statusInjected = 4
	statusInternal = 5
)

// lib is one loaded library: the C functions of offcard_tt.h.
type lib struct {
	path string

	abiVersion   func(opts string, v *uint32) int32
	open         func(abi uint32, opts string, dev *uintptr) int32
	close        func(dev uintptr, tensors, traces *uint64) int32
	lastError    func() uintptr // const char*, read by cString
	lastErrorOp  func() uintptr
	buildInfo    func(dev uintptr, buf *byte, capacity uint64, n *uint64) int32
	deviceFacts  func(dev uintptr, f *int64, n uint32) int32
	live         func(dev uintptr, tensors, traces *uint64) int32
	allocate     func(dev uintptr, spec *int64, n uint32, id, addr *uint64) int32
	free         func(dev uintptr, id uint64) int32
	address      func(dev uintptr, id uint64, addr *uint64) int32
	tensorSpec   func(dev uintptr, id uint64, spec *int64, capacity uint32, n *uint32) int32
	writeHost    func(dev uintptr, id uint64, shape *int64, rank uint32, dtype, layout int32, data unsafe.Pointer, n uint64) int32
	readHost     func(dev uintptr, id uint64, data unsafe.Pointer, n uint64) int32
	run          func(dev uintptr, op int32, ts *uint64, nt uint32, ia *int64, ni uint32, fa *float32, nf uint32, outs *uint64, nouts uint32) int32
	beginCapture func(dev uintptr, id *uint32) int32
	endCapture   func(dev uintptr, id uint32) int32
	execute      func(dev uintptr, id uint32) int32
	release      func(dev uintptr, id uint32) int32
}

var (
	libsMu sync.Mutex
	libs   = map[string]*lib{}
)

// load opens the library once per path (RTLD_NOW|RTLD_LOCAL) and binds
// every function of the ABI; a missing symbol is an error, not a crash.
func load(path string) (l *lib, err error) {
	libsMu.Lock()
	defer libsMu.Unlock()
	if l := libs[path]; l != nil {
		return l, nil
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("tthw: load %s: %v", path, err)
	}
	l = &lib{path: path}
	for _, f := range []struct {
		name string
		ptr  any
	}{
		{"offcard_tt_abi_version", &l.abiVersion},
		{"offcard_tt_open", &l.open},
		{"offcard_tt_close", &l.close},
		{"offcard_tt_last_error", &l.lastError},
		{"offcard_tt_last_error_op", &l.lastErrorOp},
		{"offcard_tt_build_info", &l.buildInfo},
		{"offcard_tt_device_facts", &l.deviceFacts},
		{"offcard_tt_live", &l.live},
		{"offcard_tt_allocate", &l.allocate},
		{"offcard_tt_free", &l.free},
		{"offcard_tt_address", &l.address},
		{"offcard_tt_tensor_spec", &l.tensorSpec},
		{"offcard_tt_write_host", &l.writeHost},
		{"offcard_tt_read_host", &l.readHost},
		{"offcard_tt_run", &l.run},
		{"offcard_tt_begin_capture", &l.beginCapture},
		{"offcard_tt_end_capture", &l.endCapture},
		{"offcard_tt_execute", &l.execute},
		{"offcard_tt_release", &l.release},
	} {
		sym, err := purego.Dlsym(h, f.name)
		if err != nil || sym == 0 {
			return nil, fmt.Errorf("tthw: %s does not export %s: is it an offcard_tt library?", path, f.name)
		}
		purego.RegisterFunc(f.ptr, sym)
	}
	libs[path] = l
	return l, nil
}

// maxCString bounds a string read from the library (its last error).
const maxCString = 64 << 10

// cString reads the NUL-terminated string at p, which the library
// returned. A hostile or broken library may return any address: a read
// that faults is recovered (debug.SetPanicOnFault) and reported as
// false, so a garbage pointer is an error of the library, never a crash
// of offcard. A string without NUL within maxCString bytes is cut there.
func cString(p uintptr) (s string, ok bool) {
	if p == 0 {
		return "", true
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			s, ok = "", false
		}
	}()
	var b []byte
	for i := uintptr(0); i < maxCString; i++ {
		a := p + i // an address the library returned, never a Go pointer
		c := **(**byte)(unsafe.Pointer(&a))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b), true
}

// errorText is the library's last error and op on this thread; an
// unreadable pointer is named as such.
func (l *lib) errorText() (msg, op string) {
	m, ok := cString(l.lastError())
	if !ok {
		m = fmt.Sprintf("(offcard_tt_last_error of %s returned an unreadable pointer)", l.path)
	}
	o, ok := cString(l.lastErrorOp())
	if !ok {
		o = "?"
	}
	return m, o
}
