// tests/test_silent_acceptance.cpp — inputs PyTorch refuses that ember used to accept
// silently (issue 27 item 18), and the defined float-to-integer conversion. Each test failed
// before its fix.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "ember/data/preprocess.hpp"
#include "ember/data/readers.hpp"
#include "ember/ember.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/norm.hpp"
#include "ember/runtime.hpp"
#include "error_of.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;

void expect_mentions(const std::string& message, const std::vector<std::string>& parts) {
  for (const std::string& p : parts)
    EXPECT_NE(message.find(p), std::string::npos) << "'" << p << "' not in: " << message;
}

// NaN, ±inf and values outside the range of an integer dtype: PyTorch's "value cannot be
// converted to type int32_t without overflow".
TEST(SilentAcceptance, ScalarsThatAnIntegerDtypeCannotHoldAreRefused) {
  for (DType dt : {DType::i32, DType::i64, DType::u8}) {
    for (double v : {double(NAN), double(INFINITY), -double(INFINITY), 1e30}) {
      const std::string what = std::string(dtype_name(dt)) + " " + std::to_string(v);
      expect_mentions(error_of([&] { full({2}, v, {.dtype = dt}); }, what),
                      {"full", std::string(dtype_name(dt))});
      Tensor t = zeros({2}, {.dtype = dt});
      expect_mentions(error_of([&] { t.fill_(v); }, what), {"fill_", std::string(dtype_name(dt))});
      expect_mentions(error_of(
                          [&] {
                            tensor({1.0f, static_cast<float>(v)}, {2}, {.dtype = dt});
                          },
                          what),
                      {"tensor", std::string(dtype_name(dt))});
    }
  }
  expect_mentions(error_of([] { full({1}, -1.0, {.dtype = DType::u8}); }), {"full", "u8", "-1"});
  expect_mentions(error_of([] { full({1}, 3e9, {.dtype = DType::i32}); }), {"full", "i32"});
  // In range: accepted (fractions truncate toward zero, as PyTorch).
  EXPECT_EQ(full({1}, 2147483647.0, {.dtype = DType::i32}).item<int32_t>(), 2147483647);
  EXPECT_EQ(full({1}, -2.7, {.dtype = DType::i64}).item<int64_t>(), -2);
  // bool takes any value: non-zero (NaN included) is true, as PyTorch.
  EXPECT_TRUE(full({1}, NAN, {.dtype = DType::boolean}).item<bool>());
  EXPECT_FALSE(full({1}, 0.0, {.dtype = DType::boolean}).item<bool>());
}

// A float tensor converted to an integer dtype: Note [Float to integer casts] — NaN gives 0
// and ±inf or out-of-range values saturate, the same on every device (C++ leaves it
// undefined; x86 gave INT_MIN for every one).
TEST(SilentAcceptance, FloatToIntegerConversionSaturates) {
  const float big = 3e38f;
  const Tensor x = from_vector<float>({NAN, INFINITY, -INFINITY, big, -big, 2.9f, -2.9f}, {7});
  const std::vector<int32_t> i32 = x.to(DType::i32).to_vector<int32_t>();
  const std::vector<int32_t> want32 = {0, 2147483647, -2147483647 - 1, 2147483647, -2147483647 - 1,
                                       2, -2};
  EXPECT_EQ(i32, want32);
  const std::vector<int64_t> i64 = x.to(DType::i64).to_vector<int64_t>();
  const int64_t hi = std::numeric_limits<int64_t>::max(), lo = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(i64, (std::vector<int64_t>{0, hi, lo, hi, lo, 2, -2}));
  // copy_ from a float tensor into an integer one converts the same way.
  Tensor dst = zeros({7}, {.dtype = DType::i32});
  dst.copy_(x);
  EXPECT_EQ(dst.to_vector<int32_t>(), want32);
  if (cuda_available())
    EXPECT_EQ(x.to(Device::cuda(0)).to(DType::i32).to(Device::cpu()).to_vector<int32_t>(), want32);
}

TEST(SilentAcceptance, RandomFactoriesRefuseEmptyOrNegativeRanges) {
  expect_mentions(error_of([] { randn({2}, {}, 0.0, -1.0); }), {"randn", "std", "-1"});
  expect_mentions(error_of([] { randn({2}, {}, 0.0, NAN); }), {"randn", "std"});
  expect_mentions(error_of([] { rand({2}, {}, 1.0, 0.0); }), {"rand", "low", "high"});
  expect_mentions(error_of([] { rand({2}, {}, 0.0, INFINITY); }), {"rand"});
  // The edges PyTorch accepts: std = 0 (the mean), low == high (a constant).
  EXPECT_EQ(randn({3}, {}, 4.0, 0.0).sum().item<float>(), 12.0f);
  EXPECT_EQ(rand({3}, {}, 2.0, 2.0).sum().item<float>(), 6.0f);
}

TEST(SilentAcceptance, InstanceNormOverOneSpatialElementIsRefusedInTraining) {
  nn::InstanceNorm1d norm(3);
  expect_mentions(error_of([&] {
                    norm(randn({2, 3, 1}));
                  }),
                  {"InstanceNorm1d", "more than 1 spatial element", "[2, 3, 1]"});
  nn::InstanceNorm2d norm2(3);
  expect_mentions(error_of([&] { norm2(randn({2, 3, 1, 1})); }), {"InstanceNorm2d"});
  // Two positions are fine; eval mode without running stats normalises too (PyTorch refuses
  // only in training).
  EXPECT_EQ(norm(randn({2, 3, 2})).shape(), Shape({2, 3, 2}));
}

std::string write_file(const ember_test::ScratchDir& dir, const std::string& name,
                       const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

TEST(SilentAcceptance, CsvValuesOutsideF32AndAWrongDelimiterAreRefused) {
  ember_test::ScratchDir dir;
  const std::string big = write_file(dir, "big.csv", "a,b,y\n1,2,0\n1e39,3,1\n");
  expect_mentions(error_of([&] { data::read_csv(big); }),
                  {"big.csv:3", "field 1", "1e39", "f32", "column 'a'"});
  const std::string semi = write_file(dir, "semi.csv", "a;b;y\n1;2;0\n3;4;1\n");
  expect_mentions(error_of([&] { data::read_csv(semi); }), {"semi.csv", "no feature", "';'"});
  // Explicit infinities and NaN in the text are data, not overflow.
  const std::string inf = write_file(dir, "inf.csv", "a,y\ninf,0\nnan,1\n");
  EXPECT_TRUE(std::isinf(data::read_csv(inf).inputs.to_vector<float>()[0]));
  // With the right delimiter the same file reads.
  EXPECT_EQ(data::read_csv(semi, {.delimiter = ';'}).inputs.shape(), Shape({2, 2}));
}

TEST(SilentAcceptance, StandardizingAColumnThatHoldsNanIsRefused) {
  const Tensor x = from_vector<float>({1, 2, NAN, 4, 5, 6}, {3, 2});
  expect_mentions(error_of([&] { data::Standardizer::fit(x); }),
                  {"Standardizer::fit", "column 0", "row 1", "NaN"});
  const Tensor y = from_vector<float>({1, INFINITY, 3, 4}, {2, 2});
  expect_mentions(error_of([&] { data::Standardizer::fit(y); }), {"column 1", "inf"});
}

// ---- item 21: the switch that finds the op behind a device-side error (GPU tests in
// tests/test_cuda_edge_inputs.cpp) ----

TEST(SyncErrors, TheSwitchIsOffByDefaultAndHarmlessOnTheCpu) {
  EXPECT_FALSE(sync_errors());  // EMBER_CUDA_SYNC_ERRORS is not set for the test run
  set_sync_errors(true);
  EXPECT_TRUE(sync_errors());
  // CPU ops ignore it (CPU kernels throw at once).
  EXPECT_EQ((randn({3}) * 2.0).sum().dim(), 0);
  const std::string m = error_of([] {
    index_select(randn({4, 3}), 0, from_vector<int64_t>({7}, {1}));
  });
  EXPECT_NE(m.find("index_select"), std::string::npos) << m;
  set_sync_errors(false);
  EXPECT_FALSE(sync_errors());
}

// ---- item 19: errors name the op the user called, with the user's shapes ----

TEST(ErrorNames, OneDimensionalConvAndPoolErrorsDescribeTheOneDimensionalCall) {
  const Tensor x = randn({2, 3, 5}), w = randn({4, 3, 7});
  const std::string big_kernel = error_of([&] { conv1d(x, w); });
  expect_mentions(big_kernel, {"conv1d", "kernel size 7", "input length 5", "[2, 3, 5]"});
  EXPECT_EQ(big_kernel.find("conv2d"), std::string::npos) << big_kernel;
  EXPECT_EQ(big_kernel.find("(1, "), std::string::npos) << big_kernel;  // no 2-D pair
  for (const std::string& m :
       {error_of([&] {
          conv1d(x, randn({4, 3, 2}), Tensor(), 0);
        }),
        error_of([&] {
          conv1d(x, randn({4, 3, 2}), randn({5}));
        }),
        error_of([&] { max_pool1d(x, 2, 0); }), error_of([&] { max_pool1d(x, 9); }),
        error_of([&] { avg_pool1d(x, 9); }), error_of([&] { max_pool1d(x, 2, 1, 0, 0); }),
        error_of([&] {
          conv_transpose1d(x, randn({3, 2, 2}), randn({3}));
        })}) {
    EXPECT_EQ(m.find("2d"), std::string::npos) << m;
    EXPECT_TRUE(m.rfind("conv1d", 0) == 0 || m.rfind("max_pool1d", 0) == 0 ||
                m.rfind("avg_pool1d", 0) == 0 || m.rfind("conv_transpose1d", 0) == 0)
        << m;
  }
  // Through the modules too.
  nn::Conv1d conv(nn::Conv1dOptions{.in_channels = 3, .out_channels = 4, .kernel_size = 7});
  expect_mentions(error_of([&] { conv(x); }), {"conv1d", "[2, 3, 5]"});
}

TEST(ErrorNames, MaskedFillNamesItselfNotWhere) {
  const Tensor x = randn({2, 3});
  for (const std::string& m : {error_of([&] {
                                 masked_fill(x, zeros({3, 2}, {.dtype = DType::boolean}), 1.0);
                               }),
                               error_of([&] {
                                 masked_fill(x, zeros({2, 3}), 1.0);
                               }),
                               error_of([&] {
                                 masked_fill(zeros({2}, {.dtype = DType::i32}),
                                             ones({2}, {.dtype = DType::boolean}), NAN);
                               })}) {
    EXPECT_EQ(m.rfind("masked_fill", 0), 0u) << m;
  }
}

}  // namespace
