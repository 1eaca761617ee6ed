// src/cpu/parallel.hpp — the process thread pool (src/core/thread_pool.hpp) under the names the
// CPU kernels call it by: parallel_for, num_threads, park_workers, in_parallel_region.
#pragma once

#include "core/thread_pool.hpp"

namespace ember::cpu {

using core::in_parallel_region;
using core::num_threads;
using core::parallel_for;
using core::park_workers;

}  // namespace ember::cpu
