// src/train/memory_estimate.cpp — estimate_training_memory: a training step's memory on a
// device, worked out on the CPU before anything is allocated there (ember/memory_estimate.hpp).
//
// Note [Estimating a training step's memory]
// Parameters, buffers, gradients and optimizer state follow from the parameters' shapes and
// dtypes. Activations do not: what a step holds at its peak depends on every op's saved
// tensors and temporaries, and on when each is freed, which only the model's real graph
// knows. ggmlR's estimate guesses them from the layer list (a multiple of each layer's output
// size); here the real forward, loss and backward run on the CPU with a per-thread observer
// of storage allocations (core/alloc_trace.hpp) that records each request in order: its
// bytes, and when it is freed. The trace is then replayed with the target device's rounding
// (core::block_bytes_for, the allocator's own rule: CUDA rounds to 512 bytes and gives a large
// request a 2 MiB multiple unless the rest is worth splitting) to get the peak in the blocks
// memory_stats counts there. Running the real batch on the CPU would cost the real step's time and
// memory, so the dry run takes two small batches (2 and 4; the batch itself when it is at most 4)
// and, when both traces have the same requests in the same order (the same graph), extrapolates
// each request's size linearly in the batch: size(B) = size(2) + (B - 2) (size(4) - size(2)) / 2.
// A step whose requests depend on the batch in another way (an algorithm picked by size)
// gives two traces of different lengths; then the two peaks are extrapolated instead.
// The step's total is what memory_stats(device).peak_allocated shows for a steady step with
// zero_grad() setting gradients to none: parameters + buffers + optimizer state + the trace's
// peak (which ends with every gradient alive: a parameter's gradient is the block its backward
// wrote, Note [Gradients stolen into the Persistent pool]). Ops that choose an algorithm by
// device (a convolution's library, its im2col chunks, a split-K weight gradient) follow
// core::planning_device, which the dry run sets to the target, so a GPU target's trace holds
// the GPU's temporaries (without it, on the H200, a CNN's step came out 31% above the
// estimate: the im2col columns CUDA builds over the whole batch). What the dry run cannot see
// is listed in MemoryEstimate::assumptions: a choice that depends on the batch itself, library
// workspaces outside the pools (cuBLASLt's) or inside them (cuDNN's), and an optimizer that
// allocates temporaries in its update.
#include "ember/memory_estimate.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/alloc_trace.hpp"
#include "ember/autocast.hpp"
#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/nn/module.hpp"
#include "ember/random.hpp"

namespace ember {
namespace {

// One request of the dry run, or the end of one (size < 0: the free of request `id`).
struct TraceEvent {
  int64_t id = 0;
  int64_t bytes = 0;  // the request in bytes; -1 for a free
};

// Records every storage this thread allocates and frees (core/alloc_trace.hpp).
class TraceRecorder final : public core::AllocationObserver {
 public:
  void allocated(const Storage* storage, size_t bytes) override {
    const int64_t id = next_id_++;
    live_[storage] = id;
    events_.push_back({id, static_cast<int64_t>(bytes)});
  }
  void freed(const Storage* storage) override {
    auto it = live_.find(storage);
    if (it == live_.end()) return;  // made before the dry run
    events_.push_back({it->second, -1});
    live_.erase(it);
  }
  std::vector<TraceEvent> events_;
  std::unordered_map<const Storage*, int64_t> live_;
  int64_t next_id_ = 0;
};

// Installs a recorder for the lifetime of the scope.
class RecordingScope {
 public:
  explicit RecordingScope(TraceRecorder* r) : previous_(core::set_allocation_observer(r)) {}
  ~RecordingScope() { core::set_allocation_observer(previous_); }
  RecordingScope(const RecordingScope&) = delete;
  RecordingScope& operator=(const RecordingScope&) = delete;

 private:
  core::AllocationObserver* previous_;
};

int64_t tensor_bytes(const Tensor& t) {
  return t.numel() * static_cast<int64_t>(element_size(t.dtype()));
}

int64_t block_bytes(Device device, int64_t bytes) {
  return static_cast<int64_t>(core::block_bytes_for(device, static_cast<size_t>(bytes)));
}

// What one dry run at one batch size saw: its requests in order.
struct DryRun {
  int64_t batch = 0;
  std::vector<TraceEvent> events;
};

// The peak of the trace's live bytes with each request rounded by `device`'s allocator.
int64_t replay_peak(const std::vector<TraceEvent>& events, Device device) {
  std::unordered_map<int64_t, int64_t> sizes;
  int64_t live = 0, peak = 0;
  for (const TraceEvent& e : events) {
    if (e.bytes >= 0) {
      const int64_t b = block_bytes(device, std::max<int64_t>(e.bytes, 1));
      sizes[e.id] = b;
      live += b;
      peak = std::max(peak, live);
    } else {
      live -= sizes[e.id];
    }
  }
  return peak;
}

bool same_graph(const DryRun& a, const DryRun& b) {
  if (a.events.size() != b.events.size()) return false;
  for (size_t i = 0; i < a.events.size(); ++i)
    if (a.events[i].id != b.events[i].id || (a.events[i].bytes < 0) != (b.events[i].bytes < 0))
      return false;
  return true;
}

// Restores what a dry run changes in the model and the process: the mode, the gradients,
// the buffers' values and the random generator.
class ModelState {
 public:
  explicit ModelState(nn::ModuleImpl& m)
      : model_(m), training_(m.is_training()), rng_(get_rng_state()) {
    for (const Tensor& p : m.parameters()) grads_.push_back(p.grad());
    NoGradGuard no_grad;
    for (const auto& [name, b] : m.named_buffers()) buffers_.emplace_back(b, b.clone());
  }
  ~ModelState() {
    NoGradGuard no_grad;
    const std::vector<Tensor> params = model_.parameters();
    for (size_t i = 0; i < params.size() && i < grads_.size(); ++i) params[i].set_grad(grads_[i]);
    for (auto& [b, saved] : buffers_) b.copy_(saved);
    model_.train(training_);
    set_rng_state(rng_);
  }
  ModelState(const ModelState&) = delete;
  ModelState& operator=(const ModelState&) = delete;

 private:
  nn::ModuleImpl& model_;
  bool training_;
  RngState rng_;
  std::vector<Tensor> grads_;
  std::vector<std::pair<Tensor, Tensor>> buffers_;
};

DryRun dry_run(nn::ModuleImpl& model, Shape shape, int64_t batch,
               const MemoryEstimateOptions& options) {
  shape[0] = batch;
  for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
  TraceRecorder recorder;
  {
    RecordingScope recording(&recorder);
    const core::PlanningDeviceGuard plan(options.device);  // the target's algorithms
    std::optional<AutocastGuard> autocast;
    if (options.autocast) autocast.emplace(*options.autocast);
    const Tensor x = zeros(shape, {.dtype = options.input_dtype, .device = Device::cpu()});
    const Tensor out = model.forward(x);
    Tensor loss = options.loss ? options.loss(out) : out.mean();
    EMBER_CHECK(loss.defined() && loss.numel() == 1, "estimate_training_memory: the loss gave ",
                loss.defined() ? loss.shape().to_string() : std::string("no tensor"),
                " (expected one value to call backward on)");
    autocast.reset();
    loss.backward();
  }
  for (const Tensor& p : model.parameters()) p.set_grad(Tensor());
  return {batch, std::move(recorder.events_)};
}

// The trace at `batch` from two traces of the same graph, each request's size linear in it.
std::vector<TraceEvent> extrapolate(const DryRun& a, const DryRun& b, int64_t batch) {
  std::vector<TraceEvent> out = a.events;
  const int64_t span = b.batch - a.batch;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].bytes < 0) continue;
    const int64_t grow = b.events[i].bytes - a.events[i].bytes;
    out[i].bytes = std::max<int64_t>(0, a.events[i].bytes + grow * (batch - a.batch) / span);
  }
  return out;
}

int state_tensors(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::none:
    case OptimizerKind::sgd: return 0;
    case OptimizerKind::sgd_momentum: return 1;
    case OptimizerKind::adam: return 2;
    case OptimizerKind::adam_amsgrad: return 3;
  }
  return 0;
}

}  // namespace

MemoryEstimate estimate_training_memory(const nn::Module& model, const Shape& input_shape,
                                        const MemoryEstimateOptions& options) {
  EMBER_CHECK(model.defined(),
              "estimate_training_memory: the module handle is empty (expected the model)");
  EMBER_CHECK(input_shape.size() >= 1,
              "estimate_training_memory: the input shape has no batch dimension (got ",
              input_shape.to_string(), ", expected [batch, ...])");
  for (int d = 0; d < input_shape.size(); ++d)
    EMBER_CHECK(input_shape[d] >= 1, "estimate_training_memory: dimension ", d,
                " of the input shape is ", input_shape[d], " (got ", input_shape.to_string(),
                ", expected every dimension at least 1)");
  nn::ModuleImpl& m = *model;
  const Device device = options.device;
  MemoryEstimate e;
  e.batch = input_shape[0];
  for (const auto& [name, p] : m.named_parameters()) {
    EMBER_CHECK(p.device().is_cpu(), "estimate_training_memory: parameter '", name, "' is on ",
                p.device().str(),
                " (expected the model on the CPU: estimate before moving it to the device)");
    const int64_t b = block_bytes(device, tensor_bytes(p));
    e.parameters += b;
    if (p.requires_grad()) e.gradients += b;
    e.optimizer_state += p.requires_grad() ? b * state_tensors(options.optimizer) : 0;
  }
  for (const auto& [name, b] : m.named_buffers()) e.buffers += block_bytes(device, tensor_bytes(b));

  int64_t step_peak = 0;
  {
    const ModelState restore(m);
    m.train(true);
    if (e.batch <= 4) {
      step_peak = replay_peak(dry_run(m, input_shape, e.batch, options).events, device);
      e.assumptions.push_back("activations: the real step run once on the CPU at batch " +
                              std::to_string(e.batch));
    } else {
      const DryRun small = dry_run(m, input_shape, 2, options);
      const DryRun large = dry_run(m, input_shape, 4, options);
      if (same_graph(small, large)) {
        step_peak = replay_peak(extrapolate(small, large, e.batch), device);
        e.assumptions.push_back(
            "activations: the step's requests run on the CPU at batches 2 and 4, each "
            "extrapolated linearly to batch " +
            std::to_string(e.batch));
      } else {
        const int64_t p2 = replay_peak(small.events, device);
        const int64_t p4 = replay_peak(large.events, device);
        step_peak = std::max<int64_t>(0, p2 + (p4 - p2) * (e.batch - 2) / 2);
        e.assumptions.push_back(
            "activations: the step's requests differ between batches 2 and 4 (an algorithm "
            "picked by size), so its peaks were extrapolated linearly to batch " +
            std::to_string(e.batch));
      }
    }
  }
  e.activations = std::max<int64_t>(0, step_peak - e.gradients);
  e.total = e.parameters + e.buffers + e.optimizer_state + std::max(step_peak, e.gradients);
  e.assumptions.push_back(
      "a steady step: zero_grad() sets gradients to none (they are made again in backward), "
      "optimizer state exists (it is made at the first step)");
  e.assumptions.push_back(
      "the optimizer's update allocates nothing of its own (ember's fused updates do not)");
  e.assumptions.push_back(
      "the device's kernels allocate what the dry run's do: ops plan for the target "
      "(core::planning_device: a GPU convolution's im2col columns over the whole batch), but "
      "a choice that depends on the batch itself (split-K weight gradients from 8192 columns "
      "on) is seen only at the dry run's batches, and cuDNN's workspace not at all");
  if (device.is_cuda())
    e.assumptions.push_back(
        "not counted (outside the pools, as in memory_stats): cuBLASLt's 32 MiB workspace "
        "per device and the CUDA context");
  return e;
}

std::string MemoryEstimate::to_string() const {
  std::ostringstream out;
  auto row = [&](const char* name, int64_t bytes) {
    char line[128];
    std::snprintf(line, sizeof line, "%-18s %14lld bytes %10.2f MiB\n", name,
                  static_cast<long long>(bytes), static_cast<double>(bytes) / (1 << 20));
    out << line;
  };
  out << "training step at batch " << batch << "\n";
  row("parameters", parameters);
  row("buffers", buffers);
  row("gradients", gradients);
  row("optimizer state", optimizer_state);
  row("activations", activations);
  row("total", total);
  for (const std::string& a : assumptions) out << "  - " << a << "\n";
  return out.str();
}

}  // namespace ember
