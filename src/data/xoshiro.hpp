// src/data/xoshiro.hpp — the generator behind the DataLoader's shuffle and the per-sample
// augmentations: splitmix64 (Steele, Lea, Flood 2014) to seed, xoshiro256** (Blackman,
// Vigna 2018) to draw, and unbiased bounded draws. Portable: the same numbers everywhere.
#pragma once

#include <cstdint>

namespace ember::data {

/// Advances `state` and returns its next splitmix64 output.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The next xoshiro256** output of state `s`.
inline uint64_t xoshiro256_next(uint64_t (&s)[4]) {
  const auto rotl = [](uint64_t x, int k) { return (x << k) | (x >> (64 - k)); };
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

/// Uniform in [0, bound) without modulo bias: draws below 2^64 mod bound are rejected.
inline uint64_t xoshiro256_below(uint64_t (&s)[4], uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const uint64_t x = xoshiro256_next(s);
    if (x >= threshold) return x % bound;
  }
}

}  // namespace ember::data
