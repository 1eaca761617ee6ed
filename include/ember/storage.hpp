// ember/storage.hpp — a block of bytes on one device, owned by one pool.
//
// Storage is shared by a tensor and all its views. It carries the version counter that
// autograd uses to detect in-place changes to saved tensors. Storages on non-CPU devices
// are registered with their device so `release_device` can rescue them to the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ember/device.hpp"
#include "ember/memory.hpp"

namespace ember {

namespace detail {
struct StorageAccess;
}

/// Users read a Storage (data, bytes, device, pool, version); only ember changes one.
class Storage {
 public:
  /// Allocates `bytes` on `device` from `pool` (through that device's caching allocator).
  Storage(size_t bytes, Device device, Pool pool);
  /// Wraps memory ember does not own (never freed by ember). Host only.
  static Storage* wrap_external(void* data, size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  /// The pool this storage's bytes are counted in (memory_stats, pool_of).
  Pool pool() const { return pool_; }
  uint64_t version() const { return version_; }
  /// Deprecated: ember bumps the version of every write it makes; a bump from outside would
  /// only make autograd refuse a valid graph.
  [[deprecated("ember bumps versions itself")]] void bump_version() { ++version_; }
  /// Deprecated: release_device moves storages; moving one by hand leaves its tensors'
  /// device bookkeeping to the caller.
  [[deprecated("use release_device()")]] void migrate(Device target) { move_to(target); }

 private:
  friend struct detail::StorageAccess;
  // Moves the bytes to `target` (same pool); used by release_device. Data pointer changes.
  void move_to(Device target);
  // Counts these bytes in `pool` from now on, without moving them: the block stays where it
  // was carved from and goes back to that pool's cache when freed. Autograd uses it to keep
  // a step's gradient as a parameter's Persistent `.grad` without a copy (Note [Gradients
  // stolen into the Persistent pool], src/autograd/engine.cpp).
  void recharge(Pool pool);
  // Swaps the bytes of this storage and `other` (the I/O layer's single-pass load: Note
  // [Loading by exchange] in src/io/safetensors.cpp) and bumps both versions. Only two owned
  // blocks of one device, one size and one counted pool trade places (each with the cache it
  // returns to); otherwise nothing changes and it returns false.
  bool exchange(Storage& other);
  Storage() = default;
  void release_block();  // back to the home pool's cache (owned blocks only)
  void* data_ = nullptr;
  size_t bytes_ = 0;
  size_t block_bytes_ = 0;  // size of the block actually reserved
  Device device_;
  Pool pool_ = Pool::Pass;       // where the bytes are counted
  Pool home_pool_ = Pool::Pass;  // whose cache the block returns to
  uint64_t version_ = 0;
  bool owned_ = true;
};

namespace detail {
/// Throws when a ReadOnlyGuard of this thread lists `s` (src/core/read_only.cpp).
void check_not_read_only(const Storage& s);
/// Whether a ReadOnlyGuard is alive on this thread.
bool read_only_guarded();

/// ember's own changes to a Storage (src/ only, not API).
struct StorageAccess {
  /// Every in-place change of a storage passes here first (ReadOnlyGuard's check).
  static void bump_version(Storage& s) {
    if (read_only_guarded()) check_not_read_only(s);
    ++s.version_;
  }
  static void move_to(Storage& s, Device target) { s.move_to(target); }
  static void recharge(Storage& s, Pool pool) { s.recharge(pool); }
  static bool exchange(Storage& a, Storage& b) { return a.exchange(b); }
  static bool owned(const Storage& s) { return s.owned_; }
};
}  // namespace detail

}  // namespace ember
