// tests/tensor_values.hpp — the small helpers many test files share: a tensor's values as a host
// vector, tensors built from a list of values, seeded random inputs, the devices to run on and
// the non-finite constants. They live here, not in each file's anonymous namespace, because the
// test programs compile as unity builds (tests/CMakeLists.txt), where two files' helpers of one
// name collide:
//
//   using ember_test::floats;
//   EXPECT_EQ(floats(relu(x)), (std::vector<float>{0, 2}));
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "ember/ember.hpp"

namespace ember_test {

/// The first CUDA device (the GPU tests skip where there is none).
inline constexpr ember::Device kGpu = ember::Device::cuda(0);

/// The devices a test runs on: the CPU, and cuda:0 where a GPU is visible.
inline std::vector<ember::Device> devices() {
  std::vector<ember::Device> d{ember::Device::cpu()};
  if (ember::cuda_available()) d.push_back(kGpu);
  return d;
}

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();
/// The f32 ones, for lists of float values (a double NaN would narrow there).
inline constexpr float kFloatNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kFloatInf = std::numeric_limits<float>::infinity();

/// randn(shape) from generator seed `seed` (the global generator is reseeded).
inline ember::Tensor seeded_randn(const ember::Shape& shape, uint64_t seed) {
  ember::manual_seed(seed);
  return ember::randn(shape);
}

/// Values of `t` (any device, dtype and strides), row-major, as f32 / f64 / i64.
inline std::vector<float> floats(const ember::Tensor& t) {
  return t.to(ember::Device::cpu()).to(ember::DType::f32).contiguous().to_vector<float>();
}
inline std::vector<double> doubles(const ember::Tensor& t) {
  return t.to(ember::Device::cpu()).to(ember::DType::f64).contiguous().to_vector<double>();
}
inline std::vector<int64_t> ints(const ember::Tensor& t) {
  return t.to(ember::Device::cpu()).to(ember::DType::i64).contiguous().to_vector<int64_t>();
}

/// A CPU tensor of `v` with `shape` (1-D when no shape is given), of dtype f32 / f64 / i64.
inline ember::Tensor f32(const std::vector<float>& v, const ember::Shape& shape) {
  return ember::from_vector<float>(v, shape);
}
inline ember::Tensor f32(const std::vector<float>& v) {
  return f32(v, {static_cast<int64_t>(v.size())});
}
inline ember::Tensor f64(const std::vector<double>& v, const ember::Shape& shape) {
  return ember::from_vector<double>(v, shape);
}
inline ember::Tensor f64(const std::vector<double>& v) {
  return f64(v, {static_cast<int64_t>(v.size())});
}
inline ember::Tensor i64(const std::vector<int64_t>& v, const ember::Shape& shape) {
  return ember::from_vector<int64_t>(v, shape);
}
inline ember::Tensor i64(const std::vector<int64_t>& v) {
  return i64(v, {static_cast<int64_t>(v.size())});
}

}  // namespace ember_test
