// src/cuda/device_error.cpp — the per-device deferred error records and the host check
// (Note [Deferred device errors] in device_error.cuh).
#include "cuda/device_error.cuh"

#include <array>
#include <atomic>
#include <mutex>

#include "cuda/kernels.cuh"
#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember::cuda {
namespace {

constexpr int kMaxDevices = 64;

struct Record {
  DeviceError* host = nullptr;    // the host's address of the pinned record
  DeviceError* device = nullptr;  // the address kernels write to
};

struct Records {
  std::mutex mutex;
  std::array<std::atomic<Record*>, kMaxDevices> records{};
};

Records& records() {
  static Records* r = new Records();  // leaked: pinned memory outlives static destructors
  return *r;
}

// The record of `device`, created on first use; null when none exists yet and !create.
Record* record_of(int device, bool create) {
  EMBER_ASSERT(device >= 0 && device < kMaxDevices, "device_error: device ", device,
               " out of range");
  Records& r = records();
  Record* rec = r.records[device].load(std::memory_order_acquire);
  if (rec || !create) return rec;
  std::lock_guard<std::mutex> lock(r.mutex);
  rec = r.records[device].load(std::memory_order_relaxed);
  if (!rec) {
    stream(device);  // makes the device current
    rec = new Record();
    void* host = nullptr;
    EMBER_CUDA_CHECK(
        cudaHostAlloc(&host, sizeof(DeviceError), cudaHostAllocMapped | cudaHostAllocPortable));
    rec->host = static_cast<DeviceError*>(host);
    *rec->host = DeviceError{};
    void* dev = nullptr;
    EMBER_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    rec->device = static_cast<DeviceError*>(dev);
    r.records[device].store(rec, std::memory_order_release);
  }
  return rec;
}

const char* op_name(int32_t op) {
  switch (op) {
    case kCrossEntropyLabel: return "cross_entropy";
    case kIndexSelect: return "index_select";
    case kIndexAdd: return "index_add";
    case kGather: return "gather";
    case kScatterAdd: return "scatter_add";
    case kKvCacheLength: return "attention_with_kv_cache";
    default: return "a CUDA kernel";
  }
}

}  // namespace

DeviceError* device_error_record(int device) { return record_of(device, true)->device; }

void check_device_errors(int device) {
  const Record* rec = record_of(device, false);
  if (rec == nullptr) return;
  volatile DeviceError* e = rec->host;
  const int32_t op = e->op;
  if (op == kNoDeviceError) [[likely]]
    return;
  const DeviceError seen{1, op, e->dim, 0, e->value, e->position, e->limit};
  e->op = kNoDeviceError;  // clear before throwing: the device stays usable
  e->claim = 0;
  const char* name = op_name(op);
  // Thrown as it is, never prefixed by an open op's error scope: the op running now is not the
  // one whose kernel found the value (Note [Synchronous device errors] in src/ops/common.cpp).
  const std::string when = detail::concat(
      "reported at the next synchronisation of cuda:", device,
      sync_errors() ? ""
                    : "; set EMBER_CUDA_SYNC_ERRORS=1 (or set_sync_errors(true)) to find the op");
  if (op == kCrossEntropyLabel)
    throw Error(detail::concat(name, ": label ", seen.value, " at position ", seen.position,
                               " is out of range for ", seen.limit,
                               " classes (expected labels in [0, ", seen.limit,
                               ") or ignore_index; ", when, ")"));
  if (op == kKvCacheLength)
    throw Error(detail::concat(
        name, ": cache_seqlens[", seen.position, "] is ", seen.value, " (expected 0 to ",
        seen.limit - 1, ": the cached and the new positions must fit the cache; ", when, ")"));
  throw Error(detail::concat(name, ": index ", seen.value, " (at position ", seen.position,
                             ") is out of range for dim ", seen.dim, " of size ", seen.limit,
                             " (expected indices in [0, ", seen.limit, "); ", when, ")"));
}

}  // namespace ember::cuda
