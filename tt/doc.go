// Package tt is offcard's device contract, written in ttnn's vocabulary and
// pinned to one tt-metal commit, TTMetalCommit (622c6fb9, 2026-06-22). It
// holds no implementation: package sim (the CPU simulator) and package tthw
// (the real card, through the C ABI offcard_tt.h) implement Device, and the
// paged decode engine in package qwen3 is written only against it, so one
// engine runs on both. Paths cited below are tt-metal source paths at the pin.
//
// The interface is meant to be mirrored in a C ABI: every call takes and
// returns fixed-width values (tensor ids, addresses, shapes, enums) and
// plain op structs; there are no callbacks.
//
// Contract (section numbers refer to the project's tt-metal semantics notes):
//
//   - Tensors live on the device. A Spec (logical shape, DType, Layout,
//     MemoryConfig) fixes the padded shape (TILE pads the last two dims to 32),
//     the page size and the page count (§6.6). Memory layouts are INTERLEAVED,
//     HEIGHT_SHARDED and WIDTH_SHARDED (tt_metal/api/tt-metalium/
//     buffer_types.hpp TensorMemoryLayout); width sharding is TILE only here.
//     Device.Allocate reserves one address across all banks (§6.3, §6.4) and
//     returns a Tensor handle carrying it; Free gives the address back, and the
//     device may hand it out again at once, exactly as tt-metal's allocator
//     does (tt_metal/impl/allocator/bank_manager.cpp, FreeListOpt FIRST).
//   - WriteHost is ttnn.copy_host_to_device_tensor (tt::tt_metal::
//     copy_to_device): it writes into the existing buffer at the same address
//     and fails, in this order, with "Host tensor has different shape",
//     "... dtype", "... page config". Memory configs may differ. ReadHost is
//     the device-to-host copy. Both fail during trace capture with "Writes are
//     not supported during trace capture." / "Reads are not supported during
//     trace capture." (tt_metal/distributed/fd_mesh_command_queue.cpp).
//   - Run executes one op. Each op is a plain struct naming its inputs, its
//     attributes and, where ttnn's entry point takes one, the caller's
//     output tensor (embedding, linear, nlp_concat_heads_decode, add, mul,
//     argmax; paged_update_cache, paged_fused_update_cache,
//     paged_fill_cache and plus_one update in place). The ops whose ttnn
//     entry point allocates its own output — rms_norm,
//     nlp_create_qkv_heads_decode, nlp_create_qkv_heads (prefill),
//     rotary_embedding_hf (decode and prefill mode),
//     rotary_embedding_llama, paged_scaled_dot_product_attention_decode,
//     scaled_dot_product_attention (prefill), nlp_concat_heads (prefill)
//     and to_memory_config — implement Allocating: the device allocates their
//     outputs through its allocator at dispatch (inside a trace capture
//     too, so the addresses a trace bakes, and which freed addresses are
//     handed out next, are the card's), and Run returns them. The caller
//     owns what Run returns: it frees it, or keeps it allocated while a
//     trace that writes it lives.
//   - Validation runs on every call, program-cache hits included
//     (ttnn/api/ttnn/device_operation.hpp: a hit runs
//     validate_on_program_cache_hit, which for these ops is the miss
//     validation; nlp_create_qkv_heads validates on a miss only, which
//     gives the same answers because its key holds everything it checks),
//     with ttnn's texts where the notes quote them. The program
//     cache is keyed by attributes and tensor specs, never by addresses or
//     contents (SDPA decode keys the cur_pos tensor's spec too). Whatever ttnn refuses, a
//     Device refuses, with the same text.
//   - A program-cache miss makes the card allocate a DRAM buffer for the
//     program's kernel binaries (tt_metal/distributed/mesh_workload.cpp
//     load_binaries); a Device may allocate it too (sim does, top-down). A
//     miss during trace capture caches the program and allocates that
//     buffer, then fails writing it: "Writes are not supported during trace
//     capture. trace id: N" (MsgProgramCacheMissDuringCapture).
//   - BeginCapture/EndCapture/Execute/Release are ttnn's begin_trace_capture,
//     end_trace_capture, execute_trace and release_trace on command queue 0
//     (ttnn/cpp/ttnn/operations/trace.hpp). Ops run during capture are
//     recorded, not executed; a replay writes wherever the recorded
//     addresses point, with no validation and no allocation.
//   - Every failure the card reports is an *Error carrying tt-metal's message
//     text (Msg), so a test can match the very words the card prints.
//
// Import rule: tt imports only bf16.
package tt
