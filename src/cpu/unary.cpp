// src/cpu/unary.cpp — elementwise unary ops (UnaryOp) for f32/f64, and logical_not.
//
// Each op is one scalar function below (PyTorch's formulas, including the derivative
// helpers that backward rules use); run_unary turns it into a flat loop the compiler
// vectorises when both operands are contiguous, and a strided loop otherwise.
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]
#pragma GCC optimize("fp-contract=off")   // Note [Identical clones] (loops.hpp)

#include <cmath>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"

namespace ember::cpu {
namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/√(2π)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // √(2/π)
constexpr double kGeluKappa = 0.044715;

// Stable without a branch: for x << 0 exp(-x) overflows to inf and 1/inf = 0; no
// cancellation happens for either sign.
template <typename T>
inline T sigmoid_of(T x) {
  return T(1) / (T(1) + exp_of(-x));
}

template <typename T>
inline T gelu_tanh_inner(T x) {
  return T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x);
}

template <typename T, UnaryOp Op>
inline T apply(T x, T a, T b) {
  if constexpr (Op == UnaryOp::neg)
    return -x;
  else if constexpr (Op == UnaryOp::abs)
    return std::abs(x);
  else if constexpr (Op == UnaryOp::sqrt)
    return std::sqrt(x);
  else if constexpr (Op == UnaryOp::rsqrt)
    return T(1) / std::sqrt(x);
  else if constexpr (Op == UnaryOp::square)
    return x * x;
  else if constexpr (Op == UnaryOp::exp)
    return exp_of(x);
  else if constexpr (Op == UnaryOp::log)
    return std::log(x);
  else if constexpr (Op == UnaryOp::sign)
    return T((T(0) < x) - (x < T(0)));
  else if constexpr (Op == UnaryOp::relu)
    return x < T(0) ? T(0) : x;
  else if constexpr (Op == UnaryOp::sigmoid)
    return sigmoid_of(x);
  else if constexpr (Op == UnaryOp::tanh)
    return tanh_of(x);
  else if constexpr (Op == UnaryOp::gelu_erf)
    return T(0.5) * x * (T(1) + erf_of(x * T(kSqrt1_2)));
  else if constexpr (Op == UnaryOp::gelu_tanh)
    return T(0.5) * x * (T(1) + tanh_of(gelu_tanh_inner(x)));
  else if constexpr (Op == UnaryOp::silu)
    return x * sigmoid_of(x);
  else if constexpr (Op == UnaryOp::affine)
    return x * a + b;
  else if constexpr (Op == UnaryOp::pow_scalar)
    return std::pow(x, a);
  else if constexpr (Op == UnaryOp::clamp) {
    const T y = x < a ? a : x;  // NaN passes through both comparisons
    return y > b ? b : y;
  } else if constexpr (Op == UnaryOp::relu_grad)
    return x > T(0) ? T(1) : T(0);
  else if constexpr (Op == UnaryOp::gelu_erf_grad) {
    const T cdf = T(0.5) * (T(1) + erf_of(x * T(kSqrt1_2)));
    const T pdf = T(kInvSqrt2Pi) * exp_of(T(-0.5) * x * x);
    return cdf + x * pdf;
  } else if constexpr (Op == UnaryOp::gelu_tanh_grad) {
    const T t = tanh_of(gelu_tanh_inner(x));
    const T inner_grad = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluKappa) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * inner_grad;
  } else if constexpr (Op == UnaryOp::silu_grad) {
    const T s = sigmoid_of(x);
    return s * (T(1) + x * (T(1) - s));
  } else if constexpr (Op == UnaryOp::clamp_mask)
    return (a <= x && x <= b) ? T(1) : T(0);
  else
    static_assert(Op == UnaryOp::neg, "unhandled UnaryOp");
}

// Cheap ops are memory-bound; transcendental ones are worth splitting earlier.
template <UnaryOp Op>
constexpr int64_t grain_of() {
  switch (Op) {
    case UnaryOp::neg:
    case UnaryOp::abs:
    case UnaryOp::square:
    case UnaryOp::sign:
    case UnaryOp::relu:
    case UnaryOp::affine:
    case UnaryOp::clamp:
    case UnaryOp::relu_grad:
    case UnaryOp::clamp_mask: return kGrainCheap;
    default: return kGrainMath;
  }
}

template <typename T, UnaryOp Op>
EMBER_VECTORIZE_WIDE void unary_contiguous(T* __restrict o, const T* __restrict x, int64_t n, T a,
                                           T b) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply<T, Op>(x[i], a, b);
}

// sqrt sets errno for x < 0, and without -fno-math-errno (which GCC ignores in templates
// and target clones) that check keeps sqrt loops scalar: use the SSE2 instructions directly.
template <typename T, bool Reciprocal>
void sqrt_contiguous(T* __restrict o, const T* __restrict x, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    const __m128 one = _mm_set1_ps(1.0f);
    for (; i + 4 <= n; i += 4) {
      __m128 v = _mm_sqrt_ps(_mm_loadu_ps(x + i));
      if constexpr (Reciprocal) v = _mm_div_ps(one, v);
      _mm_storeu_ps(o + i, v);
    }
  } else {
    const __m128d one = _mm_set1_pd(1.0);
    for (; i + 2 <= n; i += 2) {
      __m128d v = _mm_sqrt_pd(_mm_loadu_pd(x + i));
      if constexpr (Reciprocal) v = _mm_div_pd(one, v);
      _mm_storeu_pd(o + i, v);
    }
  }
#endif
  for (; i < n; ++i) o[i] = Reciprocal ? T(1) / std::sqrt(x[i]) : std::sqrt(x[i]);
}

template <typename T, UnaryOp Op>
void run_unary(const Loop<2>& loop, T a, T b) {
  parallel_loop(loop, grain_of<Op>(), [a, b](char* const* p, const int64_t* s, int64_t n) {
    T* __restrict o = reinterpret_cast<T*>(p[0]);
    const T* __restrict x = reinterpret_cast<const T*>(p[1]);
    constexpr int64_t kT = sizeof(T);
    if (s[0] == kT && s[1] == kT) {
      if constexpr (Op == UnaryOp::pow_scalar) {  // exact shortcuts for common exponents
        if (a == T(2)) {
          for (int64_t i = 0; i < n; ++i) o[i] = x[i] * x[i];
          return;
        }
        if (a == T(1)) {
          for (int64_t i = 0; i < n; ++i) o[i] = x[i];
          return;
        }
        if (a == T(-1)) {
          for (int64_t i = 0; i < n; ++i) o[i] = T(1) / x[i];
          return;
        }
      }
      if constexpr (Op == UnaryOp::sqrt || Op == UnaryOp::rsqrt) {
        sqrt_contiguous<T, Op == UnaryOp::rsqrt>(o, x, n);
      } else {
        unary_contiguous<T, Op>(o, x, n, a, b);
      }
    } else {
      const int64_t so = s[0] / kT, sx = s[1] / kT;
      for (int64_t i = 0; i < n; ++i) o[i * so] = apply<T, Op>(x[i * sx], a, b);
    }
  });
}

template <typename T>
void unary_typed(UnaryOp op, const Loop<2>& loop, T a, T b) {
  switch (op) {
#define EMBER_UNARY_CASE(name) \
  case UnaryOp::name: return run_unary<T, UnaryOp::name>(loop, a, b);
    EMBER_UNARY_CASE(neg)
    EMBER_UNARY_CASE(abs)
    EMBER_UNARY_CASE(sqrt)
    EMBER_UNARY_CASE(rsqrt)
    EMBER_UNARY_CASE(square)
    EMBER_UNARY_CASE(exp)
    EMBER_UNARY_CASE(log)
    EMBER_UNARY_CASE(sign)
    EMBER_UNARY_CASE(relu)
    EMBER_UNARY_CASE(sigmoid)
    EMBER_UNARY_CASE(tanh)
    EMBER_UNARY_CASE(gelu_erf)
    EMBER_UNARY_CASE(gelu_tanh)
    EMBER_UNARY_CASE(silu)
    EMBER_UNARY_CASE(affine)
    EMBER_UNARY_CASE(pow_scalar)
    EMBER_UNARY_CASE(clamp)
    EMBER_UNARY_CASE(relu_grad)
    EMBER_UNARY_CASE(gelu_erf_grad)
    EMBER_UNARY_CASE(gelu_tanh_grad)
    EMBER_UNARY_CASE(silu_grad)
    EMBER_UNARY_CASE(clamp_mask)
#undef EMBER_UNARY_CASE
    case UnaryOp::logical_not:
    case UnaryOp::count: break;
  }
  EMBER_ASSERT(false, "unary: unhandled op ", static_cast<int>(op));
}
static_assert(static_cast<int>(UnaryOp::count) == 23, "a UnaryOp was added: handle it here");

void logical_not(const Loop<2>& loop, DType in_dtype) {
  dispatch_all(in_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    parallel_loop(loop, kGrainCheap, [](char* const* p, const int64_t* s, int64_t n) {
      bool* __restrict o = reinterpret_cast<bool*>(p[0]);
      const T* __restrict x = reinterpret_cast<const T*>(p[1]);
      const int64_t sx = s[1] / static_cast<int64_t>(sizeof(T));
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = !cast<bool>(x[i * sx]);
    });
  });
}

}  // namespace

void unary(UnaryOp op, const View& out, const View& in, double a, double b) {
  const Operand ops[2] = {operand(out), operand(in)};
  const Loop<2> loop = make_loop(out.shape, ops);
  if (op == UnaryOp::logical_not) {
    EMBER_CHECK(out.dtype == DType::boolean, "logical_not: output must be bool (got ",
                dtype_name(out.dtype), ")");
    logical_not(loop, in.dtype);
    return;
  }
  EMBER_ASSERT(out.dtype == in.dtype, "unary: dtype mismatch");
  dispatch_float(in.dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_typed<T>(op, loop, static_cast<T>(a), static_cast<T>(b));
  });
}

}  // namespace ember::cpu
