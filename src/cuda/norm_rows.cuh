// src/cuda/norm_rows.cuh — the packs a register row of the norm kernels is loaded and stored
// in (src/cuda/norm.cu, Note [Layer norm on CUDA]), and one row normalised by a warp in the
// register-row kernels' order, for a kernel that normalises its input on the fly (the
// few-rows product after a norm: Note [A norm in front of a few rows] in src/cuda/gemv.cu).
#pragma once

#include "cuda/loops.cuh"
#include "kernels/norm.hpp"

namespace ember::cuda {
namespace {

/// Elements per pack of a register row: 16 bytes of the compute type.
template <typename T>
constexpr int kPackElems = static_cast<int>(16 / sizeof(Compute<T>));

struct SumF64 {
  __device__ double operator()(double a, double b) const { return a + b; }
};

// V elements of T, loaded and stored as one access of sizeof(T)·V bytes.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p, int idx) {
  return reinterpret_cast<const Pack<T, V>*>(p)[idx];
}
template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, int idx, const Pack<T, V>& v) {
  reinterpret_cast<Pack<T, V>*>(p)[idx] = v;
}

// Pack idx of p, each element cast to C.
template <typename C, typename T, int V>
__device__ __forceinline__ Pack<C, V> load_pack_as(const T* p, int idx) {
  const Pack<T, V> raw = load_pack<T, V>(p, idx);
  Pack<C, V> out;
#pragma unroll
  for (int k = 0; k < V; ++k) out.v[k] = cast<C>(raw.v[k]);
  return out;
}

// A pack of ones (an absent weight) or zeros (an absent bias).
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> filled(T value) {
  Pack<T, V> p;
#pragma unroll
  for (int k = 0; k < V; ++k) p.v[k] = value;
  return p;
}

// Pack idx of a weight or bias (null: `absent`, 1 or 0), as C.
template <typename C, typename P, int V>
__device__ __forceinline__ Pack<C, V> param_pack(const P* p, int idx, C absent) {
  return p ? load_pack_as<C, P, V>(p, idx) : filled<C, V>(absent);
}

// Row xr of n values (n a multiple of V) normalised by the 32 lanes of one warp into yr, T
// rounded once, in exactly the order layer_norm_forward_rows_kernel computes a row: lane `lane`
// takes packs lane, lane + 32, ...; the sums of x and of squared deviations run in f64 in pack
// order and are reduced across the warp; mean (0 for rms_norm) and rstd are rounded to C, and
// each element is x̂·w + b (rms: x̂·w) in C. So yr holds the bits the norm kernel writes.
template <kernels::NormKind kKind, typename T, typename P, int V>
__device__ inline void normalize_row_by_warp(T* yr, const T* xr, const P* w, const P* b, int n,
                                             double eps, int lane) {
  using C = Compute<T>;
  const int nv = n / V;
  double s = 0;
  if constexpr (kKind == kernels::NormKind::layer) {
    for (int idx = lane; idx < nv; idx += kWarp) {
      const Pack<C, V> xv = load_pack_as<C, T, V>(xr, idx);
#pragma unroll
      for (int k = 0; k < V; ++k) s += static_cast<double>(xv.v[k]);
    }
  }
  double m = 0;
  if constexpr (kKind == kernels::NormKind::layer)
    m = team_reduce<kWarp>(s, SumF64{}) / static_cast<double>(n);
  double q = 0;
  for (int idx = lane; idx < nv; idx += kWarp) {
    const Pack<C, V> xv = load_pack_as<C, T, V>(xr, idx);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const double d = static_cast<double>(xv.v[k]) - m;
      q += d * d;
    }
  }
  q = team_reduce<kWarp>(q, SumF64{});
  const C mt = static_cast<C>(m);
  const C rt = static_cast<C>(kernels::layer_norm_rstd(q, n, eps));
  for (int idx = lane; idx < nv; idx += kWarp) {
    const Pack<C, V> xv = load_pack_as<C, T, V>(xr, idx);
    const Pack<C, V> wv = param_pack<C, P, V>(w, idx, C(1));
    const Pack<C, V> bv = param_pack<C, P, V>(b, idx, C(0));
    Pack<T, V> o;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const C h = kernels::layer_norm_normalized(xv.v[k], mt, rt);
      if constexpr (kKind == kernels::NormKind::layer)
        o.v[k] = cast<T>(kernels::layer_norm_affine(h, wv.v[k], bv.v[k]));
      else
        o.v[k] = cast<T>(kernels::rms_norm_scale(h, wv.v[k]));
    }
    store_pack<T, V>(yr, idx, o);
  }
}

}  // namespace
}  // namespace ember::cuda
