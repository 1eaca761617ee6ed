// src/core/random.cpp — the global generator's state: a seed and a stream offset
// (Note [Random streams], src/kernels/random.hpp).
#include "ember/random.hpp"

#include <atomic>

#include "ember/tensor.hpp"

namespace ember {

namespace {
std::atomic<uint64_t> g_seed{0x853c49e6748fea9bull};
std::atomic<uint64_t> g_offset{0};
}  // namespace

void manual_seed(uint64_t seed) {
  g_seed.store(seed);
  g_offset.store(0);
}
RngState get_rng_state() { return {g_seed.load(), g_offset.load()}; }
void set_rng_state(RngState s) {
  g_seed.store(s.seed);
  g_offset.store(s.offset);
}
uint64_t advance_rng(uint64_t count) {
  // Round to a multiple of 4 so streams of different ops never share a Philox block.
  return g_offset.fetch_add((count + 3) & ~uint64_t{3});
}

}  // namespace ember
