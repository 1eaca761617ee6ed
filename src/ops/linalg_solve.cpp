// src/ops/linalg_solve.cpp — the triangular and least-squares solves, as torch.linalg:
// solve_triangular (a primitive on the decompose slot, LAPACK's trtrs, with PyTorch's
// backward), torch.triangular_solve (its older argument order), cholesky_solve (two triangular
// solves) and lstsq (through QR, for A of full rank).
#include <algorithm>

#include "ops/decompose.hpp"

namespace ember {

using namespace ops::linalg;  // the helpers of src/ops/decompose.hpp

namespace {

// The right-hand side's checks of a solve: defined, A's dtype and device, a matrix batch.
void check_rhs(Op op, const Tensor& a, const Tensor& b) {
  ops::check_defined(op_name(op), b, "B");
  ops::check_same_dtype(op_name(op), a, b);
  ops::check_same_device(op_name(op), a, b);
  EMBER_CHECK(b.dim() >= 2, op_name(op), ": B shape ", b.shape().to_string(),
              " (expected a matrix or a batch of matrices [..., m, k])");
}

}  // namespace

Tensor solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                        bool unitriangular) {
  check_matrices(Op::solve_triangular, a, true);
  check_rhs(Op::solve_triangular, a, b);
  const int64_t n = a.shape()[a.dim() - 1];
  EMBER_CHECK(b.shape()[b.dim() - (left ? 2 : 1)] == n, "solve_triangular: B shape ",
              b.shape().to_string(), " for A shape ", a.shape().to_string(), " (expected ",
              left ? "[..., n, k]" : "[..., k, n]", " with n = ", n, ")");
  // X·A = B is Aᵀ·Xᵀ = Bᵀ, and Aᵀ has the other triangle.
  if (!left) return mT(solve_triangular(mT(a), mT(b), !upper, true, unitriangular));
  // The unit diagonal replaces A's: the gradient of A's diagonal is then 0, as PyTorch's.
  const Tensor tri =
      unitriangular ? (upper ? triu(a, 1) : tril(a, -1)) + ops::linalg::eye(n, a) : a;
  const Shape batch = broadcast_shapes(batch_of(tri), batch_of(b), "solve_triangular");
  const int64_t k = b.shape()[b.dim() - 1];
  Tensor ae = tri.expand(with_last(batch, {n, n})), be = b.expand(with_last(batch, {n, k}));
  Tensor out = ops::make_tensor(with_last(batch, {n, k}), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    ops::linalg::run(
        Op::solve_triangular,
        upper ? backend::Decomposition::solve_upper : backend::Decomposition::solve_lower, ae, be,
        out, Tensor(), Tensor(), "has a zero on its diagonal (singular)");
  }
  if (autograd::needs_grad(ae, be))
    autograd::record(Op::solve_triangular, out, {&ae, &be},
                     [upper, sa = autograd::SavedTensor(ae), so = autograd::SavedTensor(out)](
                         const Tensor& g, autograd::GradList& gi) {
                       // X = A⁻¹·B: gB = A⁻ᵀ·G, gA = -gB·Xᵀ on A's triangle (the one read).
                       const Tensor gb = solve_triangular(mT(sa.get()), g, !upper);
                       const Tensor ga = neg(matmul(gb, mT(so.get())));
                       gi[0] = upper ? triu(ga) : tril(ga);
                       gi[1] = gb;
                     });
  return out;
}

TriangularSolve triangular_solve(const Tensor& b, const Tensor& a, bool upper, bool transpose,
                                 bool unitriangular) {
  const ops::UserOp user(Op::triangular_solve, {&b, &a});
  check_matrices(Op::triangular_solve, a, true);
  check_rhs(Op::triangular_solve, a, b);
  Tensor x = transpose ? solve_triangular(mT(a), b, !upper, true, unitriangular)
                       : solve_triangular(a, b, upper, true, unitriangular);
  return {x, a.clone()};
}

Tensor cholesky_solve(const Tensor& b, const Tensor& l, bool upper) {
  const ops::UserOp user(Op::cholesky_solve, {&b, &l});
  check_matrices(Op::cholesky_solve, l, true);
  check_rhs(Op::cholesky_solve, l, b);
  // A = L·Lᵀ (or Uᵀ·U): X = Lᵀ⁻¹·(L⁻¹·B).
  const Tensor lower = upper ? mT(l) : l;
  return solve_triangular(mT(lower), solve_triangular(lower, b, false), true);
}

Lstsq lstsq(const Tensor& a, const Tensor& b) {
  const ops::UserOp user(Op::lstsq, {&a, &b});
  check_matrices(Op::lstsq, a, false);
  check_rhs(Op::lstsq, a, b);
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1];
  EMBER_CHECK(b.shape()[b.dim() - 2] == m, "lstsq: B shape ", b.shape().to_string(),
              " for A shape ", a.shape().to_string(), " (expected [..., ", m, ", k])");
  const TensorOptions o{.dtype = a.dtype(), .device = a.device()};
  const Shape batch = broadcast_shapes(batch_of(a), batch_of(b), "lstsq");
  const int64_t k = b.shape()[b.dim() - 1];
  Tensor x;
  if (std::min(m, n) == 0) {
    x = zeros(with_last(batch, {n, k}), o);
  } else if (m >= n) {  // A = Q·R: min ‖A·X - B‖ at X = R⁻¹·Qᵀ·B
    const QR f = qr(a);
    x = solve_triangular(f.R, matmul(mT(f.Q), b), /*upper=*/true);
  } else {  // Aᵀ = Q·R, A = Rᵀ·Qᵀ: the minimum-norm X = Q·R⁻ᵀ·B
    const QR f = qr(mT(a));
    x = matmul(f.Q, solve_triangular(mT(f.R), b, /*upper=*/false));
  }
  x = x.expand(with_last(batch, {n, k}));
  // The squared residual of each column when the system is overdetermined (drivers gels,
  // gelsd), empty otherwise; the rank full, as assumed; no singular values (driver gelsy).
  Tensor residuals = m > n ? sum(square(matmul(a, x) - b), {-2}) : zeros({0}, o);
  Tensor rank =
      full(batch, static_cast<double>(std::min(m, n)), {.dtype = DType::i64, .device = a.device()});
  return {x, residuals, rank, zeros({0}, o)};
}

}  // namespace ember
