// src/cuda/launch_count.hpp — the count of kernels launched per CUDA device, read by
// memory_stats (MemoryStats::kernel_launches; Note [What kernel_launches counts] in
// launch_count.cpp).
#pragma once

#include <cstdint>

namespace ember::cuda {

/// Adds `n` launches on `device`: one relaxed atomic increment, no lock.
void count_kernel_launches(int device, int64_t n);
/// Launches counted on `device` since start.
int64_t kernel_launches(int device);
/// True while this thread captures a step on `device` or stages a replay's scalars there
/// (src/cuda/graph.cu): kernel-table calls then launch nothing of their own.
bool graph_recording(int device);

}  // namespace ember::cuda
