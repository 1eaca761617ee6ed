// ember/nn/init.hpp — parameter initialisers with PyTorch's distributions and bounds.
#pragma once

#include "ember/tensor.hpp"

namespace ember::nn::init {

/// fan_in and fan_out of a weight as PyTorch computes them (dim 1 × receptive field, dim 0 × ...).
std::pair<int64_t, int64_t> fans(const Shape& shape);
/// Uniform(-bound, bound) of `shape`.
Tensor uniform(const Shape& shape, double bound, DType dtype = DType::f32);
/// PyTorch's kaiming_uniform_(a=√5) used by Linear and Conv weights: bound = 1/√fan_in.
Tensor kaiming_uniform_default(const Shape& shape, DType dtype = DType::f32);
/// Bias default of Linear/Conv: Uniform(±1/√fan_in).
Tensor bias_default(int64_t size, int64_t fan_in, DType dtype = DType::f32);
/// xavier_uniform_: bound = gain·√(6/(fan_in+fan_out)).
Tensor xavier_uniform(const Shape& shape, double gain = 1.0, DType dtype = DType::f32);
/// Normal(0, std).
Tensor normal(const Shape& shape, double std = 1.0, DType dtype = DType::f32);

/// While one is alive on this thread, the random initialisers above return uninitialised
/// tensors on `device` instead of drawing values (and consume no random numbers). io's
/// load_model builds the module under one, since every value then comes from the file
/// (Note [No initialisation on load] in src/io/checkpoint.cpp). Example:
///   { nn::init::SkipInitGuard skip(Device::cuda(0)); net = nn::build(config); }
class SkipInitGuard {
 public:
  explicit SkipInitGuard(Device device = Device::cpu());
  ~SkipInitGuard();
  SkipInitGuard(const SkipInitGuard&) = delete;
  SkipInitGuard& operator=(const SkipInitGuard&) = delete;

 private:
  bool previous_active_;
  Device previous_device_;
};

}  // namespace ember::nn::init
