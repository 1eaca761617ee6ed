// src/backend/device_runtime.cpp — maps a device type to its runtime, and leases pinned
// staging buffers with slot numbers of their own.
#include "backend/device_runtime.hpp"

#include <array>
#include <mutex>
#include <string>
#include <utility>

#include "ember/error.hpp"

namespace ember::backend {

const DeviceRuntime& runtime_for(DeviceType type) {
  if (type == DeviceType::cpu) return cpu_runtime();
#if defined(EMBER_WITH_CUDA)
  return cuda_runtime();
#else
  detail::throw_error(
      "ember was built without CUDA: rebuild with -DEMBER_CUDA=ON on a machine with the CUDA "
      "toolkit to use cuda devices");
#endif
}

namespace {

// Note [Pinned slots are leased]
// A runtime tracks the copies of each pinned staging buffer by a slot number (a CUDA event per
// slot and device), so two buffers must never share one. The numbers are handed out here, for
// the whole process and both device types, to each PinnedStaging while it lives: io's GPU
// loader and the asynchronous checkpoint's snapshot once numbered theirs by hand (0..253 and
// 255), which a third user could not have known.
class SlotNumbers {
 public:
  static SlotNumbers& get() {
    static SlotNumbers* s = new SlotNumbers();  // intentionally leaked: leases may outlive it
    return *s;
  }
  int acquire(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int i = 0; i < kPinnedSlots; ++i) {
      const int slot = (next_ + i) % kPinnedSlots;
      if (!used_[static_cast<size_t>(slot)]) {
        used_[static_cast<size_t>(slot)] = true;
        next_ = (slot + 1) % kPinnedSlots;
        return slot;
      }
    }
    detail::throw_error("PinnedStaging: all " + std::to_string(kPinnedSlots) +
                        " pinned staging slots are leased (asked for a buffer of " +
                        std::to_string(bytes) + " bytes); free a PinnedStaging first");
  }
  void release(int slot) {
    std::lock_guard<std::mutex> lock(mutex_);
    used_[static_cast<size_t>(slot)] = false;
  }

 private:
  std::mutex mutex_;
  std::array<bool, kPinnedSlots> used_{};
  int next_ = 0;
};

// A copy of `slot` was just queued on `device`: the destructor waits for the devices in `used`
// (bit d: device d); a device past 64 is not tracked, so its copy is waited for at once.
void note_queued(const DeviceRuntime& runtime, int device, int slot, uint64_t& used) {
  if (device < 64)
    used |= uint64_t{1} << device;
  else
    runtime.wait_pinned_slot(device, slot);
}

}  // namespace

PinnedStaging::PinnedStaging(DeviceType type, size_t bytes)
    : runtime_(&runtime_for(type)), bytes_(bytes) {
  slot_ = SlotNumbers::get().acquire(bytes);
  try {
    data_ = runtime_->host_alloc_pinned(bytes);
  } catch (...) {
    SlotNumbers::get().release(slot_);
    throw;
  }
}

PinnedStaging::~PinnedStaging() { release(); }

PinnedStaging::PinnedStaging(PinnedStaging&& other) noexcept
    : runtime_(std::exchange(other.runtime_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      slot_(std::exchange(other.slot_, -1)),
      devices_used_(std::exchange(other.devices_used_, 0)) {}

PinnedStaging& PinnedStaging::operator=(PinnedStaging&& other) noexcept {
  if (this != &other) {
    release();
    runtime_ = std::exchange(other.runtime_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    slot_ = std::exchange(other.slot_, -1);
    devices_used_ = std::exchange(other.devices_used_, 0);
  }
  return *this;
}

void PinnedStaging::release() noexcept {
  if (!runtime_) return;
  for (int d = 0; d < 64; ++d) {
    if (!((devices_used_ >> d) & 1u)) continue;
    try {
      runtime_->wait_pinned_slot(d, slot_);  // no copy may still read or write the buffer
    } catch (...) {                          // a failed device: its copies are gone with it
    }
  }
  try {
    if (data_) runtime_->host_free_pinned(data_);
  } catch (...) {
  }
  SlotNumbers::get().release(slot_);
  runtime_ = nullptr;
  data_ = nullptr;
  slot_ = -1;
  devices_used_ = 0;
}

void PinnedStaging::check_range(const char* what, size_t offset, size_t bytes) const {
  if (!runtime_)
    detail::throw_error(std::string("PinnedStaging::") + what +
                        ": the buffer is empty (default-constructed or moved from)");
  if (offset > bytes_ || bytes > bytes_ - offset)
    detail::throw_error(std::string("PinnedStaging::") + what + ": bytes [" +
                        std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                        ") out of the buffer's " + std::to_string(bytes_));
}

void PinnedStaging::copy_to_device(int device, void* dst, size_t offset, size_t bytes) {
  check_range("copy_to_device", offset, bytes);
  runtime_->copy_from_pinned_async(device, dst, static_cast<char*>(data_) + offset, bytes, slot_);
  note_queued(*runtime_, device, slot_, devices_used_);
}

void PinnedStaging::copy_from_device(int device, const void* src, size_t offset, size_t bytes) {
  check_range("copy_from_device", offset, bytes);
  runtime_->copy_to_pinned_async(device, static_cast<char*>(data_) + offset, src, bytes, slot_);
  note_queued(*runtime_, device, slot_, devices_used_);
}

void PinnedStaging::wait(int device) {
  if (runtime_) runtime_->wait_pinned_slot(device, slot_);
}

}  // namespace ember::backend
