// src/backend/device_runtime.hpp — the device runtime: the services one device type offers to
// the layers above the kernels (ARCHITECTURE §5). Memory pools, host<->device copies, pinned
// staging, streams, timing marks and graph capture, each a slot of runtime_slots.def; both
// backends fill a table of them (src/cpu/backend_cpu.cpp, src/cuda/backend_cuda.cpp), beside
// their kernel table (backend.hpp). core, io, train and distributed reach a device through
// this header alone: it names no op, no kernel and no catalogue.
//
//   const backend::DeviceRuntime& rt = backend::runtime_for(DeviceType::cuda);
//   rt.synchronize(0);
//   backend::PinnedStaging buffer(DeviceType::cuda, 4 << 20);  // a leased pinned buffer
//   buffer.copy_to_device(0, dst, 0, bytes);                   // queued, returns at once
//   buffer.wait(0);                                            // until the copy is done
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ember/device.hpp"
#include "ember/memory.hpp"

namespace ember::backend {

/// The service table of one device type: a function pointer per slot of runtime_slots.def.
struct DeviceRuntime {
  const char* name;
#define EMBER_SLOT(ret, slot, params) ret(*slot) params;
#include "backend/runtime_slots.def"
#undef EMBER_SLOT
};

/// The runtime of `type`. Throws "ember was built without CUDA" for cuda in a CPU-only build.
const DeviceRuntime& runtime_for(DeviceType type);
inline const DeviceRuntime& runtime_for(Device d) { return runtime_for(d.type); }

/// Each backend's registration file defines its runtime getter (src/backend/table.inc).
const DeviceRuntime& cpu_runtime();
#if defined(EMBER_WITH_CUDA)
const DeviceRuntime& cuda_runtime();
#endif

/// The number of pinned staging slots a runtime tracks (the `slot` of its staged copies).
inline constexpr int kPinnedSlots = 256;

/// A pinned host buffer leased with a staging slot of its own: the slot numbers are handed
/// out here, process-wide, so no caller numbers them (and two users cannot share one). Copies
/// between the buffer and a device are queued on the device's stream and return at once;
/// wait(device) blocks until this buffer's copies on `device` are done. The destructor waits
/// for every device the buffer was used with, then frees the memory and returns the slot.
/// Construction throws an ember::Error when all kPinnedSlots slots are leased. Movable, not
/// copyable. Use from one thread at a time.
class PinnedStaging {
 public:
  PinnedStaging() = default;
  PinnedStaging(DeviceType type, size_t bytes);
  ~PinnedStaging();
  PinnedStaging(PinnedStaging&& other) noexcept;
  PinnedStaging& operator=(PinnedStaging&& other) noexcept;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  int slot() const { return slot_; }
  bool empty() const { return data_ == nullptr; }

  /// Queues bytes [offset, offset + bytes) of the buffer onto `dst` of `device`.
  void copy_to_device(int device, void* dst, size_t offset, size_t bytes);
  /// Queues `bytes` of `src` on `device` into the buffer at `offset`.
  void copy_from_device(int device, const void* src, size_t offset, size_t bytes);
  /// Blocks until this buffer's queued copies on `device` are done (an empty buffer: at once).
  void wait(int device);

 private:
  void release() noexcept;
  void check_range(const char* what, size_t offset, size_t bytes) const;
  const DeviceRuntime* runtime_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  int slot_ = -1;
  uint64_t devices_used_ = 0;  // bit d: copies were queued on device d (d < 64)
};

}  // namespace ember::backend
