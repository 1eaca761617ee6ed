// src/cuda/optim.cu — fused optimizer steps and gradient clipping on CUDA.
//
// adam_step_multi / sgd_step_multi / optim_step_multi (the Backend slots; the only optimizer
// form) run one kernel over many parameters (Note [Multi-tensor apply]). Their per-element
// math (Adam/AdamW, SGD, RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam) is
// src/kernels/optim.hpp's, shared with the CPU, run with DeviceRound below. Every element of a
// parameter, its gradient and its state is read once and written once.
//
// The arithmetic is torch.optim's single-tensor formulas, operation for operation, in the
// parameter's dtype with each scalar cast to it. nvcc contracts a·b + c into an FMA by
// default; the shared formulas fuse only where PyTorch's CPU kernels do (Note [Fused
// multiply-add] in src/cpu/optim.cpp), so DeviceRound makes every other multiply, add, divide
// and square root an explicitly rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn,
// __fsqrt_rn and the f64 ones): an f32 step gives the CPU's bits.
//
// grad_norm_multi / clip_grads_by_norm compute clip_grad_norm on the device: per-block
// partial sums (f64) into a scratch buffer, one block adds them in a fixed order and writes
// the norm as a device scalar, and the scaling kernel reads that scalar. Nothing waits for
// the host. Both read with 16-byte vectors (Note [Norm and clip at memory speed]).
//
// Note [Multi-tensor apply]
// As PyTorch's multi_tensor_apply: the tensors are cut into chunks of `chunk` elements and
// every CUDA block takes one (tensor, chunk) pair from a table passed by value in the
// kernel's parameters (TensorBatch: up to kMaxTensors tensors and kMaxBlocks blocks, about
// 9 KB; CUDA 12.1+ allows 32 KB of parameters on sm_70+). A larger list takes several
// launches. The chunk grows with the total size so a small model still spreads over the
// whole GPU (about kTargetBlocks blocks) and a large one is done in few launches.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>

#include "cuda/common.cuh"
#include "cuda/graph.cuh"
#include "ember/error.hpp"
#include "kernels/optim.hpp"

namespace ember::cuda {
namespace {

constexpr int kMaxTensors = 128;                        // tensors per launch
constexpr int kMaxBlocks = 512;                         // (tensor, chunk) blocks per launch
constexpr int kOptimThreads = 256;                      // threads per block
constexpr int64_t kMinChunk = 1024, kMaxChunk = 65536;  // elements, multiples of 1024
constexpr int64_t kTargetBlocks = 512;
constexpr int kMaxDevices = 64;

template <int kDepth>
struct TensorBatch {
  void* ptr[kDepth][kMaxTensors];
  int64_t numel[kMaxTensors];
  uint8_t block_tensor[kMaxBlocks];
  int32_t block_chunk[kMaxBlocks];
};
static_assert(kMaxTensors <= 256, "block_tensor is a uint8_t");
static_assert(sizeof(TensorBatch<5>) + 256 < 32764, "kernel parameters are limited to 32 KB");

int64_t chunk_for(int64_t total) {
  int64_t chunk = (total + kTargetBlocks - 1) / kTargetBlocks;
  chunk = (chunk + kMinChunk - 1) / kMinChunk * kMinChunk;
  return std::clamp(chunk, kMinChunk, kMaxChunk);
}

// Note [Multi-tensor apply]: fills TensorBatch tables and calls launch(batch, blocks,
// first_block) for each. ptrs(t, d) gives pointer d of tensor t, numel(t) its size.
template <int kDepth, typename Ptrs, typename Numel, typename Launch>
void multi_tensor_apply(int64_t count, int64_t chunk, Ptrs&& ptrs, Numel&& numel, Launch&& launch) {
  TensorBatch<kDepth> batch;
  int slot = 0, blocks = 0;
  int64_t first_block = 0;
  for (int64_t t = 0; t < count; ++t) {
    const int64_t n = numel(t);
    if (n == 0) continue;
    for (int d = 0; d < kDepth; ++d) batch.ptr[d][slot] = ptrs(t, d);
    batch.numel[slot] = n;
    const int64_t chunks = (n + chunk - 1) / chunk;
    for (int64_t c = 0; c < chunks; ++c) {
      batch.block_tensor[blocks] = static_cast<uint8_t>(slot);
      batch.block_chunk[blocks] = static_cast<int32_t>(c);
      ++blocks;
      const bool last_chunk = c == chunks - 1;
      if (blocks == kMaxBlocks || (slot + 1 == kMaxTensors && last_chunk)) {
        launch(batch, blocks, first_block);
        first_block += blocks;
        blocks = 0;
        if (last_chunk) {
          slot = -1;  // the next tensor starts a fresh table
        } else {      // this tensor continues in the next launch, from slot 0
          for (int d = 0; d < kDepth; ++d) batch.ptr[d][0] = batch.ptr[d][slot];
          batch.numel[0] = batch.numel[slot];
          slot = 0;
        }
      }
    }
    ++slot;
  }
  if (blocks > 0) launch(batch, blocks, first_block);
}

// ---- explicitly rounded arithmetic (no contraction) ----

__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrt_rn(double a) { return __dsqrt_rn(a); }
__device__ inline float fma_rn(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ inline double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }

// 16-byte vector of T for the aligned path.
template <typename T>
struct alignas(16) Vec {
  static constexpr int kWidth = 16 / sizeof(T);
  T v[kWidth];
};

__device__ inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// The device's rounding policy for the shared updates: each operation rounded once.
struct DeviceRound {
  template <typename T>
  __device__ static T mul(T a, T b) {
    return mul_rn(a, b);
  }
  template <typename T>
  __device__ static T add(T a, T b) {
    return add_rn(a, b);
  }
  template <typename T>
  __device__ static T div(T a, T b) {
    return div_rn(a, b);
  }
  template <typename T>
  __device__ static T sqrt(T a) {
    return sqrt_rn(a);
  }
  template <typename T>
  __device__ static T fma(T a, T b, T c) {
    return fma_rn(a, b, c);
  }
};

// ---- Adam / AdamW (the element formula: kernels::adam_element) ----

using kernels::adam_scalars;
using kernels::AdamScalars;

// The scalars of a loss-scaled step (Note [Skipped steps] in src/kernels/optim.hpp): false
// where *found_inf says to skip it; with skipped_steps, thread 0 computes the scalars from the
// effective step (args staged per step: Note [Captured steps] in graph.cu) for the block.
template <typename S, typename Args, typename Make>
__device__ inline bool scaled_scalars(const Args& a, S* s, Make&& make) {
  if (a.found_inf && *a.found_inf != 0.0f) return false;  // the same for every thread
  if (a.skipped_steps) {
    __shared__ S shared;
    if (threadIdx.x == 0) shared = make(a, *a.skipped_steps);
    __syncthreads();
    *s = shared;
  }
  return true;
}

template <typename T>
__global__ void __launch_bounds__(kOptimThreads)
    adam_kernel(TensorBatch<5> batch, int64_t chunk, AdamScalars<T> by_value,
                const AdamScalars<T>* staged, AdamArgs args, const AdamArgs* staged_args) {
  AdamScalars<T> s = staged ? *staged : by_value;  // Note [Captured steps] in graph.cu
  if (!scaled_scalars(staged_args ? *staged_args : args, &s,
                      [](const AdamArgs& a, int64_t k) { return adam_scalars<T>(a, k); }))
    return;
  const int t = batch.block_tensor[blockIdx.x];
  const int64_t start = int64_t(batch.block_chunk[blockIdx.x]) * chunk;
  const int64_t n = min(chunk, batch.numel[t] - start);
  T* p = static_cast<T*>(batch.ptr[0][t]) + start;
  const T* g = static_cast<const T*>(batch.ptr[1][t]) + start;
  T* m = static_cast<T*>(batch.ptr[2][t]) + start;
  T* v = static_cast<T*>(batch.ptr[3][t]) + start;
  T* vmax = s.amsgrad ? static_cast<T*>(batch.ptr[4][t]) + start : nullptr;
  int64_t done = 0;
  constexpr int W = Vec<T>::kWidth;
  if (aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v) && (!vmax || aligned16(vmax))) {
    const int64_t nv = n / W;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      Vec<T> pv = reinterpret_cast<const Vec<T>*>(p)[i];
      const Vec<T> gv = reinterpret_cast<const Vec<T>*>(g)[i];
      Vec<T> mv = reinterpret_cast<const Vec<T>*>(m)[i];
      Vec<T> vv = reinterpret_cast<const Vec<T>*>(v)[i];
      Vec<T> xv;
      if (vmax) xv = reinterpret_cast<const Vec<T>*>(vmax)[i];
#pragma unroll
      for (int j = 0; j < W; ++j)
        kernels::adam_element<DeviceRound>(pv.v[j], gv.v[j], mv.v[j], vv.v[j], &xv.v[j], s);
      reinterpret_cast<Vec<T>*>(p)[i] = pv;
      reinterpret_cast<Vec<T>*>(m)[i] = mv;
      reinterpret_cast<Vec<T>*>(v)[i] = vv;
      if (vmax) reinterpret_cast<Vec<T>*>(vmax)[i] = xv;
    }
    done = nv * W;
  }
  for (int64_t i = done + threadIdx.x; i < n; i += blockDim.x)
    kernels::adam_element<DeviceRound>(p[i], g[i], m[i], v[i], vmax ? vmax + i : nullptr, s);
}

// ---- SGD (the element formula: kernels::sgd_element) ----

using kernels::sgd_scalars;
using kernels::SgdScalars;

template <typename T>
__device__ inline void sgd_step_element(T& p, T g, T* buf, const SgdScalars<T>& s) {
  kernels::sgd_element<DeviceRound>(
      p, g, buf, kernels::SgdFlags{s.l2, s.use_momentum, s.first, s.nesterov}, s);
}

template <typename T>
__global__ void __launch_bounds__(kOptimThreads)
    sgd_kernel(TensorBatch<3> batch, int64_t chunk, SgdScalars<T> by_value,
               const SgdScalars<T>* staged, SgdArgs args, const SgdArgs* staged_args) {
  SgdScalars<T> s = staged ? *staged : by_value;
  if (!scaled_scalars(staged_args ? *staged_args : args, &s,
                      [](const SgdArgs& a, int64_t k) { return sgd_scalars<T>(a, k); }))
    return;
  const int t = batch.block_tensor[blockIdx.x];
  const int64_t start = int64_t(batch.block_chunk[blockIdx.x]) * chunk;
  const int64_t n = min(chunk, batch.numel[t] - start);
  T* p = static_cast<T*>(batch.ptr[0][t]) + start;
  const T* g = static_cast<const T*>(batch.ptr[1][t]) + start;
  T* buf = s.use_momentum ? static_cast<T*>(batch.ptr[2][t]) + start : nullptr;
  int64_t done = 0;
  constexpr int W = Vec<T>::kWidth;
  if (aligned16(p) && aligned16(g) && (!buf || aligned16(buf))) {
    const int64_t nv = n / W;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      Vec<T> pv = reinterpret_cast<const Vec<T>*>(p)[i];
      const Vec<T> gv = reinterpret_cast<const Vec<T>*>(g)[i];
      Vec<T> bv;
      if (buf && !s.first) bv = reinterpret_cast<const Vec<T>*>(buf)[i];
#pragma unroll
      for (int j = 0; j < W; ++j) sgd_step_element(pv.v[j], gv.v[j], &bv.v[j], s);
      reinterpret_cast<Vec<T>*>(p)[i] = pv;
      if (buf) reinterpret_cast<Vec<T>*>(buf)[i] = bv;
    }
    done = nv * W;
  }
  for (int64_t i = done + threadIdx.x; i < n; i += blockDim.x)
    sgd_step_element(p[i], g[i], buf ? buf + i : nullptr, s);
}

// ---- optim_step_multi (math: src/kernels/optim.hpp) ----

template <backend::OptimAlgo kAlgo, typename T>
__global__ void __launch_bounds__(kOptimThreads)
    optim_kernel(TensorBatch<5> batch, int64_t chunk, kernels::OptimScalars<T> by_value,
                 const kernels::OptimScalars<T>* staged) {
  const kernels::OptimScalars<T> s = staged ? *staged : by_value;
  const int t = batch.block_tensor[blockIdx.x];
  const int64_t start = int64_t(batch.block_chunk[blockIdx.x]) * chunk;
  const int64_t n = min(chunk, batch.numel[t] - start);
  T* p = static_cast<T*>(batch.ptr[0][t]) + start;
  const T* g = static_cast<const T*>(batch.ptr[1][t]) + start;
  T* s0 = static_cast<T*>(batch.ptr[2][t]) + start;
  T* s1 = batch.ptr[3][t] ? static_cast<T*>(batch.ptr[3][t]) + start : nullptr;
  T* s2 = batch.ptr[4][t] ? static_cast<T*>(batch.ptr[4][t]) + start : nullptr;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    kernels::optim_element<kAlgo, DeviceRound>(p, g, s0, s1, s2, i, s);
}

// ---- gradient norm and clipping ----
//
// Note [Norm and clip at memory speed]
// Both kernels are bound by memory: the norm reads every gradient once, the clip reads and
// writes it once. Each (tensor, chunk) piece is split at run time into a scalar head up to
// the first 16-byte boundary (a view need not start on one), a body of Vec<T>s and a scalar
// tail (chunks are multiples of 1024 elements, so only a tensor's first chunk can have a
// head). In the body every thread issues kVecUnroll independent 16-byte loads before using
// any. The element-to-thread mapping and the order of the adds depend only on the piece's
// size and its start modulo 16 bytes, so a norm gives the same bits every run.

enum class NormKind : int { two, inf, p };

constexpr int kVecUnroll = 4;  // 16-byte vectors in flight per thread

// A piece of n elements at `x`: `head` scalars up to the first 16-byte boundary, then
// `vecs` Vec<T>s, then the scalar tail.
struct VecSplit {
  int64_t head, vecs;
};

template <typename T>
__device__ inline VecSplit vec_split(const T* x, int64_t n) {
  const auto a = reinterpret_cast<uintptr_t>(x);
  if (a % sizeof(T) != 0) return {n, 0};  // not even element-aligned: all scalar
  const int64_t head = min(n, static_cast<int64_t>(((16 - (a & 15u)) & 15u) / sizeof(T)));
  return {head, (n - head) / Vec<T>::kWidth};
}

// |g|^p summed (two, p) or max |g| (inf; NaN propagates), in f64.
__device__ inline double norm_term(double a, NormKind kind, double p) {
  a = fabs(a);
  return kind == NormKind::two ? a * a : kind == NormKind::p ? pow(a, p) : a;
}
__device__ inline double norm_combine(double x, double y, NormKind kind) {
  if (kind != NormKind::inf) return x + y;
  return (x != x || x > y) ? x : y;  // keeps a NaN from either side
}

// Combines `v` over the block in a fixed order; thread 0 gets the result.
__device__ double block_combine(double v, NormKind kind, double* shared) {
  for (int off = 16; off > 0; off /= 2)
    v = norm_combine(v, __shfl_down_sync(0xffffffffu, v, off), kind);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = blockDim.x / 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : 0.0;
    for (int off = 16; off > 0; off /= 2)
      v = norm_combine(v, __shfl_down_sync(0xffffffffu, v, off), kind);
  }
  return v;
}

// kKind is a template argument so the per-element branch folds away (Note [Norm and clip at
// memory speed]).
template <typename T, NormKind kKind>
__global__ void __launch_bounds__(kOptimThreads)
    norm_partial_kernel(TensorBatch<1> batch, int64_t chunk, int64_t first_block,
                        double* __restrict partials, double p) {
  __shared__ double shared[kOptimThreads / 32];
  constexpr int W = Vec<T>::kWidth;
  const int t = batch.block_tensor[blockIdx.x];
  const int64_t start = int64_t(batch.block_chunk[blockIdx.x]) * chunk;
  const int64_t n = min(chunk, batch.numel[t] - start);
  const T* __restrict g = static_cast<const T*>(batch.ptr[0][t]) + start;
  const VecSplit split = vec_split(g, n);
  const Vec<T>* __restrict body = reinterpret_cast<const Vec<T>*>(g + split.head);
  const int64_t stride = blockDim.x;
  double acc[kVecUnroll] = {};  // one chain per vector in flight, combined in order below
  int64_t i = threadIdx.x;
  for (; i + (kVecUnroll - 1) * stride < split.vecs; i += kVecUnroll * stride) {
    Vec<T> v[kVecUnroll];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) v[u] = body[i + u * stride];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u)
#pragma unroll
      for (int j = 0; j < W; ++j)
        acc[u] = norm_combine(acc[u], norm_term(static_cast<double>(v[u].v[j]), kKind, p), kKind);
  }
  for (; i < split.vecs; i += stride) {  // fewer than kVecUnroll vectors left for this thread
    const Vec<T> v = body[i];
#pragma unroll
    for (int j = 0; j < W; ++j)
      acc[0] = norm_combine(acc[0], norm_term(static_cast<double>(v.v[j]), kKind, p), kKind);
  }
  for (int64_t k = threadIdx.x; k < split.head; k += stride)
    acc[0] = norm_combine(acc[0], norm_term(static_cast<double>(g[k]), kKind, p), kKind);
  for (int64_t k = split.head + split.vecs * W + threadIdx.x; k < n; k += stride)
    acc[0] = norm_combine(acc[0], norm_term(static_cast<double>(g[k]), kKind, p), kKind);
  double sum = acc[0];
#pragma unroll
  for (int u = 1; u < kVecUnroll; ++u) sum = norm_combine(sum, acc[u], kKind);
  sum = block_combine(sum, kKind, shared);
  if (threadIdx.x == 0) partials[first_block + blockIdx.x] = sum;
}

template <typename T>
__global__ void __launch_bounds__(kOptimThreads)
    norm_final_kernel(const double* __restrict partials, int64_t count, T* __restrict total,
                      NormKind kind, double p) {
  __shared__ double shared[kOptimThreads / 32];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
    acc = norm_combine(acc, partials[i], kind);
  acc = block_combine(acc, kind, shared);
  if (threadIdx.x == 0) {
    const double r = kind == NormKind::two ? sqrt(acc)
                     : kind == NormKind::p ? pow(acc, 1.0 / p)
                                           : acc;
    *total = static_cast<T>(r);
  }
}

// Scales by max_norm / (total + 1e-6) when that is below 1, each product rounded once
// (mul_rn: the CPU's bits). Vector body as norm_partial_kernel's.
template <typename T>
__global__ void __launch_bounds__(kOptimThreads)
    clip_kernel(TensorBatch<1> batch, int64_t chunk, const T* __restrict total, double max_norm) {
  const double coef = max_norm / (static_cast<double>(*total) + 1e-6);
  if (!(coef < 1.0)) return;  // clip_coef_clamped = 1: the gradients stay as they are
  const T c = static_cast<T>(coef);
  constexpr int W = Vec<T>::kWidth;
  const int t = batch.block_tensor[blockIdx.x];
  const int64_t start = int64_t(batch.block_chunk[blockIdx.x]) * chunk;
  const int64_t n = min(chunk, batch.numel[t] - start);
  T* __restrict g = static_cast<T*>(batch.ptr[0][t]) + start;
  const VecSplit split = vec_split(g, n);
  Vec<T>* __restrict body = reinterpret_cast<Vec<T>*>(g + split.head);
  const int64_t stride = blockDim.x;
  int64_t i = threadIdx.x;
  for (; i + (kVecUnroll - 1) * stride < split.vecs; i += kVecUnroll * stride) {
    Vec<T> v[kVecUnroll];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) v[u] = body[i + u * stride];
#pragma unroll
    for (int u = 0; u < kVecUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < W; ++j) v[u].v[j] = mul_rn(v[u].v[j], c);
      body[i + u * stride] = v[u];
    }
  }
  for (; i < split.vecs; i += stride) {
    Vec<T> v = body[i];
#pragma unroll
    for (int j = 0; j < W; ++j) v.v[j] = mul_rn(v.v[j], c);
    body[i] = v;
  }
  for (int64_t k = threadIdx.x; k < split.head; k += stride) g[k] = mul_rn(g[k], c);
  for (int64_t k = split.head + split.vecs * W + threadIdx.x; k < n; k += stride)
    g[k] = mul_rn(g[k], c);
}

// ---- loss scaling (GradScaler) ----

template <typename T>
__global__ void __launch_bounds__(kOptimThreads)
    amp_unscale_kernel(TensorBatch<1> batch, int64_t chunk, const float* __restrict scale,
                       float* __restrict found_inf) {
  // torch: inv_scale = scale.double().reciprocal().float(), multiplied in the grad's opmath.
  const T inv = static_cast<T>(static_cast<float>(1.0 / static_cast<double>(*scale)));
  const int t = batch.block_tensor[blockIdx.x];
  const int64_t start = int64_t(batch.block_chunk[blockIdx.x]) * chunk;
  const int64_t n = min(chunk, batch.numel[t] - start);
  T* g = static_cast<T*>(batch.ptr[0][t]) + start;
  bool bad = false;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const T v = g[i];
    bad |= !isfinite(v);
    g[i] = mul_rn(v, inv);
  }
  if (bad) *found_inf = 1.0f;  // every writer writes the same value
}

constexpr int kMaxAmpOptimizers = 64;  // optimizers of one GradScaler::update

struct AmpFlags {
  const float* found[kMaxAmpOptimizers];
  int64_t* skipped[kMaxAmpOptimizers];
};

__global__ void amp_update_kernel(float* scale, int32_t* tracker, float* found_combined,
                                  AmpFlags flags, int count, double growth, double backoff,
                                  int64_t interval) {
  bool found = false;
  for (int i = 0; i < count; ++i) found |= *flags.found[i] != 0.0f;
  *found_combined = found ? 1.0f : 0.0f;
  if (scale) kernels::amp_update_scale_rule(*scale, *tracker, found, growth, backoff, interval);
  for (int i = 0; i < count; ++i)
    if (flags.skipped[i] && *flags.found[i] != 0.0f) *flags.skipped[i] += 1;
}

// A grow-only f64 scratch buffer per device for the norm's partial sums (never freed).
double* partials_for(int device, int64_t count) {
  static std::mutex mutex;
  static double* buffers[kMaxDevices] = {};
  static int64_t sizes[kMaxDevices] = {};
  EMBER_ASSERT(device >= 0 && device < kMaxDevices, "grad_norm: device ", device, " out of range");
  std::lock_guard<std::mutex> lock(mutex);
  if (sizes[device] < count) {
    const int64_t size = std::max<int64_t>(count, 4096);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    // cudaFree waits for the device, so no kernel still reads the old buffer.
    if (buffers[device]) EMBER_CUDA_CHECK(cudaFree(buffers[device]));
    EMBER_CUDA_CHECK(cudaMalloc(&buffers[device], static_cast<size_t>(size) * sizeof(double)));
    sizes[device] = size;
  }
  return buffers[device];
}

// The elements of all slots; every non-empty slot must have state buffer `needed` (when
// `needed` >= 0: amsgrad's max_exp_avg_sq, SGD's momentum buffer).
int64_t slots_total(const OptimSlot* slots, int64_t count, int needed, const char* what) {
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) {
    EMBER_ASSERT(needed < 0 || slots[i].numel == 0 || slots[i].state[needed] != nullptr, what,
                 " needs its state buffer");
    total += slots[i].numel;
  }
  return total;
}

// Runs launch(batch, blocks) over the slots as multi_tensor_apply's lists: param, grad, then
// the state buffers (Depth - 2 of them).
template <int Depth, typename Launch>
void apply_to_slots(const OptimSlot* slots, int64_t count, int64_t chunk, Launch&& launch) {
  multi_tensor_apply<Depth>(
      count, chunk,
      [&](int64_t t, int d) {
        return d == 0   ? slots[t].param
               : d == 1 ? const_cast<void*>(slots[t].grad)
                        : slots[t].state[d - 2];
      },
      [&](int64_t t) { return slots[t].numel; },
      [&](const TensorBatch<Depth>& batch, int blocks, int64_t) {
        launch(batch, blocks);
        EMBER_CUDA_LAUNCH_CHECK();
      });
}

// Stages the scalars `s` of one optimizer launch over `slots` (Note [Captured steps] in
// graph.cu): false when the launch is to be skipped (the host side of a replay).
template <typename S>
bool stage(int device, DType dtype, const OptimSlot* slots, int64_t count, const S& s,
           const char* op, const S** staged) {
  uint64_t print = graph::fingerprint(&dtype, sizeof dtype);
  print = graph::fingerprint(slots, sizeof(OptimSlot) * static_cast<size_t>(count), print);
  const void* where = nullptr;
  const graph::Staged how = graph::stage_scalars(device, &s, sizeof s, print, op, &where);
  *staged = static_cast<const S*>(where);
  return how != graph::Staged::skip;
}

// Runs launch(batch, blocks, first_block) over a list of buffers (the gradients of clipping and
// unscaling), as multi_tensor_apply, checking each launch.
template <typename Launch>
void apply_to_list(void* const* ptrs, const int64_t* numels, int64_t count, int64_t chunk,
                   Launch&& launch) {
  multi_tensor_apply<1>(
      count, chunk, [&](int64_t t, int) { return ptrs[t]; }, [&](int64_t t) { return numels[t]; },
      [&](const TensorBatch<1>& batch, int blocks, int64_t first_block) {
        launch(batch, blocks, first_block);
        EMBER_CUDA_LAUNCH_CHECK();
      });
}

int64_t total_of(const int64_t* numels, int64_t count) {
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) total += numels[i];
  return total;
}

}  // namespace

void adam_step_multi(int device, DType dtype, const OptimSlot* slots, int64_t count,
                     const AdamArgs& args) {
  if (count == 0) return;
  const cudaStream_t st = stream(device);
  const int64_t chunk =
      chunk_for(slots_total(slots, count, args.amsgrad ? 2 : -1, "adam_step: amsgrad"));
  dispatch_float(dtype, "adam_step", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const AdamScalars<T> s = adam_scalars<T>(args);
    const AdamScalars<T>* staged = nullptr;
    const AdamArgs* staged_args = nullptr;  // with skipped_steps the kernel makes the scalars
    if (args.skipped_steps ? !stage(device, dtype, slots, count, args, "adam_step", &staged_args)
                           : !stage(device, dtype, slots, count, s, "adam_step", &staged))
      return;
    apply_to_slots<5>(slots, count, chunk, [&](const TensorBatch<5>& batch, int blocks) {
      adam_kernel<T><<<blocks, kOptimThreads, 0, st>>>(batch, chunk, s, staged, args, staged_args);
    });
  });
}

void sgd_step_multi(int device, DType dtype, const OptimSlot* slots, int64_t count,
                    const SgdArgs& args) {
  if (count == 0) return;
  const cudaStream_t st = stream(device);
  const int64_t chunk =
      chunk_for(slots_total(slots, count, args.momentum != 0.0 ? 0 : -1, "sgd_step: momentum"));
  dispatch_float(dtype, "sgd_step", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const SgdScalars<T> s = sgd_scalars<T>(args);
    const SgdScalars<T>* staged = nullptr;
    const SgdArgs* staged_args = nullptr;
    if (args.skipped_steps ? !stage(device, dtype, slots, count, args, "sgd_step", &staged_args)
                           : !stage(device, dtype, slots, count, s, "sgd_step", &staged))
      return;
    apply_to_slots<3>(slots, count, chunk, [&](const TensorBatch<3>& batch, int blocks) {
      sgd_kernel<T><<<blocks, kOptimThreads, 0, st>>>(batch, chunk, s, staged, args, staged_args);
    });
  });
}

void optim_step_multi(int device, DType dtype, const OptimSlot* slots, int64_t count,
                      const backend::OptimArgs& args) {
  if (count == 0) return;
  for (int64_t i = 0; i < count; ++i)
    for (int k = 0; k < 3; ++k)
      EMBER_ASSERT(!kernels::optim_uses_state(args, k) || slots[i].numel == 0 ||
                       slots[i].state[k] != nullptr,
                   "optim_step_multi: slot ", i, " lacks state buffer ", k);
  const cudaStream_t st = stream(device);
  const int64_t chunk = chunk_for(slots_total(slots, count, -1, "optim_step"));
  dispatch_float(dtype, "optim_step", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const kernels::OptimScalars<T> s = kernels::optim_scalars<T>(args);
    const kernels::OptimScalars<T>* staged = nullptr;
    if (!stage(device, dtype, slots, count, s, "optim_step", &staged)) return;
    kernels::with_optim_algo(args.algo, [&](auto algo) {
      constexpr backend::OptimAlgo kAlgo = decltype(algo)::value;
      apply_to_slots<5>(slots, count, chunk, [&](const TensorBatch<5>& batch, int blocks) {
        optim_kernel<kAlgo, T><<<blocks, kOptimThreads, 0, st>>>(batch, chunk, s, staged);
      });
    });
  });
}

void grad_norm_multi(int device, DType dtype, void* const* grads, const int64_t* numels,
                     int64_t count, double norm_type, void* total_norm) {
  EMBER_ASSERT(norm_type > 0.0, "clip_grad_norm: invalid norm_type ", norm_type,
               " (expected p > 0 or infinity)");
  const NormKind kind = std::isinf(norm_type) ? NormKind::inf
                        : norm_type == 2.0    ? NormKind::two
                                              : NormKind::p;
  const cudaStream_t st = stream(device);
  const int64_t chunk = chunk_for(total_of(numels, count));
  int64_t blocks_total = 0;
  for (int64_t i = 0; i < count; ++i) blocks_total += (numels[i] + chunk - 1) / chunk;
  double* partials = partials_for(device, std::max<int64_t>(blocks_total, 1));
  dispatch_float(dtype, "clip_grad_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    apply_to_list(
        grads, numels, count, chunk,
        [&](const TensorBatch<1>& batch, int blocks, int64_t first_block) {
          const auto kernel = kind == NormKind::two   ? norm_partial_kernel<T, NormKind::two>
                              : kind == NormKind::inf ? norm_partial_kernel<T, NormKind::inf>
                                                      : norm_partial_kernel<T, NormKind::p>;
          kernel<<<blocks, kOptimThreads, 0, st>>>(batch, chunk, first_block, partials, norm_type);
        });
    norm_final_kernel<T><<<1, kOptimThreads, 0, st>>>(partials, blocks_total,
                                                      static_cast<T*>(total_norm), kind, norm_type);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void clip_grads_by_norm(int device, DType dtype, void* const* grads, const int64_t* numels,
                        int64_t count, double max_norm, const void* total_norm) {
  const cudaStream_t st = stream(device);
  const int64_t chunk = chunk_for(total_of(numels, count));
  dispatch_float(dtype, "clip_grad_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    apply_to_list(grads, numels, count, chunk,
                  [&](const TensorBatch<1>& batch, int blocks, int64_t) {
                    clip_kernel<T><<<blocks, kOptimThreads, 0, st>>>(
                        batch, chunk, static_cast<const T*>(total_norm), max_norm);
                  });
  });
}

void amp_unscale(int device, DType dtype, void* const* grads, const int64_t* numels, int64_t count,
                 const void* scale, void* found_inf) {
  const cudaStream_t st = stream(device);
  const int64_t chunk = chunk_for(total_of(numels, count));
  dispatch_float(dtype, "amp_unscale", [&](auto tag) {
    using T = typename decltype(tag)::type;
    apply_to_list(
        grads, numels, count, chunk, [&](const TensorBatch<1>& batch, int blocks, int64_t) {
          amp_unscale_kernel<T><<<blocks, kOptimThreads, 0, st>>>(
              batch, chunk, static_cast<const float*>(scale), static_cast<float*>(found_inf));
        });
  });
}

void amp_update_scale(int device, void* scale, void* growth_tracker, void* found_combined,
                      const float* const* found_infs, int64_t* const* skipped_steps, int64_t count,
                      double growth_factor, double backoff_factor, int64_t growth_interval) {
  EMBER_CHECK(count <= kMaxAmpOptimizers, "GradScaler.update: at most ", kMaxAmpOptimizers,
              " optimizers per scaler (got ", count, ")");
  AmpFlags flags{};
  for (int64_t i = 0; i < count; ++i) {
    flags.found[i] = found_infs[i];
    flags.skipped[i] = skipped_steps[i];
  }
  amp_update_kernel<<<1, 1, 0, stream(device)>>>(
      static_cast<float*>(scale), static_cast<int32_t*>(growth_tracker),
      static_cast<float*>(found_combined), flags, static_cast<int>(count), growth_factor,
      backoff_factor, growth_interval);
  EMBER_CUDA_LAUNCH_CHECK();
}

}  // namespace ember::cuda
