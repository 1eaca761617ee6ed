// src/cuda/cudnn_backend.hpp — checked calls and owning descriptors over cuDNN's backend API
// (the entry points cudnn_loader.hpp opens), for the code that builds cuDNN operation graphs
// (src/cuda/attention.cpp). A failed call throws BuildError; its callers turn that into a
// fallback (the composed path) whose reason names the call and cuDNN's message.
#pragma once

#include "cuda/cudnn_loader.hpp"

#if defined(EMBER_HAVE_CUDNN_HEADERS)
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::cuda::cudnn {

/// A cuDNN call failed while building a plan: the path falls back (the message says why).
struct BuildError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The loaded API; only called once cudnn_api() has returned it (the callers check first).
inline const CudnnApi& api() {
  static const CudnnApi* a = [] {
    std::string why;
    return cudnn_api(&why);
  }();
  return *a;
}

/// cuDNN's name for `s`, with its last error message when the library has one.
inline std::string status_text(cudnnStatus_t s) {
  std::string out = api().get_error_string ? api().get_error_string(s) : "?";
  if (api().last_error_string) {
    char buf[1024] = {};
    api().last_error_string(buf, sizeof(buf));
    if (buf[0]) out += std::string(": ") + buf;
  }
  return out;
}

inline void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw BuildError(std::string(what) + " failed: " + status_text(s));
}

/// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) {
    check(api().create_descriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~Desc() {
    if (d_) api().destroy_descriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

inline void set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                cudnnBackendAttributeType_t type, int64_t count, const void* value,
                const char* what) {
  check(api().set_attribute(d, attr, type, count, value), what);
}
inline void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t attr,
                     cudnnBackendDescriptor_t value, const char* what) {
  set(d, attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
}

/// Whether the engine of engine configuration `config` carries cuDNN's numerical note `note`
/// (CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: its results may change from run to run;
/// _TENSOR_CORE or _DOWN_CONVERT_INPUTS on f32 data: it computes in TF32 or lower).
inline bool engine_has_note(cudnnBackendDescriptor_t config, cudnnBackendNumericalNote_t note) {
  Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  check(api().get_attribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                            &n, &raw),
        "config engine");
  std::array<cudnnBackendNumericalNote_t, CUDNN_NUMERICAL_NOTE_TYPE_COUNT> notes{};
  check(api().get_attribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                            static_cast<int64_t>(notes.size()), &n, notes.data()),
        "engine numerical notes");
  const auto end = notes.begin() + std::clamp<int64_t>(n, 0, static_cast<int64_t>(notes.size()));
  return std::find(notes.begin(), end, note) != end;
}

/// engine_has_note(config, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC).
inline bool nondeterministic_engine(cudnnBackendDescriptor_t config) {
  return engine_has_note(config, CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC);
}

// cudnn_backend.cpp: shared by every graph builder.
/// The cuDNN handle of `device` (created on first use, kept for the process).
cudnnHandle_t handle(int device);
/// Note [Measured engines]: the index of the fastest of `count` candidate plans, each run once
/// by run(i) on `device`'s stream to warm up and then timed three times with CUDA events (its
/// best time counts); a candidate whose run throws is not chosen, report(i, ms) sees each time,
/// and 0 is returned when none ran. nullopt while the stream is being captured: the caller
/// tunes at its next eager call. The timing runs write the call's outputs, which the call
/// itself overwrites after. Shared by the attention and convolution plans.
std::optional<size_t> fastest(int device, size_t count, const std::function<void(size_t)>& run,
                              const std::function<void(size_t, float)>& report);
/// Note [One cuDNN handle, one thread at a time]: cuDNN forbids using one handle from several
/// threads at once, and ember keeps one per device. execute() holds this lock for the
/// stream binding and the execution; the plan builders hold it while they finalize plans on the
/// handle. Taken after a plan cache's own lock, never before it.
std::mutex& handle_mutex(int device);
/// Runs the finalized execution plan `plan` on the device's stream (the capture stream while
/// capturing) with the tensors `uids` at `ptrs` and `workspace`; a refusal throws ember::Error
/// "<what> execution failed: <cuDNN's message>".
void execute(int device, cudnnBackendDescriptor_t plan, const std::vector<int64_t>& uids,
             const std::vector<void*>& ptrs, void* workspace, const std::string& what);
/// The finalized operation graph of `ops` on handle `h`.
std::unique_ptr<Desc> operation_graph(const std::vector<cudnnBackendDescriptor_t>& ops,
                                      cudnnHandle_t h);
/// The engine configurations heuristic `mode` ranks for `graph`, best first; empty when the
/// heuristic refuses the graph. *heur receives the heuristics descriptor they came from.
std::vector<std::unique_ptr<Desc>> heuristic_configs(cudnnBackendDescriptor_t graph,
                                                     cudnnBackendHeurMode_t mode,
                                                     std::unique_ptr<Desc>* heur);
/// "cuDNN 9.10.2 (/path/libcudnn.so.9)".
std::string version_text(const CudnnApi& a);

}  // namespace ember::cuda::cudnn

#endif  // EMBER_HAVE_CUDNN_HEADERS
