// src/cpu/threads.cpp — ember::set_num_threads / get_num_threads (include/ember/runtime.hpp).
//
// ember's pool and OpenBLAS's pthreads always use the same count: two thread systems each
// sized to the core count oversubscribe the machine (ARCHITECTURE §5). The pool (a core
// service) calls the hook set here when it is first built, at library load, which brings
// OpenBLAS in line from the start.
#include <cblas.h>

#include "core/thread_pool.hpp"
#include "ember/runtime.hpp"

namespace ember {

namespace {
const bool g_openblas_follows_the_pool = [] {
  core::set_pool_created_hook([](int n) { openblas_set_num_threads(n); });
  return true;
}();
}  // namespace

void set_num_threads(int n) {
  core::set_pool_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return core::num_threads(); }

}  // namespace ember
