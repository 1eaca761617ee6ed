// src/ops/linalg_spectral.cpp — the ops built on a spectral decomposition, as torch.linalg:
// eigh (a primitive on the decompose slot, LAPACK's syevd, with PyTorch's backward) and
// eigvalsh; pinv and matrix_rank through the SVD (or eigh for `hermitian`); and eig / eigvals,
// refused by name (their results are complex, and ember has no complex dtype).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/decompose.hpp"

namespace ember {

using namespace ops::linalg;  // the helpers of src/ops/decompose.hpp

namespace {

bool is_upper(Op op, const std::string& uplo) {
  EMBER_CHECK(uplo == "L" || uplo == "U", op_name(op), ": uplo \"", uplo,
              "\" (expected \"L\" or \"U\")");
  return uplo == "U";
}

// Note [eigh's gradient]
// With A = V·diag(L)·Vᵀ, PyTorch's backward is gA = V·(diag(gL) + skew(Vᵀ·gV) / E)·Vᵀ, where
// skew(X) = (X - Xᵀ)/2 and E[i, j] = L[j] - L[i] (the diagonal of the quotient left 0). Both
// factors of the quotient are antisymmetric, so gA is symmetric: the gradient of a symmetric
// input, whichever triangle LAPACK read. Equal eigenvalues make E zero there (PyTorch warns
// the same); the fixtures' matrices have distinct ones.
Tensor eigh_backward(const Tensor& l, const Tensor& v, const Tensor& gl, const Tensor& gv) {
  const int64_t n = l.shape()[l.dim() - 1];
  const Tensor eye = ops::linalg::eye(n, l);
  const Tensor e = l.unsqueeze(-2) - l.unsqueeze(-1) + eye;  // 1 on the diagonal: no 0/0
  const Tensor vtgv = matmul(mT(v), gv);
  const Tensor inner = (0.5 * (vtgv - mT(vtgv)) / e) * (1.0 - eye) + ops::linalg::diag_embed(gl);
  return matmul(matmul(v, inner), mT(v));
}

}  // namespace

Eigh eigh(const Tensor& a_in, const std::string& uplo) {
  check_matrices(Op::eigh, a_in, true);
  // The upper triangle of A is the lower one of Aᵀ, which the kernel reads.
  const Tensor a = is_upper(Op::eigh, uplo) ? mT(a_in) : a_in;
  const Shape batch = batch_of(a);
  const int64_t n = a.shape()[a.dim() - 1];
  Tensor l = ops::make_tensor(with_last(batch, {n}), a.dtype(), a.device());
  Tensor v = ops::make_tensor(with_last(batch, {n, n}), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    ops::linalg::run(Op::eigh, backend::Decomposition::eigh, a, Tensor(), l, v, Tensor(),
                     "did not converge");
  }
  if (!autograd::needs_grad(a)) return {l, v};
  // One node with two outputs: their gradients arrive as the parts of a joint tensor.
  Tensor joint = cat({l, v.reshape(with_last(batch, {n * n}))}, -1);
  autograd::record(Op::eigh, joint, {&a},
                   [n, batch, sl = autograd::SavedTensor(l), sv = autograd::SavedTensor(v)](
                       const Tensor& g, autograd::GradList& gi) {
                     gi[0] =
                         eigh_backward(sl.get(), sv.get(), g.narrow(-1, 0, n),
                                       g.narrow(-1, n, n * n).reshape(with_last(batch, {n, n})));
                   });
  return {joint.narrow(-1, 0, n), joint.narrow(-1, n, n * n).reshape(with_last(batch, {n, n}))};
}

Tensor eigvalsh(const Tensor& a, const std::string& uplo) {
  const ops::UserOp user(Op::eigvalsh, {&a});
  check_matrices(Op::eigvalsh, a, true);
  is_upper(Op::eigvalsh, uplo);
  return eigh(a, uplo).eigenvalues;
}

namespace {
[[noreturn]] void refuse_eig(const char* op, const Tensor& a) {
  detail::throw_error(detail::concat(
      op, ": the eigenvalues of a general real matrix are complex, and ember has no complex dtype",
      a.defined()
          ? " (got " + a.shape().to_string() + " " + std::string(dtype_name(a.dtype())) + ")"
          : std::string(),
      "; for a symmetric matrix use eigh (eigvalsh for the eigenvalues only), whose results "
      "are real"));
}
}  // namespace

Eig eig(const Tensor& a) { refuse_eig("eig", a); }
Tensor eigvals(const Tensor& a) { refuse_eig("eigvals", a); }

namespace {

// The singular values (or |eigenvalues| for `hermitian`) at or below which pinv and
// matrix_rank count a value as 0: max(atol, rtol·σ_max) per matrix, [..., 1]. PyTorch's
// default: rtol = max(m, n)·ε when neither is given, 0 when only atol is.
Tensor tolerance(const Tensor& s, int64_t m, int64_t n, std::optional<double> atol,
                 std::optional<double> rtol) {
  const double eps = s.dtype() == DType::f64 ? std::numeric_limits<double>::epsilon()
                                             : std::numeric_limits<float>::epsilon();
  const double r = rtol ? *rtol : (atol ? 0.0 : static_cast<double>(std::max(m, n)) * eps);
  const Tensor smax = max(s, Shape{-1}, true);  // k = min(m, n) > 0: pinv and matrix_rank return
                                                // before for empty matrices
  return maximum(smax.detach() * r, full_like(smax, atol ? *atol : 0.0).detach());
}

void check_tolerances(Op op, std::optional<double> atol, std::optional<double> rtol) {
  EMBER_CHECK(!atol || *atol >= 0.0, op_name(op), ": atol ", *atol, " (expected >= 0)");
  EMBER_CHECK(!rtol || *rtol >= 0.0, op_name(op), ": rtol ", *rtol, " (expected >= 0)");
}

}  // namespace

Tensor pinv(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
            bool hermitian) {
  const ops::UserOp user(Op::pinv, {&a});
  check_matrices(Op::pinv, a, hermitian);
  check_tolerances(Op::pinv, atol, rtol);
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1];
  if (a.numel() == 0)
    return zeros(with_last(batch_of(a), {n, m}), {.dtype = a.dtype(), .device = a.device()});
  // Kept values get 1/s; the others 0, through a safe denominator (no 0·inf in backward).
  auto inverted = [&](const Tensor& s, const Tensor& magnitude) {
    const Tensor keep = gt(magnitude, tolerance(magnitude, m, n, atol, rtol));
    const Tensor safe = where(keep, s, ones_like(s));
    return where(keep, 1.0 / safe, zeros_like(s));
  };
  if (hermitian) {
    const Eigh e = eigh(a);
    const Tensor w = inverted(e.eigenvalues, abs(e.eigenvalues));
    return matmul(e.eigenvectors * w.unsqueeze(-2), mT(e.eigenvectors));
  }
  const SVD f = svd(a);
  return matmul(mT(f.Vh) * inverted(f.S, f.S).unsqueeze(-2), mT(f.U));
}

Tensor matrix_rank(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
                   bool hermitian) {
  const ops::UserOp user(Op::matrix_rank, {&a});
  check_matrices(Op::matrix_rank, a, hermitian);
  check_tolerances(Op::matrix_rank, atol, rtol);
  NoGradGuard no_grad;
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1];
  if (a.numel() == 0) return zeros(batch_of(a), {.dtype = DType::i64, .device = a.device()});
  const Tensor s = hermitian ? abs(eigvalsh(a)) : svd(a).S;
  return sum(gt(s, tolerance(s, m, n, atol, rtol)), {-1});
}

}  // namespace ember
