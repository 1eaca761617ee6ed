// src/backend/slot_index.hpp — the kernel table's slots as indices and names, and which of them
// are services rather than device work. Shared by the tables that wrap every slot: the
// profiler's (profiled.cpp) and the CUDA backend's launch counter (src/cuda/backend_cuda.cpp).
#pragma once

#include <string_view>

#include "backend/backend.hpp"

namespace ember::backend {

enum SlotIndex : int {
#define EMBER_SLOT(ret, slot, params) kSlot_##slot,
#include "backend/slots.def"
#undef EMBER_SLOT
  kSlotCount
};

inline constexpr const char* kSlotNames[] = {
#define EMBER_SLOT(ret, slot, params) #slot,
#include "backend/slots.def"
#undef EMBER_SLOT
};
static_assert(sizeof(kSlotNames) / sizeof(kSlotNames[0]) == kSlotCount);

/// Slots that are services, not device work: the profiler never records them and they launch
/// nothing.
constexpr bool is_service(int slot) {
  constexpr std::string_view kServices[] = {
      "allocate",         "deallocate",          "recharge",          "host_alloc_pinned",
      "host_free_pinned", "wait_pinned_slot",    "empty_cache",       "memory_stats",
      "reset_peak",       "synchronize",         "timing_mark",       "timing_elapsed_ms",
      "timing_release",   "graph_capture_begin", "graph_capture_end", "graph_replay_begin",
      "graph_destroy",    "graph_kernel_count",  "sdpa_status",       "conv_library_status",
      "block_bytes_for"};
  for (const std::string_view s : kServices)
    if (s == kSlotNames[slot]) return true;
  return false;
}

/// Slots that copy between the host and a device: counted as transfers (MemoryStats'
/// host_to_device_copies, device_to_host_copies), not as kernel launches.
constexpr bool is_host_transfer(int slot) {
  constexpr std::string_view kTransfers[] = {"memcpy_to_host", "memcpy_from_host",
                                             "copy_from_pinned_async", "copy_to_pinned_async"};
  for (const std::string_view s : kTransfers)
    if (s == kSlotNames[slot]) return true;
  return false;
}

}  // namespace ember::backend
