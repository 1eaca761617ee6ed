// src/cpu/sort.cpp — sort (the order of each row) and the inclusive scans (cumsum, cumprod,
// cummax, cummin) on the CPU.
//
// sort: every row is one work item, ordered by std::stable_sort with the comparator of
// Note [Sort order] (src/kernels/sort.hpp), so ties keep their input order exactly as on a
// GPU. Scans walk each [outer, ·, inner] line of the scanned dim in order, one line at a time
// per thread, accumulating f32 in f64 (kernels::ScanAcc).
#include "kernels/sort.hpp"

#include <algorithm>
#include <numeric>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {

void sort(const View& indices, const View& in, bool descending) {
  int64_t rows = 0, n = 0;
  kernels::sort_rows("CPU", indices, in, rows, n);
  if (rows == 0 || n == 0) return;
  dispatch_numeric(in.dtype, "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in.data);
    int64_t* idx = static_cast<int64_t*>(indices.data);
    const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(n, 1) / 8);
    parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* row = x + r * n;
        int64_t* out = idx + r * n;
        std::iota(out, out + n, int64_t{0});
        std::stable_sort(out, out + n, [&](int64_t a, int64_t b) {
          return kernels::sorts_before(row[a], a, row[b], b, descending);
        });
      }
    });
  });
}

void scan(ScanOp op, const View& out, const View& indices, const View& in, int dim, bool reverse) {
  const kernels::ScanLayout l = kernels::scan_layout("CPU", op, out, indices, in, dim);
  const bool indexed = op == ScanOp::max || op == ScanOp::min;
  int64_t* ix = indexed ? static_cast<int64_t*>(indices.data) : nullptr;
  dispatch_numeric(in.dtype, "scan", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = static_cast<const T*>(in.data);
    T* y = static_cast<T*>(out.data);
    const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(l.n, 1));
    parallel_for(l.outer * l.inner, grain, [&](int64_t begin, int64_t end) {
      for (int64_t line = begin; line < end; ++line)
        kernels::scan_line(l, op, x, y, ix, line, reverse);
    });
  });
}

}  // namespace ember::cpu
