// src/cuda/launch.cuh — how the elementwise kernels (elementwise.cu) are launched: one call,
// launch_chained, for every one of them, and the launch shape of a flat loop over n elements.
//
// Note [Chained launches]
// A tiny eager op costs what its launch costs, on the host (the launch call) and on the GPU
// (the gap between two dependent kernels of one stream, or of one graph). launch_chained
// cuts both where it can:
//   - programmatic dependent launch (sm_90; cudaLaunchAttributeProgrammaticStreamSerialization):
//     a chained kernel lets the next kernel of the stream be launched as soon as it starts
//     (griddepcontrol.launch_dependents) and itself waits for the kernel before it to finish
//     and flush its memory (griddepcontrol.wait) before it reads or writes anything. The next
//     kernel's launch overlaps this one's run, in a stream as in a captured graph (capture
//     records the same programmatic edges). Kernels that are not chained (cuBLASLt, the other
//     families, copies) keep the full stream order before and after. So EVERY kernel launched
//     with launch_chained must call chain_enter() before its first global memory access;
//     results are unchanged, only the moment a kernel starts moves. The one thing a kernel
//     may do between chain_release() and chain_wait() is prefetch_l2: L2 is where every
//     SM's writes land (L1 does not keep global writes), so a line asked for early is still
//     updated by a write that comes after it, and nothing reaches registers or L1 before
//     the wait. The few-rows products ask for their weight rows there (Note [Products of a
//     few rows] in gemv.cu): the weights' DRAM reads overlap the kernel before them; weights a
//     ReadOnlyGuard holds they load outright (Note [Weights loaded before the wait]), the
//     guard's start keeping the full order for the next launch (take_ordered_launch).
//   - the launch goes to the driver (cuLaunchKernelEx, the kernel's context-free CUkernel
//     handle cached per kernel), skipping the runtime's per-launch function lookup.
// EMBER_CUDA_PDL=0 turns the overlap off and EMBER_CUDA_LAUNCH=runtime routes launches
// through the runtime (cudaLaunchKernelEx), both for measurement and diagnosis: results are
// bitwise the same either way.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <tuple>
#include <utility>

#include "cuda/common.cuh"

namespace ember::cuda {

/// Lets the next kernel of the stream launch now (Note [Chained launches]).
__device__ __forceinline__ void chain_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/// Waits until the kernel queued before this one has finished and its writes are visible.
__device__ __forceinline__ void chain_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/// chain_release, then chain_wait: the first statement of every kernel launched with
/// launch_chained, but for a kernel that prefetches into L2 in between (Note [Chained
/// launches]).
__device__ __forceinline__ void chain_enter() {
  chain_release();
  chain_wait();
}

/// Asks L2 for `bytes` bytes at `p` (16-byte aligned, a multiple of 16), loading nothing into
/// registers or L1: safe before chain_wait (Note [Chained launches]).
__device__ __forceinline__ void prefetch_l2(const void* p, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

/// True once after order_next_launch(device) for `st`'s device (the order_next_launch runtime
/// slot, runtime.cpp): that launch keeps the full stream order (no overlap with the work before).
bool take_ordered_launch(cudaStream_t st);

/// How launch_chained launches (runtime.cpp, read once from the environment).
struct LaunchMode {
  bool overlap = true;  // programmatic dependent launch (EMBER_CUDA_PDL, default 1)
  bool driver = true;   // cuLaunchKernelEx on the kernel's CUkernel (EMBER_CUDA_LAUNCH)
};
const LaunchMode& launch_mode();
/// The driver's cuLaunchKernelEx (runtime.cpp: from the runtime's entry-point table).
CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params);
/// The context-independent handle of `kernel` (a __global__ function's address).
CUfunction kernel_handle(const void* kernel);
/// Throws ember::Error naming the failed driver launch.
[[noreturn]] void throw_launch_error(CUresult err, const char* file, int line);

/// The handle of Kernel, looked up once per kernel.
template <auto Kernel>
CUfunction cached_kernel_handle() {
  static const CUfunction f = kernel_handle(reinterpret_cast<const void*>(Kernel));
  return f;
}

/// Launches Kernel (which starts with chain_enter()) as grid × block threads with `shared`
/// bytes of dynamic shared memory on `st`, with `args` converted to its parameter types.
template <auto Kernel, typename... A>
void launch_chained_shared(dim3 grid, unsigned block, unsigned shared, cudaStream_t st,
                           A&&... args) {
  const LaunchMode& mode = launch_mode();
  if (mode.driver) [[likely]] {
    auto params = [&]<typename... P>(void (*)(P...)) {
      return std::tuple<std::decay_t<P>...>(std::forward<A>(args)...);
    }(Kernel);
    void* ptrs[sizeof...(A) > 0 ? sizeof...(A) : 1] = {};
    std::apply(
        [&](auto&... p) {
          int i = 0;
          ((ptrs[i++] = static_cast<void*>(&p)), ...);
        },
        params);
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config{};
    config.gridDimX = grid.x;
    config.gridDimY = grid.y;
    config.gridDimZ = grid.z;
    config.blockDimX = block;
    config.blockDimY = config.blockDimZ = 1;
    config.sharedMemBytes = shared;
    config.hStream = st;
    config.attrs = &attr;
    config.numAttrs = mode.overlap && !take_ordered_launch(st) ? 1 : 0;
    const CUresult err = launch_kernel_ex(&config, cached_kernel_handle<Kernel>(), ptrs);
    if (err != CUDA_SUCCESS) [[unlikely]]
      throw_launch_error(err, __FILE__, __LINE__);
    return;
  }
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = shared;
  config.stream = st;
  config.attrs = &attr;
  config.numAttrs = mode.overlap && !take_ordered_launch(st) ? 1 : 0;
  EMBER_CUDA_CHECK(cudaLaunchKernelEx(&config, Kernel, std::forward<A>(args)...));
}

/// Blocks of kThreads threads of `kKernel`, launched with `smem` bytes of dynamic shared
/// memory, resident on `device` at once: the grid of a kernel that deals its work to its blocks
/// grid-stride. The per-SM figure is asked once per kernel and shared memory size (the devices
/// of a process are taken to be alike).
template <auto kKernel, int kThreads>
int64_t resident_blocks(int device, size_t smem = 0) {
  static std::atomic<uint64_t> cached{0};  // smem << 16 | blocks per SM of the last query
  const uint64_t last = cached.load(std::memory_order_relaxed);
  int blocks = static_cast<int>(last & 0xffff);
  if (blocks == 0 || (last >> 16) != smem) {
    EMBER_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, kThreads, smem));
    blocks = std::clamp(blocks, 1, 0xffff);
    cached.store(static_cast<uint64_t>(smem) << 16 | static_cast<uint64_t>(blocks),
                 std::memory_order_relaxed);
  }
  int sms = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<int64_t>(blocks) * std::max(sms, 1);
}

/// launch_chained_shared with no dynamic shared memory. Example:
///   launch_chained<fill_flat_kernel<float>>(grid, block, st, out, n, 1.0f);
template <auto Kernel, typename... A>
void launch_chained(dim3 grid, unsigned block, cudaStream_t st, A&&... args) {
  launch_chained_shared<Kernel>(grid, block, 0, st, std::forward<A>(args)...);
}

/// Grid and block for a flat loop over n work items (n > 0): kBlock threads a block, but a
/// single block of n rounded up to a warp when n is smaller (a 16-element op starts one warp).
struct FlatLaunch {
  unsigned grid;
  unsigned block;
};
inline FlatLaunch flat_launch(int64_t n) {
  if (n >= kBlock) return {grid_for(n), kBlock};
  return {1, static_cast<unsigned>((n + 31) / 32 * 32)};
}

}  // namespace ember::cuda
