// src/cpu/softmax.cpp — softmax / log_softmax over one dim of a contiguous tensor, and
// their backward.
//
// Shape letters and formulas: src/kernels/softmax.hpp ([O, D, I] around the softmax dim).
// With I == 1 each row is contiguous and handled by vectorised row loops; otherwise blocks of
// kColumns adjacent columns are processed together (vectorised across columns). Stable: the
// max of each slice is subtracted before exp; sums accumulate in f64. f16/bf16 slices are
// widened into f32 scratch, run through the f32 routines and rounded once on store (Note
// [16-bit softmax] in src/kernels/softmax.hpp).
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]
#pragma GCC optimize("fp-contract=off")   // Note [Identical clones] (loops.hpp)

#include "kernels/softmax.hpp"

#include <cmath>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "cpu/softmax_rows.hpp"
#include "cpu/vec_math.hpp"
#include "kernels/reduce.hpp"

namespace ember::cpu {
namespace {

constexpr int64_t kColumns = 64;
constexpr int kLanes = 16;     // f64 accumulators per row: 4 chains of 256-bit adds
constexpr int kMaxLanes = 32;  // running maxima per row

using Layout = kernels::SoftmaxLayout;

Layout layout_of(const View& v, int dim, const char* op) {
  EMBER_ASSERT(dim >= 0 && dim < v.shape.size(), op, ": dim ", dim, " out of range");
  EMBER_ASSERT(is_contiguous(v), op, ": the CPU kernel needs contiguous tensors");
  return kernels::layout_of(v.shape, dim);
}

using kernels::max_nan;  // NaN in either operand wins

// ---- contiguous rows (I == 1) ----
template <typename T>
EMBER_VECTORIZE T row_max(const T* __restrict x, int64_t n) {
  T lane[kMaxLanes];
  for (int j = 0; j < kMaxLanes; ++j) lane[j] = -INFINITY;
  int64_t i = 0;
  for (; i + kMaxLanes <= n; i += kMaxLanes)
    for (int j = 0; j < kMaxLanes; ++j) lane[j] = max_nan(lane[j], x[i + j]);
  for (; i < n; ++i) lane[0] = max_nan(lane[0], x[i]);
  T m = lane[0];
  for (int j = 1; j < kMaxLanes; ++j) m = max_nan(m, lane[j]);
  return m;
}

// o = exp(x - shift); returns Σ o (f64 lanes).
template <typename T>
EMBER_VECTORIZE_WIDE double row_exp_sum(T* __restrict o, const T* __restrict x, int64_t n,
                                        T shift) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const T e = exp_of(x[i + j] - shift);
      o[i + j] = e;
      lane[j] += static_cast<double>(e);
    }
  }
  for (; i < n; ++i) {
    o[i] = exp_of(x[i] - shift);
    lane[0] += static_cast<double>(o[i]);
  }
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

// Σ exp(x - shift) without storing (log_softmax).
template <typename T>
EMBER_VECTORIZE_WIDE double row_exp_sum_only(const T* __restrict x, int64_t n, T shift) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += static_cast<double>(exp_of(x[i + j] - shift));
  for (; i < n; ++i) lane[0] += static_cast<double>(exp_of(x[i] - shift));
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

template <typename T>
EMBER_VECTORIZE void row_scale(T* __restrict o, int64_t n, T factor) {
  for (int64_t i = 0; i < n; ++i) o[i] *= factor;
}

// Note [log_softmax rounding] in src/kernels/softmax.hpp.
template <typename T>
EMBER_VECTORIZE void row_log_shift(T* __restrict o, const T* __restrict x, int64_t n, T m,
                                   T log_s) {
  for (int64_t i = 0; i < n; ++i) o[i] = kernels::log_softmax_value(x[i], m, log_s);
}

constexpr int64_t kShortRow = 16;  // below this, one fused loop beats three vector calls

template <typename T>
void softmax_short_row(T* o, const T* x, int64_t n, bool log) {
  T m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = max_nan(m, x[i]);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T e = exp_of(x[i] - m);
    if (!log) o[i] = e;
    s += static_cast<double>(e);
  }
  if (log) {
    row_log_shift(o, x, n, m, static_cast<T>(std::log(s)));
  } else {
    const T factor = static_cast<T>(1.0 / s);
    for (int64_t i = 0; i < n; ++i) o[i] *= factor;
  }
}

template <typename T>
void softmax_row(T* o, const T* x, int64_t n, bool log) {
  if (n < kShortRow) return softmax_short_row(o, x, n, log);
  const T m = row_max(x, n);
  if (log) {
    const double s = row_exp_sum_only(x, n, m);
    row_log_shift(o, x, n, m, static_cast<T>(std::log(s)));
  } else {
    const double s = row_exp_sum(o, x, n, m);
    row_scale(o, n, static_cast<T>(1.0 / s));
  }
}

// Σ a·b (f64 lanes), or Σ a when b is null.
template <typename T>
EMBER_VECTORIZE double row_dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j)
      lane[j] += static_cast<double>(a[i + j]) * static_cast<double>(b[i + j]);
  for (; i < n; ++i) lane[0] += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

template <typename T>
EMBER_VECTORIZE double row_sum(const T* __restrict a, int64_t n) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += static_cast<double>(a[i + j]);
  for (; i < n; ++i) lane[0] += static_cast<double>(a[i]);
  double s = 0;
  for (int j = 0; j < kLanes; ++j) s += lane[j];
  return s;
}

template <typename T>
EMBER_VECTORIZE void row_softmax_grad(T* __restrict gi, const T* __restrict g,
                                      const T* __restrict y, int64_t n, T dot) {
  for (int64_t i = 0; i < n; ++i) gi[i] = kernels::softmax_grad_value(g[i], y[i], dot);
}

template <typename T>
EMBER_VECTORIZE_WIDE void row_log_softmax_grad(T* __restrict gi, const T* __restrict g,
                                               const T* __restrict y, int64_t n, T sum) {
  for (int64_t i = 0; i < n; ++i) gi[i] = kernels::log_softmax_grad_value(g[i], exp_of(y[i]), sum);
}

// ---- column blocks (I > 1): element (d, j) of a block is at d·I + j ----
template <typename T>
void softmax_columns(T* o, const T* x, int64_t size, int64_t inner, int64_t nc, bool log) {
  T m[kColumns];
  double s[kColumns];
  for (int64_t j = 0; j < nc; ++j) {
    m[j] = -INFINITY;
    s[j] = 0;
  }
  for (int64_t d = 0; d < size; ++d)
    for (int64_t j = 0; j < nc; ++j) m[j] = max_nan(m[j], x[d * inner + j]);
  for (int64_t d = 0; d < size; ++d) {
    for (int64_t j = 0; j < nc; ++j) {
      const T e = exp_of(x[d * inner + j] - m[j]);
      if (!log) o[d * inner + j] = e;
      s[j] += static_cast<double>(e);
    }
  }
  if (log) {
    T log_s[kColumns];  // Note [log_softmax rounding]
    for (int64_t j = 0; j < nc; ++j) log_s[j] = static_cast<T>(std::log(s[j]));
    for (int64_t d = 0; d < size; ++d)
      for (int64_t j = 0; j < nc; ++j)
        o[d * inner + j] = kernels::log_softmax_value(x[d * inner + j], m[j], log_s[j]);
  } else {
    T factor[kColumns];
    for (int64_t j = 0; j < nc; ++j) factor[j] = static_cast<T>(1.0 / s[j]);
    for (int64_t d = 0; d < size; ++d)
      for (int64_t j = 0; j < nc; ++j) o[d * inner + j] *= factor[j];
  }
}

template <typename T>
void softmax_grad_columns(T* gi, const T* g, const T* y, int64_t size, int64_t inner, int64_t nc,
                          bool log) {
  double acc[kColumns];
  for (int64_t j = 0; j < nc; ++j) acc[j] = 0;
  for (int64_t d = 0; d < size; ++d) {
    for (int64_t j = 0; j < nc; ++j) {
      const int64_t at = d * inner + j;
      acc[j] += log ? static_cast<double>(g[at]) : static_cast<double>(g[at]) * y[at];
    }
  }
  T a[kColumns];
  for (int64_t j = 0; j < nc; ++j) a[j] = static_cast<T>(acc[j]);
  for (int64_t d = 0; d < size; ++d) {
    for (int64_t j = 0; j < nc; ++j) {
      const int64_t at = d * inner + j;
      gi[at] = log ? kernels::log_softmax_grad_value(g[at], exp_of(y[at]), a[j])
                   : kernels::softmax_grad_value(g[at], y[at], a[j]);
    }
  }
}

// One slice of f32/f64 data: a row (I == 1), or a block of nc columns whose element (d, j) is at
// d·stride + j.
template <typename C>
void softmax_slice(C* o, const C* x, const Layout& l, int64_t stride, int64_t nc, bool log) {
  if (l.inner == 1)
    softmax_row(o, x, l.size, log);
  else
    softmax_columns(o, x, l.size, stride, nc, log);
}

template <typename C>
void softmax_grad_slice(C* gi, const C* g, const C* y, const Layout& l, int64_t stride, int64_t nc,
                        bool log) {
  if (l.inner != 1)
    softmax_grad_columns(gi, g, y, l.size, stride, nc, log);
  else if (log)
    row_log_softmax_grad(gi, g, y, l.size, static_cast<C>(row_sum(g, l.size)));
  else
    row_softmax_grad(gi, g, y, l.size, static_cast<C>(row_dot(g, y, l.size)));
}

// A 16-bit slice (size rows of nc elements, element (d, j) at d·inner + j) to and from f32
// scratch holding it with stride nc (Note [16-bit softmax]).
template <typename T>
void widen_slice(float* dst, const T* src, int64_t size, int64_t inner, int64_t nc) {
  if (nc == inner) return widen_to_f32(dst, src, size * nc);
  for (int64_t d = 0; d < size; ++d)
    for (int64_t j = 0; j < nc; ++j) dst[d * nc + j] = static_cast<float>(src[d * inner + j]);
}

template <typename T>
void narrow_slice(T* dst, const float* src, int64_t size, int64_t inner, int64_t nc) {
  if (nc == inner) return round_from_f32(dst, src, size * nc);
  for (int64_t d = 0; d < size; ++d)
    for (int64_t j = 0; j < nc; ++j) dst[d * inner + j] = T(src[d * nc + j]);
}

// Calls body(offset, columns, scratch) for every row (I == 1) or column block, in parallel;
// `scratch` is the task's buffer for a 16-bit kernel's widened slices (empty until used).
template <typename Body>
void for_each_slice(const Layout& l, int64_t grain_elements, Body&& body) {
  const int64_t blocks = l.inner == 1 ? 1 : (l.inner + kColumns - 1) / kColumns;
  const int64_t items = l.outer * blocks;
  const int64_t per_item = l.size * std::min(l.inner, kColumns);
  const int64_t grain = std::max<int64_t>(1, grain_elements / std::max<int64_t>(per_item, 1));
  parallel_for(items, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t o = item / blocks, c0 = item % blocks * kColumns;
      const int64_t nc = l.inner == 1 ? 1 : std::min(kColumns, l.inner - c0);
      body(o * l.size * l.inner + c0, nc, scratch);
    }
  });
}

}  // namespace

float softmax_row_max(const float* x, int64_t n) { return row_max(x, n); }
double softmax_row_max(const double* x, int64_t n) { return row_max(x, n); }
double softmax_row_exp_sum(const float* x, int64_t n, float shift) {
  return row_exp_sum_only(x, n, shift);
}
double softmax_row_exp_sum(const double* x, int64_t n, double shift) {
  return row_exp_sum_only(x, n, shift);
}

void softmax(const View& out, const View& in, int dim, bool log) {
  const Layout l = layout_of(in, dim, "softmax");
  EMBER_ASSERT(is_contiguous(out), "softmax: the CPU kernel needs a contiguous output");
  if (l.size == 0) return;
  dispatch_any_float(in.dtype, "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in.data);
    T* o = static_cast<T*>(out.data);
    for_each_slice(l, kGrainMath, [&](int64_t at, int64_t nc, std::vector<float>& scratch) {
      if constexpr (kIsHalfLike<T>) {
        const int64_t count = l.size * nc;
        scratch.resize(static_cast<size_t>(2 * count));
        float* xs = scratch.data();
        float* os = xs + count;
        widen_slice(xs, x + at, l.size, l.inner, nc);
        softmax_slice(os, xs, l, nc, nc, log);
        narrow_slice(o + at, os, l.size, l.inner, nc);
      } else {
        softmax_slice(o + at, x + at, l, l.inner, nc, log);
      }
    });
  });
}

void softmax_backward(const View& grad_in, const View& grad_out, const View& out, int dim,
                      bool log) {
  const Layout l = layout_of(out, dim, "softmax_backward");
  EMBER_ASSERT(is_contiguous(grad_in) && is_contiguous(grad_out),
               "softmax_backward: the CPU kernel needs contiguous gradients");
  if (l.size == 0) return;
  dispatch_any_float(out.dtype, "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* gi = static_cast<T*>(grad_in.data);
    const T* g = static_cast<const T*>(grad_out.data);
    const T* y = static_cast<const T*>(out.data);
    const int64_t grain = log ? kGrainMath : kGrainCheap;
    for_each_slice(l, grain, [&](int64_t at, int64_t nc, std::vector<float>& scratch) {
      if constexpr (kIsHalfLike<T>) {
        const int64_t count = l.size * nc;
        scratch.resize(static_cast<size_t>(3 * count));
        float* gs = scratch.data();
        float* ys = gs + count;
        float* is = ys + count;
        widen_slice(gs, g + at, l.size, l.inner, nc);
        widen_slice(ys, y + at, l.size, l.inner, nc);
        softmax_grad_slice(is, gs, ys, l, nc, nc, log);
        narrow_slice(gi + at, is, l.size, l.inner, nc);
      } else {
        softmax_grad_slice(gi + at, g + at, y + at, l, l.inner, nc, log);
      }
    });
  });
}

}  // namespace ember::cpu
