// tests/test_linalg_vocabulary.cpp — issue 32's linear algebra beyond the catalogue driver's
// three tiers (tests/test_op_cases_linalg.cpp): the errors of bad input (non-square, singular,
// wrong dtype or device, batch mismatch, eig refused by name), the edge inputs (empty batches,
// 0 × 0 and 1 × 1 matrices) and the identities the factorisations must satisfy.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

namespace {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember::test_util::error_of;
using ember::test_util::expect_contains;
using ember_test::f64;

Tensor random_f64(const Shape& shape, uint64_t seed) {
  ember::manual_seed(seed);
  return ember::randn(shape, {.dtype = DType::f64});
}

// A well-conditioned batch: randn + 3·I.
Tensor well_conditioned(const Shape& shape, uint64_t seed) {
  const int64_t n = shape[shape.size() - 1];
  return random_f64(shape, seed) + 3.0 * ember::diag(ember::ones({n}, {.dtype = DType::f64}));
}

void expect_starts_with(const std::string& message, const std::string& prefix) {
  EXPECT_EQ(message.rfind(prefix, 0), 0u) << "message: " << message;
}

// ---- errors

TEST(LinalgVocabulary, EigIsRefusedByNameWithTheReasonAndTheAlternative) {
  const Tensor a = random_f64({3, 3}, 1);
  for (const std::string op : {"eig", "eigvals"}) {
    const std::string m =
        op == "eig" ? error_of([&] { ember::eig(a); }) : error_of([&] { ember::eigvals(a); });
    expect_starts_with(m, op + ": ");
    expect_contains(m, "complex");
    expect_contains(m, "eigh");
    expect_contains(m, "[3, 3]");
  }
}

TEST(LinalgVocabulary, NonSquareInputIsRefusedNamingTheOp) {
  const Tensor a = random_f64({2, 3}, 2);
  expect_starts_with(error_of([&] { ember::eigh(a); }), "eigh: input shape [2, 3]");
  expect_starts_with(error_of([&] { ember::eigvalsh(a); }), "eigvalsh: input shape [2, 3]");
  expect_starts_with(error_of([&] { ember::slogdet(a); }), "slogdet: input shape [2, 3]");
  expect_starts_with(error_of([&] { ember::matrix_power(a, 2); }), "matrix_power: ");
  expect_starts_with(error_of([&] { ember::matrix_exp(a); }), "matrix_exp: ");
  expect_starts_with(error_of([&] { ember::solve_triangular(a, a, true); }), "solve_triangular: ");
  expect_starts_with(error_of([&] { ember::cond(a, "fro"); }), "cond: ");
  expect_starts_with(error_of([&] { ember::matrix_rank(a, std::nullopt, std::nullopt, true); }),
                     "matrix_rank: ");
  // A vector is no matrix.
  expect_contains(error_of([&] { ember::lu_factor(ember::ones({3}, {.dtype = DType::f64})); }),
                  "expected a matrix or a batch of matrices");
}

TEST(LinalgVocabulary, SingularMatricesAreNamedByBatchIndex) {
  const Tensor good = well_conditioned({3, 3}, 3);
  const Tensor bad = f64({1, 2, 3, 2, 4, 6, 1, 0, 1}, {3, 3});  // row 2 = 2 · row 1
  const Tensor batch = ember::stack({good, bad});
  const std::string lu_error = error_of([&] { ember::lu_factor(batch); });
  expect_starts_with(lu_error, "lu_factor: the matrix at batch index 1 is singular");
  // lu() factors it (PyTorch's linalg.lu does): P·L·U is still A.
  const ember::LU f = ember::lu(bad);
  ember_test::expect_close(ember::matmul(ember::matmul(f.P, f.L), f.U), bad, 1e-12, 1e-12, "PLU");
  // slogdet of a singular matrix: sign 0, log|det| = -inf, no error.
  const ember::SlogDet d = ember::slogdet(batch);
  EXPECT_EQ(d.sign.to_vector<double>()[1], 0.0);
  EXPECT_TRUE(std::isinf(d.logabsdet.to_vector<double>()[1]));
  EXPECT_LT(d.logabsdet.to_vector<double>()[1], 0.0);
  // A zero on a triangular matrix's diagonal.
  const Tensor tri = f64({1, 0, 0, 2, 0, 0, 3, 4, 5}, {3, 3});
  const Tensor b = ember::ones({2, 3, 1}, {.dtype = DType::f64});
  expect_starts_with(error_of([&] {
                       ember::solve_triangular(ember::stack({ember::tril(good), tri}), b, false);
                     }),
                     "solve_triangular: the matrix at batch index 1 has a zero on its diagonal");
  // cond through the inverse: inf for a singular matrix (PyTorch's), the others as they are.
  const std::vector<double> c = ember::cond(batch, 1.0).to_vector<double>();
  EXPECT_NEAR(c[0], ember::cond(good, 1.0).item<double>(), 1e-12);
  EXPECT_TRUE(std::isinf(c[1]) && c[1] > 0.0);
  EXPECT_TRUE(std::isinf(ember::cond(bad, "fro").item<double>()));
  // A composite names the op the user called.
  expect_starts_with(error_of([&] { ember::matrix_power(bad, -1); }), "matrix_power: ");
  expect_starts_with(error_of([&] { ember::cholesky_solve(b.select(0, 0), tri); }),
                     "cholesky_solve: ");
}

TEST(LinalgVocabulary, UnsupportedDTypesAreRefused) {
  const Tensor i = ember::ones({3, 3}, {.dtype = DType::i32});
  const Tensor h = ember::ones({3, 3}, {.dtype = DType::f16});
  for (const Tensor& x : {i, h}) {
    expect_contains(error_of([&] { ember::eigh(x); }), "unsupported dtype");
    expect_contains(error_of([&] { ember::lu_factor(x); }), "unsupported dtype");
    expect_contains(error_of([&] { ember::matrix_exp(x); }), "unsupported dtype");
    expect_contains(error_of([&] { ember::kron(x, x); }), "unsupported dtype");
    expect_contains(error_of([&] { ember::vector_norm(x); }), "unsupported dtype");
  }
  const Tensor a = well_conditioned({3, 3}, 4);
  const ember::LUFactor f = ember::lu_factor(a);
  const Tensor b = random_f64({3, 2}, 5);
  expect_starts_with(error_of([&] { ember::lu_solve(f.LU, f.pivots.to(DType::f64), b); }),
                     "lu_solve: pivots [3] f64");
  expect_starts_with(error_of([&] { ember::solve_triangular(a, b.to(DType::f32), true); }),
                     "solve_triangular: ");
  expect_starts_with(error_of([&] { ember::cross(a, a.to(DType::f32)); }), "cross: ");
}

TEST(LinalgVocabulary, OperandsOnDifferentDevicesAreRefused) {
  SKIP_WITHOUT_CUDA();
  const Tensor a = well_conditioned({3, 3}, 6);
  const Tensor b = random_f64({3, 2}, 7).to(ember::Device::cuda());
  expect_starts_with(error_of([&] { ember::solve_triangular(a, b, true); }), "solve_triangular: ");
  expect_starts_with(error_of([&] { ember::lstsq(a, b); }), "lstsq: ");
  expect_starts_with(error_of([&] { ember::cross(random_f64({3}, 8), b.select(1, 0)); }),
                     "cross: ");
}

TEST(LinalgVocabulary, MismatchedShapesAreRefusedNamingBoth) {
  const Tensor a = well_conditioned({2, 3, 3}, 9);
  const std::string batch = error_of([&] {
    ember::solve_triangular(a, random_f64({3, 3, 2}, 10), true);
  });
  expect_starts_with(batch, "solve_triangular: ");
  expect_contains(batch, "[2]");
  expect_contains(batch, "[3]");
  expect_starts_with(error_of([&] {
                       ember::solve_triangular(a, random_f64({2, 4, 2}, 11), true);
                     }),
                     "solve_triangular: B shape [2, 4, 2] for A shape [2, 3, 3]");
  expect_starts_with(error_of([&] {
                       ember::lstsq(a, random_f64({2, 4, 2}, 12));
                     }),
                     "lstsq: B shape [2, 4, 2]");
  expect_starts_with(error_of([&] {
                       ember::householder_product(a, random_f64({2, 4}, 13));
                     }),
                     "householder_product: A shape [2, 3, 3] and tau shape [2, 4]");
  expect_starts_with(error_of([&] {
                       ember::multi_dot({random_f64({2, 3}, 14), random_f64({4, 2}, 15)});
                     }),
                     "multi_dot: tensor 0 has shape [2, 3] and tensor 1 [4, 2]");
  expect_starts_with(error_of([&] {
                       ember::multi_dot({random_f64({2, 3}, 16)});
                     }),
                     "multi_dot: 1 tensors (expected at least 2)");
  expect_starts_with(error_of([&] {
                       ember::tensordot(random_f64({2, 3}, 17), random_f64({4, 2}, 18), 1);
                     }),
                     "tensordot: a's dim 1 has size 3 and b's dim 0 has size 4");
  expect_starts_with(error_of([&] { ember::cross(random_f64({4}, 19), random_f64({4}, 20)); }),
                     "cross: shapes [4] and [4]");
  expect_starts_with(error_of([&] {
                       ember::kron(random_f64({1, 1, 1, 1, 1}, 21), a);
                     }),
                     "kron: shapes");
  expect_starts_with(error_of([&] { ember::matrix_norm(a, 3.0); }), "matrix_norm: ord 3");
  expect_starts_with(error_of([&] { ember::matrix_norm(a, "max"); }), "matrix_norm: ord \"max\"");
  expect_starts_with(error_of([&] { ember::eigh(a, "X"); }), "eigh: uplo \"X\"");
  expect_starts_with(error_of([&] { ember::pinv(a, -1.0); }), "pinv: atol -1");
}

TEST(LinalgVocabulary, LuFactorGradientOfTallAndWideMatricesMatchesFiniteDifferences) {
  for (const Shape& shape : {Shape{2, 5, 3}, Shape{3, 5}, Shape{4, 4}}) {
    const Tensor a = random_f64(shape, 22).requires_grad_();
    const ember::GradcheckResult r = ember::gradcheck(
        [](const std::vector<Tensor>& x) {
          const ember::LU f = ember::lu(x[0]);
          return ember::cat({f.L.flatten(), f.U.flatten()});
        },
        {a}, {.eps = 1e-6, .atol = 1e-5, .rtol = 1e-3});
    EXPECT_TRUE(r.ok) << shape.to_string() << ": " << r.message;
  }
}

// ---- edge inputs

TEST(LinalgVocabulary, EmptyBatchesGiveEmptyResults) {
  const Tensor a = ember::zeros({0, 3, 3}, {.dtype = DType::f64});
  const Tensor b = ember::zeros({0, 3, 2}, {.dtype = DType::f64});
  const ember::Eigh e = ember::eigh(a);
  EXPECT_EQ(e.eigenvalues.shape(), Shape({0, 3}));
  EXPECT_EQ(e.eigenvectors.shape(), Shape({0, 3, 3}));
  EXPECT_EQ(ember::slogdet(a).logabsdet.shape(), Shape({0}));
  const ember::LUFactor f = ember::lu_factor(a);
  EXPECT_EQ(f.LU.shape(), Shape({0, 3, 3}));
  EXPECT_EQ(f.pivots.shape(), Shape({0, 3}));
  EXPECT_EQ(ember::lu_solve(f.LU, f.pivots, b).shape(), Shape({0, 3, 2}));
  EXPECT_EQ(ember::solve_triangular(a, b, true).shape(), Shape({0, 3, 2}));
  EXPECT_EQ(ember::lstsq(a, b).solution.shape(), Shape({0, 3, 2}));
  EXPECT_EQ(ember::pinv(ember::zeros({0, 3, 2}, {.dtype = DType::f64})).shape(), Shape({0, 2, 3}));
  EXPECT_EQ(ember::matrix_rank(a).shape(), Shape({0}));
  EXPECT_EQ(ember::matrix_exp(a).shape(), Shape({0, 3, 3}));
  EXPECT_EQ(ember::matrix_power(a, 3).shape(), Shape({0, 3, 3}));
  EXPECT_EQ(ember::matrix_norm(a).shape(), Shape({0}));
  EXPECT_EQ(ember::cond(a).shape(), Shape({0}));
}

TEST(LinalgVocabulary, ZeroByZeroMatricesHaveDeterminantOne) {
  const Tensor a = ember::zeros({2, 0, 0}, {.dtype = DType::f64});
  const ember::SlogDet d = ember::slogdet(a);
  EXPECT_EQ(d.sign.to_vector<double>(), std::vector<double>({1.0, 1.0}));
  EXPECT_EQ(d.logabsdet.to_vector<double>(), std::vector<double>({0.0, 0.0}));
  EXPECT_EQ(ember::eigvalsh(a).shape(), Shape({2, 0}));
  EXPECT_EQ(ember::matrix_power(a, -2).shape(), Shape({2, 0, 0}));
}

TEST(LinalgVocabulary, OneByOneMatricesAreScalars) {
  const Tensor one = f64({-4.0}, {1, 1});
  EXPECT_DOUBLE_EQ(ember::eigvalsh(one).item<double>(), -4.0);
  EXPECT_DOUBLE_EQ(std::abs(ember::eigh(one).eigenvectors.item<double>()), 1.0);
  const ember::SlogDet d = ember::slogdet(one);
  EXPECT_DOUBLE_EQ(d.sign.item<double>(), -1.0);
  EXPECT_DOUBLE_EQ(d.logabsdet.item<double>(), std::log(4.0));
  const ember::LUFactor f = ember::lu_factor(one);
  EXPECT_DOUBLE_EQ(f.LU.item<double>(), -4.0);
  EXPECT_EQ(f.pivots.to(DType::i64).item<int64_t>(), 1);
  EXPECT_DOUBLE_EQ(ember::solve_triangular(one, f64({2.0}, {1, 1}), true).item<double>(), -0.5);
  EXPECT_NEAR(ember::matrix_exp(f64({1.0}, {1, 1})).item<double>(), std::exp(1.0), 1e-15);
  EXPECT_DOUBLE_EQ(ember::pinv(one).item<double>(), -0.25);
  EXPECT_DOUBLE_EQ(ember::matrix_power(one, -3).item<double>(), -1.0 / 64.0);
  EXPECT_DOUBLE_EQ(ember::cond(one).item<double>(), 1.0);
  EXPECT_EQ(ember::matrix_rank(one).item<int64_t>(), 1);
  EXPECT_EQ(ember::matrix_rank(f64({0.0}, {1, 1})).item<int64_t>(), 0);
}

// ---- identities

TEST(LinalgVocabulary, LuReassemblesTallAndWideMatrices) {
  for (const Shape& shape : {Shape{2, 5, 3}, Shape{2, 3, 5}, Shape{4, 4}}) {
    const Tensor a = random_f64(shape, 23);
    const ember::LU f = ember::lu(a);
    ember_test::expect_close(ember::matmul(ember::matmul(f.P, f.L), f.U), a, 1e-12, 1e-12,
                             "P·L·U of " + shape.to_string());
  }
}

TEST(LinalgVocabulary, EighReassemblesAndPinvHermitianAgrees) {
  const Tensor raw = random_f64({2, 4, 4}, 24);
  const Tensor a = (raw + raw.transpose(-2, -1)) * 0.5;
  const ember::Eigh e = ember::eigh(a);
  const Tensor back =
      ember::matmul(e.eigenvectors * e.eigenvalues.unsqueeze(-2), e.eigenvectors.transpose(-2, -1));
  ember_test::expect_close(back, a, 1e-12, 1e-12, "V·diag(L)·Vᵀ");
  // "U" reads the upper triangle: the same as "L" of the transpose.
  ember_test::expect_close(ember::eigvalsh(raw, "U"), ember::eigvalsh(raw.transpose(-2, -1)), 1e-12,
                           1e-12, "eigvalsh U");
  ember_test::expect_close(ember::pinv(a, std::nullopt, std::nullopt, true), ember::pinv(a), 1e-10,
                           1e-10, "pinv hermitian");
}

TEST(LinalgVocabulary, LstsqReportsResidualsAndRank) {
  const Tensor a = random_f64({6, 3}, 25), b = random_f64({6, 2}, 26);
  const ember::Lstsq r = ember::lstsq(a, b);
  const Tensor want = ember::sum(ember::square(ember::matmul(a, r.solution) - b), {0});
  ember_test::expect_close(r.residuals, want, 1e-12, 1e-12, "residuals");
  EXPECT_EQ(r.rank.item<int64_t>(), 3);
  ember_test::expect_close(r.solution, ember::matmul(ember::pinv(a), b), 1e-10, 1e-10, "pinv·b");
}

TEST(LinalgVocabulary, MatrixExpOfLargeAndNilpotentMatrices) {
  // A diagonal matrix with norm 12 (s = 5 squarings): exp of each entry.
  const std::vector<double> d = {-3.0, 0.5, 12.0};
  const Tensor e = ember::matrix_exp(ember::diag(f64(d, {3})));
  ember_test::expect_close(ember::diag(e),
                           f64({std::exp(-3.0), std::exp(0.5), std::exp(12.0)}, {3}), 1e-12, 0.0,
                           "exp of a diagonal");
  // N² = 0: exp(N) = I + N.
  ember_test::expect_close(ember::matrix_exp(f64({0, 5, 0, 0}, {2, 2})), f64({1, 5, 0, 1}, {2, 2}),
                           1e-15, 1e-15, "exp of a nilpotent matrix");
  // Rotation generator: exp(t·J) is the rotation by t.
  const double t = 2.5;
  ember_test::expect_close(ember::matrix_exp(f64({0, -t, t, 0}, {2, 2})),
                           f64({std::cos(t), -std::sin(t), std::sin(t), std::cos(t)}, {2, 2}),
                           1e-13, 1e-13, "exp of a rotation generator");
}

TEST(LinalgVocabulary, MatrixPowerZeroIsTheIdentityPerMatrix) {
  const Tensor a = random_f64({2, 3, 3}, 27);
  const Tensor eye = ember::diag(ember::ones({3}, {.dtype = DType::f64}));
  ember_test::expect_close(ember::matrix_power(a, 0), eye.expand({2, 3, 3}), 0.0, 0.0, "A⁰");
  ember_test::expect_close(
      ember::matrix_power(a, 5),
      ember::matmul(ember::matmul(ember::matmul(a, a), ember::matmul(a, a)), a), 1e-12, 1e-12,
      "A⁵");
}

TEST(LinalgVocabulary, MultiDotEqualsTheLeftToRightProduct) {
  const std::vector<Tensor> xs = {random_f64({10, 2}, 28), random_f64({2, 30}, 29),
                                  random_f64({30, 3}, 30), random_f64({3, 4}, 31)};
  const Tensor naive = ember::matmul(ember::matmul(ember::matmul(xs[0], xs[1]), xs[2]), xs[3]);
  ember_test::expect_close(ember::multi_dot(xs), naive, 1e-12, 1e-12, "multi_dot");
  ember_test::expect_close(ember::chain_matmul(xs), naive, 1e-12, 1e-12, "chain_matmul");
  ember_test::expect_close(ember::chain_matmul({xs[0]}), xs[0], 0.0, 0.0, "one matrix");
}

}  // namespace
