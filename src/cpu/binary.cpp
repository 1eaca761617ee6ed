// src/cpu/binary.cpp — elementwise binary ops (BinaryOp).
//
// Arithmetic (add, sub, mul, div, maximum, minimum) for f32/f64/i32/i64, pow for f32/f64,
// f16/bf16 for all of them through f32 tiles; comparisons for those plus u8 and bool, writing bool
// (one byte, 0 or 1). Inputs share a dtype and arrive broadcast to out's shape (stride-0 dims). The
// strided loop (Note [Strided loops]) hands each run of the innermost dim to one of three
// vectorised loops — all contiguous, `a` a broadcast scalar, `b` a broadcast scalar — or to the
// general strided loop. A row broadcast ([m, n] op [n]) is contiguous inside each row.
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]

#include <cmath>
#include <type_traits>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "cpu/vec_math.hpp"
#include "kernels/elementwise.hpp"

namespace ember::cpu {
namespace {

using kernels::is_comparison;
template <typename T, BinaryOp Op>
using ResultOf = kernels::BinaryResult<T, Op>;

template <typename T, BinaryOp Op>
inline ResultOf<T, Op> apply(T a, T b) {
  return kernels::binary_apply<HostMath, T, Op>(a, b);
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
  constexpr bool kMath = Op == BinaryOp::pow || Op == BinaryOp::atan2 || Op == BinaryOp::fmod ||
                         Op == BinaryOp::remainder;
  constexpr int64_t kGrain = kMath ? kGrainMath : kGrainCheap;
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

// f16/bf16 (Note [16-bit floats on the CPU]): each run in f32 tiles through the f32 loop.
template <typename T, BinaryOp Op>
void run_binary_wide(const Loop<3>& loop) {
  using R = ResultOf<T, Op>;
  using RF = ResultOf<float, Op>;
  parallel_loop(loop, kGrainMath, [](char* const* p, const int64_t* s, int64_t n) {
    R* o = reinterpret_cast<R*>(p[0]);
    const T* a = reinterpret_cast<const T*>(p[1]);
    const T* b = reinterpret_cast<const T*>(p[2]);
    const int64_t so = s[0] / static_cast<int64_t>(sizeof(R));
    const int64_t sa = s[1] / static_cast<int64_t>(sizeof(T));
    const int64_t sb = s[2] / static_cast<int64_t>(sizeof(T));
    float fa[kWideTile], fb[kWideTile];
    RF res[kWideTile];
    for (int64_t i0 = 0; i0 < n; i0 += kWideTile) {
      const int64_t m = std::min(kWideTile, n - i0);
      for (int64_t j = 0; j < m; ++j) {
        fa[j] = static_cast<float>(a[(i0 + j) * sa]);
        fb[j] = static_cast<float>(b[(i0 + j) * sb]);
      }
      binary_contiguous<float, Op>(res, fa, fb, m);
      for (int64_t j = 0; j < m; ++j) o[(i0 + j) * so] = R(res[j]);
    }
  });
}

}  // namespace

void add_widened(const View& out, const View& a, const View& b) {
  const int64_t n = out.shape.numel();
  float* o = static_cast<float*>(out.data);
  const float* x = static_cast<const float*>(a.data);
  const auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* y = static_cast<const T*>(b.data);
    parallel_for(n, kGrainCheap, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) o[i] = x[i] + static_cast<float>(y[i]);
    });
  };
  if (b.dtype == DType::bf16)
    run(kernels::Tag<BFloat16>{});
  else
    run(kernels::Tag<Half>{});
}

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
  const Operand ops[3] = {operand(out), operand(a), operand(b)};
  const Loop<3> loop = make_loop(out.shape, ops);
  kernels::dispatch_binary<Half, BFloat16>(op, out, a, b, "CPU", [&](auto tag, auto c) {
    using T = typename decltype(tag)::type;
    if constexpr (kIsHalfLike<T>)
      run_binary_wide<T, decltype(c)::value>(loop);
    else
      run_binary<T, decltype(c)::value>(loop);
  });
}

}  // namespace ember::cpu
