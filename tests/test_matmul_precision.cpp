// tests/test_matmul_precision.cpp — set_float32_matmul_precision / get_float32_matmul_precision:
// the setting round-trips, unknown names are refused, the CPU ignores it, and on CUDA "high"
// computes f32 GEMMs (matmul, linear, bmm, im2col convolutions) in TF32 — within TF32's error of
// "highest" and not bitwise equal to it — while "highest" stays bitwise the default's result.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/conv_backend.hpp"
#include "ember/ember.hpp"

namespace {

using namespace ember;  // NOLINT: test file

// Restores the process default ("highest") when a test ends, pass or fail.
struct PrecisionScope {
  ~PrecisionScope() { set_float32_matmul_precision("highest"); }
};

std::string precision_error(const std::string& precision) {
  try {
    set_float32_matmul_precision(precision);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to(Device::cpu()).to_vector<float>();
  const std::vector<float> y = b.to(Device::cpu()).to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

// ‖a − b‖ / ‖b‖ (Frobenius), in f64 on the host.
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to(Device::cpu()).to_vector<float>();
  const std::vector<float> y = b.to(Device::cpu()).to_vector<float>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    den += double(y[i]) * y[i];
  }
  return std::sqrt(num / den);
}

TEST(MatmulPrecision, DefaultIsHighestAndRoundTrips) {
  const PrecisionScope restore;
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  EXPECT_FALSE(detail::allow_tf32());
  set_float32_matmul_precision("high");
  EXPECT_EQ(get_float32_matmul_precision(), "high");
  EXPECT_TRUE(detail::allow_tf32());
  set_float32_matmul_precision("medium");  // as PyTorch on CUDA: TF32
  EXPECT_EQ(get_float32_matmul_precision(), "medium");
  EXPECT_TRUE(detail::allow_tf32());
  set_float32_matmul_precision("highest");
  EXPECT_EQ(get_float32_matmul_precision(), "highest");
  EXPECT_FALSE(detail::allow_tf32());
}

TEST(MatmulPrecision, UnknownNamesRefused) {
  const PrecisionScope restore;
  set_float32_matmul_precision("high");
  for (const std::string bad : {"HIGH", "", "low", "tf32", "highest "})
    EXPECT_EQ(precision_error(bad), "set_float32_matmul_precision: unknown precision \"" + bad +
                                        "\" (expected \"highest\", \"high\" or \"medium\")");
  EXPECT_EQ(get_float32_matmul_precision(), "high");  // a refused name changes nothing
}

TEST(MatmulPrecision, CpuIgnoresIt) {
  const PrecisionScope restore;
  manual_seed(8);
  const Tensor a = randn({64, 96}), b = randn({96, 80});
  const Tensor x = randn({2, 3, 9, 9}), w = randn({4, 3, 3, 3});
  const Tensor mm0 = matmul(a, b), conv0 = conv2d(x, w);
  set_float32_matmul_precision("high");
  EXPECT_TRUE(bitwise_equal(matmul(a, b), mm0));
  EXPECT_TRUE(bitwise_equal(conv2d(x, w), conv0));
}

// "highest" is bitwise what the default computed; "high" is TF32: off by about 2^-11 relative
// per product (here ~4e-4 over the whole matrix), well under 1e-3, and never bitwise equal on
// random normal operands (every product loses bits).
void expect_tf32(const std::function<Tensor()>& run, const char* what) {
  const PrecisionScope restore;
  const Tensor fp32 = run();
  set_float32_matmul_precision("highest");
  EXPECT_TRUE(bitwise_equal(run(), fp32)) << what << ": highest changed the default's bits";
  set_float32_matmul_precision("high");
  const Tensor tf32 = run();
  EXPECT_FALSE(bitwise_equal(tf32, fp32)) << what << ": high did not use TF32";
  const double err = relative_error(tf32, fp32);
  EXPECT_LT(err, 1e-3) << what;
  EXPECT_GT(err, 1e-5) << what << ": an error this small is not TF32's";
  set_float32_matmul_precision("highest");
  EXPECT_TRUE(bitwise_equal(run(), fp32)) << what << ": back to highest";
}

TEST(CudaMatmulPrecision, HighUsesTf32OnGemms) {
  SKIP_WITHOUT_CUDA();
  const Device d = Device::cuda(0);
  manual_seed(9);
  const Tensor a = randn({512, 384}, {.device = d}), b = randn({384, 256}, {.device = d});
  const Tensor ba = randn({4, 128, 192}, {.device = d}), bb = randn({4, 192, 64}, {.device = d});
  const Tensor w = randn({320, 384}, {.device = d}), bias = randn({320}, {.device = d});
  expect_tf32([&] { return matmul(a, b); }, "matmul");
  expect_tf32([&] { return bmm(ba, bb); }, "bmm");
  expect_tf32([&] { return linear(a, w, bias); }, "linear");
  // f64 and bf16 GEMMs are not f32 ones: "high" leaves them alone.
  const PrecisionScope restore;
  const Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
  const Tensor bf = matmul(a16, b16).to(DType::f32);
  set_float32_matmul_precision("high");
  EXPECT_TRUE(bitwise_equal(matmul(a16, b16).to(DType::f32), bf));
}

TEST(CudaMatmulPrecision, HighUsesTf32InIm2colConvolutions) {
  SKIP_WITHOUT_CUDA();
  const Device d = Device::cuda(0);
  const bool library = conv_library();
  set_conv_library(false);  // the im2col path: its GEMMs are cuBLASLt's
  manual_seed(10);
  const Tensor x = randn({8, 16, 32, 32}, {.device = d}), w = randn({32, 16, 3, 3}, {.device = d});
  expect_tf32([&] { return conv2d(x, w, Tensor(), 1, 1); }, "conv2d");
  set_conv_library(library);
}

}  // namespace
