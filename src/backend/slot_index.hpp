// src/backend/slot_index.hpp — the kernel table's slots as indices and names, and which of them
// are queries rather than device work. Shared by the tables that wrap every slot: the
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

/// Kernel-table slots that are queries, not device work (the device services proper are the
/// runtime's, runtime_slots.def): the profiler never records them and they launch nothing.
constexpr bool is_service(int slot) {
  constexpr std::string_view kServices[] = {"sdpa_status", "conv_library_status",
                                            "kv_cache_rotary_fits"};
  for (const std::string_view s : kServices)
    if (s == kSlotNames[slot]) return true;
  return false;
}

}  // namespace ember::backend
