// src/cuda/cudnn_loader.hpp — cuDNN's backend (graph) API, opened with dlopen on first use.
//
// ember does not link cuDNN: it is large, optional (only the fused attention path uses it)
// and on many machines present only inside a Python package. cudnn_api() finds and opens it
// once (Note [Finding cuDNN] in cudnn_loader.cpp) and returns its entry points, or null with
// the reason, in which case scaled_dot_product_attention takes its composed path.
#pragma once

#include <cstddef>
#include <string>

#if __has_include(<cudnn_graph.h>)
#include <cudnn_graph.h>
#define EMBER_HAVE_CUDNN_HEADERS 1
#endif

namespace ember::cuda {

#if defined(EMBER_HAVE_CUDNN_HEADERS)
/// The cuDNN entry points ember uses; every pointer is set when cudnn_api() returns non-null,
/// except last_error_string (older releases lack it).
struct CudnnApi {
  size_t (*get_version)() = nullptr;
  const char* (*get_error_string)(cudnnStatus_t) = nullptr;
  void (*last_error_string)(char*, size_t) = nullptr;
  cudnnStatus_t (*create)(cudnnHandle_t*) = nullptr;
  cudnnStatus_t (*set_stream)(cudnnHandle_t, cudaStream_t) = nullptr;
  cudnnStatus_t (*create_descriptor)(cudnnBackendDescriptorType_t,
                                     cudnnBackendDescriptor_t*) = nullptr;
  cudnnStatus_t (*destroy_descriptor)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t) = nullptr;
  cudnnStatus_t (*set_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                 cudnnBackendAttributeType_t, int64_t, const void*) = nullptr;
  cudnnStatus_t (*get_attribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                 cudnnBackendAttributeType_t, int64_t, int64_t*, void*) = nullptr;
  cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t,
                           cudnnBackendDescriptor_t) = nullptr;
  size_t version = 0;  // cudnnGetVersion(): 91002 is 9.10.2
  std::string path;    // the library file that was opened
};

/// The loaded API, or null with *why saying what was missing. Never throws; thread-safe.
const CudnnApi* cudnn_api(std::string* why);
#endif

}  // namespace ember::cuda
