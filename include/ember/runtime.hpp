// ember/runtime.hpp — process-wide settings: CPU threads.
#pragma once

namespace ember {

/// Threads ember's CPU kernels (and OpenBLAS, kept in step) use. Default: EMBER_NUM_THREADS,
/// else the number of cores. Example: set_num_threads(1);
void set_num_threads(int n);
int get_num_threads();

}  // namespace ember
