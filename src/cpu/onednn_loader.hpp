// src/cpu/onednn_loader.hpp — oneDNN's C API (dnnl.h), opened with dlopen on first use, and
// the pieces every oneDNN call shares (memory objects, the stream, scratch, the thread count).
//
// ember does not link oneDNN: the GPU machines and many users' machines do not have it, and
// the CPU convolutions and 16-bit GEMMs have their own paths (im2col + OpenBLAS; operands
// widened to f32 for sgemm). onednn_api() finds and opens libdnnl.so.2 once (Note [Finding
// oneDNN] in onednn_loader.cpp) and returns its entry points, or null with the reason, in
// which case those paths run and conv_fallback_reason() / gemm_onednn_status() say why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ember/dtype.hpp"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define EMBER_HAVE_ONEDNN_HEADERS 1
#endif

namespace ember::cpu {

#if defined(EMBER_HAVE_ONEDNN_HEADERS)
/// The oneDNN entry points ember uses (each typed as dnnl.h declares it); all set when
/// onednn_api() returns non-null. omp_* are the OpenMP runtime's that oneDNN's threads come
/// from (Note [oneDNN's threads are ember's] in conv_onednn.cpp); null for a oneDNN built on
/// another threading runtime.
struct OnednnApi {
  decltype(&dnnl_version) version = nullptr;
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_stream_wait) stream_wait = nullptr;
  decltype(&dnnl_memory_desc_init_by_tag) memory_desc_init_by_tag = nullptr;
  decltype(&dnnl_memory_desc_equal) memory_desc_equal = nullptr;
  decltype(&dnnl_memory_desc_get_size) memory_desc_get_size = nullptr;
  decltype(&dnnl_memory_create) memory_create = nullptr;
  decltype(&dnnl_memory_destroy) memory_destroy = nullptr;
  decltype(&dnnl_dilated_convolution_forward_desc_init) conv_forward_desc_init = nullptr;
  decltype(&dnnl_dilated_convolution_backward_data_desc_init) conv_backward_data_desc_init =
      nullptr;
  decltype(&dnnl_dilated_convolution_backward_weights_desc_init) conv_backward_weights_desc_init =
      nullptr;
  decltype(&dnnl_primitive_attr_create) attr_create = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy = nullptr;
  decltype(&dnnl_primitive_attr_set_post_ops) attr_set_post_ops = nullptr;
  decltype(&dnnl_primitive_attr_set_scratchpad_mode) attr_set_scratchpad_mode = nullptr;
  decltype(&dnnl_post_ops_create) post_ops_create = nullptr;
  decltype(&dnnl_post_ops_destroy) post_ops_destroy = nullptr;
  decltype(&dnnl_post_ops_append_eltwise) post_ops_append_eltwise = nullptr;
  decltype(&dnnl_primitive_desc_create) primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_desc_destroy) primitive_desc_destroy = nullptr;
  decltype(&dnnl_primitive_desc_query) primitive_desc_query = nullptr;
  decltype(&dnnl_primitive_desc_query_md) primitive_desc_query_md = nullptr;
  decltype(&dnnl_reorder_primitive_desc_create) reorder_primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_create) primitive_create = nullptr;
  decltype(&dnnl_primitive_destroy) primitive_destroy = nullptr;
  decltype(&dnnl_primitive_execute) primitive_execute = nullptr;
  decltype(&dnnl_get_primitive_cache_capacity) get_primitive_cache_capacity = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) memory_desc_init_by_strides = nullptr;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init = nullptr;
  decltype(&dnnl_primitive_attr_set_output_scales) attr_set_output_scales = nullptr;
  decltype(&dnnl_post_ops_append_sum) post_ops_append_sum = nullptr;
  int (*omp_get_max_threads)() = nullptr;
  void (*omp_set_num_threads)(int) = nullptr;
  dnnl_engine_t engine = nullptr;  // the CPU engine, created once
  std::string version_text;        // "oneDNN 2.6.3 (libdnnl.so.2, OpenMP threads)"
};

/// The loaded API, or null with *why saying what was missing. Never throws; thread-safe.
const OnednnApi* onednn_api(std::string* why);

/// The loaded API, for code that has already checked onednn_api() is non-null.
inline const OnednnApi& onednn() { return *onednn_api(nullptr); }

/// "unimplemented", "invalid arguments", ... for a status.
std::string onednn_status_name(dnnl_status_t s);

/// oneDNN's data type for an ember float dtype (f32, bf16, f16); undef for any other.
inline dnnl_data_type_t onednn_dtype(DType t) {
  switch (t) {
    case DType::f32: return dnnl_f32;
    case DType::bf16: return dnnl_bf16;
    case DType::f16: return dnnl_f16;
    default: return dnnl_data_type_undef;
  }
}

/// A failed oneDNN call while building a primitive: the caller declines the case with `why`
/// and takes its own path (thrown by onednn_check, caught where the primitive is built).
struct OnednnDeclined {
  std::string why;
};
/// Throws OnednnDeclined{"what: status"} unless s is dnnl_success.
void onednn_check(dnnl_status_t s, const char* what);

/// Owns a primitive descriptor for the scope of a build.
struct OnednnPd {
  dnnl_primitive_desc_t pd = nullptr;
  OnednnPd() = default;
  OnednnPd(const OnednnPd&) = delete;
  OnednnPd& operator=(const OnednnPd&) = delete;
  ~OnednnPd() {
    if (pd) onednn().primitive_desc_destroy(pd);
  }
};
/// Owns primitive attributes and their post-ops for the scope of a build.
struct OnednnAttr {
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t ops = nullptr;
  OnednnAttr() = default;
  OnednnAttr(const OnednnAttr&) = delete;
  OnednnAttr& operator=(const OnednnAttr&) = delete;
  ~OnednnAttr() {
    if (ops) onednn().post_ops_destroy(ops);
    if (attr) onednn().attr_destroy(attr);
  }
};

/// A memory object over `data` (not owned) for one call; `op` names the caller in errors.
class OnednnMemory {
 public:
  OnednnMemory(const dnnl_memory_desc_t& d, void* data, const char* op);
  ~OnednnMemory() { onednn().memory_destroy(m_); }
  OnednnMemory(const OnednnMemory&) = delete;
  OnednnMemory& operator=(const OnednnMemory&) = delete;
  dnnl_memory_t get() const { return m_; }

 private:
  dnnl_memory_t m_ = nullptr;
};

/// Built primitives of one kind (P), kept for the process by key (Note [oneDNN primitives are
/// built once] in conv_onednn.cpp); lock `mutex` around any use of `entries`.
///   auto& c = OnednnCache<Matmul>::get(); std::lock_guard l(c.mutex); c.entries[key] = ...;
template <typename P>
struct OnednnCache {
  std::mutex mutex;
  std::map<std::vector<int64_t>, std::unique_ptr<P>> entries;
  static OnednnCache& get() {
    static OnednnCache* c = new OnednnCache();  // leaked: primitives live until exit
    return *c;
  }
};

/// The calling thread's oneDNN stream (created on first use).
dnnl_stream_t onednn_thread_stream();

/// Before a primitive runs: oneDNN's OpenMP thread count set to ember's and ember's idle
/// workers parked (Note [oneDNN's threads are ember's] in conv_onednn.cpp).
void onednn_take_threads();

/// Executes `prim` on the calling thread's stream; a failure throws ember::Error
/// "op (oneDNN): what failed: status".
void onednn_execute(dnnl_primitive_t prim, const std::vector<dnnl_exec_arg_t>& args, const char* op,
                    const char* what);
#endif

}  // namespace ember::cpu
