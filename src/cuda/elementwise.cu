// src/cuda/elementwise.cu — fill, copy (with casts), unary, binary, where and the GEMM bias
// fallback on CUDA, with the CPU kernels' dtype coverage and formulas (src/cpu/unary.cpp,
// binary.cpp, elementwise.cpp).
//
// Every kernel is a grid-stride loop over the output's elements. When all operands are
// contiguous (Note [CUDA strided geometry], loops.cuh) the loop is flat, and same-size
// unary/binary ops whose pointers are 16-byte aligned load and store kPack-wide packs;
// otherwise each element's offsets come from the collapsed geometry. Inputs arrive broadcast
// to out's shape (stride-0 dims), as the backend contract says.
#include <cmath>

#include "cuda/device_math.cuh"
#include "cuda/loops.cuh"
#include "kernels/elementwise.hpp"

namespace ember::cuda {
namespace {

// The shared formulas, computed in Compute<T> (f32 for the 16-bit floats).
template <typename T, UnaryOp Op>
__device__ __forceinline__ T unary_apply(T x, Compute<T> a, Compute<T> b) {
  using C = Compute<T>;
  return cast<T>(kernels::unary_apply<DeviceMath, C, Op>(cast<C>(x), a, b));
}

template <typename T, BinaryOp Op>
__device__ __forceinline__ kernels::BinaryResult<T, Op> binary_apply(T a, T b) {
  using C = Compute<T>;
  return cast<kernels::BinaryResult<T, Op>>(
      kernels::binary_apply<DeviceMath, C, Op>(cast<C>(a), cast<C>(b)));
}

template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename... P>
bool aligned16(const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

// ---- fill / copy / where ----
template <typename T>
__global__ void fill_kernel(Geometry<1> g, T* out, T value) {
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    if (g.contiguous) {
      out[i] = value;
    } else {
      int64_t off[1];
      offsets_of(g, i, off);
      out[off[0]] = value;
    }
  }
}

template <typename To, typename From>
__global__ void copy_kernel(Geometry<2> g, To* out, const From* in) {
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    if (g.contiguous) {
      out[i] = cast<To>(in[i]);
    } else {
      int64_t off[2];
      offsets_of(g, i, off);
      out[off[0]] = cast<To>(in[off[1]]);
    }
  }
}

template <typename U>
__global__ void where_kernel(Geometry<4> g, U* out, const uint8_t* cond, const U* a, const U* b) {
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    if (g.contiguous) {
      out[i] = cond[i] ? a[i] : b[i];
    } else {
      int64_t off[4];
      offsets_of(g, i, off);
      out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
    }
  }
}

// ---- unary ----
template <typename T, UnaryOp Op>
__global__ void unary_kernel(Geometry<2> g, T* out, const T* in, Compute<T> a, Compute<T> b) {
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    if (g.contiguous) {
      out[i] = unary_apply<T, Op>(in[i], a, b);
    } else {
      int64_t off[2];
      offsets_of(g, i, off);
      out[off[0]] = unary_apply<T, Op>(in[off[1]], a, b);
    }
  }
}

template <typename T, UnaryOp Op, int V>
__global__ void unary_packed_kernel(int64_t packs, Pack<T, V>* out, const Pack<T, V>* in,
                                    Compute<T> a, Compute<T> b) {
  EMBER_CUDA_KERNEL_LOOP(i, packs) {
    Pack<T, V> x = in[i];
#pragma unroll
    for (int j = 0; j < V; ++j) x.v[j] = unary_apply<T, Op>(x.v[j], a, b);
    out[i] = x;
  }
}

template <typename T, UnaryOp Op>
void run_unary(const Geometry<2>& g, T* out, const T* in, Compute<T> a, Compute<T> b,
               cudaStream_t st) {
  constexpr int V = 16 / sizeof(T);
  if (g.contiguous && g.numel >= V && aligned16(out, in)) {
    const int64_t packs = g.numel / V;
    unary_packed_kernel<T, Op, V><<<grid_for(packs), kBlock, 0, st>>>(
        packs, reinterpret_cast<Pack<T, V>*>(out), reinterpret_cast<const Pack<T, V>*>(in), a, b);
    EMBER_CUDA_LAUNCH_CHECK();
    const int64_t done = packs * V;
    if (done == g.numel) return;
    Geometry<2> tail = g;
    tail.numel = g.numel - done;
    unary_kernel<T, Op><<<1, kBlock, 0, st>>>(tail, out + done, in + done, a, b);
  } else {
    unary_kernel<T, Op><<<grid_for(g.numel), kBlock, 0, st>>>(g, out, in, a, b);
  }
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
__global__ void logical_not_kernel(Geometry<2> g, bool* out, const T* in) {
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[2] = {i, i};
    if (!g.contiguous) offsets_of(g, i, off);
    out[off[0]] = !cast<bool>(in[off[1]]);
  }
}

template <typename T>
void unary_typed(UnaryOp op, const Geometry<2>& g, T* out, const T* in, Compute<T> a, Compute<T> b,
                 cudaStream_t st) {
  const bool known = kernels::visit_unary(
      op, [&](auto c) { run_unary<T, decltype(c)::value>(g, out, in, a, b, st); });
  EMBER_ASSERT(known, "unary: unhandled op ", static_cast<int>(op));
}

// ---- binary ----
using kernels::is_comparison;
template <typename T, BinaryOp Op>
using ResultOf = kernels::BinaryResult<T, Op>;

template <typename T, BinaryOp Op, typename R = ResultOf<T, Op>>
__global__ void binary_kernel(Geometry<3> g, R* out, const T* a, const T* b) {
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    if (g.contiguous) {
      out[i] = binary_apply<T, Op>(a[i], b[i]);
    } else {
      int64_t off[3];
      offsets_of(g, i, off);
      out[off[0]] = binary_apply<T, Op>(a[off[1]], b[off[2]]);
    }
  }
}

template <typename T, BinaryOp Op, int V>
__global__ void binary_packed_kernel(int64_t packs, Pack<T, V>* out, const Pack<T, V>* a,
                                     const Pack<T, V>* b) {
  EMBER_CUDA_KERNEL_LOOP(i, packs) {
    Pack<T, V> x = a[i];
    const Pack<T, V> y = b[i];
#pragma unroll
    for (int j = 0; j < V; ++j) x.v[j] = binary_apply<T, Op>(x.v[j], y.v[j]);
    out[i] = x;
  }
}

template <typename T, BinaryOp Op>
void run_binary(const Geometry<3>& g, void* out_ptr, const T* a, const T* b, cudaStream_t st) {
  using R = ResultOf<T, Op>;
  R* out = static_cast<R*>(out_ptr);
  constexpr int V = 16 / sizeof(T);
  if constexpr (!is_comparison(Op)) {
    if (g.contiguous && g.numel >= V && aligned16(out, a, b)) {
      const int64_t packs = g.numel / V;
      binary_packed_kernel<T, Op, V><<<grid_for(packs), kBlock, 0, st>>>(
          packs, reinterpret_cast<Pack<T, V>*>(out), reinterpret_cast<const Pack<T, V>*>(a),
          reinterpret_cast<const Pack<T, V>*>(b));
      EMBER_CUDA_LAUNCH_CHECK();
      const int64_t done = packs * V;
      if (done == g.numel) return;
      Geometry<3> tail = g;
      tail.numel = g.numel - done;
      binary_kernel<T, Op><<<1, kBlock, 0, st>>>(tail, out + done, a + done, b + done);
      EMBER_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  binary_kernel<T, Op><<<grid_for(g.numel), kBlock, 0, st>>>(g, out, a, b);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <typename T>
__global__ void bias_rows_kernel(T* c, const T* bias, int64_t batch_stride_c, int64_t m, int64_t n,
                                 int64_t ldc, int64_t total) {
  EMBER_CUDA_KERNEL_LOOP(i, total) {
    const int64_t j = i % n, row = i / n % m, bi = i / (n * m);
    T& y = c[bi * batch_stride_c + row * ldc + j];
    y = cast<T>(cast<Compute<T>>(y) + cast<Compute<T>>(bias[j]));
  }
}

}  // namespace

void fill(const View& out, double value) {
  const Shape* strides[1] = {&out.strides};
  const Geometry<1> g = make_geometry(out.shape, strides);
  if (g.numel == 0) return;
  cudaStream_t st = stream_for(out);
  dispatch_all(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (std::is_same_v<T, __half>)
      v = __float2half_rn(static_cast<float>(value));  // through float, as the CPU
    else if constexpr (std::is_same_v<T, __nv_bfloat16>)
      v = __float2bfloat16_rn(static_cast<float>(value));
    else if constexpr (std::is_same_v<T, bool>)
      v = value != 0.0;
    else if constexpr (std::is_same_v<T, uint8_t>)
      v = static_cast<uint8_t>(static_cast<int64_t>(value));
    else
      v = static_cast<T>(value);
    fill_kernel<T><<<grid_for(g.numel), kBlock, 0, st>>>(g, static_cast<T*>(out.data), v);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void copy(const View& out, const View& in) {
  EMBER_ASSERT(in.shape.size() == out.shape.size(), "copy: rank mismatch ", in.shape.size(), " vs ",
               out.shape.size());
  const Shape* strides[2] = {&out.strides, &in.strides};
  const Geometry<2> g = make_geometry(out.shape, strides);
  if (g.numel == 0) return;
  cudaStream_t st = stream_for(out);
  if (out.data == in.data && out.dtype == in.dtype && out.strides == in.strides) return;
  if (g.contiguous && g.numel > 1 && out.dtype == in.dtype) {
    EMBER_CUDA_CHECK(cudaMemcpyAsync(out.data, in.data,
                                     static_cast<size_t>(g.numel) * element_size(out.dtype),
                                     cudaMemcpyDeviceToDevice, st));
    return;
  }
  dispatch_all(out.dtype, [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    dispatch_all(in.dtype, [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      copy_kernel<To, From><<<grid_for(g.numel), kBlock, 0, st>>>(
          g, static_cast<To*>(out.data), static_cast<const From*>(in.data));
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

void unary(UnaryOp op, const View& out, const View& in, double a, double b) {
  const Shape* strides[2] = {&out.strides, &in.strides};
  const Geometry<2> g = make_geometry(out.shape, strides);
  if (op == UnaryOp::logical_not) {
    EMBER_ASSERT(out.dtype == DType::boolean, "logical_not: output must be bool (got ",
                 dtype_name(out.dtype), ")");
    if (g.numel == 0) return;
    cudaStream_t st = stream_for(out);
    dispatch_all(in.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      logical_not_kernel<T><<<grid_for(g.numel), kBlock, 0, st>>>(g, static_cast<bool*>(out.data),
                                                                  static_cast<const T*>(in.data));
      EMBER_CUDA_LAUNCH_CHECK();
    });
    return;
  }
  EMBER_ASSERT(out.dtype == in.dtype, "unary: dtype mismatch");
  dispatch_any_float(in.dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (g.numel == 0) return;
    unary_typed<T>(op, g, static_cast<T*>(out.data), static_cast<const T*>(in.data),
                   static_cast<Compute<T>>(a), static_cast<Compute<T>>(b), stream_for(out));
  });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
  const Shape* strides[3] = {&out.strides, &a.strides, &b.strides};
  const Geometry<3> g = make_geometry(out.shape, strides);
  kernels::dispatch_binary<__half, __nv_bfloat16>(op, out, a, b, "CUDA", [&](auto tag, auto c) {
    using T = typename decltype(tag)::type;
    if (g.numel == 0) return;
    run_binary<T, decltype(c)::value>(g, out.data, static_cast<const T*>(a.data),
                                      static_cast<const T*>(b.data), stream_for(out));
  });
}

void where(const View& out, const View& cond, const View& a, const View& b) {
  EMBER_ASSERT(cond.dtype == DType::boolean, "where: condition must be bool (got ",
               dtype_name(cond.dtype), ")");
  EMBER_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype, "where: dtype mismatch");
  const Shape* strides[4] = {&out.strides, &cond.strides, &a.strides, &b.strides};
  const Geometry<4> g = make_geometry(out.shape, strides);
  if (g.numel == 0) return;
  cudaStream_t st = stream_for(out);
  auto launch = [&](auto tag) {
    using U = typename decltype(tag)::type;
    where_kernel<U><<<grid_for(g.numel), kBlock, 0, st>>>(
        g, static_cast<U*>(out.data), static_cast<const uint8_t*>(cond.data),
        static_cast<const U*>(a.data), static_cast<const U*>(b.data));
    EMBER_CUDA_LAUNCH_CHECK();
  };
  switch (element_size(out.dtype)) {
    case 1: return launch(Tag<uint8_t>{});
    case 2: return launch(Tag<uint16_t>{});
    case 4: return launch(Tag<uint32_t>{});
    default: return launch(Tag<uint64_t>{});
  }
}

void add_bias_rows(int device, DType dtype, void* c, const void* bias, int64_t batch,
                   int64_t batch_stride_c, int64_t m, int64_t n, int64_t ldc) {
  const int64_t total = batch * m * n;
  if (total == 0) return;
  cudaStream_t st = stream(device);
  dispatch_any_float(dtype, "gemm bias", [&](auto tag) {
    using T = typename decltype(tag)::type;
    bias_rows_kernel<T><<<grid_for(total), kBlock, 0, st>>>(
        static_cast<T*>(c), static_cast<const T*>(bias), batch_stride_c, m, n, ldc, total);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
