// src/cpu/reduce.cpp — reductions (sum, mean, max, min, prod, argmax, argmin) and variance.
//
// `in` is reduced over the dims where out.shape == 1 and in.shape != 1. A plan collapses the
// dims into kept and reduced runs, then one of three drivers runs a Reducer:
//   inner  — the innermost dim is reduced: each output scans its group (rows), in parallel
//            over outputs;
//   outer  — the innermost dim is kept: blocks of kColumns adjacent outputs accumulate
//            row after row (vectorised across columns), in parallel over blocks, or,
//            when there are few blocks, over fixed blocks of rows merged in order;
//   full   — few outputs with large groups: each group is cut into fixed blocks of
//            kGrainReduceBlock elements reduced in parallel and merged in order.
// Every driver visits a group in the same order whatever the thread count, so results are
// deterministic. f32 sums accumulate in f64 (8 lanes, then fixed-size blocks); max/min
// propagate NaN; argmax/argmin keep the first index on ties and treat NaN as the extreme,
// as PyTorch. variance = mean pass, then a pass summing squared deviations from it.
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]

#include "kernels/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {
namespace {

// Independent accumulators in a contiguous run: enough 256-bit chains to hide the add
// latency (16 doubles = 4 chains; 32 floats = 4 chains for max/min).
constexpr int kSumLanes = 16;
constexpr int kExtremeLanes = 32;
constexpr int64_t kColumns =
    1024;  // outputs per block in the outer driver (accumulators stay in L1)

using kernels::add_acc;
using kernels::max_nan;
using kernels::min_nan;
using kernels::mul_acc;
using kernels::SumAcc;

template <typename T, typename A>
EMBER_VECTORIZE A sum_run(const T* __restrict x, int64_t n) {
  A lane[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int j = 0; j < kSumLanes; ++j) lane[j] = add_acc(lane[j], static_cast<A>(x[i + j]));
  for (; i < n; ++i) lane[0] = add_acc(lane[0], static_cast<A>(x[i]));
  A total = A(0);
  for (int j = 0; j < kSumLanes; ++j) total = add_acc(total, lane[j]);
  return total;
}

template <typename T, bool Max>
EMBER_VECTORIZE T extreme_run(const T* __restrict x, int64_t n, T start) {
  T lane[kExtremeLanes];
  for (int j = 0; j < kExtremeLanes; ++j) lane[j] = start;
  int64_t i = 0;
  for (; i + kExtremeLanes <= n; i += kExtremeLanes)
    for (int j = 0; j < kExtremeLanes; ++j)
      lane[j] = Max ? max_nan(lane[j], x[i + j]) : min_nan(lane[j], x[i + j]);
  for (; i < n; ++i) lane[0] = Max ? max_nan(lane[0], x[i]) : min_nan(lane[0], x[i]);
  T total = start;
  for (int j = 0; j < kExtremeLanes; ++j)
    total = Max ? max_nan(total, lane[j]) : min_nan(total, lane[j]);
  return total;
}

// Column blocks (the outer driver): acc[j] op= row[j] for one contiguous row.
template <typename T, typename A>
EMBER_VECTORIZE void sum_columns(A* __restrict acc, const T* __restrict row, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] = add_acc(acc[j], static_cast<A>(row[j]));
}

template <typename T, bool Max>
EMBER_VECTORIZE void extreme_columns(T* __restrict acc, const T* __restrict row, int64_t n) {
  for (int64_t j = 0; j < n; ++j) acc[j] = Max ? max_nan(acc[j], row[j]) : min_nan(acc[j], row[j]);
}

template <typename T>
EMBER_VECTORIZE double square_deviation_run(const T* __restrict x, int64_t n, double mean) {
  double lane[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int j = 0; j < kSumLanes; ++j) {
      const double d = static_cast<double>(x[i + j]) - mean;
      lane[j] += d * d;
    }
  }
  for (; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    lane[0] += d * d;
  }
  double total = 0;
  for (int j = 0; j < kSumLanes; ++j) total += lane[j];
  return total;
}

// Default column step for reducers without a vectorised one.
template <typename Red, typename T>
inline void step_each_column(const Red& red, typename Red::Acc* acc, const T* row, int64_t n,
                             int64_t pos) {
  for (int64_t j = 0; j < n; ++j) red.step(acc[j], row[j], pos);
}

// Whether x[0, n) all equal `value`, in blocks so a varying run stops after its first one.
template <typename T>
bool all_equal_run(const T* __restrict x, int64_t n, double value) {
  constexpr int64_t kBlock = 64;
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t end = std::min(n, i + kBlock);
    bool same = true;
    for (int64_t j = i; j < end; ++j) same &= static_cast<double>(x[j]) == value;
    if (!same) return false;
  }
  return true;
}

// ---- reducers: the shared init / step / merge / finish (src/kernels/reduce.hpp), plus run
// (a contiguous run of one group) and columns (one contiguous row of a block of groups) ----
template <typename T, bool Mean>
struct SumReducer : kernels::SumReducer<T, Mean> {
  using Acc = SumAcc<T>;
  void run(Acc& a, const T* x, int64_t n, int64_t) const { a = add_acc(a, sum_run<T, Acc>(x, n)); }
  void columns(Acc* acc, const T* row, int64_t n, int64_t) const {
    sum_columns<T, Acc>(acc, row, n);
  }
};

template <typename T>
struct ProdReducer : kernels::ProdReducer<T> {
  using Acc = SumAcc<T>;
  void run(Acc& a, const T* x, int64_t n, int64_t) const {
    for (int64_t i = 0; i < n; ++i) a = mul_acc(a, static_cast<Acc>(x[i]));
  }
  void columns(Acc* acc, const T* row, int64_t n, int64_t pos) const {
    step_each_column(*this, acc, row, n, pos);
  }
};

template <typename T, bool Max>
struct ExtremeReducer : kernels::ExtremeReducer<T, Max> {
  using Base = kernels::ExtremeReducer<T, Max>;
  using Acc = typename Base::Acc;  // f32 for the 16-bit floats
  void run(Acc& a, const T* x, int64_t n, int64_t) const {
    if constexpr (kIsHalfLike<T>) {
      for (int64_t i = 0; i < n; ++i) this->step(a, x[i], 0);
    } else {
      const T r = extreme_run<T, Max>(x, n, Base::start());
      a = Max ? max_nan(a, r) : min_nan(a, r);
    }
  }
  void columns(Acc* acc, const T* row, int64_t n, int64_t pos) const {
    if constexpr (kIsHalfLike<T>)
      step_each_column(*this, acc, row, n, pos);
    else
      extreme_columns<T, Max>(acc, row, n);
  }
};

template <typename T, bool Max>
struct ArgReducer : kernels::ArgReducer<T, Max> {
  using Acc = typename kernels::ArgReducer<T, Max>::Acc;
  void run(Acc& a, const T* x, int64_t n, int64_t pos) const {
    for (int64_t i = 0; i < n; ++i) this->step(a, x[i], pos + i);
  }
  void columns(Acc* acc, const T* row, int64_t n, int64_t pos) const {
    step_each_column(*this, acc, row, n, pos);
  }
};

template <typename T>
struct SquareDeviationReducer : kernels::SquareDeviationReducer<T> {
  using Acc = typename kernels::SquareDeviationReducer<T>::Acc;
  void run(Acc& a, const T* x, int64_t n, int64_t) const {
    a.sum += square_deviation_run(x, n, a.mean);
    if (n == 0 || a.differ) return;
    this->note(a, static_cast<double>(x[0]));  // Note [Variance of a constant slice]
    a.differ = !all_equal_run(x, n, a.first);
  }
  void columns(Acc* acc, const T* row, int64_t n, int64_t pos) const {
    step_each_column(*this, acc, row, n, pos);
  }
};

// ---- the plan: src/kernels/reduce.hpp (Note [Reduction plan]) ----
using Plan = kernels::ReducePlan;
using kernels::make_plan;

// Walks a range of kept-dim positions, tracking the in and out offsets (elements).
struct Odometer {
  Odometer(const Plan& p, int n) : plan(p), dims(n) {}
  const Plan& plan;
  int dims;               // how many kept dims (outermost first) it walks
  int64_t idx[kMaxRank];  // set by seek
  int64_t in_off = 0, out_off = 0;

  void seek(int64_t linear) {
    in_off = out_off = 0;
    for (int d = dims - 1; d >= 0; --d) {
      idx[d] = linear % plan.kept_size[d];
      linear /= plan.kept_size[d];
      in_off += idx[d] * plan.kept_in[d];
      out_off += idx[d] * plan.kept_out[d];
    }
  }
  void next() {
    for (int d = dims - 1; d >= 0; --d) {
      in_off += plan.kept_in[d];
      out_off += plan.kept_out[d];
      if (++idx[d] < plan.kept_size[d]) return;
      in_off -= idx[d] * plan.kept_in[d];
      out_off -= idx[d] * plan.kept_out[d];
      idx[d] = 0;
    }
  }
};

// Runs positions [begin, end) of one group (the reduced dims at `base`) into `acc`.
template <typename T, typename Red>
void reduce_group(const Red& red, const Plan& plan, const T* base, typename Red::Acc& acc,
                  int64_t begin, int64_t end) {
  if (plan.reduced == 1 && plan.red_in[0] == 1) {  // one contiguous run
    red.run(acc, base + begin, end - begin, begin);
    return;
  }
  const Operand ops[1] = {{const_cast<T*>(base), plan.red_in, sizeof(T)}};
  const Loop<1> loop = make_loop(plan.reduced, plan.red_size, ops);
  int64_t pos = begin;
  for_each_range(loop, begin, end, [&](char* const* p, const int64_t* s, int64_t n) {
    const T* x = reinterpret_cast<const T*>(p[0]);
    if (s[0] == static_cast<int64_t>(sizeof(T))) {
      red.run(acc, x, n, pos);
    } else {
      const int64_t stride = s[0] / static_cast<int64_t>(sizeof(T));
      for (int64_t i = 0; i < n; ++i) red.step(acc, x[i * stride], pos + i);
    }
    pos += n;
  });
}

// One large group split into fixed blocks reduced in parallel, merged in order.
template <typename T, typename Red>
typename Red::Out reduce_blocked(const Red& red, const Plan& plan, const T* base,
                                 const typename Red::Out* out) {
  using Acc = typename Red::Acc;
  const int64_t group = plan.group;
  const int64_t blocks = (group + kGrainReduceBlock - 1) / kGrainReduceBlock;
  Acc total = red.init(out);
  if (blocks <= 1) {
    reduce_group(red, plan, base, total, 0, group);
    return red.finish(total, group);
  }
  std::vector<Acc> partial(static_cast<size_t>(blocks));
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      Acc acc = red.init(out);
      reduce_group(red, plan, base, acc, b * kGrainReduceBlock,
                   std::min(group, (b + 1) * kGrainReduceBlock));
      partial[static_cast<size_t>(b)] = acc;
    }
  });
  for (const Acc& p : partial) red.merge(total, p);
  return red.finish(total, group);
}

template <typename T, typename Red>
void run_reduce(const Red& red, const View& out_view, const View& in_view) {
  using Out = typename Red::Out;
  EMBER_ASSERT(out_view.dtype == dtype_of<Out>(), "reduce: unexpected output dtype ",
               dtype_name(out_view.dtype));
  const Plan plan = make_plan(out_view, in_view);
  const T* in = static_cast<const T*>(in_view.data);
  Out* out = static_cast<Out*>(out_view.data);
  const int64_t outputs = plan.outputs, group = plan.group;
  if (outputs == 0) return;

  if (plan.innermost_reduced && group >= kGrainReduceBlock && outputs < 4) {  // full
    Odometer od{plan, plan.kept};
    od.seek(0);
    for (int64_t o = 0; o < outputs; ++o, od.next())
      out[od.out_off] = reduce_blocked(red, plan, in + od.in_off, out + od.out_off);
    return;
  }

  if (plan.innermost_reduced) {  // inner: one group per output
    const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(group, 1));
    parallel_for(outputs, grain, [&](int64_t begin, int64_t end) {
      Odometer od{plan, plan.kept};
      od.seek(begin);
      for (int64_t o = begin; o < end; ++o, od.next()) {
        Out* slot = out + od.out_off;
        typename Red::Acc acc = red.init(slot);
        reduce_group(red, plan, in + od.in_off, acc, 0, group);
        *slot = red.finish(acc, group);
      }
    });
    return;
  }

  // outer: the innermost kept dim is walked in blocks of kColumns outputs.
  using Acc = typename Red::Acc;
  const int last = plan.kept - 1;
  const int64_t columns = plan.kept_size[last];
  const int64_t col_in = plan.kept_in[last], col_out = plan.kept_out[last];
  const int64_t col_blocks = (columns + kColumns - 1) / kColumns;
  const int64_t items = outputs / columns * col_blocks;
  const int64_t width = std::min(columns, kColumns);
  const int64_t rows_per_block = std::max<int64_t>(1, kGrainReduceBlock / width);
  const int64_t row_blocks = (group + rows_per_block - 1) / rows_per_block;

  // Accumulates rows [r0, r1) of the groups of one column block into acc[0, nc).
  auto accumulate = [&](const T* base, int64_t nc, Acc* acc, int64_t r0, int64_t r1) {
    const Operand ops[1] = {{const_cast<T*>(base), plan.red_in, sizeof(T)}};
    const Loop<1> rows = make_loop(plan.reduced, plan.red_size, ops);
    int64_t pos = r0;
    for_each_range(rows, r0, r1, [&](char* const* p, const int64_t* s, int64_t n) {
      for (int64_t r = 0; r < n; ++r) {
        const T* row = reinterpret_cast<const T*>(p[0] + r * s[0]);
        if (col_in == 1) {
          red.columns(acc, row, nc, pos + r);
        } else {
          for (int64_t j = 0; j < nc; ++j) red.step(acc[j], row[j * col_in], pos + r);
        }
      }
      pos += n;
    });
  };

  if (items < 4 && row_blocks > 1) {
    // Few column blocks over many rows: the rows are cut into fixed blocks too, reduced in
    // parallel into partial accumulators and merged in order.
    std::vector<Acc> partial(static_cast<size_t>(row_blocks * width));
    Odometer od{plan, last};
    for (int64_t item = 0; item < items; ++item) {
      od.seek(item / col_blocks);
      const int64_t c0 = item % col_blocks * kColumns;
      const int64_t nc = std::min(kColumns, columns - c0);
      Out* slots = out + od.out_off + c0 * col_out;
      const T* base = in + od.in_off + c0 * col_in;
      parallel_for(row_blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          Acc* acc = partial.data() + b * width;
          for (int64_t j = 0; j < nc; ++j) acc[j] = red.init(slots + j * col_out);
          accumulate(base, nc, acc, b * rows_per_block, std::min(group, (b + 1) * rows_per_block));
        }
      });
      for (int64_t b = 1; b < row_blocks; ++b)
        for (int64_t j = 0; j < nc; ++j) red.merge(partial[j], partial[b * width + j]);
      for (int64_t j = 0; j < nc; ++j) slots[j * col_out] = red.finish(partial[j], group);
    }
    return;
  }

  const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(group * width, 1));
  parallel_for(items, grain, [&](int64_t begin, int64_t end) {
    Odometer od{plan, last};
    Acc acc[kColumns];
    for (int64_t item = begin; item < end; ++item) {
      od.seek(item / col_blocks);
      const int64_t c0 = item % col_blocks * kColumns;
      const int64_t nc = std::min(kColumns, columns - c0);
      Out* slots = out + od.out_off + c0 * col_out;
      for (int64_t j = 0; j < nc; ++j) acc[j] = red.init(slots + j * col_out);
      accumulate(in + od.in_off + c0 * col_in, nc, acc, 0, group);
      for (int64_t j = 0; j < nc; ++j) slots[j * col_out] = red.finish(acc[j], group);
    }
  });
}

}  // namespace

using BackendHalf = Half;
using BackendBFloat = BFloat16;
#define EMBER_BACKEND_NAME "CPU"
#include "kernels/reduce_slots.inc"
#undef EMBER_BACKEND_NAME

}  // namespace ember::cpu
