// src/core/alloc_trace.hpp — a per-thread observer of storage allocations: every Storage this
// thread creates and destroys while one is installed, with the bytes it asked for. The memory
// estimate's dry run (src/train/memory_estimate.cpp) replays them with a device's rounding;
// load_model (src/io/checkpoint.cpp) refuses an architecture that asks for more than its file
// holds.
#pragma once

#include <cstddef>
#include <optional>

#include "ember/device.hpp"

namespace ember {
class Storage;
}  // namespace ember

namespace ember::core {

class AllocationObserver {
 public:
  virtual ~AllocationObserver() = default;
  /// `bytes` are about to be asked for; throwing refuses the request before the allocator
  /// sees it (load_model's budget for a file's architecture).
  virtual void allocating(size_t /*bytes*/) {}
  /// `storage` was just given `bytes` (the request, before the allocator's rounding).
  virtual void allocated(const Storage* storage, size_t bytes) = 0;
  /// `storage` is being destroyed (also called for storages made before installation).
  virtual void freed(const Storage* storage) = 0;
};

/// Installs `observer` for this thread (nullptr: none) and returns the one it replaces.
AllocationObserver* set_allocation_observer(AllocationObserver* observer);

/// While alive with `pause` true, this thread's allocations go unobserved (the observer is then
/// told of their frees, as of any storage it never saw, and ignores them). A memory estimate's
/// dry run leaves out this way the temporaries of a path its target does not take (Note [A dry
/// run for a cuDNN target] in src/ops/conv_library.cpp).
class ObserverPause {
 public:
  explicit ObserverPause(bool pause);
  ~ObserverPause();
  ObserverPause(const ObserverPause&) = delete;
  ObserverPause& operator=(const ObserverPause&) = delete;

 private:
  bool paused_;
  AllocationObserver* previous_ = nullptr;
};

/// The device whose algorithm choices ops follow on this thread: `actual` unless a
/// PlanningDeviceGuard names another. estimate_training_memory's dry run on the CPU plans as
/// its target would (a GPU convolution's im2col over the whole batch, its split-K weight
/// gradient, no CPU convolution library), so the trace holds the target's temporaries.
Device planning_device(Device actual);

/// While alive, ops on this thread plan for `device` (planning_device).
class PlanningDeviceGuard {
 public:
  explicit PlanningDeviceGuard(Device device);
  ~PlanningDeviceGuard();
  PlanningDeviceGuard(const PlanningDeviceGuard&) = delete;
  PlanningDeviceGuard& operator=(const PlanningDeviceGuard&) = delete;

 private:
  std::optional<Device> previous_;
};

/// The bytes a request of `bytes` on `device` counts as in use (memory_stats) when a fresh
/// segment serves it: the device's allocator's rounding.
size_t block_bytes_for(Device device, size_t bytes);

}  // namespace ember::core
