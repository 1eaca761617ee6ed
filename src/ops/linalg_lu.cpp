// src/ops/linalg_lu.cpp — LU with partial pivoting, as torch.linalg: lu_factor (a primitive on
// the decompose slot, LAPACK's getrf, with PyTorch's backward), lu (P, L, U unpacked), lu_solve
// (triangular solves on the packed factors) and slogdet (the factors' diagonal and the pivots'
// parity, with its own backward).
#include <algorithm>
#include <vector>

#include "ops/decompose.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using backend::Decomposition;
using namespace ops::linalg;  // the helpers of src/ops/decompose.hpp

namespace {

// P [..., m, m] with A = P·L·U, from LAPACK's pivots [..., k] (row i swapped with row
// pivots[i] - 1, for i = 0, 1, ...). Read on the host: pivots are a few integers per matrix.
Tensor permutation(const char* op, const Tensor& pivots, int64_t m, const Tensor& like) {
  Shape batch = pivots.shape();
  const int64_t k = batch[batch.size() - 1];
  batch.erase(batch.size() - 1);
  const std::vector<int32_t> piv = pivots.to(Device::cpu()).contiguous().to_vector<int32_t>();
  const int64_t count = batch.numel();
  std::vector<double> p(static_cast<size_t>(count * m * m), 0.0);
  std::vector<int64_t> rows(static_cast<size_t>(m));
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < m; ++i) rows[i] = i;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = piv[static_cast<size_t>(b * k + i)] - 1;
      EMBER_CHECK(j >= i && j < m, op, ": pivot ", j + 1, " at position ", i, " of batch index ", b,
                  " (expected ", i + 1, "..", m, ", as lu_factor writes them)");
      std::swap(rows[i], rows[j]);
    }
    for (int64_t i = 0; i < m; ++i) p[static_cast<size_t>(b * m * m + rows[i] * m + i)] = 1.0;
  }
  return from_vector<double>(p, with_last(batch, {m, m})).to(like.dtype()).to(like.device());
}

// Note [lu_factor's gradient]
// PyTorch's backward, in the packed layout: the gradient g of LU splits into gL (strictly
// lower) and gU (upper). With P·A = ... written A = P·L·U, k = min(m, n):
//   square  gA = P·L⁻ᵀ·Φ·U⁻ᵀ,  Φ = tril₋₁(Lᵀ·gL) + triu(gU·Uᵀ);
//   wide    U = [U₁ | U₂]:  Φ = tril₋₁(Lᵀ·gL - gU₂·U₂ᵀ) + triu(gU₁·U₁ᵀ),
//           gA = P·L⁻ᵀ·[Φ·U₁⁻ᵀ | gU₂];
//   tall    L = [L₁; L₂]:  Φ = tril₋₁(L₁ᵀ·gL₁) + triu(gU·Uᵀ - L₂ᵀ·gL₂),
//           gA = P·[L₁⁻ᵀ·Φ; gL₂]·U⁻ᵀ.
// (From Pᵀ·dA = dL·U + L·dU: the square block fixes L⁻¹·dL and dU·U⁻¹ as the strictly lower
// and upper parts of one matrix, and the extra columns or rows follow.) Every inverse is a
// triangular solve.
Tensor lu_factor_backward(const Tensor& packed, const Tensor& pivots, const Tensor& g) {
  const int64_t m = packed.shape()[packed.dim() - 2], n = packed.shape()[packed.dim() - 1];
  const Tensor p = permutation("lu_factor", pivots, m, packed);
  if (m <= n) {
    const Tensor sq = packed.narrow(-1, 0, m), gsq = g.narrow(-1, 0, m);
    const Tensor l = ops::linalg::eye(m, packed) + tril(sq, -1), u1 = triu(sq);
    Tensor lower = matmul(mT(l), tril(gsq, -1));
    if (m < n) lower = lower - matmul(g.narrow(-1, m, n - m), mT(packed.narrow(-1, m, n - m)));
    const Tensor phi = tril(lower, -1) + triu(matmul(triu(gsq), mT(u1)));
    Tensor gx = solve_triangular(mT(u1), phi, /*upper=*/false, /*left=*/false);
    if (m < n) gx = cat({gx, g.narrow(-1, m, n - m)}, -1);
    return matmul(p, solve_triangular(mT(l), gx, /*upper=*/true, /*left=*/true, true));
  }
  const Tensor sq = packed.narrow(-2, 0, n), gsq = g.narrow(-2, 0, n);
  const Tensor l1 = ops::linalg::eye(n, packed) + tril(sq, -1), u = triu(sq);
  const Tensor l2 = packed.narrow(-2, n, m - n), gl2 = g.narrow(-2, n, m - n);
  const Tensor phi = tril(matmul(mT(l1), tril(gsq, -1)), -1) +
                     triu(matmul(triu(gsq), mT(u)) - matmul(mT(l2), gl2));
  const Tensor gx = cat({solve_triangular(mT(l1), phi, /*upper=*/true, true, true), gl2}, -2);
  return matmul(p, solve_triangular(mT(u), gx, /*upper=*/false, /*left=*/false));
}

// The factorisation, recorded as Op::lu_factor; a singular matrix is refused when asked.
LUFactor factor(const Tensor& a, bool refuse_singular) {
  check_matrices(Op::lu_factor, a, false);
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1];
  Tensor packed = ops::make_tensor(a.shape(), a.dtype(), a.device());
  Tensor pivots =
      ops::make_tensor(with_last(batch_of(a), {std::min(m, n)}), DType::i32, a.device());
  int64_t singular = -1;
  {
    NoGradGuard no_grad;
    singular = ops::linalg::run_unchecked(Decomposition::lu, a, Tensor(), packed, pivots, Tensor());
  }
  EMBER_CHECK(!refuse_singular || singular < 0, "lu_factor: the matrix at batch index ", singular,
              " is singular: U has a zero on its diagonal, which lu_solve would divide by "
              "(input shape ",
              a.shape().to_string(), "; lu() factors it)");
  if (autograd::needs_grad(a)) {
    autograd::record(Op::lu_factor, packed, {&a},
                     [piv = pivots, sp = SavedTensor(packed)](const Tensor& g, GradList& gi) {
                       gi[0] = lu_factor_backward(sp.get(), piv, g);
                     });
  }
  return {packed, pivots};
}

}  // namespace

LUFactor lu_factor(const Tensor& a) { return factor(a, true); }

LU lu(const Tensor& a) {
  const ops::UserOp user(Op::lu, {&a});
  check_matrices(Op::lu, a, false);
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1], k = std::min(m, n);
  const LUFactor f = factor(a, false);
  const Tensor l = tril(f.LU, -1).narrow(-1, 0, k) + ops::linalg::eye(m, k, a);
  const Tensor u = triu(f.LU.narrow(-2, 0, k));
  return {permutation("lu", f.pivots, m, a), l, u};
}

Tensor lu_solve(const Tensor& packed, const Tensor& pivots, const Tensor& b, bool left,
                bool adjoint) {
  const ops::UserOp user(Op::lu_solve, {&packed, &pivots, &b});
  check_matrices(Op::lu_solve, packed, true);
  ops::check_defined("lu_solve", pivots, "pivots");
  ops::check_defined("lu_solve", b, "B");
  ops::check_same_dtype("lu_solve", packed, b);
  ops::check_same_device("lu_solve", packed, b);
  ops::check_same_device("lu_solve", packed, pivots);
  const int64_t n = packed.shape()[packed.dim() - 1];
  EMBER_CHECK(pivots.dtype() == DType::i32 && pivots.shape() == with_last(batch_of(packed), {n}),
              "lu_solve: pivots ", pivots.shape().to_string(), " ",
              std::string(dtype_name(pivots.dtype())), " for LU ", packed.shape().to_string(),
              " (expected i32 ", with_last(batch_of(packed), {n}).to_string(),
              ", as lu_factor returns them)");
  EMBER_CHECK(b.dim() >= 2 && b.shape()[b.dim() - (left ? 2 : 1)] == n, "lu_solve: B shape ",
              b.shape().to_string(), " for LU ", packed.shape().to_string(), " (expected ",
              left ? "[..., n, k]" : "[..., k, n]", " with n = ", n, ")");
  // X·A = B is Aᵀ·Xᵀ = Bᵀ: the left solve with the other adjointness, transposed.
  const Tensor rhs = left ? b : mT(b);
  const bool transposed = left ? adjoint : !adjoint;
  const Tensor p = permutation("lu_solve", pivots, n, packed);
  Tensor x;
  if (!transposed) {  // A = P·L·U: X = U⁻¹·L⁻¹·Pᵀ·B
    x = solve_triangular(packed, matmul(mT(p), rhs), /*upper=*/false, true, true);
    x = solve_triangular(packed, x, /*upper=*/true);
  } else {  // Aᵀ = Uᵀ·Lᵀ·Pᵀ: X = P·L⁻ᵀ·U⁻ᵀ·B
    x = solve_triangular(mT(packed), rhs, /*upper=*/false);
    x = matmul(p, solve_triangular(mT(packed), x, /*upper=*/true, true, true));
  }
  return left ? x : mT(x);
}

SlogDet slogdet(const Tensor& a) {
  check_matrices(Op::slogdet, a, true);
  const Shape batch = batch_of(a);
  const int64_t n = a.shape()[a.dim() - 1];
  const TensorOptions o{.dtype = a.dtype(), .device = a.device()};
  Tensor sign, logabsdet;
  {
    NoGradGuard no_grad;
    if (n == 0 || a.numel() == 0) {  // the empty product: det 1 (PyTorch)
      sign = ones(batch, o);
      logabsdet = zeros(batch, o);
    } else {
      Tensor packed = ops::make_tensor(a.shape(), a.dtype(), a.device());
      Tensor pivots = ops::make_tensor(with_last(batch, {n}), DType::i32, a.device());
      ops::linalg::run_unchecked(Decomposition::lu, a, Tensor(), packed, pivots, Tensor());
      const Tensor d = ops::linalg::diagonal(packed);
      // Each pivot that moved a row flips the sign; a zero on U's diagonal makes it 0.
      const Tensor moved =
          ne(pivots.to(a.dtype()), arange(1.0, static_cast<double>(n) + 1.0, 1.0, o));
      const Tensor flips = prod(where(moved, full_like(d, -1.0), ones_like(d)), {-1});
      sign = prod(ember::sign(d), {-1}) * flips;
      logabsdet = sum(log(abs(d)), {-1});
    }
  }
  if (autograd::needs_grad(a))
    autograd::record(Op::slogdet, logabsdet, {&a},
                     [sa = SavedTensor(a)](const Tensor& g, GradList& gi) {
                       // d log|det A| = tr(A⁻¹·dA): the gradient is g·A⁻ᵀ.
                       gi[0] = g.unsqueeze(-1).unsqueeze(-1) * mT(inv(sa.get()));
                     });
  return {sign, logabsdet};
}

}  // namespace ember
