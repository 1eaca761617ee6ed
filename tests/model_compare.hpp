// tests/model_compare.hpp — one model's training state against another's (the GPU's against the
// CPU's, the same weights): every parameter's gradient as a whole tensor, and every buffer.
//
//   ember_test::expect_grads_close_in_norm(cpu->named_parameters(), gpu->named_parameters(),
//                                          1e-3f, 0.0f, "cuda");
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "ember/ember.hpp"
#include "fixtures.hpp"

namespace ember_test {

/// Each gradient of `got` (any device) within rel·‖want‖ + floor of `want`'s in the 2-norm: one
/// ReLU input that rounds to the other side of 0 moves a few elements, not the norm. The two
/// lists are the same model's parameters, in order.
inline void expect_grads_close_in_norm(const ember::nn::NamedTensors& want,
                                       const ember::nn::NamedTensors& got, float rel, float floor,
                                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const ember::Tensor w = want[i].second.grad();
    const ember::Tensor g = got[i].second.grad().to(ember::Device::cpu());
    EXPECT_LT(ember::norm(g - w).item<float>(), rel * ember::norm(w).item<float>() + floor)
        << what << " grad of " << want[i].first;
  }
}

/// Each gradient of `got` (f32, any device) as accurate as `same`'s (f32 on the CPU, the same
/// step) against `exact` (the step in f64 on the CPU): within the larger of rel·‖exact‖ and
/// `factor` times `same`'s own distance from `exact`, in the 2-norm. A deep net in train mode
/// (batch norm over a few values per channel) moves f32 gradients by more than any fixed bound
/// a wrong kernel would still cross; measured against the CPU's own rounding, a wrong kernel
/// still stands out by orders of magnitude.
inline void expect_grads_as_accurate(const ember::nn::NamedTensors& exact,
                                     const ember::nn::NamedTensors& same,
                                     const ember::nn::NamedTensors& got, float rel, float factor,
                                     const std::string& what) {
  ASSERT_EQ(got.size(), exact.size()) << what;
  ASSERT_EQ(same.size(), exact.size()) << what;
  for (size_t i = 0; i < exact.size(); ++i) {
    const ember::Tensor e = exact[i].second.grad().to(ember::DType::f64);
    const ember::Tensor s = same[i].second.grad().to(ember::DType::f64);
    const ember::Tensor g = got[i].second.grad().to(ember::Device::cpu()).to(ember::DType::f64);
    const double own = ember::norm(s - e).item<double>();
    const double off = ember::norm(g - e).item<double>();
    const double bound = std::max(rel * ember::norm(e).item<double>(), factor * own);
    EXPECT_LE(off, bound) << what << " grad of " << exact[i].first << ": " << off
                          << " from the f64 gradient, where the CPU's f32 is " << own;
  }
}

/// Each buffer of `got` (any device) within rtol/atol of `want`'s (check_close's rule).
inline void expect_buffers_close(const ember::nn::NamedTensors& want,
                                 const ember::nn::NamedTensors& got, double rtol, double atol,
                                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    expect_close(got[i].second.to(ember::Device::cpu()), want[i].second, rtol, atol,
                 what + " " + want[i].first);
}

/// One train-mode step in f64 of `cpu` and of `gpu` (the same architecture; `gpu` takes `cpu`'s
/// weights and moves to the GPU, where its convolutions run im2col, as cuDNN declines f64) on a
/// batch of 4 images of 3×64×64 and 10 classes drawn here: logits and every gradient within f64
/// rounding. f64 leaves no ReLU or max decision near enough a tie to flip, so a gap here is a
/// wrong kernel, where a gap in f32 alone may be rounding.
inline void expect_f64_step_matches(ember::nn::Module cpu, ember::nn::Module gpu) {
  using ember::Device;
  cpu->to(ember::DType::f64);
  gpu->to(ember::DType::f64);
  gpu->load_state_dict(cpu->state_dict());
  gpu->to(Device::cuda(0));
  const ember::Tensor x = ember::randn({4, 3, 64, 64}).to(ember::DType::f64);
  const ember::Tensor y = ember::randint(0, 10, {4});
  cpu->train();
  gpu->train();
  const ember::Tensor logits_cpu = cpu(x), logits_gpu = gpu(x.to(Device::cuda(0)));
  expect_close(logits_gpu.to(Device::cpu()), logits_cpu, 1e-9, 1e-12, "cuda f64 train logits");
  ember::cross_entropy(logits_cpu, y).backward();
  ember::cross_entropy(logits_gpu, y.to(Device::cuda(0))).backward();
  expect_grads_close_in_norm(cpu->named_parameters(), gpu->named_parameters(), 1e-8f, 1e-12f,
                             "cuda f64");
}

}  // namespace ember_test
