// src/core/storage.cpp — Storage: bytes from a device's caching allocator, plus the pool
// guard, the memory-stat entry points and release_device (ARCHITECTURE §3).
//
// Every storage on a non-CPU device is listed in a registry (one set per device) while it
// lives there, so release_device can find and rescue all of them; CPU storages are not
// listed (nothing ever needs to find them, and the CPU path stays free of a lock).
#include "ember/storage.hpp"

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "backend/device_runtime.hpp"
#include "core/alloc_trace.hpp"
#include "core/capture.hpp"
#include "core/make.hpp"
#include "core/profiler.hpp"
#include "ember/error.hpp"
#include "ember/tensor.hpp"

namespace ember {

namespace {
thread_local Pool t_current_pool = Pool::Pass;
thread_local core::AllocationObserver* t_observer = nullptr;  // core/alloc_trace.hpp

// The storages living on each non-CPU device, keyed by device index. Recursive: a storage
// freed while release_device migrates (the same thread) unregisters under the held lock.
struct DeviceRegistry {
  std::recursive_mutex mutex;
  std::unordered_map<int, std::unordered_set<Storage*>> live;
};

DeviceRegistry& registry() {
  static DeviceRegistry* r = new DeviceRegistry();  // leaked: storages outlive statics
  return *r;
}

void register_storage(Storage* s, Device d) {
  if (d.is_cpu()) return;
  DeviceRegistry& r = registry();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  r.live[d.index].insert(s);
}

void unregister_storage(Storage* s, Device d) {
  if (d.is_cpu()) return;
  DeviceRegistry& r = registry();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);
  r.live[d.index].erase(s);
}
}  // namespace

Storage::Storage(size_t bytes, Device device, Pool pool)
    : bytes_(bytes), device_(device), pool_(pool), home_pool_(pool) {
  if (t_observer) [[unlikely]]
    t_observer->allocating(bytes);
  const backend::DeviceRuntime& be = backend::runtime_for(device);
  data_ = be.allocate(device.index, bytes, pool, &block_bytes_);
  register_storage(this, device_);
  if (detail::profiling()) [[unlikely]]
    core::profiler::note_bytes(static_cast<int64_t>(bytes));
  if (t_observer) [[unlikely]]
    t_observer->allocated(this, bytes);
}

Storage* Storage::wrap_external(void* data, size_t bytes) {
  auto* s = new Storage();
  s->data_ = data;
  s->bytes_ = bytes;
  s->device_ = Device::cpu();
  s->owned_ = false;
  return s;
}

Storage::~Storage() {
  if (t_observer) [[unlikely]]
    t_observer->freed(this);
  unregister_storage(this, device_);
  release_block();
}

void Storage::release_block() {
  if (!owned_ || !data_) return;
  const backend::DeviceRuntime& be = backend::runtime_for(device_);
  if (pool_ != home_pool_) be.recharge(device_.index, data_, block_bytes_, pool_, home_pool_);
  be.deallocate(device_.index, data_, block_bytes_, home_pool_);
}

void Storage::recharge(Pool pool) {
  if (pool == pool_) return;
  EMBER_ASSERT(owned_, "Storage::recharge: external memory belongs to no pool");
  backend::runtime_for(device_).recharge(device_.index, data_, block_bytes_, pool_, pool);
  pool_ = pool;
}

bool Storage::exchange(Storage& other) {
  if (&other == this || !owned_ || !other.owned_ || device_ != other.device_ ||
      bytes_ != other.bytes_ || pool_ != other.pool_)
    return false;
  // Each block travels with the cache it returns to; both stay counted in pool_ (a
  // parameter adopted from a temporary is counted Persistent but returns to the Pass cache).
  std::swap(data_, other.data_);
  std::swap(block_bytes_, other.block_bytes_);
  std::swap(home_pool_, other.home_pool_);
  ++version_;
  ++other.version_;
  return true;
}

void Storage::move_to(Device target) {
  if (target == device_) return;
  const backend::DeviceRuntime& to = backend::runtime_for(target);
  size_t new_block = 0;
  void* dst = to.allocate(target.index, bytes_, pool_, &new_block);
  if (device_.is_cpu()) {
    to.memcpy_from_host(target.index, dst, data_, bytes_);
  } else if (target.is_cpu()) {
    backend::runtime_for(device_).memcpy_to_host(device_.index, dst, data_, bytes_);
  } else {  // device to device through the host
    std::vector<char> staging(bytes_);
    backend::runtime_for(device_).memcpy_to_host(device_.index, staging.data(), data_, bytes_);
    to.memcpy_from_host(target.index, dst, staging.data(), bytes_);
  }
  release_block();
  unregister_storage(this, device_);
  register_storage(this, target);
  data_ = dst;
  block_bytes_ = new_block;
  home_pool_ = pool_;
  device_ = target;
  owned_ = true;
  ++version_;
}

core::AllocationObserver* core::set_allocation_observer(core::AllocationObserver* observer) {
  core::AllocationObserver* previous = t_observer;
  t_observer = observer;
  return previous;
}

core::ObserverPause::ObserverPause(bool pause) : paused_(pause) {
  if (paused_) previous_ = set_allocation_observer(nullptr);
}
core::ObserverPause::~ObserverPause() {
  if (paused_) set_allocation_observer(previous_);
}

namespace {
thread_local std::optional<Device> t_planning_device;  // core/alloc_trace.hpp
}  // namespace

Device core::planning_device(Device actual) { return t_planning_device.value_or(actual); }
core::PlanningDeviceGuard::PlanningDeviceGuard(Device device) : previous_(t_planning_device) {
  t_planning_device = device;
}
core::PlanningDeviceGuard::~PlanningDeviceGuard() { t_planning_device = previous_; }

size_t core::block_bytes_for(Device device, size_t bytes) {
  return backend::runtime_for(device).block_bytes_for(device.index, bytes);
}

PoolGuard::PoolGuard(Pool pool) : previous_(t_current_pool) { t_current_pool = pool; }
PoolGuard::~PoolGuard() { t_current_pool = previous_; }
Pool current_pool() { return t_current_pool; }

MemoryStats memory_stats(Device device) {
  MemoryStats s;
  backend::runtime_for(device).memory_stats(device.index, &s);
  return s;
}

void reset_peak_stats(Device device) { backend::runtime_for(device).reset_peak(device.index); }
void reset_peak_memory_stats(Device device) {
  backend::runtime_for(device).reset_peaks(device.index);
}
void empty_cache(Device device) { backend::runtime_for(device).empty_cache(device.index); }
void set_memory_limit(Device device, int64_t bytes) {
  EMBER_CHECK(bytes >= 0, "set_memory_limit: ", bytes, " bytes for ", device.str(),
              " (expected a positive byte count, or 0 for no limit)");
  backend::runtime_for(device).set_memory_limit(device.index, bytes);
}
int64_t memory_limit(Device device) {
  return backend::runtime_for(device).memory_limit(device.index);
}
void synchronize(Device device) { backend::runtime_for(device).synchronize(device.index); }

void release_device(Device device) {
  EMBER_CHECK(device.is_cuda(), "release_device: only CUDA devices can be released (got ",
              device.str(), ")");
  const backend::DeviceRuntime& be = backend::runtime_for(device);  // "built without CUDA" if so
  DeviceRegistry& r = registry();
  std::lock_guard<std::recursive_mutex> lock(r.mutex);  // no storage dies mid-rescue
  auto it = r.live.find(device.index);
  if (it != r.live.end()) {
    const std::vector<Storage*> storages(it->second.begin(), it->second.end());
    for (Storage* s : storages)
      detail::StorageAccess::move_to(*s, Device::cpu());  // unregisters each
  }
  be.synchronize(device.index);
  be.empty_cache(device.index);
}

Pool pool_of(const Tensor& t) {
  EMBER_CHECK(t.defined(), "pool_of: the tensor is undefined");
  return t.storage()->pool();
}

namespace core {

void copy_from_host(const Tensor& dst, const void* src, size_t bytes) {
  EMBER_ASSERT(
      dst.is_contiguous() && bytes == static_cast<size_t>(dst.numel()) * element_size(dst.dtype()),
      "copy_from_host: needs a contiguous destination of ", bytes, " bytes");
  detail::StorageAccess::bump_version(*dst.storage());
  if (bytes == 0) return;
  if (dst.device().is_cpu()) {
    std::memcpy(dst.data_ptr(), src, bytes);
    return;
  }
  detail::check_no_host_transfer("copy from host memory");
  backend::runtime_for(dst.device())
      .memcpy_from_host(dst.device().index, dst.data_ptr(), src, bytes);
}

}  // namespace core

}  // namespace ember
