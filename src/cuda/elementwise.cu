// src/cuda/elementwise.cu — fill, copy (with casts), unary, binary, where and the GEMM bias
// fallback on CUDA, with the CPU kernels' dtype coverage and formulas (src/cpu/unary.cpp,
// binary.cpp, elementwise.cpp).
//
// Every kernel but the small ones is a grid-stride loop over the output's elements. When all
// operands are contiguous (Note [CUDA strided geometry], loops.cuh) a flat kernel runs, whose
// parameters are the pointers, n and the op's scalars (a small parameter block is cheaper to
// launch than the ~300-byte geometry); unary/binary ops on up to kSmallFlat elements take one
// element per thread with no loop, larger ones whose pointers are 16-byte aligned load and
// store 16-byte packs. Otherwise each element's offsets come from the collapsed geometry.
// Inputs arrive broadcast to out's shape (stride-0 dims), as the backend contract says. Every
// kernel here but the bias fallback is launched with launch_chained (Note [Chained launches],
// launch.cuh), so each starts with chain_enter().
#include <cmath>

#include "cuda/device_math.cuh"
#include "cuda/launch.cuh"
#include "cuda/loops.cuh"
#include "kernels/elementwise.hpp"
#include "kernels/relu_mask.hpp"

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

// Contiguous unary/binary ops on at most this many elements run a kernel with one element per
// thread, a 32-bit index and no loop: on the H200 a dependent chain of them costs 0.52 µs per
// kernel in a graph against 0.79 for the packed grid-stride loop (bench_capture's launch floor).
constexpr int64_t kSmallFlat = 4096;
constexpr size_t kKernelCopyBytes = size_t{1} << 20;  // larger same-dtype copies: cudaMemcpyAsync

template <typename... P>
bool aligned16(const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

// ---- fill / copy / where ----
template <typename T>
__global__ void fill_flat_kernel(T* out, int64_t n, T value) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, n) out[i] = value;
}

// Note [Packed fill and copy]
// fill and copy (casts included) move 16-byte packs a thread when they can: the profiler showed
// GPT-2's step spending 20 ms of 68 in one-element-per-thread fills and copies (the slice
// backward's zeros, autocast's casts, the transposes of attention's gradients), at a fifth to
// a half of the bandwidth. A pack holds kVec elements of the wider of the two dtypes' 16 bytes
// (f32 -> bf16: 4 f32 in, 4 bf16 out). Contiguous operands take packs and a scalar tail; a
// strided copy takes packs when every operand's innermost collapsed dim is contiguous, holds a
// multiple of kVec elements, every outer stride is a multiple of kVec and the pointers are
// aligned to their packs (the transposed heads of attention: rows of 64 contiguous elements).
// Values are the element-wise ones: the same casts, bitwise.
template <typename To, typename From>
constexpr int pack_elements() {
  return static_cast<int>(16 / (sizeof(To) > sizeof(From) ? sizeof(To) : sizeof(From)));
}

template <typename T>
__global__ void fill_packed_kernel(T* out, int64_t packs, T value) {
  chain_enter();
  constexpr int kVec = pack_elements<T, T>();
  Pack<T, kVec> p;
#pragma unroll
  for (int k = 0; k < kVec; ++k) p.v[k] = value;
  auto* o = reinterpret_cast<Pack<T, kVec>*>(out);
  EMBER_CUDA_KERNEL_LOOP(i, packs) o[i] = p;
}

template <typename To, typename From>
__global__ void copy_packed_kernel(Geometry<2> g, To* out, const From* in, int64_t packs) {
  chain_enter();
  constexpr int kVec = pack_elements<To, From>();
  EMBER_CUDA_KERNEL_LOOP(p, packs) {
    int64_t off[2] = {p * kVec, p * kVec};
    if (g.rank > 1) offsets_of(g, p * kVec, off);
    const Pack<From, kVec> a = *reinterpret_cast<const Pack<From, kVec>*>(in + off[1]);
    Pack<To, kVec> b;
#pragma unroll
    for (int k = 0; k < kVec; ++k) b.v[k] = cast<To>(a.v[k]);
    *reinterpret_cast<Pack<To, kVec>*>(out + off[0]) = b;
  }
}

// Whether a strided copy of `g` can move packs of `vec` elements (Note [Packed fill and copy]).
bool packable(const Geometry<2>& g, const void* out, size_t out_size, const void* in,
              size_t in_size, int vec) {
  if (g.rank == 0 || g.size[g.rank - 1] % vec != 0) return false;
  const void* ptr[2] = {out, in};
  const size_t size[2] = {out_size, in_size};
  for (int k = 0; k < 2; ++k) {
    if (reinterpret_cast<uintptr_t>(ptr[k]) % (vec * size[k]) != 0) return false;
    if (g.stride[k][g.rank - 1] != 1) return false;
    for (int d = 0; d + 1 < g.rank; ++d)
      if (g.stride[k][d] % vec != 0) return false;
  }
  return true;
}

template <typename T>
__global__ void fill_kernel(Geometry<1> g, T* out, T value) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[1];
    offsets_of(g, i, off);
    out[off[0]] = value;
  }
}

template <typename T>
__global__ void arange_kernel(T* out, int64_t n, double start, double step) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, n) out[i] = cast<T>(kernels::arange_value(start, step, i));
}

template <typename To, typename From>
__global__ void copy_flat_kernel(To* out, const From* in, int64_t n) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, n) out[i] = cast<To>(in[i]);
}

template <typename To, typename From>
__global__ void copy_kernel(Geometry<2> g, To* out, const From* in) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[2];
    offsets_of(g, i, off);
    out[off[0]] = cast<To>(in[off[1]]);
  }
}

template <typename U>
__global__ void where_flat_kernel(U* out, const uint8_t* cond, const U* a, const U* b, int64_t n) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, n) out[i] = cond[i] ? a[i] : b[i];
}

template <typename U>
__global__ void where_kernel(Geometry<4> g, U* out, const uint8_t* cond, const U* a, const U* b) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[4];
    offsets_of(g, i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

// ---- unary ----

// Flat loop over n contiguous elements, V at a time (V > 1: out and in 16-byte aligned); the
// n % V elements after the last pack go to the first threads of the grid.
template <typename T, UnaryOp Op, int V>
__global__ void unary_flat_kernel(T* out, const T* in, int64_t n, Compute<T> a, Compute<T> b) {
  chain_enter();
  const int64_t packs = n / V;
  EMBER_CUDA_KERNEL_LOOP(i, packs) {
    Pack<T, V> x = reinterpret_cast<const Pack<T, V>*>(in)[i];
#pragma unroll
    for (int j = 0; j < V; ++j) x.v[j] = unary_apply<T, Op>(x.v[j], a, b);
    reinterpret_cast<Pack<T, V>*>(out)[i] = x;
  }
  if constexpr (V > 1) {
    const int64_t tail = packs * V + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (tail < n) out[tail] = unary_apply<T, Op>(in[tail], a, b);
  }
}

template <typename T, UnaryOp Op>
__global__ void unary_small_kernel(T* out, const T* in, int n, Compute<T> a, Compute<T> b) {
  chain_enter();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = unary_apply<T, Op>(in[i], a, b);
}

template <typename T, UnaryOp Op>
__global__ void unary_kernel(Geometry<2> g, T* out, const T* in, Compute<T> a, Compute<T> b) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[2];
    offsets_of(g, i, off);
    out[off[0]] = unary_apply<T, Op>(in[off[1]], a, b);
  }
}

// The launch shape of a flat kernel over n elements taken V at a time.
template <int V>
FlatLaunch flat_launch_by(int64_t n) {
  const int64_t packs = n / V;
  return flat_launch(packs > 0 ? packs : 1);
}

template <typename T, UnaryOp Op>
void run_unary(const Geometry<2>& g, T* out, const T* in, Compute<T> a, Compute<T> b,
               cudaStream_t st) {
  constexpr int V = 16 / sizeof(T);
  if (g.contiguous && g.numel <= kSmallFlat) {
    const FlatLaunch l = flat_launch(g.numel);
    launch_chained<unary_small_kernel<T, Op>>(l.grid, l.block, st, out, in,
                                              static_cast<int>(g.numel), a, b);
  } else if (g.contiguous && aligned16(out, in)) {
    const FlatLaunch l = flat_launch_by<V>(g.numel);
    launch_chained<unary_flat_kernel<T, Op, V>>(l.grid, l.block, st, out, in, g.numel, a, b);
  } else if (g.contiguous) {
    const FlatLaunch l = flat_launch(g.numel);
    launch_chained<unary_flat_kernel<T, Op, 1>>(l.grid, l.block, st, out, in, g.numel, a, b);
  } else {
    const FlatLaunch l = flat_launch(g.numel);
    launch_chained<unary_kernel<T, Op>>(l.grid, l.block, st, g, out, in, a, b);
  }
}

template <typename T>
__global__ void logical_not_flat_kernel(bool* out, const T* in, int64_t n) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, n) out[i] = !cast<bool>(in[i]);
}

template <typename T>
__global__ void logical_not_kernel(Geometry<2> g, bool* out, const T* in) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[2];
    offsets_of(g, i, off);
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

// As unary_flat_kernel; V > 1 only when out has a's and b's type (not for comparisons).
template <typename T, BinaryOp Op, int V, typename R = ResultOf<T, Op>>
__global__ void binary_flat_kernel(R* out, const T* a, const T* b, int64_t n) {
  chain_enter();
  const int64_t packs = n / V;
  EMBER_CUDA_KERNEL_LOOP(i, packs) {
    if constexpr (V > 1) {
      Pack<T, V> x = reinterpret_cast<const Pack<T, V>*>(a)[i];
      const Pack<T, V> y = reinterpret_cast<const Pack<T, V>*>(b)[i];
#pragma unroll
      for (int j = 0; j < V; ++j) x.v[j] = binary_apply<T, Op>(x.v[j], y.v[j]);
      reinterpret_cast<Pack<T, V>*>(out)[i] = x;
    } else {
      out[i] = binary_apply<T, Op>(a[i], b[i]);
    }
  }
  if constexpr (V > 1) {
    const int64_t tail = packs * V + static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (tail < n) out[tail] = binary_apply<T, Op>(a[tail], b[tail]);
  }
}

template <typename T, BinaryOp Op, typename R = ResultOf<T, Op>>
__global__ void binary_small_kernel(R* out, const T* a, const T* b, int n) {
  chain_enter();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = binary_apply<T, Op>(a[i], b[i]);
}

template <typename T, BinaryOp Op, typename R = ResultOf<T, Op>>
__global__ void binary_kernel(Geometry<3> g, R* out, const T* a, const T* b) {
  chain_enter();
  EMBER_CUDA_KERNEL_LOOP(i, g.numel) {
    int64_t off[3];
    offsets_of(g, i, off);
    out[off[0]] = binary_apply<T, Op>(a[off[1]], b[off[2]]);
  }
}

template <typename T, BinaryOp Op>
void run_binary(const Geometry<3>& g, void* out_ptr, const T* a, const T* b, cudaStream_t st) {
  using R = ResultOf<T, Op>;
  R* out = static_cast<R*>(out_ptr);
  constexpr int V = 16 / sizeof(T);
  if (g.contiguous && g.numel <= kSmallFlat) {
    const FlatLaunch l = flat_launch(g.numel);
    launch_chained<binary_small_kernel<T, Op>>(l.grid, l.block, st, out, a, b,
                                               static_cast<int>(g.numel));
    return;
  }
  if constexpr (!is_comparison(Op)) {
    if (g.contiguous && aligned16(out, a, b)) {
      const FlatLaunch l = flat_launch_by<V>(g.numel);
      launch_chained<binary_flat_kernel<T, Op, V>>(l.grid, l.block, st, out, a, b, g.numel);
      return;
    }
  }
  const FlatLaunch l = flat_launch(g.numel);
  if (g.contiguous)
    launch_chained<binary_flat_kernel<T, Op, 1>>(l.grid, l.block, st, out, a, b, g.numel);
  else
    launch_chained<binary_kernel<T, Op>>(l.grid, l.block, st, g, out, a, b);
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

// Note [ReLU masks]: DRELU's fallback, one thread per element.
// out = a + float(b): four elements per item with 16-byte loads of a and out and 8-byte ones
// of b when `packed` (the last item's tail element by element), else one element per item.
template <typename T>
__global__ void add_widened_kernel(float* __restrict out, const float* __restrict a,
                                   const T* __restrict b, int64_t n, bool packed) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  if (!packed) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += step)
      out[i] = a[i] + static_cast<float>(b[i]);
    return;
  }
  const int64_t items = (n + 3) / 4;
  for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < items; k += step) {
    const int64_t i = 4 * k;
    if (i + 4 <= n) {
      const float4 x = *reinterpret_cast<const float4*>(a + i);
      const uint2 w = *reinterpret_cast<const uint2*>(b + i);
      T y[4];
      memcpy(y, &w, sizeof(w));
      *reinterpret_cast<float4*>(out + i) =
          make_float4(x.x + static_cast<float>(y[0]), x.y + static_cast<float>(y[1]),
                      x.z + static_cast<float>(y[2]), x.w + static_cast<float>(y[3]));
    } else {
      for (int64_t j = i; j < n; ++j) out[j] = a[j] + static_cast<float>(b[j]);
    }
  }
}

// One thread per r: with trans_a neighbouring threads read neighbouring elements of each row
// of A's storage; without, each walks its own row (the rare fallback of sum_rows_f32).
template <typename T>
__global__ void sum_rows_f32_kernel(float* out, const T* a, bool trans_a, int64_t m, int64_t k,
                                    int64_t lda) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < m;
       r += int64_t(gridDim.x) * blockDim.x) {
    double s = 0;
    for (int64_t j = 0; j < k; ++j)
      s += static_cast<double>(static_cast<float>(trans_a ? a[j * lda + r] : a[r * lda + j]));
    out[r] = static_cast<float>(s);
  }
}

template <typename T>
__global__ void relu_mask_apply_kernel(T* c, int64_t ldc, int64_t n, int64_t ld,
                                       const uint8_t* mask, int64_t total) {
  EMBER_CUDA_KERNEL_LOOP(i, total) {
    const int64_t row = i / n, col = i % n;
    if (!kernels::relu_mask_test(mask, ld, row, col)) c[row * ldc + col] = T(0);
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
    T* dst = static_cast<T*>(out.data);
    constexpr int kVec = pack_elements<T, T>();
    if (g.contiguous && g.numel >= kVec && aligned16(dst)) {  // Note [Packed fill and copy]
      const int64_t packs = g.numel / kVec, done = packs * kVec;
      const FlatLaunch p = flat_launch(packs);
      launch_chained<fill_packed_kernel<T>>(p.grid, p.block, st, dst, packs, v);
      if (done < g.numel) {
        const FlatLaunch t = flat_launch(g.numel - done);
        launch_chained<fill_flat_kernel<T>>(t.grid, t.block, st, dst + done, g.numel - done, v);
      }
      return;
    }
    const FlatLaunch l = flat_launch(g.numel);
    if (g.contiguous)
      launch_chained<fill_flat_kernel<T>>(l.grid, l.block, st, dst, g.numel, v);
    else
      launch_chained<fill_kernel<T>>(l.grid, l.block, st, g, static_cast<T*>(out.data), v);
  });
}

void arange(const View& out, double start, double step) {
  const int64_t n = out.shape.numel();
  if (n == 0) return;
  dispatch_all(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const FlatLaunch l = flat_launch(n);
    launch_chained<arange_kernel<T>>(l.grid, l.block, stream_for(out), static_cast<T*>(out.data), n,
                                     start, step);
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
  // A large same-dtype run is one device-to-device copy; a small one a chained kernel, which
  // costs less to launch and lets the kernels around it overlap (Note [Chained launches]).
  const size_t bytes = static_cast<size_t>(g.numel) * element_size(out.dtype);
  if (g.contiguous && bytes > kKernelCopyBytes && out.dtype == in.dtype) {
    EMBER_CUDA_CHECK(cudaMemcpyAsync(out.data, in.data, bytes, cudaMemcpyDeviceToDevice, st));
    return;
  }
  dispatch_all(out.dtype, [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    dispatch_all(in.dtype, [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      To* dst = static_cast<To*>(out.data);
      const From* src = static_cast<const From*>(in.data);
      constexpr int kVec = pack_elements<To, From>();
      // Note [Packed fill and copy]: contiguous runs and strided rows of packs.
      if (g.numel >= kVec &&
          ((g.contiguous && packable(g, dst, sizeof(To), src, sizeof(From), 1) &&
            reinterpret_cast<uintptr_t>(dst) % (kVec * sizeof(To)) == 0 &&
            reinterpret_cast<uintptr_t>(src) % (kVec * sizeof(From)) == 0) ||
           (!g.contiguous && packable(g, dst, sizeof(To), src, sizeof(From), kVec)))) {
        const int64_t packs = g.numel / kVec, done = packs * kVec;
        const FlatLaunch p = flat_launch(packs);
        launch_chained<copy_packed_kernel<To, From>>(p.grid, p.block, st, g, dst, src, packs);
        if (done < g.numel) {  // only contiguous runs have a tail
          const FlatLaunch t = flat_launch(g.numel - done);
          launch_chained<copy_flat_kernel<To, From>>(t.grid, t.block, st, dst + done, src + done,
                                                     g.numel - done);
        }
        return;
      }
      const FlatLaunch l = flat_launch(g.numel);
      if (g.contiguous)
        launch_chained<copy_flat_kernel<To, From>>(l.grid, l.block, st, dst, src, g.numel);
      else
        launch_chained<copy_kernel<To, From>>(l.grid, l.block, st, g, dst, src);
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
      bool* dst = static_cast<bool*>(out.data);
      const T* src = static_cast<const T*>(in.data);
      const FlatLaunch l = flat_launch(g.numel);
      if (g.contiguous)
        launch_chained<logical_not_flat_kernel<T>>(l.grid, l.block, st, dst, src, g.numel);
      else
        launch_chained<logical_not_kernel<T>>(l.grid, l.block, st, g, dst, src);
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

void add_widened(const View& out, const View& a, const View& b) {
  const int64_t n = out.shape.numel();
  if (n == 0) return;
  cudaStream_t st = stream_for(out);
  const bool packed = reinterpret_cast<uintptr_t>(out.data) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(a.data) % 16 == 0 &&
                      reinterpret_cast<uintptr_t>(b.data) % 8 == 0;
  const auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t items = packed ? (n + 3) / 4 : n;
    add_widened_kernel<T><<<grid_for(items), kBlock, 0, st>>>(
        static_cast<float*>(out.data), static_cast<const float*>(a.data),
        static_cast<const T*>(b.data), n, packed);
    EMBER_CUDA_LAUNCH_CHECK();
  };
  if (b.dtype == DType::bf16)
    run(Tag<__nv_bfloat16>{});
  else
    run(Tag<__half>{});
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
    U* dst = static_cast<U*>(out.data);
    const auto* c = static_cast<const uint8_t*>(cond.data);
    const U *x = static_cast<const U*>(a.data), *y = static_cast<const U*>(b.data);
    const FlatLaunch l = flat_launch(g.numel);
    if (g.contiguous)
      launch_chained<where_flat_kernel<U>>(l.grid, l.block, st, dst, c, x, y, g.numel);
    else
      launch_chained<where_kernel<U>>(l.grid, l.block, st, g, dst, c, x, y);
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

void sum_rows_f32(int device, DType dtype, const void* a, bool trans_a, int64_t m, int64_t k,
                  int64_t lda, void* out) {
  if (m == 0) return;
  cudaStream_t st = stream(device);
  dispatch_any_float(dtype, "gemm bias gradient", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sum_rows_f32_kernel<T><<<grid_for(m), kBlock, 0, st>>>(
        static_cast<float*>(out), static_cast<const T*>(a), trans_a, m, k, lda);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void relu_mask_apply(int device, DType dtype, void* c, int64_t ldc, int64_t m, int64_t n,
                     const void* mask) {
  const int64_t total = m * n;
  if (total == 0) return;
  cudaStream_t st = stream(device);
  dispatch_any_float(dtype, "gemm relu backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    relu_mask_apply_kernel<T>
        <<<grid_for(total), kBlock, 0, st>>>(static_cast<T*>(c), ldc, n, backend::relu_mask_ld(n),
                                             static_cast<const uint8_t*>(mask), total);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
