// src/cuda/backend_cuda.cpp — the CUDA kernel table: every Backend slot, one line each.
#include "cuda/kernels.cuh"

namespace ember::backend {

// An unset slot would compile as a null pointer (the project builds with
// -Wno-missing-field-initializers for its options structs): in this table it breaks the build.
#pragma GCC diagnostic error "-Wmissing-field-initializers"

const Backend& cuda_backend() {
  static const Backend table = {
      .name = "cuda",
      // memory (allocator.cpp): caching allocator per device, Persistent and Pass pools
      .allocate = cuda::allocate,                  // 512-byte rounding, split / coalesce
      .deallocate = cuda::deallocate,              // back to the pool (stream-ordered)
      .memcpy_to_host = cuda::memcpy_to_host,      // pinned staging, waits for the data
      .memcpy_from_host = cuda::memcpy_from_host,  // pinned staging, does not wait
      .empty_cache = cuda::empty_cache,            // cudaFree of every free segment
      .memory_stats = cuda::memory_stats,          // pools, transfers, counts
      .reset_peak = cuda::reset_peak,              // pass_peak = pass_in_use
      .synchronize = cuda::synchronize,            // waits for the device's stream
      // elementwise (elementwise.cu)
      .fill = cuda::fill,      // all 8 dtypes, strided
      .copy = cuda::copy,      // strided, casts between any two dtypes (f16/bf16 included)
      .unary = cuda::unary,    // f32/f64 (logical_not: any -> bool); packed when contiguous
      .binary = cuda::binary,  // f32/f64/i32/i64 arithmetic; comparisons also u8/bool
      .where = cuda::where,    // any dtype, by element size
      // reductions (reduce.cu)
      .reduce = cuda::reduce,      // f32/f64/i32/i64; warp or thread per (output, chunk)
      .variance = cuda::variance,  // f32/f64, two-pass
      // linear algebra (linalg.cpp)
      .gemm = cuda::gemm,  // cuBLASLt, strided batches, bias epilogue
      // softmax (reduce.cu)
      .softmax = cuda::softmax,                    // warp / block per row, any dim, log variant
      .softmax_backward = cuda::softmax_backward,  // y(g - Σgy) / g - exp(y)Σg
      // indexing (index.cu)
      .index_select = cuda::index_select,
      .index_add = cuda::index_add,
      .gather = cuda::gather,
      .scatter_add = cuda::scatter_add,
      // random (random.cu): Philox4x32-10, the CPU's stream (Note [Random streams])
      .uniform = cuda::uniform,  // f32/f64/f16/bf16
      .normal = cuda::normal,    // Box–Muller, f32/f64/f16/bf16
      .dropout = cuda::dropout,  // f32/f64
      // convolution and pooling (conv.cu)
      .im2col = cuda::im2col,
      .col2im = cuda::col2im,
      .max_pool2d = cuda::max_pool2d,
      .max_pool2d_backward = cuda::max_pool2d_backward,
      .avg_pool2d = cuda::avg_pool2d,
      .avg_pool2d_backward = cuda::avg_pool2d_backward,
      // optimizers (optim.cu)
      .adam_step_multi = cuda::adam_step_multi,  // one launch per group on a GPU
      .sgd_step_multi = cuda::sgd_step_multi,
      .grad_norm_multi = cuda::grad_norm_multi,  // f64 sums, fixed order
      .clip_grads_by_norm = cuda::clip_grads_by_norm,
      // batch normalisation (norm.cu)
      .batch_norm_stats = cuda::batch_norm_stats,
      .batch_norm_backward_reduce = cuda::batch_norm_backward_reduce,
      .channel_affine = cuda::channel_affine,
      // fused softmax cross-entropy (loss.cu): a warp per row
      .cross_entropy_forward = cuda::cross_entropy_forward,    // labels checked, deferred error
      .cross_entropy_backward = cuda::cross_entropy_backward,  // softmax - smoothed one-hot
  };
  return table;
}

}  // namespace ember::backend
