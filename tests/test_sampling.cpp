// tests/test_sampling.cpp — the sampling ops (ember/sampling.hpp) and argmax/argmin's ties:
// frequencies and moments within 5 standard errors over 100k-200k draws, a seed repeating a
// draw, the reparameterisation gradient against the analytic one and f64 finite differences,
// the refused parameters; on a GPU, CUDA's draws equal the CPU's and a CapturedStep draws
// anew on every replay, exactly as the eager step would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/sampling.hpp"
#include "ember/train/capture.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;
using ember::test_util::contains;
using ember::test_util::error_of;
using ember_test::check_close;
using ember_test::doubles;
using ember_test::kInf;
using ember_test::kNaN;

std::vector<int64_t> indices(const Tensor& t) { return t.to(Device::cpu()).to_vector<int64_t>(); }

// A frequency within 5 binomial standard errors of p (exact when p is 0 or 1).
void expect_frequency(double count, double n, double p, const std::string& what) {
  const double f = count / n, se = std::sqrt(p * (1.0 - p) / n);
  EXPECT_LE(std::abs(f - p), 5.0 * se)
      << what << ": frequency " << f << " over " << n << " draws, expected probability " << p;
}

// ---- argmax / argmin: ties go to the first index, NaN is the extreme (as PyTorch) ----

// Rows of `cols` values in [0, 1) with `peak` planted at each of a row's positions.
Tensor planted(const std::vector<std::vector<int64_t>>& rows, int64_t cols, double peak,
               DType dtype) {
  manual_seed(3);
  std::vector<double> v =
      doubles(rand({static_cast<int64_t>(rows.size()), cols}, {.dtype = DType::f64}));
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t c : rows[r]) v[r * static_cast<size_t>(cols) + static_cast<size_t>(c)] = peak;
  if (dtype == DType::i32 || dtype == DType::i64)  // integers 0..4 below a peak of 7 or -7
    for (double& x : v)
      if (x != peak) x = std::floor(x * 5.0);
  return from_vector<double>(v, {static_cast<int64_t>(rows.size()), cols}).to(dtype);
}

void expect_first_ties(Device device) {
  // 10,000 columns: ties across CUDA's warps, blocks and chunks, and across CPU threads.
  const std::vector<std::vector<int64_t>> rows = {{9999, 5000, 31, 32},
                                                  {255, 256, 1023, 1024},
                                                  {4095, 4096, 8191},
                                                  {1, 9998},
                                                  {0, 9999},
                                                  {9999},
                                                  {4999, 5000, 5001},
                                                  {2047, 6000, 2048, 33},
                                                  {7, 8, 9, 10, 11, 12}};
  std::vector<int64_t> first;
  for (const auto& r : rows) first.push_back(*std::min_element(r.begin(), r.end()));
  for (const DType dtype :
       {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " on " + device.str());
    const double peak = dtype == DType::i32 || dtype == DType::i64 ? 7.0 : 2.0;
    const Tensor hi = planted(rows, 10000, peak, dtype).to(device);
    EXPECT_EQ(indices(argmax(hi, 1)), first) << "argmax along rows";
    EXPECT_EQ(indices(argmax(hi.t().contiguous(), 0)), first) << "argmax down columns";
    const Tensor lo = planted(rows, 10000, -peak, dtype).to(device);
    EXPECT_EQ(indices(argmin(lo, 1)), first) << "argmin along rows";
    EXPECT_EQ(indices(argmin(lo.t().contiguous(), 0)), first) << "argmin down columns";
    // One long row: CUDA cuts it into chunks whose partial results merge.
    const Tensor one = planted({{900000, 300001, 700000, 300002}}, 1 << 20, peak, dtype);
    EXPECT_EQ(indices(argmax(one.to(device), 1)), std::vector<int64_t>{300001}) << "long row";
    // Every element equal: index 0.
    EXPECT_EQ(indices(argmax(zeros({3, 5000}, {.dtype = dtype, .device = device}), 1)),
              (std::vector<int64_t>{0, 0, 0}));
  }
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)) + " on " + device.str());
    // NaN counts as the extreme for both (the first NaN), and infinities tie like numbers.
    std::vector<double> v(3 * 10000, 0.5);
    v[100] = 2.0, v[5000] = kNaN, v[8000] = kNaN;      // row 0
    v[10000 + 20] = kInf, v[10000 + 9000] = kInf;      // row 1
    v[20000 + 4097] = -kInf, v[20000 + 9999] = -kInf;  // row 2
    const Tensor x = from_vector<double>(v, {3, 10000}).to(dtype).to(device);
    EXPECT_EQ(indices(argmax(x, 1)), (std::vector<int64_t>{5000, 20, 0}));
    EXPECT_EQ(indices(argmin(x, 1)), (std::vector<int64_t>{5000, 0, 4097}));
    EXPECT_EQ(indices(argmax(x.t().contiguous(), 0)), (std::vector<int64_t>{5000, 20, 0}));
  }
}

TEST(Argmax, TiesGoToTheFirstIndex) { expect_first_ties(Device::cpu()); }

TEST(Argmax, CudaTiesGoToTheFirstIndex) {
  SKIP_WITHOUT_CUDA();
  expect_first_ties(Device::cuda(0));
}

// ---- sample_categorical ----

std::vector<double> softmax_of(const std::vector<double>& logits) {
  double top = -kInf, total = 0.0;
  for (double l : logits) top = std::max(top, l);
  std::vector<double> p;
  for (double l : logits) p.push_back(std::exp(l - top));
  for (double q : p) total += q;
  for (double& q : p) q /= total;
  return p;
}

TEST(SampleCategorical, FrequenciesMatchSoftmax) {
  manual_seed(1);
  const std::vector<double> l = {1.0, 0.0, -1.0, 2.0, -kInf, -3.0};
  const std::vector<double> p = softmax_of(l);
  constexpr int64_t kDraws = 200000;
  const Tensor a = sample_categorical(from_vector<double>(l, {6}).to(DType::f32), -1, {kDraws});
  ASSERT_EQ(a.shape(), Shape({kDraws}));
  ASSERT_EQ(a.dtype(), DType::i64);
  std::vector<double> count(6, 0.0);
  for (int64_t i : indices(a)) count.at(static_cast<size_t>(i)) += 1.0;
  for (size_t c = 0; c < 6; ++c)
    expect_frequency(count[c], kDraws, p[c], "category " + std::to_string(c));
  EXPECT_EQ(count[4], 0.0) << "a -inf logit is never drawn";

  // ggmlR's layout: categories down dim 0, one distribution per column; f64 and bf16 logits.
  const std::vector<double> cols = {0.0, 3.0,   -2.0,  // [3 categories, 3 columns]
                                    0.0, 0.0,   -2.0,  //
                                    0.0, -kInf, 1.0};
  for (const DType dtype : {DType::f64, DType::bf16}) {
    const Tensor b = sample_categorical(from_vector<double>(cols, {3, 3}).to(dtype), 0, {50000});
    ASSERT_EQ(b.shape(), Shape({50000, 3}));
    const std::vector<int64_t> drawn = indices(b);
    for (size_t j = 0; j < 3; ++j) {
      const std::vector<double> pj = softmax_of({cols[j], cols[3 + j], cols[6 + j]});
      std::vector<double> cnt(3, 0.0);
      for (size_t s = 0; s < 50000; ++s) cnt.at(static_cast<size_t>(drawn[s * 3 + j])) += 1.0;
      for (size_t c = 0; c < 3; ++c)
        expect_frequency(cnt[c], 50000, pj[c],
                         std::string(dtype_name(dtype)) + " column " + std::to_string(j) +
                             " category " + std::to_string(c));
    }
  }
}

TEST(SampleCategorical, ShapesAsTorchCategorical) {
  const Tensor logits = randn({2, 3, 4});
  EXPECT_EQ(sample_categorical(logits).shape(), Shape({2, 3}));  // Categorical(...).sample()
  EXPECT_EQ(sample_categorical(logits, 1).shape(), Shape({2, 4}));
  EXPECT_EQ(sample_categorical(logits, 1, {5, 6}).shape(), Shape({5, 6, 2, 4}));
  EXPECT_EQ(sample_categorical(randn({7})).dim(), 0);  // one category index, 0-d
  EXPECT_EQ(sample_categorical(randn({7}), 0, {0}).shape(), Shape({0}));
  EXPECT_EQ(indices(sample_categorical(from_vector<float>({-1e30f, 0.f, -1e30f}, {3}), 0, {50})),
            std::vector<int64_t>(50, 1));
  // no gradient: an index
  const Tensor w = randn({3, 4}, {.requires_grad = true});
  EXPECT_FALSE(sample_categorical(w).requires_grad());
}

TEST(SampleCategorical, SeedRepeatsTheDraw) {
  const Tensor logits = randn({64, 100});
  manual_seed(9);
  const std::vector<int64_t> a = indices(sample_categorical(logits, -1, {3}));
  manual_seed(9);
  EXPECT_EQ(indices(sample_categorical(logits, -1, {3})), a);
  EXPECT_NE(indices(sample_categorical(logits, -1, {3})), a) << "the stream moved on";
}

TEST(SampleCategorical, BadLogitsAreRefused) {
  const auto bad = [](std::vector<float> v, const Shape& s) {
    return error_of([&] { sample_categorical(from_vector<float>(v, s)); });
  };
  EXPECT_TRUE(contains(bad({0.f, NAN, 1.f}, {3}), "logits hold nan at element 1"))
      << bad({0.f, NAN, 1.f}, {3});
  EXPECT_TRUE(contains(bad({0.f, 1.f, INFINITY}, {3}), "logits hold inf at element 2"));
  const std::string masked = bad({0.f, -INFINITY, -INFINITY, -INFINITY, 1.f, 2.f}, {3, 2});
  EXPECT_TRUE(contains(masked,
                       "sample_categorical: distribution 1 of logits [3, 2] (dim 1) "
                       "has every logit -inf"))
      << masked;
  EXPECT_TRUE(contains(error_of([] { sample_categorical(zeros({3}, {.dtype = DType::i64})); }),
                       "expected floating logits"));
  EXPECT_TRUE(
      contains(error_of([] { sample_categorical(scalar_tensor(1.0)); }), "with at least one dim"));
  EXPECT_TRUE(contains(error_of([] { sample_categorical(zeros({2, 0})); }), "no categories"));
  EXPECT_TRUE(contains(error_of([] {
                         sample_categorical(zeros({2, 3}), 2);
                       }),
                       "sample_categorical"));
  EXPECT_TRUE(contains(error_of([] {
                         sample_categorical(zeros({2, 3}), -1, {-1});
                       }),
                       "expected non-negative sizes"));
  EXPECT_TRUE(contains(error_of([] {
                         sample_categorical(zeros({2, 3}), -1, {1, 1, 1, 1, 1, 1, 1});
                       }),
                       "expected at most 8"));
  EXPECT_TRUE(contains(error_of([] { sample_categorical(Tensor()); }), "undefined logits"));
}

// ---- bernoulli ----

TEST(Bernoulli, FrequenciesMatchP) {
  manual_seed(2);
  const std::vector<double> p = {0.0, 0.1, 0.5, 0.9, 1.0, 1e-3};
  constexpr int64_t kDraws = 200000;
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor probs = from_vector<double>(p, {1, 6}).to(dtype).expand({kDraws, 6});
    const Tensor b = bernoulli(probs);
    ASSERT_EQ(b.shape(), Shape({kDraws, 6}));
    ASSERT_EQ(b.dtype(), dtype);
    const std::vector<double> v = doubles(b);
    std::vector<double> ones(6, 0.0);
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_TRUE(v[i] == 0.0 || v[i] == 1.0) << v[i];
      ones[i % 6] += v[i];
    }
    const std::vector<double> held = doubles(probs.narrow(0, 0, 1));  // p as the dtype holds it
    for (size_t c = 0; c < 6; ++c)
      expect_frequency(ones[c], kDraws, held[c], "p " + std::to_string(held[c]));
  }
  // Tensor.bernoulli(p): x's shape, dtype and device
  for (const DType dtype : {DType::f32, DType::i64, DType::f64}) {
    const Tensor b = bernoulli(zeros({kDraws}, {.dtype = dtype}), 0.3);
    ASSERT_EQ(b.dtype(), dtype);
    double total = 0.0;
    for (double x : doubles(b)) total += x;
    expect_frequency(total, kDraws, 0.3, "bernoulli(x, 0.3) " + std::string(dtype_name(dtype)));
  }
  EXPECT_EQ(doubles(bernoulli(ones({100}), 0.0)), std::vector<double>(100, 0.0));
  EXPECT_EQ(doubles(bernoulli(zeros({100}), 1.0)), std::vector<double>(100, 1.0));
}

TEST(Bernoulli, SeedRepeatsAndNoGradient) {
  const Tensor p = rand({50, 40}, {.requires_grad = true});
  manual_seed(4);
  const Tensor a = bernoulli(p);
  EXPECT_FALSE(a.requires_grad());
  manual_seed(4);
  EXPECT_EQ(doubles(bernoulli(p)), doubles(a));
}

TEST(Bernoulli, BadProbabilitiesAreRefused) {
  const auto msg = [](std::vector<float> v) {
    return error_of([&] { bernoulli(from_vector<float>(v, {static_cast<int64_t>(v.size())})); });
  };
  EXPECT_TRUE(contains(msg({0.5f, -0.25f}),
                       "bernoulli: p holds -0.25 at element 1 (expected "
                       "probabilities in [0, 1])"))
      << msg({0.5f, -0.25f});
  EXPECT_TRUE(contains(msg({0.5f, 1.f, 1.5f}), "p holds 1.5 at element 2"));
  EXPECT_TRUE(contains(msg({NAN}), "p holds nan at element 0"));
  EXPECT_TRUE(contains(error_of([] { bernoulli(zeros({3}, {.dtype = DType::i32})); }),
                       "expected floating probabilities"));
  EXPECT_TRUE(contains(error_of([] { bernoulli(zeros({3}), 1.5); }), "bernoulli: p 1.5"));
  EXPECT_TRUE(contains(error_of([] { bernoulli(zeros({3}), kNaN); }), "expected 0 <= p <= 1"));
  EXPECT_TRUE(contains(error_of([] { bernoulli(zeros({3}), -0.1); }), "expected 0 <= p <= 1"));
}

// ---- rsample_normal and normal ----

TEST(RsampleNormal, MomentsMatch) {
  manual_seed(5);
  constexpr int64_t kDraws = 100000;
  const Tensor mean = from_vector<float>({1.f, -3.f}, {2}),
               std = from_vector<float>({0.5f, 2.f}, {2});
  const Tensor x = rsample_normal(mean, std, {kDraws});
  ASSERT_EQ(x.shape(), Shape({kDraws, 2}));
  const std::vector<double> v = doubles(x);
  for (size_t c = 0; c < 2; ++c) {
    const double m = c == 0 ? 1.0 : -3.0, s = c == 0 ? 0.5 : 2.0;
    double sum = 0.0, sq = 0.0;
    for (size_t i = c; i < v.size(); i += 2) sum += v[i];
    const double got = sum / kDraws;
    for (size_t i = c; i < v.size(); i += 2) sq += (v[i] - got) * (v[i] - got);
    EXPECT_NEAR(got, m, 5.0 * s / std::sqrt(double(kDraws))) << "mean of column " << c;
    EXPECT_NEAR(sq / (kDraws - 1), s * s, 5.0 * s * s * std::sqrt(2.0 / kDraws))
        << "variance of column " << c;
  }
  // broadcasting, sample dims first; std 0 gives the mean itself
  EXPECT_EQ(rsample_normal(zeros({3}), ones({2, 1}), {4}).shape(), Shape({4, 2, 3}));
  EXPECT_EQ(doubles(rsample_normal(from_vector<float>({1.f, 2.f}, {2}), zeros({2}))),
            (std::vector<double>{1.0, 2.0}));
  for (const DType dtype : {DType::f64, DType::bf16, DType::f16})
    EXPECT_EQ(rsample_normal(zeros({3}, {.dtype = dtype}), ones({3}, {.dtype = dtype})).dtype(),
              dtype);
}

TEST(RsampleNormal, GradientIsReparameterised) {
  const Tensor mean = randn({3}, {.requires_grad = true});
  const Tensor std = (rand({2, 1}) + 0.5).requires_grad_();
  const Tensor w = randn({2, 3});
  manual_seed(6);
  sum(rsample_normal(mean, std) * w).backward();
  manual_seed(6);
  const Tensor eps = rsample_normal(zeros({3}), ones({2, 1}));  // the same eps, exactly
  EXPECT_TRUE(check_close(mean.grad(), sum(w, Shape{0}), 1e-6, 1e-6, "d/dmean = 1"));
  EXPECT_TRUE(check_close(std.grad(), sum(w * eps, Shape{1}, true), 1e-6, 1e-6, "d/dstd = eps"));
  // f64 finite differences, the draw repeated by re-seeding inside the function; and ggmlR's
  // parameterisation, log_std through exp.
  const auto draw = [](const std::vector<Tensor>& in) {
    manual_seed(7);
    return rsample_normal(in[0], in[1], {3});
  };
  EXPECT_TRUE(gradcheck(
      draw, {randn({2, 3}, {.dtype = DType::f64}), rand({1, 3}, {.dtype = DType::f64}) + 0.5}));
  const auto ggmlr = [](const std::vector<Tensor>& in) {
    manual_seed(8);
    return rsample_normal(in[0], exp(in[1]));
  };
  EXPECT_TRUE(gradcheck(
      ggmlr, {randn({4, 5}, {.dtype = DType::f64}), randn({4, 1}, {.dtype = DType::f64})}));
}

TEST(RsampleNormal, NormalHasNoGradient) {
  manual_seed(10);
  const Tensor mean = randn({1000}, {.requires_grad = true});
  const Tensor n = normal(mean, full({1000}, 0.1));
  EXPECT_FALSE(n.requires_grad());
  manual_seed(11);
  const Tensor a = normal(mean, 0.1);
  manual_seed(11);
  EXPECT_EQ(doubles(a), doubles(normal(mean, full({1000}, 0.1)))) << "one draw, either std";
  EXPECT_EQ(doubles(normal(mean, 0.0)), doubles(mean));
  manual_seed(12);
  const Tensor r = rsample_normal(mean, full({1000}, 0.1));
  manual_seed(12);
  EXPECT_EQ(doubles(normal(mean, full({1000}, 0.1))), doubles(r)) << "rsample's draw";
  double worst = 0.0;
  for (double d : doubles((n - mean).abs())) worst = std::max(worst, d);
  EXPECT_LT(worst, 0.1 * 6.0);
}

TEST(RsampleNormal, BadParametersAreRefused) {
  const std::string negative = error_of([] {
    rsample_normal(zeros({3}), from_vector<float>({1.f, -0.5f, 1.f}, {3}));
  });
  EXPECT_TRUE(contains(negative, "rsample_normal: std holds -0.5 at element 1 (expected std >= 0)"))
      << negative;
  EXPECT_TRUE(contains(error_of([] { rsample_normal(zeros({3}), full({3}, kNaN)); }),
                       "std holds nan at element 0"));
  EXPECT_TRUE(
      contains(error_of([] { normal(zeros({3}), full({3}, -1.0)); }), "normal: std holds -1"));
  EXPECT_TRUE(contains(error_of([] { normal(zeros({3}), -1.0); }), "normal: std -1"));
  EXPECT_TRUE(contains(error_of([] { normal(zeros({3}), kInf); }), "expected a finite std"));
  EXPECT_TRUE(contains(error_of([] { rsample_normal(zeros({3}), ones({4})); }), "rsample_normal"));
  EXPECT_TRUE(contains(error_of([] {
                         rsample_normal(zeros({3}, {.dtype = DType::i64}),
                                        ones({3}, {.dtype = DType::i64}));
                       }),
                       "expected floating parameters"));
  EXPECT_TRUE(contains(error_of([] { rsample_normal(Tensor(), ones({3})); }), "undefined mean"));
}

// ---- multinomial's check: one read, naming the bad weight ----

TEST(Multinomial, BadWeightIsNamed) {
  const std::string msg = error_of([] {
    multinomial(from_vector<float>({0.5f, 0.25f, 0.f, -0.5f}, {2, 2}), 1);
  });
  EXPECT_TRUE(contains(msg,
                       "multinomial: probs hold -0.5 at element 3 (expected no negative, "
                       "NaN or infinite weight)"))
      << msg;
  EXPECT_TRUE(contains(error_of([] {
                         multinomial(from_vector<float>({1.f, INFINITY}, {2}), 1);
                       }),
                       "probs hold inf at element 1"));
}

// ---- CUDA: the CPU's draws, and fresh draws on every replay of a captured step ----

TEST(SamplingCuda, DrawsEqualTheCpu) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  // Runs `draw` after the same seed on the CPU and the GPU.
  const auto both = [&](uint64_t seed, const std::function<Tensor(Device)>& draw) {
    manual_seed(seed);
    const Tensor c = draw(Device::cpu());
    manual_seed(seed);
    const Tensor g = draw(gpu);
    EXPECT_EQ(g.device(), gpu);
    return std::pair<Tensor, Tensor>{c, g.to(Device::cpu())};
  };
  const Tensor logits = randn({300, 1000});
  for (const DType dtype : {DType::f32, DType::bf16, DType::f64}) {
    const auto [c, g] =
        both(1, [&](Device d) { return sample_categorical(logits.to(dtype).to(d), -1, {3}); });
    EXPECT_EQ(indices(g), indices(c)) << "sample_categorical " << dtype_name(dtype);
    const auto [c0, g0] =
        both(2, [&](Device d) { return sample_categorical(logits.to(dtype).to(d), 0, {2}); });
    EXPECT_EQ(indices(g0), indices(c0)) << "sample_categorical over dim 0 " << dtype_name(dtype);
  }
  const Tensor p = rand({500, 300});
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    const auto [c, g] = both(3, [&](Device d) { return bernoulli(p.to(dtype).to(d)); });
    EXPECT_EQ(doubles(g), doubles(c)) << "bernoulli " << dtype_name(dtype);
  }
  const auto [cb, gb] =
      both(4, [&](Device d) { return bernoulli(zeros({70000}, {.device = d}), 0.3); });
  EXPECT_EQ(doubles(gb), doubles(cb)) << "bernoulli(x, p)";
  const Tensor mean = randn({400, 1}), std = rand({1, 300});
  for (const DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const auto [c, g] = both(5, [&](Device d) {
      return rsample_normal(mean.to(dtype).to(d), std.to(dtype).to(d), {2});
    });
    EXPECT_EQ(doubles(g), doubles(c)) << "rsample_normal " << dtype_name(dtype);
  }
  const auto [c64, g64] = both(
      6, [&](Device d) { return normal(mean.to(DType::f64).to(d), std.to(DType::f64).to(d)); });
  // f64 normal: the devices' log and cos differ in the last bit
  EXPECT_TRUE(check_close(g64, c64, 1e-14, 1e-15, "f64 normal"));
  const auto [cm, gm] = both(7, [&](Device d) { return multinomial(p.to(d), 5, true); });
  EXPECT_EQ(indices(gm), indices(cm)) << "multinomial with replacement";
  // Bad parameters on the GPU: the same errors.
  EXPECT_TRUE(contains(error_of([&] { bernoulli(full({4}, 1.5, {.device = gpu})); }),
                       "p holds 1.5 at element 0"));
  EXPECT_TRUE(contains(error_of([&] {
                         sample_categorical(full({2, 3}, -kInf, {.device = gpu}));
                       }),
                       "distribution 0 of logits [2, 3] (dim 1) has every logit -inf"));
  EXPECT_TRUE(contains(error_of([&] {
                         rsample_normal(zeros({2}, {.device = gpu}),
                                        full({2}, -1.0, {.device = gpu}));
                       }),
                       "std holds -1 at element 0"));
}

TEST(SamplingCuda, CapturedStepDrawsAnewOnEveryReplay) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  const Tensor mu = randn({8, 4}, {.device = gpu, .requires_grad = true});
  const auto step = [&](const std::vector<Tensor>& in) {
    // in: logits [16, 50], probabilities [16, 50], std [8, 4]
    Tensor a = rsample_normal(mu, in[2]);
    sum(a * a).backward();
    return std::vector<Tensor>{sample_categorical(in[0], -1, {2}),
                               bernoulli(in[1]),
                               multinomial(in[1], 3, true),
                               multinomial(in[1], 3, false),
                               normal(in[0], 0.5),
                               a,
                               mu.grad().clone()};
  };
  const std::vector<Tensor> inputs = {randn({16, 50}, {.device = gpu}),
                                      rand({16, 50}, {.device = gpu}),
                                      rand({8, 4}, {.device = gpu}) + 0.1};
  constexpr int kCalls = 5;
  // Eager: the reference.
  std::vector<std::vector<std::vector<double>>> eager(kCalls), graph(kCalls);
  manual_seed(13);
  for (int i = 0; i < kCalls; ++i) {
    mu.zero_grad();
    for (const Tensor& t : step(inputs)) eager[i].push_back(doubles(t));
  }
  manual_seed(13);
  train::CapturedStep captured([&](const std::vector<Tensor>& in) {
    mu.zero_grad();
    return step(in);
  });
  for (int i = 0; i < kCalls; ++i)
    for (const Tensor& t : captured(inputs)) graph[i].push_back(doubles(t));
  EXPECT_EQ(captured.eager_count(), 1);
  EXPECT_EQ(captured.replay_count(), kCalls - 1);
  const char* names[] = {"sample_categorical",  "bernoulli", "multinomial with replacement",
                         "multinomial without", "normal",    "rsample_normal",
                         "its gradient"};
  for (int i = 0; i < kCalls; ++i)
    for (size_t k = 0; k < graph[i].size(); ++k) {
      EXPECT_EQ(graph[i][k], eager[i][k]) << names[k] << ", call " << i << ": as eagerly";
      if (i > 0) {
        EXPECT_NE(graph[i][k], graph[i - 1][k]) << names[k] << ", call " << i << ": new draws";
      }
    }
}

}  // namespace
