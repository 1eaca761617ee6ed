// src/cuda/loops.cuh — shared machinery of the CUDA kernels in elementwise.cu, reduce.cu
// and random.cu: dtype dispatch to device types, PyTorch's casts, and the strided geometry
// that maps a linear element index to each operand's offset.
//
// Note [CUDA strided geometry]
// make_geometry drops size-1 dims and merges neighbours whose strides allow it for every
// operand (as the CPU's make_loop), so contiguous operands collapse to one dim and kernels
// take a flat fast path; otherwise each thread turns its row-major index into offsets with
// one div/mod per remaining dim. Strides are in elements and may be 0 (broadcast).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/kernels.cuh"
#include "ember/error.hpp"

namespace ember::cuda {

// ---- dtype dispatch (host; dispatch_float and dispatch_numeric are in common.cuh) ----

/// Calls f(Tag<T>{}) with T the device type of `t` (__half, __nv_bfloat16, bool, ...).
template <typename F>
void dispatch_all(DType t, F&& f) {
  kernels::dispatch_all<__half, __nv_bfloat16>(t, f);
}
/// f32/f64/f16/bf16; `op` names the kernel in the error for anything else.
template <typename F>
void dispatch_any_float(DType t, const char* op, F&& f) {
  kernels::dispatch_any_float<__half, __nv_bfloat16>(t, op, "CUDA", f);
}

// ---- casts (device), as the CPU's cast<To>(From) in src/cpu/loops.hpp ----
template <typename T>
inline constexpr bool kIsHalfLike = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

template <typename T>
__device__ __forceinline__ float half_to_float(T x) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(x);
  else
    return __bfloat162float(x);
}

/// The type a kernel computes T in: f32 for the 16-bit floats (loaded, computed in f32 and
/// rounded once when stored, as the CPU: Note [16-bit floats on the CPU]), T otherwise.
template <typename T>
using Compute = std::conditional_t<kIsHalfLike<T>, float, T>;

template <typename To, typename From>
__device__ __forceinline__ To cast(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (kIsHalfLike<From>) {
    return cast<To>(half_to_float(x));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(static_cast<float>(x));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return kernels::float_to_integer<To>(x);  // Note [Float to integer casts]
  } else {
    return static_cast<To>(x);
  }
}

// ---- strided geometry (Note [CUDA strided geometry]) ----
template <int N>
struct Geometry {
  int rank = 0;
  int64_t numel = 0;
  int64_t size[kMaxRank];
  int64_t stride[N][kMaxRank];
  bool contiguous = true;  // every operand is one flat run with stride 1 (or a scalar: numel 1)
};

/// Geometry of `shape` walked by operands with the given strides (one Shape per operand).
template <int N>
Geometry<N> make_geometry(const Shape& shape, const Shape* const (&strides)[N]) {
  Geometry<N> g;
  g.numel = shape.numel();
  int r = 0;
  int64_t rsize[kMaxRank];
  int64_t rstride[N][kMaxRank];
  for (int d = shape.size() - 1; d >= 0; --d) {  // innermost first
    if (shape[d] == 1) continue;
    bool merge = r > 0;
    for (int k = 0; k < N && merge; ++k)
      merge = (*strides[k])[d] == rstride[k][r - 1] * rsize[r - 1];
    if (merge) {
      rsize[r - 1] *= shape[d];
      continue;
    }
    rsize[r] = shape[d];
    for (int k = 0; k < N; ++k) rstride[k][r] = (*strides[k])[d];
    ++r;
  }
  g.rank = r;
  for (int i = 0; i < r; ++i) {  // back to outermost-first
    g.size[i] = rsize[r - 1 - i];
    for (int k = 0; k < N; ++k) g.stride[k][i] = rstride[k][r - 1 - i];
  }
  g.contiguous = r <= 1;
  for (int k = 0; k < N && r == 1; ++k) g.contiguous = g.contiguous && g.stride[k][0] == 1;
  return g;
}

/// Offsets (elements) of row-major element `i` for every operand.
template <int N>
__device__ __forceinline__ void offsets_of(const Geometry<N>& g, int64_t i, int64_t (&off)[N]) {
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t size = g.size[d];
    const int64_t idx = i % size;
    i /= size;
    for (int k = 0; k < N; ++k) off[k] += idx * g.stride[k][d];
  }
}

// ---- teams of threads (softmax, layer norm): a warp, or a block of kTeam threads, per row ----
inline constexpr int kWarp = 32;

// Sum / max over a team of kTeam threads (a warp, or a block of kTeam threads). Every
// thread of the team gets the result.
template <int kTeam, typename V, typename Op>
__device__ __forceinline__ V team_reduce(V v, Op op) {
#pragma unroll
  for (int delta = kWarp / 2; delta > 0; delta /= 2)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, delta));
  if constexpr (kTeam > kWarp) {
    __shared__ V partial[kTeam / kWarp];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    __syncthreads();  // the previous call's readers are done
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = partial[0];
#pragma unroll
    for (int w = 1; w < kTeam / kWarp; ++w) v = op(v, partial[w]);
  }
  return v;
}

/// The grid for `rows` rows taken by teams of `team` threads (kBlock / team teams a block).
inline unsigned team_grid(int64_t rows, int team) {
  const int64_t per_block = kBlock / team;
  const int64_t blocks = (rows + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

/// The stream of the device `v` lives on (views carry their device: no driver query).
inline cudaStream_t stream_for(const View& v) { return stream(v.device); }

/// Grid-stride loop over [0, n).
#define EMBER_CUDA_KERNEL_LOOP(i, n)                                                     \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

}  // namespace ember::cuda
