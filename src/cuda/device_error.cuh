// src/cuda/device_error.cuh — deferred device errors: what a kernel records when it finds a
// bad label or index, and the host check that reports it at the next synchronisation.
//
// Note [Deferred device errors]
// A kernel cannot throw, and making the host wait after every indexing kernel to ask whether
// an index was bad would put a host sync inside every training step. Instead each device has
// one DeviceError record in pinned, mapped host memory. A kernel that meets a bad value claims
// the record with an atomic compare-and-swap (the first error wins; later ones are dropped
// until the record is cleared), fills in the op, the value, its position and the valid size,
// then publishes `op` after a system-wide fence. Every point where the host waits for the
// device's stream — memcpy_to_host (so item(), to_vector(), .to(cpu)) and synchronize() —
// calls check_device_errors() afterwards: it clears the record, so the device stays usable,
// and throws ember::Error naming the op, the bad value, its position and the valid range.
// This is how CUDA's own device-side asserts surface, minus the poisoned context. The
// failing op leaves its output unwritten (index ops) or NaN (cross-entropy rows).
#pragma once

#include <cstdint>

namespace ember::cuda {

/// What a kernel found out of range (DeviceError::op).
enum DeviceErrorOp : int32_t {
  kNoDeviceError = 0,
  kCrossEntropyLabel = 1,
  kIndexSelect = 2,
  kIndexAdd = 3,
  kGather = 4,
  kScatterAdd = 5,
  kKvCacheLength = 6,  // attention_with_kv_cache: value = seqlens[b], position = b
};

/// The per-device record (pinned, mapped host memory; see the Note).
struct DeviceError {
  int32_t claim;  // 0 free; set to 1 by the first kernel that reports
  int32_t op;     // DeviceErrorOp, written last
  int32_t dim;    // the indexed dim (index ops)
  int32_t pad;
  int64_t value;     // the bad label or index
  int64_t position;  // its position in the (flattened) label / index tensor
  int64_t limit;     // valid values are [0, limit)
};

/// The device-side address of `device`'s record (created on first use).
DeviceError* device_error_record(int device);

/// Throws ember::Error when a kernel of `device` recorded an error, clearing the record
/// first. Call only after the host has waited for the device's stream.
void check_device_errors(int device);

#if defined(__CUDACC__)
/// Records an error unless one is already pending. Cheap: only bad values get here.
__device__ inline void report_device_error(DeviceError* e, int32_t op, int32_t dim, int64_t value,
                                           int64_t position, int64_t limit) {
  if (atomicCAS(&e->claim, 0, 1) != 0) return;
  e->dim = dim;
  e->value = value;
  e->position = position;
  e->limit = limit;
  __threadfence_system();
  *reinterpret_cast<volatile int32_t*>(&e->op) = op;
}
#endif

}  // namespace ember::cuda
