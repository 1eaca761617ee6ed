// src/cuda/comm_stream.hpp — each device's communication stream, beside ember's one compute
// stream (Note [One stream per device] in src/cuda/runtime.cpp), for code above the backend
// that overlaps collectives with kernels (src/distributed). Plain C++: no CUDA header needed.
//
// Note [The communication stream]
// Collectives enqueued on comm_stream(d) run concurrently with the compute stream. The two
// are ordered only where a buffer crosses: comm_wait_for_compute(d) before the collective
// reads what kernels wrote (the gradients), compute_wait_for_comm(d) before kernels read what
// the collective wrote. A buffer the communication stream uses must stay allocated until the
// compute stream has waited for it (the caching allocator orders reuse on the compute stream
// alone), so the caller keeps it alive until compute_wait_for_comm(d).
#pragma once

namespace ember::cuda {

/// The compute stream of `device` (stream(device) in common.cuh, a cudaStream_t), for code
/// that includes no CUDA header. Makes `device` current on this thread.
void* compute_stream(int device);
/// The communication stream of `device` (a cudaStream_t; non-blocking, created on first use).
/// Makes `device` current on this thread.
void* comm_stream(int device);
/// Work enqueued on comm_stream(device) from now on starts after everything enqueued so far
/// on the compute stream of `device`.
void comm_wait_for_compute(int device);
/// Work enqueued on the compute stream from now on starts after everything enqueued so far on
/// comm_stream(device).
void compute_wait_for_comm(int device);
/// True when everything enqueued on comm_stream(device) has finished (never blocks).
bool comm_stream_idle(int device);

}  // namespace ember::cuda
