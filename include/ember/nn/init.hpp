// ember/nn/init.hpp — parameter initialisers with PyTorch's distributions and bounds.
#pragma once

#include <string>
#include <utility>

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

/// Which fan kaiming initialisation scales by: fan_in keeps the forward pass's variance,
/// fan_out the backward pass's (torch.nn.init's mode argument).
enum class FanMode { fan_in, fan_out };

/// torch.nn.init.calculate_gain: "linear", "conv1d/2d/3d", "conv_transpose1d/2d/3d" and
/// "sigmoid" 1, "tanh" 5/3, "relu" √2, "leaky_relu" √(2/(1+param²)), "selu" 3/4; another name
/// is an ember::Error listing these.
double calculate_gain(const std::string& nonlinearity, double param = 0.0);

struct KaimingOptions {
  double a = 0.0;  // the negative slope of leaky_relu
  FanMode mode = FanMode::fan_in;
  std::string nonlinearity = "leaky_relu";
};

/// torch.nn.init.kaiming_normal_ in place: Normal(0, gain/√fan) with the gain of
/// options.nonlinearity, written into `weight` (at least 2-D; any device; no gradient
/// recorded). Does nothing under a SkipInitGuard or to a weight with no elements (as torch).
/// torchvision's ResNet draws its convolutions so:
///   init::kaiming_normal_(conv->weight(), {.mode = FanMode::fan_out, .nonlinearity = "relu"});
void kaiming_normal_(Tensor& weight, const KaimingOptions& options = {});
/// torch.nn.init.constant_: fills `t` with `value` in place (no gradient recorded). Runs
/// under a SkipInitGuard too, as the value costs no random numbers.
void constant_(Tensor& t, double value);

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
