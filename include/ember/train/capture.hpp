// ember/train/capture.hpp — a whole step captured into a CUDA graph once and replayed: zero_grad,
// forward, loss, backward, clipping, the optimizer's and the scheduler's steps cost one graph
// launch instead of one launch per kernel (docs/capture.md).
//
//   train::CapturedStep step([&](const std::vector<Tensor>& in) {
//     opt.zero_grad();
//     Tensor loss = cross_entropy(net(in[0]), in[1]);
//     loss.backward();
//     optim::clip_grad_norm(net->parameters(), 1.0);
//     opt.step();
//     sched.step();
//     return std::vector<Tensor>{loss};
//   });
//   for (...) { Tensor loss = step({x, y})[0]; }   // one training step per call
//
// Every call is one step on its inputs, bitwise the step the function would take eagerly:
// the first `warmup` calls run it eagerly (they make the optimizer's state and the GEMM
// plans), the next captures it and launches the graph, later calls copy their inputs into
// the graph's input buffers and replay it. Random ops draw new numbers on every replay (the
// generator's state is read on the device), optimizers and schedulers advance as eagerly
// (their host side runs again before each replay and writes the step's scalars for the
// graph to read). The returned tensors are the graph's outputs: the next call overwrites
// them, so read or clone what you keep before calling again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::train {

struct CaptureOptions {
  /// Eager calls before the first capture. At least 1 when the step creates state lazily
  /// (every optimizer does on its first step).
  int64_t warmup = 1;
  /// Graphs kept, one per combination of input shapes and dtypes; a call with a new one
  /// beyond this is refused, naming the shapes.
  int64_t max_graphs = 4;
  /// Whether a call with new input shapes captures another graph (false: refused, naming
  /// the captured shapes and the new ones).
  bool recapture = true;
  /// The CUDA device the step runs on (default: the default device when it is a GPU, else
  /// cuda:0). Inputs are copied there.
  std::optional<Device> device = std::nullopt;
};

/// A step function captured into CUDA graphs (one per input shape set) and replayed.
class CapturedStep {
 public:
  using StepFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

  /// Throws ember::Error unless the step's device is a CUDA device ("graph capture needs a
  /// CUDA device").
  explicit CapturedStep(StepFn step, CaptureOptions options = {});
  ~CapturedStep();
  CapturedStep(CapturedStep&&) noexcept;
  CapturedStep& operator=(CapturedStep&&) noexcept;

  /// One step on `inputs` (any device: they are copied to the step's device); returns the
  /// step function's outputs.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  Device device() const;
  /// Graphs captured and alive.
  int64_t graph_count() const;
  /// Steps run as graphs (each capture's own first launch included) and run eagerly.
  int64_t replay_count() const;
  int64_t eager_count() const;
  /// Kernels the last replayed graph launches per step (0 before the first capture).
  int64_t kernels_per_step() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ember::train
