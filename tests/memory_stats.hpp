// tests/memory_stats.hpp — what the memory tests (tests/test_memory_*.cpp) read from
// ember::memory_stats: the bytes in use and reserved over every pool of a device, in MiB steps.
//
//   const int64_t before = ember_test::in_use(ember::memory_stats(device));
#pragma once

#include <cstdint>

#include "ember/ember.hpp"

namespace ember_test {

inline constexpr int64_t kMiB = int64_t{1} << 20;

/// Bytes in use over every pool of the device (persistent, pass and captured).
inline int64_t in_use(const ember::MemoryStats& s) {
  return s.persistent_bytes + s.pass_in_use + s.captured_in_use;
}

/// Bytes reserved over every pool of the device.
inline int64_t reserved(const ember::MemoryStats& s) {
  return s.persistent_reserved + s.pass_reserved + s.captured_reserved;
}

}  // namespace ember_test
