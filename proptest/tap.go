package proptest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/offcard/offcard/tt"
)

// Tap is a tt.Device that passes every call to the device it wraps and
// records what the engine asked of it: allocations and frees, host writes
// and reads, trace captures, executions and releases, and the tensors each
// captured trace recorded. A factory builds the engine on a Tap; the
// properties then read the regime, the host writes and the live
// allocations from these device events, never from the engine's own
// report. It works over any tt.Device (the simulator, the card).
type Tap struct {
	tt.Device

	mu        sync.Mutex
	live      map[tt.TensorID]tapAlloc
	later     []tapAlloc // the live allocations after the baseline, oldest first
	next      int        // allocation counter
	baseline  int        // allocations up to MarkBaseline
	capturing tt.TraceID
	inCapture bool
	traces    map[tt.TraceID]map[tt.TensorID]bool // live traces and the tensors they recorded
	pageTable [4]tt.TensorID                      // the live page tables the last paged ops used, latest first (distinct)
	ev        TapEvents
}

type tapAlloc struct {
	t     tt.Tensor
	order int // 1, 2, ... in allocation order
}

// TapEvents count what the device was asked since the last TakeEvents.
type TapEvents struct {
	// HostWrites and HostReads are WriteHost and ReadHost calls.
	HostWrites, HostReads int
	// EagerOps are ops run outside a capture; CapturedOps ops recorded.
	EagerOps, CapturedOps int
	// Captures are completed BeginCapture..EndCapture pairs; Executes
	// trace executions (a capture's first run included); Releases.
	Captures, Executes, Releases int
	// Refused are end_trace_capture calls the device refused because its
	// trace region cannot hold the trace (tt.TraceRegionTooSmall).
	Refused int
	// Allocs and Frees are Allocate and Free calls that succeeded.
	Allocs, Frees int
	// Misuse lists calls the engine should not have made (a free of a
	// tensor the tap does not know, a release of an unknown trace), first
	// ones first.
	Misuse []string
}

// NewTap wraps dev.
func NewTap(dev tt.Device) *Tap {
	return &Tap{Device: dev, live: map[tt.TensorID]tapAlloc{}, traces: map[tt.TraceID]map[tt.TensorID]bool{}}
}

// MarkBaseline records that the engine's construction is over: the
// allocations made so far are its persistent tensors.
func (t *Tap) MarkBaseline() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.baseline = t.next
	t.later = t.later[:0]
}

// TakeEvents returns the events since the previous call.
func (t *Tap) TakeEvents() TapEvents {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.ev
	t.ev = TapEvents{}
	return e
}

// TapMemory is the device memory the engine holds, as the tap saw it.
type TapMemory struct {
	// Persistent are live tensors allocated during construction; Later the
	// live tensors allocated after it, oldest first.
	Persistent int
	Later      []tt.Tensor
	// PageTable is the latest still-live page table a paged op
	// (paged_update_cache, paged SDPA decode, paged_fill_cache) ran or was
	// recorded with (zero ID: none yet): the engine's current table.
	PageTable tt.TensorID
	// InTrace holds the tensors of Later that some live trace recorded.
	InTrace map[tt.TensorID]bool
	// Traces is the number of live (captured, not released) traces.
	Traces int
}

// Memory reports the live allocations and traces.
func (t *Tap) Memory() TapMemory {
	var m TapMemory
	t.memoryInto(&m)
	return m
}

// memoryInto is Memory into m, reusing m's Later and InTrace (the runner
// reads them at every check).
func (t *Tap) memoryInto(m *TapMemory) {
	t.mu.Lock()
	defer t.mu.Unlock()
	later, inTrace := m.Later[:0], m.InTrace
	clear(inTrace)
	*m = TapMemory{Persistent: len(t.live) - len(t.later), Traces: len(t.traces), PageTable: t.currentPageTable()}
	for _, a := range t.later {
		later = append(later, a.t)
		for _, ts := range t.traces {
			if ts[a.t.ID] {
				if inTrace == nil {
					inTrace = map[tt.TensorID]bool{}
				}
				inTrace[a.t.ID] = true
				break
			}
		}
	}
	m.Later, m.InTrace = later, inTrace // nil when m's were and none was needed
}

// currentPageTable is the latest page table a paged op used that is still
// live (a chunked prefill's page-table slices are freed after the chunk;
// the decode table they followed stays current); t.mu is held.
func (t *Tap) currentPageTable() tt.TensorID {
	for _, id := range t.pageTable {
		if _, ok := t.live[id]; ok {
			return id
		}
	}
	return 0
}

func (t *Tap) misuse(format string, a ...any) {
	if len(t.ev.Misuse) < 4 {
		t.ev.Misuse = append(t.ev.Misuse, fmt.Sprintf(format, a...))
	}
}

// Allocate implements tt.Device.
func (t *Tap) Allocate(spec tt.Spec) (tt.Tensor, error) {
	x, err := t.Device.Allocate(spec)
	if err != nil {
		return x, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.add(x)
	return x, nil
}

// add records a new allocation (t.mu held).
func (t *Tap) add(x tt.Tensor) {
	t.next++
	a := tapAlloc{t: x, order: t.next}
	t.live[x.ID] = a
	t.later = append(t.later, a) // t.next only grows: later stays in order
	t.ev.Allocs++
}

// Free implements tt.Device.
func (t *Tap) Free(x tt.Tensor) error {
	err := t.Device.Free(x)
	t.mu.Lock()
	defer t.mu.Unlock()
	if a, ok := t.live[x.ID]; !ok {
		t.misuse("free of %v, which is not allocated", x)
	} else if err == nil {
		delete(t.live, x.ID)
		// A freed table leaves the history, so that the tables of a long
		// chunked prefill (two per chunk, freed after it) never push the
		// decode table they follow out of it.
		if i := slices.Index(t.pageTable[:], x.ID); i >= 0 {
			copy(t.pageTable[i:], t.pageTable[i+1:])
			t.pageTable[len(t.pageTable)-1] = 0
		}
		if a.order > t.baseline {
			if i, ok := slices.BinarySearchFunc(t.later, a.order, func(e tapAlloc, o int) int { return cmp.Compare(e.order, o) }); ok {
				t.later = slices.Delete(t.later, i, i+1)
			}
		}
		t.ev.Frees++
	}
	return err
}

// WriteHost implements tt.Device.
func (t *Tap) WriteHost(dst tt.Tensor, src tt.HostTensor) error {
	t.mu.Lock()
	t.ev.HostWrites++
	t.mu.Unlock()
	return t.Device.WriteHost(dst, src)
}

// ReadHost implements tt.Device.
func (t *Tap) ReadHost(src tt.Tensor) (tt.HostTensor, error) {
	t.mu.Lock()
	t.ev.HostReads++
	t.mu.Unlock()
	return t.Device.ReadHost(src)
}

// Run implements tt.Device. The outputs a device allocates for an
// Allocating op are allocations like any other (the caller frees them).
func (t *Tap) Run(op tt.Op) ([]tt.Tensor, error) {
	op = tt.Ptr(op) // once: the device and pageTableOf take a pointer as it is
	outs, err := t.Device.Run(op)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range outs {
		t.add(x)
	}
	if id, ok := pageTableOf(op); ok && t.pageTable[0] != id {
		i := slices.Index(t.pageTable[:], id)
		if i < 0 {
			i = len(t.pageTable) - 1
		}
		copy(t.pageTable[1:i+1], t.pageTable[:i])
		t.pageTable[0] = id
	}
	if !t.inCapture {
		t.ev.EagerOps++
		return outs, err
	}
	t.ev.CapturedOps++
	if ts := t.traces[t.capturing]; ts != nil {
		for _, group := range [][]tt.Tensor{op.Inputs(), op.Outputs(), outs} {
			for _, x := range group {
				ts[x.ID] = true
			}
		}
	}
	return outs, err
}

// BeginCapture implements tt.Device.
func (t *Tap) BeginCapture() (tt.TraceID, error) {
	id, err := t.Device.BeginCapture()
	if err != nil {
		return id, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inCapture, t.capturing = true, id
	t.traces[id] = map[tt.TensorID]bool{}
	return id, nil
}

// EndCapture implements tt.Device.
func (t *Tap) EndCapture(id tt.TraceID) error {
	err := t.Device.EndCapture(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.inCapture && id == t.capturing {
		t.inCapture = false
		if err == nil {
			t.ev.Captures++
		} else if tt.TraceRegionTooSmall(err) {
			t.ev.Refused++
		}
	}
	return err
}

// Execute implements tt.Device.
func (t *Tap) Execute(id tt.TraceID) error {
	err := t.Device.Execute(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.ev.Executes++
	}
	return err
}

// Release implements tt.Device.
func (t *Tap) Release(id tt.TraceID) error {
	err := t.Device.Release(id)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.traces[id]; !ok {
		t.misuse("release of trace %d, which is not live", id)
	} else if err == nil {
		delete(t.traces, id)
		t.ev.Releases++
	}
	return err
}

// pageTableOf is the page table a paged op reads (value or pointer form,
// through tt.Ptr; false: none).
func pageTableOf(op tt.Op) (tt.TensorID, bool) {
	var pt *tt.Tensor
	switch o := tt.Ptr(op).(type) {
	case *tt.PagedUpdateCache:
		pt = o.PageTable
	case *tt.PagedFusedUpdateCache:
		pt = o.PageTable
	case *tt.PagedSDPADecode:
		return o.PageTable.ID, true
	case *tt.PagedFillCache:
		return o.PageTable.ID, true
	}
	if pt == nil {
		return 0, false
	}
	return pt.ID, true
}
