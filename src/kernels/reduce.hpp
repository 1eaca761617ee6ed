// src/kernels/reduce.hpp — the reduce family's shared math: the reduction plan and the
// reducers, used by src/cpu/reduce.cpp and src/cuda/reduce.cu.
//
// Note [Reduction plan]
// make_plan walks the input from the innermost dim outwards, drops size-1 dims and merges
// neighbours of the same kind (kept or reduced) whose strides allow it, so any reduction
// becomes `outputs` groups of `group` elements each, with the kept and reduced dims listed
// outermost first. A size-0 reduced dim gives group 0: each output is then finish(init).
//
// A reducer is init (may read the output slot: the variance's second pass finds the mean
// there), step (one element at a position of its group), merge (two partial accumulators,
// in either order: ties of arg-reductions go to the smaller position) and finish (the
// accumulator and the group size to the output value). The CPU adds vectorised runs on top.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/backend.hpp"
#include "kernels/common.hpp"

namespace ember::kernels {

// ---- the plan ----

struct ReducePlan {
  int kept = 0, reduced = 0;
  int64_t kept_size[kMaxRank], kept_in[kMaxRank], kept_out[kMaxRank];  // strides: elements
  int64_t red_size[kMaxRank], red_in[kMaxRank];
  int64_t outputs = 1, group = 1;
  bool innermost_reduced = true;
};

/// The plan of reducing `in` into `out` (same rank; reduced dims have size 1 in `out`).
inline ReducePlan make_plan(const backend::View& out, const backend::View& in) {
  EMBER_ASSERT(out.shape.size() == in.shape.size(), "reduce: out must keep in's rank (got ",
               out.shape.size(), " and ", in.shape.size(), ")");
  struct Dim {
    int64_t size, in_stride, out_stride;
    bool reduced;
  };
  Dim dims[kMaxRank];
  int n = 0;
  for (int d = in.shape.size() - 1; d >= 0; --d) {
    const int64_t size = in.shape[d];
    if (size == 1) continue;
    const bool reduced = out.shape[d] == 1;
    const int64_t out_stride = reduced ? 0 : out.strides[d];
    if (n > 0 && dims[n - 1].reduced == reduced &&
        in.strides[d] == dims[n - 1].in_stride * dims[n - 1].size &&
        out_stride == dims[n - 1].out_stride * dims[n - 1].size) {
      dims[n - 1].size *= size;
      continue;
    }
    dims[n++] = {size, in.strides[d], out_stride, reduced};
  }
  ReducePlan plan;
  plan.innermost_reduced = n == 0 || dims[0].reduced;
  for (int i = n - 1; i >= 0; --i) {  // back to outermost-first order
    if (dims[i].reduced) {
      plan.red_size[plan.reduced] = dims[i].size;
      plan.red_in[plan.reduced++] = dims[i].in_stride;
      plan.group *= dims[i].size;
    } else {
      plan.kept_size[plan.kept] = dims[i].size;
      plan.kept_in[plan.kept] = dims[i].in_stride;
      plan.kept_out[plan.kept++] = dims[i].out_stride;
      plan.outputs *= dims[i].size;
    }
  }
  if (plan.kept == 0) plan.innermost_reduced = true;
  return plan;
}

/// The input and output offsets (elements) of output `o`'s group.
EMBER_HD inline void kept_offsets(const ReducePlan& p, int64_t o, int64_t& in_off,
                                  int64_t& out_off) {
  in_off = out_off = 0;
  for (int d = p.kept - 1; d >= 0; --d) {
    const int64_t idx = o % p.kept_size[d];
    o /= p.kept_size[d];
    in_off += idx * p.kept_in[d];
    out_off += idx * p.kept_out[d];
  }
}

/// The input offset of position `pos` of a group, from the group's start.
EMBER_HD inline int64_t reduced_offset(const ReducePlan& p, int64_t pos) {
  if (p.reduced == 1) return pos * p.red_in[0];
  int64_t off = 0;
  for (int d = p.reduced - 1; d >= 0; --d) {
    off += pos % p.red_size[d] * p.red_in[d];
    pos /= p.red_size[d];
  }
  return off;
}

// ---- accumulation ----

/// Sums and products accumulate in f64 for floats (the 16-bit ones too) and i64 for integers.
template <typename T>
using SumAcc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

/// The type max/min/argmax/argmin compare in: f32 for the backends' 16-bit float classes
/// (Note [16-bit floats on the CPU]), T itself for the built-in types.
template <typename T>
using ExtremeValue = std::conditional_t<std::is_arithmetic_v<T>, T, float>;

// Integer sums and products wrap (two's complement) like PyTorch's instead of being UB.
template <typename A>
EMBER_HD inline A add_acc(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
  else
    return a + b;
}
template <typename A>
EMBER_HD inline A mul_acc(A a, A b) {
  if constexpr (std::is_integral_v<A>)
    return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    return a * b;
}

/// max / min in which a NaN in either operand wins.
template <typename T>
EMBER_HD inline T max_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return (b > a || b != b) ? b : a;
  else
    return b > a ? b : a;
}
template <typename T>
EMBER_HD inline T min_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    return (b < a || b != b) ? b : a;
  else
    return b < a ? b : a;
}

// ---- reducers ----

template <typename T, bool Mean>
struct SumReducer {
  using Acc = SumAcc<T>;
  using Out = T;
  EMBER_HD Acc init(const Out*) const { return Acc(0); }
  EMBER_HD void step(Acc& a, T x, int64_t) const { a = add_acc(a, static_cast<Acc>(x)); }
  EMBER_HD void merge(Acc& a, const Acc& b) const { a = add_acc(a, b); }
  EMBER_HD Out finish(const Acc& a, int64_t count) const {
    if constexpr (Mean)
      return static_cast<Out>(a / static_cast<Acc>(count));
    else
      return static_cast<Out>(a);
  }
};

template <typename T>
struct ProdReducer {
  using Acc = SumAcc<T>;
  using Out = T;
  EMBER_HD Acc init(const Out*) const { return Acc(1); }
  EMBER_HD void step(Acc& a, T x, int64_t) const { a = mul_acc(a, static_cast<Acc>(x)); }
  EMBER_HD void merge(Acc& a, const Acc& b) const { a = mul_acc(a, b); }
  EMBER_HD Out finish(const Acc& a, int64_t) const { return static_cast<Out>(a); }
};

template <typename T, bool Max>
struct ExtremeReducer {
  using Acc = ExtremeValue<T>;
  using Out = T;
  EMBER_HD static Acc start() {
    if constexpr (std::is_same_v<Acc, float>)
      return Max ? -INFINITY : INFINITY;
    else if constexpr (std::is_same_v<Acc, double>)
      return Max ? -static_cast<double>(INFINITY) : static_cast<double>(INFINITY);
    else if constexpr (std::is_same_v<Acc, int32_t>)
      return Max ? INT32_MIN : INT32_MAX;
    else
      return Max ? INT64_MIN : INT64_MAX;
  }
  EMBER_HD Acc init(const Out*) const { return start(); }
  EMBER_HD void step(Acc& a, T x, int64_t) const {
    const Acc v = static_cast<Acc>(x);
    a = Max ? max_nan(a, v) : min_nan(a, v);
  }
  EMBER_HD void merge(Acc& a, const Acc& b) const { a = Max ? max_nan(a, b) : min_nan(a, b); }
  EMBER_HD Out finish(const Acc& a, int64_t) const { return static_cast<Out>(a); }
};

template <typename T, bool Max>
struct ArgReducer {
  using Value = ExtremeValue<T>;
  struct Acc {
    Value value;
    int64_t index;  // -1: nothing seen yet
  };
  using Out = int64_t;
  // Strictly better, so ties keep the first index; NaN beats every number.
  EMBER_HD static bool better(Value x, Value best) {
    if constexpr (std::is_floating_point_v<Value>) {
      if (x != x) return best == best;
    }
    return Max ? x > best : x < best;
  }
  EMBER_HD Acc init(const Out*) const { return {Value(0), -1}; }
  EMBER_HD void step(Acc& a, T x, int64_t pos) const {
    const Value v = static_cast<Value>(x);
    if (a.index < 0 || better(v, a.value)) a = {v, pos};
  }
  // Order-free: the better value wins, ties go to the smaller index.
  EMBER_HD void merge(Acc& a, const Acc& b) const {
    if (b.index < 0) return;
    if (a.index < 0 || better(b.value, a.value) || (!better(a.value, b.value) && b.index < a.index))
      a = b;
  }
  EMBER_HD Out finish(const Acc& a, int64_t) const { return a.index < 0 ? 0 : a.index; }
};

// Second variance pass: the output slot already holds the group's mean.
//
// Note [Variance of a constant slice]
// The mean pass rounds (0.1 three times in f64 sums to 0.30000000000000004), so the
// deviations of a constant slice are tiny non-zeros and its variance ~1e-34 instead of 0.
// std's gradient divides by std, which turned that rounding into O(1) noise (or NaN at 0).
// The pass also notes whether every element equals the first: a constant finite slice has
// variance exactly 0, as PyTorch's Welford pass gives. NaN never equals itself and an
// infinite slice keeps inf - inf = NaN, so both stay NaN.
template <typename T>
struct SquareDeviationReducer {
  struct Acc {
    double sum;
    double mean;
    double first;    // the first element seen (valid when seen)
    int32_t seen;    // any element seen
    int32_t differ;  // an element differs from `first`
  };
  using Out = T;
  int64_t correction;
  EMBER_HD Acc init(const Out* out) const { return {0.0, static_cast<double>(*out), 0.0, 0, 0}; }
  EMBER_HD static void note(Acc& a, double x) {
    if (!a.seen) {
      a.first = x;
      a.seen = 1;
    } else if (x != a.first) {
      a.differ = 1;
    }
  }
  EMBER_HD void step(Acc& a, T x, int64_t) const {
    const double v = static_cast<double>(x);
    const double d = v - a.mean;
    a.sum += d * d;
    note(a, v);
  }
  EMBER_HD void merge(Acc& a, const Acc& b) const {
    a.sum += b.sum;
    if (!b.seen) return;
    if (!a.seen) {
      a.first = b.first;
      a.seen = 1;
    } else if (b.first != a.first) {
      a.differ = 1;
    }
    a.differ |= b.differ;
  }
  EMBER_HD Out finish(const Acc& a, int64_t count) const {
    const double dof = count - correction > 0 ? static_cast<double>(count - correction) : 0.0;
    const bool constant = a.seen && !a.differ && a.first - a.first == 0.0;  // finite
    return static_cast<Out>(constant && dof > 0.0 ? 0.0 : a.sum / dof);
  }
};

// ---- from ReduceOp to a reducer ----

namespace detail {
// Only its return type is used (ReducerOf): one branch per ReduceOp.
template <typename T, backend::ReduceOp Op, template <typename, bool> class Sum,
          template <typename> class Prod, template <typename, bool> class Extreme,
          template <typename, bool> class Arg>
auto reducer_of() {
  using backend::ReduceOp;
  if constexpr (Op == ReduceOp::sum)
    return Sum<T, /*mean=*/false>{};
  else if constexpr (Op == ReduceOp::mean)
    return Sum<T, /*mean=*/true>{};
  else if constexpr (Op == ReduceOp::prod)
    return Prod<T>{};
  else if constexpr (Op == ReduceOp::max)
    return Extreme<T, /*max=*/true>{};
  else if constexpr (Op == ReduceOp::min)
    return Extreme<T, /*max=*/false>{};
  else if constexpr (Op == ReduceOp::argmax)
    return Arg<T, /*max=*/true>{};
  else {
    static_assert(Op == ReduceOp::argmin, "a ReduceOp without a reducer");
    return Arg<T, /*max=*/false>{};
  }
}
}  // namespace detail

/// The reducer of `Op` on T, built from the given templates (a backend passes its own, which
/// extend the ones above with vectorised runs).
template <typename T, backend::ReduceOp Op, template <typename, bool> class Sum,
          template <typename> class Prod, template <typename, bool> class Extreme,
          template <typename, bool> class Arg>
using ReducerOf = decltype(detail::reducer_of<T, Op, Sum, Prod, Extreme, Arg>());

/// Calls f(std::integral_constant<ReduceOp, op>{}) when `op` applies to T (mean: floating T
/// only); false otherwise.
template <typename T, typename F>
bool visit_reduce(backend::ReduceOp op, F&& f) {
  using backend::ReduceOp;
  switch (op) {
    case ReduceOp::sum: f(std::integral_constant<ReduceOp, ReduceOp::sum>{}); return true;
    case ReduceOp::mean:
      if constexpr (!std::is_integral_v<T>) {
        f(std::integral_constant<ReduceOp, ReduceOp::mean>{});
        return true;
      }
      return false;
    case ReduceOp::max: f(std::integral_constant<ReduceOp, ReduceOp::max>{}); return true;
    case ReduceOp::min: f(std::integral_constant<ReduceOp, ReduceOp::min>{}); return true;
    case ReduceOp::prod: f(std::integral_constant<ReduceOp, ReduceOp::prod>{}); return true;
    case ReduceOp::argmax: f(std::integral_constant<ReduceOp, ReduceOp::argmax>{}); return true;
    case ReduceOp::argmin: f(std::integral_constant<ReduceOp, ReduceOp::argmin>{}); return true;
    case ReduceOp::count: break;
  }
  return false;
}
static_assert(static_cast<int>(backend::ReduceOp::count) == 7,
              "a ReduceOp was added: handle it here");

/// The reduce slot of both backends up to its loop: checks the views (internal: the op
/// checked them), then calls run(reducer, Tag<T>{}) with the backend's reducer of `op`
/// (built from its Sum, Prod, Extreme and Arg templates) on `in`'s type T.
/// `Half` and `BFloat` are the backend's 16-bit float types, as in dispatch_all.
template <typename Half, typename BFloat, template <typename, bool> class Sum,
          template <typename> class Prod, template <typename, bool> class Extreme,
          template <typename, bool> class Arg, typename Run>
void dispatch_reduce(backend::ReduceOp op, const backend::View& out, const backend::View& in,
                     const char* backend, Run&& run) {
  using backend::ReduceOp;
  if (op == ReduceOp::argmax || op == ReduceOp::argmin) {
    int reduced = 0;
    for (int d = 0; d < in.shape.size(); ++d)
      reduced += (in.shape[d] != 1 && out.shape[d] == 1) ? 1 : 0;
    EMBER_ASSERT(reduced <= 1, "reduce: argmax/argmin reduce exactly one dim (got ", reduced, ")");
    EMBER_ASSERT(out.dtype == DType::i64, "reduce: argmax/argmin write i64");
  } else {
    EMBER_ASSERT(out.dtype == in.dtype, "reduce: unexpected output dtype ", dtype_name(out.dtype));
  }
  dispatch_arithmetic<Half, BFloat>(in.dtype, "reduce", backend, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool known = visit_reduce<T>(
        op, [&](auto c) { run(ReducerOf<T, decltype(c)::value, Sum, Prod, Extreme, Arg>{}, tag); });
    EMBER_ASSERT(known, "reduce: mean supports floats only (got ", dtype_name(in.dtype), ")");
  });
}

}  // namespace ember::kernels
