// src/cpu/unary.cpp — elementwise unary ops (UnaryOp) for f32/f64 (f16/bf16 through f32 tiles),
// and logical_not.
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
#include "kernels/elementwise.hpp"

namespace ember::cpu {
namespace {

template <typename T, UnaryOp Op>
inline T apply(T x, T a, T b) {
  return kernels::unary_apply<HostMath, T, Op>(x, a, b);
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
      if constexpr (Op == UnaryOp::pow_scalar) {  // the formula's exact shortcuts, vectorised
        if (a == T(2)) {
          for (int64_t i = 0; i < n; ++i) o[i] = x[i] * x[i];
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

// f16/bf16 (Note [16-bit floats on the CPU]): each run in f32 tiles through the f32 loop.
template <typename T, UnaryOp Op>
void run_unary_wide(const Loop<2>& loop, float a, float b) {
  parallel_loop(loop, kGrainMath, [a, b](char* const* p, const int64_t* s, int64_t n) {
    T* o = reinterpret_cast<T*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    const int64_t so = s[0] / static_cast<int64_t>(sizeof(T));
    const int64_t sx = s[1] / static_cast<int64_t>(sizeof(T));
    float in[kWideTile], res[kWideTile];
    for (int64_t i0 = 0; i0 < n; i0 += kWideTile) {
      const int64_t m = std::min(kWideTile, n - i0);
      for (int64_t j = 0; j < m; ++j) in[j] = static_cast<float>(x[(i0 + j) * sx]);
      unary_contiguous<float, Op>(res, in, m, a, b);
      for (int64_t j = 0; j < m; ++j) o[(i0 + j) * so] = T(res[j]);
    }
  });
}

template <typename T>
void unary_typed(UnaryOp op, const Loop<2>& loop, Compute<T> a, Compute<T> b) {
  const bool known = kernels::visit_unary(op, [&](auto c) {
    if constexpr (kIsHalfLike<T>)
      run_unary_wide<T, decltype(c)::value>(loop, a, b);
    else
      run_unary<T, decltype(c)::value>(loop, a, b);
  });
  EMBER_ASSERT(known, "unary: unhandled op ", static_cast<int>(op));
}

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
    EMBER_ASSERT(out.dtype == DType::boolean, "logical_not: output must be bool (got ",
                 dtype_name(out.dtype), ")");
    logical_not(loop, in.dtype);
    return;
  }
  EMBER_ASSERT(out.dtype == in.dtype, "unary: dtype mismatch");
  dispatch_any_float(in.dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_typed<T>(op, loop, static_cast<Compute<T>>(a), static_cast<Compute<T>>(b));
  });
}

}  // namespace ember::cpu
