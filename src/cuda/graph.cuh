// src/cuda/graph.cuh — what the kernel files need from a captured step (src/cuda/graph.cu):
// the device scalars an optimizer launch reads instead of its by-value arguments, and the
// device-side random state a random kernel reads instead of its seed and offset.
// Note [Captured steps] in graph.cu explains both.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::cuda::graph {

/// How a launch that takes per-step scalars proceeds on this thread (stage_scalars).
enum class Staged : uint8_t {
  eager,     // no capture: launch with the by-value scalars
  captured,  // capturing: launch reading the scalars at *device_scalars (a payload slot)
  skip,      // replaying the host side of a step: the scalars are staged, launch nothing
};

/// Stages `bytes` of scalars of one launch by `op` on `device`. Capturing: appends a payload
/// slot holding them and sets *device_scalars to its device address. Replaying the host side:
/// overwrites the next slot (same op, size and `fingerprint` as at capture, else throws
/// ember::Error saying what changed). `fingerprint` identifies the buffers the launch
/// touches (a parameter moved, a state tensor replaced, a parameter added are refused).
Staged stage_scalars(int device, const void* host, size_t bytes, uint64_t fingerprint,
                     const char* op, const void** device_scalars);

/// Capturing on `device`: the device address of {seed, offset} that the replay writes (the
/// generator's state at the start of the step) and, in *start_offset, the offset the capture
/// began at (a kernel draws from offset - start + device offset). Otherwise nullptr.
const uint64_t* captured_philox(int device, uint64_t* start_offset);

/// FNV-1a over `bytes` of `data`, continuing from `hash` (fingerprints of launches).
inline uint64_t fingerprint(const void* data, size_t bytes,
                            uint64_t hash = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ull;
  return hash;
}

}  // namespace ember::cuda::graph
