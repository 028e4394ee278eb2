/*
 * offcard_tt.h — the C ABI between offcard (Go, through purego) and a
 * Tenstorrent device library: the C loopback (tthw/loopback, host memory,
 * for CI) or the C++ shim over ttnn (tthw/ttnn, on a machine with a card).
 *
 * It is offcard's Go contract tt.Device (package tt) written in C:
 * allocate/free/address, host writes and reads, one entry point for every op,
 * and trace begin/end/execute/release, all on command queue 0 and synchronous.
 *
 * Rules of the ABI
 *  - Versioned. OFFCARD_TT_ABI_VERSION changes whenever any declaration,
 *    enum value or argument layout below changes. The caller asks
 *    offcard_tt_abi_version() first and refuses a library that speaks another
 *    version; offcard_tt_open() is passed the caller's version and refuses
 *    too, so a mismatch is an error on either side, never undefined behaviour.
 *  - Opaque handles. A device is an offcard_tt_device*; a tensor is a
 *    uint64_t id (never reused within a device, 0 means "none"); a trace is a
 *    uint32_t id (ttnn's trace id).
 *  - Fixed-width integers only; every call returns an int32_t status
 *    (OFFCARD_TT_OK or one of the OFFCARD_TT_E* codes); results come back
 *    through out-parameters passed by pointer; no call returns a struct
 *    (purego cannot return structs on every platform) and no call keeps a
 *    pointer it was given after it returns.
 *  - Errors. When a call fails, offcard_tt_last_error() and
 *    offcard_tt_last_error_op() return, on the calling thread, the failure's
 *    message and the operation that raised it (thread-local; valid until the
 *    next call on that thread). For OFFCARD_TT_EDEVICE the message is the
 *    device's own text — the TT_FATAL/TT_THROW message tt-metal printed, e.g.
 *    "Writes are not supported during trace capture." — so offcard can
 *    compare it with the simulator's; a refusal of offcard's own contract
 *    that ttnn does not make (the simulator's too) starts "offcard: ".
 *    Other exceptions are EARG (a std::invalid_argument or out_of_range of
 *    the implementation's own parsing) or EINTERNAL. A caller must read the error on the
 *    thread that made the call (the Go binding locks its goroutine to the OS
 *    thread around each call).
 *  - Never abort. Implementations catch every exception (C++: std::exception
 *    and ...) and report it as a status with its text. The ttnn shim refuses
 *    to open a device when TT_ASSERT_ABORT is set (tt-metal would abort the
 *    process instead of throwing).
 *  - Not thread-safe: one device is used by one caller at a time.
 *
 * Tensor specs (offcard_tt_allocate, offcard_tt_tensor_spec) are int64_t
 * arrays: OFFCARD_TT_SPEC_HEADER words (indices OFFCARD_TT_SPEC_*) followed
 * by the rank logical dims, outermost first. Host data is logical row-major
 * little-endian elements (volume * element size bytes), as in tt.HostTensor;
 * the device tilizes, pads and places pages itself.
 *
 * Ops (offcard_tt_run): an op code, the tensor handles in the order the op's
 * table below lists (0 for an absent optional tensor), integer attributes
 * and float attributes. Ops whose output the device allocates (as ttnn does
 * for some ops) return the new tensors' handles in outs[]; the caller owns
 * them (offcard_tt_free). During a trace capture an op is validated and
 * recorded, not run (a program-cache miss is an error; outputs are
 * allocated at capture); a replay runs the recorded ops at the recorded
 * addresses, without validation and without allocating.
 */
#ifndef OFFCARD_TT_H
#define OFFCARD_TT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OFFCARD_TT_ABI_VERSION 4

/* Status codes. */
#define OFFCARD_TT_OK 0
#define OFFCARD_TT_EDEVICE 1   /* the device refused: message is tt-metal's text */
#define OFFCARD_TT_EARG 2      /* bad argument: unknown handle, bad spec, short buffer, bad op code */
#define OFFCARD_TT_EABI 3      /* ABI version mismatch at open */
#define OFFCARD_TT_EINJECTED 4 /* a fault injected through the open options */
#define OFFCARD_TT_EINTERNAL 5 /* any other failure (an exception the shim caught) */

/* Element types (tt.DType). */
#define OFFCARD_TT_BF16 1
#define OFFCARD_TT_FP32 2
#define OFFCARD_TT_INT32 3
#define OFFCARD_TT_UINT32 4
#define OFFCARD_TT_UINT16 5

/* Page layouts (tt.Layout). */
#define OFFCARD_TT_TILE 1
#define OFFCARD_TT_ROW_MAJOR 2

/* Buffer types (tt.BufferType). */
#define OFFCARD_TT_DRAM 1
#define OFFCARD_TT_L1 2

/* Memory layouts (tt.MemoryLayout). */
#define OFFCARD_TT_INTERLEAVED 1
#define OFFCARD_TT_HEIGHT_SHARDED 2
#define OFFCARD_TT_WIDTH_SHARDED 3

/* Spec array layout. */
#define OFFCARD_TT_SPEC_RANK 0
#define OFFCARD_TT_SPEC_DTYPE 1
#define OFFCARD_TT_SPEC_LAYOUT 2
#define OFFCARD_TT_SPEC_BUFFER 3
#define OFFCARD_TT_SPEC_MEMORY 4
#define OFFCARD_TT_SPEC_SHARD_CORES 5 /* sharded only, else 0 */
#define OFFCARD_TT_SPEC_SHARD_H 6
#define OFFCARD_TT_SPEC_SHARD_W 7
#define OFFCARD_TT_SPEC_SHARD_FIRST 8 /* first core of the shard grid, in the numbering below */
#define OFFCARD_TT_SPEC_SHARD_GRID_W 9 /* width of the numbering; 0: the worker grid's */
/* The grid's cores are numbered row-major over the leftmost GRID_W columns
 * of the worker grid: core j is (j % GRID_W, j / GRID_W). The grid is cores
 * first..first+cores-1 of that numbering (ttnn's
 * num_cores_to_corerangeset_in_subcoregrids over the rectangle (0,0) ..
 * (GRID_W-1, last row), row-wise). Height-sharded: shard i holds rows
 * i*H..(i+1)*H-1 of the 2-D view on core first+i. Width-sharded (TILE
 * only): shard i holds columns i*W..(i+1)*W-1 of every row on core
 * first+i, tiles row-major inside the shard. */
#define OFFCARD_TT_SPEC_HEADER 10
#define OFFCARD_TT_MAX_RANK 8

/* Device facts (offcard_tt_device_facts), int64_t each. */
#define OFFCARD_TT_FACT_ARCH 0 /* 1 Wormhole, 2 Blackhole */
#define OFFCARD_TT_FACT_DRAM_BANKS 1
#define OFFCARD_TT_FACT_DRAM_ALIGNMENT 2
#define OFFCARD_TT_FACT_L1_ALIGNMENT 3
#define OFFCARD_TT_FACT_L1_SIZE 4
#define OFFCARD_TT_FACT_DRAM_BANK_SIZE 5
#define OFFCARD_TT_FACT_GRID_X 6 /* worker core grid (compute_with_storage_grid_size) */
#define OFFCARD_TT_FACT_GRID_Y 7
#define OFFCARD_TT_FACT_TRACE_REGION_SIZE 8
#define OFFCARD_TT_FACTS 9

/*
 * Op codes and argument layouts for offcard_tt_run. T: tensors in order,
 * I: int64 attributes, F: float attributes, O: outputs the device
 * allocates (as ttnn's entry point does for that op). For an op with O
 * outputs, I continues after the op's own attributes with one spec array per
 * output (OFFCARD_TT_SPEC_HEADER + rank words each): the specs the caller
 * expects (its memory config is the memory_config passed to ttnn); the
 * library allocates them, at dispatch and during a capture too, and returns
 * their handles in outs[] (nouts must equal O). Each op names its ttnn entry
 * point at tt-metal 622c6fb9.
 */
/* ttnn::embedding. T: input ids (UINT32 ROW_MAJOR [1,1,1,B]), weight
 * (BF16 ROW_MAJOR [vocab,hidden]), output (BF16 [1,1,B,hidden]). ttnn's
 * layout argument is the output's layout: a TILE output is tilized by the
 * fused kernel only when B is a multiple of 32 (pad the ids); otherwise
 * the row-major kernel writes row sticks into its tile pages. */
#define OFFCARD_TT_OP_EMBEDDING 1
/* ttnn::rms_norm. T: input, weight. F: epsilon. O: 1. */
#define OFFCARD_TT_OP_RMS_NORM 2
/* ttnn::linear. T: input, weight, output, bias (optional). I: transpose_b. */
#define OFFCARD_TT_OP_LINEAR 3
/* ttnn::experimental::nlp_create_qkv_heads_decode. T: input.
 * I: num_heads, num_kv_heads. O: 3 (q, k, v). */
#define OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS_DECODE 4
/* ttnn::experimental::rotary_embedding_hf (HF rotate_half). T: input, cos,
 * sin. I: is_decode_mode (1: decode, input [1,B,heads,D] height-sharded,
 * cos/sin [1,B,1,D]; 0: prefill, input [1,heads,S,D], cos/sin [1,1,S',D],
 * S' >= S). O: 1. */
#define OFFCARD_TT_OP_ROTARY_EMBEDDING_HF 5
/* ttnn::experimental::paged_update_cache, in place. T: cache, input,
 * update_idxs (optional), page_table (optional). I: share_cache,
 * batch_offset, fp32_dest_acc, n (the list length, or -1 when update_idxs
 * is a tensor), then n list entries (-1 is 0xFFFFFFFF in the uint32
 * vector). */
#define OFFCARD_TT_OP_PAGED_UPDATE_CACHE 6
/* ttnn::experimental::paged_fused_update_cache, in place. T: cache1,
 * input1, cache2, input2, update_idxs (optional), page_table (optional).
 * I: as paged_update_cache. */
#define OFFCARD_TT_OP_PAGED_FUSED_UPDATE_CACHE 7
/* ttnn::experimental::paged_fill_cache, in place. T: cache, input,
 * page_table, batch_idx_tensor (optional). I: batch_idx. */
#define OFFCARD_TT_OP_PAGED_FILL_CACHE 8
/* ttnn::transformer::paged_scaled_dot_product_attention_decode (causal).
 * T: q, k, v, page_table, cur_pos. I: k_chunk_size (0 dynamic),
 * fp32_dest_acc. F: scale (0 means 1/sqrt(head_dim)). O: 1. */
#define OFFCARD_TT_OP_PAGED_SDPA_DECODE 9
/* ttnn::experimental::nlp_concat_heads_decode. T: input, output.
 * I: num_heads. */
#define OFFCARD_TT_OP_NLP_CONCAT_HEADS_DECODE 10
/* ttnn::add. T: a, b, output. */
#define OFFCARD_TT_OP_ADD 11
/* ttnn::multiply with input_tensor_a_activations = {SILU}. T: gate, up,
 * output. */
#define OFFCARD_TT_OP_SILU_MUL 12
/* ttnn::argmax over the last dim. T: input, output (UINT32 ROW_MAJOR). */
#define OFFCARD_TT_OP_ARGMAX 13
/* ttnn::operations::experimental::plus_one, in place. T: input.
 * I: skip_negative_entries. */
#define OFFCARD_TT_OP_PLUS_ONE 14
/* ttnn::experimental::rotary_embedding_llama (decode mode, Meta pairs).
 * T: input, cos, sin, trans_mat. O: 1. */
#define OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA 15
/* ttnn::to_memory_config. T: input. O: 1 (its spec carries the new memory
 * config). To the input's own config ttnn returns the input itself: the new
 * handle then shares the input's buffer (same address), which stays
 * allocated until both handles are freed. */
#define OFFCARD_TT_OP_TO_MEMORY_CONFIG 16
/* ttnn::copy(src, dst): src's values into the existing dst (same logical
 * shape and dtype; layouts and memory configs may differ). T: src, dst. */
#define OFFCARD_TT_OP_COPY 17
/* ttnn::experimental::nlp_create_qkv_heads (prefill form, no KV input).
 * T: input ([B,1,S,(num_heads+2*num_kv_heads)*D]). I: num_heads,
 * num_kv_heads (0: num_heads), transpose_k_heads (k is then [B,kv,D,S]).
 * O: 3 (q, k, v). */
#define OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS 18
/* ttnn::transformer::scaled_dot_product_attention (no mask, no sliding
 * window, no attention sink). T: q, k, v. I: is_causal, q_chunk_size,
 * k_chunk_size (both 0: no program config; otherwise an SDPAProgramConfig
 * on the device's compute grid), fp32_dest_acc, exact_exp (1: the program
 * config's exp_approx_mode = false; needs the chunk sizes). F: scale (0:
 * ttnn's default). O: 1. */
#define OFFCARD_TT_OP_SDPA 19
/* ttnn::experimental::nlp_concat_heads. T: input ([B,heads,S,D]). O: 1
 * ([B,1,S,heads*D]). */
#define OFFCARD_TT_OP_NLP_CONCAT_HEADS 20
/* ttnn::transformer::chunked_scaled_dot_product_attention (always causal):
 * one chunk of queries, Q [B,H,Sq,D], attends positions 0..start+i of the
 * paged caches K, V [blocks,kv_heads,block_size,D] through page_table
 * (INT32 ROW_MAJOR [B,W]). T: q, k, v, page_table, chunk_start_idx_tensor
 * (optional: present selects the flexible overload, an INT32 [1] device
 * tensor read at run time; absent the legacy overload with I's
 * chunk_start_idx). I: chunk_start_idx (unused with the tensor),
 * q_chunk_size, k_chunk_size (both 0: no program config), fp32_dest_acc,
 * exact_exp (as for OFFCARD_TT_OP_SDPA). F: scale (0: ttnn's default).
 * O: 1. */
#define OFFCARD_TT_OP_CHUNKED_SDPA 21
/* ttnn::fill_cache, in place: input [1,heads,S,D] over rows
 * update_idx..update_idx+S-1 of batch batch_idx of cache [B,heads,Smax,D]
 * (on a paged cache the batch is a block). T: cache, input.
 * I: batch_idx, update_idx (both uint32_t in ttnn: a negative value is
 * passed as its 32-bit two's complement). */
#define OFFCARD_TT_OP_FILL_CACHE 22
/* ttnn::slice<int32_t> with unit steps: the box begins..ends (exclusive;
 * negative indices wrap as ttnn's wrap_index) of input. T: input.
 * I: nb, nb begins, ne, ne ends (ttnn refuses unequal lists). O: 1 (its spec carries the
 * output's memory config). A slice of the whole input to the input's own
 * config returns the input itself (slice.cpp's no-op path): the new
 * handle shares the input's buffer, as for OFFCARD_TT_OP_TO_MEMORY_CONFIG. */
#define OFFCARD_TT_OP_SLICE 23
/* The largest op code. */
#define OFFCARD_TT_OP_LAST 23

typedef struct offcard_tt_device offcard_tt_device;

/* The ABI version this library implements. options are the same text later
 * given to offcard_tt_open (fault injection may make it lie: abi=N). */
int32_t offcard_tt_abi_version(const char *options, uint32_t *version);

/* Opens device 0. abi_version is the caller's OFFCARD_TT_ABI_VERSION.
 * options: "key=value" pairs separated by ';' (may be empty). Understood
 * by every implementation: arch, trace_region (bytes). The loopback also
 * takes dram_bank_size, l1_size, and the fault injections fail_alloc=N
 * (the Nth allocation fails), fail_op=N (the Nth op fails), fail_capture=N
 * (the Nth begin_trace_capture fails), abi=N (report version N). */
int32_t offcard_tt_open(uint32_t abi_version, const char *options, offcard_tt_device **dev);

/* Closes the device. Everything still live is freed first (an open capture
 * ended, traces released, tensors deallocated); their counts come back in
 * *leaked_tensors and *leaked_traces (an open capture counts as a trace) so
 * the caller can report leaks. dev is invalid afterwards. */
int32_t offcard_tt_close(offcard_tt_device *dev, uint64_t *leaked_tensors, uint64_t *leaked_traces);

/* The last failure on this thread: message, and the op that raised it
 * ("" when none). Valid until the thread's next call into the library. */
const char *offcard_tt_last_error(void);
const char *offcard_tt_last_error_op(void);

/* Build information as "key=value\n" lines: at least implementation
 * (loopback|ttnn), tt_metal_commit (the commit the library was built
 * against), arch. Writes at most cap bytes (NUL-terminated when it fits)
 * and the full length (without NUL) to *len. */
int32_t offcard_tt_build_info(offcard_tt_device *dev, char *buf, uint64_t cap, uint64_t *len);

/* Device facts: n int64_t values indexed by OFFCARD_TT_FACT_* (n is at
 * most OFFCARD_TT_FACTS; unknown facts are -1). */
int32_t offcard_tt_device_facts(offcard_tt_device *dev, int64_t *facts, uint32_t n);

/* Live object counts (tensors allocated and not freed, traces not
 * released). */
int32_t offcard_tt_live(offcard_tt_device *dev, uint64_t *tensors, uint64_t *traces);

/* tt.Device.Allocate: spec is spec_len int64_t (header + dims). */
int32_t offcard_tt_allocate(offcard_tt_device *dev, const int64_t *spec, uint32_t spec_len,
                            uint64_t *tensor, uint64_t *address);
/* tt.Device.Free. */
int32_t offcard_tt_free(offcard_tt_device *dev, uint64_t tensor);
/* tt.Device.Address. */
int32_t offcard_tt_address(offcard_tt_device *dev, uint64_t tensor, uint64_t *address);
/* A tensor's spec (for tensors the device allocated): writes at most cap
 * words to spec and the needed count to *len. */
int32_t offcard_tt_tensor_spec(offcard_tt_device *dev, uint64_t tensor, int64_t *spec, uint32_t cap,
                               uint32_t *len);

/* tt.Device.WriteHost (ttnn copy_host_to_device_tensor): the host tensor's
 * logical shape (rank dims), dtype and layout, and its nbytes of data. */
int32_t offcard_tt_write_host(offcard_tt_device *dev, uint64_t tensor, const int64_t *shape, uint32_t rank,
                              int32_t dtype, int32_t layout, const void *data, uint64_t nbytes);
/* tt.Device.ReadHost: the logical bytes (volume * element size; nbytes must
 * be exactly that). */
int32_t offcard_tt_read_host(offcard_tt_device *dev, uint64_t tensor, void *data, uint64_t nbytes);

/* tt.Device.Run: validates the op (on every call, as ttnn does), then runs
 * it, or records it during a capture. outs receives the handles of the
 * outputs the device allocated (nouts = the op's O count, else 0); on
 * failure nothing stays allocated. */
int32_t offcard_tt_run(offcard_tt_device *dev, int32_t op, const uint64_t *tensors, uint32_t ntensors,
                       const int64_t *iattrs, uint32_t niattrs, const float *fattrs, uint32_t nfattrs,
                       uint64_t *outs, uint32_t nouts);

/* Trace calls on command queue 0. */
int32_t offcard_tt_begin_capture(offcard_tt_device *dev, uint32_t *trace);
int32_t offcard_tt_end_capture(offcard_tt_device *dev, uint32_t trace);
int32_t offcard_tt_execute(offcard_tt_device *dev, uint32_t trace);
int32_t offcard_tt_release(offcard_tt_device *dev, uint32_t trace);

#ifdef __cplusplus
}
#endif

#endif /* OFFCARD_TT_H */
