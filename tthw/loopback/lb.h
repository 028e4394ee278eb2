/* Internal declarations of the loopback: offcard_tt.h implemented in C on
 * host memory. See loopback.c for what is modelled and where it comes from. */
#ifndef OFFCARD_LB_H
#define OFFCARD_LB_H

#include <stddef.h>
#include <stdint.h>

#include "offcard_tt.h"

#define LB_TILE 32
#define LB_FACE 16

typedef struct {
  int32_t rank;
  int64_t dims[OFFCARD_TT_MAX_RANK];
  int32_t dtype, layout, buffer, memory;
  int64_t shard_cores, shard_h, shard_w, shard_first, shard_gw;
} lb_spec;

/* A tensor as an op sees it: its spec, address and page geometry. Ops take
 * copies, so a recorded op keeps the address of the moment of capture. */
typedef struct {
  uint64_t id;
  lb_spec s;
  uint64_t addr;
  uint64_t page_size, aligned, num_pages, per_bank, shard_pages;
  int live;
} lb_tensor;

/* One memory (a DRAM bank or one core's L1): sparse 64 KiB chunks created on
 * first write; never-written bytes read as the poison pattern. */
typedef struct {
  uint64_t size;
  uint8_t **chunks;
  uint64_t nchunks;
} lb_mem;

typedef struct {
  uint64_t addr, size;
} lb_block;

/* First-fit allocator over [lo, hi), one address in every bank. */
typedef struct {
  uint64_t lo, hi, align;
  int bottom_up;
  lb_block *free;
  size_t nfree, capfree;
  lb_block *used;
  size_t nused, capused;
} lb_alloc;

#define LB_MAX_T 8
#define LB_MAX_I 80

/* One op: code, tensors (copies), attributes. */
typedef struct {
  int32_t code;
  lb_tensor t[LB_MAX_T];
  int present[LB_MAX_T];
  uint32_t nt;
  int64_t i[LB_MAX_I];
  uint32_t ni;
  float f[4];
  uint32_t nf;
  lb_tensor out[3]; /* outputs the device allocated */
  uint32_t nout;
} lb_op;

typedef struct {
  uint32_t id;
  lb_op *ops;
  size_t nops;
  int live;
  int failed; /* its end failed (region too small): kept, bufferless, until released (tt_metal/distributed/mesh_device.cpp:1314, 1345) */
} lb_trace;

struct offcard_tt_device {
  int arch; /* 1 Wormhole, 2 Blackhole */
  int nbanks, ncores, grid_x, grid_y;
  uint64_t dram_align, l1_align, bank_size, l1_size, trace_region, l1_base, dram_base;
  lb_mem *dram, *l1;
  lb_alloc da, la;
  lb_tensor *ts; /* index = id */
  size_t nts, capts;
  char **progs; /* program cache keys */
  size_t nprogs, capprogs;
  int capturing;
  uint32_t cur_trace, next_trace;
  uint64_t failed_bytes; /* trace bytes failed ends left in the trace buffers size (mesh_trace.cpp:59-60, 156-161) */
  lb_op *rec;
  size_t nrec, caprec;
  lb_trace *traces;
  size_t ntraces, captraces;
  /* fault injection */
  long fail_alloc, fail_op, fail_capture, n_alloc, n_op, n_capture;
  uint32_t abi;
};

/* errors (loopback.c) */
int32_t lb_err(int32_t status, const char *op, const char *fmt, ...);

/* memory (loopback.c) */
void lb_page_at(const offcard_tt_device *d, const lb_tensor *t, uint64_t p, int *l1, int *bank, uint64_t *addr);
/* lb_grid_w is the width of s's core numbering (OFFCARD_TT_SPEC_SHARD_GRID_W,
 * 0 the worker grid's); lb_core the worker core (row-major over the whole
 * grid) of core first+i of that numbering; lb_same_cores normalises a width
 * equal to the worker grid's to 0 (the two name the same cores). */
int64_t lb_grid_w(const offcard_tt_device *d, const lb_spec *s);
int64_t lb_core(const offcard_tt_device *d, const lb_spec *s, int64_t i);
lb_spec lb_same_cores(const offcard_tt_device *d, lb_spec s);
int lb_io(offcard_tt_device *d, const char *op, int l1, int bank, uint64_t addr, void *buf, uint64_t n, int write);
int lb_page_io(offcard_tt_device *d, const char *op, const lb_tensor *t, uint64_t page, void *buf, int write);
int lb_read_logical(offcard_tt_device *d, const char *op, const lb_tensor *t, void *out);
int lb_write_logical(offcard_tt_device *d, const char *op, const lb_tensor *t, const void *in);
uint64_t lb_volume(const lb_spec *s);
int lb_esize(int32_t dtype);
int64_t lb_padded(const lb_spec *s, int i);
int lb_tile_elem(int r, int c);

/* ops (ops.c): validate, then execute */
int lb_validate(offcard_tt_device *d, const lb_op *o);
/* lb_geometry fills t's page size, pages and size per bank from t->s. */
int lb_geometry(offcard_tt_device *d, lb_tensor *t);
/* lb_op_form gives an op's tensor count, required tensors, own int
 * attributes (-1: variable, the update-cache list) and allocated outputs; 0
 * for an unknown op. */
int lb_op_form(int32_t code, uint32_t *nt, uint32_t *nreq, int *nints, uint32_t *nout);
int lb_exec(offcard_tt_device *d, const lb_op *o);
const char *lb_op_name(int32_t code);
/* slice's wrapped begins and ends, padded ends (0: lists do not fit), and
 * whether it is ttnn's no-op slice (the whole input) */
int lb_slice_box(const lb_op *o, uint32_t *b, uint32_t *e, uint32_t *pe);
int lb_slice_noop(const lb_op *o);

float lb_bf16_to_f32(uint16_t b);
uint16_t lb_f32_to_bf16(float f);

#endif
