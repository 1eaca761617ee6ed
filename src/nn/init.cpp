// src/nn/init.cpp — initialisers matching torch.nn.init for each layer's defaults, the fans,
// gains and modes; the in-place torch.nn.init functions are in init_inplace.cpp.
#include "ember/nn/init.hpp"

#include <cctype>
#include <cmath>
#include <optional>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/ops.hpp"

namespace ember::nn::init {

std::pair<int64_t, int64_t> fans(const Shape& shape) {
  EMBER_CHECK(shape.size() >= 2, "init: fan in/out need at least 2 dims (got shape ",
              shape.to_string(), ")");
  int64_t receptive = 1;
  for (int i = 2; i < shape.size(); ++i) receptive *= shape[i];
  return {shape[1] * receptive, shape[0] * receptive};
}

namespace {
thread_local bool t_skip = false;  // SkipInitGuard
thread_local Device t_skip_device = Device::cpu();
}  // namespace

SkipInitGuard::SkipInitGuard(Device device)
    : previous_active_(t_skip), previous_device_(t_skip_device) {
  t_skip = true;
  t_skip_device = device;
}
SkipInitGuard::~SkipInitGuard() {
  t_skip = previous_active_;
  t_skip_device = previous_device_;
}

bool detail::skipping() { return t_skip; }

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  EMBER_CHECK(t.defined(), "init::calculate_fan_in_and_fan_out: undefined tensor");
  return fans(t.shape());
}

Tensor uniform(const Shape& shape, double bound, DType dtype) {
  if (t_skip) return empty(shape, {.dtype = dtype, .device = t_skip_device});
  return rand(shape, {.dtype = dtype}, -bound, bound);
}

Tensor kaiming_uniform_default(const Shape& shape, DType dtype) {
  // kaiming_uniform_(a=sqrt(5)): gain = sqrt(2/(1+5)) = sqrt(1/3); bound = gain*sqrt(3/fan_in) =
  // 1/sqrt(fan_in)
  const auto [fan_in, fan_out] = fans(shape);
  (void)fan_out;
  return uniform(shape, fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0, dtype);
}

Tensor bias_default(int64_t size, int64_t fan_in, DType dtype) {
  return uniform({size}, fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0, dtype);
}

Tensor xavier_uniform(const Shape& shape, double gain, DType dtype) {
  const auto [fan_in, fan_out] = fans(shape);
  return uniform(shape, gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out)), dtype);
}

Tensor normal(const Shape& shape, double std, DType dtype) {
  if (t_skip) return empty(shape, {.dtype = dtype, .device = t_skip_device});
  return randn(shape, {.dtype = dtype}, 0.0, std);
}

FanMode fan_mode(const std::string& mode) {
  std::string lower = mode;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "fan_in") return FanMode::fan_in;
  if (lower == "fan_out") return FanMode::fan_out;
  ember::detail::throw_error(
      ember::detail::concat("init: mode \"", mode, "\" (expected fan_in or fan_out)"));
}

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  for (const char* linear : {"linear", "sigmoid", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                             "conv_transpose2d", "conv_transpose3d"})
    if (nonlinearity == linear) return 1.0;
  if (nonlinearity == "tanh") return 5.0 / 3.0;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);  // torch's default negative slope
    EMBER_CHECK(std::isfinite(slope), "init::calculate_gain: leaky_relu slope ", slope,
                " (expected a finite number)");
    return std::sqrt(2.0 / (1.0 + slope * slope));
  }
  if (nonlinearity == "selu") return 0.75;
  ember::detail::throw_error(ember::detail::concat(
      "init::calculate_gain: unknown nonlinearity \"", nonlinearity,
      "\" (expected linear, conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, "
      "conv_transpose3d, sigmoid, tanh, relu, leaky_relu or selu)"));
}

}  // namespace ember::nn::init
