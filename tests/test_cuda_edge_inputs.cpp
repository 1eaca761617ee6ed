// tests/test_cuda_edge_inputs.cpp — issue 27's classes of input on the GPU against the CPU:
// NaN through the extreme reductions (item 16: amax of an input holding NaN was wrong on
// CUDA), constant slices through var/std (item 11), saturated probabilities through
// binary_cross_entropy (item 12). Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/runtime.hpp"

namespace {

using namespace ember;  // NOLINT: test file

// Equal as values, NaN where NaN (a NaN on one side only is a mismatch).
void expect_same_values(const Tensor& cpu, const Tensor& gpu, double tol, const std::string& what) {
  ASSERT_EQ(cpu.shape(), gpu.shape()) << what;
  const std::vector<double> a = cpu.to(DType::f64).to_vector<double>();
  const std::vector<double> b = gpu.to(Device::cpu()).to(DType::f64).to_vector<double>();
  int shown = 0;
  for (size_t i = 0; i < a.size() && shown < 5; ++i) {
    const bool ok = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i] ||
                    std::abs(a[i] - b[i]) <= tol * std::max(1.0, std::abs(a[i]));
    if (!ok) {
      ADD_FAILURE() << what << " [" << i << "]: cpu " << a[i] << ", cuda " << b[i];
      ++shown;
    }
  }
}

TEST(CudaEdgeInputs, ExtremeReductionsPropagateNanLikeTheCpu) {
  SKIP_WITHOUT_CUDA();
  using Reduce = std::function<Tensor(const Tensor&, const Shape&)>;
  const std::vector<std::pair<std::string, Reduce>> ops = {
      {"amax", [](const Tensor& x, const Shape& d) { return amax(x, d); }},
      {"amin", [](const Tensor& x, const Shape& d) { return amin(x, d); }},
      {"max(dim)", [](const Tensor& x, const Shape& d) { return max(x, d[0]).values; }},
      {"min(dim)", [](const Tensor& x, const Shape& d) { return min(x, d[0]).values; }},
      {"argmax", [](const Tensor& x, const Shape& d) { return argmax(x, d[0]); }},
      {"argmin", [](const Tensor& x, const Shape& d) { return argmin(x, d[0]); }},
      {"max", [](const Tensor& x, const Shape&) { return max(x); }},
      {"cummax", [](const Tensor& x, const Shape& d) { return cummax(x, d[0]).values; }},
      {"sort", [](const Tensor& x, const Shape& d) { return sort(x, d[0]).values; }},
      {"topk", [](const Tensor& x, const Shape& d) { return topk(x, 2, d[0]).values; }},
  };
  // Shapes that take each driver: inner (warp per row), outer (thread per column), one large
  // group cut into chunks (merge kernel).
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{4, 37}, {1}},   {{37, 4}, {0}},      {{3, 200000}, {1}}, {{200000, 3}, {0}},
      {{5, 6, 7}, {1}}, {{2, 3000000}, {1}}, {{5, 6, 7}, {0, 2}}};
  for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    for (auto& [shape, dims] : cases) {
      manual_seed(11);
      Tensor x = randn(shape).to(dt);
      // NaN first, in the middle and last of different slices; one slice all NaN.
      const int64_t n = x.numel();
      Tensor flat = x.reshape({n}).clone();
      {
        NoGradGuard g;
        for (int64_t i : {int64_t{0}, n / 2, n - 1, n / 3 + 1}) flat.narrow(0, i, 1).fill_(NAN);
      }
      x = flat.reshape(shape);
      const Tensor gx = x.to(Device::cuda(0));
      for (auto& [name, fn] : ops) {
        const std::string what = name + " " + shape.to_string() + " over " + dims.to_string() +
                                 " " + std::string(dtype_name(dt));
        Tensor cpu_result;
        try {
          cpu_result = fn(x, dims);
        } catch (const Error& e) {  // not claimed for this dtype (cummax of f16): skip it
          EXPECT_NE(std::string(e.what()).find("unsupported dtype"), std::string::npos) << what;
          continue;
        }
        expect_same_values(cpu_result, fn(gx, dims), 0.0, what);
        if (x.dim() == 2) {  // a strided (transposed) view of the same values
          const Shape td{1 - dims[0]};
          expect_same_values(fn(x.t(), td), fn(gx.t(), td), 0.0, what + " transposed");
        }
      }
    }
  }
}

TEST(CudaEdgeInputs, ConstantSlicesHaveZeroVarianceAndStdGradient) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::f32, DType::f64}) {
    for (const Shape& shape : {Shape{4, 3}, Shape{4, 5000}, Shape{3, 300000}}) {
      Tensor x = full(shape, 0.1, {.dtype = dt});
      {
        NoGradGuard g;
        x.narrow(0, 0, 1).copy_(randn({1, shape[1]}).to(dt));  // one varying row
      }
      const Tensor gx = x.to(Device::cuda(0)).detach().requires_grad_();
      const Tensor v = var(gx, Shape{1});
      const std::vector<double> got = v.to(Device::cpu()).to(DType::f64).to_vector<double>();
      for (size_t i = 1; i < got.size(); ++i)
        EXPECT_EQ(got[i], 0.0) << dtype_name(dt) << " " << shape.to_string() << " row " << i;
      ember::std(gx, Shape{1}).sum().backward();
      const Tensor g = gx.grad().to(Device::cpu()).narrow(0, 1, shape[0] - 1);
      EXPECT_EQ(abs(g).max().to(DType::f64).item<double>(), 0.0) << dtype_name(dt);
    }
  }
}

TEST(CudaEdgeInputs, BinaryCrossEntropyAtSaturatedProbabilitiesMatchesTheCpu) {
  SKIP_WITHOUT_CUDA();
  const Tensor p = from_vector<float>({0, 1, 0, 1, 0.25}, {5});
  const Tensor t = from_vector<float>({0, 1, 1, 0, 1}, {5});
  const Tensor pc = p.clone().requires_grad_();
  const Tensor pg = p.to(Device::cuda(0)).requires_grad_();
  const Tensor lc = binary_cross_entropy(pc, t),
               lg = binary_cross_entropy(pg, t.to(Device::cuda(0)));
  expect_same_values(lc, lg, 1e-6, "bce loss");
  lc.backward();
  lg.backward();
  expect_same_values(pc.grad(), pg.grad(), 1e-6, "bce grad");
}

// ---- item 21: device-side errors, deferred and synchronous ----

TEST(CudaEdgeInputs, DeferredIndexErrorsSayHowToFindTheOp) {
  SKIP_WITHOUT_CUDA();
  set_sync_errors(false);
  const Tensor table = randn({4, 3}).to(Device::cuda(0));
  const Tensor bad = from_vector<int64_t>({1, 7}, {2}).to(Device::cuda(0));
  std::string m;
  try {
    const Tensor rows = index_select(table, 0, bad);  // queued; nothing checked yet
    const Tensor y = rows * 2.0;
    (void)y.sum().item<float>();  // the synchronisation that finds it
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("index_select"), std::string::npos) << m;
  EXPECT_NE(m.find("index 7"), std::string::npos) << m;
  EXPECT_NE(m.find("EMBER_CUDA_SYNC_ERRORS=1"), std::string::npos) << m;
  // The device stays usable.
  EXPECT_EQ(index_select(table, 0, from_vector<int64_t>({0}, {1}).to(Device::cuda(0)))
                .sum()
                .to(Device::cpu())
                .dim(),
            0);
}

TEST(CudaEdgeInputs, SyncErrorsNameTheOpBeforeTheNextOneRuns) {
  SKIP_WITHOUT_CUDA();
  set_sync_errors(true);
  const Tensor table = randn({4, 3}).to(Device::cuda(0));
  const Tensor bad = from_vector<int64_t>({1, 7}, {2}).to(Device::cuda(0));
  std::string m;
  bool reached_the_next_op = false;
  try {
    const Tensor rows = embedding(table, bad);
    const Tensor y = rows * 2.0;  // the check runs as this op starts
    reached_the_next_op = true;
    (void)y;
  } catch (const Error& e) {
    m = e.what();
  }
  set_sync_errors(false);
  EXPECT_FALSE(reached_the_next_op);
  EXPECT_NE(m.find("index 7"), std::string::npos) << m;
  EXPECT_NE(m.find("raised by the kernels of index_select"), std::string::npos) << m;
  EXPECT_NE(m.find("embedding"), std::string::npos) << m;
}

}  // namespace
