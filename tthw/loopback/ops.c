/* The loopback's ops. Data movement follows the kernels (tt-metal 622c6fb9):
 * paged_update_cache reads the update index and the page-table stick
 * (page_table.padded_shape[-1] * 4 bytes) into L1 and loads
 * page_table[idx / block_size] from L1 without a bound check, so an
 * out-of-row read returns what is really next to the row
 * (ttnn/cpp/ttnn/operations/experimental/paged_cache/device/kernels/dataflow/
 * writer_update_cache_interleaved_start_id.cpp); only an index of exactly
 * 0xFFFFFFFF skips a user. plus_one skips negative entries when asked
 * (ttnn/cpp/ttnn/operations/experimental/plusone/device/kernels/
 * reader_plusone_interleaved.cpp). Compute ops are plain float loops on the
 * logical elements, rounded to bf16 once at the end: not bit-exact with
 * offcard's ref, on purpose. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb.h"

float lb_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t lb_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

const char *lb_op_name(int32_t c) {
  switch (c) {
    case OFFCARD_TT_OP_EMBEDDING: return "embedding";
    case OFFCARD_TT_OP_RMS_NORM: return "rms_norm";
    case OFFCARD_TT_OP_LINEAR: return "linear";
    case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS_DECODE: return "nlp_create_qkv_heads_decode";
    case OFFCARD_TT_OP_ROTARY_EMBEDDING_HF: return "rotary_embedding_hf";
    case OFFCARD_TT_OP_PAGED_UPDATE_CACHE: return "paged_update_cache";
    case OFFCARD_TT_OP_PAGED_FUSED_UPDATE_CACHE: return "paged_fused_update_cache";
    case OFFCARD_TT_OP_PAGED_FILL_CACHE: return "paged_fill_cache";
    case OFFCARD_TT_OP_PAGED_SDPA_DECODE: return "paged_scaled_dot_product_attention_decode";
    case OFFCARD_TT_OP_NLP_CONCAT_HEADS_DECODE: return "nlp_concat_heads_decode";
    case OFFCARD_TT_OP_ADD: return "add";
    case OFFCARD_TT_OP_SILU_MUL: return "multiply";
    case OFFCARD_TT_OP_ARGMAX: return "argmax";
    case OFFCARD_TT_OP_PLUS_ONE: return "plus_one";
    case OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA: return "rotary_embedding_llama";
    case OFFCARD_TT_OP_TO_MEMORY_CONFIG: return "to_memory_config";
    case OFFCARD_TT_OP_COPY: return "copy";
    case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS: return "nlp_create_qkv_heads";
    case OFFCARD_TT_OP_SDPA: return "scaled_dot_product_attention";
    case OFFCARD_TT_OP_NLP_CONCAT_HEADS: return "nlp_concat_heads";
    case OFFCARD_TT_OP_CHUNKED_SDPA: return "chunked_scaled_dot_product_attention";
    case OFFCARD_TT_OP_FILL_CACHE: return "fill_cache";
    case OFFCARD_TT_OP_SLICE: return "slice";
  }
  return "";
}

int lb_op_form(int32_t code, uint32_t *nt, uint32_t *nreq, int *nints, uint32_t *nout) {
  static const struct {
    uint32_t nt, nreq;
    int nints;
    uint32_t nout;
  } f[] = {
      {0, 0, 0, 0},  {3, 3, 0, 0}, /* embedding */
      {2, 2, 0, 1},                /* rms_norm */
      {4, 3, 1, 0},                /* linear */
      {1, 1, 2, 3},                /* nlp_create_qkv_heads_decode */
      {3, 3, 1, 1},                /* rotary_embedding_hf */
      {4, 2, -1, 0},               /* paged_update_cache */
      {6, 4, -1, 0},               /* paged_fused_update_cache */
      {4, 3, 1, 0},                /* paged_fill_cache */
      {5, 5, 2, 1},                /* sdpa decode */
      {2, 2, 1, 0},                /* nlp_concat_heads_decode */
      {3, 3, 0, 0},  {3, 3, 0, 0}, /* add, multiply */
      {2, 2, 0, 0},                /* argmax */
      {1, 1, 1, 0},                /* plus_one */
      {4, 4, 0, 1},                /* rotary_embedding_llama */
      {1, 1, 0, 1},                /* to_memory_config */
      {2, 2, 0, 0},                /* copy */
      {1, 1, 3, 3},                /* nlp_create_qkv_heads */
      {3, 3, 5, 1},                /* scaled_dot_product_attention */
      {1, 1, 0, 1},                /* nlp_concat_heads */
      {5, 4, 5, 1},                /* chunked_scaled_dot_product_attention */
      {2, 2, 2, 0},                /* fill_cache */
      {1, 1, -2, 1},               /* slice: nb, begins, ne, ends */
  };
  if (code < 1 || code > OFFCARD_TT_OP_LAST) return 0;
  *nt = f[code].nt, *nreq = f[code].nreq, *nints = f[code].nints, *nout = f[code].nout;
  return 1;
}

/* ---- helpers ---- */

static uint64_t rows_of(const lb_spec *s) { return lb_volume(s) / (uint64_t)s->dims[s->rank - 1]; }
static int64_t last(const lb_spec *s) { return s->dims[s->rank - 1]; }
/* batch_of: the product of the dims before the last two. */
static int64_t batch_of(const lb_spec *s) {
  int64_t b = 1;
  for (int d = 0; d + 2 < s->rank; d++) b *= s->dims[d];
  return b;
}
/* go_dims prints dims as Go prints a []int: [1 1 32 32]. */
static const char *go_dims(const lb_spec *s, char *buf, size_t n) {
  size_t at = (size_t)snprintf(buf, n, "[");
  for (int d = 0; d < s->rank && at < n; d++) at += (size_t)snprintf(buf + at, n - at, d ? " %lld" : "%lld", (long long)s->dims[d]);
  if (at < n) snprintf(buf + at, n - at, "]");
  return buf;
}
/* bias_fused: ttnn::linear gives the bias to the matmul device op
 * (get_post_process_bias, operations/matmul/matmul.cpp:100-155): an unbatched
 * bias one tile high, and an input that is sharded or an input and weight
 * both DRAM interleaved; else it adds the bias after the matmul. */
static int bias_fused(const lb_spec *a, const lb_spec *w, const lb_spec *b) {
  for (int d = 0; d + 2 < b->rank; d++)
    if (b->dims[d] > 1) return 0;
  if (b->rank < 2 || lb_padded(b, b->rank - 2) != LB_TILE) return 0;
  int a_sh = a->memory == OFFCARD_TT_HEIGHT_SHARDED || a->memory == OFFCARD_TT_WIDTH_SHARDED;
  int dram_il = a->buffer == OFFCARD_TT_DRAM && a->memory == OFFCARD_TT_INTERLEAVED && w->buffer == OFFCARD_TT_DRAM && w->memory == OFFCARD_TT_INTERLEAVED;
  return a_sh || dram_il;
}
/* emb_fused: ttnn.embedding's fused (tilizing) kernel, taken for a TILE
 * output when the ids and the table width are whole tiles (embedding.cpp:
 * 46-58 at 622c6fb9); id i fills padded row i, so the output's padded rows
 * must be the ids' count. Otherwise the row-major kernel's sticks land in
 * a TILE output's pages (the embedding op below). */
static int emb_fused(const lb_tensor *t) {
  const lb_spec *o = &t[2].s;
  uint64_t n = lb_volume(&t[0].s), h = (uint64_t)last(&t[1].s);
  if (o->layout != OFFCARD_TT_TILE || o->rank < 2 || n % LB_TILE || h % LB_TILE || (uint64_t)last(o) != h) return 0;
  uint64_t r = (uint64_t)o->dims[o->rank - 2], hp = (r + LB_TILE - 1) / LB_TILE * LB_TILE;
  return r && rows_of(o) / r * hp == n;
}

static int same_shape(const lb_spec *a, const lb_spec *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

static float *read_f(offcard_tt_device *d, const char *op, const lb_tensor *t, int *rc) {
  uint64_t n = lb_volume(&t->s);
  int e = lb_esize(t->s.dtype);
  uint8_t *raw = malloc(n * e + 1);
  float *f = malloc(n * sizeof *f + 1);
  if (!raw || !f) {
    free(raw), free(f);
    *rc = lb_err(OFFCARD_TT_EINTERNAL, op, "out of host memory");
    return NULL;
  }
  if ((*rc = lb_read_logical(d, op, t, raw))) {
    free(raw), free(f);
    return NULL;
  }
  for (uint64_t i = 0; i < n; i++) {
    if (t->s.dtype == OFFCARD_TT_BF16) {
      uint16_t b;
      memcpy(&b, raw + 2 * i, 2);
      f[i] = lb_bf16_to_f32(b);
    } else {
      memcpy(&f[i], raw + 4 * i, 4);
    }
  }
  free(raw);
  return f;
}

static int write_f(offcard_tt_device *d, const char *op, const lb_tensor *t, const float *f) {
  uint64_t n = lb_volume(&t->s);
  int e = lb_esize(t->s.dtype);
  uint8_t *raw = malloc(n * e + 1);
  if (!raw) return lb_err(OFFCARD_TT_EINTERNAL, op, "out of host memory");
  for (uint64_t i = 0; i < n; i++) {
    if (t->s.dtype == OFFCARD_TT_BF16) {
      uint16_t b = lb_f32_to_bf16(f[i]);
      memcpy(raw + 2 * i, &b, 2);
    } else {
      memcpy(raw + 4 * i, &f[i], 4);
    }
  }
  int rc = lb_write_logical(d, op, t, raw);
  free(raw);
  return rc;
}

static uint32_t *read_u(offcard_tt_device *d, const char *op, const lb_tensor *t, int *rc) {
  uint64_t n = lb_volume(&t->s);
  uint32_t *u = malloc(n * 4 + 4);
  if (!u) {
    *rc = lb_err(OFFCARD_TT_EINTERNAL, op, "out of host memory");
    return NULL;
  }
  if ((*rc = lb_read_logical(d, op, t, u))) {
    free(u);
    return NULL;
  }
  return u;
}

#define FAIL(...) return lb_err(OFFCARD_TT_EDEVICE, name, __VA_ARGS__)

/* padded_shape prints a spec's padded shape as tt-metal's Shape operator<<
 * does ("Shape([1, 1, 1, 64])", tt_metal/common/shape.cpp). */
static const char *padded_shape(const lb_spec *s, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "Shape([");
  for (int i = 0; i < s->rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)lb_padded(s, i));
  if (k < n) snprintf(buf + k, n - k, "])");
  return buf;
}

static int want_bf16(const char *name, const char *what, const lb_tensor *t) {
  if (t->s.dtype != OFFCARD_TT_BF16) return lb_err(OFFCARD_TT_EDEVICE, name, "offcard: %s must be BFLOAT16", what);
  return 0;
}

/* dt_name and ml_name print a DataType and a TensorMemoryLayout as
 * TT_FATAL's fmt call does at the pin: DataType through its own formatter
 * (tt_metal/impl/tensor/tensor_types.cpp:126-143), TensorMemoryLayout (and
 * Layout, BufferType, written out below) through enchantum's scoped name
 * (tt_stl/tt_stl/fmt.hpp:54-64): "DataType::INT32",
 * "TensorMemoryLayout::HEIGHT_SHARDED", "Layout::TILE", "BufferType::L1". */
static const char *dt_name(int32_t dt) {
  switch (dt) {
    case OFFCARD_TT_BF16: return "DataType::BFLOAT16";
    case OFFCARD_TT_FP32: return "DataType::FLOAT32";
    case OFFCARD_TT_INT32: return "DataType::INT32";
    case OFFCARD_TT_UINT32: return "DataType::UINT32";
  }
  return "DataType::UINT16";
}

static const char *ml_name(int32_t ml) {
  return ml == OFFCARD_TT_INTERLEAVED ? "TensorMemoryLayout::INTERLEAVED"
         : ml == OFFCARD_TT_HEIGHT_SHARDED ? "TensorMemoryLayout::HEIGHT_SHARDED"
                                           : "TensorMemoryLayout::WIDTH_SHARDED";
}

/* logical_shape prints a spec's logical shape as Shape's operator<<. */
static const char *logical_shape(const lb_spec *s, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "Shape([");
  for (int i = 0; i < s->rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
  if (k < n) snprintf(buf + k, n - k, "])");
  return buf;
}

/* core_range_set prints the shard grid of n cores from core first of a
 * numbering gx wide (lb_grid_w) as the shim builds it,
 * num_cores_to_corerangeset(start, n, grid, row_wise) or, narrower than the
 * grid, num_cores_to_corerangeset_in_subcoregrids over the leftmost gx
 * columns (tt_metal/common/work_split.cpp:77-143, 150-310: the same
 * ranges), and as its fmt formatter prints
 * it: "{" + each CoreRange::str() joined by ", " + "}", a CoreRange
 * "[start - end]" (tt_metal/common/core_coord.cpp:115, 354-365), a core
 * umd's xy_pair::str() "x-y" (tt-umd at 44455fa1, the pin's
 * tt_metal/third_party/umd: device/types/xy_pair.cpp, line 11). */
static const char *core_range_set(int64_t first, int64_t n, int64_t gx, char *buf, size_t cap) {
  int64_t r[3][4], nr = 0, sx = first % gx, sy = first / gx, left = n;
  if (sx != 0 && left > gx - sx) {
    r[nr][0] = sx, r[nr][1] = sy, r[nr][2] = gx - 1, r[nr][3] = sy, nr++;
    left -= gx - sx, sx = 0, sy++;
  }
  if (left > gx) {
    int64_t rows = left / gx;
    r[nr][0] = sx, r[nr][1] = sy, r[nr][2] = gx - 1, r[nr][3] = sy + rows - 1, nr++;
    left -= rows * gx, sx = 0, sy += rows;
  }
  if (left > 0) r[nr][0] = sx, r[nr][1] = sy, r[nr][2] = sx + left - 1, r[nr][3] = sy, nr++;
  size_t k = (size_t)snprintf(buf, cap, "{");
  for (int64_t i = 0; i < nr && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s[%lld-%lld - %lld-%lld]", i ? ", " : "", (long long)r[i][0], (long long)r[i][1], (long long)r[i][2], (long long)r[i][3]);
  if (k < cap) snprintf(buf + k, cap - k, "}");
  return buf;
}

/* ---- validation (a program-cache miss) ---- */

static int validate_uc(offcard_tt_device *d, const lb_op *o, int fused) {
  const char *name = lb_op_name(o->code);
  int np = fused ? 2 : 1;
  const lb_tensor *idx = o->present[2 * np] ? &o->t[2 * np] : NULL;
  const lb_tensor *pt = o->present[2 * np + 1] ? &o->t[2 * np + 1] : NULL;
  int64_t n = o->ni >= 4 ? o->i[3] : -1;
  if (o->ni < 4 || (n >= 0 && (uint64_t)n + 4 != o->ni)) return lb_err(OFFCARD_TT_EARG, name, "attributes: want share_cache, batch_offset, fp32_dest_acc, n, list");
  for (int p = 0; p < np; p++) {
    if (!o->present[2 * p] || !o->present[2 * p + 1]) return lb_err(OFFCARD_TT_EARG, name, "cache and input are required");
    const lb_spec *cs = &o->t[2 * p].s, *is = &o->t[2 * p + 1].s;
    if (is->layout != OFFCARD_TT_TILE) FAIL("Input tensor in non-fused update_cache must be tilized");
    if (cs->layout != OFFCARD_TT_TILE) FAIL("Cache tensor in update_cache must be tilized");
    if (cs->dtype != OFFCARD_TT_FP32 && cs->dtype != OFFCARD_TT_BF16) FAIL("Data type of cache tensor must be FLOAT32, BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is %s", dt_name(cs->dtype));
    if (cs->rank != 4 || is->rank != 4) FAIL("offcard: Cache and input tensors must be rank 4");
    if (lb_padded(is, 0) != 1) FAIL("Dim 0 of input tensor must be 1");
    if (cs->memory != OFFCARD_TT_INTERLEAVED) FAIL("Only interleaved cache is supported");
    int64_t hd = lb_padded(is, 3);
    int64_t cd = lb_padded(cs, 3);
    if (pt && !fused) {
      int64_t kv = lb_padded(cs, 1), bs = lb_padded(cs, 2);
      if (kv * bs * cd != kv * bs * hd)
        FAIL("paged_update_cache geometry mismatch: cache has %lld elems/block (kv_heads=%lld, block_size=%lld, head_dim=%lld) but call view is %lld (kv_heads=%lld, block_size=%lld, head_dim=%lld).",
             (long long)(kv * bs * cd), (long long)kv, (long long)bs, (long long)cd, (long long)(kv * bs * hd), (long long)kv, (long long)bs, (long long)hd);
      if (bs % LB_TILE) FAIL("effective block_size (%lld) must be a multiple of TILE_HEIGHT (%d)", (long long)bs, LB_TILE);
    } else if (cd != hd) {
      if (fused) FAIL("Last dim of input tensor must match last dim of cache tensor");
      FAIL("Last dim of input tensor (%lld) must match last dim of cache tensor (%lld) in non-paged mode", (long long)hd, (long long)cd);
    }
    if (hd % LB_TILE) FAIL("input_tensor last dim (%lld) must be a multiple of TILE_WIDTH (%d)", (long long)hd, LB_TILE);
    if (!pt) {
      if (o->i[0]) {
        if (cs->dims[0] != 1) FAIL("Share cache feature expects cache tensor to have batch of 1");
      } else if (is->dims[1] != cs->dims[0]) {
        FAIL("Expect batch in input tensor match the batch in cache tensor");
      }
    } else {
      if (o->i[0]) FAIL("share_cache not supported with paged cache");
      if (!idx) FAIL("Paged cache requires update_idxs tensor");
      const lb_spec *ps = &pt->s;
      if (ps->memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "sharded page tables are not implemented by the loopback");
      if (ps->dtype != OFFCARD_TT_INT32) FAIL("Expect page table to have datatype INT32");
      if (ps->layout != OFFCARD_TT_ROW_MAJOR) FAIL("Expect page table to have memory layout in ROW MAJOR");
      if (ps->rank != 2) FAIL("offcard: Page table must be rank 2 [batch, max_num_blocks_per_seq]");
      if (ps->dims[0] != lb_padded(is, 1)) FAIL("Batch size between page_table and input_tensor must match");
      if (ps->dims[1] > lb_padded(cs, 0))
        FAIL("max_num_blocks_per_seq must be less than max_num_blocks: max_num_blocks_per_seq=%lld, max_num_blocks=%lld", (long long)ps->dims[1], (long long)lb_padded(cs, 0));
    }
    if ((idx == NULL) == (n < 0)) FAIL("Only an update tensor or an update vector can be provided. Not both or neither.");
    int64_t num = n;
    if (idx) {
      if (idx->s.dtype != OFFCARD_TT_INT32) FAIL("Expected update_idxs to have datatype INT32");
      if (idx->s.layout != OFFCARD_TT_ROW_MAJOR) FAIL("Expected update_idxs to have memory layout in ROW MAJOR");
      if (idx->s.memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "sharded update_idxs tensors are not implemented by the loopback");
      if (idx->s.buffer != OFFCARD_TT_DRAM) FAIL("Expect update_idxs to have buffer type DRAM");
      num = idx->s.dims[0];
    }
    if (lb_padded(is, 1) != num) FAIL("Number of update_idxs (%lld) should match batch size (%lld)", (long long)num, (long long)lb_padded(is, 1));
    if (is->memory == OFFCARD_TT_INTERLEAVED) FAIL("Expect input_tensor to be sharded");
    if (is->memory == OFFCARD_TT_WIDTH_SHARDED) FAIL("Expect input_tensor to NOT have memory layout WIDTH SHARDED");
    if (is->shard_w != hd)
      FAIL("Expect input_tensor to have shard width (%lld) equal to the last dimension of the input tensor padded shape (%lld)", (long long)is->shard_w, (long long)hd);
    if (!fused && is->shard_cores != lb_padded(is, 1))
      FAIL("Input tensor shard grid must have num_cores (%lld) equal to the number of users / batch (%lld). The kernel dispatches one user per core; use a {num_users, 1} grid (or any CoreRangeSet whose num_cores == num_users).",
           (long long)is->shard_cores, (long long)lb_padded(is, 1));
    if (is->shard_h != lb_padded(is, 2)) FAIL("offcard: Input shard height (%lld) must be one tile row (%lld): the simulator models one user per core", (long long)is->shard_h, (long long)lb_padded(is, 2));
    if (is->dtype != OFFCARD_TT_FP32 && is->dtype != OFFCARD_TT_BF16) FAIL("Data type of input tensor for update cache must be FLOAT32 or BFLOAT16");
    if (o->i[1] != 0) FAIL("batch_offset must be 0");
  }
  if (fused) {
    const lb_spec *a = &o->t[1].s, *b = &o->t[3].s;
    char g1[128], g2[128];
    /* {} prints each CoreRangeSet (paged_fused_update_cache_device_operation.cpp:227-228) */
    int overlap = 0; /* CoreRangeSet::intersects */
    for (int64_t i = 0; i < a->shard_cores && !overlap; i++)
      for (int64_t j = 0; j < b->shard_cores && !overlap; j++) overlap = lb_core(d, a, i) == lb_core(d, b, j);
    if (overlap)
      FAIL("input_tensor1 (%s) and input_tensor2 (%s) must not overlap", core_range_set(a->shard_first, a->shard_cores, lb_grid_w(d, a), g1, sizeof g1),
           core_range_set(b->shard_first, b->shard_cores, lb_grid_w(d, b), g2, sizeof g2));
    if (a->shard_cores != b->shard_cores)
      FAIL("input_tensor1 (%s) and input_tensor2 (%s) must have same number of cores", core_range_set(a->shard_first, a->shard_cores, lb_grid_w(d, a), g1, sizeof g1),
           core_range_set(b->shard_first, b->shard_cores, lb_grid_w(d, b), g2, sizeof g2));
    if (!same_shape(&o->t[0].s, &o->t[2].s) || o->t[0].s.dtype != o->t[2].s.dtype || !same_shape(a, b) || a->dtype != b->dtype)
      FAIL("offcard: cache_tensor1/input_tensor1 and cache_tensor2/input_tensor2 must have the same specs (the simulator's one program serves both)");
  }
  return 0;
}

/* chunked_scaled_dot_product_attention: sdpa.cpp's two overloads call
 * ttnn::prim::sdpa (is_causal, a page table, chunk_start_idx or
 * chunk_start_idx_tensor); SDPAOperation::validate_on_program_cache_miss
 * (ttnn/cpp/ttnn/operations/transformer/sdpa/device/
 * sdpa_device_operation.cpp:18-375 at 622c6fb9) checks, in order: the
 * operands (35-45), validate_chunked_mode (172-314), then the padding
 * (47-53, 372-374); the program factory adds the page-table stick check
 * (sdpa_program_factory.cpp:138-148). */
static int validate_chunked(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *t = o->t;
  int flex = o->present[4];
  char buf[160];
  (void)d;
  if (o->nf != 1) return lb_err(OFFCARD_TT_EARG, name, "want one float attribute (scale)");
  for (int i = 0; i < 3; i++) {
    if (t[i].s.layout != OFFCARD_TT_TILE) FAIL("Inputs to SDPA must be tilized");
    if (t[i].s.dtype != OFFCARD_TT_BF16) FAIL("Data type of input tensor must be BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is %s", dt_name(t[i].s.dtype));
    if (t[i].s.memory != OFFCARD_TT_INTERLEAVED) FAIL("Operands to SDPA need to be DRAM/L1 interleaved");
    if (t[i].s.rank != 4) FAIL("offcard: Q, K and V must be rank 4, got rank %d", t[i].s.rank);
  }
  if (!flex && o->i[0] < 0) FAIL("chunk_start_idx must be non-negative");
  if (flex) {
    const lb_spec *cs = &t[4].s;
    /* ttnn prints dtype() as "DataType::UINT32" here too; the bare name is kept
     * until the serving work updates tthw/serving_test.go's expectation. */
    if (cs->dtype != OFFCARD_TT_INT32) FAIL("chunk_start_idx tensor must be int32. Got %s", dt_name(cs->dtype));
    if (cs->rank != 1 || cs->dims[0] != 1) FAIL("chunk_start_idx tensor must have shape [1]. Got %s", logical_shape(cs, buf, sizeof buf));
  }
  const lb_spec *ps = &t[3].s;
  if (ps->layout != OFFCARD_TT_ROW_MAJOR) FAIL("Page table must be row major");
  if (ps->dtype != OFFCARD_TT_INT32) FAIL("Page table must be int32");
  if (ps->rank != 2) FAIL("offcard: Page table must be rank 2 [batch, max_num_blocks_per_seq]");
  if (ps->memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "sharded page tables are not implemented by the loopback");
  const int64_t *qs = t[0].s.dims, *ks = t[1].s.dims, *vs = t[2].s.dims;
  if (ks[2] != vs[2]) FAIL("K page size must match V page size. Got K: %lld, V: %lld", (long long)ks[2], (long long)vs[2]);
  if (ps->dims[0] != qs[0]) FAIL("Page table batch size must match input batch size. Got Page table: %lld, Input: %lld", (long long)ps->dims[0], (long long)qs[0]);
  uint32_t kv_length = (uint32_t)(ps->dims[1] * ks[2]);
  if (vs[1] != ks[1]) FAIL("K and V num_heads must match. Got K: %lld, V: %lld", (long long)ks[1], (long long)vs[1]);
  if (ks[3] != qs[3] || vs[3] != qs[3]) FAIL("K and V hidden dim must match. Got K: %lld, V: %lld", (long long)ks[3], (long long)vs[3]);
  if (qs[1] < ks[1] || qs[1] % ks[1]) FAIL("Q num_heads must be >= K num_heads and divisible by K num_heads. Got Q: %lld, K: %lld", (long long)qs[1], (long long)ks[1]);
  if (o->i[1] || o->i[2]) { /* a program config */
    if (o->i[1] % LB_TILE) FAIL("q_chunk_size must be divisible by TILE_SIZE. Got q_chunk_size: %lld, TILE_SIZE: %d", (long long)o->i[1], LB_TILE);
    if (o->i[2] % LB_TILE) FAIL("k_chunk_size must be divisible by TILE_SIZE. Got k_chunk_size: %lld, TILE_SIZE: %d", (long long)o->i[2], LB_TILE);
    /* ttnn divides chunk_start_idx (and the sequence) by both: a zero
     * chunk is a division by zero on the host, not a refusal */
    if (o->i[1] <= 0 || o->i[2] <= 0) FAIL("offcard: q_chunk_size and k_chunk_size must both be positive multiples of 32 in a program config");
    if (!flex && o->i[0] % o->i[1])
      FAIL("chunk_start_idx must be a multiple of q_chunk_size. Got chunk_start_idx: %lld, q_chunk_size: %lld", (long long)o->i[0], (long long)o->i[1]);
    if (!flex && o->i[0] % o->i[2])
      FAIL("chunk_start_idx must be a multiple of k_chunk_size. Got chunk_start_idx: %lld, k_chunk_size: %lld", (long long)o->i[0], (long long)o->i[2]);
  } else if (o->i[4]) {
    FAIL("offcard: exp_approx_mode needs a program config: set q_chunk_size and k_chunk_size");
  }
  if (!flex && (int64_t)kv_length < qs[2] + o->i[0])
    FAIL("K's sequence length must be >= Q's sequence length + chunk_start_idx. Got K: %u, Q: %lld, chunk_start_idx: %lld", kv_length, (long long)qs[2], (long long)o->i[0]);
  if (flex && (int64_t)kv_length < qs[2]) FAIL("K's sequence length must be >= Q's sequence length. Got K: %u, Q: %lld", kv_length, (long long)qs[2]);
  for (int i = 0; i < 3; i++)
    if (t[i].s.dims[3] % LB_TILE) FAIL("Padding is not supported on the head_dim dimension");
  /* the reader's block_size_t = block_size / TILE_HEIGHT (sdpa_program_factory.cpp:137) */
  if (ks[2] % LB_TILE) FAIL("offcard: K block size %lld must be a multiple of 32 (the kernel walks the page table in tiles)", (long long)ks[2]);
  if (flex && (lb_padded(ps, 1) * 4) % 32) FAIL("page table stick size must be a multiple of 32");
  if (!flex && t[3].aligned % 32) FAIL("page table page size in bytes must be a multiple of 32 due to address alignment");
  const lb_spec *os = &o->out[0].s;
  if (!same_shape(os, &t[0].s) || os->dtype != t[0].s.dtype || os->layout != OFFCARD_TT_TILE) FAIL("offcard: Output spec must be Q's shape and dtype, TILE");
  if (os->memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "a sharded output is not implemented by the loopback");
  return 0;
}

/* fill_cache: ttnn::fill_cache (kv_cache.cpp) is prim::update_cache with
 * UpdateCacheOpType::FILL; UpdateKVCacheOperation::
 * validate_on_program_cache_miss (ttnn/cpp/ttnn/operations/kv_cache/device/
 * update_cache_device_operation.cpp:20-106 at 622c6fb9), in order. The
 * indices are uint32_t. */
static int validate_fill_cache(const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_spec *cs = &o->t[0].s, *is = &o->t[1].s;
  if (is->layout != OFFCARD_TT_TILE || cs->layout != OFFCARD_TT_TILE) FAIL("Inputs to update_cache must be tilized");
  if (is->dtype != OFFCARD_TT_FP32 && is->dtype != OFFCARD_TT_BF16) FAIL("Input tensor dtype must be FLOAT32, BFLOAT16, or BFLOAT8_B but got %s", dt_name(is->dtype));
  if (cs->dtype != OFFCARD_TT_FP32 && cs->dtype != OFFCARD_TT_BF16) FAIL("Cache tensor dtype must be FLOAT32, BFLOAT16, or BFLOAT8_B but got %s", dt_name(cs->dtype));
  if (cs->rank != 4 || is->rank != 4) FAIL("offcard: cache and input must be rank 4 ([batch, heads, seq, head_dim])");
  if (lb_padded(is, 3) != lb_padded(cs, 3)) FAIL("Input tensor width (%lld) must equal cache tensor width (%lld)", (long long)lb_padded(is, 3), (long long)lb_padded(cs, 3));
  if (lb_padded(is, 0) != 1) FAIL("Input tensor batch size must be 1 but got %lld", (long long)lb_padded(is, 0));
  if (lb_padded(is, 1) != lb_padded(cs, 1)) FAIL("Input tensor height (%lld) must equal cache tensor height (%lld)", (long long)lb_padded(is, 1), (long long)lb_padded(cs, 1));
  if (cs->memory != OFFCARD_TT_INTERLEAVED)
    FAIL("Cache tensor memory layout must be INTERLEAVED, ND_SHARDED, or HEIGHT_SHARDED (created from ND shard spec) but got %s", ml_name(cs->memory));
  if (is->dtype != cs->dtype) FAIL("Input and cache tensors must have same dtype!");
  if (is->memory != OFFCARD_TT_INTERLEAVED) {
    if (is->memory == OFFCARD_TT_WIDTH_SHARDED) FAIL("Input tensor memory layout must not be WIDTH_SHARDED but got %s", ml_name(is->memory));
    if (is->shard_w != lb_padded(is, 3)) FAIL("Input tensor shard width (%lld) must equal padded width (%lld)", (long long)is->shard_w, (long long)lb_padded(is, 3));
    if (lb_padded(is, 2) % is->shard_h) FAIL("Seq len must be divisible by shard height!");
  }
  uint32_t bi = (uint32_t)o->i[0], ui = (uint32_t)o->i[1];
  if (bi >= lb_padded(cs, 0)) FAIL("Batch index (%u) must be less than cache tensor batch size (%lld)", bi, (long long)lb_padded(cs, 0));
  if (ui % LB_TILE) FAIL("Fill update_idx (%u) must be a multiple of TILE_HEIGHT (%d)", ui, LB_TILE);
  if (ui > lb_padded(cs, 2) || lb_padded(is, 2) > lb_padded(cs, 2) - ui)
    FAIL("Fill update_idx (%u) + input tensor height (%lld) must be <= cache tensor height (%lld)", ui, (long long)lb_padded(is, 2), (long long)lb_padded(cs, 2));
  if (is->memory != OFFCARD_TT_INTERLEAVED && is->shard_h % LB_TILE) return lb_err(OFFCARD_TT_EARG, name, "a shard height off the tile grid is not implemented by the loopback");
  return 0;
}

/* lb_slice_box: the slice's begins and ends after ttnn's wrap_index (as
 * uint32_t, ttnn/cpp/ttnn/operations/data_movement/common/common.cpp:476)
 * and its padded ends (data_movement/slice/slice.cpp:325-329: the last two dims rounded up to
 * the tile for a TILE input); 0 when the attribute lists do not fit. */
int lb_slice_box(const lb_op *o, uint32_t *b, uint32_t *e, uint32_t *pe) {
  const lb_spec *is = &o->t[0].s;
  int64_t nb = o->i[0];
  if (nb != is->rank || o->i[1 + nb] != nb) return 0;
  for (int i = 0; i < is->rank; i++) {
    int32_t x = (int32_t)o->i[1 + i], y = (int32_t)o->i[2 + nb + i], n = (int32_t)is->dims[i];
    b[i] = (uint32_t)(x < 0 ? n + x : x);
    e[i] = pe[i] = (uint32_t)(y < 0 ? n + y : y);
  }
  if (is->layout == OFFCARD_TT_TILE && is->rank >= 2)
    for (int i = is->rank - 2; i < is->rank; i++) {
      uint32_t r = (pe[i] + LB_TILE - 1) / LB_TILE * LB_TILE;
      pe[i] = r > LB_TILE ? r : LB_TILE;
    }
  return 1;
}

/* lb_slice_noop: begins all 0 and ends the input's shape (data_movement/slice/slice.cpp:181). */
int lb_slice_noop(const lb_op *o) {
  const lb_spec *is = &o->t[0].s;
  if (o->i[0] != is->rank || o->i[1 + o->i[0]] != is->rank) return 0;
  for (int i = 0; i < is->rank; i++)
    if (o->i[1 + i] != 0 || o->i[2 + is->rank + i] != is->dims[i]) return 0;
  return 1;
}

/* slice: ttnn::slice<int32_t> (ttnn/cpp/ttnn/operations/data_movement/
 * slice/slice.cpp:83-391 at 622c6fb9), unit steps: its host checks
 * (102-109, 338-342), then SliceDeviceOperation::
 * validate_on_program_cache_miss (data_movement/slice/device/slice_device_operation.cpp:95-174)
 * on the wrapped begins and padded ends. Sharded slices and the TILE
 * row-major detour (begins off the tile grid, data_movement/slice/slice.cpp:243) are not
 * modelled. */
static int validate_slice(const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_spec *is = &o->t[0].s, *os = &o->out[0].s;
  int64_t nb = o->i[0], ne = o->i[1 + nb];
  if (is->rank != nb) FAIL("Input rank %d and begins %lld must have the same size", is->rank, (long long)nb);
  if (nb != ne) FAIL("Start %lld and end %lld must have the same size", (long long)nb, (long long)ne);
  if (lb_slice_noop(o)) return 0; /* the input itself, or a to_memory_config copy */
  if (is->memory != OFFCARD_TT_INTERLEAVED || os->memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "sharded slices are not implemented by the loopback");
  uint32_t b[OFFCARD_TT_MAX_RANK], e[OFFCARD_TT_MAX_RANK], pe[OFFCARD_TT_MAX_RANK];
  lb_slice_box(o, b, e, pe);
  int r = is->rank;
  if (is->layout == OFFCARD_TT_TILE && (r == 1 || b[r - 1] % LB_TILE || b[r - 2] % LB_TILE))
    return lb_err(OFFCARD_TT_EARG, name, "a TILE slice whose begins are off the tile grid (ttnn's row-major detour) is not implemented by the loopback");
  int empty = 0;
  for (int i = 0; i < r; i++) {
    if (e[i] < b[i]) FAIL("End %u must be greater than or equal to start %u", e[i], b[i]);
    empty |= e[i] == b[i];
  }
  if (empty) return lb_err(OFFCARD_TT_EARG, name, "an empty slice (ttnn::empty) is not implemented by the loopback");
  for (int i = 0; i < r; i++) {
    if (b[i] >= lb_padded(is, i)) FAIL("Slice start[%d] (%u) must be less than input tensor shape[%d] (%lld)", i, b[i], i, (long long)lb_padded(is, i));
    if (pe[i] > lb_padded(is, i)) FAIL("Ends %u must be less than or equal to the shape of the tensor %lld", pe[i], (long long)lb_padded(is, i));
    if (b[i] > pe[i]) FAIL("Slice start[%d] (%u) must be <= slice end[%d] (%u)", i, b[i], i, pe[i]);
  }
  int ok = os->rank == r && os->dtype == is->dtype && os->layout == is->layout;
  for (int i = 0; ok && i < r; i++) ok = os->dims[i] == (int64_t)(e[i] - b[i]);
  if (!ok) FAIL("offcard: output spec must be the box's shape in the input's dtype and layout");
  return 0;
}

/* rotary_bound: the decode program binds its input, cos, sin, (llama's
 * matrix) and output CBs to their buffers, in that order; the bind throws
 * for a buffer outside L1, then for a CB larger than the buffer's size per
 * bank (tt_metal/impl/buffers/circular_buffer_config.cpp:193-201, 217-222).
 * CB sizes from the shard of the input: n x Dt tiles for input and
 * output, Dt x users per core of the shard grid's bounding box for cos and
 * sin, one tile for the matrix (rotary_embedding_hf_sharded_program_factory.cpp
 * :269-361, rotary_embedding_llama_sharded_program_factory.cpp:78-172). */
static int rotary_bound(offcard_tt_device *d, const lb_op *o, const char *name) {
  const lb_spec *is = &o->t[0].s;
  int64_t dt = is->shard_w / LB_TILE, n = is->shard_h / LB_TILE, users = lb_padded(is, 1), gx = lb_grid_w(d, is);
  int64_t rows = (is->shard_first + is->shard_cores - 1) / gx - is->shard_first / gx + 1;
  int64_t box = rows == 1 ? is->shard_cores : rows * gx, par = users < box ? users : box;
  int64_t per_core = (users + par - 1) / par;
  int llama = o->code == OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA;
  lb_tensor out = {0};
  out.s = o->out[0].s;
  if (lb_geometry(d, &out)) return OFFCARD_TT_EARG;
  const lb_tensor *bind[5] = {&o->t[0], &o->t[1], &o->t[2], llama ? &o->t[3] : &out, &out};
  int64_t tiles[5] = {n * dt, dt * per_core, dt * per_core, llama ? 1 : n * dt, n * dt};
  for (int i = 0; i < (llama ? 5 : 4); i++) {
    if (bind[i]->s.buffer != OFFCARD_TT_L1) FAIL("Only L1 buffers can have an associated circular buffer!");
    uint64_t size = (uint64_t)tiles[i] * LB_TILE * LB_TILE * 2;
    if (size > bind[i]->per_bank)
      FAIL("Cannot set circular buffer size to %llu. This is larger than the associated dynamically allocated L1 buffer bank size of %llu B", (unsigned long long)size,
           (unsigned long long)bind[i]->per_bank);
  }
  return 0;
}

int lb_validate(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *t = o->t;
  /* outputs the device allocates: the caller's expected specs must be what
   * ttnn's compute_output_specs gives (the loopback checks the shapes) */
  if (o->nout == 1 && o->code != OFFCARD_TT_OP_PAGED_SDPA_DECODE && o->code != OFFCARD_TT_OP_NLP_CONCAT_HEADS && o->code != OFFCARD_TT_OP_CHUNKED_SDPA &&
      o->code != OFFCARD_TT_OP_SLICE) {
    const lb_spec *os = &o->out[0].s;
    if (!same_shape(os, &t[0].s) || os->dtype != t[0].s.dtype || os->layout != t[0].s.layout) FAIL("offcard: output spec must have the input's shape, dtype and layout");
  }
  switch (o->code) {
    case OFFCARD_TT_OP_EMBEDDING:
      /* embedding_device_operation.cpp, in its order */
      if (t[1].s.layout != OFFCARD_TT_ROW_MAJOR) FAIL("Weights tensor layout must be ROW_MAJOR but got Layout::TILE");
      if (t[0].s.dtype != OFFCARD_TT_UINT32 && t[0].s.dtype != OFFCARD_TT_BF16) FAIL("Input must be UINT32 or BFLOAT16");
      if (t[1].s.dtype != OFFCARD_TT_BF16) FAIL("Weights tensor must have BFLOAT16 dtype");
      if (t[0].s.memory != OFFCARD_TT_INTERLEAVED) FAIL("Embedding does not currently support sharded inputs");
      if (t[1].s.memory != OFFCARD_TT_INTERLEAVED) FAIL("Embedding does not currently support sharded weights");
      if (t[0].s.layout != OFFCARD_TT_ROW_MAJOR) FAIL("offcard: Input tensor must be ROW_MAJOR, got TILE");
      if (t[1].s.rank < 2) FAIL("offcard: Weight tensor must be [vocab, hidden]");
      if (want_bf16(name, "Output tensor", &t[2])) return OFFCARD_TT_EDEVICE;
      if (lb_volume(&t[2].s) != lb_volume(&t[0].s) * (uint64_t)last(&t[1].s) && !emb_fused(t)) FAIL("offcard: Output tensor does not hold %llu rows of %lld", (unsigned long long)lb_volume(&t[0].s), (long long)last(&t[1].s));
      return 0;
    case OFFCARD_TT_OP_RMS_NORM:
      if (o->nf != 1) return lb_err(OFFCARD_TT_EARG, name, "want one float attribute (epsilon)");
      /* rmsnorm.cpp, then layernorm_device_operation.cpp */
      if (t[0].s.layout == OFFCARD_TT_ROW_MAJOR) FAIL("ttnn::rms_norm does not support ROW_MAJOR input tensors. Use TILE layout.");
      if (t[0].s.dtype != OFFCARD_TT_FP32 && t[0].s.dtype != OFFCARD_TT_BF16) FAIL("Input tensor must be FLOAT32, BFLOAT16, or BFLOAT8_B, got: %s", dt_name(t[0].s.dtype));
      {
        const lb_spec *as = &t[0].s, *ws = &t[1].s;
        int64_t aw = lb_padded(as, as->rank - 1), ww = lb_padded(ws, ws->rank - 1);
        if (ws->layout == OFFCARD_TT_TILE) {
          if (aw != ww || last(ws) < last(as))
            FAIL("Input and gamma padded widths must match and gamma logical width must be >= input logical width (otherwise valid input columns would be multiplied by gamma padding). Got input: logical[-1]=%lld padded[-1]=%lld vs gamma: logical[-1]=%lld padded[-1]=%lld",
                 (long long)last(as), (long long)aw, (long long)last(ws), (long long)ww);
          if (lb_padded(ws, ws->rank - 2) != LB_TILE) FAIL("Gamma tensor height must equal tile height (%d), got: %lld", LB_TILE, (long long)lb_padded(ws, ws->rank - 2));
          FAIL("offcard: a TILE gamma is not modelled: tt.RMSNorm takes a ROW_MAJOR [1, 1, n/32, 32] weight");
        }
        if (ww != LB_TILE || (int64_t)lb_volume(ws) / LB_TILE != aw / LB_TILE) {
          char wsh[160], ash[160];
          FAIL("Gamma's last padded dim needs to equal tile width and gamma's volume needs to align with last padded dim of input. Error with gamma.value().padded_shape(): %s, tile_width: %d, gamma.value().physical_volume(): %llu, a.padded_shape(): %s",
               padded_shape(ws, wsh, sizeof wsh), LB_TILE, (unsigned long long)lb_volume(ws), padded_shape(as, ash, sizeof ash));
        }
      }
      if (t[1].s.dtype != OFFCARD_TT_FP32 && t[1].s.dtype != OFFCARD_TT_BF16) FAIL("Gamma tensor must be FLOAT32 or BFLOAT16, got: %s", dt_name(t[1].s.dtype));
      if (t[0].s.memory == OFFCARD_TT_HEIGHT_SHARDED) FAIL("Height sharded inputs are not supported.");
      if (want_bf16(name, "Input tensor", &t[0]) || want_bf16(name, "Weight tensor", &t[1])) return OFFCARD_TT_EDEVICE;
      if ((int64_t)lb_volume(&t[1].s) < last(&t[0].s)) FAIL("offcard: Weight tensor has %llu elements, want at least %lld (the last dim)", (unsigned long long)lb_volume(&t[1].s), (long long)last(&t[0].s));
      return 0;
    case OFFCARD_TT_OP_LINEAR: {
      /* matmul_device_operation.cpp */
      if (t[0].s.dtype != OFFCARD_TT_BF16 && t[0].s.dtype != OFFCARD_TT_FP32) FAIL("Unsupported data format");
      for (int i = 0; i < 4; i++)
        if (o->present[i] && want_bf16(name, "Tensor", &t[i])) return OFFCARD_TT_EDEVICE;
      if (t[0].s.layout != OFFCARD_TT_TILE || t[1].s.layout != OFFCARD_TT_TILE) FAIL("Inputs to matmul must be tilized");
      if (batch_of(&t[0].s) != 1 || batch_of(&t[1].s) != 1) {
        char a[160], b[160];
        FAIL("offcard: Input and Weight must be [1,1,M,K] and [1,1,K,N] (no batch), got %s and %s", go_dims(&t[0].s, a, sizeof a), go_dims(&t[1].s, b, sizeof b));
      }
      int64_t k = t[1].s.dims[t[1].s.rank - 2], n = last(&t[1].s);
      if (o->i[0]) k = n, n = t[1].s.dims[t[1].s.rank - 2];
      if (last(&t[0].s) != k) FAIL("The width of the first tensor must be equal to the height of the second tensor. Mismatch: width=%lld height=%lld", (long long)last(&t[0].s), (long long)k);
      if (last(&t[2].s) != n || rows_of(&t[2].s) != rows_of(&t[0].s)) FAIL("offcard: Output shape, want %llu rows of %lld", (unsigned long long)rows_of(&t[0].s), (long long)n);
      if (o->present[3] && bias_fused(&t[0].s, &t[1].s, &t[3].s)) {
        /* the fused path's bias checks, operations/matmul/device/matmul_device_operation.cpp:1001-1033 */
        const lb_spec *b = &t[3].s;
        int64_t bp = lb_padded(b, b->rank - 1), np = lb_padded(&t[1].s, o->i[0] ? t[1].s.rank - 2 : t[1].s.rank - 1);
        if (b->layout != OFFCARD_TT_TILE) FAIL("Unsupported input layout");
        if (bp != np) FAIL("Unsupported bias shape: padded last dimension of bias, %lld, not equal to second input's padded last dimension, %lld.", (long long)bp, (long long)np);
        if (last(b) < n) FAIL("Unsupported bias shape: last dimension of bias, %lld, not equal to or greater than second input's last dimension, %lld.", (long long)last(b), (long long)n);
      }
      if (o->present[3] && (int64_t)lb_volume(&t[3].s) != n) FAIL("offcard: Bias tensor has %llu elements, want %lld", (unsigned long long)lb_volume(&t[3].s), (long long)n);
      return 0;
    }
    case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS_DECODE: {
      if (o->i[0] <= 0 || o->i[1] <= 0 || t[0].s.rank != 4) FAIL("offcard: Input must be rank 4 and num_heads (%lld), num_kv_heads (%lld) positive", (long long)o->i[0], (long long)o->i[1]);
      /* nlp_create_qkv_heads_decode.cpp, then the device op */
      if (lb_padded(&t[0].s, 3) % (o->i[0] + 2 * o->i[1]))
        FAIL("Input shape %lld must be divisible by num_heads + 2*num_kv_heads = %lld", (long long)lb_padded(&t[0].s, 3), (long long)(o->i[0] + 2 * o->i[1]));
      if (t[0].s.dtype != OFFCARD_TT_BF16 && t[0].s.dtype != OFFCARD_TT_FP32) FAIL("Unsupported data format");
      if (t[0].s.layout != OFFCARD_TT_TILE) FAIL("Only tile layout is supported for input tensor");
      {
        const int64_t *sh = t[0].s.dims;
        if (sh[3] % LB_TILE || sh[2] > 32 || sh[1] != 1 || sh[0] != 1)
          FAIL("Unsupported input shape = Shape([%lld, %lld, %lld, %lld])", (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)sh[3]);
      }
      if (t[0].s.memory == OFFCARD_TT_HEIGHT_SHARDED) FAIL("Current input memory layout is HEIGHT_SHARDED. It must be width sharded");
      if (o->i[0] < o->i[1]) FAIL("num_q_heads=%lld must be greater than or equal to num_kv_heads=%lld", (long long)o->i[0], (long long)o->i[1]);
      if (want_bf16(name, "Input tensor", &t[0])) return OFFCARD_TT_EDEVICE;
      const lb_tensor *q = o->out;
      for (int i = 0; i < 3; i++)
        if (q[i].s.rank != 4 || q[i].s.dtype != OFFCARD_TT_BF16) FAIL("offcard: outputs must be rank-4 BFLOAT16");
      int64_t dh = q[0].s.dims[3];
      if (last(&t[0].s) != (o->i[0] + 2 * o->i[1]) * dh) FAIL("offcard: Input width %lld != (num_heads + 2*num_kv_heads) * head_dim = %lld", (long long)last(&t[0].s), (long long)((o->i[0] + 2 * o->i[1]) * dh));
      for (int i = 0; i < 3; i++) {
        int64_t heads = i == 0 ? o->i[0] : o->i[1];
        const int64_t *sh = q[i].s.dims;
        if (sh[0] != 1 || sh[1] != (int64_t)rows_of(&t[0].s) || sh[2] < heads || sh[3] != dh) FAIL("offcard: Output shape, want [1, %llu, >=%lld, %lld]", (unsigned long long)rows_of(&t[0].s), (long long)heads, (long long)dh);
      }
      return 0;
    }
    case OFFCARD_TT_OP_ROTARY_EMBEDDING_HF:
    case OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA: {
      if (o->code == OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA) {
        /* rotary_embedding_llama_device_operation.cpp, decode mode, in order */
        const lb_spec *is = &t[0].s, *cs = &t[1].s, *ss = &t[2].s, *ms = &t[3].s;
        if (is->rank != 4 || ms->rank != 4) FAIL("offcard: Input tensor and trans mat must be rank 4");
        if (is->layout != OFFCARD_TT_TILE) FAIL("input tensor to rotary embedding must be tilized");
        if (cs->layout != OFFCARD_TT_TILE) FAIL("cos tensor to rotary embedding must be tilized");
        if (ss->layout != OFFCARD_TT_TILE) FAIL("sin tensor to rotary embedding must be tilized");
        if (ms->layout != OFFCARD_TT_TILE) FAIL("transformation matrix to rotary embedding must be tilized");
        if (is->dims[3] > 256) FAIL("Head dim must be less than 256");
        if (is->dtype != OFFCARD_TT_BF16 || cs->dtype != OFFCARD_TT_BF16 || ss->dtype != OFFCARD_TT_BF16 || ms->dtype != OFFCARD_TT_BF16)
          FAIL("All input tensors must have dtype = bfloat16");
        if (is->memory != o->out[0].s.memory) FAIL("Input tensor and output tensor must have same memory layout");
        if (!same_shape(cs, ss)) FAIL("Cos and Sin dims must match");
        if (is->dims[3] % LB_TILE) FAIL("Head dim must be a multiple of TILE_WIDTH in decode mode");
        if (is->dims[0] != 1)
          FAIL("rotary_embedding_llama currently only supports sharded inputs in decode mode, and therefore, seq_len (in dim 0) must be 1.");
        if (is->memory != OFFCARD_TT_HEIGHT_SHARDED) FAIL("Sharded inputs for RoPE must be HEIGHT_SHARDED.");
        if (cs->memory != OFFCARD_TT_HEIGHT_SHARDED) FAIL("cos tensor for RoPE must be HEIGHT_SHARDED.");
        if (ss->memory != OFFCARD_TT_HEIGHT_SHARDED) FAIL("sin tensor for RoPE must be HEIGHT_SHARDED.");
        if (ms->memory != OFFCARD_TT_HEIGHT_SHARDED) FAIL("transformation matrix for RoPE must be HEIGHT_SHARDED.");
        if (cs->rank < 2 || is->dims[1] != cs->dims[1]) FAIL("Cos and Sin must have the same batch size as the input");
        if (cs->shard_h != LB_TILE) FAIL("In decode mode, RoPE only supports n_heads (shard_shape[0]) less than equal to TILE_HEIGHT");
        if (ms->dims[0] != 1 || ms->dims[1] != 1) FAIL("Transformation matrix must have 1st & 2nd dim equal to 1");
        if (ms->shard_h != LB_TILE) FAIL("Transformation matrix must have 3rd dim equal to TILE_HEIGHT");
        if (ms->shard_w != LB_TILE) FAIL("Transformation matrix must have 4th dim equal to TILE_WIDTH");
      }
      for (uint32_t i = 0; i < o->nt; i++)
        if (want_bf16(name, "Tensor", &t[i])) return OFFCARD_TT_EDEVICE;
      if (t[0].s.rank != 4) FAIL("offcard: Input tensor must be rank 4");
      if (o->code == OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA && (t[3].s.dims[2] % LB_TILE || t[3].s.dims[3] != LB_TILE || t[0].s.dims[3] % LB_TILE))
        FAIL("offcard: trans_mat must be [1,1,32k,32] and head_dim a multiple of 32");
      const int64_t *sh = t[0].s.dims;
      if (sh[3] % 2) FAIL("offcard: head_dim %lld must be even", (long long)sh[3]);
      if (o->code == OFFCARD_TT_OP_ROTARY_EMBEDDING_HF && o->i[0] == 0) { /* prefill */
        const lb_spec *cs = &t[1].s;
        if (t[0].s.layout != OFFCARD_TT_TILE) FAIL("Input must be tilized");
        if (cs->layout != OFFCARD_TT_TILE) FAIL("Cos must be tilized");
        if (t[2].s.layout != OFFCARD_TT_TILE) FAIL("Sin must be tilized");
        if (cs->rank != 4 || !same_shape(cs, &t[2].s)) FAIL("Cos and Sin shapes must match");
        if (cs->dims[0] != 1 || cs->dims[3] != sh[3]) FAIL("Cos dims must match input dims");
        if (cs->dims[1] != 1) FAIL("Cos must have batch dim = 1 in prefill mode");
        if (cs->dims[2] < sh[2]) FAIL("Cos seq_len must be >= input seq_len. Input seq_len: %lld, Cos seq_len: %lld.", (long long)sh[2], (long long)cs->dims[2]);
        return 0;
      }
      uint64_t want = (uint64_t)(sh[0] * sh[1] * sh[3]);
      if (lb_volume(&t[1].s) != want || lb_volume(&t[2].s) != want) FAIL("offcard: Cos/Sin must hold %lld users of %lld", (long long)(sh[0] * sh[1]), (long long)sh[3]);
      return rotary_bound(d, o, name);
    }
    case OFFCARD_TT_OP_PAGED_UPDATE_CACHE:
      return validate_uc(d, o, 0);
    case OFFCARD_TT_OP_PAGED_FUSED_UPDATE_CACHE:
      return validate_uc(d, o, 1);
    case OFFCARD_TT_OP_PAGED_FILL_CACHE: {
      const lb_spec *cs = &t[0].s, *is = &t[1].s, *ps = &t[2].s;
      if (cs->layout != OFFCARD_TT_TILE || is->layout != OFFCARD_TT_TILE || cs->rank != 4 || is->rank != 4) FAIL("offcard: cache and input must be rank-4 TILE tensors");
      if (cs->dtype != is->dtype) FAIL("offcard: Input tensor dtype must match cache tensor dtype");
      if (is->memory != OFFCARD_TT_INTERLEAVED || cs->memory != OFFCARD_TT_INTERLEAVED) FAIL("Expect input_tensor to have memory layout INTERLEAVED");
      if (is->dims[0] != 1 || is->dims[1] != cs->dims[1] || lb_padded(is, 3) != lb_padded(cs, 3)) FAIL("offcard: input must be [1, num_heads, seq_len, head_dim] of the cache");
      if (ps->dtype != OFFCARD_TT_INT32 || ps->layout != OFFCARD_TT_ROW_MAJOR || ps->rank != 2 || ps->memory != OFFCARD_TT_INTERLEAVED) FAIL("offcard: page_table must be INT32 ROW_MAJOR interleaved [batch, blocks]");
      if (lb_padded(is, 2) > ps->dims[1] * lb_padded(cs, 2)) FAIL("Input seq_len (%lld) must fit in max_num_blocks_per_seq (%lld) * block_size (%lld)", (long long)lb_padded(is, 2), (long long)ps->dims[1], (long long)lb_padded(cs, 2));
      if (o->i[0] < 0 || o->i[0] >= ps->dims[0]) FAIL("Batch idx must be within the page_table batch size"); /* the fallback, tensor or not */
      if (o->present[3]) {
        const lb_spec *xs = &t[3].s;
        if (xs->rank != 1 || (xs->dtype != OFFCARD_TT_INT32 && xs->dtype != OFFCARD_TT_UINT32) || xs->layout != OFFCARD_TT_ROW_MAJOR || xs->memory != OFFCARD_TT_INTERLEAVED || xs->buffer != OFFCARD_TT_DRAM)
          FAIL("offcard: batch_idx_tensor must be a 1-D int ROW_MAJOR DRAM interleaved tensor");
      }
      if (t[2].aligned % 32) FAIL("page table page size in bytes must be a multiple of 32 due to address alignment");
      return 0;
    }
    case OFFCARD_TT_OP_PAGED_SDPA_DECODE: {
      if (o->nf != 1) return lb_err(OFFCARD_TT_EARG, name, "want k_chunk_size, fp32_dest_acc and scale");
      for (int i = 0; i < 3; i++)
        if (t[i].s.rank != 4) FAIL("offcard: Q must be rank 4, got rank %d", t[i].s.rank);
      /* sdpa_decode.cpp, then sdpa_decode_device_operation.cpp, in order */
      if (o->i[0] < 0 || (o->i[0] > 0 && (o->i[0] & (o->i[0] - 1)))) FAIL("User provided k_chunk_size must be power of 2, got: %lld", (long long)o->i[0]);
      if (o->i[0] % LB_TILE) FAIL("User provided k_chunk_size must be multiple of 32, got: %lld", (long long)o->i[0]);
      for (int i = 0; i < 3; i++)
        if (t[i].s.dtype != OFFCARD_TT_BF16) FAIL("Unsupported data type %s.", dt_name(t[i].s.dtype));
      if (t[1].s.layout != OFFCARD_TT_TILE || t[2].s.layout != OFFCARD_TT_TILE) FAIL("Inputs to SDPA must be tilized except for Q");
      if (t[0].s.memory != OFFCARD_TT_INTERLEAVED && t[0].s.memory != OFFCARD_TT_HEIGHT_SHARDED) FAIL("Q tensor memory layout must be HEIGHT_SHARDED when sharded but got TensorMemoryLayout::WIDTH_SHARDED");
      if (t[0].s.memory == OFFCARD_TT_INTERLEAVED && t[0].s.buffer != OFFCARD_TT_DRAM) FAIL("Q tensor buffer type must be DRAM when not sharded but got BufferType::L1");
      for (int i = 1; i < 3; i++)
        if (t[i].s.buffer != OFFCARD_TT_DRAM) FAIL("Input tensor %d buffer type must be DRAM but got BufferType::L1", i);
      if (o->out[0].s.memory == OFFCARD_TT_WIDTH_SHARDED) FAIL("Output memory config layout must be HEIGHT_SHARDED when sharded but got TensorMemoryLayout::WIDTH_SHARDED");
      if (t[1].s.memory != OFFCARD_TT_INTERLEAVED || t[2].s.memory != OFFCARD_TT_INTERLEAVED) FAIL("offcard: K and V caches must be DRAM interleaved");
      if (o->out[0].s.buffer == OFFCARD_TT_L1 && o->out[0].s.memory == OFFCARD_TT_INTERLEAVED) FAIL("offcard: Output must be HEIGHT_SHARDED or in DRAM");
      const lb_spec *ps = &t[3].s, *cp = &t[4].s;
      if (ps->memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "sharded page tables are not implemented by the loopback");
      const int64_t *qs = t[0].s.dims, *ks = t[1].s.dims, *vs = t[2].s.dims;
      if (cp->dtype != OFFCARD_TT_INT32) FAIL("Expect cur_pos to be INT32, got %s", dt_name(cp->dtype));
      if (cp->layout != OFFCARD_TT_ROW_MAJOR) FAIL("Expect cur_pos to be ROW_MAJOR, got Layout::TILE");
      if (lb_padded(cp, cp->rank - 1) != qs[1]) FAIL("cur_pos must have batch size equal to Q, got %lld and %lld", (long long)lb_padded(cp, cp->rank - 1), (long long)qs[1]);
      if (ps->dtype != OFFCARD_TT_INT32) FAIL("Error: SDPA currently only supports INT32 datatype");
      if (ps->layout != OFFCARD_TT_ROW_MAJOR) FAIL("Page table tensor layout must be ROW_MAJOR but got Layout::TILE");
      if (ps->rank != 2) FAIL("offcard: Page table must be rank 2 [batch, max_num_blocks_per_seq]");
      if (ps->dims[0] != qs[1]) FAIL("Page_table must have batch size equal to Q");
      if (ks[2] != vs[2]) FAIL("K and V must have same block size");
      if (ks[3] != lb_padded(&t[0].s, 3))
        FAIL("paged_scaled_dot_product_attention_decode geometry mismatch: cache has %lld elems/block (kv_heads=%lld, block_size=%lld, head_dim=%lld) but call view is %lld (kv_heads=%lld, block_size=%lld, head_dim=%lld from Q.padded_shape[-1]).",
             (long long)(ks[1] * ks[2] * ks[3]), (long long)ks[1], (long long)ks[2], (long long)ks[3], (long long)(ks[1] * ks[2] * lb_padded(&t[0].s, 3)), (long long)ks[1], (long long)ks[2], (long long)lb_padded(&t[0].s, 3));
      if (ks[2] % LB_TILE) FAIL("effective block_size (%lld) must be a multiple of TILE_HEIGHT (%d)", (long long)ks[2], LB_TILE);
      if (lb_padded(&t[0].s, 3) % LB_TILE) FAIL("Q last dim (%lld) must be a multiple of TILE_WIDTH (%d)", (long long)lb_padded(&t[0].s, 3), LB_TILE);
      if (ks[3] != vs[3] || ks[3] != qs[3]) FAIL("Q, K, V must have same hidden size");
      if (qs[0] != 1) FAIL("Q tensor batch size must be 1 for decode mode but got %lld", (long long)qs[0]);
      if (ks[1] != vs[1]) FAIL("Flash decode expects K and V to have same number of heads, but got %lld and %lld", (long long)ks[1], (long long)vs[1]);
      if (ks[1] > 1 && qs[2] % ks[1]) FAIL("GQA expects Q to have a multiple of K heads, but got %lld and %lld", (long long)qs[2], (long long)ks[1]);
      if (ks[0] != vs[0]) FAIL("offcard: K and V caches must have the same number of blocks");
      if (o->out[0].s.dtype != OFFCARD_TT_BF16 || o->out[0].s.layout != OFFCARD_TT_TILE) FAIL("offcard: Output must be BFLOAT16 TILE");
      if (!same_shape(&o->out[0].s, &t[0].s)) FAIL("offcard: Output shape must equal Q shape");
      return 0;
    }
    case OFFCARD_TT_OP_NLP_CONCAT_HEADS_DECODE: {
      if (t[0].s.rank != 4) FAIL("offcard: Input tensor must be rank 4, got rank %d", t[0].s.rank);
      const int64_t *sh = t[0].s.dims;
      /* nlp_concat_heads_decode_device_operation.cpp, in its order */
      if (t[0].s.dtype != OFFCARD_TT_BF16 && t[0].s.dtype != OFFCARD_TT_FP32) FAIL("Unsupported data format");
      if (t[0].s.layout != OFFCARD_TT_TILE) FAIL("Input tensor layout must be TILE but got Layout::ROW_MAJOR");
      if (sh[0] != 1) FAIL("seqlen=1 for decode");
      if (sh[1] > 32) FAIL("currently only support less than 32 users");
      if (lb_padded(&t[0].s, 2) % 32) FAIL("padded heads must be a multiple of TILE_HEIGHT (32), got %lld", (long long)lb_padded(&t[0].s, 2));
      if (lb_padded(&t[0].s, 2) < o->i[0]) FAIL("head_dim must be multiple of TILE_WIDTH");
      if (t[0].s.memory == OFFCARD_TT_INTERLEAVED) FAIL("Input tensor must be sharded");
      if (t[0].s.memory != OFFCARD_TT_HEIGHT_SHARDED) FAIL("Input tensor memory layout must be HEIGHT_SHARDED but got TensorMemoryLayout::WIDTH_SHARDED");
      /* shard width == padded width (:50) holds for every spec the ABI admits */
      if (t[0].s.shard_h != lb_padded(&t[0].s, 2))
        FAIL("Shard spec shape[0] (%lld) must match input tensor padded shape[-2] (%lld)", (long long)t[0].s.shard_h, (long long)lb_padded(&t[0].s, 2));
      if (t[0].s.shard_cores != sh[1]) FAIL("Input core grid num_cores must be equal to num users");
      /* ttnn::prim::nlp_concat_heads_decode (:133-140): a grid that is not
       * one range from core (0,0) takes the sub-core-grid path, which the
       * ABI cannot give sub-core grids for (:63) */
      if (t[0].s.shard_first != 0 || (t[0].s.shard_cores > lb_grid_w(d, &t[0].s) && t[0].s.shard_cores % lb_grid_w(d, &t[0].s)))
        FAIL("Subcoregrids must be provided if on_subcoregrids is true");
      if (want_bf16(name, "Input tensor", &t[0]) || want_bf16(name, "Output tensor", &t[1])) return OFFCARD_TT_EDEVICE;
      if (t[1].s.memory == OFFCARD_TT_INTERLEAVED) FAIL("bad optional access"); /* the factory's output shard_spec().value() */
      if (o->i[0] <= 0) FAIL("offcard: num_heads %lld out of range", (long long)o->i[0]);
      if ((int64_t)rows_of(&t[1].s) != sh[0] * sh[1] || last(&t[1].s) != o->i[0] * sh[3]) FAIL("offcard: Output shape, want [1, 1, %lld, %lld]", (long long)(sh[0] * sh[1]), (long long)(o->i[0] * sh[3]));
      return 0;
    }
    case OFFCARD_TT_OP_ADD:
    case OFFCARD_TT_OP_SILU_MUL:
      /* eltwise/binary/binary.cpp:531-535: the ABI always passes an output */
      if (t[0].s.layout == OFFCARD_TT_ROW_MAJOR && t[1].s.layout == OFFCARD_TT_ROW_MAJOR)
        FAIL("Optional output tensor with Row Major input is not supported right now for Elementwise operations");
      for (int i = 0; i < 3; i++)
        if (want_bf16(name, "Tensor", &t[i])) return OFFCARD_TT_EDEVICE;
      for (int i = 1; i < 3; i++)
        if (!same_shape(&t[0].s, &t[i].s) || t[0].s.layout != t[i].s.layout) FAIL("offcard: Tensors must have the same shape and layout");
      return 0;
    case OFFCARD_TT_OP_ARGMAX:
      /* argmax_device_operation.cpp (a preallocated output), in its order */
      if (t[0].s.memory != OFFCARD_TT_INTERLEAVED) FAIL("Only INTERLEAVED memory layout is supported for inputs, got %s", ml_name(t[0].s.memory));
      if (want_bf16(name, "Input tensor", &t[0])) return OFFCARD_TT_EDEVICE;
      if (t[1].s.dtype != OFFCARD_TT_UINT32) FAIL("Only UINT32 is supported for outputs, got %s", dt_name(t[1].s.dtype));
      if (t[1].s.memory != OFFCARD_TT_INTERLEAVED) FAIL("Only INTERLEAVED memory layout is supported for outputs, got %s", ml_name(t[1].s.memory));
      if (t[1].s.layout != OFFCARD_TT_ROW_MAJOR) FAIL("Output tensor must have ROW_MAJOR layout, got Layout::TILE");
      if (lb_volume(&t[1].s) < rows_of(&t[0].s)) FAIL("offcard: Output tensor holds fewer than %llu indices", (unsigned long long)rows_of(&t[0].s));
      return 0;
    case OFFCARD_TT_OP_TO_MEMORY_CONFIG:
      return 0;
    case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS: {
      const lb_spec *is = &t[0].s;
      int64_t nh = o->i[0], nkv = o->i[1] ? o->i[1] : o->i[0];
      if (nh <= 0 || nkv <= 0 || is->rank != 4) FAIL("offcard: num_heads must be positive and the input rank 4");
      if (lb_padded(is, 3) % (nh + 2 * nkv)) FAIL("Unsupported input shape");
      if (is->dtype != OFFCARD_TT_BF16 && is->dtype != OFFCARD_TT_FP32) FAIL("Unsupported data format");
      if (is->layout != OFFCARD_TT_TILE) FAIL("Input tensor layout must be TILE but got Layout::ROW_MAJOR");
      if (is->dims[1] != 1) FAIL("Unsupported input sequence length %lld is not equal to 1", (long long)is->dims[1]);
      if (is->memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "sharded inputs are not implemented by the loopback");
      int64_t dh = lb_padded(is, 3) / (nh + 2 * nkv);
      for (int i = 0; i < 3; i++) {
        const lb_spec *os = &o->out[i].s;
        if (os->memory != OFFCARD_TT_INTERLEAVED) FAIL("Output memory config layout must be INTERLEAVED but got %s", ml_name(os->memory));
        int64_t heads = i == 0 ? nh : nkv, rows = is->dims[2], cols = dh;
        if (i == 1 && o->i[2]) rows = dh, cols = is->dims[2]; /* K transposed: [B, KV, D, S] */
        if (os->rank != 4 || os->dims[0] != is->dims[0] || os->dims[1] != heads || os->dims[2] != rows || os->dims[3] != cols || os->dtype != is->dtype)
          FAIL("offcard: output spec %d must be [%lld, %lld, %lld, %lld] in the input's dtype", i, (long long)is->dims[0], (long long)heads, (long long)rows, (long long)cols);
      }
      return 0;
    }
    case OFFCARD_TT_OP_NLP_CONCAT_HEADS: {
      const lb_spec *is = &t[0].s, *os = &o->out[0].s;
      if (is->rank != 4) FAIL("offcard: Input tensor must be rank 4");
      if (is->dtype != OFFCARD_TT_BF16 && is->dtype != OFFCARD_TT_FP32) FAIL("Unsupported data format");
      if (is->layout != OFFCARD_TT_TILE) FAIL("Input tensor layout must be TILE but got Layout::ROW_MAJOR");
      if (is->memory != OFFCARD_TT_INTERLEAVED) return lb_err(OFFCARD_TT_EARG, name, "sharded inputs are not implemented by the loopback");
      if (os->memory != OFFCARD_TT_INTERLEAVED) FAIL("Output memory config layout must be INTERLEAVED but got %s", ml_name(os->memory));
      if (os->rank != 4 || os->dims[0] != is->dims[0] || os->dims[1] != 1 || os->dims[2] != is->dims[2] || os->dims[3] != is->dims[1] * is->dims[3] || os->dtype != is->dtype)
        FAIL("offcard: output spec must be [%lld, 1, %lld, %lld]", (long long)is->dims[0], (long long)is->dims[2], (long long)(is->dims[1] * is->dims[3]));
      return 0;
    }
    case OFFCARD_TT_OP_SDPA: {
      if (o->nf != 1) return lb_err(OFFCARD_TT_EARG, name, "want one float attribute (scale)");
      for (int i = 0; i < 3; i++) {
        if (t[i].s.layout != OFFCARD_TT_TILE) FAIL("Inputs to SDPA must be tilized");
        if (t[i].s.dtype != OFFCARD_TT_BF16) FAIL("Data type of input tensor must be BFLOAT16, BFLOAT8_B, or BFLOAT4_B and is %s", dt_name(t[i].s.dtype));
        if (t[i].s.memory != OFFCARD_TT_INTERLEAVED) FAIL("Operands to SDPA need to be DRAM/L1 interleaved");
        if (t[i].s.rank != 4) FAIL("offcard: Q, K and V must be rank 4, got rank %d", t[i].s.rank);
      }
      const int64_t *qs = t[0].s.dims, *ks = t[1].s.dims, *vs = t[2].s.dims;
      if (o->i[0] && qs[2] != ks[2]) FAIL("Causal SDPA requires Q and K to have the same sequence length. Got Q: %lld, K: %lld", (long long)qs[2], (long long)ks[2]);
      if (ks[0] != qs[0] || vs[0] != qs[0]) FAIL("K and V batch must match. Got K: %lld, V: %lld", (long long)ks[0], (long long)vs[0]);
      if (vs[1] != ks[1]) FAIL("K and V num_heads must match. Got K: %lld, V: %lld", (long long)ks[1], (long long)vs[1]);
      if (vs[2] != ks[2]) FAIL("K and V sequence length must match. Got K: %lld, V: %lld", (long long)ks[2], (long long)vs[2]);
      if (ks[3] != qs[3] || vs[3] != qs[3]) FAIL("K and V hidden dim must match. Got K: %lld, V: %lld", (long long)ks[3], (long long)vs[3]);
      if (qs[1] < ks[1] || qs[1] % ks[1]) FAIL("Q num_heads must be >= K num_heads and divisible by K num_heads. Got Q: %lld, K: %lld", (long long)qs[1], (long long)ks[1]);
      if ((o->i[1] || o->i[2]) && (o->i[1] % LB_TILE || o->i[1] < 0)) FAIL("q_chunk_size must be divisible by TILE_SIZE. Got q_chunk_size: %lld, TILE_SIZE: %d", (long long)o->i[1], LB_TILE);
      if ((o->i[1] || o->i[2]) && (o->i[2] % LB_TILE || o->i[2] < 0)) FAIL("k_chunk_size must be divisible by TILE_SIZE. Got k_chunk_size: %lld, TILE_SIZE: %d", (long long)o->i[2], LB_TILE);
      if (!o->i[1] && !o->i[2] && o->i[4]) FAIL("offcard: exp_approx_mode needs a program config: set q_chunk_size and k_chunk_size");
      if (qs[3] % LB_TILE) FAIL("Padding is not supported on the head_dim dimension");
      if (!same_shape(&o->out[0].s, &t[0].s) || o->out[0].s.dtype != t[0].s.dtype || o->out[0].s.layout != OFFCARD_TT_TILE) FAIL("offcard: Output spec must be Q's shape and dtype, TILE");
      return 0;
    }
    case OFFCARD_TT_OP_COPY:
      if (!same_shape(&t[0].s, &t[1].s) || t[0].s.dtype != t[1].s.dtype) FAIL("offcard: copy needs the same shape and dtype");
      return 0;
    case OFFCARD_TT_OP_CHUNKED_SDPA:
      return validate_chunked(d, o);
    case OFFCARD_TT_OP_FILL_CACHE:
      return validate_fill_cache(o);
    case OFFCARD_TT_OP_SLICE:
      return validate_slice(o);
    case OFFCARD_TT_OP_PLUS_ONE:
      if (t[0].s.dtype != OFFCARD_TT_INT32 && t[0].s.dtype != OFFCARD_TT_UINT32) FAIL("Only INT32 and UINT32 is supported for inputs!");
      if (t[0].s.layout != OFFCARD_TT_ROW_MAJOR) FAIL("Only ROW_MAJOR layout is supported for inputs!");
      if (t[0].s.rank > 4) FAIL("must have 1 to 4 dimensions for input tensor");
      return 0;
  }
  return lb_err(OFFCARD_TT_EARG, name, "unknown op");
}

/* ---- execution ---- */

/* page-table CB: one stick per core at a fixed place in L1 */
#define PT_CB_OFFSET 0x4000
#define IDX_CB_OFFSET 0x2000

static uint32_t le32(const uint8_t *b) { return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }

static uint64_t align_to(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

/* pt_entry copies user's page-table stick (stick bytes; 0: the row,
 * padded_shape[-1] * 4) into the core's CB and loads entry
 * virt from L1 with 32-bit pointer arithmetic and no bound check. */
static int pt_entry(offcard_tt_device *d, const char *op, const lb_tensor *pt, int core, uint32_t user, uint32_t virt, uint64_t stick, uint32_t *out) {
  if (!stick) stick = (uint64_t)lb_padded(&pt->s, 1) * 4;
  uint8_t *buf = malloc(stick);
  if (!buf) return lb_err(OFFCARD_TT_EINTERNAL, op, "out of host memory");
  uint32_t nb = (uint32_t)d->nbanks;
  uint64_t slot = align_to(stick, d->dram_align);
  uint64_t cb = d->l1_base + PT_CB_OFFSET;
  int rc = lb_io(d, op, 0, (int)(user % nb), (uint32_t)(pt->addr + (user / nb) * slot), buf, stick, 0);
  if (!rc) rc = lb_io(d, op, 1, core, cb, buf, stick, 1);
  free(buf);
  if (rc) return rc;
  uint8_t w[4];
  rc = lb_io(d, op, 1, core, (uint32_t)(cb + 4ull * virt), w, 4, 0);
  if (!rc) *out = le32(w);
  return rc;
}

static float get_e(const uint8_t *b, int i, int dt) {
  if (dt == OFFCARD_TT_BF16) {
    uint16_t v;
    memcpy(&v, b + 2 * i, 2);
    return lb_bf16_to_f32(v);
  }
  float f;
  memcpy(&f, b + 4 * i, 4);
  return f;
}

static void set_e(uint8_t *b, int i, int dt, float v) {
  if (dt == OFFCARD_TT_BF16) {
    uint16_t x = lb_f32_to_bf16(v);
    memcpy(b + 2 * i, &x, 2);
  } else {
    memcpy(b + 4 * i, &v, 4);
  }
}

static float round_to(float v, int bf) { return bf ? lb_bf16_to_f32(lb_f32_to_bf16(v)) : v; }

static int exec_uc(offcard_tt_device *d, const lb_op *o, int fused) {
  const char *name = lb_op_name(o->code);
  int np = fused ? 2 : 1;
  const lb_tensor *idx = o->present[2 * np] ? &o->t[2 * np] : NULL;
  const lb_tensor *pt = o->present[2 * np + 1] ? &o->t[2 * np + 1] : NULL;
  const lb_spec *cs = &o->t[0].s, *is = &o->t[1].s;
  uint32_t wt = (uint32_t)(lb_padded(is, 3) / LB_TILE), heads = (uint32_t)lb_padded(cs, 1), bs = (uint32_t)lb_padded(cs, 2);
  uint32_t st = bs / LB_TILE, cores = (uint32_t)lb_padded(is, 1);
  uint32_t batch_tiles = o->i[0] ? 0 : (uint32_t)(o->t[0].num_pages / (uint64_t)lb_padded(cs, 0));
  int cdt = cs->dtype, idt = is->dtype, fp32 = o->i[2] != 0;
  int lossless = cdt == idt && (fp32 || cdt == OFFCARD_TT_BF16);
  uint32_t tileB = LB_TILE * LB_TILE * lb_esize(cdt), inTileB = LB_TILE * LB_TILE * lb_esize(idt);
  uint32_t tileAl = (uint32_t)align_to(tileB, d->dram_align), nb = (uint32_t)d->nbanks;
  uint8_t *tiles = malloc((size_t)wt * tileB), *in_row = malloc((size_t)wt * inTileB);
  uint8_t *stick = idx ? malloc(idx->aligned) : NULL;
  int rc = 0;
  if (!tiles || !in_row || (idx && !stick)) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  for (int part = 0; part < np && !rc; part++) {
    const lb_tensor *cache = &o->t[2 * part], *in = &o->t[2 * part + 1];
    for (uint32_t user = 0; user < cores && !rc; user++) {
      int core = (int)lb_core(d, &in->s, user);
      uint32_t cache_id, row;
      if (idx) {
        uint8_t w[4];
        if ((rc = lb_io(d, name, 0, 0, idx->addr, stick, idx->aligned, 0))) break;
        if ((rc = lb_io(d, name, 1, core, d->l1_base + IDX_CB_OFFSET, stick, idx->aligned, 1))) break;
        if ((rc = lb_io(d, name, 1, core, d->l1_base + IDX_CB_OFFSET + 4ull * user, w, 4, 0))) break;
        uint32_t raw = le32(w);
        if (raw == 0xFFFFFFFFu) continue;
        if (pt) {
          uint32_t phys;
          if ((rc = pt_entry(d, name, pt, core, user, raw / bs, 0, &phys))) break;
          cache_id = phys * heads * st * wt + ((raw % bs) / LB_TILE) * wt;
        } else {
          cache_id = user * batch_tiles + (raw / LB_TILE) * wt;
        }
        row = raw % LB_TILE;
      } else {
        uint32_t u = (uint32_t)o->i[4 + user];
        cache_id = user * batch_tiles + (u / LB_TILE) * wt;
        row = u % LB_TILE;
      }
      if ((rc = lb_io(d, name, 1, core, in->addr, in_row, (uint64_t)wt * inTileB, 0))) break;
      for (uint32_t h = 0; h < heads && !rc; h++) {
        for (uint32_t w = 0; w < wt && !rc; w++) {
          uint32_t id = cache_id + w;
          rc = lb_io(d, name, 0, (int)(id % nb), (uint32_t)(cache->addr + (id / nb) * tileAl), tiles + w * tileB, tileB, 0);
        }
        for (uint32_t w = 0; w < wt && !rc; w++) {
          uint8_t *ct = tiles + w * tileB, *it = in_row + w * inTileB;
          if (!lossless)
            for (int i = 0; i < LB_TILE * LB_TILE; i++) set_e(ct, i, cdt, round_to(get_e(ct, i, cdt), !fp32));
          for (int c = 0; c < LB_TILE; c++) {
            int ci = lb_tile_elem((int)row, c), ii = lb_tile_elem((int)(h % LB_TILE), c);
            if (h >= LB_TILE) ii = lb_tile_elem(LB_TILE - 1, c); /* heads beyond one tile row are not modelled */
            if (lossless)
              memcpy(ct + ci * lb_esize(cdt), it + ii * lb_esize(idt), lb_esize(cdt));
            else
              set_e(ct, ci, cdt, round_to(get_e(it, ii, idt), !fp32));
          }
        }
        for (uint32_t w = 0; w < wt && !rc; w++) {
          uint32_t id = cache_id + w;
          rc = lb_io(d, name, 0, (int)(id % nb), (uint32_t)(cache->addr + (id / nb) * tileAl), tiles + w * tileB, tileB, 1);
        }
        cache_id += wt * st;
      }
    }
  }
  free(tiles), free(in_row), free(stick);
  return rc;
}

static int exec_fill(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *cache = &o->t[0], *in = &o->t[1], *pt = &o->t[2];
  uint32_t batch = (uint32_t)o->i[0], nb = (uint32_t)d->nbanks;
  int rc = 0;
  if (o->present[3]) {
    uint32_t *w = read_u(d, name, &o->t[3], &rc);
    if (!w) return rc;
    batch = w[0];
    free(w);
  }
  uint8_t *row = malloc(pt->aligned), *tile = malloc(cache->page_size);
  if (!row || !tile) {
    free(row), free(tile);
    return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  }
  rc = lb_io(d, name, 0, (int)(batch % nb), (uint32_t)(pt->addr + (batch / nb) * pt->aligned), row, pt->aligned, 0);
  uint32_t heads = (uint32_t)lb_padded(&cache->s, 1), bst = (uint32_t)(lb_padded(&cache->s, 2) / LB_TILE);
  uint32_t wt = (uint32_t)(lb_padded(&cache->s, 3) / LB_TILE), st = (uint32_t)(lb_padded(&in->s, 2) / LB_TILE);
  uint32_t nent = (uint32_t)(pt->aligned / 4), tileAl = (uint32_t)cache->aligned;
  for (uint32_t h = 0; h < heads && !rc; h++)
    for (uint32_t t = 0; t < st && !rc; t++) {
      uint32_t vb = t / bst;
      if (vb >= nent) {
        rc = lb_err(OFFCARD_TT_EDEVICE, name, "offcard: page-table entry %u lies past the %u B page read", vb, 4 * nent);
        break;
      }
      uint32_t phys = le32(row + 4 * vb);
      if (phys == 0xFFFFFFFFu) continue;
      for (uint32_t w = 0; w < wt && !rc; w++) {
        if ((rc = lb_page_io(d, name, in, h * st * wt + t * wt + w, tile, 0))) break;
        uint32_t id = phys * heads * bst * wt + h * bst * wt + (t % bst) * wt + w;
        rc = lb_io(d, name, 0, (int)(id % nb), (uint32_t)(cache->addr + (id / nb) * tileAl), tile, cache->page_size, 1);
      }
    }
  free(row), free(tile);
  return rc;
}

static int exec_sdpa(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *q = &o->t[0], *k = &o->t[1], *v = &o->t[2], *pt = &o->t[3], *cp = &o->t[4], *out = &o->out[0];
  int rc = 0;
  uint32_t batch = (uint32_t)pt->s.dims[0];
  uint32_t *pos = read_u(d, name, cp, &rc);
  if (!pos) return rc;
  float *qv = read_f(d, name, q, &rc);
  float *ov = qv ? read_f(d, name, out, &rc) : NULL;
  int heads = (int)q->s.dims[2], kvh = (int)k->s.dims[1], dh = (int)q->s.dims[3];
  uint32_t bs = (uint32_t)k->s.dims[2], bst = bs / LB_TILE, dht = (uint32_t)dh / LB_TILE, nb = (uint32_t)d->nbanks;
  float scale = o->f[0] != 0 ? o->f[0] : 1.0f / sqrtf((float)dh);
  uint8_t *tile = malloc(k->page_size);
  float *kb = NULL, *vb = NULL, *pr = NULL;
  if (!tile && !rc) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  int active = 0;
  for (uint32_t b = 0; b < batch && !rc; b++) {
    uint32_t cur = pos[b];
    if (cur == 0xFFFFFFFFu) continue;
    active++;
    if (cur >= (1u << 20)) {
      rc = lb_err(OFFCARD_TT_EDEVICE, name, "user %u has cur_pos %d; the loopback stops at %d positions", b, (int32_t)cur, 1 << 20);
      break;
    }
    int core = (int)(b % (uint32_t)d->ncores);
    uint32_t used = cur / LB_TILE + 1, n = cur + 1;
    free(kb), free(vb), free(pr);
    kb = malloc((size_t)used * LB_TILE * dh * sizeof *kb);
    vb = malloc((size_t)used * LB_TILE * dh * sizeof *vb);
    pr = malloc((size_t)n * sizeof *pr);
    if (!kb || !vb || !pr) {
      rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
      break;
    }
    for (int h = 0; h < kvh && !rc; h++) {
      for (uint32_t r = 0; r < used && !rc; r++) {
        uint32_t phys;
        if ((rc = pt_entry(d, name, pt, core, b, r / bst, 0, &phys))) break;
        for (uint32_t c = 0; c < dht && !rc; c++) {
          uint32_t id = phys * (uint32_t)kvh * bst * dht + (uint32_t)h * bst * dht + (r % bst) * dht + c;
          for (int which = 0; which < 2 && !rc; which++) {
            const lb_tensor *cache = which ? v : k;
            float *into = which ? vb : kb;
            if ((rc = lb_io(d, name, 0, (int)(id % nb), (uint32_t)(cache->addr + (id / nb) * cache->aligned), tile, cache->page_size, 0))) break;
            for (int rr = 0; rr < LB_TILE; rr++)
              for (int cc = 0; cc < LB_TILE; cc++) {
                uint16_t x;
                memcpy(&x, tile + 2 * lb_tile_elem(rr, cc), 2);
                into[(size_t)(r * LB_TILE + rr) * dh + c * LB_TILE + cc] = lb_bf16_to_f32(x);
              }
          }
        }
      }
      if (rc) break;
      int group = heads / kvh;
      for (int g = 0; g < group; g++) {
        int qh = h * group + g;
        const float *qr = qv + ((size_t)b * heads + qh) * dh;
        float mx = -INFINITY, sum = 0;
        for (uint32_t p = 0; p < n; p++) {
          float s = 0;
          for (int i = 0; i < dh; i++) s += qr[i] * kb[(size_t)p * dh + i];
          pr[p] = s * scale;
          if (pr[p] > mx) mx = pr[p];
        }
        for (uint32_t p = 0; p < n; p++) sum += pr[p] = expf(pr[p] - mx);
        float *orow = ov + ((size_t)b * heads + qh) * dh;
        for (int i = 0; i < dh; i++) {
          float acc = 0;
          for (uint32_t p = 0; p < n; p++) acc += pr[p] * vb[(size_t)p * dh + i];
          orow[i] = acc / sum;
        }
      }
    }
  }
  if (!rc && active) rc = write_f(d, name, out, ov);
  free(pos), free(qv), free(ov), free(tile), free(kb), free(vb), free(pr);
  return rc;
}

/* scaled_dot_product_attention: float loops; query head h reads kv head
 * h / (heads / kv_heads); causal row i attends keys 0..i. */
static int exec_sdpa_prefill(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  int rc = 0;
  float *q = read_f(d, name, &o->t[0], &rc);
  float *k = q ? read_f(d, name, &o->t[1], &rc) : NULL;
  float *v = k ? read_f(d, name, &o->t[2], &rc) : NULL;
  const int64_t *qs = o->t[0].s.dims, *ks = o->t[1].s.dims;
  int64_t bsz = qs[0], heads = qs[1], sq = qs[2], dh = qs[3], kvh = ks[1], sk = ks[2];
  float *out = v ? malloc((size_t)(bsz * heads * sq * dh) * sizeof *out + 4) : NULL;
  float *pr = v ? malloc((size_t)sk * sizeof *pr + 4) : NULL;
  if (v && (!out || !pr)) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  float scale = o->f[0] != 0.0f ? o->f[0] : 1.0f / sqrtf((float)dh); /* ttnn's default */
  for (int64_t b = 0; b < bsz && !rc; b++)
    for (int64_t h = 0; h < heads; h++) {
      const float *kb = k + (size_t)((b * kvh + h / (heads / kvh)) * sk * dh), *vb = v + (size_t)((b * kvh + h / (heads / kvh)) * sk * dh);
      for (int64_t i = 0; i < sq; i++) {
        const float *qr = q + (size_t)(((b * heads + h) * sq + i) * dh);
        int64_t n = o->i[0] ? i + 1 : sk;
        float mx = -INFINITY, sum = 0;
        for (int64_t p = 0; p < n; p++) {
          float s = 0;
          for (int64_t e = 0; e < dh; e++) s += qr[e] * kb[p * dh + e];
          pr[p] = s * scale;
          if (pr[p] > mx) mx = pr[p];
        }
        for (int64_t p = 0; p < n; p++) sum += pr[p] = expf(pr[p] - mx);
        float *orow = out + (size_t)(((b * heads + h) * sq + i) * dh);
        for (int64_t e = 0; e < dh; e++) {
          float acc = 0;
          for (int64_t p = 0; p < n; p++) acc += pr[p] * vb[p * dh + e];
          orow[e] = acc / sum;
        }
      }
    }
  if (!rc) rc = write_f(d, name, &o->out[0], out);
  free(q), free(k), free(v), free(out), free(pr);
  return rc;
}

/* chunked_scaled_dot_product_attention, as its kernels walk it
 * (ttnn/cpp/ttnn/operations/transformer/sdpa/device/kernels/dataflow/
 * reader_interleaved.cpp:239-436 at 622c6fb9): the chunk's first query row
 * sits at position (chunk_start / q_chunk_size) * q_chunk_size (the
 * chunked_q_chunk_offset; the flexible overload reads chunk_start from the
 * tensor at run time); row i attends keys 0..that+i (causal). Key tile row
 * r comes from block page_table[b][r / block_size_t] (the row's stick
 * copied into L1 and indexed without a bound check,
 * transformer/sdpa/device/kernels/dataflow/dataflow_common.hpp:54-92), up to the reader's bound valid_Skt_bound;
 * tile rows at or past it are zero-filled (read_paged_chunk_with_padding),
 * so they score 0 and add nothing to the sum but their weight; rows at or
 * past Skt (the padded K extent) are never visited. Float loops, rounded
 * to bf16 once, as the other compute ops. */
static int exec_chunked(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *q = &o->t[0], *k = &o->t[1], *v = &o->t[2], *pt = &o->t[3];
  int flex = o->present[4], rc = 0;
  const int64_t *qs = q->s.dims;
  uint32_t B = (uint32_t)qs[0], H = (uint32_t)qs[1], Sq = (uint32_t)qs[2], D = (uint32_t)qs[3];
  uint32_t KVH = (uint32_t)k->s.dims[1], bs = (uint32_t)k->s.dims[2], bst = bs / LB_TILE, Dt = D / LB_TILE, nb = (uint32_t)d->nbanks;
  uint32_t qcs = o->i[1] ? (uint32_t)o->i[1] : 32, kcs = o->i[2] ? (uint32_t)o->i[2] : 32;
  uint32_t start = (uint32_t)o->i[0];
  if (flex) {
    uint32_t *w = read_u(d, name, &o->t[4], &rc);
    if (!w) return rc;
    start = w[0];
    free(w);
  }
  uint32_t W = (uint32_t)lb_padded(&pt->s, 1);
  uint64_t stick = flex ? (uint64_t)W * 4 : pt->aligned;
  uint64_t sk = flex ? (uint64_t)Sq + (uint64_t)W * bs : (uint64_t)start + Sq; /* sdpa_program_factory.cpp:216 */
  uint64_t skt = (sk + kcs - 1) / kcs * kcs / LB_TILE, valid_skt = (sk + LB_TILE - 1) / LB_TILE;
  uint64_t off_t = start / qcs * (qcs / LB_TILE), valid_sqt = (Sq + LB_TILE - 1) / LB_TILE;
  uint64_t bound = flex ? (off_t + valid_sqt < valid_skt ? off_t + valid_sqt : valid_skt) : valid_skt + off_t;
  uint64_t first = off_t * LB_TILE, npos = first + Sq; /* positions 0..npos-1 */
  if (npos > skt * LB_TILE) npos = skt * LB_TILE;
  if (npos > (1u << 20)) return lb_err(OFFCARD_TT_EDEVICE, name, "offcard: the chunk starts at position %u; the loopback stops at %d positions", start, 1 << 20);
  float *qv = read_f(d, name, q, &rc);
  float *ov = qv ? calloc((size_t)B * H * Sq * D + 1, sizeof *ov) : NULL;
  float *kb = qv ? malloc((npos * D + 1) * sizeof *kb) : NULL, *vb = qv ? malloc((npos * D + 1) * sizeof *vb) : NULL;
  float *pr = qv ? malloc((npos + 1) * sizeof *pr) : NULL;
  uint8_t *tile = malloc(k->page_size);
  if (qv && (!ov || !kb || !vb || !pr || !tile)) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  float scale = o->f[0] != 0 ? o->f[0] : 1.0f / sqrtf((float)lb_padded(&q->s, 3));
  for (uint32_t b = 0; b < B && !rc; b++) {
    int core = (int)(b % (uint32_t)d->ncores);
    for (uint32_t h = 0; h < KVH && !rc; h++) {
      for (uint64_t r = 0; r * LB_TILE < npos && !rc; r++) {
        if (r >= bound) { /* zero padding */
          for (uint64_t p = r * LB_TILE; p < (r + 1) * LB_TILE && p < npos; p++)
            for (uint32_t e = 0; e < D; e++) kb[p * D + e] = vb[p * D + e] = 0;
          continue;
        }
        uint32_t phys;
        if ((rc = pt_entry(d, name, pt, core, b, (uint32_t)(r / bst), stick, &phys))) break;
        for (uint32_t c = 0; c < Dt && !rc; c++) {
          uint32_t id = phys * KVH * bst * Dt + h * bst * Dt + (uint32_t)(r % bst) * Dt + c;
          for (int which = 0; which < 2 && !rc; which++) {
            const lb_tensor *cache = which ? v : k;
            float *into = which ? vb : kb;
            if ((rc = lb_io(d, name, cache->s.buffer == OFFCARD_TT_L1, (int)(id % nb), cache->addr + (uint64_t)(id / nb) * cache->aligned, tile, cache->page_size, 0))) break;
            for (int rr = 0; rr < LB_TILE; rr++) {
              uint64_t p = r * LB_TILE + (uint64_t)rr;
              if (p >= npos) break;
              for (int cc = 0; cc < LB_TILE; cc++) {
                uint16_t x;
                memcpy(&x, tile + 2 * lb_tile_elem(rr, cc), 2);
                into[p * D + c * LB_TILE + (uint32_t)cc] = lb_bf16_to_f32(x);
              }
            }
          }
        }
      }
      if (rc) break;
      uint32_t group = H / KVH;
      for (uint32_t g = 0; g < group; g++) {
        uint32_t qh = h * group + g;
        for (uint32_t i = 0; i < Sq; i++) {
          uint64_t n = first + i + 1 < npos ? first + i + 1 : npos; /* causal: keys 0..first+i */
          const float *qr = qv + (((size_t)b * H + qh) * Sq + i) * D;
          float mx = -INFINITY, sum = 0;
          for (uint64_t p = 0; p < n; p++) {
            float sc = 0;
            for (uint32_t e = 0; e < D; e++) sc += qr[e] * kb[p * D + e];
            pr[p] = sc * scale;
            if (pr[p] > mx) mx = pr[p];
          }
          for (uint64_t p = 0; p < n; p++) sum += pr[p] = expf(pr[p] - mx);
          float *orow = ov + (((size_t)b * H + qh) * Sq + i) * D;
          for (uint32_t e = 0; e < D; e++) {
            float acc = 0;
            for (uint64_t p = 0; p < n; p++) acc += pr[p] * vb[p * D + e];
            orow[e] = n ? acc / sum : 0;
          }
        }
      }
    }
  }
  if (!rc) rc = write_f(d, name, &o->out[0], ov);
  free(qv), free(ov), free(kb), free(vb), free(pr), free(tile);
  return rc;
}

/* fill_cache, as FillCacheMultiCoreProgramFactory splits it
 * (ttnn/cpp/ttnn/operations/kv_cache/device/
 * fill_cache_multi_core_program_factory.cpp:38-180 at 622c6fb9): the
 * input's heads * seq/32 tile rows go to the cores as split_work_to_cores
 * deals them (tt_metal/common/work_split.cpp:337: the first units % cores
 * cores one more), or one shard per core for a sharded input; each core
 * writes its rows' tiles to consecutive cache tiles from its first row's
 * place, so rows a core takes past a head's last input row land in the
 * same head's next cache rows, not in the next head (the factory's TODO:
 * "assume that work doesn't spill over to next head"). */
static int exec_fill_cache(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *cache = &o->t[0], *in = &o->t[1];
  uint32_t bi = (uint32_t)o->i[0], ui = (uint32_t)o->i[1];
  uint64_t wt = (uint64_t)lb_padded(&cache->s, 3) / LB_TILE, in_ht = (uint64_t)lb_padded(&in->s, 2) / LB_TILE;
  uint64_t cache_htwt = (uint64_t)lb_padded(&cache->s, 2) * wt / LB_TILE, cache_chtwt = (uint64_t)lb_padded(&cache->s, 1) * cache_htwt;
  uint64_t start_idx = bi * cache_chtwt + ui / LB_TILE * wt;
  uint64_t units = (uint64_t)lb_padded(&in->s, 1) * in_ht, cores, per, more;
  if (in->s.memory != OFFCARD_TT_INTERLEAVED) {
    cores = (uint64_t)in->s.shard_cores, per = (uint64_t)in->s.shard_h / LB_TILE, more = 0;
  } else {
    uint64_t grid = (uint64_t)d->ncores;
    cores = units < grid ? units : grid, per = units / cores, more = units % cores;
  }
  uint8_t *tile = malloc(in->page_size);
  if (!tile) return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  int rc = 0;
  for (uint64_t c = 0, done = 0; c < cores && !rc && done < units; c++) {
    uint64_t n = per + (c < more);
    uint64_t dst = start_idx + done / in_ht * cache_htwt + done % in_ht * wt;
    for (uint64_t j = 0; j < n * wt && !rc; j++) {
      if ((rc = lb_page_io(d, name, in, done * wt + j, tile, 0))) break;
      rc = lb_page_io(d, name, cache, dst + j, tile, 1);
    }
    done += n;
  }
  free(tile);
  return rc;
}

/* slice: a TILE input tile by tile (SliceTileProgramFactory: the box's
 * tiles, begins on the tile grid, ends rounded up to it, so a partial
 * tile carries the input's own padding rows), a ROW_MAJOR input element by
 * element; a no-op slice to another memory config is a copy. */
static int exec_slice(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *in = &o->t[0], *out = &o->out[0];
  const lb_spec *is = &in->s;
  int r = is->rank, rc = 0;
  uint32_t b[OFFCARD_TT_MAX_RANK], e[OFFCARD_TT_MAX_RANK], pe[OFFCARD_TT_MAX_RANK];
  lb_slice_box(o, b, e, pe);
  if (lb_slice_noop(o) || is->layout != OFFCARD_TT_TILE) {
    int es = lb_esize(is->dtype);
    uint8_t *src = malloc(lb_volume(is) * es + 1), *dst = malloc(lb_volume(&out->s) * es + 1);
    if (!src || !dst) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
    if (!rc) rc = lb_read_logical(d, name, in, src);
    uint64_t n = lb_volume(&out->s);
    for (uint64_t k = 0; k < n && !rc; k++) {
      uint64_t rem = k, si = 0, stride = 1;
      for (int i = r - 1; i >= 0; i--) {
        uint64_t od = (uint64_t)out->s.dims[i], x = rem % od;
        rem /= od;
        si += (x + b[i]) * stride;
        stride *= (uint64_t)is->dims[i];
      }
      memcpy(dst + k * es, src + si * es, es);
    }
    if (!rc) rc = lb_write_logical(d, name, out, dst);
    free(src), free(dst);
    return rc;
  }
  uint64_t iht = (uint64_t)lb_padded(is, r - 2) / LB_TILE, iwt = (uint64_t)lb_padded(is, r - 1) / LB_TILE;
  uint64_t oht = (uint64_t)lb_padded(&out->s, r - 2) / LB_TILE, owt = (uint64_t)lb_padded(&out->s, r - 1) / LB_TILE;
  uint64_t outer = 1;
  for (int i = 0; i < r - 2; i++) outer *= (uint64_t)out->s.dims[i];
  uint8_t *tile = malloc(in->page_size);
  if (!tile) return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  for (uint64_t ou = 0; ou < outer && !rc; ou++) {
    uint64_t rem = ou, iu = 0, stride = 1;
    for (int i = r - 3; i >= 0; i--) {
      uint64_t od = (uint64_t)out->s.dims[i];
      iu += (rem % od + b[i]) * stride;
      rem /= od;
      stride *= (uint64_t)is->dims[i];
    }
    for (uint64_t tr = 0; tr < oht && !rc; tr++)
      for (uint64_t tc = 0; tc < owt && !rc; tc++) {
        uint64_t src = (iu * iht + tr + b[r - 2] / LB_TILE) * iwt + tc + b[r - 1] / LB_TILE;
        if ((rc = lb_page_io(d, name, in, src, tile, 0))) break;
        rc = lb_page_io(d, name, out, (ou * oht + tr) * owt + tc, tile, 1);
      }
  }
  free(tile);
  return rc;
}

static int exec_plus_one(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *t = &o->t[0];
  uint8_t *pg = malloc(t->page_size);
  if (!pg) return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
  uint64_t w = (uint64_t)lb_padded(&t->s, t->s.rank - 1);
  int rc = 0;
  for (uint64_t p = 0; p < t->num_pages && !rc; p++) {
    if ((rc = lb_page_io(d, name, t, p, pg, 0))) break;
    for (uint64_t i = 0; i < w; i++) {
      int32_t x = (int32_t)le32(pg + 4 * i);
      if (o->i[0] && (x < 0 || x == INT32_MAX)) continue;
      uint32_t y = (uint32_t)x + 1;
      memcpy(pg + 4 * i, &y, 4);
    }
    rc = lb_page_io(d, name, t, p, pg, 1);
  }
  free(pg);
  return rc;
}

int lb_exec(offcard_tt_device *d, const lb_op *o) {
  const char *name = lb_op_name(o->code);
  const lb_tensor *t = o->t;
  int rc = 0;
  float *a = NULL, *b = NULL, *c = NULL, *r = NULL;
  uint32_t *u = NULL;
  switch (o->code) {
    case OFFCARD_TT_OP_PAGED_UPDATE_CACHE:
      return exec_uc(d, o, 0);
    case OFFCARD_TT_OP_PAGED_FUSED_UPDATE_CACHE:
      return exec_uc(d, o, 1);
    case OFFCARD_TT_OP_PAGED_FILL_CACHE:
      return exec_fill(d, o);
    case OFFCARD_TT_OP_PAGED_SDPA_DECODE:
      return exec_sdpa(d, o);
    case OFFCARD_TT_OP_PLUS_ONE:
      return exec_plus_one(d, o);
    case OFFCARD_TT_OP_SDPA:
      return exec_sdpa_prefill(d, o);
    case OFFCARD_TT_OP_CHUNKED_SDPA:
      return exec_chunked(d, o);
    case OFFCARD_TT_OP_FILL_CACHE:
      return exec_fill_cache(d, o);
    case OFFCARD_TT_OP_SLICE:
      return exec_slice(d, o);
    case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS: {
      if (!(a = read_f(d, name, &t[0], &rc))) break;
      uint64_t bsz = (uint64_t)t[0].s.dims[0], seq = (uint64_t)t[0].s.dims[2], w = (uint64_t)last(&t[0].s), col = 0;
      for (int i = 0; i < 3 && !rc; i++) {
        const lb_tensor *ot = &o->out[i];
        int tk = i == 1 && o->i[2] != 0; /* K transposed: [B, KV, D, S] */
        uint64_t heads = (uint64_t)ot->s.dims[1], dh = (uint64_t)ot->s.dims[tk ? 2 : 3];
        float *dst = malloc(lb_volume(&ot->s) * sizeof *dst + 4);
        if (!dst) {
          rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
          break;
        }
        for (uint64_t bb = 0; bb < bsz; bb++)
          for (uint64_t h = 0; h < heads; h++)
            for (uint64_t s = 0; s < seq; s++) {
              const float *src = a + (bb * seq + s) * w + col + h * dh;
              if (!tk) {
                memcpy(dst + ((bb * heads + h) * seq + s) * dh, src, dh * sizeof *dst);
                continue;
              }
              for (uint64_t e = 0; e < dh; e++) dst[((bb * heads + h) * dh + e) * seq + s] = src[e];
            }
        rc = write_f(d, name, ot, dst);
        free(dst);
        col += dh * heads; /* the next group of heads */
      }
      break;
    }
    case OFFCARD_TT_OP_NLP_CONCAT_HEADS: {
      if (!(a = read_f(d, name, &t[0], &rc))) break;
      uint64_t bsz = (uint64_t)t[0].s.dims[0], heads = (uint64_t)t[0].s.dims[1], seq = (uint64_t)t[0].s.dims[2], dh = (uint64_t)t[0].s.dims[3];
      if (!(r = malloc(lb_volume(&t[0].s) * sizeof *r + 4))) {
        rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
        break;
      }
      for (uint64_t bb = 0; bb < bsz; bb++)
        for (uint64_t h = 0; h < heads; h++)
          for (uint64_t s = 0; s < seq; s++) memcpy(r + ((bb * seq + s) * heads + h) * dh, a + ((bb * heads + h) * seq + s) * dh, dh * sizeof *r);
      rc = write_f(d, name, &o->out[0], r);
      break;
    }
    case OFFCARD_TT_OP_EMBEDDING: {
      uint64_t n = lb_volume(&t[0].s), hidden = (uint64_t)last(&t[1].s);
      if (t[0].s.dtype == OFFCARD_TT_BF16) { /* ids as bf16 values */
        if (!(a = read_f(d, name, &t[0], &rc))) return rc;
        if (!(u = malloc(n * 4 + 4))) return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
        for (uint64_t i = 0; i < n; i++) u[i] = (uint32_t)a[i];
      } else if (!(u = read_u(d, name, &t[0], &rc))) {
        return rc;
      }
      uint8_t *out = malloc(n * hidden * 2 + 2);
      if (!out) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
      uint64_t rows = n, r = rows, hp = rows;
      if (t[2].s.layout == OFFCARD_TT_TILE && !emb_fused(t) && !rc) {
        /* embeddings_rm_program_factory.cpp: the row-major kernel writes id
         * i's row as one stick of the output's padded last dim at page i
         * of the TILE output (past its pages when there are more ids than
         * tiles), the card's bytes, not the tilized rows; as sim does. */
        uint64_t wp = (uint64_t)lb_padded(&t[2].s, t[2].s.rank - 1), addr;
        int l1, bank;
        uint8_t *stick = calloc(wp * 2 + 2, 1);
        if (!stick) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
        for (uint64_t i = 0; i < n && !rc; i++) {
          rc = lb_page_io(d, name, &t[1], u[i], out, 0);
          memset(stick, 0, wp * 2);
          memcpy(stick, out, (hidden < wp ? hidden : wp) * 2);
          lb_page_at(d, &t[2], i, &l1, &bank, &addr);
          if (!rc) rc = lb_io(d, name, l1, bank, addr, stick, wp * 2, 1);
        }
        free(stick);
        free(out);
        break;
      }
      if (emb_fused(t)) rows = rows_of(&t[2].s), r = (uint64_t)t[2].s.dims[t[2].s.rank - 2], hp = (r + LB_TILE - 1) / LB_TILE * LB_TILE;
      for (uint64_t i = 0; i < rows && !rc; i++) rc = lb_page_io(d, name, &t[1], u[i / r * hp + i % r], out + i * hidden * 2, 0);
      if (!rc) rc = lb_write_logical(d, name, &t[2], out);
      free(out);
      break;
    }
    case OFFCARD_TT_OP_RMS_NORM: {
      if (!(a = read_f(d, name, &t[0], &rc)) || !(b = read_f(d, name, &t[1], &rc))) break;
      uint64_t w = (uint64_t)last(&t[0].s), rows = rows_of(&t[0].s);
      for (uint64_t i = 0; i < rows; i++) {
        float *x = a + i * w, ss = 0;
        for (uint64_t j = 0; j < w; j++) ss += x[j] * x[j];
        float inv = 1.0f / sqrtf(ss / (float)w + o->f[0]);
        for (uint64_t j = 0; j < w; j++) x[j] = x[j] * inv * b[j];
      }
      rc = write_f(d, name, &o->out[0], a);
      break;
    }
    case OFFCARD_TT_OP_LINEAR: {
      if (!(a = read_f(d, name, &t[0], &rc)) || !(b = read_f(d, name, &t[1], &rc))) break;
      if (o->present[3] && !(c = read_f(d, name, &t[3], &rc))) break;
      uint64_t k = (uint64_t)last(&t[0].s), m = rows_of(&t[0].s), n = (uint64_t)last(&t[2].s);
      if (!(r = malloc(m * n * sizeof *r + 4))) {
        rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
        break;
      }
      for (uint64_t i = 0; i < m; i++)
        for (uint64_t j = 0; j < n; j++) {
          float s = c ? c[j] : 0;
          for (uint64_t q = 0; q < k; q++) s += a[i * k + q] * (o->i[0] ? b[j * k + q] : b[q * n + j]);
          r[i * n + j] = s;
        }
      rc = write_f(d, name, &t[2], r);
      break;
    }
    case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS_DECODE: {
      if (!(a = read_f(d, name, &t[0], &rc))) break;
      uint64_t rows = rows_of(&t[0].s), w = (uint64_t)last(&t[0].s), col = 0;
      for (int i = 0; i < 3 && !rc; i++) {
        const lb_tensor *ot = &o->out[i];
        uint64_t heads = (uint64_t)(i == 0 ? o->i[0] : o->i[1]), hp = (uint64_t)ot->s.dims[2], dh = (uint64_t)ot->s.dims[3];
        float *dst = calloc(lb_volume(&ot->s) + 1, sizeof *dst);
        if (!dst) {
          rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
          break;
        }
        for (uint64_t bb = 0; bb < rows; bb++)
          for (uint64_t h = 0; h < heads; h++) memcpy(dst + (bb * hp + h) * dh, a + bb * w + col + h * dh, dh * sizeof *dst);
        rc = write_f(d, name, ot, dst);
        free(dst);
        col += heads * dh;
      }
      break;
    }
    case OFFCARD_TT_OP_ROTARY_EMBEDDING_HF:
    case OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA: {
      float *tm = NULL;
      if (!(a = read_f(d, name, &t[0], &rc)) || !(b = read_f(d, name, &t[1], &rc)) || !(c = read_f(d, name, &t[2], &rc))) break;
      /* llama: the matrix CB sits at the matrix buffer's address on every
       * user's core (rotary_embedding_llama_sharded_program_factory.cpp:
       * 114-126): user u rotates with the tile at that address in the L1
       * of the core holding its input shard */
      if (o->code == OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA && !(tm = malloc(LB_TILE * LB_TILE * sizeof *tm))) {
        rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
        break;
      }
      int64_t tm_user = -1;
      uint64_t dh = (uint64_t)t[0].s.dims[3], hh = (uint64_t)t[0].s.dims[2], rows = rows_of(&t[0].s), half = dh / 2;
      if (!(r = malloc(lb_volume(&t[0].s) * sizeof *r + 4))) {
        free(tm);
        rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
        break;
      }
      for (uint64_t i = 0; i < rows; i++) {
        /* decode: user i / heads; prefill: sequence row i % S */
        uint64_t crow = o->code == OFFCARD_TT_OP_ROTARY_EMBEDDING_HF && o->i[0] == 0 ? i % hh : i / hh;
        const float *x = a + i * dh, *cs = b + crow * dh, *sn = c + crow * dh;
        if (tm && (int64_t)crow != tm_user) {
          uint16_t page[LB_TILE * LB_TILE];
          int64_t core = lb_core(d, &t[0].s, (int64_t)crow * lb_padded(&t[0].s, 2) / t[0].s.shard_h);
          if ((rc = lb_io(d, name, 1, (int)core, t[3].addr, page, sizeof page, 0))) break;
          for (int rr = 0; rr < LB_TILE; rr++)
            for (int cc = 0; cc < LB_TILE; cc++) tm[rr * LB_TILE + cc] = lb_bf16_to_f32(page[lb_tile_elem(rr, cc)]);
          tm_user = (int64_t)crow;
        }
        for (uint64_t j = 0; j < dh; j++) {
          float rot = j < half ? -x[j + half] : x[j - half];
          if (tm) { /* (x . trans_mat) on the 32-wide column tile of j */
            uint64_t c0 = j / LB_TILE * LB_TILE;
            rot = 0;
            for (uint64_t q = 0; q < LB_TILE; q++) rot += x[c0 + q] * tm[q * LB_TILE + (j - c0)];
          }
          r[i * dh + j] = x[j] * cs[j] + rot * sn[j];
        }
      }
      free(tm);
      if (!rc) rc = write_f(d, name, &o->out[0], r);
      break;
    }
    case OFFCARD_TT_OP_NLP_CONCAT_HEADS_DECODE: {
      if (!(a = read_f(d, name, &t[0], &rc))) break;
      uint64_t users = (uint64_t)(t[0].s.dims[0] * t[0].s.dims[1]), hp = (uint64_t)t[0].s.dims[2], dh = (uint64_t)t[0].s.dims[3];
      uint64_t nh = (uint64_t)o->i[0];
      if (!(r = malloc(users * nh * dh * sizeof *r + 4))) {
        rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
        break;
      }
      for (uint64_t bb = 0; bb < users; bb++)
        for (uint64_t h = 0; h < nh; h++) memcpy(r + (bb * nh + h) * dh, a + (bb * hp + h) * dh, dh * sizeof *r);
      rc = write_f(d, name, &t[1], r);
      break;
    }
    case OFFCARD_TT_OP_ADD:
    case OFFCARD_TT_OP_SILU_MUL: {
      if (!(a = read_f(d, name, &t[0], &rc)) || !(b = read_f(d, name, &t[1], &rc))) break;
      uint64_t n = lb_volume(&t[0].s);
      for (uint64_t i = 0; i < n; i++) a[i] = o->code == OFFCARD_TT_OP_ADD ? a[i] + b[i] : a[i] / (1.0f + expf(-a[i])) * b[i];
      rc = write_f(d, name, &t[2], a);
      break;
    }
    case OFFCARD_TT_OP_ARGMAX: {
      if (!(a = read_f(d, name, &t[0], &rc)) || !(u = read_u(d, name, &t[1], &rc))) break;
      uint64_t w = (uint64_t)last(&t[0].s), rows = rows_of(&t[0].s);
      for (uint64_t i = 0; i < rows; i++) {
        long best = -1;
        for (uint64_t j = 0; j < w; j++) {
          float x = a[i * w + j];
          if (isnan(x)) continue;
          if (best < 0 || x > a[i * w + best]) best = (long)j;
        }
        u[i] = best < 0 ? 0 : (uint32_t)best;
      }
      rc = lb_write_logical(d, name, &t[1], u);
      break;
    }
    case OFFCARD_TT_OP_TO_MEMORY_CONFIG:
    case OFFCARD_TT_OP_COPY: {
      uint8_t *raw = malloc(lb_volume(&t[0].s) * lb_esize(t[0].s.dtype) + 1);
      if (!raw) return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
      rc = lb_read_logical(d, name, &t[0], raw);
      if (!rc) rc = lb_write_logical(d, name, o->code == OFFCARD_TT_OP_COPY ? &t[1] : &o->out[0], raw);
      free(raw);
      break;
    }
    default:
      rc = lb_err(OFFCARD_TT_EARG, name, "unknown op %d", o->code);
  }
  free(a), free(b), free(c), free(r), free(u);
  return rc;
}
