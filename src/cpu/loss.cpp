// src/cpu/loss.cpp — fused softmax cross-entropy with class-index targets, forward
// and backward (the contract is beside the slots in src/backend/backend.hpp).
//
// Shape letters: logits [N, C] contiguous (N rows of C classes), target [N] i64/i32.
// Per row, stable (the row maximum is subtracted before exp; sums accumulate in f64):
//   forward:  lse = m + log Σ_c exp(x_c - m)
//             loss = (1-ε)·(lse - x_t) + (ε/C)·Σ_c (lse - x_c)     (0 when t == ignore_index)
//   backward: gi_c = s·(exp(x_c - lse) - ε/C - (1-ε)·[c == t])       (0 when t == ignore_index)
// Rows are split across the thread pool; each row's max and Σ exp are softmax's vectorised row
// reductions (f64 lanes in a fixed order, softmax_rows.hpp), its gradient one vectorised loop;
// the total and the count are summed afterwards in row order (deterministic). Labels are checked
// before any row is computed, so a bad label throws with nothing written.
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]
#pragma GCC optimize("fp-contract=off")   // Note [Identical clones] (loops.hpp)

#include <algorithm>
#include <cmath>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "cpu/parallel.hpp"
#include "cpu/softmax_rows.hpp"
#include "cpu/vec_math.hpp"

namespace ember::cpu {
namespace {

template <typename I>
void check_labels(const I* t, int64_t n, int64_t classes, int64_t ignore_index) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(t[i]);
    EMBER_CHECK(v == ignore_index || (v >= 0 && v < classes), "cross_entropy: label ", v,
                " at position ", i, " is out of range for ", classes,
                " classes (expected labels in [0, ", classes, ") or ignore_index ", ignore_index,
                ")");
  }
}

int64_t row_grain(int64_t classes) {
  return std::max<int64_t>(1, kGrainMath / std::max<int64_t>(classes, 1));
}

template <typename T, typename I>
void forward_typed(const View& loss_rows, const View& lse_out, const View& total, const View& count,
                   const View& logits, const I* t, int64_t ignore_index, double eps) {
  const int64_t n = logits.shape[0], c = logits.shape[1];
  const T* x = static_cast<const T*>(logits.data);
  T* loss = static_cast<T*>(loss_rows.data);
  T* lse = static_cast<T*>(lse_out.data);
  const double smooth = c > 0 ? eps / static_cast<double>(c) : 0.0;
  parallel_for(n, row_grain(c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* row = x + r * c;
      const T m = softmax_row_max(row, c);
      const double s = softmax_row_exp_sum(row, c, m);
      double sx = 0.0;
      if (eps > 0.0)
        for (int64_t j = 0; j < c; ++j) sx += static_cast<double>(row[j]);
      const double l = static_cast<double>(m) + std::log(s);
      lse[r] = static_cast<T>(l);
      const int64_t label = static_cast<int64_t>(t[r]);
      if (label == ignore_index) {
        loss[r] = T(0);
        continue;
      }
      const double nll = l - static_cast<double>(row[label]);
      loss[r] = static_cast<T>(
          eps > 0.0 ? (1.0 - eps) * nll + smooth * (static_cast<double>(c) * l - sx) : nll);
    }
  });
  if (!total.data && !count.data) return;
  double sum = 0.0, valid = 0.0;
  for (int64_t r = 0; r < n; ++r) {
    sum += static_cast<double>(loss[r]);
    valid += static_cast<int64_t>(t[r]) != ignore_index ? 1.0 : 0.0;
  }
  if (count.data) *static_cast<T*>(count.data) = static_cast<T>(valid);
  if (total.data) *static_cast<T*>(total.data) = static_cast<T>(count.data ? sum / valid : sum);
}

// out = s·(exp(x - l) - smooth) over one row of c classes.
template <typename T>
EMBER_VECTORIZE_WIDE void grad_row(T* __restrict out, const T* __restrict x, int64_t c, T l, T s,
                                   T smooth) {
  for (int64_t j = 0; j < c; ++j) out[j] = s * (exp_of(static_cast<T>(x[j] - l)) - smooth);
}

template <typename T, typename I>
void backward_typed(const View& grad_logits, const View& grad_loss, const View& count,
                    const View& logits, const I* t, const View& lse_in, int64_t ignore_index,
                    double eps) {
  const int64_t n = logits.shape[0], c = logits.shape[1];
  const T* x = static_cast<const T*>(logits.data);
  const T* lse = static_cast<const T*>(lse_in.data);
  const T* g = static_cast<const T*>(grad_loss.data);
  T* gi = static_cast<T*>(grad_logits.data);
  const bool per_row = grad_loss.shape.size() == 1;
  const T scale = per_row ? T(1) : (count.data ? g[0] / *static_cast<const T*>(count.data) : g[0]);
  const T smooth = static_cast<T>(c > 0 ? eps / static_cast<double>(c) : 0.0);
  const T hit = static_cast<T>(1.0 - eps);
  parallel_for(n, row_grain(c), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* out = gi + r * c;
      const int64_t label = static_cast<int64_t>(t[r]);
      if (label == ignore_index) {
        for (int64_t j = 0; j < c; ++j) out[j] = T(0);
        continue;
      }
      const T s = per_row ? g[r] : scale;
      const T* row = x + r * c;
      const T l = lse[r];
      grad_row(out, row, c, l, s, smooth);
      if (label >= 0 && label < c) out[label] -= s * hit;
    }
  });
}

}  // namespace

void cross_entropy_forward(const View& loss_rows, const View& lse, const View& total,
                           const View& count, const View& logits, const View& target,
                           int64_t ignore_index, double label_smoothing) {
  EMBER_ASSERT(is_contiguous(logits) && is_contiguous(target) && logits.shape.size() == 2,
               "cross_entropy: logits must be contiguous [N, C]");
  dispatch_index(target.dtype, "cross_entropy", "target", [&](auto label_tag) {
    using I = typename decltype(label_tag)::type;
    const I* t = static_cast<const I*>(target.data);
    check_labels(t, logits.shape[0], logits.shape[1], ignore_index);
    dispatch_float(logits.dtype, "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      forward_typed<T, I>(loss_rows, lse, total, count, logits, t, ignore_index, label_smoothing);
    });
  });
}

void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& count,
                            const View& logits, const View& target, const View& lse,
                            int64_t ignore_index, double label_smoothing) {
  EMBER_ASSERT(is_contiguous(logits) && is_contiguous(grad_logits) && is_contiguous(grad_loss),
               "cross_entropy_backward: operands must be contiguous");
  dispatch_index(target.dtype, "cross_entropy", "target", [&](auto label_tag) {
    using I = typename decltype(label_tag)::type;
    const I* t = static_cast<const I*>(target.data);
    dispatch_float(logits.dtype, "cross_entropy_backward", [&](auto tag) {
      using T = typename decltype(tag)::type;
      backward_typed<T, I>(grad_logits, grad_loss, count, logits, t, lse, ignore_index,
                           label_smoothing);
    });
  });
}

}  // namespace ember::cpu
