// tests/test_tensor.cpp — the tensor core: factories, views sharing storage, conversions,
// printing, memory pools and their accounting (ARCHITECTURE §3), autograd basics, dropout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file

std::vector<float> vals(const Tensor& t) { return t.contiguous().to_vector<float>(); }

double mean_of(const std::vector<float>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double std_of(const std::vector<float>& v) {
  const double m = mean_of(v);
  double s = 0.0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

void expect_floats_equal(const Tensor& t, const std::vector<float>& want, const std::string& what) {
  const std::vector<float> got = vals(t);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << what << " at " << i;
}

// ---------------------------------------------------------------------------------------
// factories

TEST(Factories, ZerosOnesFull) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), Shape({2, 3}));
  EXPECT_EQ(z.dtype(), DType::f32);
  EXPECT_EQ(z.device(), Device::cpu());
  EXPECT_EQ(z.numel(), 6);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_FALSE(z.requires_grad());
  expect_floats_equal(z, std::vector<float>(6, 0.0f), "zeros");
  expect_floats_equal(ones({4}), std::vector<float>(4, 1.0f), "ones");
  expect_floats_equal(full({2, 2}, 2.5), std::vector<float>(4, 2.5f), "full");
  Tensor d = full({3}, -1.25, {.dtype = DType::f64});
  EXPECT_EQ(d.dtype(), DType::f64);
  for (double v : d.to_vector<double>()) EXPECT_EQ(v, -1.25);
  EXPECT_TRUE(ones({2}, {.requires_grad = true}).requires_grad());
  Tensor like = full_like(d, 3.0);
  EXPECT_EQ(like.dtype(), DType::f64);
  EXPECT_EQ(like.shape(), d.shape());
  EXPECT_EQ(zeros_like(z).shape(), z.shape());
  expect_floats_equal(ones_like(z), std::vector<float>(6, 1.0f), "ones_like");
}

TEST(Factories, ZeroDimAndEmpty) {
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_FLOAT_EQ(s.item<float>(), 2.5f);
  Tensor e = zeros({0, 3});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_TRUE(e.to_vector<float>().empty());
}

TEST(Factories, ArangeLinspace) {
  expect_floats_equal(arange(0, 5), {0, 1, 2, 3, 4}, "arange(0, 5)");
  expect_floats_equal(arange(5), {0, 1, 2, 3, 4}, "arange(5)");
  expect_floats_equal(arange(1, 2, 0.25), {1.0f, 1.25f, 1.5f, 1.75f}, "arange(1, 2, 0.25)");
  expect_floats_equal(arange(3, 0, -1), {3, 2, 1}, "arange(3, 0, -1)");
  EXPECT_EQ(arange(0, 10, 3).numel(), 4);  // 0 3 6 9
  Tensor i = arange(0, 4, 1, {.dtype = DType::i64});
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  expect_floats_equal(linspace(0, 1, 5), {0.0f, 0.25f, 0.5f, 0.75f, 1.0f}, "linspace(0, 1, 5)");
  expect_floats_equal(linspace(-1, 1, 3), {-1, 0, 1}, "linspace(-1, 1, 3)");
  expect_floats_equal(linspace(2, 7, 1), {2}, "linspace steps=1");
  Tensor l = linspace(0, 1, 101, {.dtype = DType::f64});
  EXPECT_DOUBLE_EQ(l.to_vector<double>().back(), 1.0);  // end is included exactly
  // start + step·i with the product rounded before the sum, in every element (not one fused
  // multiply-add, not a running sum): the values the GPU test below expects too.
  const std::vector<double> a = arange(0.1, 1000.1, 0.1, {.dtype = DType::f64}).to_vector<double>();
  ASSERT_EQ(a.size(), 10000u);
  int64_t fused_differs = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    volatile double term = 0.1 * static_cast<double>(k);
    ASSERT_EQ(a[k], 0.1 + term) << "element " << k;
    fused_differs += std::fma(0.1, static_cast<double>(k), 0.1) != a[k];
  }
  EXPECT_GT(fused_differs, 0);  // the case tells the two roundings from one
  test_util::expect_error([] { (void)arange(0, std::numeric_limits<double>::infinity()); },
                          {"arange: start 0, end inf, step 1 (expected finite values)"});
  test_util::expect_error([] { (void)arange(std::nan(""), 3); }, {"expected finite values"});
}

// arange on a GPU is made on the device (no host buffer copied in, so it can run inside a
// captured step) and equals the CPU's values bit for bit.
TEST(Factories, ArangeOnTheGpuEqualsTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  struct Case {
    double start, end, step;
    DType dtype;
  };
  for (const Case& c :
       {Case{0, 10, 1, DType::f32}, Case{-3.5, 7.2, 0.3, DType::f64}, Case{5, -5, -1.5, DType::f32},
        Case{0, 100, 7, DType::i64}, Case{0, 1, 0.1, DType::f32}, Case{-2, 2, 0.25, DType::i32},
        Case{0, 3, 0.5, DType::bf16}, Case{0.1, 1000.1, 0.1, DType::f64},
        Case{-7, 70000, 3, DType::i64}, Case{0, 0, 1, DType::f32}}) {
    const Tensor cpu = arange(c.start, c.end, c.step, {.dtype = c.dtype});
    const Tensor gpu = arange(c.start, c.end, c.step, {.dtype = c.dtype, .device = Device::cuda()});
    ASSERT_EQ(gpu.shape(), cpu.shape()) << dtype_name(c.dtype);
    EXPECT_EQ(gpu.dtype(), c.dtype);
    EXPECT_EQ(gpu.to(DType::f64).to(Device::cpu()).to_vector<double>(),
              cpu.to(DType::f64).to_vector<double>())
        << "arange(" << c.start << ", " << c.end << ", " << c.step << ") " << dtype_name(c.dtype);
  }
  const Tensor g = arange(4, {.device = Device::cuda(), .requires_grad = true});
  EXPECT_TRUE(g.requires_grad());
  EXPECT_TRUE(g.is_leaf());
}

// index_select's backward (index_add) on f16/bf16: the gradient is the f32 gradient of the
// same values rounded once per added row (duplicate rows add up), and index_add itself takes
// 16-bit tensors.
TEST(Indexing, SixteenBitIndexSelectBackwardAndIndexAdd) {
  for (DType dt : {DType::f16, DType::bf16}) {
    const std::string name(dtype_name(dt));
    manual_seed(8);
    const Tensor x0 = randn({6, 5}).to(dt), r = randn({5, 5}).to(dt);
    const Tensor idx = from_vector<int64_t>({0, 2, 2, 5, 2}, {5});
    const Tensor x = x0.detach().requires_grad_();
    (index_select(x, 0, idx).to(DType::f32) * r.to(DType::f32)).sum().backward();
    const Tensor xr = x0.to(DType::f32).requires_grad_();
    (index_select(xr, 0, idx) * r.to(DType::f32)).sum().backward();
    ASSERT_TRUE(x.grad().defined()) << name;
    EXPECT_EQ(x.grad().dtype(), dt);
    const double err = max(abs(x.grad().to(DType::f32) - xr.grad())).item<double>();
    EXPECT_LE(err, 2e-2 * max(abs(xr.grad())).item<double>()) << name << " gradient";
    EXPECT_EQ(xr.grad().select(0, 1).abs().sum().item<double>(), 0.0);  // row 1 never picked
    const Tensor added = index_add(zeros({6}, {.dtype = dt}), 0, idx, ones({5}, {.dtype = dt}));
    EXPECT_EQ(added.to(DType::f32).to_vector<float>(), (std::vector<float>{1, 0, 3, 0, 0, 1}))
        << name << " index_add";
  }
}

// parameter(): a temporary nothing else holds becomes the parameter itself (no copy, its
// block counted as Persistent); a tensor the caller still holds is copied, never aliased.
TEST(Factories, ParameterAdoptsATemporaryAndCopiesAHeldTensor) {
  manual_seed(9);
  Tensor t = randn({4, 3});
  const std::vector<float> values = t.to_vector<float>();
  const void* ptr = t.data_ptr();
  const Tensor p = parameter(std::move(t));
  EXPECT_EQ(p.data_ptr(), ptr) << "the temporary was copied";
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
  EXPECT_EQ(pool_of(p), Pool::Persistent);
  EXPECT_EQ(p.to_vector<float>(), values);

  const Tensor held = randn({4, 3});
  const Tensor q = parameter(held);
  EXPECT_NE(q.data_ptr(), held.data_ptr());
  EXPECT_FALSE(held.requires_grad());
  EXPECT_EQ(pool_of(q), Pool::Persistent);
  EXPECT_EQ(q.to_vector<float>(), held.to_vector<float>());

  Tensor base = randn({4, 3});
  const Tensor r = parameter(base.select(0, 1));  // a view of a held storage: copied
  EXPECT_NE(r.data_ptr(), base.select(0, 1).data_ptr());
  EXPECT_EQ(r.to_vector<float>(), base.select(0, 1).to_vector<float>());
  base.zero_();
  EXPECT_NE(r.to_vector<float>(), base.select(0, 1).to_vector<float>());
  EXPECT_TRUE(r.requires_grad());
}

TEST(Factories, RandRanges) {
  manual_seed(3);
  const std::vector<float> u = rand({20000}).to_vector<float>();
  EXPECT_GE(*std::min_element(u.begin(), u.end()), 0.0f);
  EXPECT_LT(*std::max_element(u.begin(), u.end()), 1.0f);
  EXPECT_NEAR(mean_of(u), 0.5, 0.01);
  EXPECT_NEAR(std_of(u), std::sqrt(1.0 / 12.0), 0.01);
  const std::vector<float> r = rand({20000}, {}, 2.0, 5.0).to_vector<float>();
  EXPECT_GE(*std::min_element(r.begin(), r.end()), 2.0f);
  EXPECT_LT(*std::max_element(r.begin(), r.end()), 5.0f);
  EXPECT_NEAR(mean_of(r), 3.5, 0.03);
}

TEST(Factories, RandnMoments) {
  manual_seed(4);
  const std::vector<float> n = randn({100000}).to_vector<float>();
  EXPECT_NEAR(mean_of(n), 0.0, 0.02);
  EXPECT_NEAR(std_of(n), 1.0, 0.02);
  const int64_t beyond3 =
      std::count_if(n.begin(), n.end(), [](float x) { return std::abs(x) > 3.0f; });
  EXPECT_NEAR(static_cast<double>(beyond3) / n.size(), 0.0027, 0.001);  // two-sided 3-sigma tail
  const std::vector<float> m = randn({100000}, {}, 5.0, 0.5).to_vector<float>();
  EXPECT_NEAR(mean_of(m), 5.0, 0.01);
  EXPECT_NEAR(std_of(m), 0.5, 0.01);
  Tensor d = randn({10}, {.dtype = DType::f64});
  EXPECT_EQ(d.dtype(), DType::f64);
}

TEST(Factories, Randint) {
  manual_seed(5);
  Tensor r = randint(3, 7, {2000});
  EXPECT_EQ(r.dtype(), DType::i64);
  const std::vector<int64_t> v = r.to_vector<int64_t>();
  std::set<int64_t> seen(v.begin(), v.end());
  EXPECT_EQ(seen, (std::set<int64_t>{3, 4, 5, 6}));  // every value in [3, 7) and nothing else
}

TEST(Factories, ManualSeedDeterminism) {
  manual_seed(42);
  const std::vector<float> a = randn({100}).to_vector<float>();
  const std::vector<float> ua = rand({50}).to_vector<float>();
  const std::vector<int64_t> ia = randint(0, 1000, {50}).to_vector<int64_t>();
  manual_seed(42);
  const std::vector<float> b = randn({100}).to_vector<float>();
  const std::vector<float> ub = rand({50}).to_vector<float>();
  const std::vector<int64_t> ib = randint(0, 1000, {50}).to_vector<int64_t>();
  EXPECT_EQ(a, b);
  EXPECT_EQ(ua, ub);
  EXPECT_EQ(ia, ib);
  const std::vector<float> c = randn({100}).to_vector<float>();  // the stream moved on
  EXPECT_NE(a, c);
  manual_seed(43);
  EXPECT_NE(randn({100}).to_vector<float>(), a);
}

TEST(Factories, FromVectorAndTensor) {
  Tensor t = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  expect_floats_equal(t, {1, 2, 3, 4, 5, 6}, "from_vector");
  Tensor d = from_vector<double>({0.1, 0.2}, {2});
  EXPECT_EQ(d.dtype(), DType::f64);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{0.1, 0.2}));
  Tensor i = from_vector<int64_t>({7, -8}, {2});
  EXPECT_EQ(i.dtype(), DType::i64);
  Tensor l = tensor({1.5f, 2.5f, 3.5f, 4.5f}, {2, 2});
  EXPECT_EQ(l.shape(), Shape({2, 2}));
  expect_floats_equal(l, {1.5f, 2.5f, 3.5f, 4.5f}, "tensor");
  EXPECT_THROW(from_vector<float>({1, 2, 3}, {2, 2}), Error);
}

// ---------------------------------------------------------------------------------------
// views share storage

Tensor base23() { return arange(0, 6).reshape({2, 3}).contiguous(); }  // [[0 1 2] [3 4 5]]

TEST(Views, ReshapeAndViewShareStorage) {
  Tensor x = base23();
  Tensor r = x.reshape({3, 2});
  Tensor v = x.view({6});
  EXPECT_EQ(r.storage(), x.storage());
  EXPECT_EQ(v.storage(), x.storage());
  r.select(0, 2).fill_(9.0);  // r[2] = elements 4 and 5 of x
  expect_floats_equal(x, {0, 1, 2, 3, 9, 9}, "write through reshape");
  v.narrow(0, 0, 1).fill_(-1.0);
  expect_floats_equal(x, {-1, 1, 2, 3, 9, 9}, "write through view");
  x.fill_(7.0);
  expect_floats_equal(r, std::vector<float>(6, 7.0f), "base write seen in reshape");
}

TEST(Views, TransposeAndPermute) {
  Tensor x = base23();
  Tensor t = x.transpose(0, 1);
  EXPECT_EQ(t.shape(), Shape({3, 2}));
  EXPECT_EQ(t.storage(), x.storage());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.stride(0), 1);
  EXPECT_EQ(t.stride(1), 3);
  t.select(0, 2).fill_(8.0);  // column 2 of x
  expect_floats_equal(x, {0, 1, 8, 3, 4, 8}, "write through transpose");

  Tensor y = arange(0, 24).reshape({2, 3, 4}).contiguous();
  Tensor p = y.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), Shape({4, 2, 3}));
  EXPECT_EQ(p.storage(), y.storage());
  p.select(0, 3).fill_(-1.0);  // y[..., 3]
  const std::vector<float> got = vals(y);
  for (int i = 0; i < 24; ++i) {
    EXPECT_FLOAT_EQ(got[i], i % 4 == 3 ? -1.0f : static_cast<float>(i)) << "at " << i;
  }
  EXPECT_EQ(x.t().shape(), Shape({3, 2}));
}

TEST(Views, SliceAndNarrow) {
  Tensor x = zeros({2, 4});
  Tensor s = x.slice(1, 0, 4, 2);  // columns 0 and 2
  EXPECT_EQ(s.shape(), Shape({2, 2}));
  EXPECT_EQ(s.storage(), x.storage());
  s.fill_(9.0);
  expect_floats_equal(x, {9, 0, 9, 0, 9, 0, 9, 0}, "write through slice with step");
  Tensor n = x.narrow(0, 1, 1);
  EXPECT_EQ(n.shape(), Shape({1, 4}));
  EXPECT_EQ(n.storage(), x.storage());
  n.fill_(1.0);
  expect_floats_equal(x, {9, 0, 9, 0, 1, 1, 1, 1}, "write through narrow");
  Tensor neg = arange(0, 10).slice(0, -3, 10);
  expect_floats_equal(neg, {7, 8, 9}, "slice with negative start");
  expect_floats_equal(arange(0, 10).slice(0, 1, 9, 3), {1, 4, 7}, "slice with step 3");
}

TEST(Views, ExpandSqueezeUnsqueeze) {
  Tensor x = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(e.storage(), x.storage());
  EXPECT_EQ(e.stride(0), 0);
  EXPECT_EQ(e.stride(2), 0);
  x.select(0, 1).fill_(20.0);
  const std::vector<float> ev = vals(e);
  for (int i = 0; i < 24; ++i) {
    const int row = (i / 4) % 3;
    EXPECT_FLOAT_EQ(ev[i], row == 0 ? 1.0f : row == 1 ? 20.0f : 3.0f) << "expand at " << i;
  }
  Tensor sq = x.squeeze(1);
  EXPECT_EQ(sq.shape(), Shape({3}));
  EXPECT_EQ(sq.storage(), x.storage());
  sq.narrow(0, 2, 1).fill_(30.0);
  expect_floats_equal(x, {1, 20, 30}, "write through squeeze");
  Tensor us = sq.unsqueeze(0);
  EXPECT_EQ(us.shape(), Shape({1, 3}));
  EXPECT_EQ(us.storage(), x.storage());
  us.narrow(1, 0, 1).fill_(10.0);
  expect_floats_equal(x, {10, 20, 30}, "write through unsqueeze");
  EXPECT_EQ(zeros({1, 3, 1, 2}).squeeze().shape(), Shape({3, 2}));
  EXPECT_EQ(zeros({3, 4}).unsqueeze(-1).shape(), Shape({3, 4, 1}));
  EXPECT_EQ(zeros({2, 3, 4}).flatten(1).shape(), Shape({2, 12}));
}

TEST(Views, ContiguousOfTransposed) {
  Tensor x = base23();
  Tensor t = x.t();
  ASSERT_FALSE(t.is_contiguous());
  Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.shape(), Shape({3, 2}));
  EXPECT_NE(c.storage(), x.storage());
  expect_floats_equal(c, {0, 3, 1, 4, 2, 5}, "contiguous of transpose");
  EXPECT_EQ(c.to_vector<float>(), t.to_vector<float>());  // to_vector reads in logical order
  c.fill_(0.0);                                           // a copy: the base is untouched
  expect_floats_equal(x, {0, 1, 2, 3, 4, 5}, "base after writing the copy");
}

TEST(Views, InPlaceBumpsSharedVersion) {
  Tensor x = zeros({4});
  Tensor v = x.narrow(0, 1, 2);
  const uint64_t before = x.version();
  v.add_(1.0);
  EXPECT_GT(x.version(), before);
  EXPECT_EQ(x.version(), v.version());
}

TEST(Views, CloneAndCopy) {
  Tensor x = base23();
  Tensor c = x.clone();
  EXPECT_NE(c.storage(), x.storage());
  c.fill_(1.0);
  expect_floats_equal(x, {0, 1, 2, 3, 4, 5}, "clone is independent");
  Tensor y = zeros({2, 3});
  void* ptr = y.data_ptr();
  y.copy_(from_vector<float>({1, 2, 3}, {3}));  // broadcast copy keeps the buffer
  EXPECT_EQ(y.data_ptr(), ptr);
  expect_floats_equal(y, {1, 2, 3, 1, 2, 3}, "copy_ with broadcast");
  y.copy_(from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}));  // and casts
  expect_floats_equal(y, {1, 2, 3, 4, 5, 6}, "copy_ with cast");
}

// ---------------------------------------------------------------------------------------
// conversions

TEST(Conversions, FloatRoundTrips) {
  const std::vector<float> exact = {0.0f,    1.0f,    -2.0f, 0.5f, 0.25f,
                                    -0.125f, 1024.0f, 3.0f,  1.5f, -96.0f};
  Tensor x = from_vector<float>(exact, {10});
  for (DType dt : {DType::f64, DType::f16, DType::bf16}) {
    Tensor y = x.to(dt);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.shape(), x.shape());
    Tensor back = y.to(DType::f32);
    EXPECT_EQ(back.dtype(), DType::f32);
    EXPECT_EQ(back.to_vector<float>(), exact) << "round trip through " << dtype_name(dt);
  }
  EXPECT_EQ(from_vector<float>({65504.0f, 0.099975586f}, {2})
                .to(DType::f16)
                .to(DType::f32)
                .to_vector<float>(),
            (std::vector<float>{65504.0f, 0.099975586f}));
  // Rounding to nearest: 0.1 is not representable in f16 or bf16.
  EXPECT_FLOAT_EQ(tensor({0.1f}).to(DType::f16).to(DType::f32).to_vector<float>()[0],
                  0.0999755859375f);
  EXPECT_FLOAT_EQ(tensor({0.1f}).to(DType::bf16).to(DType::f32).to_vector<float>()[0],
                  0.10009765625f);
  EXPECT_FLOAT_EQ(static_cast<float>(Half(0.1f)), 0.0999755859375f);
  EXPECT_FLOAT_EQ(static_cast<float>(BFloat16(0.1f)), 0.10009765625f);
}

TEST(Conversions, IntegerAndBool) {
  Tensor x = from_vector<float>({1.0f, -2.0f, 3.0f, 0.0f}, {4});
  Tensor i = x.to(DType::i64);
  EXPECT_EQ(i.dtype(), DType::i64);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, -2, 3, 0}));
  Tensor back = i.to(DType::f32);
  EXPECT_EQ(back.to_vector<float>(), x.to_vector<float>());
  Tensor b = x.to(DType::boolean);
  EXPECT_EQ(b.dtype(), DType::boolean);
  EXPECT_EQ(b.to(DType::f32).to_vector<float>(), (std::vector<float>{1, 1, 1, 0}));
  EXPECT_EQ(x.to(DType::i32).to(DType::f64).to_vector<double>(),
            (std::vector<double>{1, -2, 3, 0}));
}

TEST(Conversions, ToVectorAndItem) {
  Tensor x = base23();
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_FLOAT_EQ(x.sum().item<float>(), 15.0f);
  EXPECT_DOUBLE_EQ(x.to(DType::f64).sum().item<double>(), 15.0);
  EXPECT_FLOAT_EQ(x.select(1, 2).select(0, 1).item<float>(), 5.0f);  // element [1, 2]
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
}

TEST(Conversions, Printing) {
  std::ostringstream out;
  out << from_vector<float>({1.5f, 2.0f, -3.25f, 4.0f, 5.0f, 6.0f}, {2, 3});
  const std::string s = out.str();
  EXPECT_NE(s.find("[2, 3]"), std::string::npos) << s;
  EXPECT_NE(s.find("f32"), std::string::npos) << s;
  EXPECT_NE(s.find("cpu"), std::string::npos) << s;
  EXPECT_NE(s.find("1.5"), std::string::npos) << s;
  EXPECT_NE(s.find("-3.25"), std::string::npos) << s;
  EXPECT_EQ(s, from_vector<float>({1.5f, 2.0f, -3.25f, 4.0f, 5.0f, 6.0f}, {2, 3}).to_string());

  std::ostringstream big;
  big << arange(0, 1000000).reshape({1000, 1000});
  const std::string b = big.str();
  EXPECT_LT(b.size(), 5000u) << "a 1000x1000 tensor should print abbreviated";
  EXPECT_NE(b.find("..."), std::string::npos) << b.substr(0, 500);
  EXPECT_NE(b.find("[1000, 1000]"), std::string::npos) << b.substr(0, 500);

  std::ostringstream d;
  d << randint(0, 5, {3});
  EXPECT_NE(d.str().find("i64"), std::string::npos) << d.str();
}

// ---------------------------------------------------------------------------------------
// memory pools (ARCHITECTURE §3)

TEST(Memory, ParameterIsPersistentTemporariesArePass) {
  Tensor p = parameter(randn({16, 8}));
  EXPECT_EQ(pool_of(p), Pool::Persistent);
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
  EXPECT_EQ(p.shape(), Shape({16, 8}));
  Tensor t = randn({16});
  EXPECT_EQ(pool_of(t), Pool::Pass);
  EXPECT_EQ(pool_of(t * 2.0), Pool::Pass);
  EXPECT_EQ(current_pool(), Pool::Pass);
}

TEST(Memory, ParameterCopiesItsInit) {
  Tensor init = randn({4});
  Tensor p = parameter(init);
  EXPECT_NE(p.storage(), init.storage());
  EXPECT_EQ(p.to_vector<float>(), init.to_vector<float>());
  init.fill_(0.0);
  EXPECT_NE(p.to_vector<float>(), init.to_vector<float>());
}

TEST(Memory, PersistentBytesTrackParameters) {
  const int64_t before = memory_stats(Device::cpu()).persistent_bytes;
  {
    Tensor p = parameter(zeros({1024}));
    const int64_t during = memory_stats(Device::cpu()).persistent_bytes;
    EXPECT_GE(during - before, 1024 * 4);
  }
  EXPECT_EQ(memory_stats(Device::cpu()).persistent_bytes, before)
      << "parameter bytes return when it dies";
}

TEST(Memory, PassMemoryReturnsToTheCache) {
  const Device cpu = Device::cpu();
  const int64_t n = 1 << 16;  // 256 KiB of f32
  const MemoryStats s0 = memory_stats(cpu);
  MemoryStats s1;
  {
    Tensor t = empty({n});
    s1 = memory_stats(cpu);
    EXPECT_GE(s1.pass_in_use - s0.pass_in_use, n * 4);
    EXPECT_GE(s1.pass_peak, s1.pass_in_use);
    EXPECT_GT(s1.alloc_count, s0.alloc_count);
  }
  const MemoryStats s2 = memory_stats(cpu);
  EXPECT_EQ(s2.pass_in_use, s0.pass_in_use) << "pass bytes in use go back when the handle drops";
  EXPECT_EQ(s2.pass_reserved, s1.pass_reserved) << "the block stays reserved in the cache";
  {
    Tensor again = empty({n});
    const MemoryStats s3 = memory_stats(cpu);
    EXPECT_EQ(s3.cache_hits, s2.cache_hits + 1) << "the same request is served from the cache";
    EXPECT_EQ(s3.system_allocs, s2.system_allocs);
    EXPECT_EQ(s3.pass_reserved, s2.pass_reserved);
  }
  empty_cache(cpu);
  EXPECT_LT(memory_stats(cpu).pass_reserved, s2.pass_reserved)
      << "empty_cache releases cached blocks";
}

TEST(Memory, PeakAndReset) {
  const Device cpu = Device::cpu();
  reset_peak_stats(cpu);
  const int64_t base = memory_stats(cpu).pass_peak;
  { Tensor t = empty({1 << 15}); }
  EXPECT_GE(memory_stats(cpu).pass_peak - base, (1 << 15) * 4);
  reset_peak_stats(cpu);
  const MemoryStats s = memory_stats(cpu);
  EXPECT_EQ(s.pass_peak, s.pass_in_use);
}

TEST(Memory, PoolGuard) {
  Tensor t;
  {
    PoolGuard guard(Pool::Persistent);
    EXPECT_EQ(current_pool(), Pool::Persistent);
    t = zeros({8});
  }
  EXPECT_EQ(current_pool(), Pool::Pass);
  EXPECT_EQ(pool_of(t), Pool::Persistent);
}

TEST(Memory, ParameterGradIsPersistent) {
  Tensor p = parameter(randn({5}));
  (p * p).sum().backward();
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(pool_of(p.grad()), Pool::Persistent);
}

// Issue 14 item 3: handles compare with is_same() (PyTorch's name), the public way to ask
// what impl() was used for; views of one storage are different tensors.
TEST(Tensor, IsSameComparesHandles) {
  Tensor a = ones({2, 3});
  Tensor b = a;
  EXPECT_TRUE(a.is_same(b));
  EXPECT_FALSE(a.is_same(a.view({6})));
  EXPECT_FALSE(a.is_same(ones({2, 3})));
  EXPECT_TRUE(Tensor().is_same(Tensor()));
  EXPECT_FALSE(a.is_same(Tensor()));
}

// Issue 14 item 5: a parameter's first gradient of a step is the buffer backward wrote,
// counted as Persistent, not a copy into a fresh Persistent block. Dropping `.grad` each
// step (zero_grad's default) therefore costs no more allocations than keeping it, and the
// block goes back to the Pass cache, where the next step's backward finds it again.
TEST(Memory, FirstGradientIsKeptNotCopied) {
  const Device cpu = Device::cpu();
  Tensor w = parameter(randn({64, 32}));
  Tensor b = parameter(randn({64}));
  const Tensor x = randn({16, 32});
  auto step_allocs = [&](bool set_to_none) {
    w.zero_grad(set_to_none);
    b.zero_grad(set_to_none);
    const int64_t before = memory_stats(cpu).alloc_count;
    square(linear(x, w, b)).sum().backward();
    return memory_stats(cpu).alloc_count - before;
  };
  step_allocs(false);  // warm: the gradients exist from here on
  const int64_t kept = step_allocs(false);
  step_allocs(true);
  const int64_t dropped = step_allocs(true);
  EXPECT_EQ(dropped, kept) << "a dropped .grad came back as a copy into a new block";

  EXPECT_EQ(pool_of(w.grad()), Pool::Persistent);
  EXPECT_EQ(pool_of(b.grad()), Pool::Persistent);
  {
    NoGradGuard no_grad;
    const Tensor expected = matmul((2.0 * linear(x, w, b)).transpose(0, 1), x);
    EXPECT_LT((w.grad() - expected).abs().max().item<float>(), 1e-3f);
  }
  const MemoryStats with_grad = memory_stats(cpu);
  w.zero_grad();
  b.zero_grad();
  const MemoryStats without = memory_stats(cpu);
  EXPECT_EQ(with_grad.persistent_bytes - without.persistent_bytes, 64 * 32 * 4 + 64 * 4)
      << "the gradients were counted as Persistent while held";
  EXPECT_EQ(without.pass_reserved, with_grad.pass_reserved + 64 * 32 * 4 + 64 * 4)
      << "their blocks went back to the Pass cache they were carved from";
}

// ---------------------------------------------------------------------------------------
// autograd basics

TEST(Autograd, GradAccumulatesOverBackwards) {
  Tensor x = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(x.grad().defined());
  (x * 3.0).sum().backward();
  expect_floats_equal(x.grad(), {3, 3, 3}, "first backward");
  (x * x).sum().backward();
  expect_floats_equal(x.grad(), {5, 7, 9}, "accumulated");
  x.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(x.grad().defined());
  expect_floats_equal(x.grad(), {0, 0, 0}, "zero_grad(false)");
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = from_vector<float>({1, -2}, {2}).requires_grad_();
  Tensor y = (x * x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  expect_floats_equal(x.grad(), {3, 12}, "first");
  y.backward();
  expect_floats_equal(x.grad(), {6, 24}, "second through the retained graph");
}

TEST(Autograd, NoGradGuardStopsRecording) {
  Tensor x = randn({3}, {.requires_grad = true});
  EXPECT_TRUE(grad_mode_enabled());
  Tensor y;
  {
    NoGradGuard guard;
    EXPECT_FALSE(grad_mode_enabled());
    y = x * 2.0;
    { NoGradGuard nested; }
    EXPECT_FALSE(grad_mode_enabled()) << "a nested guard restores the outer state";
  }
  EXPECT_TRUE(grad_mode_enabled());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.grad_fn(), nullptr);
  Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  EXPECT_NE(z.grad_fn(), nullptr);
  EXPECT_FALSE(z.is_leaf());
  set_grad_mode(false);
  EXPECT_FALSE((x * 2.0).requires_grad());
  set_grad_mode(true);
}

TEST(Autograd, DetachCutsTheGraph) {
  Tensor x = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor a = x * 2.0;
  Tensor d = a.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.storage(), a.storage());
  (d * x).sum().backward();
  expect_floats_equal(x.grad(), {2, 4, 6}, "gradient only through the attached path");
}

TEST(Autograd, BackwardWithGradientForNonScalar) {
  Tensor x = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor y = x * x;
  y.backward(from_vector<float>({1, 10, 100}, {3}));
  expect_floats_equal(x.grad(), {2, 40, 600}, "backward(grad)");
}

TEST(Autograd, GradFunctionLeavesDotGradAlone) {
  Tensor x = from_vector<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor w = from_vector<float>({4, 5}, {2}).requires_grad_();
  Tensor y = (x * x).sum() + (w * 3.0).sum();
  std::vector<Tensor> g = ember::grad({y}, {x, w});
  ASSERT_EQ(g.size(), 2u);
  expect_floats_equal(g[0], {2, 4, 6}, "dy/dx");
  expect_floats_equal(g[1], {3, 3}, "dy/dw");
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  Tensor z = x * 2.0;  // non-scalar output with grad_outputs
  std::vector<Tensor> gz = ember::grad({z}, {x}, {from_vector<float>({1, 2, 3}, {3})});
  expect_floats_equal(gz[0], {2, 4, 6}, "grad with grad_outputs");
}

TEST(Autograd, SharedSubexpressionAndUnusedBranch) {
  Tensor x = from_vector<float>({2}, {1}).requires_grad_();
  Tensor a = x * x;              // used twice
  Tensor y = (a * a + a).sum();  // x^4 + x^2
  Tensor unused = x.exp();       // recorded but not part of y
  y.backward();
  expect_floats_equal(x.grad(), {4 * 8 + 2 * 2}, "d(x^4 + x^2)/dx at 2");
}

TEST(Autograd, ViewsPropagateGradients) {
  Tensor x = arange(0, 6).reshape({2, 3}).contiguous().requires_grad_();
  Tensor y = x.t().slice(0, 0, 3, 2).sum();  // rows 0 and 2 of xᵀ: columns 0 and 2 of x
  y.backward();
  expect_floats_equal(x.grad(), {1, 0, 1, 1, 0, 1}, "slice of transpose");
}

// ---------------------------------------------------------------------------------------
// dropout (random, so statistical and structural checks)

TEST(Dropout, Statistics) {
  manual_seed(11);
  Tensor x = ones({100000});
  const std::vector<float> y = dropout(x, 0.5, true).to_vector<float>();
  EXPECT_NEAR(mean_of(y), 1.0, 0.02);
  const double zeros_fraction =
      static_cast<double>(std::count(y.begin(), y.end(), 0.0f)) / static_cast<double>(y.size());
  EXPECT_NEAR(zeros_fraction, 0.5, 0.01);
  for (float v : y) {
    if (v != 0.0f) {
      ASSERT_FLOAT_EQ(v, 2.0f) << "kept values are scaled by 1/(1-p)";
    }
  }
  manual_seed(12);
  const std::vector<float> y2 = dropout(x, 0.2, true).to_vector<float>();
  const double z2 = static_cast<double>(std::count(y2.begin(), y2.end(), 0.0f)) / y2.size();
  EXPECT_NEAR(z2, 0.2, 0.01);
  EXPECT_NEAR(mean_of(y2), 1.0, 0.02);
}

TEST(Dropout, EvalIsIdentity) {
  Tensor x = randn({1000});
  EXPECT_EQ(dropout(x, 0.5, false).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(dropout(x, 0.0, true).to_vector<float>(), x.to_vector<float>());
}

TEST(Dropout, SameSeedSameMask) {
  Tensor x = ones({4096});
  manual_seed(99);
  const std::vector<float> a = dropout(x, 0.5).to_vector<float>();
  manual_seed(99);
  const std::vector<float> b = dropout(x, 0.5).to_vector<float>();
  EXPECT_EQ(a, b);
  const std::vector<float> c = dropout(x, 0.5).to_vector<float>();
  EXPECT_NE(a, c) << "without reseeding the next mask differs";
}

TEST(Dropout, GradientIsTheScaledMask) {
  manual_seed(21);
  const double p = 0.3;
  Tensor x = (rand({2000}) + 0.5).requires_grad_();  // nonzero, so the mask is y / x
  Tensor y = dropout(x, p);
  y.backward(ones({2000}));
  const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  const std::vector<float> g = x.grad().to_vector<float>();
  int64_t dropped = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const bool kept = yv[i] != 0.0f;
    dropped += kept ? 0 : 1;
    const float mask = kept ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
    ASSERT_FLOAT_EQ(g[i], mask) << "at " << i;
    if (kept) {
      ASSERT_NEAR(yv[i], xv[i] * mask, 1e-5f) << "at " << i;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, 2000);
}

}  // namespace
