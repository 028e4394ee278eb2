package tt

import (
	"errors"
	"fmt"
	"strings"
)

// Error is a failure the device reports, carrying tt-metal's message text.
// Msg is the text of the TT_FATAL / TT_THROW (formatted with the values the
// card would print); Op names the operation ("copy_host_to_device_tensor",
// "paged_update_cache", "allocate", "begin_trace_capture", ...).
type Error struct {
	Op  string
	Msg string
}

func (e *Error) Error() string {
	if e.Op == "" {
		return e.Msg
	}
	return e.Op + ": " + e.Msg
}

// Errorf builds an *Error.
func Errorf(op, format string, args ...any) *Error {
	return &Error{Op: op, Msg: fmt.Sprintf(format, args...)}
}

// HasMsg reports whether err is (or wraps) an *Error whose Msg starts with
// prefix. Use it with the Msg* constants; formatted messages match on their
// fixed leading text.
func HasMsg(err error, prefix string) bool {
	var e *Error
	return errors.As(err, &e) && strings.HasPrefix(e.Msg, prefix)
}

// TraceRegionTooSmall reports whether err is end_trace_capture's refusal
// of a trace the device's trace region cannot hold (MsgTraceRegionTooSmall,
// populate_mesh_buffer: tt_metal/distributed/mesh_trace.cpp:75-80).
func TraceRegionTooSmall(err error) bool {
	prefix, _, _ := strings.Cut(MsgTraceRegionTooSmall, "%")
	return HasMsg(err, prefix)
}

// ContractPrefix starts the text of a refusal that is offcard's own
// contract, not a check of ttnn's: an input the simulator does not model
// (it computes BF16 only, for example) or a caller-passed output ttnn would
// take unchecked. Every other refusal text is ttnn's verbatim, listed in
// the checks table (checks.tsv) with its tt-metal path:line.
const ContractPrefix = "offcard: "

// tt-metal message texts (section numbers of the semantics notes). Texts with
// format verbs are printed with the values tt-metal prints.
const (
	// §7 copy_host_to_device_tensor, checked in this order
	// (tt_metal/impl/tensor/tensor_apis.cpp enqueue_write_tensor). The older
	// "Source tensor is not on host." / "Destination tensor is not on
	// device." texts are gone at the pinned commit.
	// A tensor that is not allocated: copy_to_device reaches
	// DeviceStorage::get_mesh_tensor, whose TT_THROW says so
	// (ttnn/core/tensor/tensor_ops.cpp, ttnn/core/tensor/storage.cpp); the
	// older "Buffer must be allocated on device." is not at the pin.
	MsgBufferNotAllocated = "Tensor is not allocated"
	MsgHostShape          = "Host tensor has different shape"
	MsgHostDType          = "Host tensor has different dtype"
	MsgHostPageConfig     = "Host tensor has different page config"

	// §5.3 prohibited during capture.
	MsgWritesDuringCapture = "Writes are not supported during trace capture."
	// A host write during capture reaches FDMeshCommandQueue::
	// write_shard_to_device, whose text adds the trace id
	// (tt_metal/distributed/fd_mesh_command_queue.cpp). Format: trace id.
	MsgWritesDuringCaptureID = "Writes are not supported during trace capture. trace id: %d"
	MsgReadsDuringCapture    = "Reads are not supported during trace capture."
	MsgEventsDuringCapture   = "Event Synchronization is not supported during trace capture."
	// MsgProgramCacheMissDuringCapture is what a program-cache miss during
	// trace capture fails with at the pinned commit: the miss loads the
	// program's binaries, whose write hits the capture check of
	// tt_metal/distributed/fd_mesh_command_queue.cpp:665. Format: trace id.
	// (The older "Cannot load new binaries during trace capture." is gone.)
	MsgProgramCacheMissDuringCapture = "Writes are not supported during trace capture. trace id: %d"
	// Format: cq id, trace id.
	MsgAlreadyTracing = "CQ %d is already being used for tracing tid %d"
	MsgNotTracing     = "CQ %d is not being used for tracing tid %d"

	// execute_trace of an id that names no trace. Format: trace id, mesh
	// device id, sub-device manager id (tt_metal/distributed/mesh_device.cpp
	// replay_mesh_trace).
	MsgTraceMustExist = "Trace instance %d must exist on Mesh device %d's active sub-device manager %d"

	// §5.4, a warning (logged once), not an error.
	MsgUnsafeAllocation = "Allocating device buffers is unsafe due to the existence of an active trace. These buffers may be corrupted once a trace is executed."

	// §5.6. Format: trace bytes, device id, region bytes.
	MsgTraceRegionTooSmall = "Creating trace buffers of size %dB on MeshDevice %d, but only %dB is allocated for trace region."

	// §6.4 (tt_metal/impl/allocator/bank_manager.cpp:449-462). Format:
	// bytes, buffer type, banks, bytes per bank, then the bank's size and
	// its allocator's statistics: allocated, free, largest free block.
	MsgOutOfMemory = "Out of Memory: Not enough space to allocate %d B %s buffer across %d banks, where each bank needs to store %d B, but bank size is %d B (allocated: %d B, free: %d B, largest free block: %d B)"

	// Every op, before its own validation: ttnn's launch checks each tensor
	// argument (inputs and passed outputs) is allocated
	// (ttnn/api/ttnn/device_operation.hpp launch).
	MsgInputNotAllocated = "Input Tensor is not allocated"

	// A circular buffer bound to a tensor's buffer: the buffer must be in
	// L1, and the CB no larger than the buffer's aligned size per bank
	// (tt_metal/impl/buffers/circular_buffer_config.cpp:193-201, 217-222).
	MsgCBNotL1    = "Only L1 buffers can have an associated circular buffer!"
	MsgCBBankSize = "Cannot set circular buffer size to %d. This is larger than the associated dynamically allocated L1 buffer bank size of %d B"

	// §4 plus_one.
	MsgPlusOneDType = "Only INT32 and UINT32 is supported for inputs!"
)
