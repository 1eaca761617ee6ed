// src/cuda/allocator.cpp — the CUDA caching allocator, its statistics, and host<->device
// copies through pinned staging buffers.
//
// Note [CUDA caching allocator]
// Each device has two pools (Persistent, Pass; ARCHITECTURE §3), and each pool owns the
// segments it got from cudaMalloc. A request is rounded up to kRound bytes. Requests up to
// kSmallRequest are carved from kSmallSegment-byte segments; larger ones get a segment of
// their own size rounded up to kLargeRound. A segment is a chain of blocks (address order);
// a free block is split when the rest is worth keeping (at least kRound bytes in a small
// segment, more than kSmallRequest in a large one), and a freed block merges with free
// neighbours of its segment, so a segment that empties is one free block again. Free blocks
// sit in a set ordered by (size, address): the best fit is one lower_bound away. Small and
// large blocks are searched separately so a small tensor never pins a huge segment.
//
// Freed blocks are reusable at once (Note [One stream per device], runtime.cpp). cudaFree
// runs only in empty_cache and on the out-of-memory path: it frees whole free segments.
// Out of memory: free every cached segment of the device (both pools), retry cudaMalloc
// once, then throw OutOfMemory naming the request and the pools' figures; the device's
// state is untouched, so the next (smaller) request is served normally. One mutex per device
// guards its pools (held across cudaMalloc: allocation is rare once the cache is warm).
//
// Note [Private pools]
// A captured step (src/cuda/graph.cu) replays kernels that read and write the addresses they
// had at capture, so everything allocated while a thread captures comes from a private pool
// of that capture (private_pool_create / private_pool_route), whatever pool the caller asked
// for: its blocks are reused only by the same capture and never reach the Persistent or Pass
// caches of eager code. A released pool frees its segments once its last block comes back (a
// tensor made inside the capture may outlive the graph).
//
// Note [A capture borrows the eager cache]
// The eager warm-up steps before a capture leave their Pass blocks cached, and a pool that
// reserved its own memory would hold a step's worth again beside them (GPT-2 124M: 1.2x the
// eager step's reserved bytes even with the free segments given back first). So a new
// private pool borrows every free block of the device's eager pools (`lend`): the blocks stay
// in their segments, but belong to the capture until it is released, and the capture's
// requests are served from them first (best fit, split like any free block; freed ones merge
// with borrowed free neighbours). A block of the eager caches that the capturing thread frees
// is borrowed the same way: the graph may read it, and on the capture's stream every kernel
// that read it runs before any that writes the tensor made in its place (a step that drops
// the last step's gradients makes the new ones there, as its eager warm-up did). When the
// capture ends, borrowed blocks it never used go back to their caches; the rest go back when
// the pool is released, or, while a tensor still uses one, when that tensor is freed. A
// borrowed block counts as reserved (and, while a tensor uses it, in use) by the private
// pool, like the pool's own segments.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cuda/device_error.cuh"
#include "cuda/kernels.cuh"
#include "cuda/launch_count.hpp"
#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember::cuda {
namespace {

constexpr size_t kRound = 512;                     // bytes; every block is a multiple
constexpr size_t kSmallRequest = size_t{1} << 20;  // 1 MiB; up to this: small segments
constexpr size_t kSmallSegment = size_t{2} << 20;  // 2 MiB per small segment
constexpr size_t kLargeRound = size_t{2} << 20;    // large segments are multiples of 2 MiB
constexpr size_t kStagingBytes = size_t{4} << 20;  // per pinned staging buffer (two per device)

struct PoolState;

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  bool in_use = false;
  bool small = true;      // lives in a small segment
  Block* prev = nullptr;  // neighbours within the segment, address order
  Block* next = nullptr;
  PoolState* owner = nullptr;  // the pool whose segment holds the block
  // Note [A capture borrows the eager cache]: the private pool an eager block is lent to
  // (null: none), whether it is free there, and whether the capture used it.
  PoolState* borrower = nullptr;
  bool lent_free = false;
  bool used = false;
};

struct BySizeThenAddress {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

struct PoolState {
  std::set<Block*, BySizeThenAddress> free_small, free_large;
  int64_t in_use = 0;    // bytes of blocks handed out
  int64_t reserved = 0;  // bytes of segments held
  int64_t peak = 0;      // high-water mark of in_use
  // Private pools only: the eager blocks borrowed (Note [A capture borrows the eager cache]),
  // those of them free, and whether the pool was released (its segments go once in_use is
  // back to 0).
  std::unordered_set<Block*> lent;
  std::set<Block*, BySizeThenAddress> lent_free;
  bool released = false;
};

struct DeviceState {
  std::mutex mutex;
  PoolState pools[2];                                                     // indexed by Pool
  std::unordered_map<int64_t, std::unique_ptr<PoolState>> private_pools;  // by id
  int64_t next_private_id = 1;
  std::unordered_map<void*, Block*> allocated;  // block start -> block, blocks in use
  int64_t alloc_count = 0, cache_hits = 0, system_allocs = 0;
  int64_t host_to_device = 0, device_to_host = 0;
  int64_t host_to_device_copies = 0, device_to_host_copies = 0;  // calls, not chunks
  // High-water marks over every pool, private ones included (MemoryStats::peak_allocated,
  // peak_reserved; Note [Overall peaks]).
  int64_t peak_allocated = 0, peak_reserved = 0;
  int64_t limit = 0;  // set_memory_limit: the most bytes all pools may reserve (0: none)
  // staging: two pinned buffers used alternately, each with the event of its last copy
  std::mutex staging_mutex;
  char* staging[2] = {nullptr, nullptr};
  cudaEvent_t staging_done[2] = {nullptr, nullptr};
  // streamed copies (copy_from_pinned_async): the event of each slot's last copy
  std::mutex slot_mutex;
  std::array<cudaEvent_t, 256> slot_done{};
};

// Intentionally leaked: storages held by static objects may be freed after this file's
// statics would have been destroyed (and the CUDA runtime may be gone by then too).
DeviceState& state(int device) {
  static std::array<DeviceState*, 64>* states = [] {
    auto* a = new std::array<DeviceState*, 64>{};
    for (int d = 0; d < device_count(); ++d) (*a)[static_cast<size_t>(d)] = new DeviceState();
    return a;
  }();
  return *(*states)[static_cast<size_t>(device)];
}

PoolState& pool_state(DeviceState& s, Pool pool) { return s.pools[static_cast<int>(pool)]; }
const char* pool_name(Pool pool) { return pool == Pool::Persistent ? "persistent" : "pass"; }

size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

// The private pool this thread allocates from (Note [Private pools]), or none.
thread_local int t_route_device = -1;
thread_local int64_t t_route_pool = 0;

void free_block(DeviceState& s, Block* b);
void insert_free(PoolState& p, Block* b);
void release_if_done(DeviceState& s, PoolState& p);
void take_lent(PoolState& p, Block* b, size_t size);
Block* add_lent_free(PoolState& p, Block* b);
void give_back_free(PoolState& p, Block* b);

PoolState* routed_pool(DeviceState& s, int device) {
  if (t_route_pool == 0 || t_route_device != device) return nullptr;
  auto it = s.private_pools.find(t_route_pool);
  EMBER_ASSERT(it != s.private_pools.end(), "private pool ", t_route_pool, " is not alive");
  return it->second.get();
}

std::set<Block*, BySizeThenAddress>& free_set(PoolState& p, bool small) {
  return small ? p.free_small : p.free_large;
}

// Takes `b` (free, already out of the free set) for a request of `size` bytes, splitting
// off the rest when it is worth keeping. The caller holds the mutex.
Block* take(PoolState& p, Block* b, size_t size) {
  const size_t rest = b->size - size;
  if (b->small ? rest >= kRound : rest > kSmallRequest) {
    auto* tail = new Block{b->ptr + size, rest, false, b->small, b, b->next, b->owner};
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    free_set(p, tail->small).insert(tail);
  }
  b->in_use = true;
  return b;
}

// Frees every segment of `p` that is one free block; returns the bytes released.
size_t release_free_segments(PoolState& p) {
  size_t released = 0;
  for (auto* set : {&p.free_small, &p.free_large}) {
    for (auto it = set->begin(); it != set->end();) {
      Block* b = *it;
      if (b->prev || b->next) {
        ++it;
        continue;
      }
      EMBER_CUDA_CHECK(cudaFree(b->ptr));  // synchronises the device first
      p.reserved -= static_cast<int64_t>(b->size);
      released += b->size;
      it = set->erase(it);
      delete b;
    }
  }
  return released;
}

void release_all_cached(DeviceState& s) {
  for (PoolState& p : s.pools) release_free_segments(p);
}

// Note [Overall peaks]
// peak_allocated and peak_reserved are the high-water marks of the sums over the Persistent,
// Pass and every private pool. Bytes in use and reserved grow only in allocate (a block handed
// out, a segment from cudaMalloc); recharge moves bytes between pools without changing the
// sums, and frees only lower them. So allocate is the one place the peaks can rise, and it
// raises them after every request (a walk over the few private pools, under the mutex).
void note_peaks(DeviceState& s) {
  int64_t in_use = 0, reserved = 0;
  for (const PoolState& p : s.pools) {
    in_use += p.in_use;
    reserved += p.reserved;
  }
  for (const auto& [id, pool] : s.private_pools) {
    in_use += pool->in_use;
    reserved += pool->reserved;
  }
  s.peak_allocated = std::max(s.peak_allocated, in_use);
  s.peak_reserved = std::max(s.peak_reserved, reserved);
}

// Bytes of segments held by every pool of the device, private pools included.
int64_t reserved_bytes(const DeviceState& s) {
  int64_t r = 0;
  for (const PoolState& p : s.pools) r += p.reserved;
  for (const auto& [id, pool] : s.private_pools) r += pool->reserved;
  return r;
}

std::string pool_figures(const DeviceState& s) {
  const PoolState& persistent = s.pools[static_cast<int>(Pool::Persistent)];
  const PoolState& pass = s.pools[static_cast<int>(Pool::Pass)];
  int64_t captured_in_use = 0, captured_reserved = 0;
  for (const auto& [id, pool] : s.private_pools) {
    captured_in_use += pool->in_use;
    captured_reserved += pool->reserved;
  }
  return detail::concat("persistent: ", persistent.in_use, " bytes in use, ", persistent.reserved,
                        " reserved; pass: ", pass.in_use, " bytes in use, ", pass.reserved,
                        " reserved, peak ", pass.peak, "; captured steps: ", captured_in_use,
                        " bytes in use, ", captured_reserved, " reserved");
}

void* allocate_block(int device, size_t bytes, Pool pool, size_t* block_bytes) {
  DeviceState& s = state(device);
  const size_t size = round_up(std::max<size_t>(bytes, 1), kRound);
  const bool small = size <= kSmallRequest;
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolState* routed = routed_pool(s, device);
  if (routed) {  // a borrowed block first (Note [A capture borrows the eager cache])
    Block probe{nullptr, size};
    if (auto it = routed->lent_free.lower_bound(&probe); it != routed->lent_free.end()) {
      Block* b = *it;
      routed->lent_free.erase(it);
      take_lent(*routed, b, size);
      s.allocated.emplace(b->ptr, b);
      routed->in_use += static_cast<int64_t>(b->size);
      routed->peak = std::max(routed->peak, routed->in_use);
      ++s.cache_hits;
      ++s.alloc_count;
      note_peaks(s);
      if (block_bytes) *block_bytes = b->size;
      return b->ptr;
    }
  }
  PoolState& p = routed ? *routed : pool_state(s, pool);
  auto& free = free_set(p, small);
  Block probe{nullptr, size};
  Block* b = nullptr;
  if (auto it = free.lower_bound(&probe); it != free.end()) {
    b = *it;
    free.erase(it);
    ++s.cache_hits;
  } else {
    const size_t segment = small ? kSmallSegment : round_up(size, kLargeRound);
    if (s.limit != 0 && reserved_bytes(s) + static_cast<int64_t>(segment) > s.limit) {
      release_all_cached(s);  // set_memory_limit: the cache first, then refuse
      if (reserved_bytes(s) + static_cast<int64_t>(segment) > s.limit)
        throw OutOfMemory(detail::concat(
            "cuda:", device, ": allocating ", bytes, " bytes (segment of ", segment, ") in the ",
            pool_name(pool), " pool would take the device's pools to ",
            reserved_bytes(s) + static_cast<int64_t>(segment), " bytes, past the memory limit of ",
            s.limit, " bytes (set_memory_limit; cached blocks already returned); ",
            pool_figures(s)));
    }
    void* ptr = nullptr;
    cudaError_t err = segment >= size ? cudaMalloc(&ptr, segment) : cudaErrorMemoryAllocation;
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the (non-sticky) error before retrying
      release_all_cached(s);
      err = cudaMalloc(&ptr, segment);
    }
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_bytes = 0, total_bytes = 0;
      if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
      throw OutOfMemory(detail::concat(
          "cuda:", device, ": out of memory allocating ", bytes, " bytes (segment of ", segment,
          ") in the ", pool_name(pool), " pool after freeing cached blocks; ", pool_figures(s),
          "; device: ", free_bytes, " of ", total_bytes, " bytes free"));
    }
    if (err != cudaSuccess) throw_cuda_error("cudaMalloc(&ptr, segment)", err, __FILE__, __LINE__);
    ++s.system_allocs;
    p.reserved += static_cast<int64_t>(segment);
    b = new Block{static_cast<char*>(ptr), segment, false, small, nullptr, nullptr, &p};
  }
  take(p, b, size);
  s.allocated.emplace(b->ptr, b);
  p.in_use += static_cast<int64_t>(b->size);
  p.peak = std::max(p.peak, p.in_use);
  ++s.alloc_count;
  note_peaks(s);
  if (block_bytes) *block_bytes = b->size;
  return b->ptr;
}
}  // namespace

void* allocate(int device, size_t bytes, Pool pool, size_t* block_bytes) {
  stream(device);  // validates the index and makes the device current
  void* ptr = allocate_block(device, bytes, pool, block_bytes);
  if (poison_allocations()) [[unlikely]] {
    // NaN in every float dtype (runtime.hpp). On the device's own stream even while this thread
    // captures: a fill recorded into the graph would run on every replay and wipe what is
    // written into the block from outside the graph between replays (a captured step's static
    // inputs). So a block allocated inside a capture is poisoned once, when the capture
    // allocates it, before the graph's first launch (queued later on the same stream).
    EMBER_CUDA_CHECK(cudaMemsetAsync(ptr, 0xFF, bytes, device_stream(device)));
  }
  return ptr;
}

void deallocate(int device, void* ptr, size_t /*block_bytes*/, Pool /*pool*/) {
  if (!ptr) return;
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.allocated.find(ptr);
  EMBER_ASSERT(it != s.allocated.end(), "cuda deallocate: ", ptr,
               " is not a block of cuda:", device);
  Block* b = it->second;
  s.allocated.erase(it);
  if (PoolState* p = b->borrower) {  // back to the capture that borrowed it
    p->in_use -= static_cast<int64_t>(b->size);
    Block* merged = add_lent_free(*p, b);
    if (p->released) give_back_free(*p, merged);  // the graph is gone
    release_if_done(s, *p);
    return;
  }
  if (PoolState* routed = routed_pool(s, device);
      routed && (b->owner == &s.pools[0] || b->owner == &s.pools[1])) {
    // An eager block freed by the capturing thread: the graph may read it (Note [A capture
    // borrows the eager cache]).
    PoolState& eager = *b->owner;
    eager.in_use -= static_cast<int64_t>(b->size);
    eager.reserved -= static_cast<int64_t>(b->size);
    routed->reserved += static_cast<int64_t>(b->size);
    b->borrower = routed;
    b->used = true;
    routed->lent.insert(b);
    add_lent_free(*routed, b);
    return;
  }
  free_block(s, b);
}

namespace {

// Returns `b` (in use, out of `allocated`) to its pool's free sets, merging free neighbours;
// a released private pool whose last block this was frees its segments and goes.
void free_block(DeviceState& s, Block* b) {
  PoolState& p = *b->owner;
  p.in_use -= static_cast<int64_t>(b->size);
  insert_free(p, b);
  release_if_done(s, p);
}

// Puts `b` (no longer in use) into its owner's free sets, merging free neighbours.
void insert_free(PoolState& p, Block* b) {
  b->in_use = false;
  auto& free = free_set(p, b->small);
  // Coalesce with free neighbours (Note [CUDA caching allocator]).
  if (Block* prev = b->prev; prev && !prev->in_use) {
    free.erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    delete b;
    b = prev;
  }
  if (Block* next = b->next; next && !next->in_use) {
    free.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    delete next;
  }
  free.insert(b);
}

// A released private pool whose last block came back frees its segments and goes.
void release_if_done(DeviceState& s, PoolState& p) {
  if (!p.released || p.in_use != 0) return;
  release_free_segments(p);
  std::erase_if(s.private_pools, [&](const auto& kv) { return kv.second.get() == &p; });
}

}  // namespace

// Accounting only (Storage::recharge): the block stays in a segment of `from`, but its bytes
// count as in use and reserved in `to` until they are charged back, so each pool's figures
// keep in_use <= reserved. A segment is released only when wholly free, so never while one
// of its blocks is charged elsewhere.
void recharge(int device, void* ptr, size_t block_bytes, Pool from, Pool to) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto it = s.allocated.find(ptr); it != s.allocated.end()) {
    const PoolState* owner = it->second->owner;
    if ((owner != &s.pools[0] && owner != &s.pools[1]) || it->second->borrower)
      return;  // a private pool's, or borrowed by one: counted as captured
  }
  const auto bytes = static_cast<int64_t>(block_bytes);
  PoolState& source = pool_state(s, from);
  source.in_use -= bytes;
  source.reserved -= bytes;
  PoolState& target = pool_state(s, to);
  target.in_use += bytes;
  target.reserved += bytes;
  target.peak = std::max(target.peak, target.in_use);
}

void empty_cache(int device) {
  stream(device);
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  release_all_cached(s);
}

void set_memory_limit(int device, int64_t bytes) {
  check_device(device, "set_memory_limit");
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.limit = bytes;
}

int64_t memory_limit(int device) {
  check_device(device, "memory_limit");
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.limit;
}

// A small request takes its rounded size (a fitting block is split when the rest is a block);
// a large one its own segment, whole unless the rest is worth splitting off (take's rule).
size_t block_bytes_for(int /*device*/, size_t bytes) {
  const size_t size = round_up(std::max<size_t>(bytes, 1), kRound);
  if (size <= kSmallRequest) return size;
  const size_t segment = round_up(size, kLargeRound);
  return segment - size > kSmallRequest ? size : segment;
}

void memory_stats(int device, MemoryStats* stats) {
  check_device(device, "memory_stats");
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  const PoolState& persistent = s.pools[static_cast<int>(Pool::Persistent)];
  const PoolState& pass = s.pools[static_cast<int>(Pool::Pass)];
  MemoryStats out;
  out.persistent_bytes = persistent.in_use;
  out.persistent_reserved = persistent.reserved;
  out.pass_in_use = pass.in_use;
  out.pass_reserved = pass.reserved;
  out.pass_peak = pass.peak;
  out.host_to_device_bytes = s.host_to_device;
  out.device_to_host_bytes = s.device_to_host;
  out.host_to_device_copies = s.host_to_device_copies;
  out.device_to_host_copies = s.device_to_host_copies;
  out.kernel_launches = kernel_launches(device);
  out.alloc_count = s.alloc_count;
  out.cache_hits = s.cache_hits;
  out.system_allocs = s.system_allocs;
  for (const auto& [id, pool] : s.private_pools) {
    out.captured_in_use += pool->in_use;
    out.captured_reserved += pool->reserved;
  }
  out.peak_allocated = s.peak_allocated;
  out.peak_reserved = s.peak_reserved;
  const int64_t reserved = persistent.reserved + pass.reserved;
  const int64_t in_use = persistent.in_use + pass.in_use;
  out.fragmentation = reserved > 0 ? static_cast<double>(reserved - in_use) / reserved : 0.0;
  *stats = out;
}

namespace {

// Takes the borrowed free block `b` (out of p.lent_free) for a request of `size` bytes,
// splitting off the rest as another borrowed free block when it is worth keeping.
void take_lent(PoolState& p, Block* b, size_t size) {
  const size_t rest = b->size - size;
  if (b->small ? rest >= kRound : rest > kSmallRequest) {
    auto* tail = new Block{b->ptr + size, rest, true, b->small, b, b->next, b->owner};
    tail->borrower = &p;
    tail->lent_free = true;
    tail->used = b->used;  // bytes an earlier tensor of the capture had: the graph's
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    p.lent.insert(tail);
    p.lent_free.insert(tail);
  }
  b->lent_free = false;
  b->used = true;
}

// Makes the borrowed block `b` (out of any free set) free in p, merged with free borrowed
// neighbours; returns the merged block. A borrowed block stays in_use for its segment's own
// pool, so eager frees never merge with it.
Block* add_lent_free(PoolState& p, Block* b) {
  if (Block* prev = b->prev; prev && prev->borrower == &p && prev->lent_free) {
    p.lent_free.erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    prev->used = prev->used || b->used;
    p.lent.erase(b);
    delete b;
    b = prev;
  }
  if (Block* next = b->next; next && next->borrower == &p && next->lent_free) {
    p.lent_free.erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next) next->next->prev = b;
    b->used = b->used || next->used;
    p.lent.erase(next);
    delete next;
  }
  b->lent_free = true;
  p.lent_free.insert(b);
  return b;
}

// Gives the borrowed free block `b` back to its segment's pool (a free block there).
void give_back_free(PoolState& p, Block* b) {
  p.lent_free.erase(b);
  p.lent.erase(b);
  p.reserved -= static_cast<int64_t>(b->size);
  b->owner->reserved += static_cast<int64_t>(b->size);
  b->borrower = nullptr;
  b->lent_free = false;
  b->used = false;
  insert_free(*b->owner, b);
}

}  // namespace

int64_t private_pool_create(int device) {
  stream(device);
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  const int64_t id = s.next_private_id++;
  PoolState& p = *s.private_pools.emplace(id, std::make_unique<PoolState>()).first->second;
  // Note [A capture borrows the eager cache]: every free block of the eager pools.
  for (PoolState& eager : s.pools) {
    for (auto* set : {&eager.free_small, &eager.free_large}) {
      for (Block* b : *set) {
        eager.reserved -= static_cast<int64_t>(b->size);
        p.reserved += static_cast<int64_t>(b->size);
        b->in_use = true;
        b->borrower = &p;
        b->lent_free = true;
        b->used = false;
        p.lent.insert(b);
        p.lent_free.insert(b);
      }
      set->clear();
    }
  }
  return id;
}

void private_pool_route(int device, int64_t id) {
  t_route_device = id != 0 ? device : -1;
  t_route_pool = id;
}

void private_pool_capture_end(int device, int64_t id) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.private_pools.find(id);
  if (it == s.private_pools.end()) return;
  PoolState& p = *it->second;
  std::vector<Block*> unused;
  for (Block* b : p.lent_free)
    if (!b->used) unused.push_back(b);
  for (Block* b : unused) give_back_free(p, b);
}

void private_pool_release(int device, int64_t id) {
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.private_pools.find(id);
  if (it == s.private_pools.end()) return;
  PoolState& p = *it->second;
  // Borrowed blocks no tensor uses go back to their caches now; a live tensor's stays
  // borrowed (and counted as captured, as the pool's own blocks are) until it is freed.
  const std::vector<Block*> free_lent(p.lent_free.begin(), p.lent_free.end());
  for (Block* b : free_lent) give_back_free(p, b);
  p.released = true;
  release_if_done(s, p);
}

void reset_peak(int device) {
  check_device(device, "reset_peak_stats");
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  PoolState& pass = s.pools[static_cast<int>(Pool::Pass)];
  pass.peak = pass.in_use;
}

void reset_peaks(int device) {
  check_device(device, "reset_peak_memory_stats");
  DeviceState& s = state(device);
  std::lock_guard<std::mutex> lock(s.mutex);
  for (PoolState& p : s.pools) p.peak = p.in_use;
  for (auto& [id, pool] : s.private_pools) pool->peak = pool->in_use;
  s.peak_allocated = 0;
  s.peak_reserved = 0;
  note_peaks(s);
}

// Waits for the stream, then reports any error a kernel recorded (Note [Deferred device errors]).
void synchronize(int device) {
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
  check_device_errors(device);
}

// ---- host <-> device copies through two pinned staging buffers ----
namespace {

void ensure_staging(DeviceState& s) {
  if (s.staging[0]) return;
  for (int i = 0; i < 2; ++i) {
    EMBER_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&s.staging[i]), kStagingBytes,
                                   cudaHostAllocDefault));
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&s.staging_done[i], cudaEventDisableTiming));
  }
}

}  // namespace

// Host to device: each chunk is copied into a staging buffer (once that buffer's previous
// copy has finished) and sent with cudaMemcpyAsync; the host does not wait for the last
// chunk, so the caller's buffer may be reused at once and the GPU keeps its queue.
void memcpy_from_host(int device, void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  cudaStream_t st = stream(device);
  DeviceState& s = state(device);
  {
    std::lock_guard<std::mutex> lock(s.staging_mutex);
    ensure_staging(s);
    for (size_t done = 0, i = 0; done < bytes; done += kStagingBytes, ++i) {
      const size_t n = std::min(kStagingBytes, bytes - done);
      const int k = static_cast<int>(i % 2);
      EMBER_CUDA_CHECK(cudaEventSynchronize(s.staging_done[k]));
      std::memcpy(s.staging[k], static_cast<const char*>(host_src) + done, n);
      EMBER_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + done, s.staging[k], n,
                                       cudaMemcpyHostToDevice, st));
      EMBER_CUDA_CHECK(cudaEventRecord(s.staging_done[k], st));
    }
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  s.host_to_device += static_cast<int64_t>(bytes);
  ++s.host_to_device_copies;
}

// ---- streamed copies from the caller's pinned buffers (io's GPU load) ----

void* host_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  EMBER_CUDA_CHECK(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
  return p;
}

void host_free_pinned(void* ptr) {
  if (ptr) cudaFreeHost(ptr);
}

namespace {
cudaEvent_t slot_event(DeviceState& s, int slot, bool create) {
  EMBER_ASSERT(slot >= 0 && slot < static_cast<int>(s.slot_done.size()), "pinned slot ", slot,
               " out of range");
  std::lock_guard<std::mutex> lock(s.slot_mutex);
  cudaEvent_t& e = s.slot_done[static_cast<size_t>(slot)];
  if (!e && create) EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

// One streamed copy in either direction, marking `slot` busy until it is done.
void queue_pinned_copy(int device, void* dst, const void* src, size_t bytes, int slot,
                       cudaMemcpyKind kind) {
  if (bytes == 0) return;
  cudaStream_t st = stream(device);
  DeviceState& s = state(device);
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, st));
  EMBER_CUDA_CHECK(cudaEventRecord(slot_event(s, slot, true), st));
  std::lock_guard<std::mutex> lock(s.mutex);
  const bool onto = kind == cudaMemcpyHostToDevice;
  (onto ? s.host_to_device : s.device_to_host) += static_cast<int64_t>(bytes);
  ++(onto ? s.host_to_device_copies : s.device_to_host_copies);
}
}  // namespace

void copy_from_pinned_async(int device, void* dst, const void* pinned_src, size_t bytes, int slot) {
  queue_pinned_copy(device, dst, pinned_src, bytes, slot, cudaMemcpyHostToDevice);
}

void copy_to_pinned_async(int device, void* pinned_dst, const void* src, size_t bytes, int slot) {
  queue_pinned_copy(device, pinned_dst, src, bytes, slot, cudaMemcpyDeviceToHost);
}

void wait_pinned_slot(int device, int slot) {
  if (cudaEvent_t e = slot_event(state(device), slot, false))
    EMBER_CUDA_CHECK(cudaEventSynchronize(e));
}

// Device to host: chunk i+1 is queued before chunk i is copied out of its staging buffer.
void memcpy_to_host(int device, void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  cudaStream_t st = stream(device);
  DeviceState& s = state(device);
  {
    std::lock_guard<std::mutex> lock(s.staging_mutex);
    ensure_staging(s);
    const size_t chunks = (bytes + kStagingBytes - 1) / kStagingBytes;
    auto chunk_bytes = [&](size_t i) { return std::min(kStagingBytes, bytes - i * kStagingBytes); };
    auto queue = [&](size_t i) {
      const int k = static_cast<int>(i % 2);
      EMBER_CUDA_CHECK(cudaMemcpyAsync(s.staging[k],
                                       static_cast<const char*>(src) + i * kStagingBytes,
                                       chunk_bytes(i), cudaMemcpyDeviceToHost, st));
      EMBER_CUDA_CHECK(cudaEventRecord(s.staging_done[k], st));
    };
    queue(0);
    for (size_t i = 0; i < chunks; ++i) {
      if (i + 1 < chunks) queue(i + 1);
      const int k = static_cast<int>(i % 2);
      EMBER_CUDA_CHECK(cudaEventSynchronize(s.staging_done[k]));
      std::memcpy(static_cast<char*>(host_dst) + i * kStagingBytes, s.staging[k], chunk_bytes(i));
    }
  }
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.device_to_host += static_cast<int64_t>(bytes);
    ++s.device_to_host_copies;
  }
  check_device_errors(device);  // the stream is drained up to this copy
}

}  // namespace ember::cuda
