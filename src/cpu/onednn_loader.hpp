// src/cpu/onednn_loader.hpp — oneDNN's C API (dnnl.h), opened with dlopen on first use.
//
// ember does not link oneDNN: the GPU machines and many users' machines do not have it, and
// the CPU convolutions have their own path (im2col + OpenBLAS). onednn_api() finds and opens
// libdnnl.so.2 once (Note [Finding oneDNN] in onednn_loader.cpp) and returns its entry
// points, or null with the reason, in which case convolutions take the im2col path and
// conv_fallback_reason() says why.
#pragma once

#include <string>

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
  int (*omp_get_max_threads)() = nullptr;
  void (*omp_set_num_threads)(int) = nullptr;
  dnnl_engine_t engine = nullptr;  // the CPU engine, created once
  std::string version_text;        // "oneDNN 2.6.3 (libdnnl.so.2, OpenMP threads)"
};

/// The loaded API, or null with *why saying what was missing. Never throws; thread-safe.
const OnednnApi* onednn_api(std::string* why);
#endif

}  // namespace ember::cpu
