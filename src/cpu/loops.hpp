// src/cpu/loops.hpp — shared machinery of the CPU kernels: dtype dispatch, casts, and the
// strided loop that walks N operands of one shape.
//
// Note [Strided loops]
// make_loop collapses the operands' common shape: dims of size 1 are dropped and adjacent
// dims merge when every operand's strides allow it (stride[d] == stride[d+1]·size[d+1]).
// Contiguous operands thus become one flat dim, a scalar broadcast (all strides 0) stays
// stride 0, and a row broadcast ([m, n] with [n]) keeps an inner dim that is contiguous for
// both. for_each_range then visits any linear range [begin, end) of the logical
// (row-major) order row by row, calling inner(ptrs, byte_strides, count) with the
// operands' pointers at the start of a run of `count` elements along the innermost dim.
// Inner loops check their byte strides to pick a vectorisable path (all contiguous, one
// operand broadcast) or the general strided one. Because the range is in logical order,
// the linear position is known too (random kernels use it as the element index).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/backend.hpp"
#include "cpu/parallel.hpp"
#include "ember/error.hpp"
#include "kernels/common.hpp"

namespace ember::cpu {

// Note [Identical clones]
// Hot contiguous loops are compiled twice, for AVX2 and for the portable baseline, and the
// loader picks one (GCC function multiversioning); plain C++ loops then use 256-bit vectors.
// Only + - * / and compares are in these loops and neither level has FMA, so both clones
// give bit-identical results. Compute-bound loops (exp, tanh, erf, Philox) are also compiled
// for AVX-512 (x86-64-v4) with EMBER_VECTORIZE_WIDE, which roughly doubles their speed; that
// level has FMA, so a file using it starts with #pragma GCC optimize("fp-contract=off") to
// keep its results identical to the other clones'. Sanitizer builds skip the clones: their
// instrumented ifunc resolvers would run before the sanitizer runtime is initialised.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define EMBER_VECTORIZE __attribute__((target_clones("avx2", "default")))
#define EMBER_VECTORIZE_WIDE __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define EMBER_VECTORIZE
#define EMBER_VECTORIZE_WIDE
#endif

static_assert(sizeof(bool) == 1, "bool tensors are stored as one byte");

// Parallel grains, in elements: below these a kernel runs on the caller alone.
inline constexpr int64_t kGrainCheap = 32768;        // add, copy, fill, compare
inline constexpr int64_t kGrainMath = 4096;          // exp, tanh, erf, pow
inline constexpr int64_t kGrainReduceBlock = 16384;  // fixed block of a full reduction

inline int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int i = 0; i < s.size(); ++i) n *= s[i];
  return n;
}

using backend::is_contiguous;

// ---- dtype dispatch: src/kernels/common.hpp with the host's 16-bit types ----
using kernels::Tag;

/// Calls f(Tag<T>{}) for the C++ type of `t` (bool for DType::boolean).
template <typename F>
decltype(auto) dispatch_all(DType t, F&& f) {
  return kernels::dispatch_all<Half, BFloat16>(t, f);
}
/// f32/f64 only; `op` names the kernel in the error for anything else.
template <typename F>
decltype(auto) dispatch_float(DType t, const char* op, F&& f) {
  return kernels::dispatch_float(t, op, "CPU", f);
}
/// f32/f64 and the 16-bit floats (Half, BFloat16: Note [16-bit floats on the CPU]).
template <typename F>
decltype(auto) dispatch_any_float(DType t, const char* op, F&& f) {
  return kernels::dispatch_any_float<Half, BFloat16>(t, op, "CPU", f);
}
/// f32/f64/i32/i64.
template <typename F>
decltype(auto) dispatch_numeric(DType t, const char* op, F&& f) {
  return kernels::dispatch_numeric(t, op, "CPU", f);
}
/// i32/i64 index or label tensors; `op` and `what` name them in the error.
template <typename F>
decltype(auto) dispatch_index(DType t, const char* op, const char* what, F&& f) {
  return kernels::dispatch_index(t, op, what, f);
}

using kernels::BitsOf;
using kernels::dispatch_bytes;

// ---- casts between element types ----
template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Note [16-bit floats on the CPU]
// f16 and bf16 are computed in f32, as PyTorch's CPU kernels do: a kernel loads a tile of at
// most kWideTile elements into f32 buffers, runs its f32 loop on them and rounds each result
// to the 16-bit type once. Accumulations (sums, GEMM, softmax) stay in f32 or wider across
// tiles, so only the stored result is rounded.
/// The type a kernel computes T in: f32 for the 16-bit floats, T itself otherwise.
template <typename T>
using Compute = std::conditional_t<kIsHalfLike<T>, float, T>;
inline constexpr int64_t kWideTile = 256;

/// dst[i] = src[i] widened to f32 (a 16-bit kernel's f32 copy of a row or tile).
template <typename T>
inline void widen_to_f32(float* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}
/// dst[i] = src[i] rounded once to the 16-bit type T.
template <typename T>
inline void round_from_f32(T* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
}

/// Calls fn(out, in) with typed pointers: for f16/bf16 on f32 copies of the contiguous buffers
/// (`in`: n_in elements, widened; `out`: n_out elements, rounded back once fn returns), for
/// other types on the buffers themselves. For whole-buffer kernels (convolution, pooling).
template <typename T, typename F>
void with_compute_type(void* out, int64_t n_out, const void* in, int64_t n_in, F&& fn) {
  if constexpr (kIsHalfLike<T>) {
    std::vector<float> x(static_cast<size_t>(n_in)), y(static_cast<size_t>(n_out));
    const T* src = static_cast<const T*>(in);
    T* dst = static_cast<T*>(out);
    parallel_for(n_in, kGrainCheap, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) x[i] = static_cast<float>(src[i]);
    });
    fn(y.data(), static_cast<const float*>(x.data()));
    parallel_for(n_out, kGrainCheap, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) dst[i] = T(y[i]);
    });
  } else {
    fn(static_cast<T*>(out), static_cast<const T*>(in));
  }
}

/// Converts like PyTorch's `.to(dtype)`: 16-bit floats go through float, anything to bool is
/// `!= 0`, floats to integers saturate (Note [Float to integer casts] in src/kernels/common.hpp).
template <typename To, typename From>
inline To cast(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (kIsHalfLike<From>) {
    return cast<To>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (kIsHalfLike<To>) {
    return To(static_cast<float>(x));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return kernels::float_to_integer<To>(x);  // Note [Float to integer casts]
  } else {
    return static_cast<To>(x);
  }
}

// ---- strided loops (Note [Strided loops]) ----
struct Operand {
  void* data;
  const int64_t* strides;  // in elements, one per dim of the loop shape
  size_t element_bytes;
};

inline Operand operand(const backend::View& v) {
  return {v.data, v.strides.data(), element_size(v.dtype)};
}

// Only the first `rank` entries of shape/strides are set (left uninitialised otherwise: zeroing
// them costs more than a whole 16-element kernel).
template <int N>
struct Loop {
  int rank = 1;
  int64_t numel = 0;
  int64_t shape[kMaxRank];
  int64_t strides[N][kMaxRank];  // bytes
  char* data[N];
};

/// Collapses `rank` dims of sizes `shape` for N operands (Note [Strided loops]).
template <int N>
Loop<N> make_loop(int rank, const int64_t* shape, const Operand (&ops)[N]) {
  Loop<N> loop;
  for (int k = 0; k < N; ++k) loop.data[k] = static_cast<char*>(ops[k].data);
  loop.numel = 1;
  for (int d = 0; d < rank; ++d) loop.numel *= shape[d];
  // Collapse from the innermost dim outwards into a reversed list.
  int64_t rshape[kMaxRank];
  int64_t rstrides[N][kMaxRank];
  int r = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const int64_t size = shape[d];
    if (size == 1) continue;
    bool merge = r > 0;
    for (int k = 0; k < N && merge; ++k) {
      const int64_t s = ops[k].strides[d] * static_cast<int64_t>(ops[k].element_bytes);
      merge = s == rstrides[k][r - 1] * rshape[r - 1];
    }
    if (merge) {
      rshape[r - 1] *= size;
    } else {
      rshape[r] = size;
      for (int k = 0; k < N; ++k)
        rstrides[k][r] = ops[k].strides[d] * static_cast<int64_t>(ops[k].element_bytes);
      ++r;
    }
  }
  if (r == 0) {  // every dim is 1 (or a scalar): one element
    loop.rank = 1;
    loop.shape[0] = 1;
    for (int k = 0; k < N; ++k) loop.strides[k][0] = 0;
    return loop;
  }
  loop.rank = r;
  for (int i = 0; i < r; ++i) {
    loop.shape[i] = rshape[r - 1 - i];
    for (int k = 0; k < N; ++k) loop.strides[k][i] = rstrides[k][r - 1 - i];
  }
  return loop;
}

template <int N>
Loop<N> make_loop(const Shape& shape, const Operand (&ops)[N]) {
  return make_loop(shape.size(), shape.data(), ops);
}

/// Visits linear positions [begin, end) of `loop` (logical row-major order).
template <int N, typename Inner>
void for_each_range(const Loop<N>& loop, int64_t begin, int64_t end, Inner&& inner) {
  if (begin >= end) return;
  const int last = loop.rank - 1;
  const int64_t row_len = loop.shape[last];
  int64_t idx[kMaxRank];
  int64_t rem = begin;
  for (int d = last; d >= 0; --d) {
    idx[d] = rem % loop.shape[d];
    rem /= loop.shape[d];
  }
  char* row[N];
  int64_t inner_strides[N];
  for (int k = 0; k < N; ++k) {
    row[k] = loop.data[k];
    for (int d = 0; d < last; ++d) row[k] += idx[d] * loop.strides[k][d];
    inner_strides[k] = loop.strides[k][last];
  }
  int64_t col = idx[last];
  int64_t pos = begin;
  for (;;) {
    const int64_t count = std::min(row_len - col, end - pos);
    char* ptrs[N];
    for (int k = 0; k < N; ++k) ptrs[k] = row[k] + col * inner_strides[k];
    inner(ptrs, inner_strides, count);
    pos += count;
    if (pos >= end) return;
    col = 0;
    for (int d = last - 1; d >= 0; --d) {  // next row, carrying into outer dims
      for (int k = 0; k < N; ++k) row[k] += loop.strides[k][d];
      if (++idx[d] < loop.shape[d]) break;
      for (int k = 0; k < N; ++k) row[k] -= loop.shape[d] * loop.strides[k][d];
      idx[d] = 0;
    }
  }
}

/// Runs `inner` over the whole loop, split across threads when numel > grain.
template <int N, typename Inner>
void parallel_loop(const Loop<N>& loop, int64_t grain, Inner&& inner) {
  if (loop.numel <= 0) return;
  parallel_for(loop.numel, grain,
               [&](int64_t begin, int64_t end) { for_each_range(loop, begin, end, inner); });
}

/// Like parallel_loop, but inner also receives the linear position of its first element:
/// inner(ptrs, byte_strides, count, position).
template <int N, typename Inner>
void parallel_loop_indexed(const Loop<N>& loop, int64_t grain, Inner&& inner) {
  if (loop.numel <= 0) return;
  parallel_for(loop.numel, grain, [&](int64_t begin, int64_t end) {
    int64_t position = begin;
    for_each_range(loop, begin, end, [&](char* const* ptrs, const int64_t* strides, int64_t count) {
      inner(ptrs, strides, count, position);
      position += count;
    });
  });
}

}  // namespace ember::cpu
