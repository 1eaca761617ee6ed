// src/distributed/nccl.hpp — NCCL for CUDA tensors, opened with dlopen (src/distributed/nccl.cpp).
//
// Only process_group.cpp uses this. Buffers are device pointers on the communicator's
// device, contiguous, `count` elements of `dtype`. A call is enqueued on ember's compute
// stream of that device (stream-ordered with ember's kernels: no host synchronisation), or
// with Stream::comm on the device's communication stream, after everything enqueued so far on
// the compute stream (Note [The communication stream] in src/cuda/comm_stream.hpp); then
// join_comm_stream() orders later kernels after it. In a build without CUDA, load() reports
// that and the rest is never reached.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ember/distributed.hpp"
#include "ember/dtype.hpp"

namespace ember::distributed::nccl {

enum class Stream { compute, comm };

/// Opens libnccl.so.2 ($EMBER_NCCL_LIBRARY first) once; false with the reason in `why`. Sets
/// NCCL_NVLS_ENABLE=0 in the environment when it is unset (Note [NCCL watchdog]).
bool load(std::string& why);
/// Creates the communicator on `device` (collective over all ranks). `share` broadcasts the
/// unique id's bytes from rank 0 (over MPI). With timeout_seconds > 0 a watchdog ends the
/// process when creation or a collective takes longer (Note [NCCL watchdog]). Returns false
/// with NCCL's reason in `why`.
bool create(int rank, int world_size, int device, double timeout_seconds,
            const std::function<void(void* bytes, int64_t size)>& share, std::string& why);
/// The device of the communicator, -1 when there is none.
int device();
void destroy();
/// Throws ember::Error when NCCL has reported an asynchronous error (a peer failed, or the
/// communicator was aborted); `op` names the collective in the message.
void check_async_error(const char* op);

void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op, Stream on = Stream::compute);
void broadcast(void* buf, int64_t count, DType dtype, int root);
void all_gather(const void* send, void* recv, int64_t count, DType dtype);
void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);

/// Kernels enqueued from now on run after everything enqueued so far on the communication stream.
void join_comm_stream();
/// True when the communication stream has finished its work (never blocks).
bool comm_stream_idle();

}  // namespace ember::distributed::nccl
