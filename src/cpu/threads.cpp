// src/cpu/threads.cpp — ember::set_num_threads / get_num_threads (include/ember/runtime.hpp).
//
// ember's pool and OpenBLAS's pthreads always use the same count: two thread systems each
// sized to the core count oversubscribe the machine (ARCHITECTURE §5). The pool calls
// on_pool_created when it is first built, which brings OpenBLAS in line from the start.
#include <cblas.h>

#include "cpu/thread_pool.hpp"
#include "ember/runtime.hpp"

namespace ember {

namespace cpu {
void on_pool_created(int n) { openblas_set_num_threads(n); }
}  // namespace cpu

void set_num_threads(int n) {
  cpu::set_pool_threads(n);
  openblas_set_num_threads(n);
}

int get_num_threads() { return cpu::num_threads(); }

}  // namespace ember
