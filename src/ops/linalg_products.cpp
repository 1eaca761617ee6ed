// src/ops/linalg_products.cpp — products built from matmul and elementwise ops, as PyTorch:
// cross, kron, tensordot, multi_dot / chain_matmul (in the cheapest order), matrix_power,
// matrix_exp (scaling and squaring) and householder_product. All composites: their gradients
// come from the ops they are made of.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/decompose.hpp"

namespace ember {

using namespace ops::linalg;  // the helpers of src/ops/decompose.hpp

namespace {

// The catalogue's dtype check of a composite over two operands, and their agreement.
void check_pair(Op op, const Tensor& a, const Tensor& b) {
  ops::check_supported(op, a);
  ops::check_supported(op, b, "other");
  ops::check_same_dtype(op_name(op), a, b);
  ops::check_same_device(op_name(op), a, b);
}

}  // namespace

Tensor cross(const Tensor& a, const Tensor& b, int64_t dim) {
  const ops::UserOp user(Op::cross, {&a, &b});
  check_pair(Op::cross, a, b);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "cross");
  const int d = wrap_dim(dim, shape.size(), "cross");
  // Both operands have size 3 at dim (counted in the broadcast shape), as torch.linalg.cross.
  auto size_at = [&](const Tensor& x) {
    const int i = d - (shape.size() - x.dim());
    return i >= 0 ? x.shape()[i] : int64_t{1};
  };
  EMBER_CHECK(size_at(a) == 3 && size_at(b) == 3, "cross: shapes ", a.shape().to_string(), " and ",
              b.shape().to_string(), " (expected size 3 at dim ", dim, " in both)");
  const Tensor ae = a.expand(shape), be = b.expand(shape);
  auto at = [d](const Tensor& x, int64_t i) { return x.narrow(d, i, 1); };
  return cat(
      {at(ae, 1) * at(be, 2) - at(ae, 2) * at(be, 1), at(ae, 2) * at(be, 0) - at(ae, 0) * at(be, 2),
       at(ae, 0) * at(be, 1) - at(ae, 1) * at(be, 0)},
      d);
}

Tensor kron(const Tensor& a, const Tensor& b) {
  const ops::UserOp user(Op::kron, {&a, &b});
  check_pair(Op::kron, a, b);
  const int rank = std::max(a.dim(), b.dim());
  EMBER_CHECK(2 * rank <= kMaxRank, "kron: shapes ", a.shape().to_string(), " and ",
              b.shape().to_string(), " (expected at most ", kMaxRank / 2, " dims)");
  // a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...], then each pair merged.
  Shape sa, sb, out;
  for (int i = 0; i < rank; ++i) {
    const int ia = i - (rank - a.dim()), ib = i - (rank - b.dim());
    const int64_t da = ia >= 0 ? a.shape()[ia] : 1, db = ib >= 0 ? b.shape()[ib] : 1;
    sa.push_back(da);
    sa.push_back(1);
    sb.push_back(1);
    sb.push_back(db);
    out.push_back(da * db);
  }
  return (a.reshape(sa) * b.reshape(sb)).reshape(out);
}

Tensor tensordot(const Tensor& a, const Tensor& b, const Shape& dims_a, const Shape& dims_b) {
  const ops::UserOp user(Op::tensordot, {&a, &b});
  check_pair(Op::tensordot, a, b);
  EMBER_CHECK(dims_a.size() == dims_b.size(), "tensordot: ", dims_a.size(), " dims of a and ",
              dims_b.size(), " of b (expected as many)");
  std::vector<bool> used_a(a.dim(), false), used_b(b.dim(), false);
  Shape order_a, order_b, out;
  int64_t contracted = 1;
  for (int i = 0; i < dims_a.size(); ++i) {
    const int da = wrap_dim(dims_a[i], a.dim(), "tensordot");
    const int db = wrap_dim(dims_b[i], b.dim(), "tensordot");
    EMBER_CHECK(!used_a[da] && !used_b[db], "tensordot: a dim is listed twice");
    EMBER_CHECK(a.shape()[da] == b.shape()[db], "tensordot: a's dim ", da, " has size ",
                a.shape()[da], " and b's dim ", db, " has size ", b.shape()[db],
                " (expected equal sizes)");
    used_a[da] = used_b[db] = true;
    contracted *= a.shape()[da];
  }
  int64_t rows = 1, cols = 1;
  for (int d = 0; d < a.dim(); ++d)
    if (!used_a[d]) {
      order_a.push_back(d);
      out.push_back(a.shape()[d]);
      rows *= a.shape()[d];
    }
  for (int i = 0; i < dims_a.size(); ++i) {
    order_a.push_back(wrap_dim(dims_a[i], a.dim(), "tensordot"));
    order_b.push_back(wrap_dim(dims_b[i], b.dim(), "tensordot"));
  }
  for (int d = 0; d < b.dim(); ++d)
    if (!used_b[d]) {
      order_b.push_back(d);
      out.push_back(b.shape()[d]);
      cols *= b.shape()[d];
    }
  return mm(a.permute(order_a).reshape({rows, contracted}),
            b.permute(order_b).reshape({contracted, cols}))
      .reshape(out);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  const ops::UserOp user(Op::tensordot, {&a, &b});
  check_pair(Op::tensordot, a, b);
  EMBER_CHECK(dims >= 0 && dims <= a.dim() && dims <= b.dim(), "tensordot: dims ", dims,
              " for shapes ", a.shape().to_string(), " and ", b.shape().to_string(),
              " (expected 0..", std::min(a.dim(), b.dim()), ")");
  Shape da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(a.dim() - dims + i);
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

namespace {

// Note [multi_dot's order]
// The product of a chain of matrices costs Σ rows·inner·cols multiplications in the order it
// is bracketed. The classic dynamic programme over sub-chains finds the cheapest bracketing
// (as torch.linalg.multi_dot does); the chain is then multiplied in that order.
Tensor chain_product(const std::vector<Tensor>& m) {
  const size_t n = m.size();
  std::vector<int64_t> dims(n + 1);
  for (size_t i = 0; i < n; ++i) dims[i] = m[i].shape()[0];
  dims[n] = m[n - 1].shape()[1];
  // cost[i][j]: the cheapest product of m[i..j]; split[i][j]: where it is bracketed.
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0.0));
  std::vector<std::vector<size_t>> split(n, std::vector<size_t>(n, 0));
  for (size_t len = 1; len < n; ++len)
    for (size_t i = 0; i + len < n; ++i) {
      const size_t j = i + len;
      cost[i][j] = std::numeric_limits<double>::infinity();
      for (size_t s = i; s < j; ++s) {
        const double c = cost[i][s] + cost[s + 1][j] +
                         static_cast<double>(dims[i]) * static_cast<double>(dims[s + 1]) *
                             static_cast<double>(dims[j + 1]);
        if (c < cost[i][j]) {
          cost[i][j] = c;
          split[i][j] = s;
        }
      }
    }
  auto product = [&](auto&& self, size_t i, size_t j) -> Tensor {
    if (i == j) return m[i];
    return mm(self(self, i, split[i][j]), self(self, split[i][j] + 1, j));
  };
  return product(product, 0, n - 1);
}

Tensor chain(Op op, const std::vector<Tensor>& tensors, bool vectors_at_ends) {
  EMBER_CHECK(tensors.size() >= (vectors_at_ends ? 2u : 1u), op_name(op), ": ", tensors.size(),
              " tensors (expected at least ", vectors_at_ends ? 2 : 1, ")");
  const Tensor& first = tensors.front();
  std::vector<Tensor> m;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    ops::check_supported(op, t);
    ops::check_same_dtype(op_name(op), first, t);
    ops::check_same_device(op_name(op), first, t);
    const bool end = vectors_at_ends && (i == 0 || i + 1 == tensors.size());
    EMBER_CHECK(t.dim() == 2 || (end && t.dim() == 1), op_name(op), ": tensor ", i, " has shape ",
                t.shape().to_string(), " (expected a matrix",
                end ? ", or a vector at either end)" : ")");
    Tensor x = t.dim() == 2 ? t : (i == 0 ? t.unsqueeze(0) : t.unsqueeze(1));
    if (i > 0)
      EMBER_CHECK(m.back().shape()[1] == x.shape()[0], op_name(op), ": tensor ", i - 1,
                  " has shape ", tensors[i - 1].shape().to_string(), " and tensor ", i, " ",
                  t.shape().to_string(), " (expected the inner sizes to agree)");
    m.push_back(x);
  }
  if (m.size() == 1) return m[0].clone();
  Tensor out = chain_product(m);
  if (tensors.back().dim() == 1) out = out.squeeze(1);
  if (first.dim() == 1) out = out.squeeze(0);
  return out;
}

}  // namespace

Tensor multi_dot(const std::vector<Tensor>& tensors) {
  const ops::UserOp user(Op::multi_dot, tensors);
  return chain(Op::multi_dot, tensors, true);
}

Tensor chain_matmul(const std::vector<Tensor>& matrices) {
  const ops::UserOp user(Op::chain_matmul, matrices);
  return chain(Op::chain_matmul, matrices, false);
}

Tensor matrix_power(const Tensor& a, int64_t n) {
  const ops::UserOp user(Op::matrix_power, {&a});
  check_matrices(Op::matrix_power, a, true);
  const int64_t size = a.shape()[a.dim() - 1];
  // A⁰ is the identity, for every matrix of the batch (no gradient: it does not depend on A).
  if (n == 0) return ops::linalg::eye(size, a).expand(a.shape()).contiguous();
  Tensor base = n < 0 ? inv(a) : a;
  uint64_t e = n < 0 ? static_cast<uint64_t>(-(n + 1)) + 1 : static_cast<uint64_t>(n);
  Tensor result;  // by squaring: the bits of e, lowest first
  for (; e > 0; e >>= 1) {
    if (e & 1) result = result.defined() ? matmul(result, base) : base;
    if (e > 1) base = matmul(base, base);
  }
  return n == 1 ? result.clone() : result;
}

// Note [matrix_exp by scaling and squaring]
// exp(A) = exp(A/2ˢ)^(2ˢ). With s chosen so that ‖A/2ˢ‖₁ <= 1/2 (one s for the whole batch,
// the largest any matrix needs: a smaller norm only makes the series converge faster), the
// Taylor polynomial of degree 16 leaves a remainder below 0.5¹⁷/17! ≈ 2e-20 relative, under
// f64's rounding; s squarings follow. The polynomial is evaluated the Paterson-Stockmeyer
// way: X², X³, X⁴, then Horner in X⁴ over blocks of four terms: 6 matmuls, not Horner's 15
// (a 256 × 256 f64 matrix here: 6.0 ms, 9.6 ms by Horner, 6.6 ms in PyTorch 1.13). Every
// step is a matmul, so the gradient is the composite's (exact for the polynomial computed).
Tensor matrix_exp(const Tensor& a) {
  const ops::UserOp user(Op::matrix_exp, {&a});
  check_matrices(Op::matrix_exp, a, true);
  const int64_t n = a.shape()[a.dim() - 1];
  if (a.numel() == 0) return a.clone();
  double norm1 = 0.0;
  {
    NoGradGuard no_grad;
    norm1 = max(sum(abs(a), {-2})).to(DType::f64).item<double>();
  }
  EMBER_CHECK(std::isfinite(norm1), "matrix_exp: the input holds a non-finite value");
  const int s = norm1 > 0.5 ? static_cast<int>(std::ceil(std::log2(norm1 / 0.5))) : 0;
  const Tensor x = s > 0 ? a * std::ldexp(1.0, -s) : a;
  constexpr int kBlock = 4, kDegree = kBlock * kBlock;  // Σ_{k<=16} Xᵏ/k!
  std::vector<Tensor> power = {ops::linalg::eye(n, a), x};
  for (int k = 2; k <= kBlock; ++k) power.push_back(matmul(power[k - 1], x));
  std::vector<double> coefficient(kDegree + 1, 1.0);  // 1/k!
  for (int k = 1; k <= kDegree; ++k) coefficient[k] = coefficient[k - 1] / k;
  // Block j: Σ_{i<4} c[4j + i]·Xⁱ; the last one also holds c[16]·X⁴.
  auto block = [&](int j) {
    Tensor b = power[0] * coefficient[j * kBlock];
    for (int i = 1; i < kBlock; ++i) b = b + power[i] * coefficient[j * kBlock + i];
    return b;
  };
  Tensor p = block(kBlock - 1) + power[kBlock] * coefficient[kDegree];
  for (int j = kBlock - 2; j >= 0; --j) p = block(j) + matmul(power[kBlock], p);
  for (int i = 0; i < s; ++i) p = matmul(p, p);
  return p;
}

Tensor householder_product(const Tensor& a, const Tensor& tau) {
  const ops::UserOp user(Op::householder_product, {&a, &tau});
  check_matrices(Op::householder_product, a, false);
  ops::check_defined("householder_product", tau, "tau");
  ops::check_same_dtype("householder_product", a, tau);
  ops::check_same_device("householder_product", a, tau);
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1];
  const int64_t k = tau.dim() >= 1 ? tau.shape()[tau.dim() - 1] : -1;
  EMBER_CHECK(m >= n && k >= 0 && k <= n && tau.dim() == a.dim() - 1 &&
                  with_last(batch_of(a), {k}) == tau.shape(),
              "householder_product: A shape ", a.shape().to_string(), " and tau shape ",
              tau.shape().to_string(),
              " (expected A [..., m, n] with m >= n, tau [..., k], k <= n)");
  // vᵢ: column i of A below the diagonal, 1 on it, 0 above. Q ← Q·(I - τᵢ·vᵢ·vᵢᵀ).
  const Tensor v = tril(a, -1) + ops::linalg::eye(m, n, a);
  Tensor q = ops::linalg::eye(m, a).expand(with_last(batch_of(a), {m, m}));
  for (int64_t i = 0; i < k; ++i) {
    const Tensor vi = v.narrow(-1, i, 1);                  // [..., m, 1]
    const Tensor ti = tau.narrow(-1, i, 1).unsqueeze(-1);  // [..., 1, 1]
    q = q - matmul(matmul(q, vi) * ti, mT(vi));
  }
  return q.narrow(-1, 0, n).contiguous();
}

}  // namespace ember
