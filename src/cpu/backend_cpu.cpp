// src/cpu/backend_cpu.cpp — the CPU kernel table: every Backend slot, one line each.
#include "cpu/kernels.hpp"

namespace ember::backend {

// An unset slot would compile as a null pointer (the project builds with
// -Wno-missing-field-initializers for its options structs): in this table it breaks the build.
#pragma GCC diagnostic error "-Wmissing-field-initializers"

const Backend& cpu_backend() {
  static const Backend table = {
      .name = "cpu",
      // memory (allocator.cpp): caching allocator, Persistent and Pass pools
      .allocate = cpu::allocate,                  // size-class free lists, 64-byte aligned
      .deallocate = cpu::deallocate,              // back to the pool's cache
      .memcpy_to_host = cpu::memcpy_to_host,      // memcpy
      .memcpy_from_host = cpu::memcpy_from_host,  // memcpy
      .empty_cache = cpu::empty_cache,            // frees every cached block
      .memory_stats = cpu::memory_stats,          // pools, counts, fragmentation
      .reset_peak = cpu::reset_peak,              // pass_peak = pass_in_use
      .synchronize = cpu::synchronize,            // no-op: CPU kernels are synchronous
      // elementwise (elementwise.cpp, unary.cpp, binary.cpp)
      .fill = cpu::fill,      // all 8 dtypes, strided
      .copy = cpu::copy,      // strided, casts between any two dtypes
      .unary = cpu::unary,    // f32/f64 (logical_not: any -> bool)
      .binary = cpu::binary,  // f32/f64/i32/i64 arithmetic; comparisons also u8/bool
      .where = cpu::where,    // any dtype, by element size
      // reductions (reduce.cpp)
      .reduce = cpu::reduce,      // f32/f64/i32/i64 (mean: floats); argmax/argmin -> i64
      .variance = cpu::variance,  // f32/f64, two-pass
      // linear algebra (linalg.cpp)
      .gemm = cpu::gemm,  // OpenBLAS sgemm/dgemm per batch, then bias
      // softmax (softmax.cpp)
      .softmax = cpu::softmax,                    // stable, any dim, log variant
      .softmax_backward = cpu::softmax_backward,  // y(g - Σgy) / g - exp(y)Σg
      // indexing (index.cpp)
      .index_select = cpu::index_select,  // any dtype
      .index_add = cpu::index_add,        // f32/f64/i32/i64, accumulates
      .gather = cpu::gather,              // any dtype
      .scatter_add = cpu::scatter_add,    // f32/f64/i32/i64, accumulates
      // random (random.cpp): Philox4x32-10, Note [Random streams]
      .uniform = cpu::uniform,  // f32/f64/f16/bf16
      .normal = cpu::normal,    // Box–Muller, f32/f64/f16/bf16
      .dropout = cpu::dropout,  // f32/f64
      // convolution and pooling (conv.cpp): f32/f64, threaded over rows / planes
      .im2col = cpu::im2col,                            // plain copies of short runs
      .col2im = cpu::col2im,                            // one task per (n, c) plane
      .max_pool2d = cpu::max_pool2d,                    // PyTorch's NaN and index rules
      .max_pool2d_backward = cpu::max_pool2d_backward,  // scatter to the saved argmax
      .avg_pool2d = cpu::avg_pool2d,                    // count_include_pad as PyTorch
      .avg_pool2d_backward = cpu::avg_pool2d_backward,  // spread over each window
      // optimizers (optim.cpp): one pass, vectorised, split across the pool
      .adam_step_multi = cpu::adam_step_multi,  // one launch per group on a GPU
      .sgd_step_multi = cpu::sgd_step_multi,
      .grad_norm_multi = cpu::grad_norm_multi,  // f64 sums, fixed order
      .clip_grads_by_norm = cpu::clip_grads_by_norm,
      // batch normalisation (norm.cpp): f32/f64, threaded over channels / rows
      .batch_norm_stats = cpu::batch_norm_stats,                      // merged per-run stats
      .batch_norm_backward_reduce = cpu::batch_norm_backward_reduce,  // Σg, Σg·(x - mean)
      .channel_affine = cpu::channel_affine,                          // a·sa + b·sb + shift
      // fused softmax cross-entropy (loss.cpp): threaded over rows
      .cross_entropy_forward = cpu::cross_entropy_forward,    // stable, f64 sums, checks labels
      .cross_entropy_backward = cpu::cross_entropy_backward,  // softmax - smoothed one-hot
  };
  return table;
}

}  // namespace ember::backend
