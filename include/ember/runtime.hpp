// ember/runtime.hpp — process-wide settings: CPU threads; the ReLU fold; synchronous device
// errors; poisoned allocations; deterministic mode; float32 matmul precision (TF32); CUDA
// device descriptions.
#pragma once

#include <string>

#include "ember/device.hpp"

namespace ember {

/// Threads ember's CPU kernels (and OpenBLAS, kept in step) use. Default: EMBER_NUM_THREADS,
/// else the number of cores. Example: set_num_threads(1);
void set_num_threads(int n);
int get_num_threads();

/// Whether Linear + ReLU → Linear folds ReLU's backward and the first bias gradient into the
/// next linear's input-gradient GEMM on devices of `type` (docs/cuda.md: gradients equal the
/// plain path within rounding). Default: on for the CPU (as fast or faster there), off for
/// CUDA (cuBLASLt's DRELU_BGRAD / RELU_AUX kernels measured slower than the plain path on the
/// H200: docs/benchmarks.md). EMBER_RELU_FOLD=1 or 0 sets both at start. Example:
///   set_relu_fold(DeviceType::cuda, true);
void set_relu_fold(DeviceType type, bool on);
bool relu_fold(DeviceType type);

/// Debugging device-side errors (an out-of-range index in a CUDA kernel): normally they are
/// reported at the next synchronisation (item(), to_vector(), .to(cpu), synchronize()),
/// after later ops were queued. With this on, every op first waits for the device and checks,
/// so the error is raised before the next op runs and names the op whose kernels raised it.
/// Slow (a host synchronisation per op): for finding a bug, not for training. Default off;
/// EMBER_CUDA_SYNC_ERRORS=1 turns it on at start. Example: set_sync_errors(true);
void set_sync_errors(bool on);
bool sync_errors();

/// Debugging reads of memory no kernel wrote: while on, every block the caching allocators
/// hand out (CPU and CUDA, every pool) is first filled with 0xFF bytes, which read as NaN in
/// every floating dtype and as -1 in signed integers. A result that depends on an unwritten
/// element then turns NaN (or wildly wrong) instead of quietly taking the stale values of the
/// block's last owner. A block a captured step allocates is filled once, when the capture
/// allocates it, not on each replay. Costs a memset per allocation (on CUDA one queued
/// cudaMemsetAsync): for finding a bug or checking a test suite, not for training. Default
/// off; EMBER_POISON_ALLOCATIONS=1 turns it on at start. Example:
///   set_poison_allocations(true);
void set_poison_allocations(bool on);
bool poison_allocations();

/// Deterministic mode (PyTorch: torch.use_deterministic_algorithms(true)): while on, every op
/// runs kernels whose results are bitwise the same from run to run (same GPU, same ember, CUDA
/// and cuDNN). On CUDA: index_add, scatter / scatter_add / scatter_reduce and the backward of
/// index_select, embedding and gather sort their indices instead of adding with atomics; the
/// fused attention backward builds cuDNN's deterministic graph (or the composed path runs);
/// GEMM and attention engines are never chosen by timing (EMBER_GEMM_AUTOTUNE and
/// EMBER_SDPA_AUTOTUNE are ignored). An op with no deterministic route refuses, naming itself.
/// Slower where many indices repeat. The CPU backend is deterministic either way. Default off;
/// EMBER_DETERMINISTIC=1 turns it on at start. docs/cuda.md lists the ops it changes.
/// Example: set_deterministic(true);
void set_deterministic(bool on);
bool deterministic();

/// How f32 matrix products may be computed (torch.set_float32_matmul_precision):
///   "highest"  full f32 (the default): CUDA GEMMs compute in f32 (CUBLAS_COMPUTE_32F), within
///              f32 rounding of the CPU;
///   "high"     f32 GEMMs on CUDA may use TF32 tensor cores (10-bit mantissa products, f32
///              accumulation: CUBLAS_COMPUTE_32F_FAST_TF32), faster and to about 1e-3 relative;
///   "medium"   accepted as PyTorch does; ember treats it as "high" (as PyTorch does on CUDA,
///              where "medium" also means TF32).
/// Applies to f32 matmul, linear, bmm, addmm and the GEMMs of convolutions' im2col path on
/// CUDA; f64, f16 and bf16 GEMMs and the CPU are unaffected (the CPU always computes f32).
/// Refuses any other string, listing the accepted ones. docs/mixed_precision.md has the H200's
/// speed and error for each. Example: set_float32_matmul_precision("high");
void set_float32_matmul_precision(const std::string& precision);
/// "highest", "high" or "medium": the last value set.
std::string get_float32_matmul_precision();

/// Where matrix decompositions of CUDA tensors run (torch.backends.cuda.preferred_linalg_library):
///   "default"   cuSOLVER for matrices at least as large as the size from which it is measured
///               faster than the host route on the H200, the host route below it; until that
///               measurement is made (docs/ops.md says whether it is), the host route always;
///   "cusolver"  cuSOLVER (and cuBLAS's trsm for the triangular solves) for every size;
///   "host"      the host route: the matrices are copied to host memory, factored by the CPU's
///               LAPACK (OpenBLAS) and the results copied back.
/// Applies to inv, det, solve, cholesky, qr, svd, eigh, lu and the triangular solves (and what
/// is built on them: pinv, lstsq, slogdet, ...). When cuSOLVER cannot be loaded (a machine with
/// the CUDA runtime but not libcusolver), every setting takes the host route and
/// linalg_fallback_reason() says why. Refuses any other string, listing the accepted ones.
/// Default "default"; EMBER_LINALG_LIBRARY=cusolver|host sets it at start.
/// Example: set_preferred_linalg_library("cusolver");
void set_preferred_linalg_library(const std::string& library);
/// "default", "cusolver" or "host": the last value set.
std::string preferred_linalg_library();
/// Why the last decomposition of a CUDA tensor on this thread took the host route ("" when it
/// ran on cuSOLVER, or none has run). Example: "cuSOLVER: 8x8 is below the 64x64 from which
/// it is faster (lu; preferred_linalg_library \"default\")".
std::string linalg_fallback_reason();

namespace detail {
/// 0 "default", 1 "cusolver", 2 "host" (what the CUDA backend reads).
int linalg_library() noexcept;
/// Set by the CUDA backend at each decomposition (linalg_fallback_reason()).
void set_linalg_fallback_reason(std::string reason);
/// True when f32 GEMMs and convolutions on CUDA may use TF32 ("high" or "medium"): what a
/// CUDA kernel's choice of compute type reads (one relaxed atomic load).
bool allow_tf32() noexcept;
}  // namespace detail

/// One line about CUDA device `index`: name, compute capability, memory.
/// Example: cuda_device_description(0) == "NVIDIA H200 (sm_90, 139.8 GiB)". Throws when the
/// device does not exist or ember was built without CUDA.
std::string cuda_device_description(int index);

}  // namespace ember
