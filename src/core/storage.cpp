// src/core/storage.cpp — Storage: bytes from a device's caching allocator, plus the pool
// guard and the memory-stat entry points (ARCHITECTURE §3).
#include "ember/storage.hpp"

#include <cstring>
#include <vector>

#include "backend/backend.hpp"
#include "ember/error.hpp"
#include "ember/tensor.hpp"

namespace ember {

namespace {
thread_local Pool t_current_pool = Pool::Pass;
}

Storage::Storage(size_t bytes, Device device, Pool pool)
    : bytes_(bytes), device_(device), pool_(pool) {
  const backend::Backend& be = backend::backend_for(device);
  data_ = be.allocate(device.index, bytes, pool, &block_bytes_);
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
  if (owned_ && data_) {
    backend::backend_for(device_).deallocate(device_.index, data_, block_bytes_, pool_);
  }
}

void Storage::migrate(Device target) {
  if (target == device_) return;
  const backend::Backend& to = backend::backend_for(target);
  size_t new_block = 0;
  void* dst = to.allocate(target.index, bytes_, pool_, &new_block);
  if (device_.is_cpu()) {
    to.memcpy_from_host(target.index, dst, data_, bytes_);
  } else if (target.is_cpu()) {
    backend::backend_for(device_).memcpy_to_host(device_.index, dst, data_, bytes_);
  } else {  // device to device through the host
    std::vector<char> staging(bytes_);
    backend::backend_for(device_).memcpy_to_host(device_.index, staging.data(), data_, bytes_);
    to.memcpy_from_host(target.index, dst, staging.data(), bytes_);
  }
  if (owned_) backend::backend_for(device_).deallocate(device_.index, data_, block_bytes_, pool_);
  data_ = dst;
  block_bytes_ = new_block;
  device_ = target;
  owned_ = true;
  ++version_;
}

PoolGuard::PoolGuard(Pool pool) : previous_(t_current_pool) { t_current_pool = pool; }
PoolGuard::~PoolGuard() { t_current_pool = previous_; }
Pool current_pool() { return t_current_pool; }

MemoryStats memory_stats(Device device) {
  MemoryStats s;
  backend::backend_for(device).memory_stats(device.index, &s);
  return s;
}

void reset_peak_stats(Device device) { backend::backend_for(device).reset_peak(device.index); }
void empty_cache(Device device) { backend::backend_for(device).empty_cache(device.index); }

Pool pool_of(const Tensor& t) {
  EMBER_CHECK(t.defined(), "pool_of: the tensor is undefined");
  return t.storage()->pool();
}

}  // namespace ember
