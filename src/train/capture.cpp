// src/train/capture.cpp — CapturedStep (ember/train/capture.hpp): warm-up calls, the cache of
// graphs keyed by input shapes, capture and replay. The device side (stream capture, private
// pool, payload) is src/cuda/graph.cu; Note [Captured steps] there says how a replay stays
// bitwise equal to the eager step.
#include "ember/train/capture.hpp"

#include <sstream>

#include "backend/device_runtime.hpp"
#include "core/capture.hpp"
#include "core/profiler.hpp"
#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/memory.hpp"
#include "ember/random.hpp"
#include "ember/runtime.hpp"

namespace ember::train {
namespace {

// The shapes and dtypes of a call's inputs: one graph per distinct key.
struct InputKey {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  bool operator==(const InputKey&) const = default;

  std::string str() const {
    std::ostringstream out;
    out << "(";
    for (size_t i = 0; i < shapes.size(); ++i)
      out << (i ? ", " : "") << shapes[i].to_string() << " " << dtype_name(dtypes[i]);
    out << ")";
    return out.str();
  }
};

InputKey key_of(const std::vector<Tensor>& inputs) {
  InputKey k;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EMBER_CHECK(inputs[i].defined(), "CapturedStep: input ", i, " is an empty tensor handle");
    k.shapes.push_back(inputs[i].shape());
    k.dtypes.push_back(inputs[i].dtype());
  }
  return k;
}

// One captured graph: its input buffers, outputs and host side.
struct Graph {
  InputKey key;
  int64_t id = 0;
  std::vector<Tensor> inputs;  // the buffers the graph reads (private pool)
  std::vector<Tensor> outputs;
  detail::CaptureRecorder recorder;
  uint64_t rng_advance = 0;  // generator counters one step draws
  int64_t kernels = 0;
};

}  // namespace

struct CapturedStep::Impl {
  StepFn step;
  CaptureOptions options;
  Device device = Device::cpu();
  std::vector<std::unique_ptr<Graph>> graphs;
  int64_t replays = 0, eager = 0, last_kernels = 0;

  const backend::DeviceRuntime& runtime() const { return backend::runtime_for(device); }

  ~Impl() {
    for (const auto& g : graphs) {
      try {
        runtime().graph_destroy(device.index, g->id);
      } catch (...) {  // a destructor must not throw; the pool goes with the process
      }
    }
  }

  std::vector<Tensor> on_device(const std::vector<Tensor>& inputs) const {
    std::vector<Tensor> out;
    for (const Tensor& t : inputs) out.push_back(t.device() == device ? t : t.to(device));
    return out;
  }

  Graph* find(const InputKey& key) {
    for (const auto& g : graphs)
      if (g->key == key) return g.get();
    return nullptr;
  }

  std::string captured_keys() const {
    std::string s;
    for (const auto& g : graphs) s += (s.empty() ? "" : ", ") + g->key.str();
    return s;
  }

  // Captures the step on `inputs` and launches it once: one step.
  Graph& capture(const std::vector<Tensor>& inputs, InputKey key) {
    EMBER_CHECK(graphs.empty() || options.recapture, "CapturedStep: the inputs have shapes ",
                key.str(), " but the step was captured with ", captured_keys(),
                " and recapture is off (CaptureOptions::recapture); pass inputs of the "
                "captured shapes, or allow recapture");
    EMBER_CHECK(static_cast<int64_t>(graphs.size()) < options.max_graphs,
                "CapturedStep: the inputs have shapes ", key.str(), ", a new graph beyond ",
                "max_graphs = ", options.max_graphs, " (captured: ", captured_keys(),
                "); raise CaptureOptions::max_graphs or keep the shapes fixed (drop_last)");
    auto g = std::make_unique<Graph>();
    g->key = std::move(key);
    // The graph's private pool borrows the blocks the eager warm-up steps left cached rather
    // than reserving a step's worth again beside them (Note [A capture borrows the eager
    // cache] in src/cuda/allocator.cpp).
    const RngState rng = get_rng_state();
    g->id = runtime().graph_capture_begin(device.index, rng.seed, rng.offset);
    detail::CaptureRecorder* previous = detail::set_active_capture(&g->recorder);
    try {
      for (size_t i = 0; i < inputs.size(); ++i)  // allocations only: nothing is recorded
        g->inputs.push_back(empty(g->key.shapes[i], {.dtype = g->key.dtypes[i], .device = device}));
      g->outputs = step(g->inputs);
    } catch (...) {
      detail::set_active_capture(previous);
      set_rng_state(rng);  // nothing ran: the draws of the failed capture did not happen
      try {
        runtime().graph_capture_end(device.index, g->id, false);
      } catch (...) {  // the step's own error is the one to report
      }
      throw;
    }
    detail::set_active_capture(previous);
    runtime().graph_capture_end(device.index, g->id, true);
    g->rng_advance = get_rng_state().offset - rng.offset;
    g->recorder.finish();
    g->kernels = runtime().graph_kernel_count(device.index, g->id);
    copy_inputs(*g, inputs);
    runtime().graph_launch(device.index, g->id, true);  // with the scalars staged at capture
    graphs.push_back(std::move(g));
    return *graphs.back();
  }

  void copy_inputs(Graph& g, const std::vector<Tensor>& inputs) const {
    NoGradGuard no_grad;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (!inputs[i].is_same(g.inputs[i])) g.inputs[i].copy_(inputs[i]);
  }

  void replay(Graph& g, const std::vector<Tensor>& inputs) {
    copy_inputs(g, inputs);
    const RngState rng = get_rng_state();
    runtime().graph_replay_begin(device.index, g.id, rng.seed, rng.offset);
    try {
      g.recorder.replay_host();
    } catch (...) {
      runtime().graph_launch(device.index, g.id, false);
      throw;
    }
    set_rng_state({rng.seed, rng.offset + g.rng_advance});
    const core::profiler::KernelRange range("graph_launch", device.type, runtime(), device.index);
    runtime().graph_launch(device.index, g.id, true);
  }
};

CapturedStep::CapturedStep(StepFn step, CaptureOptions options) : impl_(std::make_unique<Impl>()) {
  EMBER_CHECK(static_cast<bool>(step), "CapturedStep: got an empty step function");
  EMBER_CHECK(options.warmup >= 0 && options.max_graphs >= 1, "CapturedStep: warmup ",
              options.warmup, " and max_graphs ", options.max_graphs,
              " (expected warmup >= 0 and max_graphs >= 1)");
  // The device named, else the default device when it is a GPU, else cuda:0 when there is one.
  Device dev = options.device.value_or(default_device());
  if (!options.device && dev.is_cpu() && cuda_available()) dev = Device::cuda(0);
  EMBER_CHECK(dev.is_cuda(), "CapturedStep: graph capture needs a CUDA device (got ", dev.str(),
              cuda_available() ? "" : ", and no CUDA device is available",
              "); on the CPU call the step function directly");
  EMBER_CHECK(dev.index < cuda_device_count(), "CapturedStep: ", dev.str(), " is not available (",
              cuda_device_count(), " CUDA devices); graph capture needs a CUDA device");
  impl_->step = std::move(step);
  impl_->options = options;
  impl_->device = dev;
}

CapturedStep::~CapturedStep() = default;
CapturedStep::CapturedStep(CapturedStep&&) noexcept = default;
CapturedStep& CapturedStep::operator=(CapturedStep&&) noexcept = default;

std::vector<Tensor> CapturedStep::operator()(const std::vector<Tensor>& inputs) {
  EMBER_CHECK(impl_ != nullptr, "CapturedStep: the step was moved from");
  Impl& s = *impl_;
  InputKey key = key_of(inputs);
  if (s.eager < s.options.warmup) {
    ++s.eager;
    return s.step(s.on_device(inputs));
  }
  Graph* g = s.find(key);
  if (!g) {
    g = &s.capture(s.on_device(inputs), std::move(key));
  } else {
    s.replay(*g, inputs);
  }
  ++s.replays;
  s.last_kernels = g->kernels;
  return g->outputs;
}

Device CapturedStep::device() const { return impl_->device; }
int64_t CapturedStep::graph_count() const { return static_cast<int64_t>(impl_->graphs.size()); }
int64_t CapturedStep::replay_count() const { return impl_->replays; }
int64_t CapturedStep::eager_count() const { return impl_->eager; }
int64_t CapturedStep::kernels_per_step() const { return impl_->last_kernels; }

}  // namespace ember::train
