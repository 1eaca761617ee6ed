// src/cuda/kernels.cuh — the CUDA backend's own slots (memory, elementwise, reductions,
// softmax, GEMM, random) and the runtime pieces they share; common.cuh declares the rest.
//
// Each function implements the contract written beside its slot in src/backend/backend.hpp,
// with the CPU kernel (src/cpu) as the reference for dtype coverage and edge cases. Every
// kernel is queued on the device's one stream (stream(device)); nothing here synchronises
// the host except memcpy_to_host, synchronize and empty_cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/common.cuh"

namespace ember::cuda {

using backend::BinaryOp;
using backend::GemmArgs;
using backend::ReduceOp;
using backend::UnaryOp;

// runtime.cpp
/// Number of visible devices; 0 when there is no driver or no device (never throws).
int device_count();
/// Throws ember::Error unless `device` names a present device ("<op>: cuda:7 does not exist").
void check_device(int device, const char* op);
/// "NVIDIA H200 (sm_90, 139.8 GiB)".
std::string device_description(int device);

// allocator.cpp: caching allocator (Note [CUDA caching allocator]) and transfers
void* allocate(int device, size_t bytes, Pool pool, size_t* block_bytes);
void deallocate(int device, void* ptr, size_t block_bytes, Pool pool);
void memcpy_to_host(int device, void* host_dst, const void* src, size_t bytes);
void memcpy_from_host(int device, void* dst, const void* host_src, size_t bytes);
void empty_cache(int device);
void memory_stats(int device, MemoryStats* stats);
void reset_peak(int device);
void synchronize(int device);

// elementwise.cu
void fill(const View& out, double value);
void copy(const View& out, const View& in);
void unary(UnaryOp op, const View& out, const View& in, double a, double b);
void binary(BinaryOp op, const View& out, const View& a, const View& b);
void where(const View& out, const View& cond, const View& a, const View& b);
/// c[b][i][j] += bias[j] for every row i < m of every batch (the GEMM bias epilogue's
/// fallback). f32/f64.
void add_bias_rows(int device, DType dtype, void* c, const void* bias, int64_t batch,
                   int64_t batch_stride_c, int64_t m, int64_t n, int64_t ldc);

// reduce.cu
void reduce(ReduceOp op, const View& out, const View& in);
void variance(const View& out, const View& in, int64_t correction);
void softmax(const View& out, const View& in, int dim, bool log);
void softmax_backward(const View& grad_in, const View& grad_out, const View& out, int dim,
                      bool log);

// linalg.cpp (cuBLASLt)
void gemm(const GemmArgs& args);

// random.cu (Philox, Note [Random streams] in src/kernels/random.hpp)
void uniform(const View& out, uint64_t seed, uint64_t offset, double lo, double hi);
void normal(const View& out, uint64_t seed, uint64_t offset, double mean, double std);
void dropout(const View& out, const View& mask, const View& in, double p, uint64_t seed,
             uint64_t offset);

}  // namespace ember::cuda
