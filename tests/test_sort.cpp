// tests/test_sort.cpp — what the op fixtures cannot show about sorting, selection and scans:
// NaN and signed-zero order, ties (stable in both directions), integer results, NaN in
// median and cummax, the errors, and the GPU's two sort algorithms and two scan kernels
// against the CPU on rows long enough to reach them (exact indices, values to f32 rounding).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ember/ember.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::ints;
using ember_test::kFloatNaN;

TEST(Sort, NaNIsGreatestAndTiesKeepInputOrderBothWays) {
  Tensor x = from_vector<float>({3, kFloatNaN, 1, 3, -0.0f, 0.0f, kFloatNaN, 1}, {8});
  EXPECT_EQ(ints(sort(x).indices), (std::vector<int64_t>{4, 5, 2, 7, 0, 3, 1, 6}));
  EXPECT_EQ(ints(sort(x, 0, true).indices), (std::vector<int64_t>{1, 6, 0, 3, 2, 7, 4, 5}));
  std::vector<float> v = sort(x, 0, true).values.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
  EXPECT_EQ(v[2], 3.0f);
  EXPECT_EQ(ints(argsort(x)), ints(sort(x).indices));
}

TEST(Sort, IntegersAndZeroDim) {
  Tensor x = from_vector<int32_t>({5, -2, 5, 0, -2}, {5});
  ValuesIndices r = sort(x, 0, true);
  EXPECT_EQ(r.values.dtype(), DType::i32);
  EXPECT_EQ(ints(r.values), (std::vector<int64_t>{5, 5, 0, -2, -2}));
  EXPECT_EQ(ints(r.indices), (std::vector<int64_t>{0, 2, 3, 1, 4}));
  ValuesIndices s = sort(scalar_tensor(2.5));
  EXPECT_EQ(s.values.dim(), 0);
  EXPECT_EQ(s.values.item<float>(), 2.5f);
  EXPECT_EQ(s.indices.item<int64_t>(), 0);
}

TEST(Sort, MedianPropagatesNaNAndNanmedianSkipsIt) {
  Tensor x = from_vector<float>({2, kFloatNaN, 1, 4, 3, 5}, {2, 3});
  ValuesIndices m = median(x, 1);
  std::vector<float> v = m.values.to_vector<float>();
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 4.0f);
  EXPECT_EQ(ints(m.indices), (std::vector<int64_t>{1, 0}));
  ValuesIndices n = nanmedian(x, 1);
  EXPECT_EQ(n.values.to_vector<float>(), (std::vector<float>{1, 4}));
  EXPECT_EQ(ints(n.indices), (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(std::isnan(median(x).item<float>()));
  EXPECT_EQ(nanmedian(x).item<float>(), 3.0f);  // lower median of 1, 2, 3, 4, 5
}

TEST(Scan, CummaxTakesTheLatestTieAndNaNPropagates) {
  Tensor x = from_vector<float>({1, 3, 3, 2, kFloatNaN, 5}, {6});
  ValuesIndices r = cummax(x, 0);
  std::vector<float> v = r.values.to_vector<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), (std::vector<float>{1, 3, 3, 3}));
  EXPECT_TRUE(std::isnan(v[4]) && std::isnan(v[5]));
  EXPECT_EQ(ints(r.indices), (std::vector<int64_t>{0, 1, 2, 2, 4, 4}));
  EXPECT_EQ(ints(cummin(from_vector<int64_t>({4, 2, 2, 7, 1}, {5}), 0).indices),
            (std::vector<int64_t>{0, 1, 2, 2, 4}));
}

TEST(Scan, IntegerAndBoolSumsRunInI64) {
  Tensor big = from_vector<int32_t>({2147483647, 1, 1}, {3});
  Tensor c = cumsum(big, 0);
  EXPECT_EQ(c.dtype(), DType::i64);
  EXPECT_EQ(ints(c), (std::vector<int64_t>{2147483647, 2147483648LL, 2147483649LL}));
  Tensor b = cumsum(from_vector<bool>({true, false, true}, {3}), 0);
  EXPECT_EQ(b.dtype(), DType::i64);
  EXPECT_EQ(ints(b), (std::vector<int64_t>{1, 1, 2}));
  EXPECT_EQ(ints(cumprod(from_vector<int32_t>({2, 3, 4}, {3}), 0)),
            (std::vector<int64_t>{2, 6, 24}));
}

TEST(Sort, BadArgumentsNameTheOpAndTheRange) {
  Tensor x = randn({3, 5});
  std::string e = test_util::error_of([&] { topk(x, 6); });
  EXPECT_NE(e.find("topk: k 6 is out of range for dim -1 of size 5"), std::string::npos) << e;
  e = test_util::error_of([&] { kthvalue(x, 0, 1); });
  EXPECT_NE(e.find("kthvalue: k 0"), std::string::npos) << e;
  e = test_util::error_of([&] { median(zeros({3, 0}), 1); });
  EXPECT_NE(e.find("median: cannot select from an empty dim"), std::string::npos) << e;
  e = test_util::error_of([&] { diff(x, -1); });
  EXPECT_NE(e.find("diff: order n -1"), std::string::npos) << e;
  e = test_util::error_of([&] { diff(x, 1, 1, zeros({2, 1})); });
  EXPECT_NE(e.find("diff: prepend shape [2, 1]"), std::string::npos) << e;
  e = test_util::error_of([&] { sort(from_vector<bool>({true, false}, {2})); });
  EXPECT_NE(e.find("sort: unsupported dtype bool"), std::string::npos) << e;
  e = test_util::error_of([&] { cumsum(x, 2); });
  EXPECT_NE(e.find("cumsum"), std::string::npos) << e;
  e = test_util::error_of([&] { sort(Tensor()); });
  EXPECT_NE(e.find("sort"), std::string::npos) << e;
}

// ---- the GPU's algorithms against the CPU ----

// Values with many ties, a few NaN and both zeros.
Tensor tricky(int64_t rows, int64_t n, DType dtype, uint64_t seed) {
  manual_seed(seed);
  Tensor x = round(randn({rows, n}, {.dtype = DType::f64}) * 20.0);
  x = where(eq(x, 3.0), full({}, -0.0, {.dtype = DType::f64}), x);
  if (is_floating(dtype)) x = where(eq(x, 7.0), full({}, kFloatNaN, {.dtype = DType::f64}), x);
  return x.to(dtype);
}

TEST(SortCuda, BothAlgorithmsGiveTheCpuOrderExactly) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the GPU sort runs on a machine with one";
  const Device gpu = Device::cuda();
  struct Case {
    int64_t rows, n;
  };
  for (DType dtype : {DType::f32, DType::f64, DType::i32, DType::i64}) {
    for (Case c : {Case{1000, 37}, Case{3, 4096}, Case{4, 4097}, Case{2, 70000}, Case{1, 1}}) {
      Tensor x = tricky(c.rows, c.n, dtype, 7 + c.n);
      for (bool descending : {false, true}) {
        const std::string what = std::string(dtype_name(dtype)) + " [" + std::to_string(c.rows) +
                                 ", " + std::to_string(c.n) + "]" + (descending ? " desc" : "");
        ValuesIndices want = sort(x, 1, descending);
        ValuesIndices got = sort(x.to(gpu), 1, descending);
        ASSERT_EQ(ints(got.indices), ints(want.indices)) << what;
        // Values exactly, NaN equal to NaN (check_close counts NaN as a difference).
        const std::vector<double> gv =
            got.values.to(Device::cpu()).to(DType::f64).to_vector<double>();
        const std::vector<double> wv = want.values.to(DType::f64).to_vector<double>();
        ASSERT_EQ(gv.size(), wv.size()) << what;
        int64_t differ = 0;
        for (size_t i = 0; i < gv.size(); ++i)
          differ += !(gv[i] == wv[i] || (std::isnan(gv[i]) && std::isnan(wv[i])));
        EXPECT_EQ(differ, 0) << what << ": values differ from the CPU's";
      }
    }
  }
  // Along a middle dim, and topk / median built on it.
  Tensor x = tricky(6, 5000, DType::f32, 3).reshape({6, 50, 100});
  EXPECT_EQ(ints(sort(x.to(gpu), 1).indices), ints(sort(x, 1).indices));
  EXPECT_EQ(ints(topk(x.to(gpu), 7, 2).indices), ints(topk(x, 7, 2).indices));
  EXPECT_EQ(ints(median(x.to(gpu), 2).indices), ints(median(x, 2).indices));
}

TEST(ScanCuda, LineAndBlockKernelsMatchTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the GPU scans run on a machine with one";
  const Device gpu = Device::cuda();
  manual_seed(5);
  // {lines, n, inner}: a block per long contiguous line, a thread per line otherwise.
  for (Shape shape : {Shape{2, 100000}, Shape{5000, 300}, Shape{3, 700, 9}, Shape{1, 255}}) {
    const int dim = 1;
    Tensor x = randn(shape) * 0.01 + 1.0;
    EXPECT_TRUE(ember_test::check_close(cumsum(x.to(gpu), dim).to(Device::cpu()), cumsum(x, dim),
                                        1e-5, 1e-5, "cumsum " + shape.to_string()));
    EXPECT_TRUE(ember_test::check_close(cumprod(x.to(gpu), dim).to(Device::cpu()), cumprod(x, dim),
                                        1e-4, 1e-6, "cumprod " + shape.to_string()));
    Tensor t = tricky(1, shape.numel(), DType::f32, 11).reshape(shape);
    for (bool is_max : {true, false}) {
      ValuesIndices want = is_max ? cummax(t, dim) : cummin(t, dim);
      ValuesIndices got = is_max ? cummax(t.to(gpu), dim) : cummin(t.to(gpu), dim);
      EXPECT_EQ(ints(got.indices), ints(want.indices)) << (is_max ? "cummax " : "cummin ") << shape;
    }
    // The backward of cumsum is a reverse scan on the device.
    Tensor xc = x.detach().requires_grad_(), xg = x.to(gpu).requires_grad_();
    Tensor w = randn(shape);
    (cumsum(xc, dim) * w).sum().backward();
    (cumsum(xg, dim) * w.to(gpu)).sum().backward();
    EXPECT_TRUE(ember_test::check_close(xg.grad().to(Device::cpu()), xc.grad(), 1e-5, 1e-5,
                                        "cumsum grad " + shape.to_string()));
  }
}

}  // namespace
