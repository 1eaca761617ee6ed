// src/ops/linalg_norms.cpp — the norms and the condition number of torch.linalg: vector_norm
// (norm under its torch.linalg name), matrix_norm (Frobenius, nuclear, ±1, ±inf, ±2) and cond.
// Composites of reductions and the SVD: their gradients come from those.
#include <cmath>
#include <limits>
#include <string>

#include "ops/decompose.hpp"

namespace ember {

using namespace ops::linalg;  // the helpers of src/ops/decompose.hpp

Tensor vector_norm(const Tensor& x, double ord, const Shape& dims, bool keepdim) {
  const ops::UserOp user(Op::vector_norm, {&x});
  ops::check_supported(Op::vector_norm, x);
  return norm(x, ord, dims, keepdim);
}

namespace {

// The two matrix dims of matrix_norm, wrapped and distinct.
std::pair<int, int> matrix_dims(const Tensor& a, const Shape& dims) {
  EMBER_CHECK(dims.size() == 2, "matrix_norm: dims ", dims.to_string(), " (expected two dims)");
  const int d0 = wrap_dim(dims[0], a.dim(), "matrix_norm");
  const int d1 = wrap_dim(dims[1], a.dim(), "matrix_norm");
  EMBER_CHECK(d0 != d1, "matrix_norm: dims ", dims.to_string(), " (expected two different dims)");
  return {d0, d1};
}

// The singular values of the matrices over (d0, d1), [..., k], the other dims in order.
Tensor singular_values(const Tensor& a, int d0, int d1) {
  return svd(movedim(a, Shape{d0, d1}, Shape{a.dim() - 2, a.dim() - 1})).S;
}

// A reduction over (d0, d1) with its dims dropped put back as size 1 (keepdim).
Tensor keep(const Tensor& r, int d0, int d1) {
  return r.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
}

void check_matrix_norm_input(const Tensor& a) {
  ops::check_supported(Op::matrix_norm, a);
  EMBER_CHECK(a.dim() >= 2, "matrix_norm: input shape ", a.shape().to_string(),
              " (expected a matrix or a batch of matrices)");
}

}  // namespace

Tensor matrix_norm(const Tensor& a, const std::string& ord, const Shape& dims, bool keepdim) {
  const ops::UserOp user(Op::matrix_norm, {&a});
  check_matrix_norm_input(a);
  EMBER_CHECK(ord == "fro" || ord == "nuc", "matrix_norm: ord \"", ord,
              "\" (expected \"fro\", \"nuc\" or a number: ±1, ±2, ±inf)");
  const auto [d0, d1] = matrix_dims(a, dims);
  if (ord == "fro") return sqrt(sum(square(a), {d0, d1}, keepdim));
  const Tensor r = sum(singular_values(a, d0, d1), {-1});
  return keepdim ? keep(r, d0, d1) : r;
}

Tensor matrix_norm(const Tensor& a, double ord, const Shape& dims, bool keepdim) {
  const ops::UserOp user(Op::matrix_norm, {&a});
  check_matrix_norm_input(a);
  const double p = std::abs(ord);
  EMBER_CHECK(p == 1.0 || p == 2.0 || std::isinf(p), "matrix_norm: ord ", ord,
              " (expected ±1, ±2, ±inf, \"fro\" or \"nuc\")");
  const auto [d0, d1] = matrix_dims(a, dims);
  if (p == 2.0) {
    const Tensor s = singular_values(a, d0, d1);
    const Tensor r = ord > 0 ? max(s, Shape{-1}) : min(s, Shape{-1});
    return keepdim ? keep(r, d0, d1) : r;
  }
  // ±1: the largest / smallest column sum of |A| (sum over d0, extreme over d1); ±inf: rows.
  const int sum_dim = p == 1.0 ? d0 : d1, extreme_dim = p == 1.0 ? d1 : d0;
  const Tensor sums = sum(abs(a), {sum_dim}, true);
  Tensor r = ord > 0 ? max(sums, Shape{extreme_dim}, true) : min(sums, Shape{extreme_dim}, true);
  return keepdim ? r : r.squeeze(std::max(d0, d1)).squeeze(std::min(d0, d1));
}

namespace {

// matrix_norm(A, p)·matrix_norm(A⁻¹, p); a matrix with an exact zero pivot (inv's own test of
// singularity) gets inf instead of inv's error, as PyTorch's cond (through inv_ex's info).
template <typename Ord>
Tensor cond_by_norms(const Tensor& a, const Ord& p) {
  Tensor singular;
  {
    NoGradGuard no_grad;
    singular = eq(slogdet(a).sign, 0.0);
  }
  const Tensor safe =
      where(singular.unsqueeze(-1).unsqueeze(-1), ops::linalg::eye(a.shape()[a.dim() - 1], a), a);
  const Tensor r = matrix_norm(a, p) * matrix_norm(inv(safe), p);
  return where(singular, full_like(r, std::numeric_limits<double>::infinity()), r);
}

}  // namespace

Tensor cond(const Tensor& a, std::optional<double> p) {
  const ops::UserOp user(Op::cond, {&a});
  const double ord = p ? *p : 2.0;
  check_matrices(Op::cond, a, std::abs(ord) != 2.0);
  if (std::abs(ord) == 2.0) {  // σ_max / σ_min (or its inverse)
    const Tensor s = svd(a).S;
    const Tensor r = max(s, Shape{-1}) / min(s, Shape{-1});
    return ord > 0 ? r : 1.0 / r;
  }
  return cond_by_norms(a, ord);
}

Tensor cond(const Tensor& a, const std::string& p) {
  const ops::UserOp user(Op::cond, {&a});
  check_matrices(Op::cond, a, true);
  EMBER_CHECK(p == "fro" || p == "nuc", "cond: p \"", p,
              "\" (expected \"fro\", \"nuc\" or a number: ±1, ±2, ±inf)");
  return cond_by_norms(a, p);
}

}  // namespace ember
