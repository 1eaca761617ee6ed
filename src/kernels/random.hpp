// src/kernels/random.hpp — counter-based Philox4x32-10 and the value transforms built on it:
// the random family's math, shared by src/cpu/random.cpp and src/cuda/random.cu.
//
// Header-only, no library calls in the generator itself, so the CUDA backend includes it in
// device code (EMBER_HD, from kernels/common.hpp, marks the functions __host__ __device__
// under nvcc) and every device produces the same stream for a seed.
//
// Note [Random streams]
// Element i of a random op draws one Philox block:
//   key     = (low32(seed), high32(seed))
//   counter = (low32(offset + i), high32(offset + i), 0, 0)
// so element i depends only on (seed, offset + i): kernels parallelise freely, and a stream
// started at offset k is the stream at offset 0 shifted by k. The transforms:
//   uniform f32: u = (x0 >> 8) · 2^-24                  in [0, 1)
//   uniform f64: u = ((x0 << 32 | x1) >> 11) · 2^-53     in [0, 1)
//   normal  f32: u1 = ((x0 >> 8) + 1) · 2^-24 in (0, 1], u2 = (x1 >> 8) · 2^-24,
//                z = sqrt(-2 ln u1) · cos(2π u2)          (Box–Muller, one output per block)
//   normal  f64: the same with 53-bit u1 from (x0, x1) and u2 from (x2, x3).
//   dropout:     u as uniform f32; keep when u >= p.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/common.hpp"

namespace ember::philox {

inline constexpr uint32_t kM0 = 0xD2511F53u;  // round multipliers (Salmon et al., 2011)
inline constexpr uint32_t kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u;  // key schedule increments (golden ratio, sqrt 3)
inline constexpr uint32_t kW1 = 0xBB67AE85u;
inline constexpr int kRounds = 10;

struct Block {
  uint32_t x[4];
};

/// One Philox4x32-10 block for `counter` under `key`. constexpr: usable in static_asserts.
EMBER_HD constexpr Block philox4x32_10(Block counter, uint32_t key0, uint32_t key1) {
  Block c = counter;
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) {
      key0 += kW0;
      key1 += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c.x[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c.x[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = Block{{hi1 ^ c.x[1] ^ key0, lo1, hi0 ^ c.x[3] ^ key1, lo0}};
  }
  return c;
}

/// The block of element `index` (= offset + i) of the stream `seed` (Note [Random streams]).
EMBER_HD constexpr Block block_for(uint64_t seed, uint64_t index) {
  return philox4x32_10(
      Block{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}},
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

inline constexpr float kTwoPowMinus24 = 1.0f / 16777216.0f;
inline constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
inline constexpr double kTwoPi = 6.283185307179586476925286766559;

/// 24-bit uniform in [0, 1).
EMBER_HD constexpr float uniform_f32(uint32_t x0) {
  return static_cast<float>(x0 >> 8) * kTwoPowMinus24;
}
/// 53-bit uniform in [0, 1).
EMBER_HD constexpr double uniform_f64(uint32_t x0, uint32_t x1) {
  return static_cast<double>(((static_cast<uint64_t>(x0) << 32) | x1) >> 11) * kTwoPowMinus53;
}

/// Standard normal (f32 arithmetic) from one block.
EMBER_HD inline float normal_f32(const Block& b) {
  const float u1 = static_cast<float>((b.x[0] >> 8) + 1u) * kTwoPowMinus24;
  const float u2 = static_cast<float>(b.x[1] >> 8) * kTwoPowMinus24;
  return sqrtf(-2.0f * logf(u1)) * cosf(static_cast<float>(kTwoPi) * u2);
}
/// Standard normal (f64 arithmetic) from one block.
EMBER_HD inline double normal_f64(const Block& b) {
  const double u1 =
      static_cast<double>((((static_cast<uint64_t>(b.x[0]) << 32) | b.x[1]) >> 11) + 1u) *
      kTwoPowMinus53;
  const double u2 = uniform_f64(b.x[2], b.x[3]);
  return ::sqrt(-2.0 * ::log(u1)) * ::cos(kTwoPi * u2);
}

/// Dropout keeps element i when its f32 uniform is >= p (compared exactly, in f64).
EMBER_HD constexpr bool dropout_keep(const Block& b, double p) {
  return static_cast<double>(uniform_f32(b.x[0])) >= p;
}

/// Uniform in [lo, hi) with f32 arithmetic: lo + (hi - lo)·u, pulled below hi where
/// rounding reached it. Built once per kernel, applied per element (branch-free, so loops
/// over it vectorise).
struct UniformF32 {
  float lo, span, below_hi;
  EMBER_HD UniformF32(float lo_in, float hi_in)
      : lo(lo_in),
        span(hi_in - lo_in),
        below_hi(hi_in > lo_in ? nextafterf(hi_in, lo_in) : INFINITY) {}
  EMBER_HD float operator()(const Block& b) const {
    const float v = lo + span * uniform_f32(b.x[0]);
    return v < below_hi ? v : below_hi;
  }
};

/// The same in f64 with 53-bit uniforms.
struct UniformF64 {
  double lo, span, below_hi;
  EMBER_HD UniformF64(double lo_in, double hi_in)
      : lo(lo_in),
        span(hi_in - lo_in),
        below_hi(hi_in > lo_in ? ::nextafter(hi_in, lo_in) : INFINITY) {}
  EMBER_HD double operator()(const Block& b) const {
    const double v = lo + span * uniform_f64(b.x[0], b.x[1]);
    return v < below_hi ? v : below_hi;
  }
};

}  // namespace ember::philox
