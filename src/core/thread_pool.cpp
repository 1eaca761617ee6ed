// src/core/thread_pool.cpp — the process-wide pool behind parallel_for.
//
// Design: n - 1 workers plus the caller. A job is published by bumping a generation
// counter (packed with the number of workers that take part, so a worker reads both
// consistently); workers claim fixed-size chunks from an atomic counter and the caller
// waits until every participating worker has acknowledged. Idle workers spin briefly
// (kSpinTime) to catch back-to-back ops, then block on a condition variable: they never
// spin for long, since OpenBLAS has its own threads and the cores are few; before a BLAS
// call the spinning stops at once (park_workers).
#include "core/thread_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "ember/error.hpp"

namespace ember::core {
namespace {

// How long an idle worker (or a caller waiting for workers) spins before blocking: long
// enough to catch the next op of a sequence, short enough not to steal a core from
// OpenBLAS or another process for long.
constexpr auto kSpinTime = std::chrono::microseconds(20);
constexpr int kChunksPerThread = 4;  // load balance on a shared machine
constexpr int kMaxThreads = 1024;    // participants fit in kParticipantBits
constexpr int kParticipantBits = 16;
constexpr uint64_t kParticipantMask = (uint64_t{1} << kParticipantBits) - 1;

thread_local bool t_in_parallel = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until ready() or kSpinTime has passed; returns ready()'s last answer.
template <typename Ready>
bool spin_until(Ready&& ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 1;; ++i) {
    if (ready()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

class ThreadPool {
 public:
  explicit ThreadPool(int n) { start(n); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_.load(std::memory_order_relaxed); }

  // Spinning workers block at once (until the next job) instead of finishing their spin.
  void park() { park_.store(true, std::memory_order_relaxed); }

  void resize(int n) {
    std::lock_guard<std::mutex> submit(submit_mutex_);
    stop();
    start(n);
  }

  void run(int64_t n, int64_t grain, pool_detail::RangeFn fn) {
    std::lock_guard<std::mutex> submit(submit_mutex_);
    const int threads = size();
    const int64_t target_chunks = static_cast<int64_t>(threads) * kChunksPerThread;
    chunk_ = std::max<int64_t>(grain, (n + target_chunks - 1) / target_chunks);
    num_chunks_ = (n + chunk_ - 1) / chunk_;
    n_ = n;
    fn_ = fn;
    error_ = nullptr;
    next_chunk_.store(0, std::memory_order_relaxed);
    park_.store(false, std::memory_order_relaxed);
    const int participants = static_cast<int>(std::min<int64_t>(threads - 1, num_chunks_ - 1));
    pending_.store(participants, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const uint64_t generation = (state_.load(std::memory_order_relaxed) >> kParticipantBits) + 1;
      state_.store((generation << kParticipantBits) | static_cast<uint64_t>(participants),
                   std::memory_order_release);
    }
    wake_.notify_all();

    t_in_parallel = true;
    run_chunks();
    t_in_parallel = false;

    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void start(int n) {
    stopping_.store(false, std::memory_order_relaxed);
    size_.store(n, std::memory_order_relaxed);
    workers_.reserve(static_cast<size_t>(n - 1));
    // Workers start from the generation current now, so a job published before a new
    // thread first runs is still seen as new.
    const uint64_t generation = state_.load(std::memory_order_relaxed) >> kParticipantBits;
    for (int i = 0; i < n - 1; ++i)
      workers_.emplace_back([this, i, generation] { worker_loop(i, generation); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true, std::memory_order_relaxed);
      const uint64_t generation = (state_.load(std::memory_order_relaxed) >> kParticipantBits) + 1;
      state_.store(generation << kParticipantBits, std::memory_order_release);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  // Claims and runs chunks until none are left; records the first exception.
  void run_chunks() {
    for (;;) {
      const int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks_) return;
      const int64_t begin = c * chunk_;
      const int64_t end = std::min(n_, begin + chunk_);
      try {
        fn_.call(fn_.object, begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_chunk_.store(num_chunks_, std::memory_order_relaxed);
      }
    }
  }

  void worker_loop(int index, uint64_t seen) {
    t_in_parallel = true;
    for (;;) {
      uint64_t state = 0;
      const bool woken = spin_until([&] {
        state = state_.load(std::memory_order_acquire);
        return (state >> kParticipantBits) != seen || park_.load(std::memory_order_relaxed);
      });
      if (!woken || (state >> kParticipantBits) == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] {
          state = state_.load(std::memory_order_acquire);
          return (state >> kParticipantBits) != seen;
        });
      }
      if (stopping_.load(std::memory_order_relaxed)) return;
      seen = state >> kParticipantBits;
      if (static_cast<uint64_t>(index) >= (state & kParticipantMask)) continue;
      run_chunks();
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        done_.notify_one();
      }
    }
  }

  std::mutex submit_mutex_;  // one job (or resize) at a time
  std::mutex mutex_;         // guards sleeping/waking and error_
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> workers_;
  std::atomic<int> size_{1};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> park_{false};   // set before BLAS runs: stop spinning, block now
  std::atomic<uint64_t> state_{0};  // generation << kParticipantBits | participants
  std::atomic<int64_t> next_chunk_{0};
  std::atomic<int> pending_{0};  // participating workers yet to finish
  pool_detail::RangeFn fn_{nullptr, nullptr};
  int64_t n_ = 0, chunk_ = 1, num_chunks_ = 0;
  std::exception_ptr error_;
};

// The pool is created once and intentionally never destroyed: kernels may run from
// static destructors, and joining threads during exit is fragile.
std::atomic<ThreadPool*> g_pool{nullptr};
std::mutex g_pool_mutex;

int default_thread_count() {
  if (const char* env = std::getenv("EMBER_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n >= 1)
      return static_cast<int>(std::min<long>(n, kMaxThreads));
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

std::atomic<void (*)(int)> g_pool_size_hook{nullptr};

// Creates the pool with `n` threads (or the default when n <= 0) unless it exists.
ThreadPool& pool(int n = 0) {
  ThreadPool* p = g_pool.load(std::memory_order_acquire);
  if (p) return *p;
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  p = g_pool.load(std::memory_order_relaxed);
  if (!p) {
    const int size = n > 0 ? n : default_thread_count();
    p = new ThreadPool(size);
    if (void (*hook)(int) = g_pool_size_hook.load(std::memory_order_acquire)) hook(size);
    g_pool.store(p, std::memory_order_release);
    // A forked child (a test's death test, a worker process) has none of the parent's
    // threads: it abandons the inherited pool and builds its own on first use.
    static const bool registered = [] {
      pthread_atfork(nullptr, nullptr, [] { g_pool.store(nullptr, std::memory_order_relaxed); });
      return true;
    }();
    (void)registered;
  }
  return *p;
}

}  // namespace

void set_pool_size_hook(void (*hook)(int n)) {
  g_pool_size_hook.store(hook, std::memory_order_release);
}

int num_threads() { return pool().size(); }

void set_pool_threads(int n) {
  EMBER_CHECK(n >= 1 && n <= kMaxThreads, "set_num_threads: expected 1 to ", kMaxThreads,
              " threads (got ", n, ")");
  EMBER_CHECK(!t_in_parallel, "set_num_threads: cannot resize the pool from inside a kernel");
  ThreadPool& p = pool(n);
  if (p.size() != n) p.resize(n);
  if (void (*hook)(int) = g_pool_size_hook.load(std::memory_order_acquire)) hook(n);
}

bool in_parallel_region() { return t_in_parallel; }

void park_workers() {
  if (ThreadPool* p = g_pool.load(std::memory_order_acquire)) p->park();
}

namespace pool_detail {
void parallel_for_impl(int64_t n, int64_t grain, RangeFn fn) {
  if (t_in_parallel) {  // nested: the outer loop already uses every thread
    fn.call(fn.object, 0, n);
    return;
  }
  ThreadPool& p = pool();
  if (p.size() == 1) {
    fn.call(fn.object, 0, n);
    return;
  }
  p.run(n, std::max<int64_t>(grain, 1), fn);
}
}  // namespace pool_detail

}  // namespace ember::core
