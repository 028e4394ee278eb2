// Package tt is offcard's device contract, written in ttnn's vocabulary. It
// holds no implementation: package sim (the CPU simulator) and package tthw
// (the real card) implement Device, and the paged decode engine in package
// qwen3 is written only against it, so one engine runs on both.
//
// Contract (section numbers refer to the project's tt-metal semantics notes):
//
//   - Tensors live on the device. A Spec (logical shape, DType, Layout,
//     MemoryConfig) fixes the padded shape (TILE pads the last two dims to 32),
//     the page size and the page count (§6.6). Device.Allocate reserves one
//     address across all banks (§6.3, §6.4) and returns a Tensor handle carrying
//     it; Free gives the address back, and the device may hand it out again at
//     once, exactly as tt-metal's allocator does.
//   - WriteHost is ttnn.copy_host_to_device_tensor (§7): it writes into the
//     existing buffer at the same address and fails, in this order, with
//     "Host tensor has different shape", "... dtype", "... page config". Memory
//     configs may differ. ReadHost is the device-to-host copy. Both fail during
//     trace capture with "Writes are not supported during trace capture." /
//     "Reads are not supported during trace capture." (§5.3).
//   - Run executes one op. Each op is a plain struct naming its input tensors,
//     its output tensors (allocated by the caller: the engine owns every
//     address, so trace capture never depends on hidden allocations) and its
//     attributes. Validation happens only on a program-cache miss (§1.1), and
//     the program cache is keyed by attributes and tensor specs, never by
//     addresses or contents.
//   - BeginCapture/EndCapture/Execute/Release are ttnn's begin_trace_capture,
//     end_trace_capture, execute_trace and release_trace on command queue 0
//     (§5). Ops run during capture are recorded, not executed; a replay writes
//     wherever the recorded addresses point.
//   - Every failure the card reports is an *Error carrying tt-metal's message
//     text (Msg), so a test can match the very words the card prints.
//
// Import rule: tt imports only bf16.
package tt
