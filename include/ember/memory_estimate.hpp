// ember/memory_estimate.hpp — how much memory a training step will take on a device, worked
// out before anything is allocated there (docs/memory.md, "Estimating a training step").
//
//   nn::Sequential net(nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 10));  // on the CPU
//   MemoryEstimate e = estimate_training_memory(net, Shape{256, 784},
//                                               {.device = Device::cuda(0),
//                                                .optimizer = OptimizerKind::adam});
//   std::cout << e.to_string();            // parameters, gradients, optimizer state, ...
//   if (e.total > free_bytes) ...          // pick a smaller batch before moving the model
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ember/device.hpp"
#include "ember/dtype.hpp"
#include "ember/shape.hpp"
#include "ember/tensor.hpp"

namespace ember {

namespace nn {
class Module;
}  // namespace nn

/// The optimizer a step uses, by the state it keeps per parameter (tensors of its size).
enum class OptimizerKind : uint8_t {
  none,          // no optimizer (inference with gradients, or an update by hand): 0
  sgd,           // SGD without momentum: 0
  sgd_momentum,  // SGD with momentum (momentum_buffer): 1
  adam,          // Adam / AdamW (exp_avg, exp_avg_sq): 2
  adam_amsgrad,  // Adam / AdamW with amsgrad (and max_exp_avg_sq): 3
};

struct MemoryEstimateOptions {
  /// The device the step will run on: its allocator's rounding is applied to every block.
  Device device = Device::cpu();
  OptimizerKind optimizer = OptimizerKind::adam;
  /// The input's dtype (i64 for token ids; the dry run feeds zeros).
  DType input_dtype = DType::f32;
  /// Run the dry run under autocast to this dtype, as the step will (nullopt: no autocast).
  std::optional<DType> autocast = std::nullopt;
  /// The loss the step computes from the model's output (default: its mean). Its own
  /// temporaries (a cross-entropy's softmax) are part of the step, so pass the real one.
  std::function<Tensor(const Tensor& output)> loss = nullptr;
};

/// A training step's memory on MemoryEstimateOptions::device, in bytes as memory_stats counts
/// them (blocks, rounded by that device's allocator).
struct MemoryEstimate {
  int64_t parameters = 0;                // the model's parameters
  int64_t buffers = 0;                   // its buffers (BatchNorm running statistics)
  int64_t gradients = 0;                 // one gradient per parameter
  int64_t optimizer_state = 0;           // OptimizerKind's tensors per parameter
  int64_t activations = 0;               // the step's peak beyond its gradients: activations, saved
                                         // tensors, temporaries, the batch and the loss
  int64_t total = 0;                     // the step's peak_allocated: all of the above at the peak
  int64_t batch = 0;                     // the batch size estimated for (input_shape[0])
  std::vector<std::string> assumptions;  // what the figures take for granted
  /// A table of the figures and the assumptions.
  std::string to_string() const;
};

/// Estimates the memory of one training step of `model` (forward on a batch of
/// `input_shape`, the loss, backward, the optimizer's update) on `options.device`, before
/// anything is allocated there: activations come from a dry run of the real forward and
/// backward on the CPU at two small batches, extrapolated to input_shape[0] (Note [Estimating
/// a training step's memory] in src/train/memory_estimate.cpp). The model must be on the
/// CPU; it is left as it was (mode, gradients, buffers, the random generator's state).
/// ember::Error for a model with a parameter off the CPU, an input shape without a batch
/// dimension or with a dimension below 1, or a loss that does not give one value.
/// Example: estimate_training_memory(net, Shape{64, 3, 32, 32}, {.device = Device::cuda(0)})
MemoryEstimate estimate_training_memory(const nn::Module& model, const Shape& input_shape,
                                        const MemoryEstimateOptions& options = {});

}  // namespace ember
