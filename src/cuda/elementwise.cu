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

#include "cuda/loops.cuh"

namespace ember::cuda {
namespace {

constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/√2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/√(2π)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // √(2/π)
constexpr double kGeluKappa = 0.044715;

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
template <typename T>
__device__ __forceinline__ T sigmoid_of(T x) {
  return T(1) / (T(1) + exp(-x));
}

template <typename T, UnaryOp Op>
__device__ __forceinline__ T unary_apply(T x, T a, T b) {
  if constexpr (Op == UnaryOp::neg)
    return -x;
  else if constexpr (Op == UnaryOp::abs)
    return fabs(x);
  else if constexpr (Op == UnaryOp::sqrt)
    return sqrt(x);
  else if constexpr (Op == UnaryOp::rsqrt)
    return T(1) / sqrt(x);
  else if constexpr (Op == UnaryOp::square)
    return x * x;
  else if constexpr (Op == UnaryOp::exp)
    return exp(x);
  else if constexpr (Op == UnaryOp::log)
    return log(x);
  else if constexpr (Op == UnaryOp::sign)
    return T((T(0) < x) - (x < T(0)));
  else if constexpr (Op == UnaryOp::relu)
    return x < T(0) ? T(0) : x;
  else if constexpr (Op == UnaryOp::sigmoid)
    return sigmoid_of(x);
  else if constexpr (Op == UnaryOp::tanh)
    return tanh(x);
  else if constexpr (Op == UnaryOp::gelu_erf)
    return T(0.5) * x * (T(1) + erf(x * T(kSqrt1_2)));
  else if constexpr (Op == UnaryOp::gelu_tanh)
    return T(0.5) * x * (T(1) + tanh(T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x)));
  else if constexpr (Op == UnaryOp::silu)
    return x * sigmoid_of(x);
  else if constexpr (Op == UnaryOp::affine)
    return x * a + b;
  else if constexpr (Op == UnaryOp::pow_scalar)
    return a == T(2) ? x * x : a == T(1) ? x : a == T(-1) ? T(1) / x : pow(x, a);
  else if constexpr (Op == UnaryOp::clamp) {
    const T y = x < a ? a : x;  // NaN passes through both comparisons
    return y > b ? b : y;
  } else if constexpr (Op == UnaryOp::relu_grad)
    return x > T(0) ? T(1) : T(0);
  else if constexpr (Op == UnaryOp::gelu_erf_grad) {
    const T cdf = T(0.5) * (T(1) + erf(x * T(kSqrt1_2)));
    const T pdf = T(kInvSqrt2Pi) * exp(T(-0.5) * x * x);
    return cdf + x * pdf;
  } else if constexpr (Op == UnaryOp::gelu_tanh_grad) {
    const T t = tanh(T(kSqrt2OverPi) * (x + T(kGeluKappa) * x * x * x));
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

template <typename T, UnaryOp Op>
__global__ void unary_kernel(Geometry<2> g, T* out, const T* in, T a, T b) {
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
__global__ void unary_packed_kernel(int64_t packs, Pack<T, V>* out, const Pack<T, V>* in, T a,
                                    T b) {
  EMBER_CUDA_KERNEL_LOOP(i, packs) {
    Pack<T, V> x = in[i];
#pragma unroll
    for (int j = 0; j < V; ++j) x.v[j] = unary_apply<T, Op>(x.v[j], a, b);
    out[i] = x;
  }
}

template <typename T, UnaryOp Op>
void run_unary(const Geometry<2>& g, T* out, const T* in, T a, T b, cudaStream_t st) {
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
void unary_typed(UnaryOp op, const Geometry<2>& g, T* out, const T* in, T a, T b, cudaStream_t st) {
  switch (op) {
#define EMBER_UNARY_CASE(name) \
  case UnaryOp::name: return run_unary<T, UnaryOp::name>(g, out, in, a, b, st);
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

// ---- binary ----
constexpr bool is_comparison(BinaryOp op) {
  return op == BinaryOp::eq || op == BinaryOp::ne || op == BinaryOp::lt || op == BinaryOp::le ||
         op == BinaryOp::gt || op == BinaryOp::ge;
}

template <typename T, BinaryOp Op>
using ResultOf = std::conditional_t<is_comparison(Op), bool, T>;

// Integer + - * wrap around (two's complement), as the CPU kernel and PyTorch.
template <typename T>
__device__ __forceinline__ T wrap(T a, T b, BinaryOp op) {
  using U = std::make_unsigned_t<T>;
  const U x = static_cast<U>(a), y = static_cast<U>(b);
  return static_cast<T>(op == BinaryOp::add ? U(x + y) : op == BinaryOp::sub ? U(x - y) : U(x * y));
}

template <typename T, BinaryOp Op>
__device__ __forceinline__ ResultOf<T, Op> binary_apply(T a, T b) {
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
      if (b == 0) return T(0);  // x/0 gives 0 and MIN/-1 wraps, as the CPU kernel
      if (b == T(-1)) return wrap(T(0), a, BinaryOp::sub);
      return a / b;
    } else {
      return a / b;
    }
  } else if constexpr (Op == BinaryOp::pow) {
    return pow(a, b);
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
void binary_arithmetic(BinaryOp op, const Geometry<3>& g, void* out, const T* a, const T* b,
                       cudaStream_t st) {
  switch (op) {
    case BinaryOp::add: return run_binary<T, BinaryOp::add>(g, out, a, b, st);
    case BinaryOp::sub: return run_binary<T, BinaryOp::sub>(g, out, a, b, st);
    case BinaryOp::mul: return run_binary<T, BinaryOp::mul>(g, out, a, b, st);
    case BinaryOp::div: return run_binary<T, BinaryOp::div>(g, out, a, b, st);
    case BinaryOp::maximum: return run_binary<T, BinaryOp::maximum>(g, out, a, b, st);
    case BinaryOp::minimum: return run_binary<T, BinaryOp::minimum>(g, out, a, b, st);
    case BinaryOp::pow:
      if constexpr (std::is_floating_point_v<T>)
        return run_binary<T, BinaryOp::pow>(g, out, a, b, st);
      break;
    default: break;
  }
  EMBER_CHECK(false, "binary: pow supports f32 and f64 only");
}

template <typename T>
void binary_comparison(BinaryOp op, const Geometry<3>& g, void* out, const void* a_ptr,
                       const void* b_ptr, cudaStream_t st) {
  const T* a = static_cast<const T*>(a_ptr);
  const T* b = static_cast<const T*>(b_ptr);
  switch (op) {
    case BinaryOp::eq: return run_binary<T, BinaryOp::eq>(g, out, a, b, st);
    case BinaryOp::ne: return run_binary<T, BinaryOp::ne>(g, out, a, b, st);
    case BinaryOp::lt: return run_binary<T, BinaryOp::lt>(g, out, a, b, st);
    case BinaryOp::le: return run_binary<T, BinaryOp::le>(g, out, a, b, st);
    case BinaryOp::gt: return run_binary<T, BinaryOp::gt>(g, out, a, b, st);
    case BinaryOp::ge: return run_binary<T, BinaryOp::ge>(g, out, a, b, st);
    default: break;
  }
  EMBER_ASSERT(false, "binary: not a comparison ", static_cast<int>(op));
}
static_assert(static_cast<int>(BinaryOp::count) == 13, "a BinaryOp was added: handle it here");

template <typename T>
__global__ void bias_rows_kernel(T* c, const T* bias, int64_t batch_stride_c, int64_t m, int64_t n,
                                 int64_t ldc, int64_t total) {
  EMBER_CUDA_KERNEL_LOOP(i, total) {
    const int64_t j = i % n, row = i / n % m, bi = i / (n * m);
    c[bi * batch_stride_c + row * ldc + j] += bias[j];
  }
}

}  // namespace

void fill(const View& out, double value) {
  const Shape* strides[1] = {&out.strides};
  const Geometry<1> g = make_geometry(out.shape, strides);
  if (g.numel == 0) return;
  cudaStream_t st = stream_for(out.data);
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
  cudaStream_t st = stream_for(out.data);
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
    EMBER_CHECK(out.dtype == DType::boolean, "logical_not: output must be bool (got ",
                dtype_name(out.dtype), ")");
    if (g.numel == 0) return;
    cudaStream_t st = stream_for(out.data);
    dispatch_all(in.dtype, [&](auto tag) {
      using T = typename decltype(tag)::type;
      logical_not_kernel<T><<<grid_for(g.numel), kBlock, 0, st>>>(g, static_cast<bool*>(out.data),
                                                                  static_cast<const T*>(in.data));
      EMBER_CUDA_LAUNCH_CHECK();
    });
    return;
  }
  EMBER_ASSERT(out.dtype == in.dtype, "unary: dtype mismatch");
  dispatch_float(in.dtype, "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (g.numel == 0) return;
    unary_typed<T>(op, g, static_cast<T*>(out.data), static_cast<const T*>(in.data),
                   static_cast<T>(a), static_cast<T>(b), stream_for(out.data));
  });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
  EMBER_ASSERT(a.dtype == b.dtype, "binary: input dtypes differ");
  const Shape* strides[3] = {&out.strides, &a.strides, &b.strides};
  const Geometry<3> g = make_geometry(out.shape, strides);
  if (is_comparison(op)) {
    EMBER_ASSERT(out.dtype == DType::boolean, "binary: comparisons write bool");
    if (g.numel == 0) return;
    cudaStream_t st = stream_for(out.data);
    switch (a.dtype) {
      case DType::f32: return binary_comparison<float>(op, g, out.data, a.data, b.data, st);
      case DType::f64: return binary_comparison<double>(op, g, out.data, a.data, b.data, st);
      case DType::i32: return binary_comparison<int32_t>(op, g, out.data, a.data, b.data, st);
      case DType::i64: return binary_comparison<int64_t>(op, g, out.data, a.data, b.data, st);
      case DType::u8:
      case DType::boolean: return binary_comparison<uint8_t>(op, g, out.data, a.data, b.data, st);
      default: break;
    }
    EMBER_CHECK(false, "binary: comparisons support f32, f64, i32, i64, u8 and bool (got ",
                dtype_name(a.dtype), ")");
  }
  EMBER_ASSERT(out.dtype == a.dtype, "binary: output dtype differs from the inputs'");
  dispatch_numeric(a.dtype, "binary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (g.numel == 0) return;
    binary_arithmetic<T>(op, g, out.data, static_cast<const T*>(a.data),
                         static_cast<const T*>(b.data), stream_for(out.data));
  });
}

void where(const View& out, const View& cond, const View& a, const View& b) {
  EMBER_CHECK(cond.dtype == DType::boolean, "where: condition must be bool (got ",
              dtype_name(cond.dtype), ")");
  EMBER_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype, "where: dtype mismatch");
  const Shape* strides[4] = {&out.strides, &cond.strides, &a.strides, &b.strides};
  const Geometry<4> g = make_geometry(out.shape, strides);
  if (g.numel == 0) return;
  cudaStream_t st = stream_for(out.data);
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
  dispatch_float(dtype, "gemm bias", [&](auto tag) {
    using T = typename decltype(tag)::type;
    bias_rows_kernel<T><<<grid_for(total), kBlock, 0, st>>>(
        static_cast<T*>(c), static_cast<const T*>(bias), batch_stride_c, m, n, ldc, total);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace ember::cuda
