// src/ops/decompose.cpp — matrix decompositions as torch.linalg: inv, det, solve, cholesky, qr
// (reduced), svd (reduced), batched over leading dims, with PyTorch's backward formulas; and
// einsum, which lowers any subscripts to permutes, diagonals, sums and one batched GEMM per
// pair of operands.
//
// The decompositions run on the backend's decompose slot (LAPACK on the CPU; on a GPU the
// documented fallback copies the matrices to the host). Their gradients are composites of
// matmul, inv and triangle masks, so they run on the tensors' device.
#include "ops/decompose.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using backend::Decomposition;

namespace ops::linalg {

void check_matrices(Op op, const Tensor& a, bool square) {
  const ops::OpScope op_scope(op, a);
  ops::check_supported(op, a);
  EMBER_CHECK(a.dim() >= 2, op_name(op), ": input shape ", a.shape().to_string(),
              " (expected a matrix or a batch of matrices [..., m, n])");
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1];
  EMBER_CHECK(!square || m == n, op_name(op), ": input shape ", a.shape().to_string(),
              " (expected square matrices [..., n, n])");
}

Shape with_last(const Shape& batch, std::initializer_list<int64_t> last) {
  Shape s = batch;
  for (int64_t v : last) s.push_back(v);
  return s;
}

Shape batch_of(const Tensor& a) {
  Shape s = a.shape();
  s.erase(s.size() - 1);
  s.erase(s.size() - 1);
  return s;
}

Tensor eye(int64_t m, int64_t n, const Tensor& like) {
  const TensorOptions o{.dtype = like.dtype(), .device = like.device()};
  return eq(arange(static_cast<double>(m), o).unsqueeze(1), arange(static_cast<double>(n), o))
      .to(like.dtype());
}
Tensor eye(int64_t n, const Tensor& like) { return eye(n, n, like); }

Tensor diagonal(const Tensor& a) { return sum(a * eye(a.shape()[a.dim() - 1], a), {-1}); }

Tensor diag_embed(const Tensor& v) { return v.unsqueeze(-1) * eye(v.shape()[v.dim() - 1], v); }

int64_t run_unchecked(Decomposition kind, const Tensor& a, const Tensor& b, const Tensor& o0,
                      const Tensor& o1, const Tensor& o2) {
  // No matrices, or empty ones: nothing to factor (LAPACK refuses n = 0 leading dims). The
  // callers give empty outputs their values (det: 1); a result is never left unwritten.
  if (a.numel() == 0 || (b.defined() && b.numel() == 0)) return -1;
  Tensor ac = a.contiguous(), bc = b.defined() ? b.contiguous() : Tensor();
  auto view = [](const Tensor& t) { return t.defined() ? ops::view_of(t) : backend::View{}; };
  return ops::backend_of(a).decompose(kind, view(ac), view(bc), view(o0), view(o1), view(o2));
}

// Runs the slot on contiguous copies and turns a failed matrix into an error naming it.
void run(Op op, Decomposition kind, const Tensor& a, const Tensor& b, const Tensor& o0,
         const Tensor& o1, const Tensor& o2, const char* failure) {
  const int64_t bad = run_unchecked(kind, a, b, o0, o1, o2);
  EMBER_CHECK(bad < 0, op_name(op), ": the matrix at batch index ", bad, " ", failure,
              " (input shape ", a.shape().to_string(), ")");
}

}  // namespace ops::linalg

using ops::linalg::batch_of;
using ops::linalg::check_matrices;
using ops::linalg::mT;
using ops::linalg::run;
using ops::linalg::with_last;

Tensor inv(const Tensor& a) {
  check_matrices(Op::inv, a, true);
  Tensor out = ops::make_tensor(a.shape(), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    run(Op::inv, Decomposition::inverse, a, Tensor(), out, Tensor(), Tensor(), "is singular");
  }
  if (autograd::needs_grad(a))
    autograd::record(Op::inv, out, {&a}, [so = SavedTensor(out)](const Tensor& g, GradList& gi) {
      const Tensor y = so.get();  // d(A⁻¹) = -A⁻¹ dA A⁻¹
      gi[0] = neg(matmul(matmul(mT(y), g), mT(y)));
    });
  return out;
}

namespace {

// Note [det's gradient]
// d det A = tr(adj(A) dA), so the gradient is g · adj(A)ᵀ, the cofactor matrix. For an
// invertible A that is g · det A · A⁻ᵀ. A singular A (where LAPACK's LU meets a zero pivot)
// still has cofactors: with A = U·S·Vᵀ, adj(A)ᵀ = det U · det V · U·diag(∏_{j≠i} s_j)·Vᵀ, the
// products taken from both ends (no division by a zero s_i), as torch does through an SVD.
Tensor det_backward(const Tensor& g, const Tensor& a, const Tensor& d) {
  const Tensor scale = g.unsqueeze(-1).unsqueeze(-1);
  Tensor a_inv;
  try {
    a_inv = inv(a);
  } catch (const Error&) {
    const SVD f = svd(a);
    const int64_t n = f.S.size(-1);
    const Tensor one = ones_like(f.S.narrow(-1, 0, 1));
    const Tensor before = cat({one, cumprod(f.S, -1).narrow(-1, 0, n - 1)}, -1);
    const Tensor after =
        flip(cat({one, cumprod(flip(f.S, {-1}), -1).narrow(-1, 0, n - 1)}, -1), {-1});
    const Tensor sign = (det(f.U) * det(f.Vh)).unsqueeze(-1).unsqueeze(-1);
    return scale * sign * matmul(f.U * (before * after).unsqueeze(-2), f.Vh);
  }
  return scale * d.unsqueeze(-1).unsqueeze(-1) * mT(a_inv);
}

}  // namespace

Tensor det(const Tensor& a) {
  check_matrices(Op::det, a, true);
  Tensor out = ops::make_tensor(batch_of(a), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    run(Op::det, Decomposition::det, a, Tensor(), out, Tensor(), Tensor(), "failed");
    if (a.shape()[a.dim() - 1] == 0) out.fill_(1.0);  // the empty product (PyTorch)
  }
  if (autograd::needs_grad(a))
    autograd::record(Op::det, out, {&a},
                     [sa = SavedTensor(a), so = SavedTensor(out)](const Tensor& g, GradList& gi) {
                       gi[0] = det_backward(g, sa.get(), so.get());
                     });
  return out;
}

Tensor solve(const Tensor& a, const Tensor& b_in) {
  check_matrices(Op::solve, a, true);
  ops::check_defined("solve", b_in, "B");
  ops::check_same_dtype("solve", a, b_in);
  ops::check_same_device("solve", a, b_in);
  const int64_t n = a.shape()[a.dim() - 1];
  // B is [..., n, k], or one vector [n] per matrix (torch.linalg.solve's vector case).
  Shape a_rows = a.shape();
  a_rows.erase(a_rows.size() - 1);
  const bool vector = b_in.dim() == 1 || (b_in.dim() == a.dim() - 1 && b_in.shape() == a_rows);
  Tensor b = vector ? b_in.unsqueeze(-1) : b_in;
  EMBER_CHECK(b.dim() >= 2 && b.shape()[b.dim() - 2] == n, "solve: B shape ",
              b_in.shape().to_string(), " for A shape ", a.shape().to_string(), " (expected [..., ",
              n, ", k] or [", n, "])");
  Shape batch = broadcast_shapes(batch_of(a), batch_of(b), "solve");
  const int64_t k = b.shape()[b.dim() - 1];
  Tensor ae = a.expand(with_last(batch, {n, n})), be = b.expand(with_last(batch, {n, k}));
  Tensor out = ops::make_tensor(with_last(batch, {n, k}), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    run(Op::solve, Decomposition::solve, ae, be, out, Tensor(), Tensor(), "is singular");
  }
  if (autograd::needs_grad(ae, be)) {
    autograd::record(Op::solve, out, {&ae, &be},
                     [sa = SavedTensor(ae), so = SavedTensor(out)](const Tensor& g, GradList& gi) {
                       // X = A⁻¹B: gB = A⁻ᵀ G, gA = -gB Xᵀ.
                       Tensor gb = solve(mT(sa.get()), g);
                       gi[0] = neg(matmul(gb, mT(so.get())));
                       gi[1] = gb;
                     });
  }
  return vector ? out.squeeze(-1) : out;
}

Tensor cholesky(const Tensor& a) {
  check_matrices(Op::cholesky, a, true);
  Tensor out = ops::make_tensor(a.shape(), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    run(Op::cholesky, Decomposition::cholesky, a, Tensor(), out, Tensor(), Tensor(),
        "is not positive definite");
  }
  if (autograd::needs_grad(a))
    autograd::record(Op::cholesky, out, {&a},
                     [sl = SavedTensor(out)](const Tensor& g, GradList& gi) {
                       // gA = sym(L⁻ᵀ Φ(Lᵀ gL) L⁻¹), Φ: the lower triangle with the diagonal
                       // halved.
                       const Tensor l = sl.get(), linv = inv(l);
                       Tensor p = matmul(mT(l), g);
                       p = tril(p) - 0.5 * (tril(p) - tril(p, -1));
                       Tensor s = matmul(matmul(mT(linv), p), linv);
                       gi[0] = 0.5 * (s + mT(s));
                     });
  return out;
}

namespace {
// QR's gradient for m >= n (reduced): M = R gRᵀ - gQᵀ Q; gA = (gQ + Q copyltu(M)) R⁻ᵀ.
Tensor qr_backward_tall(const Tensor& q, const Tensor& r, const Tensor& gq, const Tensor& gr) {
  Tensor mm = matmul(r, mT(gr)) - matmul(mT(gq), q);
  Tensor sym = tril(mm) + mT(tril(mm, -1));
  return matmul(gq + matmul(q, sym), mT(inv(r)));
}
}  // namespace

QR qr(const Tensor& a) {
  check_matrices(Op::qr, a, false);
  const Shape batch = batch_of(a);
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1], k = std::min(m, n);
  Tensor q = ops::make_tensor(with_last(batch, {m, k}), a.dtype(), a.device());
  Tensor r = ops::make_tensor(with_last(batch, {k, n}), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    run(Op::qr, Decomposition::qr, a, Tensor(), q, r, Tensor(), "failed");
  }
  if (autograd::needs_grad(a)) {
    // One node with two outputs: Q's and R's gradients arrive as the parts of a joint tensor.
    Tensor joint =
        cat({q.reshape(with_last(batch, {m * k})), r.reshape(with_last(batch, {k * n}))}, -1);
    autograd::record(
        Op::qr, joint, {&a},
        [m, n, k, batch, sq = SavedTensor(q), sr = SavedTensor(r)](const Tensor& g, GradList& gi) {
          const Tensor qq = sq.get(), rr = sr.get();
          Tensor gq = g.narrow(-1, 0, m * k).reshape(with_last(batch, {m, k}));
          Tensor gr = g.narrow(-1, m * k, k * n).reshape(with_last(batch, {k, n}));
          if (m >= n) {
            gi[0] = qr_backward_tall(qq, rr, gq, gr);
            return;
          }
          // Wide (m < n), as PyTorch: A = [X | Y] and R = [U | V] with X = Q U and V = Qᵀ Y.
          // Through V, Y gets Q gV and Q gets Y gVᵀ (Y = Q V); X is the square case.
          const Tensor u = rr.narrow(-1, 0, m), v = rr.narrow(-1, m, n - m);
          const Tensor gu = gr.narrow(-1, 0, m), gv = gr.narrow(-1, m, n - m);
          const Tensor y = matmul(qq, v);
          gi[0] = cat({qr_backward_tall(qq, u, gq + matmul(y, mT(gv)), gu), matmul(qq, gv)}, -1);
        });
    q = joint.narrow(-1, 0, m * k).reshape(with_last(batch, {m, k}));
    r = joint.narrow(-1, m * k, k * n).reshape(with_last(batch, {k, n}));
  }
  return {q, r};
}

SVD svd(const Tensor& a) {
  check_matrices(Op::svd, a, false);
  const Shape batch = batch_of(a);
  const int64_t m = a.shape()[a.dim() - 2], n = a.shape()[a.dim() - 1], k = std::min(m, n);
  Tensor u = ops::make_tensor(with_last(batch, {m, k}), a.dtype(), a.device());
  Tensor s = ops::make_tensor(with_last(batch, {k}), a.dtype(), a.device());
  Tensor vh = ops::make_tensor(with_last(batch, {k, n}), a.dtype(), a.device());
  {
    NoGradGuard no_grad;
    run(Op::svd, Decomposition::svd, a, Tensor(), u, s, vh, "did not converge");
  }
  if (autograd::needs_grad(a)) {
    Tensor joint =
        cat({u.reshape(with_last(batch, {m * k})), s, vh.reshape(with_last(batch, {k * n}))}, -1);
    autograd::record(
        Op::svd, joint, {&a},
        [m, n, k, batch, su = SavedTensor(u), ss = SavedTensor(s), sv = SavedTensor(vh)](
            const Tensor& g, GradList& gi) {
          // Townsend's formula (distinct non-zero singular values):
          // gA = U[(F∘(UᵀgU - gUᵀU))S + diag(gS) + S(F∘(VᵀgV - gVᵀV))]Vᵀ
          //      + (I - UUᵀ) gU S⁻¹ Vᵀ + U S⁻¹ gVᵀ (I - VVᵀ),  F_ij = 1/(s_j² - s_i²).
          const Tensor uu = su.get(), sv_ = ss.get(), v = mT(sv.get());
          Tensor gu = g.narrow(-1, 0, m * k).reshape(with_last(batch, {m, k}));
          Tensor gs = g.narrow(-1, m * k, k);
          Tensor gv = mT(g.narrow(-1, m * k + k, k * n).reshape(with_last(batch, {k, n})));
          Tensor s2 = sv_ * sv_;
          Tensor diff = s2.unsqueeze(-2) - s2.unsqueeze(-1);  // [i, j] = s_j² - s_i²
          Tensor eye_ = diag(ones({k}, {.dtype = g.dtype(), .device = g.device()}));
          Tensor f =
              where(gt(eye_, 0.0), zeros(Shape{}, {.dtype = g.dtype(), .device = g.device()}),
                    1.0 / (diff + eye_));
          Tensor smat = sv_.unsqueeze(-1) * eye_;  // diag(S)
          Tensor sinv = (1.0 / sv_).unsqueeze(-1) * eye_;
          Tensor j = f * (matmul(mT(uu), gu) - matmul(mT(gu), uu));
          Tensor kk = f * (matmul(mT(v), gv) - matmul(mT(gv), v));
          Tensor inner = matmul(j, smat) + gs.unsqueeze(-1) * eye_ + matmul(smat, kk);
          Tensor ga = matmul(matmul(uu, inner), mT(v));
          Tensor eye_m = diag(ones({m}, {.dtype = g.dtype(), .device = g.device()}));
          Tensor eye_n = diag(ones({n}, {.dtype = g.dtype(), .device = g.device()}));
          ga = ga + matmul(matmul(matmul(eye_m - matmul(uu, mT(uu)), gu), sinv), mT(v));
          ga = ga + matmul(matmul(matmul(uu, sinv), mT(gv)), eye_n - matmul(v, mT(v)));
          gi[0] = ga;
        });
    u = joint.narrow(-1, 0, m * k).reshape(with_last(batch, {m, k}));
    s = joint.narrow(-1, m * k, k);
    vh = joint.narrow(-1, m * k + k, k * n).reshape(with_last(batch, {k, n}));
  }
  return {u, s, vh};
}

// ---- einsum ----
//
// Note [einsum lowering]
// Each operand's subscripts become labels (letters; the dims under "..." get labels of their
// own, aligned from the right and broadcast across operands). A label repeated within one
// operand takes that operand's diagonal; a label no other operand and not the output uses is
// summed away at once. Operands then contract left to right: for the pair (acc, next), labels
// in both that are still needed are batch dims, labels in both that are not are contracted,
// and the rest stay on their side, so the pair is one bmm of [B, L, C]·[B, C, R]. The result
// is permuted to the output's order. Every step is a differentiable op.

namespace {

using Labels = std::vector<int>;
constexpr int kEllipsisBase = 64;  // labels of "..." dims (letters are 0..51)

struct Term {
  Tensor t;
  Labels labels;
};

int letter_label(char c, const std::string& eq) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  detail::throw_error(detail::concat("einsum: '", c, "' in equation \"", eq,
                                     "\" (expected letters, commas, \"->\" and \"...\")"));
}

// Labels of one subscript string for an operand of `rank` dims.
Labels parse_term(const std::string& sub, int rank, int& ellipsis_rank, const std::string& eq,
                  size_t index) {
  Labels out;
  const size_t dots = sub.find("...");
  const int letters = static_cast<int>(sub.size()) - (dots == std::string::npos ? 0 : 3);
  const int covered = dots == std::string::npos ? 0 : rank - letters;
  EMBER_CHECK(covered >= 0 && (dots != std::string::npos || letters == rank), "einsum: operand ",
              index, " has ", rank, " dims but subscripts \"", sub, "\" in \"", eq, "\" name ",
              letters, dots == std::string::npos ? "" : " (besides \"...\")");
  ellipsis_rank = std::max(ellipsis_rank, covered);
  for (size_t i = 0; i < sub.size(); ++i) {
    if (i == dots) {
      for (int e = 0; e < covered; ++e) out.push_back(kEllipsisBase + (covered - 1 - e));
      i += 2;
      continue;
    }
    out.push_back(letter_label(sub[i], eq));
  }
  return out;
}

int find(const Labels& l, int label) {
  auto it = std::find(l.begin(), l.end(), label);
  return it == l.end() ? -1 : static_cast<int>(it - l.begin());
}

// The diagonal of dims p and q (equal sizes) as a new last dim.
Tensor diagonal_last(const Tensor& x, int p, int q) {
  const int64_t n = x.shape()[p];
  Shape order;
  for (int d = 0; d < x.dim(); ++d)
    if (d != p && d != q) order.push_back(d);
  order.push_back(p);
  order.push_back(q);
  Tensor moved = x.permute(order);
  Shape flat = moved.shape();
  flat.erase(flat.size() - 1);
  flat[flat.size() - 1] = n * n;
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < n; ++i) idx.push_back(i * (n + 1));
  return index_select(moved.reshape(flat), -1, from_vector<int64_t>(idx, Shape{n}).to(x.device()));
}

// Sums away the labels of `t` that `keep` does not hold.
void sum_unneeded(Term& t, const std::vector<bool>& keep) {
  Shape dims;
  Labels rest;
  for (int i = 0; i < static_cast<int>(t.labels.size()); ++i) {
    if (keep[t.labels[i]])
      rest.push_back(t.labels[i]);
    else
      dims.push_back(i);
  }
  if (dims.empty()) return;
  t.t = sum(t.t, dims);
  t.labels = rest;
}

}  // namespace

Tensor einsum(const std::string& equation_in, const std::vector<Tensor>& operands) {
  std::string eq;
  for (char c : equation_in)
    if (c != ' ') eq += c;
  EMBER_CHECK(!operands.empty(), "einsum: no operands for \"", equation_in, "\"");
  for (const Tensor& t : operands) {
    ops::check_supported(Op::einsum, t);
    ops::check_same_dtype("einsum", operands[0], t);
    ops::check_same_device("einsum", operands[0], t);
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> subs;
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    subs.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  EMBER_CHECK(subs.size() == operands.size(), "einsum: \"", equation_in, "\" has ", subs.size(),
              " operand subscripts for ", operands.size(), " operands");
  int ellipsis_rank = 0;
  std::vector<Term> terms;
  std::map<int, int64_t> size_of;
  std::map<int, int> uses;
  for (size_t i = 0; i < operands.size(); ++i) {
    Term t{operands[i], parse_term(subs[i], operands[i].dim(), ellipsis_rank, equation_in, i)};
    for (int l : t.labels) ++uses[l];
    terms.push_back(t);
  }
  // The output's labels: given, or "..." then the letters used once, in order.
  Labels out;
  if (arrow != std::string::npos) {
    const std::string rhs = eq.substr(arrow + 2);
    const size_t dots = rhs.find("...");
    for (size_t i = 0; i < rhs.size(); ++i) {
      if (i == dots) {
        for (int e = ellipsis_rank - 1; e >= 0; --e) out.push_back(kEllipsisBase + e);
        i += 2;
        continue;
      }
      const int l = letter_label(rhs[i], equation_in);
      EMBER_CHECK(find(out, l) < 0, "einsum: output subscript '", rhs[i], "' repeats in \"",
                  equation_in, "\"");
      EMBER_CHECK(uses.count(l), "einsum: output subscript '", rhs[i],
                  "' appears in no operand of \"", equation_in, "\"");
      out.push_back(l);
    }
  } else {
    for (int e = ellipsis_rank - 1; e >= 0; --e) out.push_back(kEllipsisBase + e);
    for (const auto& [l, n] : uses)
      if (l < kEllipsisBase && n == 1) out.push_back(l);
  }
  // Diagonals of repeated labels, then sizes (size-1 dims broadcast).
  for (size_t i = 0; i < terms.size(); ++i) {
    Term& t = terms[i];
    for (bool again = true; again;) {
      again = false;
      for (int p = 0; p < static_cast<int>(t.labels.size()) && !again; ++p)
        for (int q = p + 1; q < static_cast<int>(t.labels.size()) && !again; ++q) {
          if (t.labels[p] != t.labels[q]) continue;
          EMBER_CHECK(t.t.shape()[p] == t.t.shape()[q], "einsum: operand ", i,
                      " repeats a subscript over dims of sizes ", t.t.shape()[p], " and ",
                      t.t.shape()[q], " in \"", equation_in, "\"");
          const int label = t.labels[p];
          t.t = diagonal_last(t.t, p, q);
          t.labels.erase(t.labels.begin() + q);
          t.labels.erase(t.labels.begin() + p);
          t.labels.push_back(label);
          --uses[label];
          again = true;
        }
    }
    for (int d = 0; d < static_cast<int>(t.labels.size()); ++d) {
      const int64_t n = t.t.shape()[d];
      auto [it, fresh] = size_of.emplace(t.labels[d], n);
      if (!fresh && it->second != n) {
        EMBER_CHECK(it->second == 1 || n == 1, "einsum: subscript sizes ", it->second, " and ", n,
                    " disagree for one subscript of \"", equation_in, "\" (operand ", i, ")");
        it->second = std::max(it->second, n);
      }
    }
  }
  std::vector<bool> in_out(kEllipsisBase * 2, false);
  for (int l : out) in_out[l] = true;
  // Needed after operand i: the output's labels and those of operands after i.
  auto needed_after = [&](size_t i) {
    std::vector<bool> keep = in_out;
    for (size_t j = i + 1; j < terms.size(); ++j)
      for (int l : terms[j].labels) keep[l] = true;
    return keep;
  };
  auto expand_to_sizes = [&](Term& t) {
    Shape s;
    for (int l : t.labels) s.push_back(size_of[l]);
    if (s != t.t.shape()) t.t = t.t.expand(s);
  };
  Term acc = terms[0];
  {
    std::vector<bool> keep = needed_after(0);
    if (terms.size() > 1)
      for (int l : terms[1].labels) keep[l] = true;
    sum_unneeded(acc, keep);
  }
  for (size_t i = 1; i < terms.size(); ++i) {
    Term b = terms[i];
    std::vector<bool> later = needed_after(i);
    std::vector<bool> keep_b = later;
    for (int l : acc.labels) keep_b[l] = true;
    sum_unneeded(b, keep_b);
    expand_to_sizes(acc);
    expand_to_sizes(b);
    Labels batch, left, contract, right;
    for (int l : acc.labels) {
      if (find(b.labels, l) >= 0)
        (later[l] ? batch : contract).push_back(l);
      else
        left.push_back(l);
    }
    for (int l : b.labels)
      if (find(acc.labels, l) < 0) right.push_back(l);
    auto arrange = [&](const Term& t, std::initializer_list<const Labels*> groups) {
      Shape order, shape3;
      for (const Labels* g : groups) {
        int64_t n = 1;
        for (int l : *g) {
          order.push_back(find(t.labels, l));
          n *= size_of[l];
        }
        shape3.push_back(n);
      }
      return t.t.permute(order).reshape(shape3);
    };
    Tensor prod =
        bmm(arrange(acc, {&batch, &left, &contract}), arrange(b, {&batch, &contract, &right}));
    Labels labels = batch;
    labels.insert(labels.end(), left.begin(), left.end());
    labels.insert(labels.end(), right.begin(), right.end());
    Shape shape;
    for (int l : labels) shape.push_back(size_of[l]);
    acc = Term{prod.reshape(shape), labels};
  }
  sum_unneeded(acc, in_out);
  expand_to_sizes(acc);
  Shape order;
  for (int l : out) order.push_back(find(acc.labels, l));
  Tensor result = order.empty() ? acc.t : acc.t.permute(order);
  return terms.size() == 1 && result.is_same(operands[0]) ? result.clone() : result;
}

}  // namespace ember
