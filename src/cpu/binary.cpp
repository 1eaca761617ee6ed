// src/cpu/binary.cpp — elementwise binary ops (BinaryOp).
//
// Arithmetic (add, sub, mul, div, maximum, minimum) for f32/f64/i32/i64, pow for f32/f64,
// comparisons for those plus u8 and bool, writing bool (one byte, 0 or 1). Inputs share a
// dtype and arrive broadcast to out's shape (stride-0 dims). The strided loop
// (Note [Strided loops]) hands each run of the innermost dim to one of three vectorised
// loops — all contiguous, `a` a broadcast scalar, `b` a broadcast scalar — or to the
// general strided loop. A row broadcast ([m, n] op [n]) is contiguous inside each row.
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]

#include <cmath>
#include <type_traits>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {
namespace {

constexpr bool is_comparison(BinaryOp op) {
  return op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt || op == BinaryOp::le ||
         op == BinaryOp::gt || op == BinaryOp::ge;
}

template <typename T, BinaryOp Op>
using ResultOf = std::conditional_t<is_comparison(Op), bool, T>;

// Integer + - * wrap around like PyTorch's (two's complement) instead of being UB.
template <typename T>
inline T wrap(T a, T b, BinaryOp op) {
  using U = std::make_unsigned_t<T>;
  const U x = static_cast<U>(a), y = static_cast<U>(b);
  return static_cast<T>(op == BinaryOp::add ? U(x + y) : op == BinaryOp::sub ? U(x - y) : U(x * y));
}

template <typename T, BinaryOp Op>
inline ResultOf<T, Op> apply(T a, T b) {
  constexpr bool kInt = std::is_integral_v<T>;
  if constexpr (Op == BinaryOp::add || Op == BinaryOp::sub || Op == BinaryOp::mul) {
    if constexpr (kInt)
      return wrap(a, b, Op);
    else if constexpr (Op == BinaryOp::add)
      return a + b;
    else if constexpr (Op == BinaryOp::sub)
      return a - b;
    else
      return a * b;
  } else if constexpr (Op == BinaryOp::div) {
    if constexpr (kInt) {
      // Truncating division; x/0 gives 0 and MIN/-1 wraps instead of trapping.
      if (b == 0) return T(0);
      if (b == T(-1)) return wrap(T(0), a, BinaryOp::sub);
      return a / b;
    } else {
      return a / b;
    }
  } else if constexpr (Op == BinaryOp::pow) {
    return std::pow(a, b);
  } else if constexpr (Op == BinaryOp::maximum) {
    if constexpr (kInt)
      return a > b ? a : b;
    else
      return a != a ? a : (a > b ? a : b);  // NaN in either operand propagates
  } else if constexpr (Op == BinaryOp::minimum) {
    if constexpr (kInt)
      return a < b ? a : b;
    else
      return a != a ? a : (a < b ? a : b);
  } else if constexpr (Op == BinaryOp::eq)
    return a == b;
  else if constexpr (Op == BinaryOp::ne)
    return a != b;
  else if constexpr (Op == BinaryOp::lt)
    return a < b;
  else if constexpr (Op == BinaryOp::le)
    return a <= b;
  else if constexpr (Op == BinaryOp::gt)
    return a > b;
  else if constexpr (Op == BinaryOp::ge)
    return a >= b;
  else
    static_assert(Op == BinaryOp::add, "unhandled BinaryOp");
}

template <typename T, BinaryOp Op, typename R = ResultOf<T, Op>>
EMBER_VECTORIZE void binary_contiguous(R* __restrict o, const T* __restrict a,
                                       const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<T, Op>(a[i], b[i]);
}

template <typename T, BinaryOp Op, typename R = ResultOf<T, Op>>
EMBER_VECTORIZE void binary_scalar_a(R* __restrict o, T a, const T* __restrict b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<T, Op>(a, b[i]);
}

template <typename T, BinaryOp Op, typename R = ResultOf<T, Op>>
EMBER_VECTORIZE void binary_scalar_b(R* __restrict o, const T* __restrict a, T b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<T, Op>(a[i], b);
}

template <typename T, BinaryOp Op>
void run_binary(const Loop<3>& loop) {
  using R = ResultOf<T, Op>;
  constexpr int64_t kGrain = Op == BinaryOp::pow ? kGrainMath : kGrainCheap;
  parallel_loop(loop, kGrain, [](char* const* p, const int64_t* s, int64_t n) {
    R* o = reinterpret_cast<R*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    constexpr int64_t kR = sizeof(R), kT = sizeof(T);
    if (s[0] == kR) {
      if (s[1] == kT && s[2] == kT) return binary_contiguous<T, Op>(o, a, b, n);
      if (s[1] == 0 && s[2] == kT) return binary_scalar_a<T, Op>(o, a[0], b, n);
      if (s[1] == kT && s[2] == 0) return binary_scalar_b<T, Op>(o, a, b[0], n);
    }
    const int64_t so = s[0] / kR, sa = s[1] / kT, sb = s[2] / kT;
    for (int64_t i = 0; i < n; ++i) o[i * so] = apply<T, Op>(a[i * sa], b[i * sb]);
  });
}

template <typename T>
void binary_arithmetic(BinaryOp op, const Loop<3>& loop) {
  switch (op) {
    case BinaryOp::add: return run_binary<T, BinaryOp::add>(loop);
    case BinaryOp::sub: return run_binary<T, BinaryOp::sub>(loop);
    case BinaryOp::mul: return run_binary<T, BinaryOp::mul>(loop);
    case BinaryOp::div: return run_binary<T, BinaryOp::div>(loop);
    case BinaryOp::maximum: return run_binary<T, BinaryOp::maximum>(loop);
    case BinaryOp::minimum: return run_binary<T, BinaryOp::minimum>(loop);
    case BinaryOp::pow:
      if constexpr (std::is_floating_point_v<T>) return run_binary<T, BinaryOp::pow>(loop);
      break;
    default: break;
  }
  EMBER_CHECK(false, "binary: pow supports f32 and f64 only");
}

template <typename T>
void binary_comparison(BinaryOp op, const Loop<3>& loop) {
  switch (op) {
    case BinaryOp::eq: return run_binary<T, BinaryOp::eq>(loop);
    case BinaryOp::ne: return run_binary<T, BinaryOp::ne>(loop);
    case BinaryOp::lt: return run_binary<T, BinaryOp::lt>(loop);
    case BinaryOp::le: return run_binary<T, BinaryOp::le>(loop);
    case BinaryOp::gt: return run_binary<T, BinaryOp::gt>(loop);
    case BinaryOp::ge: return run_binary<T, BinaryOp::ge>(loop);
    default: break;
  }
  EMBER_ASSERT(false, "binary: not a comparison ", static_cast<int>(op));
}

}  // namespace

static_assert(static_cast<int>(BinaryOp::count) == 13, "a BinaryOp was added: handle it here");

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
  EMBER_ASSERT(a.dtype == b.dtype, "binary: input dtypes differ");
  const Operand ops[3] = {operand(out), operand(a), operand(b)};
  const Loop<3> loop = make_loop(out.shape, ops);
  if (is_comparison(op)) {
    EMBER_ASSERT(out.dtype == DType::boolean, "binary: comparisons write bool");
    switch (a.dtype) {
      case DType::f32: return binary_comparison<float>(op, loop);
      case DType::f64: return binary_comparison<double>(op, loop);
      case DType::i32: return binary_comparison<int32_t>(op, loop);
      case DType::i64: return binary_comparison<int64_t>(op, loop);
      case DType::u8:
      case DType::boolean: return binary_comparison<uint8_t>(op, loop);
      default: break;
    }
    EMBER_CHECK(false, "binary: comparisons support f32, f64, i32, i64, u8 and bool (got ",
                dtype_name(a.dtype), ")");
  }
  EMBER_ASSERT(out.dtype == a.dtype, "binary: output dtype differs from the inputs'");
  dispatch_numeric(a.dtype, "binary",
                   [&](auto tag) { binary_arithmetic<typename decltype(tag)::type>(op, loop); });
}

}  // namespace ember::cpu
