// tests/test_clip_norm_fast.cpp — clip_grad_norm on CUDA (grad_norm_multi and
// clip_grads_by_norm, Note [Norm and clip at memory speed] in src/cuda/optim.cu) against the
// CPU, through the public API.
//
// The gradients mix odd sizes (scalar heads and tails around the 16-byte body), views that
// start off a 16-byte boundary, and more tensors than one launch's table holds. The norm
// matches the CPU's within 1e-6 relative; the clipped f32 gradients are the CPU's bits when
// the norms are the same bits (both multiply by the same rounded coefficient), else within
// 1e-6 relative. Two runs on the device give the same bits. The CUDA tests skip without a GPU;
// HarnessRunsOnCpu runs the same checks CPU against CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/optim/clip.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::kGpu;

// Gradient values: a tensor of `numel` elements, seen from element `offset` of a buffer one
// `offset` longer (offset 0: the buffer itself). f32 offsets 1-3 and the f64 offset 1 start
// off a 16-byte boundary.
struct GradSpec {
  int64_t numel;
  int64_t offset;
};

std::vector<GradSpec> specs() {
  std::vector<GradSpec> s;
  for (int64_t n :
       {int64_t{1}, int64_t{3}, int64_t{5}, int64_t{1023}, int64_t{4097}, int64_t{(1 << 20) + 3}})
    s.push_back({n, 0});
  s.push_back({70001, 1});
  s.push_back({4099, 2});
  s.push_back({3, 1});
  for (int64_t i = 0; i < 140; ++i) s.push_back({1 + (i * 37) % 300, i % 4});  // > 128 tensors
  return s;
}

// The buffers holding each gradient (with its leading `offset` elements), made once on the CPU.
std::vector<Tensor> make_buffers(const std::vector<GradSpec>& s, DType dtype) {
  manual_seed(2024);
  std::vector<Tensor> out;
  for (const GradSpec& g : s) out.push_back(randn({g.numel + g.offset}).to(dtype));
  return out;
}

struct ClipResult {
  double norm = 0.0;
  std::vector<Tensor> grads;  // on the CPU, after clipping
};

// Clips fresh copies of `buffers`' gradient views on `device`.
ClipResult run_clip(const std::vector<GradSpec>& s, const std::vector<Tensor>& buffers,
                    Device device, double max_norm, double norm_type) {
  std::vector<Tensor> params;
  for (size_t i = 0; i < s.size(); ++i) {
    const Tensor buffer = buffers[i].to(device).clone();
    const Tensor grad = buffer.slice(0, s[i].offset, s[i].offset + s[i].numel);
    EXPECT_TRUE(grad.is_contiguous()) << "a 1-d slice with step 1 stays contiguous";
    if (s[i].offset % (16 / static_cast<int64_t>(element_size(buffers[i].dtype()))) != 0) {
      EXPECT_NE(reinterpret_cast<uintptr_t>(grad.data_ptr()) % 16, 0u)
          << "the view must start off a 16-byte boundary";
    }
    Tensor p = zeros({s[i].numel}, {.dtype = buffers[i].dtype(), .device = device});
    p.requires_grad_();
    p.set_grad(grad);
    params.push_back(p);
  }
  ClipResult r;
  r.norm = optim::clip_grad_norm(params, max_norm, norm_type);
  for (const Tensor& p : params) r.grads.push_back(p.grad().to(Device::cpu()).contiguous());
  return r;
}

template <typename T>
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<T> x = a.to_vector<T>(), y = b.to_vector<T>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

// Names the case, the tensor and the first mismatches.
::testing::AssertionResult grads_match(const Tensor& want, const Tensor& got, bool bitwise,
                                       const std::string& what) {
  const std::vector<double> a = want.to(DType::f64).to_vector<double>();
  const std::vector<double> b = got.to(DType::f64).to_vector<double>();
  if (a.size() != b.size())
    return ::testing::AssertionFailure()
           << what << ": " << b.size() << " elements, expected " << a.size();
  std::ostringstream msg;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool ok = bitwise ? a[i] == b[i] : std::abs(a[i] - b[i]) <= 1e-6 * std::abs(a[i]);
    if (ok) continue;
    if (bad < 5) msg << " [" << i << "] cuda " << b[i] << " cpu " << a[i] << ";";
    ++bad;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << " (" << a.size() << " elements, " << (bitwise ? "bitwise" : "rtol 1e-6")
         << "): " << bad << " differ:" << msg.str();
}

// Clips on `device` (twice) and on the CPU, and compares.
void check_against_cpu(DType dtype, Device device) {
  const std::vector<GradSpec> s = specs();
  const std::vector<Tensor> buffers = make_buffers(s, dtype);
  for (double norm_type : {2.0, optim::kInfNorm, 3.0}) {
    for (double max_norm : {0.5, 1e30}) {  // clips; leaves the gradients as they are
      const std::string name = "clip_grad_norm " + std::string(dtype_name(dtype)) + " norm_type " +
                               std::to_string(norm_type) + " max_norm " + std::to_string(max_norm);
      const ClipResult cpu = run_clip(s, buffers, Device::cpu(), max_norm, norm_type);
      const ClipResult gpu = run_clip(s, buffers, device, max_norm, norm_type);
      const ClipResult again = run_clip(s, buffers, device, max_norm, norm_type);
      EXPECT_NEAR(gpu.norm, cpu.norm, 1e-6 * cpu.norm) << name << ": total norm";
      EXPECT_EQ(std::memcmp(&gpu.norm, &again.norm, sizeof(double)), 0)
          << name << ": the norm differs between two runs (" << gpu.norm << ", " << again.norm
          << ")";
      // Equal f32 norms give the same coefficient, and each product is rounded once.
      const bool bitwise = dtype == DType::f32 && gpu.norm == cpu.norm;
      for (size_t i = 0; i < s.size(); ++i) {
        const std::string what = name + " grad " + std::to_string(i) + " (numel " +
                                 std::to_string(s[i].numel) + ", offset " +
                                 std::to_string(s[i].offset) + ")";
        ASSERT_TRUE(grads_match(cpu.grads[i], gpu.grads[i], bitwise, what));
        const bool repeat = dtype == DType::f32 ? same_bits<float>(gpu.grads[i], again.grads[i])
                                                : same_bits<double>(gpu.grads[i], again.grads[i]);
        ASSERT_TRUE(repeat) << what << ": the clipped gradient differs between two runs";
      }
    }
  }
}

// The harness itself (views, odd sizes, many tensors) on the CPU against itself.
TEST(ClipNormFast, HarnessRunsOnCpu) {
  check_against_cpu(DType::f32, Device::cpu());
  check_against_cpu(DType::f64, Device::cpu());
}

TEST(ClipNormFast, F32MatchesCpuAndRepeats) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: clip_grad_norm CUDA kernels not run";
  check_against_cpu(DType::f32, kGpu);
}

TEST(ClipNormFast, F64MatchesCpuAndRepeats) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: clip_grad_norm CUDA kernels not run";
  check_against_cpu(DType::f64, kGpu);
}

}  // namespace
