package tt

// TraceID names a captured trace (ttnn's trace id).
type TraceID uint32

// Device is the op-level device contract (implemented by sim.Device and
// tthw.Device). All calls are on command queue 0 and are synchronous.
type Device interface {
	// Allocate reserves the tensor's buffer: one address across all banks of
	// its buffer type (DRAM bottom-up, L1 top-down, §6.4). The bytes are not
	// initialised. It fails with MsgOutOfMemory when no range fits. During a
	// live trace it still succeeds (tt-metal only warns, §5.4).
	Allocate(spec Spec) (Tensor, error)
	// Free returns the buffer's address to the allocator at once; the next
	// allocation of a fitting size may get the same address (§6.4).
	Free(t Tensor) error
	// Address is the tensor's current buffer address.
	Address(t Tensor) (uint64, error)
	// WriteHost is ttnn.copy_host_to_device_tensor (§7). It only reads
	// src.
	WriteHost(dst Tensor, src HostTensor) error
	// ReadHost copies a device tensor to the host (logical shape, dst layout
	// and dtype).
	ReadHost(src Tensor) (HostTensor, error)
	// Run executes one op (one of the Op structs of this package, or a
	// pointer to one), after validating it as ttnn does on every call
	// (program-cache hits included). During capture it records the op
	// instead (§5.2), from copies: a device keeps nothing of op once Run
	// returns, and the caller may reuse it for its next op. For an
	// Allocating op it returns the tensors the device allocated for the
	// outputs (in OutputSpecs order; allocated during capture too); for
	// every other op it returns nil. On error nothing stays allocated.
	Run(op Op) ([]Tensor, error)
	// BeginCapture is ttnn.begin_trace_capture(device, cq_id=0).
	BeginCapture() (TraceID, error)
	// EndCapture is ttnn.end_trace_capture.
	EndCapture(id TraceID) error
	// Execute is ttnn.execute_trace(blocking=True): it replays the recorded
	// ops at the recorded addresses, with no validation and no allocation.
	Execute(id TraceID) error
	// Release is ttnn.release_trace.
	Release(id TraceID) error
}
