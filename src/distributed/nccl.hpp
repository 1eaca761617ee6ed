// src/distributed/nccl.hpp — NCCL for CUDA tensors, opened with dlopen (src/distributed/nccl.cpp).
//
// Only process_group.cpp uses this. Buffers are device pointers on the communicator's
// device, contiguous, `count` elements of `dtype`; every call is enqueued on ember's stream
// of that device (stream-ordered with ember's kernels: no host synchronisation). In a build
// without CUDA, load() reports that and the rest is never reached.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ember/distributed.hpp"
#include "ember/dtype.hpp"

namespace ember::distributed::nccl {

/// Opens libnccl.so.2 ($EMBER_NCCL_LIBRARY first) once; false with the reason in `why`.
bool load(std::string& why);
/// Creates the communicator on `device` (collective over all ranks). `share` broadcasts the
/// unique id's bytes from rank 0 (over MPI). Returns false with NCCL's reason in `why`.
bool create(int rank, int world_size, int device,
            const std::function<void(void* bytes, int64_t size)>& share, std::string& why);
/// The device of the communicator, -1 when there is none.
int device();
void destroy();

void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op);
void broadcast(void* buf, int64_t count, DType dtype, int root);
void all_gather(const void* send, void* recv, int64_t count, DType dtype);
void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op);

}  // namespace ember::distributed::nccl
