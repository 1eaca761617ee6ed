// src/cuda/timing.cpp — the profiler's timing marks on a CUDA device (runtime_slots.def): events
// recorded on the device's stream, kept in a per-device pool and reused after
// timing_release. No mark is taken while this thread captures a graph.
#include <array>
#include <mutex>
#include <vector>

#include "cuda/kernels.cuh"

namespace ember::cuda {
namespace {
constexpr int kMaxDevices = 64;

struct DeviceMarks {
  std::mutex mutex;
  std::vector<cudaEvent_t> events;  // every event created for this device
  size_t used = 0;                  // events[0, used) are marks now
};

DeviceMarks& marks(int device) {
  static auto* all = new std::array<DeviceMarks, kMaxDevices>();  // leaked, as the streams
  check_device(device, "profiler");
  return (*all)[device];
}

bool this_thread_captures(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EMBER_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  return status != cudaStreamCaptureStatusNone;
}
}  // namespace

int64_t timing_mark(int device) {
  const cudaStream_t s = stream(device);
  if (this_thread_captures(s)) return -1;
  DeviceMarks& m = marks(device);
  const std::lock_guard lock(m.mutex);
  if (m.used == m.events.size()) {
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreate(&e));
    m.events.push_back(e);
  }
  EMBER_CUDA_CHECK(cudaEventRecord(m.events[m.used], s));
  return static_cast<int64_t>(m.used++);
}

double timing_elapsed_ms(int device, int64_t from, int64_t to) {
  DeviceMarks& m = marks(device);
  const std::lock_guard lock(m.mutex);
  const auto n = static_cast<int64_t>(m.used);
  if (from < 0 || to < 0 || from >= n || to >= n) return 0.0;
  float ms = 0;
  EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, m.events[from], m.events[to]));
  return ms;
}

void timing_release(int device) {
  DeviceMarks& m = marks(device);
  const std::lock_guard lock(m.mutex);
  m.used = 0;
}

}  // namespace ember::cuda
