// src/cuda/launch_count.cpp — kernels launched per CUDA device (MemoryStats::kernel_launches).
//
// Note [What kernel_launches counts]
// Counting every launch where it happens would take a hook at each of the CUDA files' launch
// sites and inside cuBLASLt and cuDNN, whose kernels per call are theirs to choose (a split-K
// GEMM adds a reduction kernel, a cuDNN plan may run several). So the count is taken at the
// one seam every piece of device work crosses, the kernel table: the CUDA backend's table
// (backend_cuda.cpp) wraps each slot that queues device work, and every eager call of one adds
// 1 — an ember kernel, one cuBLASLt matmul, one cuDNN execution, a device-to-device copy or
// fill. A call that launches several kernels of its own counts once; service slots (memory,
// streams, timing marks, graph bookkeeping) and host transfers (counted as copies, beside
// their bytes) count nothing. While a thread captures a step, its calls are recorded into the
// graph and count nothing; each replay counts what it launches: the graph's kernel nodes
// (CapturedStep::kernels_per_step) and the kernels that upload its per-step scalars. A step's
// count is therefore constant from step to step whenever the step does the same work, which
// is what the figure is for (ggmlR's diagnostics: a steady step launches the same kernels and
// moves no weights). The CPU backend counts nothing: its kernels are function calls.
#include "cuda/launch_count.hpp"

#include <array>
#include <atomic>

namespace ember::cuda {
namespace {
constexpr int kMaxDevices = 64;  // as runtime.cpp
std::array<std::atomic<int64_t>, kMaxDevices> g_launches{};
}  // namespace

void count_kernel_launches(int device, int64_t n) {
  if (device < 0 || device >= kMaxDevices) return;
  g_launches[static_cast<size_t>(device)].fetch_add(n, std::memory_order_relaxed);
}

int64_t kernel_launches(int device) {
  if (device < 0 || device >= kMaxDevices) return 0;
  return g_launches[static_cast<size_t>(device)].load(std::memory_order_relaxed);
}

}  // namespace ember::cuda
