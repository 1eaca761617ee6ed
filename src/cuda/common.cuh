// src/cuda/common.cuh — what every CUDA kernel file shares: the checked-call macros, the
// per-device stream, and the declarations of every slot of the CUDA kernel table
// (src/cuda/backend_cuda.cpp fills the table from the same list).
#pragma once

#include <cuda_runtime.h>

#include "backend/backend.hpp"
#include "backend/device_runtime.hpp"
#include "kernels/common.hpp"

namespace ember::cuda {

/// Throws ember::Error naming the failing call, the CUDA error name and text, and file:line.
[[noreturn]] void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line);

/// Makes `device` current on this thread and returns its one stream (created on first use).
cudaStream_t stream(int device);

/// Number of threads per block for 1-D elementwise launches, and the grid for n elements.
inline constexpr int kBlock = 256;
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 65535 * 16 ? (blocks > 0 ? blocks : 1) : 65535 * 16);
}

// ---- dtype dispatch (host): src/kernels/common.hpp, naming this backend in errors ----
using kernels::Tag;

/// Calls f(Tag<T>{}) for f32/f64; `op` names the kernel in the error for anything else.
template <typename F>
void dispatch_float(DType t, const char* op, F&& f) {
  kernels::dispatch_float(t, op, "CUDA", f);
}
/// f32/f64/i32/i64.
template <typename F>
void dispatch_numeric(DType t, const char* op, F&& f) {
  kernels::dispatch_numeric(t, op, "CUDA", f);
}

// ---- every Backend slot (src/backend/slots.def), defined in the .cu/.cpp of its family ----
#include "backend/slot_declarations.inc"

}  // namespace ember::cuda

/// Checks a CUDA runtime call; the error names the call. Example: EMBER_CUDA_CHECK(cudaFree(p));
#define EMBER_CUDA_CHECK(call)                                                     \
  do {                                                                             \
    const cudaError_t ember_cuda_err_ = (call);                                    \
    if (ember_cuda_err_ != cudaSuccess)                                            \
      ::ember::cuda::throw_cuda_error(#call, ember_cuda_err_, __FILE__, __LINE__); \
  } while (0)

/// Checks the launch just made (bad configuration, missing kernel image).
#define EMBER_CUDA_LAUNCH_CHECK() EMBER_CUDA_CHECK(cudaGetLastError())

// ---- shared by the kernel files (index, conv, optim, norm) ----
namespace ember::cuda {

// Scratch device memory from the Pass pool, returned when the scope ends (stream-ordered:
// later kernels on the same stream run after the ones that use it).
class Scratch {
 public:
  Scratch(int device, size_t bytes) : device_(device) {
    ptr_ = allocate(device, bytes, Pool::Pass, &block_);
  }
  ~Scratch() { deallocate(device_, ptr_, block_, Pool::Pass); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  void* get() const { return ptr_; }

 private:
  int device_;
  void* ptr_ = nullptr;
  size_t block_ = 0;
};

// ---- multi-tensor optimizer steps and gradient clipping (optim.cu) ----
// One launch updates up to 128 parameters (more are split over launches); see
// Note [Multi-tensor apply] in optim.cu. Every pointer is a contiguous device buffer
// of `numel` elements of the call's dtype, all on one device.

using backend::OptimSlot;  // see backend.hpp

/// Adam/AdamW on every slot with the same args (same step count).
void adam_step_multi(int device, DType dtype, const OptimSlot* slots, int64_t count,
                     const AdamArgs& args);
/// SGD on every slot with the same args.
void sgd_step_multi(int device, DType dtype, const OptimSlot* slots, int64_t count,
                    const SgdArgs& args);

/// total_norm (a device scalar of `dtype`, may be on the same device as the grads) = the
/// norm of order norm_type (p > 0 or +inf) of all grads together, with no host sync.
/// Sums of p-th powers accumulate in f64, in a fixed order (deterministic).
void grad_norm_multi(int device, DType dtype, void* const* grads, const int64_t* numels,
                     int64_t count, double norm_type, void* total_norm);
/// grads *= min(1, max_norm / (total_norm + 1e-6)) with total_norm read on the device
/// (torch.nn.utils.clip_grad_norm_'s clip_coef_clamped), no host sync.
void clip_grads_by_norm(int device, DType dtype, void* const* grads, const int64_t* numels,
                        int64_t count, double max_norm, const void* total_norm);

}  // namespace ember::cuda
