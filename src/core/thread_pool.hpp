// src/core/thread_pool.hpp — the process-wide CPU thread pool and parallel_for: a process
// service in core, used by the CPU kernels (src/cpu), io (parallel reads, CRCs) and data.
//
// One pool per process, created on first parallel use, sized by EMBER_NUM_THREADS or the
// core count and kept equal to OpenBLAS's thread count (src/cpu/threads.cpp sets the hook). The
// caller takes part in every job, so a pool of size n has n - 1 workers.
//
// Note [Small work runs inline]
// parallel_for runs `fn(0, n)` on the caller, without touching the pool (no lock, no
// wake-up, no allocation), when n <= grain, when the pool has one thread, or when called
// from inside another parallel_for body. Tiny tensors therefore cost one branch.
//
// Never call BLAS from inside a parallel_for body: OpenBLAS runs its own threads.
#pragma once

#include <cstdint>
#include <type_traits>

namespace ember::core {

/// Threads the pool runs jobs on, the caller included (creates the pool on first use).
int num_threads();
/// Resizes the pool (n >= 1); waits for no job, so call it between ops.
void set_pool_threads(int n);
/// Sets what the pool calls with its size when it is first created and on every
/// set_pool_threads: the CPU backend keeps OpenBLAS's thread count in step
/// (src/cpu/threads.cpp, at library load). nullptr: none.
void set_pool_size_hook(void (*hook)(int n));
/// True inside a parallel_for body (on a worker or on the caller).
bool in_parallel_region();
/// Makes idle workers stop spinning and block now: call before handing the cores to
/// OpenBLAS, whose threads would otherwise compete with them.
void park_workers();

namespace pool_detail {
/// A non-owning reference to a callable `void(int64_t begin, int64_t end)`.
struct RangeFn {
  void* object;
  void (*call)(void* object, int64_t begin, int64_t end);
};
void parallel_for_impl(int64_t n, int64_t grain, RangeFn fn);
}  // namespace pool_detail

/// Runs fn(begin, end) over disjoint ranges covering [0, n), each at least `grain` long
/// (except the last), on the pool's threads. Example:
///   parallel_for(n, 32768, [&](int64_t b, int64_t e) { for (i = b; i < e; ++i) y[i] = x[i]; });
template <typename F>
inline void parallel_for(int64_t n, int64_t grain, F&& fn) {
  if (n <= 0) return;
  if (n <= grain) {  // Note [Small work runs inline]
    fn(int64_t{0}, n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  pool_detail::RangeFn ref{
      const_cast<void*>(static_cast<const void*>(&fn)),
      [](void* object, int64_t begin, int64_t end) { (*static_cast<Fn*>(object))(begin, end); }};
  pool_detail::parallel_for_impl(n, grain, ref);
}

}  // namespace ember::core
