// src/cuda/cudnn_backend.cpp — the cuDNN plumbing the graph builders share (cudnn_backend.hpp):
// one handle per device, running a finalized plan on the device's stream, the version line.
// Used by the fused attention (attention.cpp) and the convolutions (conv_cudnn.cpp).
#include "cuda/cudnn_backend.hpp"

#if defined(EMBER_HAVE_CUDNN_HEADERS)

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/kernels.cuh"
#include "ember/error.hpp"

namespace ember::cuda::cudnn {

cudnnHandle_t handle(int device) {
  static std::mutex mutex;
  static std::array<cudnnHandle_t, 64> handles{};
  std::lock_guard<std::mutex> lock(mutex);
  cudnnHandle_t& h = handles[static_cast<size_t>(device)];
  if (!h) {
    stream(device);  // makes the device current
    const cudnnStatus_t s = api().create(&h);
    if (s != CUDNN_STATUS_SUCCESS) {
      h = nullptr;
      throw BuildError("cudnnCreate failed: " + status_text(s));
    }
  }
  return h;
}

std::mutex& handle_mutex(int device) {
  static std::array<std::mutex, 64> mutexes;
  return mutexes[static_cast<size_t>(device % 64)];
}

std::optional<size_t> fastest(int device, size_t count, const std::function<void(size_t)>& run,
                              const std::function<void(size_t, float)>& report) {
  const cudaStream_t st = stream(device);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  EMBER_CUDA_CHECK(cudaStreamIsCapturing(st, &capture));
  if (capture != cudaStreamCaptureStatusNone) return std::nullopt;
  cudaEvent_t start = nullptr, stop = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreate(&start));
  EMBER_CUDA_CHECK(cudaEventCreate(&stop));
  float best_ms = std::numeric_limits<float>::max();
  size_t best = 0;
  for (size_t i = 0; i < count; ++i) {
    float ms = std::numeric_limits<float>::max();
    try {
      run(i);
      for (int r = 0; r < 3; ++r) {
        EMBER_CUDA_CHECK(cudaEventRecord(start, st));
        run(i);
        EMBER_CUDA_CHECK(cudaEventRecord(stop, st));
        EMBER_CUDA_CHECK(cudaEventSynchronize(stop));
        float t = 0.0f;
        EMBER_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
        ms = std::min(ms, t);
      }
    } catch (const std::exception&) {
      continue;  // a configuration that fails to execute is not chosen
    }
    report(i, ms);
    if (ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return best;
}

void execute(int device, cudnnBackendDescriptor_t plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& ptrs, void* workspace, const std::string& what) {
  cudnnHandle_t h = handle(device);
  // Note [One cuDNN handle, one thread at a time]: 8 threads running one eval-mode model on a
  // GPU (ThreadsCuda.*) shared this handle's stream binding and executions unguarded.
  std::lock_guard<std::mutex> lock(handle_mutex(device));
  if (api().set_stream(h, stream(device)) != CUDNN_STATUS_SUCCESS)
    ember::detail::throw_error(what + ": cudnnSetStream failed");
  Desc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
      static_cast<int64_t>(uids.size()), uids.data(), "variant pack ids");
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
      static_cast<int64_t>(ptrs.size()), ptrs.data(), "variant pack pointers");
  set(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace,
      "variant pack workspace");
  check(api().finalize(pack.get()), "finalize variant pack");
  const cudnnStatus_t st = api().execute(h, plan, pack.get());
  if (st != CUDNN_STATUS_SUCCESS)
    ember::detail::throw_error(what + " execution failed: " + status_text(st));
}

std::unique_ptr<Desc> operation_graph(const std::vector<cudnnBackendDescriptor_t>& ops,
                                      cudnnHandle_t h) {
  auto graph = std::make_unique<Desc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set(graph->get(), CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
      static_cast<int64_t>(ops.size()), ops.data(), "graph ops");
  set(graph->get(), CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
  check(api().finalize(graph->get()), "finalize operation graph");
  return graph;
}

std::vector<std::unique_ptr<Desc>> heuristic_configs(cudnnBackendDescriptor_t graph,
                                                     cudnnBackendHeurMode_t mode,
                                                     std::unique_ptr<Desc>* heur) {
  *heur = std::make_unique<Desc>(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  cudnnBackendDescriptor_t h = (*heur)->get();
  set(h, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph,
      "heuristics graph");
  set(h, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heur mode");
  if (api().finalize(h) != CUDNN_STATUS_SUCCESS) return {};
  int64_t count = 0;
  check(api().get_attribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                            &count, nullptr),
        "heuristics count");
  std::vector<std::unique_ptr<Desc>> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<Desc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  int64_t got = 0;
  if (count > 0)
    check(api().get_attribute(h, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                              count, &got, raw.data()),
          "heuristics results");
  configs.resize(static_cast<size_t>(std::clamp<int64_t>(got, 0, count)));
  return configs;
}

std::string version_text(const CudnnApi& a) {
  const size_t v = a.version;
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100) + " (" + a.path + ")";
}

}  // namespace ember::cuda::cudnn

#endif  // EMBER_HAVE_CUDNN_HEADERS
