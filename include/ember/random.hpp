// ember/random.hpp — the global counter-based generator (Philox4x32-10).
//
// Every random op draws `numel` counters from (seed, offset) and advances the offset, so a
// seed gives the same numbers on every device and a saved state resumes the stream exactly.
#pragma once

#include <cstdint>

namespace ember {

struct RngState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

/// Seeds the generator (offset back to 0). Example: manual_seed(42);
void manual_seed(uint64_t seed);
RngState get_rng_state();
void set_rng_state(RngState state);
/// Reserves `count` counters and returns the offset of the first (used by random ops).
uint64_t advance_rng(uint64_t count);

}  // namespace ember
