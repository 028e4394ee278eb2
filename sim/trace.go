package sim

import (
	"fmt"
	"sort"

	"github.com/offcard/offcard/tt"
)

// Trace capture and replay (§5). During capture ops are validated (only on a
// program-cache miss, which is fatal while capturing), their runtime
// arguments computed with the current addresses, and the launch recorded
// instead of run; device memory is untouched (§5.2). Execute replays the
// launches at the recorded addresses with no validation and no allocation.
//
// Device fields used here (declared in device.go): capturing, recorded, and
// the ones below.

// trace is a captured trace.
type trace struct {
	launches   []launch
	footprints []footprint
	// internal: tensors allocated and freed during the trace's own capture
	// (ttnn.deallocate of an intermediate inside the capture, as
	// tt_transformers does: models/tt_transformers/tt/decoder.py:306,
	// attention.py, mlp.py). tt-metal's allocator is not trace-aware: a
	// deallocate during capture returns the address at once
	// (tt_metal/impl/buffers/buffer.cpp:447-478, Buffer::deallocate to the
	// allocator's deallocate_buffer), later ops of
	// the same capture get it again, and the trace replays the launches at
	// those addresses in capture order, so the trace alone uses them
	// coherently. They are a hazard only when another tensor, allocated
	// after the capture, is alive there when the trace executes (§5.4's
	// "may be corrupted once a trace is executed"): checkReplay reports
	// that; noteAllocation does not report the allocation itself.
	internal map[tt.TensorID]bool
	// refs: every tensor the trace's footprints reference, at its address.
	refs map[tt.TensorID]uint64
	// failed: its end_trace_capture failed (the trace region too small).
	// ttnn keeps the trace, created at begin_mesh_trace, with no buffer
	// (tt_metal/distributed/mesh_device.cpp:1314, 1345-1347:
	// populate_mesh_buffer throws before allocating it, mesh_trace.cpp:75-94); release_trace
	// removes it, and its bytes stay counted (failedBytes).
	failed bool
}

// footprint is the operands one recorded op touched, as allocated at capture.
type footprint struct {
	op   string
	args string // opArgs, for full op events on replay (unset when events are brief or none)
	refs []operandRef
	// first..last are the indexes of the op's launches in the trace.
	first, last int
}

type operandRef struct {
	id      tt.TensorID
	bt      tt.BufferType
	addr    uint64
	perBank uint64 // bytes reserved in each bank
	write   bool
}

// touches is the footprint as op-event touches (the capture-time operands).
func (fp *footprint) touches() []Touch {
	out := make([]Touch, len(fp.refs))
	for i, r := range fp.refs {
		out[i] = Touch{Tensor: r.id, Write: r.write, Buffer: r.bt, Addr: r.addr, Bytes: r.perBank}
	}
	return out
}

// Trace finding classes.
const (
	// TraceStaleAddress: a replay touches an address whose tensor was freed
	// (and possibly handed to another tensor) since capture.
	TraceStaleAddress FindingClass = "trace-replay-stale-address"
	// AllocOverlapsTrace: an allocation overlaps memory a live trace uses.
	AllocOverlapsTrace FindingClass = "allocation-overlaps-live-trace"
	// HostIODuringCapture: a host write or read while capturing.
	HostIODuringCapture FindingClass = "host-io-during-capture"
	// CacheMissDuringCapture: a program-cache miss while capturing.
	CacheMissDuringCapture FindingClass = "program-cache-miss-during-capture"
)

// traceBytesPerLaunch is offcard's estimate of one launch's dispatch
// commands in the trace buffer (the notes do not give the real size); it
// only matters for the trace-region budget check.
const traceBytesPerLaunch = 1024

// footprintOf is the footprint of op, whose launches are the recorded
// ones from start on; ins and outs are its operands (outs: the tensors
// the device allocated for an Allocating op). Its references are a piece
// of the device's capture slab, as record's launches are.
func (d *Device) footprintOf(op tt.Op, ins, outs []tt.Tensor, start int) footprint {
	fp := footprint{op: op.Name(), first: start, last: len(d.recorded) - 1}
	if d.observing() && !d.brief() {
		fp.args = opArgs(op)
	}
	n := len(ins) + len(outs)
	if len(d.refSlab) < n {
		d.refSlab = make([]operandRef, max(n, 256))
	}
	fp.refs = d.operandRefs(d.refSlab[:0:n], ins, outs)
	d.refSlab = d.refSlab[n:]
	if len(d.hiddenRefs) > 0 { // tensors the op allocated and freed itself, as they were while live
		fp.refs = append(fp.refs, d.hiddenRefs...)
		d.hiddenRefs = d.hiddenRefs[:0]
	}
	return fp
}

// mustAddr is the address of live tensor id (overlapping's).
func (d *Device) mustAddr(id tt.TensorID) uint64 {
	b, _ := d.bufs.get(id)
	return b.addr
}

func (d *Device) allocatorOf(bt tt.BufferType) *allocator {
	if bt == tt.L1 {
		return d.l1a
	}
	return d.dram
}

// hostWriteAllowed is the check of the write path during capture (§5.3).
func (d *Device) hostWriteAllowed() error {
	if d.capturing {
		d.find(Finding{Class: HostIODuringCapture, Op: "copy_host_to_device_tensor", Core: -1, User: -1, Index: -1,
			Detail: "host write while trace " + itoa(int(d.traceID)) + " is being captured"})
		return tt.Errorf("copy_host_to_device_tensor", tt.MsgWritesDuringCaptureID, d.traceID)
	}
	return nil
}

// hostReadAllowed is the check of the read path during capture (§5.3).
func (d *Device) hostReadAllowed() error {
	if d.capturing {
		d.find(Finding{Class: HostIODuringCapture, Op: "read", Core: -1, User: -1, Index: -1,
			Detail: "host read while trace " + itoa(int(d.traceID)) + " is being captured"})
		return &tt.Error{Op: "read", Msg: tt.MsgReadsDuringCapture}
	}
	return nil
}

// BeginCapture implements tt.Device.BeginCapture (begin_trace_capture on cq 0).
func (d *Device) BeginCapture() (tt.TraceID, error) {
	// begin_trace_capture takes the next id from MeshTrace's counter,
	// which starts at 0 (tt_metal/distributed/mesh_trace.cpp:40-42,
	// global_trace_id++), before begin_mesh_trace's check, which prints
	// that new id (tt_metal/distributed/mesh_device.cpp). ttnn's counter
	// is the process's; sim's is the device's, so a device's ids do not
	// depend on what else ran in the process.
	id := d.nextTrace
	d.nextTrace++
	if d.capturing {
		return 0, tt.Errorf("begin_trace_capture", tt.MsgAlreadyTracing, 0, id)
	}
	d.traceID = id
	d.capturing = true
	d.recorded, d.footprints = nil, nil
	d.capAlloc, d.capFreed = map[tt.TensorID]bool{}, map[tt.TensorID]bool{}
	d.unsafeAlloc = false // begin_mesh_trace marks allocations safe (§5.4)
	return d.traceID, nil
}

// EndCapture implements tt.Device.EndCapture.
func (d *Device) EndCapture(id tt.TraceID) error {
	if !d.capturing || id != d.traceID {
		return tt.Errorf("end_trace_capture", tt.MsgNotTracing, 0, id)
	}
	d.capturing = false
	internal := d.capFreed
	d.capAlloc, d.capFreed = nil, nil
	size := uint64(len(d.recorded)+1) * traceBytesPerLaunch
	if d.traces == nil {
		d.traces = map[tt.TraceID]*trace{}
	}
	if total := d.traceBytes() + size; d.opt.TraceRegionSize > 0 && total > d.opt.TraceRegionSize {
		d.recorded, d.footprints = nil, nil
		// populate_mesh_buffer adds the trace's size to the device's trace
		// buffers size before its check, and the text prints that sum
		// (tt_metal/distributed/mesh_trace.cpp:59-60, 75-80). Nothing takes it
		// back: ~MeshTraceBuffer subtracts only an allocated buffer's size
		// (mesh_trace.cpp:156-161), so later captures have that much less
		// region, and once a later trace has marked allocations unsafe no
		// release marks them safe again (release_mesh_trace does only at
		// a size of 0, mesh_device.cpp:1274-1277; the failed end's own
		// mark_allocations_unsafe, :1347, is not reached). The trace
		// itself stays, empty, until released.
		d.failedBytes += size
		d.traces[id] = &trace{failed: true}
		return tt.Errorf("end_trace_capture", tt.MsgTraceRegionTooSmall, total, 0, d.opt.TraceRegionSize)
	}
	tr := &trace{launches: d.recorded, footprints: d.footprints, internal: internal, refs: map[tt.TensorID]uint64{}}
	for _, fp := range tr.footprints {
		for _, r := range fp.refs {
			tr.refs[r.id] = r.addr
		}
	}
	d.traces[id] = tr
	d.recorded, d.footprints = nil, nil
	d.unsafeAlloc = true // end_mesh_trace marks allocations unsafe (§5.4)
	return nil
}

// traceBytes is the device's trace buffers size (get_trace_buffers_size):
// the live traces' and what failed ends added (failedBytes).
func (d *Device) traceBytes() uint64 {
	n := d.failedBytes
	for _, t := range d.traces {
		if !t.failed {
			n += uint64(len(t.launches)+1) * traceBytesPerLaunch
		}
	}
	return n
}

// Execute implements tt.Device.Execute: the recorded launches run verbatim.
// In strict mode every recorded operand is first checked against the
// allocator's current state.
func (d *Device) Execute(id tt.TraceID) error {
	t, ok := d.traces[id]
	if !ok {
		return tt.Errorf("execute_trace", tt.MsgTraceMustExist, id, 0, 0)
	}
	if d.capturing {
		return fmt.Errorf("sim: execute_trace inside a capture is not supported")
	}
	if t.failed {
		// ttnn would enqueue a trace with no buffer (mesh_device.cpp:1350-1367).
		return fmt.Errorf("sim: execute_trace of trace %d, whose end_trace_capture failed: the card has no buffer for it", id)
	}
	if d.opt.Strict {
		d.checkReplay(id, t)
	}
	d.replaying = id
	defer func() { d.replaying = 0 }()
	for i := range t.footprints {
		fp := &t.footprints[i]
		for _, l := range t.launches[fp.first : fp.last+1] {
			if err := l.exec(d); err != nil {
				return err
			}
		}
		if d.brief() {
			d.emit(OpEvent{Op: fp.op, Regime: Replay, Trace: id})
		} else if d.observing() {
			d.emit(OpEvent{Op: fp.op, Regime: Replay, Trace: id, Args: fp.args, Touched: fp.touches()})
		}
	}
	return nil
}

// checkReplay reports recorded operands whose tensor is gone or whose
// address now belongs to another tensor. An internal operand (freed
// during the capture) is reported only when a tensor the trace does not
// reference there is now alive on its address.
func (d *Device) checkReplay(id tt.TraceID, t *trace) {
	type rng struct {
		bt         tt.BufferType
		addr, size uint64
	}
	seen := map[rng]bool{}
	for _, fp := range t.footprints {
		for _, r := range fp.refs {
			if b, ok := d.bufs.get(r.id); ok && b.addr == r.addr {
				continue
			}
			if t.internal[r.id] {
				k := rng{r.bt, r.addr, r.perBank}
				if seen[k] {
					continue
				}
				seen[k] = true
				var foreign []tt.TensorID
				for _, o := range d.overlapping(r.bt, r.addr, r.perBank) {
					if a, ok := t.refs[o]; !ok || a != d.mustAddr(o) {
						foreign = append(foreign, o)
					}
				}
				if len(foreign) == 0 {
					continue
				}
				d.find(Finding{Class: TraceStaleAddress, Op: fp.op, Core: -1, User: -1, Index: -1, Tensor: r.id, Addr: r.addr,
					Detail: fmt.Sprintf("trace %d replays %s on t%d at %s %#x (freed during the capture), and the address now belongs to t%d, allocated after it", id, fp.op, r.id, r.bt, r.addr, foreign[0])})
				continue
			}
			detail := fmt.Sprintf("trace %d replays %s on t%d at %s %#x, but t%d was freed", id, fp.op, r.id, r.bt, r.addr, r.id)
			if owners := d.overlapping(r.bt, r.addr, r.perBank); len(owners) > 0 {
				detail += fmt.Sprintf(" and the address now belongs to t%d", owners[0])
			}
			d.find(Finding{Class: TraceStaleAddress, Op: fp.op, Core: -1, User: -1, Index: -1, Tensor: r.id, Addr: r.addr, Detail: detail})
		}
	}
}

// overlapping lists the live tensors (ascending id) whose reserved range
// overlaps [addr, addr+n) in buffer type bt.
func (d *Device) overlapping(bt tt.BufferType, addr, n uint64) []tt.TensorID {
	var out []tt.TensorID
	a := d.allocatorOf(bt)
	d.bufs.all(func(b *buffer) {
		if sz := a.allocSize(b.perBank); b.bt == bt && b.addr < addr+n && addr < b.addr+sz {
			out = append(out, b.id)
		}
	})
	return out
}

// Release implements tt.Device.Release. Allocations become safe again once
// every trace is released (§5.4). An id that names no trace is no error:
// release_mesh_trace erases it from the sub-device manager's pool, which
// does nothing for an absent id (tt_metal/distributed/mesh_device.cpp,
// tt_metal/impl/sub_device/sub_device_manager.cpp release_trace).
func (d *Device) Release(id tt.TraceID) error {
	if _, ok := d.traces[id]; !ok {
		return nil
	}
	delete(d.traces, id)
	if d.traceBytes() == 0 { // mesh_device.cpp:1274-1277
		d.unsafeAlloc = false
	}
	return nil
}

// Warnings returns the warnings tt-metal would have logged (the unsafe
// allocation warning, once per device, §5.4).
func (d *Device) Warnings() []string { return append([]string(nil), d.warnings...) }

// noteAllocation is called after every allocation: the §5.4 warning, and in
// strict mode a finding when the new buffer overlaps a live trace's operands
// that are no longer allocated (the trace will write there on replay).
func (d *Device) noteAllocation(b *buffer) {
	if d.capturing && b.id != 0 {
		d.capAlloc[b.id] = true
	}
	if d.unsafeAlloc && !d.warned {
		d.warned = true
		d.warnings = append(d.warnings, tt.MsgUnsafeAllocation)
	}
	if !d.opt.Strict || len(d.traces) == 0 {
		return
	}
	size := d.allocatorOf(b.bt).allocSize(b.perBank)
	ids := make([]int, 0, len(d.traces))
	for id := range d.traces {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	for _, id := range ids {
		for _, fp := range d.traces[tt.TraceID(id)].footprints {
			for _, r := range fp.refs {
				if r.bt != b.bt || r.id == b.id {
					continue
				}
				if _, live := d.bufs.get(r.id); live || d.traces[tt.TraceID(id)].internal[r.id] {
					continue // internal: a hazard only if alive at replay (checkReplay)
				}
				if b.addr < r.addr+r.perBank && r.addr < b.addr+size {
					d.find(Finding{Class: AllocOverlapsTrace, Op: "allocate", Core: -1, User: -1, Index: -1, Tensor: b.id, Addr: b.addr,
						Detail: fmt.Sprintf("t%d at %s %#x overlaps t%d (freed) that trace %d's %s still uses at %#x", b.id, b.bt, b.addr, r.id, id, fp.op, r.addr)})
					return
				}
			}
		}
	}
}
