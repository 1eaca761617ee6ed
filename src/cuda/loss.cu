// src/cuda/loss.cu — fused softmax cross-entropy with class-index targets on CUDA,
// forward and backward (the contract is beside the slots in src/backend/backend.hpp; the
// formulas and roundings are the CPU kernel's, src/cpu/loss.cpp).
//
// Shape letters: logits [N, C] contiguous f32/f64, target [N] contiguous i64/i32.
// forward:  one warp per row computes max, Σ exp(x - max) and Σ x (sums in f64), then
//           lse[i] and loss_rows[i] in one pass over the row; a label outside [0, C) that is
//           not ignore_index is recorded in the deferred error record (Note [Deferred device
//           errors] in device_error.cuh) and its row's loss is NaN. When a reduced loss is
//           asked for, one 256-thread block then sums the rows and counts the non-ignored
//           ones in a fixed order (deterministic) and writes total (and count): two launches,
//           no host sync.
// backward: one warp per row writes gi_c = s·(exp(x_c - lse) - ε/C) - [c == t]·s·(1-ε),
//           with s read on the device (grad_loss[i], or grad_loss[] / count[]).
#include <algorithm>
#include <cmath>

#include "cuda/common.cuh"
#include "cuda/device_error.cuh"
#include "cuda/loops.cuh"
#include "ember/error.hpp"
#include "kernels/reduce.hpp"

namespace ember::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kBlock / kWarp;  // one warp per row
constexpr unsigned kFull = 0xffffffffu;

using kernels::max_nan;  // NaN in either operand wins

template <typename T>
__device__ inline T warp_max(T v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = max_nan(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

__device__ inline double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// T is the logits' dtype, A = Compute<T> the dtype of the losses, lse and every step of the
// math (f32 for f16/bf16 logits: Note [Cross-entropy of 16-bit logits] in src/ops/loss.cpp).
template <typename T, typename I, typename A = Compute<T>>
__global__ void forward_kernel(A* __restrict loss, A* __restrict lse_out, const T* __restrict x,
                               const I* __restrict target, int64_t n, int64_t c,
                               int64_t ignore_index, double eps, DeviceError* error) {
  const int lane = threadIdx.x % kWarp;
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp;
  if (r >= n) return;  // whole warps leave together
  const T* row = x + r * c;
  A m = A(-INFINITY);
  for (int64_t j = lane; j < c; j += kWarp) m = max_nan(m, cast<A>(row[j]));
  m = warp_max(m);
  double s = 0.0, sx = 0.0;
  for (int64_t j = lane; j < c; j += kWarp) {
    const A v = cast<A>(row[j]);
    s += static_cast<double>(exp(static_cast<A>(v - m)));
    sx += static_cast<double>(v);
  }
  s = warp_sum(s);
  sx = warp_sum(sx);
  if (lane != 0) return;
  const double l = static_cast<double>(m) + log(s);
  lse_out[r] = static_cast<A>(l);
  const int64_t label = static_cast<int64_t>(target[r]);
  if (label == ignore_index) {
    loss[r] = A(0);
    return;
  }
  if (label < 0 || label >= c) {
    report_device_error(error, kCrossEntropyLabel, 1, label, r, c);
    loss[r] = A(NAN);
    return;
  }
  const double nll = l - static_cast<double>(cast<A>(row[label]));
  const double smooth = eps / static_cast<double>(c);
  loss[r] = static_cast<A>(
      eps > 0.0 ? (1.0 - eps) * nll + smooth * (static_cast<double>(c) * l - sx) : nll);
}

// One block: total = Σ loss (÷ count when count is wanted), count = rows not ignored.
template <typename T, typename I>
__global__ void total_kernel(T* total, T* count, const T* __restrict loss,
                             const I* __restrict target, int64_t n, int64_t ignore_index) {
  __shared__ double sums[kBlock], valid[kBlock];
  double s = 0.0, v = 0.0;
  for (int64_t r = threadIdx.x; r < n; r += kBlock) {
    s += static_cast<double>(loss[r]);
    v += static_cast<int64_t>(target[r]) != ignore_index ? 1.0 : 0.0;
  }
  sums[threadIdx.x] = s;
  valid[threadIdx.x] = v;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      valid[threadIdx.x] += valid[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  if (count) *count = static_cast<T>(valid[0]);
  if (total) *total = static_cast<T>(count ? sums[0] / valid[0] : sums[0]);
}

// The gradient in the logits' dtype T, computed in A and rounded once (as the cast back of
// the f32 gradient would round it).
template <typename T, typename I, typename A = Compute<T>>
__global__ void backward_kernel(T* __restrict gi, const A* __restrict g, bool per_row,
                                const A* __restrict count, const T* __restrict x,
                                const I* __restrict target, const A* __restrict lse, int64_t n,
                                int64_t c, int64_t ignore_index, A smooth, A hit) {
  const int lane = threadIdx.x % kWarp;
  const int64_t r = blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kWarp;
  if (r >= n) return;
  T* out = gi + r * c;
  const int64_t label = static_cast<int64_t>(target[r]);
  if (label == ignore_index) {
    for (int64_t j = lane; j < c; j += kWarp) out[j] = cast<T>(A(0));
    return;
  }
  const A s = per_row ? g[r] : (count ? g[0] / *count : g[0]);
  const T* row = x + r * c;
  const A l = lse[r];
  for (int64_t j = lane; j < c; j += kWarp) {
    A v = s * (exp(static_cast<A>(cast<A>(row[j]) - l)) - smooth);
    if (j == label) v -= s * hit;
    out[j] = cast<T>(v);
  }
}

unsigned row_grid(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, (n + kRowsPerBlock - 1) / kRowsPerBlock));
}

}  // namespace

void cross_entropy_forward(const View& loss_rows, const View& lse, const View& total,
                           const View& count, const View& logits, const View& target,
                           int64_t ignore_index, double label_smoothing) {
  EMBER_ASSERT(logits.shape.size() == 2, "cross_entropy: logits must be [N, C]");
  const int64_t n = logits.shape[0], c = logits.shape[1];
  const int device = logits.device;
  cudaStream_t st = stream(device);
  DeviceError* error = device_error_record(device);
  kernels::dispatch_index(target.dtype, "cross_entropy", "target", [&](auto label_tag) {
    using I = typename decltype(label_tag)::type;
    dispatch_any_float(logits.dtype, "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = Compute<T>;
      const I* t = static_cast<const I*>(target.data);
      if (n > 0) {
        forward_kernel<T, I><<<row_grid(n), kBlock, 0, st>>>(
            static_cast<A*>(loss_rows.data), static_cast<A*>(lse.data),
            static_cast<const T*>(logits.data), t, n, c, ignore_index, label_smoothing, error);
        EMBER_CUDA_LAUNCH_CHECK();
      }
      if (total.data || count.data) {
        total_kernel<A, I>
            <<<1, kBlock, 0, st>>>(static_cast<A*>(total.data), static_cast<A*>(count.data),
                                   static_cast<const A*>(loss_rows.data), t, n, ignore_index);
        EMBER_CUDA_LAUNCH_CHECK();
      }
    });
  });
}

void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& count,
                            const View& logits, const View& target, const View& lse,
                            int64_t ignore_index, double label_smoothing) {
  const int64_t n = logits.shape[0], c = logits.shape[1];
  if (n == 0 || c == 0) return;
  const int device = logits.device;
  cudaStream_t st = stream(device);
  const bool per_row = grad_loss.shape.size() == 1;
  kernels::dispatch_index(target.dtype, "cross_entropy", "target", [&](auto label_tag) {
    using I = typename decltype(label_tag)::type;
    dispatch_any_float(logits.dtype, "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      using A = Compute<T>;
      backward_kernel<T, I><<<row_grid(n), kBlock, 0, st>>>(
          static_cast<T*>(grad_logits.data), static_cast<const A*>(grad_loss.data), per_row,
          static_cast<const A*>(count.data), static_cast<const T*>(logits.data),
          static_cast<const I*>(target.data), static_cast<const A*>(lse.data), n, c, ignore_index,
          static_cast<A>(label_smoothing / static_cast<double>(c)),
          static_cast<A>(1.0 - label_smoothing));
      EMBER_CUDA_LAUNCH_CHECK();
    });
  });
}

}  // namespace ember::cuda
