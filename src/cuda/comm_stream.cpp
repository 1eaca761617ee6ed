// src/cuda/comm_stream.cpp — the communication stream of each device and the two events that
// order it against the compute stream (Note [The communication stream] in comm_stream.hpp).
#include "cuda/comm_stream.hpp"

#include <array>
#include <mutex>

#include "cuda/common.cuh"

namespace ember::cuda {

namespace {

constexpr int kMaxDevices = 64;  // as src/cuda/runtime.cpp: check_device keeps `device` below it

struct CommStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t compute_done = nullptr;  // recorded on the compute stream, waited on by comm
  cudaEvent_t comm_done = nullptr;     // recorded on comm, waited on by the compute stream
};

struct CommStreams {
  std::mutex mutex;
  std::array<CommStream, kMaxDevices> devices{};
};

// Created on first use and never destroyed (used until process exit, as the compute streams).
CommStream& comm(int device) {
  stream(device);  // validates `device` and makes it current
  static CommStreams* all = new CommStreams();
  std::lock_guard<std::mutex> lock(all->mutex);
  CommStream& c = all->devices[device];
  if (!c.stream) {
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&c.compute_done, cudaEventDisableTiming));
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&c.comm_done, cudaEventDisableTiming));
  }
  return c;
}

}  // namespace

void* compute_stream(int device) { return stream(device); }
void* comm_stream(int device) { return comm(device).stream; }

// One event per direction is enough: cudaStreamWaitEvent waits for the record made before it.
void comm_wait_for_compute(int device) {
  CommStream& c = comm(device);
  EMBER_CUDA_CHECK(cudaEventRecord(c.compute_done, stream(device)));
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(c.stream, c.compute_done, 0));
}

void compute_wait_for_comm(int device) {
  CommStream& c = comm(device);
  EMBER_CUDA_CHECK(cudaEventRecord(c.comm_done, c.stream));
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream(device), c.comm_done, 0));
}

bool comm_stream_idle(int device) {
  const cudaError_t rc = cudaStreamQuery(comm(device).stream);
  if (rc == cudaErrorNotReady) return false;
  EMBER_CUDA_CHECK(rc);
  return true;
}

}  // namespace ember::cuda
