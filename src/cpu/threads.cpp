// src/cpu/threads.cpp — OpenBLAS's thread count follows ember's pool.
//
// ember's pool and OpenBLAS's pthreads always use the same count: two thread systems each
// sized to the core count oversubscribe the machine (ARCHITECTURE §5). The pool (a core
// service, whose size set_num_threads sets: src/core/runtime.cpp) calls the hook set here when
// it is built and on every resize; the hook is set at library load, which brings OpenBLAS in
// line from the start.
#include <cblas.h>

#include "core/thread_pool.hpp"

namespace ember::cpu {
namespace {
const bool g_openblas_follows_the_pool = [] {
  core::set_pool_size_hook([](int n) { openblas_set_num_threads(n); });
  return true;
}();
}  // namespace
}  // namespace ember::cpu
