// src/kernels/sort.hpp — the order and the scans both backends share (src/cpu/sort.cpp,
// src/cuda/sort.cu): which element of a row sorts first, the order-preserving integer key
// the GPU's radix sort uses, and the combine step of each inclusive scan.
//
// Note [Sort order]
// Rows sort by value with NaN above +inf (PyTorch's order: NaN last ascending, first
// descending); equal values, -0.0 and +0.0 included, keep their input order in both
// directions (a stable sort), so every backend and every algorithm returns the same indices.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backend/backend.hpp"
#include "kernels/common.hpp"

namespace ember::kernels {

template <typename T>
EMBER_HD inline bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return v != v;
  else
    return false;
}

/// a < b in the sort order of values (NaN greatest, NaNs equal among themselves).
template <typename T>
EMBER_HD inline bool value_less(T a, T b) {
  if (is_nan_value(a)) return false;
  if (is_nan_value(b)) return true;
  return a < b;
}

/// Whether element (a, ia) goes before (b, ib) in a row sorted ascending or descending
/// (Note [Sort order]): by value, ties by input position.
template <typename T>
EMBER_HD inline bool sorts_before(T a, int64_t ia, T b, int64_t ib, bool descending) {
  if (descending ? value_less(b, a) : value_less(a, b)) return true;
  if (descending ? value_less(a, b) : value_less(b, a)) return false;
  return ia < ib;
}

/// The unsigned key of the radix sort: ascending key order is the ascending value order of
/// Note [Sort order] (NaN greatest, -0.0 equal to +0.0); `descending` inverts it.
template <typename T>
using SortKey = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

template <typename T>
EMBER_HD inline SortKey<T> sort_key(T v, bool descending) {
  using K = SortKey<T>;
  constexpr K kSign = K(1) << (sizeof(K) * 8 - 1);
  K bits;
  if constexpr (std::is_floating_point_v<T>) {
    if (v != v) return descending ? K(0) : ~K(0);
    if (v == T(0)) v = T(0);  // -0.0 sorts with +0.0
    memcpy(&bits, &v, sizeof(K));
    bits = (bits & kSign) ? ~bits : (bits | kSign);
  } else {
    bits = static_cast<K>(v) ^ kSign;
  }
  return descending ? ~bits : bits;
}

// ---- scans (cumsum, cumprod, cummax, cummin, logcumsumexp) ----

/// The running state of a scan: its value so far and, for cummax/cummin, the position it
/// came from. Sums and products of f32 run in f64.
template <typename T>
using ScanAcc = std::conditional_t<std::is_same_v<T, float>, double, T>;

template <typename Acc>
struct ScanState {
  Acc value;
  int64_t index;
};

/// The state after `s` when the next element is `x` at `i` (`first`: x starts the scan).
/// cummax/cummin take the latest of equal extremes and the latest NaN, as PyTorch.
template <typename Acc>
EMBER_HD inline ScanState<Acc> scan_step(backend::ScanOp op, ScanState<Acc> s, Acc x, int64_t i,
                                         bool first) {
  using backend::ScanOp;
  if (first) return {x, i};
  switch (op) {
    case ScanOp::sum: return {s.value + x, i};
    case ScanOp::prod: return {s.value * x, i};
    case ScanOp::logaddexp:
      // log(e^a + e^b) = max + log1p(e^(min - max)): never exp of a large value; NaN spreads,
      // -inf with -inf stays -inf. Floats only (their Acc is double); the op refuses integers.
      if constexpr (std::is_floating_point_v<Acc>) {
        if (is_nan_value(s.value) || is_nan_value(x)) return {s.value + x, i};
        const Acc hi = s.value > x ? s.value : x, lo = s.value > x ? x : s.value;
        if (lo == hi) return {hi + Acc(0.6931471805599453), i};  // ±inf pairs, equal values
        return {hi + ::log1p(::exp(lo - hi)), i};
      } else {
        return s;
      }
    case ScanOp::max:
      return (is_nan_value(x) || (!is_nan_value(s.value) && x >= s.value)) ? ScanState<Acc>{x, i}
                                                                           : s;
    default:  // ScanOp::min
      return (is_nan_value(x) || (!is_nan_value(s.value) && x <= s.value)) ? ScanState<Acc>{x, i}
                                                                           : s;
  }
}

/// Two partial scans joined, `a` before `b` (associative, for parallel scans).
template <typename Acc>
EMBER_HD inline ScanState<Acc> scan_join(backend::ScanOp op, ScanState<Acc> a, ScanState<Acc> b) {
  return scan_step(op, a, b.value, b.index, false);
}

/// [outer, n, inner] around the scanned dim of a contiguous shape.
struct ScanLayout {
  int64_t outer = 1, n = 1, inner = 1;
};

/// Scans line `line` of [outer, n, inner] in order (from the end when `reverse`): the walk
/// every backend's scan runs per line.
template <typename T>
EMBER_HD inline void scan_line(const ScanLayout& l, backend::ScanOp op, const T* in, T* out,
                               int64_t* indices, int64_t line, bool reverse) {
  using Acc = ScanAcc<T>;
  const int64_t base = (line / l.inner) * l.n * l.inner + line % l.inner;
  ScanState<Acc> s{Acc(0), 0};
  for (int64_t k = 0; k < l.n; ++k) {
    const int64_t i = reverse ? l.n - 1 - k : k;
    const int64_t at = base + i * l.inner;
    s = scan_step(op, s, static_cast<Acc>(in[at]), i, k == 0);
    out[at] = static_cast<T>(s.value);
    if (indices) indices[at] = s.index;
  }
}

/// What the scan slot of both backends assumes (the op checked it) and its layout.
inline ScanLayout scan_layout(const char* backend, backend::ScanOp op, const backend::View& out,
                              const backend::View& indices, const backend::View& in, int dim) {
  using backend::ScanOp;
  EMBER_ASSERT(backend::is_contiguous(out) && backend::is_contiguous(in) && out.dtype == in.dtype &&
                   out.shape == in.shape && dim >= 0 && dim < in.shape.size(),
               "scan (", backend, "): operands must be contiguous, of one dtype and shape");
  const bool indexed = op == ScanOp::max || op == ScanOp::min;
  EMBER_ASSERT(!indexed || (indices.data && indices.dtype == DType::i64 &&
                            backend::is_contiguous(indices) && indices.shape == in.shape),
               "scan (", backend, "): cummax/cummin need a contiguous i64 indices view");
  ScanLayout l;
  for (int d = 0; d < dim; ++d) l.outer *= in.shape[d];
  l.n = in.shape[dim];
  for (int d = dim + 1; d < in.shape.size(); ++d) l.inner *= in.shape[d];
  return l;
}

/// Rows and row length of the sort slot's contiguous `in` (sorted along its last dim).
inline void sort_rows(const char* backend, const backend::View& indices, const backend::View& in,
                      int64_t& rows, int64_t& n) {
  EMBER_ASSERT(backend::is_contiguous(in) && backend::is_contiguous(indices) &&
                   indices.dtype == DType::i64 && indices.shape == in.shape && in.shape.size() > 0,
               "sort (", backend, "): operands must be contiguous, indices i64 of in's shape");
  n = in.shape[in.shape.size() - 1];
  rows = n ? in.numel() / n : 0;
}

}  // namespace ember::kernels
