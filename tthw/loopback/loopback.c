/* The loopback: offcard_tt.h implemented in C on host memory, so CI exercises
 * the real path (dlopen, the C calling convention, handles, error texts)
 * without a card. What it models, after tt-metal 622c6fb9:
 *  - DRAM as nbanks banks (Wormhole 12 / 32 B alignment, Blackhole 8 / 64 B)
 *    and L1 per worker core; memory is sparse and fresh bytes hold a poison
 *    pattern, never zeros;
 *  - the allocator of tt_metal/impl/allocator/ (one address across all banks,
 *    address-ordered first fit, DRAM bottom-up, L1 top-down, alignment,
 *    coalescing on free, immediate reuse of a freed address, the trace region
 *    at the top of DRAM) and its out-of-memory text;
 *  - interleaved pages (page p in bank p % nbanks at addr + (p / nbanks) *
 *    aligned page size), height-sharded pages (shard i on core first+i), TILE
 *    pages in 16x16 face order;
 *  - host writes/reads with copy_host_to_device_tensor's checks and texts;
 *  - a program cache keyed by op, attributes and specs (validation only on a
 *    miss, a miss during capture fails with tt-metal's text);
 *  - trace capture (ops recorded with the addresses of the moment, host I/O
 *    refused) and replay at those baked addresses, without validation;
 *  - the paged ops with the kernels' page-table walk (ops.c).
 * Compute ops are plain float loops: deliberately not bit-exact with
 * offcard's ref, so the tolerant comparison is exercised.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lb.h"

#ifndef LB_COMMIT
#define LB_COMMIT "622c6fb9c08b88e8fe05eb8a8194974c05fff618"
#endif

static _Thread_local char err_msg[1024];
static _Thread_local char err_op[64];

int32_t lb_err(int32_t status, const char *op, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_msg, sizeof err_msg, fmt, ap);
  va_end(ap);
  snprintf(err_op, sizeof err_op, "%s", op ? op : "");
  return status;
}

static void clear_err(void) {
  err_msg[0] = 0;
  err_op[0] = 0;
}

const char *offcard_tt_last_error(void) { return err_msg; }
const char *offcard_tt_last_error_op(void) { return err_op; }

/* ---- memory ---- */

#define CHUNK_SHIFT 16
#define CHUNK (1u << CHUNK_SHIFT)

static uint8_t poison_chunk[CHUNK];

static void init_poison(void) {
  for (uint32_t i = 0; i < CHUNK; i++) poison_chunk[i] = (i & 1) ? 0x7F : 0xC1;
}

static int mem_init(lb_mem *m, uint64_t size) {
  m->size = size;
  m->nchunks = (size + CHUNK - 1) >> CHUNK_SHIFT;
  m->chunks = calloc(m->nchunks, sizeof *m->chunks);
  return m->chunks != NULL;
}

static void mem_free(lb_mem *m) {
  if (!m->chunks) return;
  for (uint64_t i = 0; i < m->nchunks; i++) free(m->chunks[i]);
  free(m->chunks);
  m->chunks = NULL;
}

static int mem_rw(lb_mem *m, uint64_t a, uint8_t *buf, uint64_t n, int write) {
  if (a > m->size || n > m->size - a) return 0;
  while (n > 0) {
    uint64_t c = a >> CHUNK_SHIFT, off = a & (CHUNK - 1);
    uint64_t k = CHUNK - off;
    if (k > n) k = n;
    uint8_t *ch = m->chunks[c];
    if (write) {
      if (!ch) {
        ch = malloc(CHUNK);
        if (!ch) return -1;
        memcpy(ch, poison_chunk, CHUNK);
        m->chunks[c] = ch;
      }
      memcpy(ch + off, buf, k);
    } else {
      memcpy(buf, ch ? ch + off : poison_chunk + off, k);
    }
    buf += k;
    a += k;
    n -= k;
  }
  return 1;
}

/* lb_io reads or writes n bytes of one DRAM bank or one core's L1. An access
 * outside the memory is an error (the NOC would fault), never a crash. */
int lb_io(offcard_tt_device *d, const char *op, int l1, int bank, uint64_t addr, void *buf, uint64_t n, int write) {
  lb_mem *m;
  if (l1) {
    if (bank < 0 || bank >= d->ncores) return lb_err(OFFCARD_TT_EDEVICE, op, "offcard: core %d is not a worker core", bank);
    m = &d->l1[bank];
  } else {
    if (bank < 0 || bank >= d->nbanks) return lb_err(OFFCARD_TT_EDEVICE, op, "offcard: DRAM bank %d does not exist", bank);
    m = &d->dram[bank];
  }
  int r = mem_rw(m, addr, buf, n, write);
  if (r < 0) return lb_err(OFFCARD_TT_EINTERNAL, op, "out of host memory");
  if (r == 0)
    return lb_err(OFFCARD_TT_EDEVICE, op, "offcard: %llu B at %s %d address 0x%llx is outside the device memory",
                  (unsigned long long)n, l1 ? "L1 of core" : "DRAM bank", bank, (unsigned long long)addr);
  return 0;
}

/* ---- allocator ---- */

static uint64_t align_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }

static int alloc_init(lb_alloc *a, uint64_t lo, uint64_t hi, uint64_t align, int bottom_up) {
  memset(a, 0, sizeof *a);
  a->lo = lo, a->hi = hi, a->align = align, a->bottom_up = bottom_up;
  if (hi > lo) {
    a->free = malloc(sizeof *a->free * 4);
    if (!a->free) return 0;
    a->capfree = 4;
    a->free[0] = (lb_block){lo, hi - lo};
    a->nfree = 1;
  }
  return 1;
}

static uint64_t alloc_size(const lb_alloc *a, uint64_t size) { return align_up(size > a->align ? size : a->align, a->align); }

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 1;
  size_t c = *cap ? *cap * 2 : 8;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return 0;
  *p = q, *cap = c;
  return 1;
}

/* alloc_take is address-ordered first fit: the lowest fitting block bottom-up
 * (placed at its low end), the highest top-down (placed at its high end). */
static int alloc_take(lb_alloc *a, uint64_t size, uint64_t *addr) {
  uint64_t need = alloc_size(a, size);
  long pick = -1;
  for (size_t i = 0; i < a->nfree; i++) {
    if (a->free[i].size < need) continue;
    if (pick < 0 || !a->bottom_up) pick = (long)i;
    if (a->bottom_up) break;
  }
  if (pick < 0) return 0;
  if (!grow((void **)&a->used, &a->capused, a->nused + 1, sizeof *a->used)) return -1;
  lb_block *b = &a->free[pick];
  if (a->bottom_up) {
    *addr = b->addr;
    b->addr += need;
  } else {
    *addr = b->addr + b->size - need;
  }
  b->size -= need;
  if (b->size == 0) {
    memmove(b, b + 1, (a->nfree - pick - 1) * sizeof *b);
    a->nfree--;
  }
  a->used[a->nused++] = (lb_block){*addr, need};
  return 1;
}

static int alloc_release(lb_alloc *a, uint64_t addr) {
  size_t u = 0;
  while (u < a->nused && a->used[u].addr != addr) u++;
  if (u == a->nused) return 1;
  uint64_t size = a->used[u].size;
  a->used[u] = a->used[--a->nused];
  size_t i = 0;
  while (i < a->nfree && a->free[i].addr < addr) i++;
  lb_block nb = {addr, size};
  if (i > 0 && a->free[i - 1].addr + a->free[i - 1].size == addr) {
    i--;
    nb.addr = a->free[i].addr;
    nb.size += a->free[i].size;
    memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof nb);
    a->nfree--;
  }
  if (i < a->nfree && nb.addr + nb.size == a->free[i].addr) {
    nb.size += a->free[i].size;
    memmove(&a->free[i], &a->free[i + 1], (a->nfree - i - 1) * sizeof nb);
    a->nfree--;
  }
  if (!grow((void **)&a->free, &a->capfree, a->nfree + 1, sizeof nb)) return 0;
  memmove(&a->free[i + 1], &a->free[i], (a->nfree - i) * sizeof nb);
  a->free[i] = nb;
  a->nfree++;
  return 1;
}

/* alloc_stats is FreeListOpt::get_statistics (tt_metal/impl/allocator/
 * algorithms/free_list_opt.cpp:402-431), for the out-of-memory text: bytes
 * allocated and free per bank and the largest free block; with nothing
 * allocated, the whole bank is free. */
static void alloc_stats(const lb_alloc *a, uint64_t *allocated, uint64_t *freeb, uint64_t *largest) {
  *allocated = *freeb = *largest = 0;
  for (size_t i = 0; i < a->nused; i++) *allocated += a->used[i].size;
  for (size_t i = 0; i < a->nfree; i++) {
    *freeb += a->free[i].size;
    if (a->free[i].size > *largest) *largest = a->free[i].size;
  }
  if (*allocated == 0) *freeb = *largest = a->hi - a->lo;
}

static void alloc_destroy(lb_alloc *a) {
  free(a->free);
  free(a->used);
}

/* ---- specs and pages ---- */

int lb_esize(int32_t dt) {
  switch (dt) {
    case OFFCARD_TT_BF16:
    case OFFCARD_TT_UINT16:
      return 2;
    case OFFCARD_TT_FP32:
    case OFFCARD_TT_INT32:
    case OFFCARD_TT_UINT32:
      return 4;
  }
  return 0;
}

uint64_t lb_volume(const lb_spec *s) {
  uint64_t v = 1;
  for (int i = 0; i < s->rank; i++) v *= (uint64_t)s->dims[i];
  return v;
}

int64_t lb_padded(const lb_spec *s, int i) {
  int64_t x = s->dims[i];
  if (s->layout == OFFCARD_TT_TILE && i >= s->rank - 2) x = (x + LB_TILE - 1) / LB_TILE * LB_TILE;
  return x;
}

int lb_tile_elem(int r, int c) {
  return ((r / LB_FACE) * 2 + c / LB_FACE) * LB_FACE * LB_FACE + (r % LB_FACE) * LB_FACE + c % LB_FACE;
}

static int spec_parse(const int64_t *w, uint32_t n, lb_spec *s) {
  if (!w || n < OFFCARD_TT_SPEC_HEADER) return lb_err(OFFCARD_TT_EARG, "allocate", "spec has %u words, want at least %d", n, OFFCARD_TT_SPEC_HEADER);
  memset(s, 0, sizeof *s);
  int64_t rank = w[OFFCARD_TT_SPEC_RANK];
  if (rank < 1 || rank > OFFCARD_TT_MAX_RANK || n != OFFCARD_TT_SPEC_HEADER + (uint32_t)rank)
    return lb_err(OFFCARD_TT_EARG, "allocate", "spec rank %lld does not fit %u words", (long long)rank, n);
  s->rank = (int32_t)rank;
  s->dtype = (int32_t)w[OFFCARD_TT_SPEC_DTYPE];
  s->layout = (int32_t)w[OFFCARD_TT_SPEC_LAYOUT];
  s->buffer = (int32_t)w[OFFCARD_TT_SPEC_BUFFER];
  s->memory = (int32_t)w[OFFCARD_TT_SPEC_MEMORY];
  s->shard_cores = w[OFFCARD_TT_SPEC_SHARD_CORES];
  s->shard_h = w[OFFCARD_TT_SPEC_SHARD_H];
  s->shard_w = w[OFFCARD_TT_SPEC_SHARD_W];
  s->shard_first = w[OFFCARD_TT_SPEC_SHARD_FIRST];
  s->shard_gw = w[OFFCARD_TT_SPEC_SHARD_GRID_W];
  for (int i = 0; i < s->rank; i++) {
    s->dims[i] = w[OFFCARD_TT_SPEC_HEADER + i];
    if (s->dims[i] <= 0 || s->dims[i] > (1 << 24)) return lb_err(OFFCARD_TT_EARG, "allocate", "spec dim %d is %lld", i, (long long)s->dims[i]);
  }
  if (!lb_esize(s->dtype)) return lb_err(OFFCARD_TT_EARG, "allocate", "invalid dtype %d", s->dtype);
  if (s->layout != OFFCARD_TT_TILE && s->layout != OFFCARD_TT_ROW_MAJOR) return lb_err(OFFCARD_TT_EARG, "allocate", "invalid layout %d", s->layout);
  if (s->layout == OFFCARD_TT_TILE && s->rank < 2) return lb_err(OFFCARD_TT_EARG, "allocate", "TILE layout needs rank >= 2");
  if (s->buffer != OFFCARD_TT_DRAM && s->buffer != OFFCARD_TT_L1) return lb_err(OFFCARD_TT_EARG, "allocate", "invalid buffer type %d", s->buffer);
  if (s->memory == OFFCARD_TT_INTERLEAVED) {
    if (s->shard_cores || s->shard_h || s->shard_w || s->shard_first || s->shard_gw) return lb_err(OFFCARD_TT_EARG, "allocate", "interleaved memory config carries a shard spec");
  } else if (s->memory == OFFCARD_TT_HEIGHT_SHARDED) {
    if (s->buffer != OFFCARD_TT_L1) return lb_err(OFFCARD_TT_EARG, "allocate", "only L1 tensors can be height-sharded");
    if (s->shard_cores <= 0 || s->shard_h <= 0 || s->shard_w <= 0 || s->shard_first < 0 || s->shard_gw < 0)
      return lb_err(OFFCARD_TT_EARG, "allocate", "bad shard spec");
    if (s->shard_w != lb_padded(s, s->rank - 1)) return lb_err(OFFCARD_TT_EARG, "allocate", "height-sharded shard width %lld != tensor width %lld", (long long)s->shard_w, (long long)lb_padded(s, s->rank - 1));
    if (s->layout == OFFCARD_TT_TILE && s->shard_h % LB_TILE) return lb_err(OFFCARD_TT_EARG, "allocate", "TILE shard height is not a multiple of 32");
  } else if (s->memory == OFFCARD_TT_WIDTH_SHARDED) {
    if (s->buffer != OFFCARD_TT_L1) return lb_err(OFFCARD_TT_EARG, "allocate", "only L1 tensors can be width-sharded");
    if (s->layout != OFFCARD_TT_TILE) return lb_err(OFFCARD_TT_EARG, "allocate", "width-sharded tensors must be TILE");
    if (s->shard_cores <= 0 || s->shard_h <= 0 || s->shard_w <= 0 || s->shard_first < 0 || s->shard_gw < 0 || s->shard_w % LB_TILE)
      return lb_err(OFFCARD_TT_EARG, "allocate", "bad shard spec");
    uint64_t h = 1;
    for (int i = 0; i < s->rank - 1; i++) h *= (uint64_t)lb_padded(s, i);
    if ((uint64_t)s->shard_h != h) return lb_err(OFFCARD_TT_EARG, "allocate", "width-sharded shard height %lld != tensor height %llu", (long long)s->shard_h, (unsigned long long)h);
    if (s->shard_cores * s->shard_w < lb_padded(s, s->rank - 1)) return lb_err(OFFCARD_TT_EARG, "allocate", "shards cannot hold the tensor's width");
  } else {
    return lb_err(OFFCARD_TT_EARG, "allocate", "memory layout %d is not supported by the loopback", s->memory);
  }
  return 0;
}

int lb_geometry(offcard_tt_device *d, lb_tensor *t) {
  lb_spec *s = &t->s;
  int e = lb_esize(s->dtype);
  uint64_t h = 1;
  for (int i = 0; i < s->rank - 1; i++) h *= (uint64_t)lb_padded(s, i);
  uint64_t w = (uint64_t)lb_padded(s, s->rank - 1);
  if (s->layout == OFFCARD_TT_TILE) {
    t->page_size = LB_TILE * LB_TILE * e;
    t->num_pages = (h / LB_TILE) * (w / LB_TILE);
  } else {
    t->page_size = (s->memory == OFFCARD_TT_HEIGHT_SHARDED ? (uint64_t)s->shard_w : w) * e;
    t->num_pages = h;
  }
  t->aligned = align_up(t->page_size, s->buffer == OFFCARD_TT_DRAM ? d->dram_align : d->l1_align);
  if (s->memory != OFFCARD_TT_INTERLEAVED) {
    if (s->shard_gw > d->grid_x) return lb_err(OFFCARD_TT_EARG, "allocate", "shard grid width %lld exceeds the worker grid's %d columns", (long long)s->shard_gw, d->grid_x);
    if (s->shard_first + s->shard_cores > lb_grid_w(d, s) * d->grid_y) return lb_err(OFFCARD_TT_EARG, "allocate", "shard grid exceeds the %lld cores of its columns", (long long)(lb_grid_w(d, s) * d->grid_y));
  }
  if (s->memory == OFFCARD_TT_WIDTH_SHARDED) {
    t->shard_pages = (uint64_t)(s->shard_h / LB_TILE) * (s->shard_w / LB_TILE);
    t->per_bank = t->shard_pages * t->aligned;
  } else if (s->memory == OFFCARD_TT_HEIGHT_SHARDED) {
    t->shard_pages = s->layout == OFFCARD_TT_TILE ? (uint64_t)(s->shard_h / LB_TILE) * (s->shard_w / LB_TILE) : (uint64_t)s->shard_h;
    if ((uint64_t)s->shard_cores * t->shard_pages < t->num_pages) return lb_err(OFFCARD_TT_EARG, "allocate", "shards cannot hold the tensor");
    t->per_bank = t->shard_pages * t->aligned;
  } else {
    uint64_t n = s->buffer == OFFCARD_TT_DRAM ? (uint64_t)d->nbanks : (uint64_t)d->ncores;
    t->per_bank = (t->num_pages + n - 1) / n * t->aligned;
  }
  return 0;
}

int64_t lb_grid_w(const offcard_tt_device *d, const lb_spec *s) { return s->shard_gw ? s->shard_gw : d->grid_x; }

int64_t lb_core(const offcard_tt_device *d, const lb_spec *s, int64_t i) {
  int64_t j = s->shard_first + i, w = lb_grid_w(d, s);
  return j / w * d->grid_x + j % w;
}

lb_spec lb_same_cores(const offcard_tt_device *d, lb_spec s) {
  if (s.shard_gw == d->grid_x) s.shard_gw = 0;
  return s;
}

/* lb_page_at locates page p of t: interleaved page p lives in bank p % n
 * at addr + (p / n) * aligned; height-sharded shard p / shard_pages on
 * core lb_core(shard_first + that index); width-sharded by tile column. */
void lb_page_at(const offcard_tt_device *d, const lb_tensor *t, uint64_t p, int *l1, int *bank, uint64_t *addr) {
  *l1 = t->s.buffer == OFFCARD_TT_L1;
  if (t->s.memory == OFFCARD_TT_WIDTH_SHARDED) {
    uint64_t wt = (uint64_t)lb_padded(&t->s, t->s.rank - 1) / LB_TILE, swt = (uint64_t)t->s.shard_w / LB_TILE;
    uint64_t tr = p / wt, tc = p % wt;
    *l1 = 1, *bank = (int)lb_core(d, &t->s, (int64_t)(tc / swt)), *addr = t->addr + (tr * swt + tc % swt) * t->aligned;
    return;
  }
  if (t->s.memory == OFFCARD_TT_HEIGHT_SHARDED) {
    *l1 = 1, *bank = (int)lb_core(d, &t->s, (int64_t)(p / t->shard_pages)), *addr = t->addr + (p % t->shard_pages) * t->aligned;
    return;
  }
  uint64_t n = *l1 ? (uint64_t)d->ncores : (uint64_t)d->nbanks;
  *bank = (int)(p % n), *addr = t->addr + (p / n) * t->aligned;
}

/* lb_page_io moves one page of t (lb_page_at). */
int lb_page_io(offcard_tt_device *d, const char *op, const lb_tensor *t, uint64_t p, void *buf, int write) {
  int l1, bank;
  uint64_t addr;
  lb_page_at(d, t, p, &l1, &bank, &addr);
  return lb_io(d, op, l1, bank, addr, buf, t->page_size, write);
}

/* for_tile_segs calls f for each run of logical elements held by TILE page
 * p: n elements from logical index li land at element ti of the page. */
static void for_tile_segs(const lb_spec *s, uint64_t p, void (*f)(void *, uint64_t, uint64_t, uint64_t), void *ctx) {
  int r = s->rank;
  uint64_t h = (uint64_t)s->dims[r - 2], w = (uint64_t)s->dims[r - 1];
  uint64_t hp = (uint64_t)lb_padded(s, r - 2), wp = (uint64_t)lb_padded(s, r - 1);
  uint64_t wt = wp / LB_TILE, tr = p / wt, tc = p % wt;
  for (uint64_t rr = 0; rr < LB_TILE; rr++) {
    uint64_t row = tr * LB_TILE + rr, o = row / hp, hh = row % hp;
    if (hh >= h) continue;
    for (int half = 0; half < 2; half++) {
      uint64_t c0 = tc * LB_TILE + half * LB_FACE;
      if (c0 >= w) continue;
      uint64_t n = w - c0 < LB_FACE ? w - c0 : LB_FACE;
      f(ctx, (uint64_t)lb_tile_elem((int)rr, half * LB_FACE), (o * h + hh) * w + c0, n);
    }
  }
}

typedef struct {
  uint8_t *page, *data;
  int e, to_page;
} seg_ctx;

static void seg_copy(void *c, uint64_t ti, uint64_t li, uint64_t n) {
  seg_ctx *x = c;
  if (x->to_page)
    memcpy(x->page + ti * x->e, x->data + li * x->e, n * x->e);
  else
    memcpy(x->data + li * x->e, x->page + ti * x->e, n * x->e);
}

/* lb_write_logical tilizes (or splits into rows) logical bytes into t's
 * pages; TILE padding becomes zero. */
int lb_write_logical(offcard_tt_device *d, const char *op, const lb_tensor *t, const void *in) {
  int e = lb_esize(t->s.dtype);
  uint8_t *page = malloc(t->page_size);
  if (!page) return lb_err(OFFCARD_TT_EINTERNAL, op, "out of host memory");
  uint64_t vol = lb_volume(&t->s);
  int rc = 0;
  for (uint64_t p = 0; p < t->num_pages && !rc; p++) {
    if (t->s.layout == OFFCARD_TT_TILE) {
      memset(page, 0, t->page_size);
      seg_ctx c = {page, (uint8_t *)in, e, 1};
      for_tile_segs(&t->s, p, seg_copy, &c);
    } else {
      uint64_t off = p * t->page_size, n = t->page_size;
      memset(page, 0, n);
      if (off < vol * e) memcpy(page, (const uint8_t *)in + off, off + n <= vol * e ? n : vol * e - off);
    }
    rc = lb_page_io(d, op, t, p, page, 1);
  }
  free(page);
  return rc;
}

int lb_read_logical(offcard_tt_device *d, const char *op, const lb_tensor *t, void *out) {
  int e = lb_esize(t->s.dtype);
  uint8_t *page = malloc(t->page_size);
  if (!page) return lb_err(OFFCARD_TT_EINTERNAL, op, "out of host memory");
  uint64_t vol = lb_volume(&t->s);
  int rc = 0;
  for (uint64_t p = 0; p < t->num_pages && !rc; p++) {
    rc = lb_page_io(d, op, t, p, page, 0);
    if (rc) break;
    if (t->s.layout == OFFCARD_TT_TILE) {
      seg_ctx c = {page, out, e, 0};
      for_tile_segs(&t->s, p, seg_copy, &c);
    } else {
      uint64_t off = p * t->page_size, n = t->page_size;
      if (off < vol * e) memcpy((uint8_t *)out + off, page, off + n <= vol * e ? n : vol * e - off);
    }
  }
  free(page);
  return rc;
}

/* ---- options, open, close ---- */

static int opt_u64(const char *opts, const char *key, uint64_t *v) {
  size_t k = strlen(key);
  for (const char *p = opts; p && *p;) {
    while (*p == ';' || *p == ' ') p++;
    if (!strncmp(p, key, k) && p[k] == '=') {
      char *end;
      unsigned long long x = strtoull(p + k + 1, &end, 0);
      if (end == p + k + 1 || (*end && *end != ';')) return -1;
      *v = x;
      return 1;
    }
    p = strchr(p, ';');
  }
  return 0;
}

static int opt_str(const char *opts, const char *key, char *out, size_t cap) {
  size_t k = strlen(key);
  for (const char *p = opts; p && *p;) {
    while (*p == ';' || *p == ' ') p++;
    if (!strncmp(p, key, k) && p[k] == '=') {
      const char *v = p + k + 1, *e = strchr(v, ';');
      size_t n = e ? (size_t)(e - v) : strlen(v);
      if (n >= cap) return -1;
      memcpy(out, v, n);
      out[n] = 0;
      return 1;
    }
    p = strchr(p, ';');
  }
  return 0;
}

static const char *known_opts[] = {"arch", "trace_region", "dram_bank_size", "l1_size", "fail_alloc", "fail_op", "fail_capture", "abi", NULL};

static int check_opts(const char *opts) {
  for (const char *p = opts; p && *p;) {
    while (*p == ';' || *p == ' ') p++;
    if (!*p) break;
    const char *eq = strchr(p, '='), *semi = strchr(p, ';');
    if (!eq || (semi && eq > semi)) return lb_err(OFFCARD_TT_EARG, "open", "option %.*s has no value", semi ? (int)(semi - p) : (int)strlen(p), p);
    int ok = 0;
    for (const char **k = known_opts; *k; k++)
      if ((size_t)(eq - p) == strlen(*k) && !strncmp(p, *k, eq - p)) ok = 1;
    if (!ok) return lb_err(OFFCARD_TT_EARG, "open", "unknown option %.*s", (int)(eq - p), p);
    p = semi;
  }
  return 0;
}

int32_t offcard_tt_abi_version(const char *options, uint32_t *version) {
  clear_err();
  if (!version) return lb_err(OFFCARD_TT_EARG, "abi_version", "version is NULL");
  uint64_t v = OFFCARD_TT_ABI_VERSION;
  if (opt_u64(options, "abi", &v) < 0) return lb_err(OFFCARD_TT_EARG, "abi_version", "bad abi option");
  *version = (uint32_t)v;
  return OFFCARD_TT_OK;
}

static void dev_destroy(offcard_tt_device *d) {
  if (!d) return;
  for (int i = 0; d->dram && i < d->nbanks; i++) mem_free(&d->dram[i]);
  for (int i = 0; d->l1 && i < d->ncores; i++) mem_free(&d->l1[i]);
  free(d->dram);
  free(d->l1);
  alloc_destroy(&d->da);
  alloc_destroy(&d->la);
  free(d->ts);
  for (size_t i = 0; i < d->nprogs; i++) free(d->progs[i]);
  free(d->progs);
  free(d->rec);
  for (size_t i = 0; i < d->ntraces; i++) free(d->traces[i].ops);
  free(d->traces);
  free(d);
}

int32_t offcard_tt_open(uint32_t abi_version, const char *options, offcard_tt_device **out) {
  clear_err();
  if (!out) return lb_err(OFFCARD_TT_EARG, "open", "device pointer is NULL");
  *out = NULL;
  if (abi_version != OFFCARD_TT_ABI_VERSION)
    return lb_err(OFFCARD_TT_EABI, "open", "caller speaks offcard_tt ABI %u, this library implements %d", abi_version, OFFCARD_TT_ABI_VERSION);
  if (check_opts(options)) return OFFCARD_TT_EARG;
  init_poison();
  offcard_tt_device *d = calloc(1, sizeof *d);
  if (!d) return lb_err(OFFCARD_TT_EINTERNAL, "open", "out of host memory");
  char arch[32] = "wormhole";
  if (opt_str(options, "arch", arch, sizeof arch) < 0) arch[0] = 0;
  if (!strcmp(arch, "wormhole")) {
    d->arch = 1, d->nbanks = 12, d->dram_align = 32, d->grid_x = 8, d->grid_y = 8, d->bank_size = 1ull << 30, d->l1_size = 1499136;
  } else if (!strcmp(arch, "blackhole")) {
    d->arch = 2, d->nbanks = 8, d->dram_align = 64, d->grid_x = 13, d->grid_y = 10, d->bank_size = 4278190080ull, d->l1_size = 1572864;
  } else {
    free(d);
    return lb_err(OFFCARD_TT_EARG, "open", "unknown arch %s (wormhole or blackhole)", arch);
  }
  d->ncores = d->grid_x * d->grid_y;
  d->l1_align = 16, d->l1_base = 96 << 10, d->dram_base = d->dram_align;
  int bad = 0;
  uint64_t v, *dst[] = {&d->bank_size, &d->l1_size, &d->trace_region, NULL};
  uint64_t fa = 0, fo = 0, fc = 0, *fdst[] = {&fa, &fo, &fc};
  const char *keys[] = {"dram_bank_size", "l1_size", "trace_region", "fail_alloc", "fail_op", "fail_capture"};
  for (int i = 0; i < 6; i++) {
    int r = opt_u64(options, keys[i], &v);
    if (r < 0) bad = 1;
    if (r > 0) *(i < 3 ? dst[i] : fdst[i - 3]) = v;
  }
  d->fail_alloc = (long)fa, d->fail_op = (long)fo, d->fail_capture = (long)fc;
  /* trace_region is the total over the banks: each reserves its share
     (tt-metal tt_metal/impl/allocator/allocator.cpp:43-49 at 622c6fb9) */
  uint64_t trace_per_bank = d->trace_region ? (d->trace_region + d->nbanks - 1) / d->nbanks : 0;
  trace_per_bank = (trace_per_bank + d->dram_align - 1) / d->dram_align * d->dram_align;
  if (bad || d->bank_size % d->dram_align || d->dram_base + trace_per_bank >= d->bank_size ||
      d->l1_base >= d->l1_size) {
    free(d);
    return lb_err(OFFCARD_TT_EARG, "open", "bad options: %s", options ? options : "");
  }
  d->dram = calloc(d->nbanks, sizeof *d->dram);
  d->l1 = calloc(d->ncores, sizeof *d->l1);
  int ok = d->dram && d->l1;
  for (int i = 0; ok && i < d->nbanks; i++) ok = mem_init(&d->dram[i], d->bank_size);
  for (int i = 0; ok && i < d->ncores; i++) ok = mem_init(&d->l1[i], d->l1_size);
  ok = ok && alloc_init(&d->da, d->dram_base, d->bank_size - trace_per_bank, d->dram_align, 1);
  ok = ok && alloc_init(&d->la, d->l1_base, d->l1_size, d->dram_align, 0);
  ok = ok && grow((void **)&d->ts, &d->capts, 1, sizeof *d->ts);
  if (!ok) {
    dev_destroy(d);
    return lb_err(OFFCARD_TT_EINTERNAL, "open", "out of host memory");
  }
  memset(d->ts, 0, sizeof *d->ts);
  d->nts = 1; /* id 0 is "none" */
  *out = d;
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_live(offcard_tt_device *d, uint64_t *tensors, uint64_t *traces) {
  clear_err();
  if (!d || !tensors || !traces) return lb_err(OFFCARD_TT_EARG, "live", "NULL argument");
  uint64_t n = 0, m = 0;
  for (size_t i = 1; i < d->nts; i++) n += d->ts[i].live != 0;
  for (size_t i = 0; i < d->ntraces; i++) m += d->traces[i].live != 0;
  *tensors = n, *traces = m;
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_close(offcard_tt_device *d, uint64_t *leaked_tensors, uint64_t *leaked_traces) {
  clear_err();
  if (!d) return lb_err(OFFCARD_TT_EARG, "close", "device is NULL");
  uint64_t n, m;
  offcard_tt_live(d, &n, &m);
  if (leaked_tensors) *leaked_tensors = n;
  if (leaked_traces) *leaked_traces = m + (d->capturing ? 1 : 0); /* an open capture is ended and released too */
  dev_destroy(d);
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_build_info(offcard_tt_device *d, char *buf, uint64_t cap, uint64_t *len) {
  clear_err();
  if (!d || !len) return lb_err(OFFCARD_TT_EARG, "build_info", "NULL argument");
  char tmp[512];
  int n = snprintf(tmp, sizeof tmp, "implementation=loopback\ntt_metal_commit=%s\narch=%s\ncompiler=%s\n", LB_COMMIT,
                   d->arch == 1 ? "wormhole" : "blackhole", __VERSION__);
  *len = (uint64_t)n;
  if (buf && cap > 0) {
    uint64_t k = (uint64_t)n < cap ? (uint64_t)n + 1 : cap;
    memcpy(buf, tmp, k);
  }
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_device_facts(offcard_tt_device *d, int64_t *f, uint32_t n) {
  clear_err();
  if (!d || (!f && n)) return lb_err(OFFCARD_TT_EARG, "device_facts", "NULL argument");
  int64_t all[OFFCARD_TT_FACTS] = {d->arch, d->nbanks, (int64_t)d->dram_align, (int64_t)d->l1_align, (int64_t)d->l1_size,
                                   (int64_t)d->bank_size, d->grid_x, d->grid_y, (int64_t)d->trace_region};
  for (uint32_t i = 0; i < n; i++) f[i] = i < OFFCARD_TT_FACTS ? all[i] : -1;
  return OFFCARD_TT_OK;
}

/* ---- tensors ---- */

static lb_tensor *live_tensor(offcard_tt_device *d, uint64_t id) {
  if (id == 0 || id >= d->nts || !d->ts[id].live) return NULL;
  return &d->ts[id];
}

/* alloc_tensor allocates a parsed spec and returns the new tensor. */
static int alloc_tensor(offcard_tt_device *d, const lb_spec *spec, lb_tensor **out) {
  lb_tensor t;
  memset(&t, 0, sizeof t);
  t.s = *spec;
  if (lb_geometry(d, &t)) return OFFCARD_TT_EARG;
  d->n_alloc++;
  if (d->fail_alloc && d->n_alloc == d->fail_alloc)
    return lb_err(OFFCARD_TT_EINJECTED, "allocate", "injected failure of allocation %ld", d->n_alloc);
  lb_alloc *a = t.s.buffer == OFFCARD_TT_DRAM ? &d->da : &d->la;
  int r = alloc_take(a, t.per_bank, &t.addr);
  if (r < 0) return lb_err(OFFCARD_TT_EINTERNAL, "allocate", "out of host memory");
  if (r == 0) { /* BankManager::allocate_buffer, tt_metal/impl/allocator/bank_manager.cpp:449-462 */
    uint64_t used, freeb, largest;
    alloc_stats(a, &used, &freeb, &largest);
    return lb_err(OFFCARD_TT_EDEVICE, "allocate",
                  "Out of Memory: Not enough space to allocate %llu B %s buffer across %d banks, where each bank needs to store %llu B, "
                  "but bank size is %llu B (allocated: %llu B, free: %llu B, largest free block: %llu B)",
                  (unsigned long long)(t.page_size * t.num_pages), t.s.buffer == OFFCARD_TT_DRAM ? "DRAM" : "L1",
                  t.s.buffer == OFFCARD_TT_DRAM ? d->nbanks : d->ncores, (unsigned long long)t.per_bank,
                  (unsigned long long)(a->hi - a->lo), (unsigned long long)used, (unsigned long long)freeb, (unsigned long long)largest);
  }
  if (!grow((void **)&d->ts, &d->capts, d->nts + 1, sizeof *d->ts)) {
    alloc_release(a, t.addr);
    return lb_err(OFFCARD_TT_EINTERNAL, "allocate", "out of host memory");
  }
  t.id = d->nts;
  t.live = 1;
  d->ts[d->nts] = t;
  *out = &d->ts[d->nts++];
  return 0;
}

int32_t offcard_tt_allocate(offcard_tt_device *d, const int64_t *spec, uint32_t n, uint64_t *id, uint64_t *addr) {
  clear_err();
  if (!d || !id || !addr) return lb_err(OFFCARD_TT_EARG, "allocate", "NULL argument");
  lb_spec s;
  lb_tensor *t;
  int rc = spec_parse(spec, n, &s);
  if (!rc) rc = alloc_tensor(d, &s, &t);
  if (rc) return rc;
  *id = t->id, *addr = t->addr;
  return OFFCARD_TT_OK;
}

static int free_tensor(offcard_tt_device *d, lb_tensor *t) {
  t->live = 0;
  /* A handle aliasing another's buffer (to_memory_config to the same
   * config returns its input, to_memory_config_op.cpp): the buffer stays
   * until its last handle is freed. */
  for (size_t i = 1; i < d->nts; i++)
    if (d->ts[i].live && d->ts[i].s.buffer == t->s.buffer && d->ts[i].addr == t->addr) return 0;
  if (!alloc_release(t->s.buffer == OFFCARD_TT_DRAM ? &d->da : &d->la, t->addr)) return lb_err(OFFCARD_TT_EINTERNAL, "free", "out of host memory");
  return 0;
}

int32_t offcard_tt_free(offcard_tt_device *d, uint64_t id) {
  clear_err();
  if (!d) return lb_err(OFFCARD_TT_EARG, "free", "device is NULL");
  lb_tensor *t = live_tensor(d, id);
  if (!t) return lb_err(OFFCARD_TT_EARG, "free", "tensor %llu is not allocated", (unsigned long long)id);
  return free_tensor(d, t) ? OFFCARD_TT_EINTERNAL : OFFCARD_TT_OK;
}

int32_t offcard_tt_address(offcard_tt_device *d, uint64_t id, uint64_t *addr) {
  clear_err();
  if (!d || !addr) return lb_err(OFFCARD_TT_EARG, "address", "NULL argument");
  lb_tensor *t = live_tensor(d, id);
  if (!t) return lb_err(OFFCARD_TT_EARG, "address", "tensor %llu is not allocated", (unsigned long long)id);
  *addr = t->addr;
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_tensor_spec(offcard_tt_device *d, uint64_t id, int64_t *spec, uint32_t cap, uint32_t *len) {
  clear_err();
  if (!d || !len) return lb_err(OFFCARD_TT_EARG, "tensor_spec", "NULL argument");
  lb_tensor *t = live_tensor(d, id);
  if (!t) return lb_err(OFFCARD_TT_EARG, "tensor_spec", "tensor %llu is not allocated", (unsigned long long)id);
  int64_t w[OFFCARD_TT_SPEC_HEADER + OFFCARD_TT_MAX_RANK] = {t->s.rank, t->s.dtype, t->s.layout, t->s.buffer, t->s.memory,
                                                            t->s.shard_cores, t->s.shard_h, t->s.shard_w, t->s.shard_first, t->s.shard_gw};
  for (int i = 0; i < t->s.rank; i++) w[OFFCARD_TT_SPEC_HEADER + i] = t->s.dims[i];
  *len = OFFCARD_TT_SPEC_HEADER + t->s.rank;
  for (uint32_t i = 0; spec && i < cap && i < *len; i++) spec[i] = w[i];
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_write_host(offcard_tt_device *d, uint64_t id, const int64_t *shape, uint32_t rank, int32_t dtype,
                              int32_t layout, const void *data, uint64_t nbytes) {
  static const char op[] = "copy_host_to_device_tensor";
  clear_err();
  if (!d || (!shape && rank) || (!data && nbytes)) return lb_err(OFFCARD_TT_EARG, op, "NULL argument");
  uint64_t vol = 1;
  for (uint32_t i = 0; i < rank; i++) vol *= (uint64_t)shape[i];
  if (!lb_esize(dtype) || vol * lb_esize(dtype) != nbytes) return lb_err(OFFCARD_TT_EARG, op, "host tensor holds %llu bytes, want %llu", (unsigned long long)nbytes, (unsigned long long)(vol * lb_esize(dtype)));
  lb_tensor *t = live_tensor(d, id);
  if (!t) return lb_err(OFFCARD_TT_EDEVICE, op, "Tensor is not allocated");
  int same = (int32_t)rank == t->s.rank;
  for (uint32_t i = 0; same && i < rank; i++) same = shape[i] == t->s.dims[i];
  if (!same) return lb_err(OFFCARD_TT_EDEVICE, op, "Host tensor has different shape");
  if (dtype != t->s.dtype) return lb_err(OFFCARD_TT_EDEVICE, op, "Host tensor has different dtype");
  if (layout != t->s.layout) return lb_err(OFFCARD_TT_EDEVICE, op, "Host tensor has different page config");
  /* write_shard_to_device adds the trace id (fd_mesh_command_queue.cpp). */
  if (d->capturing) return lb_err(OFFCARD_TT_EDEVICE, op, "Writes are not supported during trace capture. trace id: %u", d->cur_trace);
  return lb_write_logical(d, op, t, data);
}

int32_t offcard_tt_read_host(offcard_tt_device *d, uint64_t id, void *data, uint64_t nbytes) {
  clear_err();
  if (!d || (!data && nbytes)) return lb_err(OFFCARD_TT_EARG, "read", "NULL argument");
  lb_tensor *t = live_tensor(d, id);
  if (!t) return lb_err(OFFCARD_TT_EDEVICE, "read", "Tensor is not allocated");
  if (lb_volume(&t->s) * lb_esize(t->s.dtype) != nbytes) return lb_err(OFFCARD_TT_EARG, "read", "buffer of %llu bytes, tensor holds %llu", (unsigned long long)nbytes, (unsigned long long)(lb_volume(&t->s) * lb_esize(t->s.dtype)));
  if (d->capturing) return lb_err(OFFCARD_TT_EDEVICE, "read", "Reads are not supported during trace capture.");
  return lb_read_logical(d, "read", t, data);
}

/* ---- ops and the program cache ---- */

static int prog_key(const offcard_tt_device *d, const lb_op *o, char *k, size_t cap) {
  size_t n = 0;
  n += snprintf(k + n, cap - n, "%d", o->code);
  for (uint32_t i = 0; i < o->nt && n < cap; i++) {
    if (!o->present[i] || (o->code == OFFCARD_TT_OP_CHUNKED_SDPA && o->present[4] && i >= 3)) {
      n += snprintf(k + n, cap - n, "|-");
      continue;
    }
    const lb_spec sc = lb_same_cores(d, o->t[i].s), *s = &sc;
    n += snprintf(k + n, cap - n, "|%d,%d,%d,%d,%lld,%lld,%lld,%lld,%lld:", s->dtype, s->layout, s->buffer, s->memory, (long long)s->shard_cores,
                  (long long)s->shard_h, (long long)s->shard_w, (long long)s->shard_first, (long long)s->shard_gw);
    for (int j = 0; j < s->rank && n < cap; j++) n += snprintf(k + n, cap - n, "%lld,", (long long)s->dims[j]);
  }
  for (uint32_t i = 0; i < o->nout && n < cap; i++) {
    const lb_spec sc = lb_same_cores(d, o->out[i].s), *s = &sc;
    n += snprintf(k + n, cap - n, "|out%d,%d,%d,%d,%lld,%lld,%lld,%lld,%lld", s->dtype, s->layout, s->buffer, s->memory, (long long)s->shard_cores,
                  (long long)s->shard_h, (long long)s->shard_w, (long long)s->shard_first, (long long)s->shard_gw);
  }
  /* attributes; the update-cache list values are runtime arguments, only
   * its length is part of the program */
  uint32_t ni = o->ni;
  if ((o->code == OFFCARD_TT_OP_PAGED_UPDATE_CACHE || o->code == OFFCARD_TT_OP_PAGED_FUSED_UPDATE_CACHE) && ni > 4) ni = 4;
  if (o->code == OFFCARD_TT_OP_PAGED_FILL_CACHE) ni = 0; /* batch_idx is a runtime argument */
  /* fill_cache hashes op type, cache and input only (update_cache_device_operation.cpp:160) */
  if (o->code == OFFCARD_TT_OP_FILL_CACHE) ni = 0;
  /* chunked SDPA's flexible form hashes neither chunk_start_idx nor the
   * page table (sdpa_device_operation.cpp:399-400), the legacy form both */
  if (o->code == OFFCARD_TT_OP_CHUNKED_SDPA && o->present[4]) ni = 0;
  if (o->code == OFFCARD_TT_OP_SLICE) { /* the prim's attributes: wrapped begins, padded ends (data_movement/slice/slice.cpp:366) */
    uint32_t b[OFFCARD_TT_MAX_RANK], e[OFFCARD_TT_MAX_RANK], pe[OFFCARD_TT_MAX_RANK];
    ni = 0;
    if (lb_slice_box(o, b, e, pe))
      for (int i = 0; i < o->t[0].s.rank && n < cap; i++) n += snprintf(k + n, cap - n, "#%u:%u", b[i], pe[i]);
  }
  for (uint32_t i = 0; i < ni && n < cap; i++) n += snprintf(k + n, cap - n, "#%lld", (long long)o->i[i]);
  if (o->code == OFFCARD_TT_OP_CHUNKED_SDPA && o->present[4])
    for (uint32_t i = 1; i < o->ni && n < cap; i++) n += snprintf(k + n, cap - n, "#%lld", (long long)o->i[i]);
  for (uint32_t i = 0; i < o->nf && n < cap; i++) n += snprintf(k + n, cap - n, "~%a", (double)o->f[i]);
  return n < cap;
}

int32_t offcard_tt_run(offcard_tt_device *d, int32_t code, const uint64_t *tensors, uint32_t nt, const int64_t *ia, uint32_t ni,
                       const float *fa, uint32_t nf, uint64_t *outs, uint32_t nouts) {
  clear_err();
  const char *name = lb_op_name(code);
  uint32_t want_nt, nreq, want_out;
  int own;
  if (!d || (!tensors && nt) || (!ia && ni) || (!fa && nf) || (!outs && nouts)) return lb_err(OFFCARD_TT_EARG, name, "NULL argument");
  if (!lb_op_form(code, &want_nt, &nreq, &own, &want_out)) return lb_err(OFFCARD_TT_EARG, "run", "unknown op code %d", code);
  if (nt != want_nt) return lb_err(OFFCARD_TT_EARG, name, "%s takes %u tensors, got %u", name, want_nt, nt);
  if (nouts != want_out) return lb_err(OFFCARD_TT_EARG, name, "%s allocates %u outputs, caller expects %u", name, want_out, nouts);
  if (ni > LB_MAX_I || nf > 4) return lb_err(OFFCARD_TT_EARG, name, "too many attributes");
  lb_op o;
  memset(&o, 0, sizeof o);
  o.code = code, o.nt = nt, o.nf = nf;
  for (uint32_t i = 0; i < nt; i++) {
    if (tensors[i] == 0) {
      if (i < nreq) return lb_err(OFFCARD_TT_EARG, name, "tensor argument %u is required", i);
      continue;
    }
    lb_tensor *t = live_tensor(d, tensors[i]);
    /* a freed handle is a deallocated tensor, which ttnn's launch refuses
     * (ttnn/api/ttnn/device_operation.hpp:451), as the shim and the
     * simulator do; a handle never given out is an argument error */
    if (!t && tensors[i] < d->nts) return lb_err(OFFCARD_TT_EDEVICE, name, "Input Tensor is not allocated");
    if (!t) return lb_err(OFFCARD_TT_EARG, name, "tensor %llu (argument %u) is not allocated", (unsigned long long)tensors[i], i);
    o.t[i] = *t;
    o.present[i] = 1;
  }
  /* own attributes, then one spec per allocated output; slice's own count
   * is in its lists' lengths (nb, begins, ne, ends) */
  if (own == -2) {
    int64_t nb = ni >= 1 ? ia[0] : -1, ne = nb >= 0 && nb <= OFFCARD_TT_MAX_RANK && (uint32_t)nb + 1 < ni ? ia[1 + nb] : -1;
    if (ne < 0 || ne > OFFCARD_TT_MAX_RANK) return lb_err(OFFCARD_TT_EARG, name, "%s wants nb, nb begins, ne, ne ends (at most %d each)", name, OFFCARD_TT_MAX_RANK);
    own = (int)(2 + nb + ne);
  }
  uint32_t k = own < 0 ? ni : (uint32_t)own;
  if (k > ni) return lb_err(OFFCARD_TT_EARG, name, "%s takes %d int attributes, got %u", name, own, ni);
  lb_spec specs[3];
  for (uint32_t j = 0; j < want_out; j++) {
    if (k >= ni) return lb_err(OFFCARD_TT_EARG, name, "missing output spec %u", j);
    uint32_t len = OFFCARD_TT_SPEC_HEADER + (uint32_t)(ia[k] > 0 && ia[k] <= OFFCARD_TT_MAX_RANK ? ia[k] : 0);
    if (k + len > ni || spec_parse(ia + k, len, &specs[j])) return lb_err(OFFCARD_TT_EARG, name, "bad output spec %u: %s", j, err_msg);
    k += len;
  }
  if (k != ni) return lb_err(OFFCARD_TT_EARG, name, "%u unused int attributes", ni - k);
  for (uint32_t j = 0; j < want_out; j++) o.out[j].s = specs[j];
  o.nout = want_out;
  o.ni = own < 0 ? ni : (uint32_t)own;
  memcpy(o.i, ia, o.ni * sizeof *ia);
  memcpy(o.f, fa, nf * sizeof *fa);
  d->n_op++;
  if (d->fail_op && d->n_op == d->fail_op) return lb_err(OFFCARD_TT_EINJECTED, name, "injected failure of op %ld", d->n_op);
  int rc = lb_validate(d, &o); /* on every call, hits included (ttnn validate_on_program_cache_hit) */
  if (rc) return rc;
  lb_spec want = lb_same_cores(d, specs[0]), have = lb_same_cores(d, o.t[0].s);
  if ((code == OFFCARD_TT_OP_TO_MEMORY_CONFIG || (code == OFFCARD_TT_OP_SLICE && lb_slice_noop(&o))) && !memcmp(&want, &have, sizeof want)) {
    /* ttnn::to_memory_config to the input's own config returns the input
     * tensor itself, before any program (to_memory_config_op.cpp): the new
     * handle aliases the input's buffer; nothing runs or is recorded. So
     * does a slice of the whole input (data_movement/slice/slice.cpp:181: its ret_adjustment's
     * to_memory_config and to_layout return their input). */
    if (!grow((void **)&d->ts, &d->capts, d->nts + 1, sizeof *d->ts)) return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
    lb_tensor a = d->ts[tensors[0]];
    a.id = d->nts;
    d->ts[d->nts++] = a;
    outs[0] = a.id;
    return OFFCARD_TT_OK;
  }
  char key[2048];
  if (!prog_key(d, &o, key, sizeof key)) return lb_err(OFFCARD_TT_EARG, name, "program key too long");
  int hit = 0;
  for (size_t i = 0; i < d->nprogs && !hit; i++) hit = !strcmp(d->progs[i], key);
  if (!hit) {
    char *kk = strdup(key);
    if (!kk || !grow((void **)&d->progs, &d->capprogs, d->nprogs + 1, sizeof *d->progs)) {
      free(kk);
      return lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
    }
    d->progs[d->nprogs++] = kk;
    /* a miss caches the program, then its binaries' write fails during a
       capture (tt-metal fd_mesh_command_queue.cpp:665 at 622c6fb9) */
    if (d->capturing)
      return lb_err(OFFCARD_TT_EDEVICE, name, "Writes are not supported during trace capture. trace id: %u", d->cur_trace);
  }
  for (uint32_t j = 0; j < want_out; j++) {
    lb_tensor *t;
    if ((rc = alloc_tensor(d, &specs[j], &t))) {
      for (uint32_t q = 0; q < j; q++) free_tensor(d, &d->ts[o.out[q].id]);
      return rc;
    }
    o.out[j] = *t;
  }
  if (d->capturing) {
    if (!grow((void **)&d->rec, &d->caprec, d->nrec + 1, sizeof o)) rc = lb_err(OFFCARD_TT_EINTERNAL, name, "out of host memory");
    else d->rec[d->nrec++] = o;
  } else {
    rc = lb_exec(d, &o);
  }
  if (rc) {
    for (uint32_t q = 0; q < o.nout; q++) free_tensor(d, &d->ts[o.out[q].id]);
    return rc;
  }
  for (uint32_t q = 0; q < o.nout; q++) outs[q] = o.out[q].id;
  return OFFCARD_TT_OK;
}

/* ---- trace ---- */

static lb_trace *find_trace(offcard_tt_device *d, uint32_t id) {
  for (size_t i = 0; i < d->ntraces; i++)
    if (d->traces[i].live && d->traces[i].id == id) return &d->traces[i];
  return NULL;
}

int32_t offcard_tt_begin_capture(offcard_tt_device *d, uint32_t *id) {
  clear_err();
  if (!d || !id) return lb_err(OFFCARD_TT_EARG, "begin_trace_capture", "NULL argument");
  /* begin_trace_capture takes the next id from MeshTrace's counter, which
   * starts at 0 (mesh_trace.cpp:40-42), then begin_mesh_trace refuses
   * printing that new id (mesh_device.cpp). */
  if (d->capturing) return lb_err(OFFCARD_TT_EDEVICE, "begin_trace_capture", "CQ %d is already being used for tracing tid %u", 0, d->next_trace++);
  d->n_capture++;
  if (d->fail_capture && d->n_capture == d->fail_capture)
    return lb_err(OFFCARD_TT_EINJECTED, "begin_trace_capture", "injected failure of capture %ld", d->n_capture);
  d->cur_trace = d->next_trace++;
  d->capturing = 1;
  d->nrec = 0;
  *id = d->cur_trace;
  return OFFCARD_TT_OK;
}

#define TRACE_BYTES_PER_OP 1024

int32_t offcard_tt_end_capture(offcard_tt_device *d, uint32_t id) {
  clear_err();
  if (!d) return lb_err(OFFCARD_TT_EARG, "end_trace_capture", "device is NULL");
  if (!d->capturing || id != d->cur_trace) return lb_err(OFFCARD_TT_EDEVICE, "end_trace_capture", "CQ %d is not being used for tracing tid %u", 0, id);
  d->capturing = 0;
  uint64_t used = d->failed_bytes;
  for (size_t i = 0; i < d->ntraces; i++)
    if (d->traces[i].live && !d->traces[i].failed) used += (d->traces[i].nops + 1) * TRACE_BYTES_PER_OP;
  uint64_t size = (d->nrec + 1) * TRACE_BYTES_PER_OP;
  if (!grow((void **)&d->traces, &d->captraces, d->ntraces + 1, sizeof *d->traces)) return lb_err(OFFCARD_TT_EINTERNAL, "end_trace_capture", "out of host memory");
  if (d->trace_region > 0 && used + size > d->trace_region) {
    /* populate_mesh_buffer adds the size before its check and the text
     * prints the sum; nothing takes it back, and the trace stays, empty,
     * until released (mesh_trace.cpp:59-60, 75-80, 156-161). */
    d->nrec = 0;
    d->failed_bytes += size;
    d->traces[d->ntraces++] = (lb_trace){id, NULL, 0, 1, 1};
    return lb_err(OFFCARD_TT_EDEVICE, "end_trace_capture", "Creating trace buffers of size %lluB on MeshDevice %d, but only %lluB is allocated for trace region.",
                  (unsigned long long)(used + size), 0, (unsigned long long)d->trace_region);
  }
  lb_trace t = {id, NULL, d->nrec, 1, 0};
  if (d->nrec) {
    t.ops = malloc(d->nrec * sizeof *t.ops);
    if (!t.ops) return lb_err(OFFCARD_TT_EINTERNAL, "end_trace_capture", "out of host memory");
    memcpy(t.ops, d->rec, d->nrec * sizeof *t.ops);
  }
  d->traces[d->ntraces++] = t;
  d->nrec = 0;
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_execute(offcard_tt_device *d, uint32_t id) {
  clear_err();
  if (!d) return lb_err(OFFCARD_TT_EARG, "execute_trace", "device is NULL");
  lb_trace *t = find_trace(d, id);
  if (!t)
    return lb_err(OFFCARD_TT_EDEVICE, "execute_trace", "Trace instance %u must exist on Mesh device %d's active sub-device manager %d", id, 0, 0);
  if (d->capturing) return lb_err(OFFCARD_TT_EARG, "execute_trace", "execute_trace inside a capture is not supported");
  if (t->failed) return lb_err(OFFCARD_TT_EARG, "execute_trace", "execute_trace of trace %u, whose end_trace_capture failed: the card has no buffer for it", id);
  for (size_t i = 0; i < t->nops; i++) {
    int rc = lb_exec(d, &t->ops[i]);
    if (rc) return rc;
  }
  return OFFCARD_TT_OK;
}

int32_t offcard_tt_release(offcard_tt_device *d, uint32_t id) {
  clear_err();
  if (!d) return lb_err(OFFCARD_TT_EARG, "release_trace", "device is NULL");
  lb_trace *t = find_trace(d, id);
  /* release_mesh_trace erases the id from the pool: nothing for an absent id. */
  if (!t) return OFFCARD_TT_OK;
  t->live = 0;
  free(t->ops);
  t->ops = NULL;
  t->nops = 0;
  return OFFCARD_TT_OK;
}
