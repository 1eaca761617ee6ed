// src/cuda/kernels.cuh — the CUDA runtime pieces the kernel files share (device queries, the
// GEMM bias fallback); common.cuh declares every slot of the table.
//
// Each slot implements the contract written above it in src/backend/slots.def, with the CPU
// kernel (src/cpu) as the reference for dtype coverage and edge cases. Every kernel is
// queued on the device's one stream (stream(device)); no slot synchronises the host except
// memcpy_to_host, synchronize and empty_cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/common.cuh"

namespace ember::cuda {

// runtime.cpp
/// The device's own stream (stream() returns it too, except on a thread that captures).
cudaStream_t device_stream(int device);
/// From now on stream(device) on this thread returns `capture` (nullptr: the device's stream
/// again). Set around a capture (graph.cu).
void set_capture_stream(int device, cudaStream_t capture);
/// Number of visible devices; 0 when there is no driver or no device (never throws).
int device_count();
/// Throws ember::Error unless `device` names a present device ("<op>: cuda:7 does not exist").
void check_device(int device, const char* op);
/// "NVIDIA H200 (sm_90, 139.8 GiB)".
std::string device_description(int device);

// allocator.cpp: private pools of captured steps (Note [Private pools])
/// A new private pool on `device`, borrowing the eager pools' free blocks; its id (never 0).
int64_t private_pool_create(int device);
/// From now on this thread's allocations on `device` come from pool `id` (0: back to the
/// Persistent and Pass pools), and eager blocks it frees there are borrowed by that pool.
void private_pool_route(int device, int64_t id);
/// The capture into pool `id` ended: the eager blocks it borrowed and never used go back
/// (Note [A capture borrows the eager cache]).
void private_pool_capture_end(int device, int64_t id);
/// Gives the borrowed eager blocks back and frees the pool's memory once its last block
/// returns.
void private_pool_release(int device, int64_t id);

// gemv.cu
/// C = act(A·Bᵀ + bias) for a linear of 1 to 4 rows in f16/bf16 (Note [Products of a few rows]);
/// false (nothing launched) when the arguments are not that case.
bool few_rows_gemm(const backend::GemmArgs& g);

// elementwise.cu
/// c[b][i][j] += bias[j] for every row i < m of every batch (the GEMM bias epilogue's
/// fallback). f32/f64.
/// out[4] (device i64) = {seed, 0, offset, 0}: the generator state of a launch drawing from
/// (seed, offset), read on the device inside a captured step (random.cu; cuDNN's dropout).
void write_philox_state(int device, uint64_t seed, uint64_t offset, int64_t* out);
void add_bias_rows(int device, DType dtype, void* c, const void* bias, int64_t batch,
                   int64_t batch_stride_c, int64_t m, int64_t n, int64_t ldc);
/// out[r] (f32) = Σ_j op(A)[r, j] over k for r < m: GemmArgs::bias_grad of a c_f32 product
/// when cuBLASLt's BGRADB does not run; A f16/bf16, [k, m] when trans_a else [m, k], leading
/// dimension lda. k = 0 gives zeros.
void sum_rows_f32(int device, DType dtype, const void* a, bool trans_a, int64_t m, int64_t k,
                  int64_t lda, void* out);
/// The ReLU mask of C [m, n] (Note [ReLU masks]) applied to C, zeroing where a bit is clear
/// (the DRELU epilogue's fallback).
void relu_mask_apply(int device, DType dtype, void* c, int64_t ldc, int64_t m, int64_t n,
                     const void* mask);

}  // namespace ember::cuda
