// offcard_tt_ttnn.cpp — offcard_tt.h implemented in C++ over ttnn, for a
// machine with a Tenstorrent card and tt-metal installed (pinned to tt-metal
// 622c6fb9; see README.md for the build). Every entry point catches every
// exception (std::exception and ...) and turns it into a status and the
// message text: TT_FATAL/TT_THROW throw std::runtime_error whose what() holds
// "info:\n<message>\nbacktrace:..." (tt_stl/tt_stl/assert.hpp); the message
// part is what offcard compares with the simulator's texts. The library
// refuses to open a device when TT_ASSERT_ABORT is set, because tt-metal
// would then abort() the process instead of throwing.
//
// All ttnn calls are written with every argument positional up to the last
// one used, so a signature change at another tt-metal commit fails to
// compile instead of silently binding another parameter.

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <stdexcept>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <tt-metalium/bfloat16.hpp>
#include <tt-metalium/work_split.hpp>

#include "ttnn/device.hpp"
#include "ttnn/operations/core/core.hpp"
#include "ttnn/operations/data_movement/copy/copy.hpp"
#include "ttnn/operations/data_movement/reshape_view/reshape.hpp"
#include "ttnn/operations/embedding/embedding.hpp"
#include "ttnn/operations/normalization/rmsnorm/rmsnorm.hpp"
#include "ttnn/operations/matmul/matmul.hpp"
#include "ttnn/operations/experimental/transformer/nlp_create_qkv_heads_decode/nlp_create_qkv_heads_decode.hpp"
#include "ttnn/operations/experimental/transformer/nlp_create_qkv_heads/nlp_create_qkv_heads.hpp"
#include "ttnn/operations/experimental/transformer/rotary_embedding_hf/rotary_embedding_hf.hpp"
#include "ttnn/operations/experimental/transformer/rotary_embedding_llama/rotary_embedding_llama.hpp"
#include "ttnn/operations/experimental/paged_cache/paged_cache.hpp"
#include "ttnn/operations/transformer/sdpa_decode/sdpa_decode.hpp"
#include "ttnn/operations/transformer/sdpa/sdpa.hpp"
#include "ttnn/operations/experimental/transformer/nlp_concat_heads_decode/nlp_concat_heads_decode.hpp"
#include "ttnn/operations/experimental/transformer/nlp_concat_heads/nlp_concat_heads.hpp"
#include "ttnn/operations/eltwise/binary/binary.hpp"
#include "ttnn/operations/eltwise/unary/common/unary_op_types.hpp"
#include "ttnn/operations/reduction/argmax/argmax.hpp"
#include "ttnn/operations/experimental/plusone/plusone.hpp"
#include "ttnn/operations/kv_cache/kv_cache.hpp"
#include "ttnn/operations/data_movement/slice/slice.hpp"
#include "ttnn/operations/trace.hpp"
#include "ttnn/tensor/tensor.hpp"

#include "offcard_tt.h"

#ifndef OFFCARD_TT_METAL_COMMIT
#define OFFCARD_TT_METAL_COMMIT "unknown"
#endif

using tt::tt_metal::BufferType;
using tt::tt_metal::CoreCoord;
using tt::tt_metal::CoreRange;
using tt::tt_metal::CoreRangeSet;
using tt::tt_metal::DataType;
using tt::tt_metal::Layout;
using tt::tt_metal::MemoryConfig;
using tt::tt_metal::PageConfig;
using tt::tt_metal::ShardOrientation;
using tt::tt_metal::ShardSpec;
using tt::tt_metal::TensorLayout;
using tt::tt_metal::TensorMemoryLayout;
using tt::tt_metal::TensorSpec;
using ttnn::Tensor;

namespace {

thread_local std::string err_msg;
thread_local std::string err_op;

// status is a failure to report: code, op, message.
struct status_error {
  int32_t code;
  std::string msg;
};

[[noreturn]] void fail(int32_t code, std::string msg) { throw status_error{code, std::move(msg)}; }

// tt_message extracts the TT_FATAL message: the text between "info:\n" and
// "\nbacktrace:", or what() up to the backtrace when there is no info block.
std::string tt_message(const char *what) {
  std::string s(what ? what : "");
  size_t a = s.find("info:\n");
  size_t b = s.find("\nbacktrace:");
  if (a != std::string::npos) {
    a += 6;
    return s.substr(a, b == std::string::npos || b < a ? std::string::npos : b - a);
  }
  return b == std::string::npos ? s : s.substr(0, b);
}

// tt_raised reports whether what() is a TT_FATAL/TT_THROW's: tt_throw_impl
// starts it with "<assert type> @ <file>:<line>: " (tt_stl/tt_stl/assert.hpp).
bool tt_raised(const char *what) {
  std::string s(what ? what : "");
  return (s.rfind("TT_FATAL @ ", 0) == 0 || s.rfind("TT_THROW @ ", 0) == 0 || s.rfind("TT_ASSERT @ ", 0) == 0);
}

// guard runs f, turning every exception into a status and the last error:
// a TT_FATAL/TT_THROW is the device's refusal (EDEVICE, its message text);
// so is std::bad_optional_access, which ttnn's program factories raise on
// a missing shard spec (the simulator gives the same text); a standard
// argument error raised by the shim's own parsing (std::stoull, map::at)
// is EARG; anything else EINTERNAL.
template <class F>
int32_t guard(const char *op, F &&f) {
  err_msg.clear();
  err_op.clear();
  try {
    f();
    return OFFCARD_TT_OK;
  } catch (const status_error &e) {
    err_op = op, err_msg = e.msg;
    return e.code;
  } catch (const std::bad_optional_access &e) {
    err_op = op, err_msg = e.what();
    return OFFCARD_TT_EDEVICE;
  } catch (const std::invalid_argument &e) {
    err_op = op, err_msg = e.what();
    return OFFCARD_TT_EARG;
  } catch (const std::out_of_range &e) {
    err_op = op, err_msg = e.what();
    return OFFCARD_TT_EARG;
  } catch (const std::exception &e) {
    err_op = op, err_msg = tt_message(e.what());
    return tt_raised(e.what()) ? OFFCARD_TT_EDEVICE : OFFCARD_TT_EINTERNAL;
  } catch (...) {
    err_op = op, err_msg = "unknown C++ exception";
    return OFFCARD_TT_EINTERNAL;
  }
}

}  // namespace

struct offcard_tt_device {
  std::shared_ptr<ttnn::MeshDevice> mesh;
  std::map<uint64_t, Tensor> tensors;
  uint64_t next_id = 1;
  // traces holds every trace id ttnn holds a buffer for: begin_mesh_trace
  // creates the trace in the sub-device manager at begin (mesh_device.cpp),
  // so an open or failed capture is one too until released.
  std::set<uint32_t> traces;
  // freed: the handles free dropped, each holding its deallocated tensor
  // (ttnn::Tensor keeps a tombstone of its spec): an op, write or read
  // through one passes it to ttnn, which answers with its own text
  // ("Input Tensor is not allocated", ttnn/api/ttnn/device_operation.hpp:451;
  // "Tensor is not allocated", ttnn/core/tensor/storage.cpp:165), as the
  // simulator and the loopback do.
  std::map<uint64_t, Tensor> freed;
  bool capturing = false;
  uint32_t tracing = 0;
  int64_t trace_region = 0;
  CoreCoord grid;
  std::string arch;
};

namespace {

DataType dtype_of(int64_t c) {
  switch (c) {
    case OFFCARD_TT_BF16: return DataType::BFLOAT16;
    case OFFCARD_TT_FP32: return DataType::FLOAT32;
    case OFFCARD_TT_INT32: return DataType::INT32;
    case OFFCARD_TT_UINT32: return DataType::UINT32;
    case OFFCARD_TT_UINT16: return DataType::UINT16;
  }
  fail(OFFCARD_TT_EARG, "invalid dtype " + std::to_string(c));
}

int64_t dtype_code(DataType d) {
  switch (d) {
    case DataType::BFLOAT16: return OFFCARD_TT_BF16;
    case DataType::FLOAT32: return OFFCARD_TT_FP32;
    case DataType::INT32: return OFFCARD_TT_INT32;
    case DataType::UINT32: return OFFCARD_TT_UINT32;
    case DataType::UINT16: return OFFCARD_TT_UINT16;
    default: return 0;
  }
}

size_t esize(int64_t c) { return c == OFFCARD_TT_BF16 || c == OFFCARD_TT_UINT16 ? 2 : 4; }

// memory builds ttnn's MemoryConfig from spec words (header part).
MemoryConfig memory(const offcard_tt_device *d, const int64_t *w) {
  BufferType bt = w[OFFCARD_TT_SPEC_BUFFER] == OFFCARD_TT_L1 ? BufferType::L1 : BufferType::DRAM;
  int64_t ml = w[OFFCARD_TT_SPEC_MEMORY];
  if (ml == OFFCARD_TT_INTERLEAVED) return MemoryConfig(TensorMemoryLayout::INTERLEAVED, bt);
  if (ml != OFFCARD_TT_HEIGHT_SHARDED && ml != OFFCARD_TT_WIDTH_SHARDED) fail(OFFCARD_TT_EARG, "invalid memory layout " + std::to_string(ml));
  uint32_t first = (uint32_t)w[OFFCARD_TT_SPEC_SHARD_FIRST], cores = (uint32_t)w[OFFCARD_TT_SPEC_SHARD_CORES];
  int64_t gw = w[OFFCARD_TT_SPEC_SHARD_GRID_W];
  if (gw < 0 || gw > (int64_t)d->grid.x) fail(OFFCARD_TT_EARG, "shard grid width " + std::to_string(gw) + " outside the worker grid's " + std::to_string(d->grid.x) + " columns");
  CoreRangeSet grid;
  if (gw == 0 || gw == (int64_t)d->grid.x) {
    grid = tt::tt_metal::num_cores_to_corerangeset(CoreCoord{first % d->grid.x, first / d->grid.x}, cores, d->grid, /*row_wise=*/true);
  } else {
    // The leftmost gw columns, walked row-wise (tt_transformers' 8-wide
    // users' rectangle; tt_metal/common/work_split.cpp:150-310).
    uint32_t x = (uint32_t)gw;
    CoreRangeSet cols(CoreRange(CoreCoord{0, 0}, CoreCoord{x - 1, d->grid.y - 1}));
    grid = tt::tt_metal::num_cores_to_corerangeset_in_subcoregrids(CoreCoord{first % x, first / x}, cores, cols, /*row_wise=*/true);
  }
  ShardSpec shard(grid, {(uint32_t)w[OFFCARD_TT_SPEC_SHARD_H], (uint32_t)w[OFFCARD_TT_SPEC_SHARD_W]}, ShardOrientation::ROW_MAJOR);
  return MemoryConfig(ml == OFFCARD_TT_HEIGHT_SHARDED ? TensorMemoryLayout::HEIGHT_SHARDED : TensorMemoryLayout::WIDTH_SHARDED, bt, shard);
}

TensorSpec spec_of(const offcard_tt_device *d, const int64_t *w, uint32_t n) {
  if (!w || n < OFFCARD_TT_SPEC_HEADER || (int64_t)n != OFFCARD_TT_SPEC_HEADER + w[OFFCARD_TT_SPEC_RANK] || w[0] < 1 || w[0] > OFFCARD_TT_MAX_RANK)
    fail(OFFCARD_TT_EARG, "malformed spec");
  ttsl::SmallVector<uint32_t> dims;
  for (uint32_t i = OFFCARD_TT_SPEC_HEADER; i < n; i++) dims.push_back((uint32_t)w[i]);
  Layout layout = w[OFFCARD_TT_SPEC_LAYOUT] == OFFCARD_TT_TILE ? Layout::TILE : Layout::ROW_MAJOR;
  return TensorSpec(ttnn::Shape(dims), TensorLayout(dtype_of(w[OFFCARD_TT_SPEC_DTYPE]), PageConfig(layout), memory(d, w)));
}

std::vector<int64_t> words_of(const offcard_tt_device *d, const Tensor &t) {
  std::vector<int64_t> w(OFFCARD_TT_SPEC_HEADER, 0);
  auto shape = t.logical_shape();
  w[OFFCARD_TT_SPEC_RANK] = (int64_t)shape.rank();
  w[OFFCARD_TT_SPEC_DTYPE] = dtype_code(t.dtype());
  w[OFFCARD_TT_SPEC_LAYOUT] = t.layout() == Layout::TILE ? OFFCARD_TT_TILE : OFFCARD_TT_ROW_MAJOR;
  const MemoryConfig &mc = t.memory_config();
  w[OFFCARD_TT_SPEC_BUFFER] = mc.buffer_type() == BufferType::L1 ? OFFCARD_TT_L1 : OFFCARD_TT_DRAM;
  switch (mc.memory_layout()) {
    case TensorMemoryLayout::INTERLEAVED: w[OFFCARD_TT_SPEC_MEMORY] = OFFCARD_TT_INTERLEAVED; break;
    case TensorMemoryLayout::HEIGHT_SHARDED: w[OFFCARD_TT_SPEC_MEMORY] = OFFCARD_TT_HEIGHT_SHARDED; break;
    case TensorMemoryLayout::WIDTH_SHARDED: w[OFFCARD_TT_SPEC_MEMORY] = OFFCARD_TT_WIDTH_SHARDED; break;
    default: w[OFFCARD_TT_SPEC_MEMORY] = 0;
  }
  if (auto sh = mc.shard_spec()) {
    auto box = sh->grid.bounding_box();
    auto start = box.start_coord;
    // A grid over more than one row whose columns stop short of the worker
    // grid's is numbered over its own width (OFFCARD_TT_SPEC_SHARD_GRID_W).
    uint32_t gw = box.end_coord.y > start.y && box.end_coord.x + 1 < d->grid.x ? (uint32_t)box.end_coord.x + 1 : 0;
    uint32_t x = gw ? gw : (uint32_t)d->grid.x;
    w[OFFCARD_TT_SPEC_SHARD_CORES] = sh->grid.num_cores();
    w[OFFCARD_TT_SPEC_SHARD_H] = sh->shape[0];
    w[OFFCARD_TT_SPEC_SHARD_W] = sh->shape[1];
    w[OFFCARD_TT_SPEC_SHARD_FIRST] = (int64_t)(start.y * x + start.x);
    w[OFFCARD_TT_SPEC_SHARD_GRID_W] = gw;
  }
  for (size_t i = 0; i < shape.rank(); i++) w.push_back(shape[i]);
  return w;
}

// live is a handle's tensor; an unknown or freed handle is an argument
// error (free, address, tensor_spec).
Tensor &live(offcard_tt_device *d, uint64_t id, uint32_t arg) {
  auto it = d->tensors.find(id);
  if (it == d->tensors.end()) fail(OFFCARD_TT_EARG, "tensor " + std::to_string(id) + " (argument " + std::to_string(arg) + ") is not allocated");
  return it->second;
}

// tensor is live, or a freed handle's deallocated tensor (ops, writes,
// reads: ttnn refuses it with its own text).
Tensor &tensor(offcard_tt_device *d, uint64_t id, uint32_t arg) {
  if (auto f = d->freed.find(id); f != d->freed.end()) return f->second;
  return live(d, id, arg);
}

std::optional<Tensor> optional_tensor(offcard_tt_device *d, uint64_t id, uint32_t arg) {
  if (id == 0) return std::nullopt;
  return tensor(d, id, arg);
}

uint64_t keep(offcard_tt_device *d, Tensor t) {
  uint64_t id = d->next_id++;
  d->tensors.emplace(id, std::move(t));
  return id;
}

uint64_t address(const Tensor &t) { return t.mesh_buffer().address(); }

// host_tensor builds a host tensor of the given logical shape, dtype and
// layout from logical bytes (ttnn tilizes TILE specs on the host).
Tensor host_tensor(const TensorSpec &spec, int32_t dt, const void *data, uint64_t n) {
  size_t count = n / esize(dt);
  switch (dt) {
    case OFFCARD_TT_BF16: {
      std::vector<bfloat16> v(count);
      const uint16_t *p = static_cast<const uint16_t *>(data);
      for (size_t i = 0; i < count; i++) v[i] = std::bit_cast<bfloat16>(p[i]);
      return Tensor::from_vector(std::move(v), spec);
    }
    case OFFCARD_TT_FP32: {
      std::vector<float> v(count);
      std::memcpy(v.data(), data, n);
      return Tensor::from_vector(std::move(v), spec);
    }
    case OFFCARD_TT_INT32: {
      std::vector<int32_t> v(count);
      std::memcpy(v.data(), data, n);
      return Tensor::from_vector(std::move(v), spec);
    }
    case OFFCARD_TT_UINT32: {
      std::vector<uint32_t> v(count);
      std::memcpy(v.data(), data, n);
      return Tensor::from_vector(std::move(v), spec);
    }
    case OFFCARD_TT_UINT16: {
      std::vector<uint16_t> v(count);
      std::memcpy(v.data(), data, n);
      return Tensor::from_vector(std::move(v), spec);
    }
  }
  fail(OFFCARD_TT_EARG, "invalid dtype");
}

template <class T>
void copy_out(const Tensor &host, void *out, uint64_t n) {
  std::vector<T> v = host.to_vector<T>();
  if (v.size() * sizeof(T) != n) fail(OFFCARD_TT_EARG, "buffer of " + std::to_string(n) + " bytes, tensor holds " + std::to_string(v.size() * sizeof(T)));
  std::memcpy(out, v.data(), n);
}

// options parses every "key=value" pair of the open options, refusing any
// key but arch and trace_region (fault injection is the loopback's) and a
// key given twice, wherever it stands.
std::map<std::string, std::string> options(const char *opts) {
  std::map<std::string, std::string> out;
  std::string s(opts ? opts : "");
  size_t p = 0;
  while (p < s.size()) {
    size_t e = s.find(';', p);
    std::string kv = s.substr(p, e == std::string::npos ? std::string::npos : e - p);
    kv.erase(0, kv.find_first_not_of(' '));  // as the loopback: spaces before a key are skipped
    size_t eq = kv.find('=');
    std::string k = kv.substr(0, eq);
    if (!k.empty()) {
      if (k != "arch" && k != "trace_region")
        fail(OFFCARD_TT_EARG, "option " + k + " is not supported by the ttnn shim (fault injection is the loopback's)");
      if (eq == std::string::npos) fail(OFFCARD_TT_EARG, "option " + k + " has no value");
      if (!out.emplace(k, kv.substr(eq + 1)).second) fail(OFFCARD_TT_EARG, "option " + k + " given twice");
    }
    if (e == std::string::npos) break;
    p = e + 1;
  }
  return out;
}

// same_buffer reports whether two handles' tensors share one device buffer
// (ttnn::to_memory_config to the input's own config returns the input).
bool same_buffer(const Tensor &a, const Tensor &b) {
  return a.is_allocated() && b.is_allocated() && a.memory_config().buffer_type() == b.memory_config().buffer_type() &&
         a.mesh_buffer().address() == b.mesh_buffer().address();
}

// release deallocates handle id's tensor unless another live handle shares
// its buffer, then drops the handle.
void release(offcard_tt_device *d, uint64_t id) {
  auto it = d->tensors.find(id);
  bool shared = false;
  for (auto &[other, t] : d->tensors)
    if (other != id && same_buffer(t, it->second)) shared = true;
  if (!shared) {
    it->second.deallocate(true);
    d->freed.insert_or_assign(id, it->second);  // an alias's buffer lives on: its handle is just dropped
  }
  d->tensors.erase(it);
}

ttnn::DeviceComputeKernelConfig fp32_acc(offcard_tt_device *d) {
  return ttnn::init_device_compute_kernel_config(d->mesh->arch(), std::nullopt, tt::tt_metal::MathFidelity::HiFi4, true, true, false);
}

// expect checks that ttnn allocated what the contract's OutputSpecs says.
void expect(offcard_tt_device *d, const Tensor &t, const int64_t *w, uint32_t n) {
  std::vector<int64_t> got = words_of(d, t);
  if (got.size() != n || !std::equal(got.begin(), got.end(), w))
    fail(OFFCARD_TT_EINTERNAL, "ttnn allocated an output whose spec differs from the contract's OutputSpecs");
}

}  // namespace

extern "C" {

const char *offcard_tt_last_error(void) { return err_msg.c_str(); }
const char *offcard_tt_last_error_op(void) { return err_op.c_str(); }

int32_t offcard_tt_abi_version(const char *, uint32_t *version) {
  return guard("abi_version", [&] {
    if (!version) fail(OFFCARD_TT_EARG, "version is NULL");
    *version = OFFCARD_TT_ABI_VERSION;
  });
}

int32_t offcard_tt_open(uint32_t abi_version, const char *options_text, offcard_tt_device **out) {
  return guard("open", [&] {
    if (!out) fail(OFFCARD_TT_EARG, "device pointer is NULL");
    *out = nullptr;
    if (abi_version != OFFCARD_TT_ABI_VERSION)
      fail(OFFCARD_TT_EABI, "caller speaks offcard_tt ABI " + std::to_string(abi_version) + ", this library implements " + std::to_string(OFFCARD_TT_ABI_VERSION));
    if (std::getenv("TT_ASSERT_ABORT"))
      fail(OFFCARD_TT_EARG, "TT_ASSERT_ABORT is set: tt-metal would abort() on the first TT_FATAL instead of reporting it; unset it");
    auto opts = options(options_text);
    std::optional<std::string> arch;
    if (opts.count("arch")) arch = opts["arch"];
    size_t trace_region = DEFAULT_TRACE_REGION_SIZE;
    if (opts.count("trace_region")) {
      size_t used = 0;
      const std::string &v = opts["trace_region"];
      trace_region = std::stoull(v, &used);
      if (used != v.size() || v[0] == '-') fail(OFFCARD_TT_EARG, "trace_region=" + v + " is not a byte count");
    }
    auto d = std::make_unique<offcard_tt_device>();
    d->trace_region = (int64_t)trace_region;
    d->mesh = ttnn::open_mesh_device(0, DEFAULT_L1_SMALL_SIZE, trace_region);
    d->grid = d->mesh->compute_with_storage_grid_size();
    d->arch = d->mesh->arch() == tt::ARCH::BLACKHOLE ? "blackhole" : d->mesh->arch() == tt::ARCH::WORMHOLE_B0 ? "wormhole" : "other";
    if (arch && *arch != d->arch) {
      ttnn::close_device(*d->mesh);
      fail(OFFCARD_TT_EARG, "arch=" + *arch + " asked for, the card is " + d->arch);
    }
    *out = d.release();
  });
}

int32_t offcard_tt_close(offcard_tt_device *d, uint64_t *leaked_tensors, uint64_t *leaked_traces) {
  return guard("close", [&] {
    if (!d) fail(OFFCARD_TT_EARG, "device is NULL");
    if (leaked_tensors) *leaked_tensors = d->tensors.size();
    if (leaked_traces) *leaked_traces = d->traces.size();
    std::unique_ptr<offcard_tt_device> owned(d);
    // An open capture is ended first (its CQ is still recording); a
    // failure to end it does not stop the rest of the cleanup.
    if (d->capturing) {
      try {
        ttnn::operations::trace::end_trace_capture(d->mesh.get(), ttnn::MeshTraceId(d->tracing), std::nullopt);
      } catch (...) {
      }
      d->capturing = false;
    }
    for (uint32_t id : d->traces) ttnn::operations::trace::release_trace(d->mesh.get(), ttnn::MeshTraceId(id));
    while (!d->tensors.empty()) release(d, d->tensors.begin()->first);
    d->freed.clear();
    ttnn::close_device(*d->mesh);
  });
}

int32_t offcard_tt_build_info(offcard_tt_device *d, char *buf, uint64_t cap, uint64_t *len) {
  return guard("build_info", [&] {
    if (!d || !len) fail(OFFCARD_TT_EARG, "NULL argument");
    std::string s = std::string("implementation=ttnn\ntt_metal_commit=") + OFFCARD_TT_METAL_COMMIT + "\narch=" + d->arch + "\n";
    *len = s.size();
    if (buf && cap) std::memcpy(buf, s.c_str(), std::min<uint64_t>(cap, s.size() + 1));
  });
}

int32_t offcard_tt_device_facts(offcard_tt_device *d, int64_t *f, uint32_t n) {
  return guard("device_facts", [&] {
    if (!d || (!f && n)) fail(OFFCARD_TT_EARG, "NULL argument");
    const auto &alloc = d->mesh->allocator();
    int64_t all[OFFCARD_TT_FACTS] = {
        d->arch == "wormhole" ? 1 : d->arch == "blackhole" ? 2 : -1,
        (int64_t)alloc->get_num_banks(BufferType::DRAM),
        (int64_t)alloc->get_alignment(BufferType::DRAM),
        (int64_t)alloc->get_alignment(BufferType::L1),
        (int64_t)d->mesh->l1_size_per_core(),
        (int64_t)d->mesh->dram_size_per_channel(),
        (int64_t)d->grid.x,
        (int64_t)d->grid.y,
        d->trace_region};
    for (uint32_t i = 0; i < n; i++) f[i] = i < OFFCARD_TT_FACTS ? all[i] : -1;
  });
}

int32_t offcard_tt_live(offcard_tt_device *d, uint64_t *tensors, uint64_t *traces) {
  return guard("live", [&] {
    if (!d || !tensors || !traces) fail(OFFCARD_TT_EARG, "NULL argument");
    *tensors = d->tensors.size();
    *traces = d->traces.size() - (d->capturing ? 1 : 0);  // captured traces; an open capture is not one yet
  });
}

int32_t offcard_tt_allocate(offcard_tt_device *d, const int64_t *spec, uint32_t n, uint64_t *id, uint64_t *addr) {
  return guard("allocate", [&] {
    if (!d || !id || !addr) fail(OFFCARD_TT_EARG, "NULL argument");
    Tensor t = tt::tt_metal::create_device_tensor(spec_of(d, spec, n), d->mesh.get());
    *addr = address(t);
    *id = keep(d, std::move(t));
  });
}

int32_t offcard_tt_free(offcard_tt_device *d, uint64_t id) {
  return guard("free", [&] {
    if (!d) fail(OFFCARD_TT_EARG, "device is NULL");
    live(d, id, 0);  // refuses an unknown or freed handle
    release(d, id);
  });
}

int32_t offcard_tt_address(offcard_tt_device *d, uint64_t id, uint64_t *addr) {
  return guard("address", [&] {
    if (!d || !addr) fail(OFFCARD_TT_EARG, "NULL argument");
    *addr = address(live(d, id, 0));
  });
}

int32_t offcard_tt_tensor_spec(offcard_tt_device *d, uint64_t id, int64_t *spec, uint32_t cap, uint32_t *len) {
  return guard("tensor_spec", [&] {
    if (!d || !len) fail(OFFCARD_TT_EARG, "NULL argument");
    std::vector<int64_t> w = words_of(d, live(d, id, 0));
    *len = (uint32_t)w.size();
    for (uint32_t i = 0; spec && i < cap && i < w.size(); i++) spec[i] = w[i];
  });
}

int32_t offcard_tt_write_host(offcard_tt_device *d, uint64_t id, const int64_t *shape, uint32_t rank, int32_t dtype, int32_t layout,
                              const void *data, uint64_t nbytes) {
  return guard("copy_host_to_device_tensor", [&] {
    if (!d || (!shape && rank) || (!data && nbytes)) fail(OFFCARD_TT_EARG, "NULL argument");
    Tensor &dst = tensor(d, id, 0);
    std::vector<int64_t> w = {rank, dtype, layout, OFFCARD_TT_DRAM, OFFCARD_TT_INTERLEAVED, 0, 0, 0, 0};
    for (uint32_t i = 0; i < rank; i++) w.push_back(shape[i]);
    Tensor host = host_tensor(spec_of(d, w.data(), (uint32_t)w.size()), dtype, data, nbytes);
    tt::tt_metal::copy_to_device(host, dst, std::nullopt);
  });
}

int32_t offcard_tt_read_host(offcard_tt_device *d, uint64_t id, void *data, uint64_t nbytes) {
  return guard("read", [&] {
    if (!d || (!data && nbytes)) fail(OFFCARD_TT_EARG, "NULL argument");
    Tensor host = tensor(d, id, 0).cpu(/*blocking=*/true);
    switch (dtype_code(host.dtype())) {
      case OFFCARD_TT_BF16: {
        std::vector<bfloat16> v = host.to_vector<bfloat16>();
        if (v.size() * 2 != nbytes) fail(OFFCARD_TT_EARG, "short buffer");
        for (size_t i = 0; i < v.size(); i++) {
          uint16_t b = std::bit_cast<uint16_t>(v[i]);
          std::memcpy(static_cast<char *>(data) + 2 * i, &b, 2);
        }
        break;
      }
      case OFFCARD_TT_FP32: copy_out<float>(host, data, nbytes); break;
      case OFFCARD_TT_INT32: copy_out<int32_t>(host, data, nbytes); break;
      case OFFCARD_TT_UINT32: copy_out<uint32_t>(host, data, nbytes); break;
      case OFFCARD_TT_UINT16: copy_out<uint16_t>(host, data, nbytes); break;
      default: fail(OFFCARD_TT_EARG, "unsupported dtype");
    }
  });
}

int32_t offcard_tt_run(offcard_tt_device *d, int32_t op, const uint64_t *ts, uint32_t nt, const int64_t *ia, uint32_t ni,
                       const float *fa, uint32_t nf, uint64_t *outs, uint32_t nouts) {
  static const char *names[] = {"",
                                "embedding",
                                "rms_norm",
                                "linear",
                                "nlp_create_qkv_heads_decode",
                                "rotary_embedding_hf",
                                "paged_update_cache",
                                "paged_fused_update_cache",
                                "paged_fill_cache",
                                "paged_scaled_dot_product_attention_decode",
                                "nlp_concat_heads_decode",
                                "add",
                                "multiply",
                                "argmax",
                                "plus_one",
                                "rotary_embedding_llama",
                                "to_memory_config",
                                "copy",
                                "nlp_create_qkv_heads",
                                "scaled_dot_product_attention",
                                "nlp_concat_heads",
                                "chunked_scaled_dot_product_attention",
                                "fill_cache",
                                "slice"};
  static_assert(sizeof names / sizeof names[0] == OFFCARD_TT_OP_LAST + 1, "one name per op code");
  const char *name = op >= 1 && op <= OFFCARD_TT_OP_LAST ? names[op] : "run";
  return guard(name, [&] {
    if (!d || (!ts && nt) || (!ia && ni) || (!fa && nf) || (!outs && nouts)) fail(OFFCARD_TT_EARG, "NULL argument");
    auto T = [&](uint32_t i) -> Tensor & {
      if (i >= nt) fail(OFFCARD_TT_EARG, "missing tensor argument " + std::to_string(i));
      return tensor(d, ts[i], i);
    };
    auto OT = [&](uint32_t i) { return i < nt ? optional_tensor(d, ts[i], i) : std::nullopt; };
    auto I = [&](uint32_t i) -> int64_t {
      if (i >= ni) fail(OFFCARD_TT_EARG, "missing int attribute " + std::to_string(i));
      return ia[i];
    };
    auto F = [&](uint32_t i) -> float {
      if (i >= nf) fail(OFFCARD_TT_EARG, "missing float attribute " + std::to_string(i));
      return fa[i];
    };
    // out_spec(k, j): output j's expected spec words, starting at int k.
    std::vector<std::pair<const int64_t *, uint32_t>> specs;
    auto take_specs = [&](uint32_t k, uint32_t count) {
      for (uint32_t j = 0; j < count; j++) {
        uint32_t len = OFFCARD_TT_SPEC_HEADER + (uint32_t)I(k);
        if (k + len > ni) fail(OFFCARD_TT_EARG, "short output spec");
        specs.emplace_back(ia + k, len);
        k += len;
      }
      if (nouts != count) fail(OFFCARD_TT_EARG, "wrong output count");
    };
    auto mem = [&](uint32_t j) { return memory(d, specs.at(j).first); };
    std::vector<Tensor> made;
    switch (op) {
      case OFFCARD_TT_OP_EMBEDDING: {
        Tensor out = T(2);
        // The output's own layout: TILE with tile-multiple ids and widths is
        // ttnn's fused kernel (embedding.cpp), ROW_MAJOR the rows; ttnn's
        // closing to_layout then returns its input (no hidden allocation).
        ttnn::embedding(T(0), T(1), std::nullopt, out.layout(), ttnn::prim::EmbeddingsType::GENERIC, std::nullopt, std::nullopt, out);
        break;
      }
      case OFFCARD_TT_OP_RMS_NORM:
        take_specs(0, 1);
        made.push_back(ttnn::rms_norm(T(0), F(0), T(1), std::nullopt, std::nullopt, mem(0)));
        break;
      case OFFCARD_TT_OP_LINEAR: {
        std::optional<Tensor> out = T(2);
        std::optional<const Tensor> bias = OT(3);
        ttnn::linear(T(0), T(1), bias, false, I(0) != 0, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                     std::nullopt, std::nullopt, out);
        break;
      }
      case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS_DECODE: {
        take_specs(2, 3);
        std::optional<std::array<Tensor, 3>> ignored;
        auto [q, k, v] = ttnn::experimental::nlp_create_qkv_heads_decode(T(0), (uint32_t)I(0), (uint32_t)I(1), ignored, true, std::nullopt,
                                                                          std::nullopt, mem(0));
        made = {q, k, v};
        break;
      }
      case OFFCARD_TT_OP_ROTARY_EMBEDDING_HF:
        take_specs(1, 1);
        made.push_back(ttnn::experimental::rotary_embedding_hf(T(0), T(1), T(2), I(0) != 0, mem(0)));
        break;
      case OFFCARD_TT_OP_NLP_CREATE_QKV_HEADS: {
        take_specs(3, 3);
        std::optional<uint32_t> kv;
        if (I(1) != 0) kv = (uint32_t)I(1);
        auto [q, k, v] = ttnn::experimental::nlp_create_qkv_heads(T(0), std::nullopt, (uint32_t)I(0), kv, I(2) != 0, mem(0), std::nullopt);
        made = {q, k, v};
        break;
      }
      case OFFCARD_TT_OP_SDPA: {
        take_specs(5, 1);
        std::optional<ttnn::operations::transformer::SDPAProgramConfig> pc;
        if (I(1) != 0 || I(2) != 0) {
          ttnn::operations::transformer::SDPAProgramConfig c;
          c.compute_with_storage_grid_size = d->grid;
          c.q_chunk_size = (size_t)I(1);
          c.k_chunk_size = (size_t)I(2);
          if (I(4)) c.exp_approx_mode = false;
          pc = c;
        } else if (I(4)) {
          // the contract's refusal, with sim's and the loopback's text (its
          // "offcard: " prefix says it is not ttnn's): ttnn has no
          // exp_approx_mode outside SDPAProgramConfig
          fail(OFFCARD_TT_EDEVICE, "offcard: exp_approx_mode needs a program config: set q_chunk_size and k_chunk_size");
        }
        std::optional<ttnn::DeviceComputeKernelConfig> cfg;
        if (I(3)) cfg = fp32_acc(d);
        std::optional<float> scale;
        if (F(0) != 0) scale = F(0);
        made.push_back(ttnn::transformer::scaled_dot_product_attention(T(0), T(1), T(2), std::nullopt, I(0) != 0, scale, std::nullopt, mem(0), pc,
                                                                       cfg, std::nullopt));
        break;
      }
      case OFFCARD_TT_OP_CHUNKED_SDPA: {
        take_specs(5, 1);
        std::optional<ttnn::operations::transformer::SDPAProgramConfig> pc;
        if (I(1) != 0 || I(2) != 0) {
          // ttnn checks both sizes % TILE_SIZE, then divides chunk_start_idx
          // by them (sdpa_device_operation.cpp:266-292): a zero or negative
          // size that passes the first check is refused here, with sim's and
          // the loopback's text, instead of a division by zero
          if ((I(1) <= 0 || I(2) <= 0) && I(1) % 32 == 0 && I(2) % 32 == 0)
            fail(OFFCARD_TT_EDEVICE, "offcard: q_chunk_size and k_chunk_size must both be positive multiples of 32 in a program config");
          ttnn::operations::transformer::SDPAProgramConfig c;
          c.compute_with_storage_grid_size = d->grid;
          c.q_chunk_size = (size_t)I(1);
          c.k_chunk_size = (size_t)I(2);
          if (I(4)) c.exp_approx_mode = false;
          pc = c;
        } else if (I(4)) {
          fail(OFFCARD_TT_EDEVICE, "offcard: exp_approx_mode needs a program config: set q_chunk_size and k_chunk_size");
        }
        std::optional<ttnn::DeviceComputeKernelConfig> cfg;
        if (I(3)) cfg = fp32_acc(d);
        std::optional<float> scale;
        if (F(0) != 0) scale = F(0);
        // the tensor form is the flexible overload (chunk_start_idx read on
        // the device at run time); without it the legacy int64_t overload
        if (std::optional<Tensor> start = OT(4))
          made.push_back(ttnn::transformer::chunked_scaled_dot_product_attention(T(0), T(1), T(2), T(3), *start, scale, mem(0), pc, cfg));
        else
          made.push_back(ttnn::transformer::chunked_scaled_dot_product_attention(T(0), T(1), T(2), T(3), (int64_t)I(0), scale, mem(0), pc, cfg));
        break;
      }
      case OFFCARD_TT_OP_FILL_CACHE:
        // batch_idx and update_idx are uint32_t in ttnn: a negative index
        // reaches its checks as its two's complement, as in the loopback
        ttnn::fill_cache(T(0), T(1), (uint32_t)I(0), (uint32_t)I(1));
        break;
      case OFFCARD_TT_OP_SLICE: {
        int64_t nb = I(0);
        if (nb < 0 || nb > OFFCARD_TT_MAX_RANK) fail(OFFCARD_TT_EARG, "slice: begins count " + std::to_string(nb));
        int64_t ne = I(1 + (uint32_t)nb);
        if (ne < 0 || ne > OFFCARD_TT_MAX_RANK) fail(OFFCARD_TT_EARG, "slice: ends count " + std::to_string(ne));
        ttnn::SmallVector<int32_t> begins, ends, step((size_t)nb, 1);
        for (int64_t i = 0; i < nb; i++) begins.push_back((int32_t)I(1 + (uint32_t)i));
        for (int64_t i = 0; i < ne; i++) ends.push_back((int32_t)I(2 + (uint32_t)(nb + i)));
        take_specs(2 + (uint32_t)(nb + ne), 1);
        made.push_back(ttnn::slice<int32_t>(T(0), begins, ends, step, mem(0)));
        break;
      }
      case OFFCARD_TT_OP_NLP_CONCAT_HEADS:
        take_specs(0, 1);
        made.push_back(ttnn::experimental::nlp_concat_heads(T(0), mem(0)));
        break;
      case OFFCARD_TT_OP_ROTARY_EMBEDDING_LLAMA:
        take_specs(0, 1);
        made.push_back(ttnn::experimental::rotary_embedding_llama(T(0), T(1), T(2), T(3), true, mem(0)));
        break;
      case OFFCARD_TT_OP_TO_MEMORY_CONFIG:
        take_specs(0, 1);
        made.push_back(ttnn::to_memory_config(T(0), mem(0)));
        break;
      case OFFCARD_TT_OP_COPY:
        ttnn::copy(T(0), T(1));
        break;
      case OFFCARD_TT_OP_PAGED_UPDATE_CACHE:
      case OFFCARD_TT_OP_PAGED_FUSED_UPDATE_CACHE: {
        bool fused = op == OFFCARD_TT_OP_PAGED_FUSED_UPDATE_CACHE;
        uint32_t base = fused ? 4 : 2;
        std::vector<uint32_t> list;
        int64_t n = I(3);
        for (int64_t i = 0; i < n; i++) list.push_back((uint32_t)I(4 + (uint32_t)i));
        std::optional<const Tensor> idx = OT(base);
        std::optional<const Tensor> pt = OT(base + 1);
        std::optional<bool> share = I(0) != 0;
        std::optional<const ttnn::DeviceComputeKernelConfig> cfg =
            I(2) ? std::optional<const ttnn::DeviceComputeKernelConfig>(fp32_acc(d)) : std::nullopt;
        if (fused)
          ttnn::experimental::paged_fused_update_cache(T(0), T(1), T(2), T(3), list, idx, share, pt, (uint32_t)I(1), cfg, std::nullopt);
        else
          ttnn::experimental::paged_update_cache(T(0), T(1), list, idx, share, pt, (uint32_t)I(1), cfg, std::nullopt);
        break;
      }
      case OFFCARD_TT_OP_PAGED_FILL_CACHE: {
        std::optional<const Tensor> bidx = OT(3);
        ttnn::experimental::paged_fill_cache(T(0), T(1), T(2), bidx, (uint32_t)I(0), std::nullopt, std::nullopt);
        break;
      }
      case OFFCARD_TT_OP_PAGED_SDPA_DECODE: {
        take_specs(2, 1);
        std::optional<ttnn::operations::transformer::SDPAProgramConfig> pc;
        if (I(0) > 0) {
          ttnn::operations::transformer::SDPAProgramConfig c;
          c.compute_with_storage_grid_size = d->grid;
          c.q_chunk_size = 0;
          c.k_chunk_size = (size_t)I(0);
          pc = c;
        }
        std::optional<ttnn::DeviceComputeKernelConfig> cfg;
        if (I(1)) cfg = fp32_acc(d);
        std::optional<float> scale;
        if (F(0) != 0) scale = F(0);
        const std::optional<const Tensor> cur = T(4);
        made.push_back(ttnn::transformer::paged_scaled_dot_product_attention_decode(T(0), T(1), T(2), T(3), true, std::nullopt, cur, std::nullopt,
                                                                                    scale, std::nullopt, mem(0), pc, cfg));
        break;
      }
      case OFFCARD_TT_OP_NLP_CONCAT_HEADS_DECODE: {
        std::optional<Tensor> out = T(1);
        ttnn::experimental::nlp_concat_heads_decode(T(0), (uint32_t)I(0), std::nullopt, out);
        break;
      }
      case OFFCARD_TT_OP_ADD: {
        std::optional<Tensor> out = T(2);
        ttnn::add(T(0), T(1), std::nullopt, std::nullopt, out);
        break;
      }
      case OFFCARD_TT_OP_SILU_MUL: {
        std::optional<Tensor> out = T(2);
        std::array<ttnn::operations::unary::EltwiseUnaryWithParam, 1> silu{
            ttnn::operations::unary::EltwiseUnaryWithParam{ttnn::operations::unary::UnaryOpType::SILU}};
        ttnn::multiply(T(0), T(1), std::nullopt, std::nullopt, out, {}, silu);
        break;
      }
      case OFFCARD_TT_OP_ARGMAX: {
        std::optional<Tensor> out = T(1);
        ttnn::argmax(T(0), -1, false, std::nullopt, std::nullopt, out);
        break;
      }
      case OFFCARD_TT_OP_PLUS_ONE:
        ttnn::operations::experimental::plus_one(T(0), std::nullopt, I(0) != 0);
        break;
      default:
        fail(OFFCARD_TT_EARG, "unknown op code " + std::to_string(op));
    }
    for (size_t j = 0; j < made.size(); j++) {
      try {
        expect(d, made[j], specs.at(j).first, specs.at(j).second);
      } catch (...) {
        for (auto &t : made) t.deallocate(true);
        throw;
      }
    }
    for (size_t j = 0; j < made.size(); j++) outs[j] = keep(d, made[j]);
  });
}

int32_t offcard_tt_begin_capture(offcard_tt_device *d, uint32_t *id) {
  return guard("begin_trace_capture", [&] {
    if (!d || !id) fail(OFFCARD_TT_EARG, "NULL argument");
    auto tid = ttnn::operations::trace::begin_trace_capture(d->mesh.get(), std::nullopt);
    *id = *tid;
    d->capturing = true;
    d->tracing = *id;
    d->traces.insert(*id);  // begin_mesh_trace created the trace
  });
}

int32_t offcard_tt_end_capture(offcard_tt_device *d, uint32_t id) {
  return guard("end_trace_capture", [&] {
    if (!d) fail(OFFCARD_TT_EARG, "device is NULL");
    try {
      ttnn::operations::trace::end_trace_capture(d->mesh.get(), ttnn::MeshTraceId(id), std::nullopt);
    } catch (...) {
      // Past end_mesh_trace's first check (the CQ records this id) the
      // capture is over whatever fails later (record_end runs before the
      // trace buffer is populated, mesh_device.cpp); the trace stays in
      // traces until released.
      if (d->capturing && id == d->tracing) d->capturing = false;
      throw;
    }
    d->capturing = false;
  });
}

int32_t offcard_tt_execute(offcard_tt_device *d, uint32_t id) {
  return guard("execute_trace", [&] {
    if (!d) fail(OFFCARD_TT_EARG, "device is NULL");
    ttnn::operations::trace::execute_trace(d->mesh.get(), ttnn::MeshTraceId(id), std::nullopt, /*blocking=*/true);
  });
}

int32_t offcard_tt_release(offcard_tt_device *d, uint32_t id) {
  return guard("release_trace", [&] {
    if (!d) fail(OFFCARD_TT_EARG, "device is NULL");
    ttnn::operations::trace::release_trace(d->mesh.get(), ttnn::MeshTraceId(id));
    d->traces.erase(id);
  });
}

}  // extern "C"
