// src/kernels/common.hpp — what every shared kernel header needs: EMBER_HD (functions both
// backends compile: __host__ __device__ under nvcc) and dtype dispatch.
//
// The headers in src/kernels/ hold, per op family, the math the CPU (src/cpu) and CUDA
// (src/cuda) backends share: scalar formulas, index arithmetic, reduction plans. A backend
// includes them and adds only its own loops and launches, so the two cannot drift apart.
// Nothing here knows about tensors, autograd or modules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ember/dtype.hpp"
#include "ember/error.hpp"

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__
#else
#define EMBER_HD
#endif

namespace ember::kernels {

/// Note [Float to integer casts]
/// A float converted to an integer dtype (`.to(i32)`, `copy_` into an integer tensor): NaN
/// gives 0, ±inf and values outside the type's range saturate to its ends, fractions
/// truncate toward zero. That is what the GPU's conversion instruction does; C++ leaves it
/// undefined (x86 gave the lowest integer for all of them), as PyTorch does, so ember defines
/// it once here for every backend. u8 goes through i64 (-1.0 is 255, as PyTorch on x86).
template <typename To, typename From>
EMBER_HD inline To float_to_integer(From x) {
  static_assert(std::is_floating_point_v<From> && std::is_integral_v<To>);
  if constexpr (std::is_same_v<To, uint8_t>) {
    return static_cast<uint8_t>(float_to_integer<int64_t>(x));
  } else {
    constexpr double lo = static_cast<double>(std::numeric_limits<To>::min());
    constexpr double hi = -lo;  // 2^31 or 2^63: one past the largest value
    const double v = static_cast<double>(x);
    if (v != v) return To(0);
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  }
}

/// arange's i-th value, start + step·i in f64, on both backends alike: the product is rounded
/// before the sum (never one fused multiply-add, which nvcc and a host compiled for FMA would
/// otherwise make of it), as the step-by-step host loop it replaced computed it.
EMBER_HD inline double arange_value(double start, double step, int64_t i) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(start, __dmul_rn(step, static_cast<double>(i)));
#else
  const volatile double term = step * static_cast<double>(i);
  return start + term;
#endif
}

/// A type carried as a value: dispatch calls f(Tag<T>{}); `typename decltype(tag)::type` is T.
template <typename T>
struct Tag {
  using type = T;
};

/// Calls f(Tag<T>{}) for the C++ type of `t`: `Half` and `BFloat` are the backend's 16-bit
/// float types (ember::Half / BFloat16 on the CPU, __half / __nv_bfloat16 on CUDA), bool for
/// DType::boolean.
template <typename Half, typename BFloat, typename F>
decltype(auto) dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(Tag<float>{});
    case DType::f64: return f(Tag<double>{});
    case DType::f16: return f(Tag<Half>{});
    case DType::bf16: return f(Tag<BFloat>{});
    case DType::i32: return f(Tag<int32_t>{});
    case DType::i64: return f(Tag<int64_t>{});
    case DType::u8: return f(Tag<uint8_t>{});
    case DType::boolean: return f(Tag<bool>{});
  }
  EMBER_ASSERT(false, "unknown dtype ", static_cast<int>(t));
  return f(Tag<float>{});
}

/// f32/f64 only. Ops check the catalogue (supports()) before dispatch, so anything else is an
/// internal error naming `op` and the `backend` ("CPU", "CUDA").
template <typename F>
decltype(auto) dispatch_float(DType t, const char* op, const char* backend, F&& f) {
  if (t == DType::f64) return f(Tag<double>{});
  EMBER_ASSERT(t == DType::f32, op, ": the ", backend, " kernel supports f32 and f64 (got ",
               dtype_name(t), ")");
  return f(Tag<float>{});
}

/// f32/f64/f16/bf16 (`Half`, `BFloat`: the backend's 16-bit types, as in dispatch_all),
/// likewise.
template <typename Half, typename BFloat, typename F>
decltype(auto) dispatch_any_float(DType t, const char* op, const char* backend, F&& f) {
  switch (t) {
    case DType::f32: return f(Tag<float>{});
    case DType::f64: return f(Tag<double>{});
    case DType::f16: return f(Tag<Half>{});
    case DType::bf16: return f(Tag<BFloat>{});
    default: break;
  }
  EMBER_ASSERT(false, op, ": the ", backend, " kernel needs a floating-point tensor (got ",
               dtype_name(t), ")");
  return f(Tag<float>{});
}

/// f32/f64/i32/i64, likewise.
template <typename F>
decltype(auto) dispatch_numeric(DType t, const char* op, const char* backend, F&& f) {
  switch (t) {
    case DType::f32: return f(Tag<float>{});
    case DType::f64: return f(Tag<double>{});
    case DType::i32: return f(Tag<int32_t>{});
    case DType::i64: return f(Tag<int64_t>{});
    default: break;
  }
  EMBER_ASSERT(false, op, ": the ", backend, " kernel supports f32, f64, i32 and i64 (got ",
               dtype_name(t), ")");
  return f(Tag<float>{});
}

/// f32/f64/f16/bf16/i32/i64 (`Half`, `BFloat` as in dispatch_all), likewise.
template <typename Half, typename BFloat, typename F>
decltype(auto) dispatch_arithmetic(DType t, const char* op, const char* backend, F&& f) {
  switch (t) {
    case DType::f16: return f(Tag<Half>{});
    case DType::bf16: return f(Tag<BFloat>{});
    default: break;
  }
  return dispatch_numeric(t, op, backend, f);
}

/// Index and label tensors: f(Tag<int32_t>{}) or f(Tag<int64_t>{}); anything else is an
/// error naming `op` and `what` ("index", "target").
template <typename F>
decltype(auto) dispatch_index(DType t, const char* op, const char* what, F&& f) {
  if (t == DType::i32) return f(Tag<int32_t>{});
  EMBER_CHECK(t == DType::i64, op, ": ", what, " dtype ", dtype_name(t), " (expected i64 or i32)");
  return f(Tag<int64_t>{});
}

/// An unsigned integer type of `Bytes` bytes (for kernels that only move elements).
template <size_t Bytes>
using BitsOf = std::conditional_t<
    Bytes == 1, uint8_t,
    std::conditional_t<Bytes == 2, uint16_t, std::conditional_t<Bytes == 4, uint32_t, uint64_t>>>;

/// Calls f(Tag<U>{}) with U the unsigned type of `bytes` bytes (1, 2, 4 or 8).
template <typename F>
decltype(auto) dispatch_bytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f(Tag<uint8_t>{});
    case 2: return f(Tag<uint16_t>{});
    case 4: return f(Tag<uint32_t>{});
    default: break;
  }
  EMBER_ASSERT(bytes == 8, "unexpected element size ", bytes);
  return f(Tag<uint64_t>{});
}

}  // namespace ember::kernels
