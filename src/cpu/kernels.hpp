// src/cpu/kernels.hpp — the CPU backend's kernels, one declaration per Backend slot.
//
// Each function implements the contract written beside its slot in src/backend/backend.hpp;
// src/cpu/backend_cpu.cpp puts them in the table. Nothing outside src/cpu (and its tests)
// should call these directly: go through backend::backend_for().
//
// In-place use: the output of an elementwise kernel (unary, binary, where, copy, dropout),
// of softmax and of softmax_backward may be the very same memory as an input (same data
// and strides); partial overlap is not supported. Reductions, gemm and the index kernels
// need an output that does not overlap their inputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.hpp"

namespace ember::cpu {

using backend::BinaryOp;
using backend::GemmArgs;
using backend::ReduceOp;
using backend::UnaryOp;
using backend::View;

// memory (allocator.cpp)
void* allocate(int device, size_t bytes, Pool pool, size_t* block_bytes);
void deallocate(int device, void* ptr, size_t block_bytes, Pool pool);
void memcpy_to_host(int device, void* host_dst, const void* src, size_t bytes);
void memcpy_from_host(int device, void* dst, const void* host_src, size_t bytes);
void empty_cache(int device);
void memory_stats(int device, MemoryStats* stats);
void reset_peak(int device);
void synchronize(int device);
/// The size class a request of `bytes` is served from (64-byte minimum, <= 12.5% waste above).
size_t size_class(size_t bytes);

// elementwise (elementwise.cpp, unary.cpp, binary.cpp)
void fill(const View& out, double value);
void copy(const View& out, const View& in);
void unary(UnaryOp op, const View& out, const View& in, double a, double b);
void binary(BinaryOp op, const View& out, const View& a, const View& b);
void where(const View& out, const View& cond, const View& a, const View& b);

// reductions (reduce.cpp)
void reduce(ReduceOp op, const View& out, const View& in);
void variance(const View& out, const View& in, int64_t correction);

// linear algebra and softmax (linalg.cpp, softmax.cpp)
void gemm(const GemmArgs& args);
void softmax(const View& out, const View& in, int dim, bool log);
void softmax_backward(const View& grad_in, const View& grad_out, const View& out, int dim,
                      bool log);

// indexing (index.cpp)
bool index_select(const View& out, const View& in, int dim, const View& index);
bool index_add(const View& out, int dim, const View& index, const View& src);
bool gather(const View& out, const View& in, int dim, const View& index);
bool scatter_add(const View& out, int dim, const View& index, const View& src);

// random (random.cpp)
void uniform(const View& out, uint64_t seed, uint64_t offset, double lo, double hi);
void normal(const View& out, uint64_t seed, uint64_t offset, double mean, double std);
void dropout(const View& out, const View& mask, const View& in, double p, uint64_t seed,
             uint64_t offset);

// convolution and pooling (conv.cpp)
void im2col(const backend::Window2d& w, const View& columns, const View& in);
void col2im(const backend::Window2d& w, const View& grad_in, const View& columns);
void max_pool2d(const backend::Window2d& w, const View& out, const View& indices, const View& in);
void max_pool2d_backward(const backend::Window2d& w, const View& grad_in, const View& grad_out,
                         const View& indices);
void avg_pool2d(const backend::Window2d& w, const View& out, const View& in,
                bool count_include_pad);
void avg_pool2d_backward(const backend::Window2d& w, const View& grad_in, const View& grad_out,
                         bool count_include_pad);

// batch normalisation (norm.cpp)
void batch_norm_stats(const View& mean, const View& var, const View& in);
void batch_norm_backward_reduce(const View& sum_g, const View& sum_gx, const View& grad_out,
                                const View& in, const View& mean);
void channel_affine(const View& out, const View& a, const View& scale_a, const View& b,
                    const View& scale_b, const View& shift);

// optimizers (optim.cpp)
void adam_step_multi(int device, DType dtype, const backend::OptimSlot* slots, int64_t count,
                     const backend::AdamArgs& args);
void sgd_step_multi(int device, DType dtype, const backend::OptimSlot* slots, int64_t count,
                    const backend::SgdArgs& args);
void grad_norm_multi(int device, DType dtype, void* const* grads, const int64_t* numels,
                     int64_t count, double norm_type, void* total_norm);
void clip_grads_by_norm(int device, DType dtype, void* const* grads, const int64_t* numels,
                        int64_t count, double max_norm, const void* total_norm);

// fused softmax cross-entropy (loss.cpp)
void cross_entropy_forward(const View& loss_rows, const View& lse, const View& total,
                           const View& count, const View& logits, const View& target,
                           int64_t ignore_index, double label_smoothing);
void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& count,
                            const View& logits, const View& target, const View& lse,
                            int64_t ignore_index, double label_smoothing);

}  // namespace ember::cpu
