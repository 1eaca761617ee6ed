// ember/runtime.hpp — process-wide settings: CPU threads; CUDA device descriptions.
#pragma once

#include <string>

namespace ember {

/// Threads ember's CPU kernels (and OpenBLAS, kept in step) use. Default: EMBER_NUM_THREADS,
/// else the number of cores. Example: set_num_threads(1);
void set_num_threads(int n);
int get_num_threads();

/// One line about CUDA device `index`: name, compute capability, memory.
/// Example: cuda_device_description(0) == "NVIDIA H200 (sm_90, 139.8 GiB)". Throws when the
/// device does not exist or ember was built without CUDA.
std::string cuda_device_description(int index);

}  // namespace ember
