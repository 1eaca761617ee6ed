// src/cpu/allocator.cpp — the CPU caching allocator and its statistics.
//
// Design: each pool (Persistent, Pass) keeps free lists keyed by size class. A request is
// rounded up to its class (64 bytes minimum; above that 8 classes per power of two, so at
// most 12.5% of a block is slack) and served from that class's free list when one is
// cached, else from std::aligned_alloc (64-byte aligned, for AVX-512 loads and cache lines).
// Freed blocks go back to their pool's list and are reused by the next request of the same
// class; empty_cache returns every cached block to the system. On a failed system
// allocation the cache is emptied and the request retried once, then OutOfMemory is
// thrown naming the request and the pools' figures. One mutex guards all of it; it is not
// held across aligned_alloc.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cpu/kernels.hpp"
#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember::cpu {
namespace {

constexpr size_t kAlignment = 64;                // bytes; every block starts on a cache line
constexpr size_t kMinBlock = 64;                 // bytes; the smallest size class
constexpr int kClassesPerPowerOfTwo = 8;         // 12.5% worst-case slack
constexpr size_t kMaxRequest = size_t{1} << 60;  // larger requests fail without trying

struct PoolState {
  std::unordered_map<size_t, std::vector<void*>> free_blocks;  // size class -> cached blocks
  int64_t in_use = 0;                                          // bytes of blocks handed out
  int64_t cached = 0;  // bytes of blocks waiting in free_blocks
  int64_t peak = 0;    // high-water mark of in_use
};

struct AllocatorState {
  std::mutex mutex;
  PoolState pools[2];  // indexed by Pool
  // High-water marks over both pools (MemoryStats::peak_allocated, peak_reserved).
  int64_t peak_allocated = 0;
  int64_t peak_reserved = 0;
  int64_t alloc_count = 0;
  int64_t cache_hits = 0;
  int64_t system_allocs = 0;
  int64_t limit = 0;  // set_memory_limit: the most bytes both pools may reserve (0: none)
};

// Intentionally leaked: storages held by static objects may be freed after this file's
// statics would have been destroyed.
AllocatorState& state() {
  static AllocatorState* s = new AllocatorState();
  return *s;
}

PoolState& pool_state(AllocatorState& s, Pool pool) { return s.pools[static_cast<int>(pool)]; }

// Frees every cached block; the caller holds the mutex.
void release_cached(AllocatorState& s) {
  for (PoolState& p : s.pools) {
    for (auto& [size, blocks] : p.free_blocks) {
      for (void* block : blocks) std::free(block);
    }
    p.free_blocks.clear();
    p.cached = 0;
  }
}

// Raises the overall peaks to the figures now; the caller holds the mutex. Bytes in use and
// reserved grow only when a block is handed out, so take_block is the one place to call it.
void note_peaks(AllocatorState& s) {
  int64_t in_use = 0, reserved = 0;
  for (const PoolState& p : s.pools) {
    in_use += p.in_use;
    reserved += p.in_use + p.cached;
  }
  s.peak_allocated = std::max(s.peak_allocated, in_use);
  s.peak_reserved = std::max(s.peak_reserved, reserved);
}

std::string pool_figures(const AllocatorState& s) {
  const PoolState& persistent = s.pools[static_cast<int>(Pool::Persistent)];
  const PoolState& pass = s.pools[static_cast<int>(Pool::Pass)];
  return detail::concat("persistent: ", persistent.in_use, " bytes in use, ",
                        persistent.in_use + persistent.cached, " reserved; pass: ", pass.in_use,
                        " bytes in use, ", pass.in_use + pass.cached, " reserved, peak ",
                        pass.peak);
}

int64_t reserved_bytes(const AllocatorState& s) {
  int64_t r = 0;
  for (const PoolState& p : s.pools) r += p.in_use + p.cached;
  return r;
}

// set_memory_limit: room for `block` more bytes, after returning the cached blocks if need
// be; else OutOfMemory with nothing changed but the cache. The caller holds the mutex.
void check_limit(AllocatorState& s, size_t bytes, size_t block, Pool pool) {
  if (s.limit == 0 || reserved_bytes(s) + static_cast<int64_t>(block) <= s.limit) return;
  release_cached(s);
  if (reserved_bytes(s) + static_cast<int64_t>(block) <= s.limit) return;
  throw OutOfMemory(detail::concat(
      "cpu: allocating ", bytes, " bytes (block of ", block, ") in the ",
      pool == Pool::Persistent ? "persistent" : "pass", " pool would take the pools to ",
      reserved_bytes(s) + static_cast<int64_t>(block), " bytes, past the memory limit of ", s.limit,
      " bytes (set_memory_limit; cached blocks already returned); ", pool_figures(s)));
}

void take_block(AllocatorState& s, Pool pool, size_t block) {
  PoolState& p = pool_state(s, pool);
  p.in_use += static_cast<int64_t>(block);
  p.peak = std::max(p.peak, p.in_use);
  ++s.alloc_count;
  note_peaks(s);
}

}  // namespace

size_t size_class(size_t bytes) {
  if (bytes <= kMinBlock) return kMinBlock;
  const int top_bit = 63 - __builtin_clzll(static_cast<unsigned long long>(bytes - 1));
  const size_t step = std::max(kMinBlock, (size_t{1} << top_bit) / kClassesPerPowerOfTwo);
  return (bytes + step - 1) / step * step;
}

// Note [The limit is charged under its check]
// The set_memory_limit check and the charge of the block happen in one critical section: the
// block counts as in use before aligned_alloc runs outside the lock. Checked in one section
// and charged in a later one, two threads could each pass the check with room for one block
// and together take the pools past the limit (ThreadSanitizer cannot see that race: every
// access was locked). A failed system allocation gives the charge back.
namespace {
void* allocate_block(size_t bytes, Pool pool, size_t* block_bytes) {
  AllocatorState& s = state();
  if (bytes > kMaxRequest) {
    std::lock_guard<std::mutex> lock(s.mutex);
    throw OutOfMemory(detail::concat("cpu: out of memory allocating ", bytes, " bytes in the ",
                                     pool == Pool::Persistent ? "persistent" : "pass",
                                     " pool (more than any system can give); ", pool_figures(s)));
  }
  const size_t block = size_class(bytes);
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    PoolState& p = pool_state(s, pool);
    auto it = p.free_blocks.find(block);
    if (it != p.free_blocks.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      p.cached -= static_cast<int64_t>(block);
      ++s.cache_hits;
      take_block(s, pool, block);
      if (block_bytes) *block_bytes = block;
      return ptr;
    }
    check_limit(s, bytes, block, pool);
    take_block(s, pool, block);  // Note [The limit is charged under its check]
  }
  void* ptr = std::aligned_alloc(kAlignment, block);
  if (!ptr) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      release_cached(s);
    }
    ptr = std::aligned_alloc(kAlignment, block);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!ptr) {
    pool_state(s, pool).in_use -= static_cast<int64_t>(block);
    --s.alloc_count;
    throw OutOfMemory(detail::concat("cpu: out of memory allocating ", bytes, " bytes (block of ",
                                     block, ") in the ",
                                     pool == Pool::Persistent ? "persistent" : "pass",
                                     " pool after freeing cached blocks; ", pool_figures(s)));
  }
  ++s.system_allocs;
  if (block_bytes) *block_bytes = block;
  return ptr;
}
}  // namespace

void* allocate(int /*device*/, size_t bytes, Pool pool, size_t* block_bytes) {
  void* ptr = allocate_block(bytes, pool, block_bytes);
  if (poison_allocations()) [[unlikely]]
    std::memset(ptr, 0xFF, bytes);  // NaN in every float dtype (runtime.hpp)
  return ptr;
}

void deallocate(int /*device*/, void* ptr, size_t block_bytes, Pool pool) {
  if (!ptr) return;
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolState& p = pool_state(s, pool);
  p.free_blocks[block_bytes].push_back(ptr);
  p.in_use -= static_cast<int64_t>(block_bytes);
  p.cached += static_cast<int64_t>(block_bytes);
}

void recharge(int /*device*/, void* /*ptr*/, size_t block_bytes, Pool from, Pool to) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  pool_state(s, from).in_use -= static_cast<int64_t>(block_bytes);
  PoolState& p = pool_state(s, to);
  p.in_use += static_cast<int64_t>(block_bytes);
  p.peak = std::max(p.peak, p.in_use);
}

void memcpy_to_host(int /*device*/, void* host_dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(host_dst, src, bytes);
}

void memcpy_from_host(int /*device*/, void* dst, const void* host_src, size_t bytes) {
  if (bytes) std::memcpy(dst, host_src, bytes);
}

// Streamed copies on the CPU: nothing to pin, the copy is done when it returns.
void* host_alloc_pinned(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p)
    detail::throw_error(detail::concat("host_alloc_pinned: cannot allocate ", bytes, " bytes"));
  return p;
}
void host_free_pinned(void* ptr) { std::free(ptr); }
void copy_from_pinned_async(int /*device*/, void* dst, const void* src, size_t bytes,
                            int /*slot*/) {
  if (bytes) std::memcpy(dst, src, bytes);
}
void wait_pinned_slot(int /*device*/, int /*slot*/) {}
void copy_to_pinned_async(int /*device*/, void* dst, const void* src, size_t bytes, int /*slot*/) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void empty_cache(int /*device*/) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  release_cached(s);
}

size_t block_bytes_for(int /*device*/, size_t bytes) {
  return bytes > kMaxRequest ? bytes : size_class(bytes);
}

void memory_stats(int /*device*/, MemoryStats* stats) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  const PoolState& persistent = s.pools[static_cast<int>(Pool::Persistent)];
  const PoolState& pass = s.pools[static_cast<int>(Pool::Pass)];
  MemoryStats out;
  out.persistent_bytes = persistent.in_use;
  out.persistent_reserved = persistent.in_use + persistent.cached;
  out.pass_in_use = pass.in_use;
  out.pass_reserved = pass.in_use + pass.cached;
  out.pass_peak = pass.peak;
  out.alloc_count = s.alloc_count;
  out.cache_hits = s.cache_hits;
  out.system_allocs = s.system_allocs;
  out.peak_allocated = s.peak_allocated;
  out.peak_reserved = s.peak_reserved;
  const int64_t reserved = out.persistent_reserved + out.pass_reserved;
  out.fragmentation =
      reserved > 0 ? static_cast<double>(persistent.cached + pass.cached) / reserved : 0.0;
  *stats = out;
}

void set_memory_limit(int /*device*/, int64_t bytes) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.limit = bytes;
}

int64_t memory_limit(int /*device*/) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.limit;
}

void reset_peak(int /*device*/) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolState& pass = s.pools[static_cast<int>(Pool::Pass)];
  pass.peak = pass.in_use;
}

void reset_peaks(int /*device*/) {
  AllocatorState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (PoolState& p : s.pools) p.peak = p.in_use;
  s.peak_allocated = 0;
  s.peak_reserved = 0;
  note_peaks(s);
}

void synchronize(int /*device*/) {}

void order_next_launch(int /*device*/) {}  // the CPU's kernels run in call order

}  // namespace ember::cpu

// ---- captured steps: CUDA only (runtime_slots.def) ----
namespace ember::cpu {
namespace {
[[noreturn]] void no_capture() {
  detail::throw_error(
      "CapturedStep: graph capture needs a CUDA device (got cpu); on the CPU call the step "
      "function directly");
}
}  // namespace

int64_t graph_capture_begin(int, uint64_t, uint64_t) { no_capture(); }
void graph_capture_end(int, int64_t, bool) { no_capture(); }
void graph_replay_begin(int, int64_t, uint64_t, uint64_t) { no_capture(); }
void graph_launch(int, int64_t, bool) { no_capture(); }
void graph_destroy(int, int64_t) { no_capture(); }
int64_t graph_kernel_count(int, int64_t) { no_capture(); }

// ---- devices (runtime_slots.def): the CPU is one device, device 0 ----
int device_count() { return 1; }
std::string device_description(int device) {
  EMBER_CHECK(device == 0, "device_description: the CPU is device 0 (got ", device, ")");
  return detail::concat("CPU (", std::thread::hardware_concurrency(), " hardware threads)");
}

// ---- streams (runtime_slots.def): CPU work runs on the calling thread, in order ----
void* compute_stream(int) { return nullptr; }
void* comm_stream(int) { return nullptr; }
void comm_wait_for_compute(int) {}
void compute_wait_for_comm(int) {}
bool comm_stream_idle(int) { return true; }

}  // namespace ember::cpu
