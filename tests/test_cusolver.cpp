// tests/test_cusolver.cpp — CUDA decompositions on cuSOLVER (src/cuda/cusolver.cpp) against the
// CPU's LAPACK: every Decomposition, f32 and f64, square, tall, wide and batched matrices, with
// preferred_linalg_library("cusolver") so that even small matrices take the device route; the
// failures naming the same batch index as the CPU; the "default" rule and linalg_fallback_reason;
// the setting's refusal of unknown names (CPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace cusolver_test {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::test_util::error_of;
using ember::test_util::expect_contains;
using ember_test::kGpu;

// Sets the preferred linalg library for the scope, restoring the previous one at its end.
class LibraryScope {
 public:
  explicit LibraryScope(const std::string& library) : previous_(ember::preferred_linalg_library()) {
    ember::set_preferred_linalg_library(library);
  }
  ~LibraryScope() { ember::set_preferred_linalg_library(previous_); }
  LibraryScope(const LibraryScope&) = delete;
  LibraryScope& operator=(const LibraryScope&) = delete;

 private:
  std::string previous_;
};

Tensor random(const Shape& shape, DType dtype, uint64_t seed) {
  ember::manual_seed(seed);
  return ember::randn(shape, {.dtype = dtype});
}

// randn + 3·I over the last two dims (square).
Tensor well_conditioned(const Shape& shape, DType dtype, uint64_t seed) {
  const int64_t n = shape[shape.size() - 1];
  return random(shape, dtype, seed) + 3.0 * ember::diag(ember::ones({n}, {.dtype = dtype}));
}

// A·Aᵀ + n·I: symmetric positive definite.
Tensor spd(const Shape& shape, DType dtype, uint64_t seed) {
  const Tensor a = random(shape, dtype, seed);
  const int64_t n = shape[shape.size() - 1];
  return ember::matmul(a, a.transpose(-2, -1)) +
         static_cast<double>(n) * ember::diag(ember::ones({n}, {.dtype = dtype}));
}

// max |got − want| / max(1, max |want|), got on the GPU and want on the CPU.
double relative_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.device(), kGpu);
  EXPECT_EQ(got.shape(), want.shape());
  const Tensor g = got.to(ember::Device::cpu()).to(DType::f64), w = want.to(DType::f64);
  const double scale = std::max(1.0, ember::max(ember::abs(w)).item<double>());
  return ember::max(ember::abs(g - w)).item<double>() / scale;
}

double tolerance(DType dtype) { return dtype == DType::f64 ? 1e-9 : 2e-4; }

// The device route ran (not the host one), or the test skips saying why cuSOLVER is missing.
#define EXPECT_ON_CUSOLVER()                                                                \
  do {                                                                                      \
    const std::string why = ember::linalg_fallback_reason();                                \
    if (why.find("not found") != std::string::npos) GTEST_SKIP() << "no cuSOLVER: " << why; \
    ASSERT_EQ(why, "") << "took the host route";                                            \
  } while (0)

Tensor projector(const Tensor& u) { return ember::matmul(u, u.transpose(-2, -1)); }

TEST(LinalgLibrary, NamesAndRefusals) {
  EXPECT_EQ(ember::preferred_linalg_library(), "default");
  {
    const LibraryScope scope("host");
    EXPECT_EQ(ember::preferred_linalg_library(), "host");
  }
  EXPECT_EQ(ember::preferred_linalg_library(), "default");
  const std::string e = error_of([] { ember::set_preferred_linalg_library("magma"); });
  expect_contains(e, "set_preferred_linalg_library: unknown library \"magma\"");
  expect_contains(e, "\"default\", \"cusolver\" or \"host\"");
  EXPECT_EQ(ember::preferred_linalg_library(), "default");
}

class CusolverCuda : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { SKIP_WITHOUT_CUDA(); }
};

TEST_P(CusolverCuda, SquareFactorisationsMatchTheCpu) {
  const DType dt = GetParam();
  const LibraryScope scope("cusolver");
  for (const Shape& shape : {Shape{1, 1}, Shape{5, 5}, Shape{33, 33}, Shape{3, 17, 17}}) {
    const std::string what = shape.to_string();
    const Tensor a = well_conditioned(shape, dt, 11), ag = a.to(kGpu);
    Shape bs = shape;
    bs[bs.size() - 1] = 4;
    const Tensor b = random(bs, dt, 12), bg = b.to(kGpu);

    EXPECT_LT(relative_error(ember::inv(ag), ember::inv(a)), tolerance(dt)) << "inv " << what;
    EXPECT_ON_CUSOLVER();
    EXPECT_LT(relative_error(ember::det(ag), ember::det(a)), tolerance(dt)) << "det " << what;
    EXPECT_ON_CUSOLVER();
    EXPECT_LT(relative_error(ember::solve(ag, bg), ember::solve(a, b)), tolerance(dt))
        << "solve " << what;
    EXPECT_ON_CUSOLVER();

    const Tensor p = spd(shape, dt, 13);
    EXPECT_LT(relative_error(ember::cholesky(p.to(kGpu)), ember::cholesky(p)), tolerance(dt))
        << "cholesky " << what;
    EXPECT_ON_CUSOLVER();

    const ember::Eigh eg = ember::eigh(p.to(kGpu)), ec = ember::eigh(p);
    EXPECT_ON_CUSOLVER();
    EXPECT_LT(relative_error(eg.eigenvalues, ec.eigenvalues), tolerance(dt)) << "eigh " << what;
    // Eigenvectors up to sign: A = V·diag(L)·Vᵀ rebuilt from the GPU's, and V·Vᵀ = I.
    const Tensor rebuilt = ember::matmul(eg.eigenvectors * eg.eigenvalues.unsqueeze(-2),
                                         eg.eigenvectors.transpose(-2, -1));
    EXPECT_LT(relative_error(rebuilt, p), 10 * tolerance(dt)) << "eigh vectors " << what;

    for (const bool upper : {false, true}) {
      const Tensor t = upper ? ember::triu(a) : ember::tril(a);
      EXPECT_LT(relative_error(ember::solve_triangular(t.to(kGpu), bg, upper),
                               ember::solve_triangular(t, b, upper)),
                tolerance(dt))
          << "solve_triangular upper=" << upper << " " << what;
      EXPECT_ON_CUSOLVER();
    }
  }
}

TEST_P(CusolverCuda, RectangularFactorisationsMatchTheCpu) {
  const DType dt = GetParam();
  const LibraryScope scope("cusolver");
  for (const Shape& shape :
       {Shape{7, 4}, Shape{4, 7}, Shape{6, 6}, Shape{2, 9, 5}, Shape{2, 5, 9}, Shape{40, 24}}) {
    const std::string what = shape.to_string();
    const Tensor a = random(shape, dt, 21), ag = a.to(kGpu);

    const ember::QR qg = ember::qr(ag), qc = ember::qr(a);
    EXPECT_ON_CUSOLVER();
    EXPECT_LT(relative_error(qg.Q, qc.Q), 10 * tolerance(dt)) << "qr Q " << what;
    EXPECT_LT(relative_error(qg.R, qc.R), 10 * tolerance(dt)) << "qr R " << what;

    const ember::SVD sg = ember::svd(ag), sc = ember::svd(a);
    EXPECT_ON_CUSOLVER();
    EXPECT_LT(relative_error(sg.S, sc.S), tolerance(dt)) << "svd S " << what;
    // U and Vh up to the signs of singular-vector pairs: projectors and the product.
    EXPECT_LT(relative_error(projector(sg.U), projector(sc.U)), 10 * tolerance(dt))
        << "svd U " << what;
    EXPECT_LT(
        relative_error(projector(sg.Vh.transpose(-2, -1)), projector(sc.Vh.transpose(-2, -1))),
        10 * tolerance(dt))
        << "svd Vh " << what;
    EXPECT_LT(relative_error(ember::matmul(sg.U * sg.S.unsqueeze(-2), sg.Vh), a),
              10 * tolerance(dt))
        << "svd U·S·Vh " << what;

    const ember::LUFactor lg = ember::lu_factor(ag), lc = ember::lu_factor(a);
    EXPECT_ON_CUSOLVER();
    EXPECT_LT(relative_error(lg.LU, lc.LU), 10 * tolerance(dt)) << "lu " << what;
    EXPECT_EQ(ember_test::ints(lg.pivots.to(ember::Device::cpu()).to(DType::i64)),
              ember_test::ints(lc.pivots.to(DType::i64)))
        << "lu pivots " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CusolverCuda, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) {
                           return std::string(ember::dtype_name(info.param));
                         });

// A bad matrix at batch index 1 of 3 is named by the device route as by the CPU's.
TEST(CusolverCudaFailures, NameTheSameBatchIndexAsTheCpu) {
  SKIP_WITHOUT_CUDA();
  const LibraryScope scope("cusolver");
  Tensor a = well_conditioned({3, 4, 4}, DType::f64, 31);
  a = a * ember_test::f64({1, 0, 1}, {3}).reshape({3, 1, 1});  // matrix 1: all zeros
  const std::string cpu_inv = error_of([&] { ember::inv(a); });
  const std::string gpu_inv = error_of([&] { ember::inv(a.to(kGpu)); });
  if (ember::linalg_fallback_reason().find("not found") != std::string::npos)
    GTEST_SKIP() << "no cuSOLVER: " << ember::linalg_fallback_reason();
  expect_contains(cpu_inv, "batch index 1");
  expect_contains(gpu_inv, "batch index 1");
  expect_contains(
      error_of([&] {
        ember::solve(a.to(kGpu), ember::ones({3, 4, 2}, {.dtype = DType::f64, .device = kGpu}));
      }),
      "batch index 1");
  // Not positive definite at index 2.
  Tensor p = spd({3, 5, 5}, DType::f64, 32);
  p = p * ember_test::f64({1, 1, -1}, {3}).reshape({3, 1, 1});
  expect_contains(error_of([&] { ember::cholesky(p.to(kGpu)); }), "batch index 2");
  expect_contains(error_of([&] { ember::cholesky(p); }), "batch index 2");
  // A zero on a triangular matrix's diagonal at index 0.
  std::vector<double> mask(2 * 4 * 4, 1.0);
  mask[2 * 4 + 2] = 0.0;  // matrix 0, diagonal element 2
  const Tensor t =
      ember::tril(well_conditioned({2, 4, 4}, DType::f64, 33)) * ember_test::f64(mask, {2, 4, 4});
  const Tensor rhs = ember::ones({2, 4, 3}, {.dtype = DType::f64});
  expect_contains(error_of([&] { ember::solve_triangular(t.to(kGpu), rhs.to(kGpu), false); }),
                  "batch index 0");
  expect_contains(error_of([&] { ember::solve_triangular(t, rhs, false); }), "batch index 0");
  // det of a singular matrix is 0, not an error; lu() of one is accepted.
  EXPECT_EQ(ember::det(a.to(kGpu)).to(ember::Device::cpu()).to_vector<double>()[1], 0.0);
  EXPECT_LT(relative_error(ember::lu(a.to(kGpu)).U, ember::lu(a).U), 1e-9);
}

// "default" keeps small matrices on the host and says why (while the sizes are unmeasured, every
// matrix: Note [Which decompositions run on cuSOLVER]); "host" takes the host route for every
// size; "cusolver" agrees with it on a large matrix.
TEST(CusolverCudaRoute, DefaultRuleAndFallbackReason) {
  SKIP_WITHOUT_CUDA();
  const Tensor small = well_conditioned({8, 8}, DType::f64, 41).to(kGpu);
  const Tensor large = well_conditioned({300, 300}, DType::f64, 42).to(kGpu);
  Tensor on_host;
  {
    const LibraryScope scope("host");
    on_host = ember::inv(large);
    expect_contains(ember::linalg_fallback_reason(), "preferred_linalg_library(\"host\")");
  }
  ember::inv(small);
  const std::string why = ember::linalg_fallback_reason();
  if (why.find("not found") != std::string::npos) GTEST_SKIP() << "no cuSOLVER: " << why;
  expect_contains(why, "8x8 is below the 256x256");
  expect_contains(why, "(inverse; preferred_linalg_library \"default\")");
  {
    // From 256 (Note [Which decompositions run on cuSOLVER]) "default" takes cuSOLVER.
    const Tensor by_default = ember::inv(large);
    EXPECT_ON_CUSOLVER();
    EXPECT_LT(relative_error(by_default, on_host.to(ember::Device::cpu())), 1e-9);
  }
  const LibraryScope scope("cusolver");
  const Tensor on_device = ember::inv(large);
  EXPECT_ON_CUSOLVER();
  EXPECT_LT(relative_error(on_device, on_host.to(ember::Device::cpu())), 1e-9);
}

}  // namespace cusolver_test
