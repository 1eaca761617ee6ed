// src/cuda/runtime.cpp — the CUDA runtime seen by the rest of ember: device discovery and
// validation, the one stream per device, and the error that names a failing CUDA call.
//
// Note [One stream per device]
// Every kernel, copy and cuBLASLt call for device d goes to stream(d), a non-blocking stream
// created on first use. One stream gives program order for free: a block returned to the
// caching allocator may be handed out again at once, because any later kernel that writes
// it is queued behind every earlier kernel that read it. The host waits only where a value
// crosses to it (memcpy_to_host), in synchronize() and before cudaFree.
#include "ember/runtime.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/kernels.cuh"
#include "cuda/launch.cuh"
#include "ember/device.hpp"
#include "ember/error.hpp"

namespace ember {
namespace cuda {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceStreams {
  std::mutex mutex;
  std::array<std::atomic<cudaStream_t>, kMaxDevices> streams{};
};

DeviceStreams& streams() {
  static DeviceStreams* s = new DeviceStreams();  // leaked: used by static destructors
  return *s;
}

thread_local int t_current_device = -1;  // what this thread last passed to cudaSetDevice
// The stream a capture on this thread records into (Note [Captured steps], graph.cu): other
// threads (a DataLoader's prefetch copies) keep the device's stream and stay out of the graph.
thread_local int t_capture_device = -1;
thread_local cudaStream_t t_capture_stream = nullptr;

}  // namespace

void throw_cuda_error(const char* call, cudaError_t err, const char* file, int line) {
  throw Error(detail::concat("CUDA call failed: ", call, " returned ", cudaGetErrorName(err), " (",
                             cudaGetErrorString(err), ") at ", file, ":", line));
}

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver or no device: clear the error, report none
      n = 0;
    }
    return n < kMaxDevices ? n : kMaxDevices;
  }();
  return count;
}

void check_device(int device, const char* op) {
  const int n = device_count();
  if (device >= 0 && device < n) [[likely]]
    return;
  if (n == 0)
    detail::throw_error(detail::concat(op, ": cuda:", device,
                                       " is not available: no CUDA device or driver was found "
                                       "(cuda_available() is false)"));
  detail::throw_error(detail::concat(op, ": cuda:", device, " does not exist (", n,
                                     " CUDA devices: cuda:0 to cuda:", n - 1, ")"));
}

cudaStream_t stream(int device) {
  if (t_current_device != device) {
    check_device(device, "cuda");
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    t_current_device = device;
  }
  if (t_capture_device == device) [[unlikely]]
    return t_capture_stream;
  return device_stream(device);
}

void set_capture_stream(int device, cudaStream_t capture) {
  t_capture_device = capture ? device : -1;
  t_capture_stream = capture;
}

cudaStream_t device_stream(int device) {
  DeviceStreams& s = streams();
  cudaStream_t st = s.streams[device].load(std::memory_order_acquire);
  if (st) [[likely]]
    return st;
  std::lock_guard<std::mutex> lock(s.mutex);
  st = s.streams[device].load(std::memory_order_relaxed);
  if (!st) {
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    s.streams[device].store(st, std::memory_order_release);
  }
  return st;
}

// ---- launch_chained's pieces (Note [Chained launches], launch.cuh) ----

namespace {

using LaunchKernelEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

// The driver's cuLaunchKernelEx, from the runtime (ember links the runtime, not libcuda).
LaunchKernelEx driver_launch() {
  static const LaunchKernelEx fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    EMBER_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &p, 12000, cudaEnableDefault, &found));
    EMBER_CHECK(p && found == cudaDriverEntryPointSuccess,
                "cuda: the driver has no cuLaunchKernelEx (got entry point status ",
                static_cast<int>(found), ", expected a CUDA 12 or newer driver)");
    return reinterpret_cast<LaunchKernelEx>(p);
  }();
  return fn;
}

}  // namespace

const LaunchMode& launch_mode() {
  static const LaunchMode mode{.overlap = !env_is("EMBER_CUDA_PDL", "0"),
                               .driver = !env_is("EMBER_CUDA_LAUNCH", "runtime")};
  return mode;
}

namespace {
// Streams whose next chained launch keeps the full stream order (order_next_launch), and their
// count for the launches' one relaxed load when there are none.
std::atomic<int> g_ordered_count{0};
std::mutex g_ordered_mutex;
std::vector<cudaStream_t> g_ordered_streams;
}  // namespace

void order_next_launch(int device) {
  const cudaStream_t st = stream(device);
  std::lock_guard<std::mutex> lock(g_ordered_mutex);
  if (std::find(g_ordered_streams.begin(), g_ordered_streams.end(), st) == g_ordered_streams.end())
    g_ordered_streams.push_back(st);
  g_ordered_count.store(static_cast<int>(g_ordered_streams.size()), std::memory_order_relaxed);
}

bool take_ordered_launch(cudaStream_t st) {
  if (g_ordered_count.load(std::memory_order_relaxed) == 0) [[likely]]
    return false;
  std::lock_guard<std::mutex> lock(g_ordered_mutex);
  const auto it = std::find(g_ordered_streams.begin(), g_ordered_streams.end(), st);
  if (it == g_ordered_streams.end()) return false;
  g_ordered_streams.erase(it);
  g_ordered_count.store(static_cast<int>(g_ordered_streams.size()), std::memory_order_relaxed);
  return true;
}

CUresult launch_kernel_ex(const CUlaunchConfig* config, CUfunction f, void** params) {
  return driver_launch()(config, f, params, nullptr);
}

CUfunction kernel_handle(const void* kernel) {
  cudaKernel_t k = nullptr;
  EMBER_CUDA_CHECK(cudaGetKernel(&k, kernel));
  return reinterpret_cast<CUfunction>(k);  // the driver takes a CUkernel where a CUfunction goes
}

void throw_launch_error(CUresult err, const char* file, int line) {
  // CUresult and cudaError_t share their codes for what a launch returns (invalid value,
  // handle or context, out of resources, launch failure).
  throw_cuda_error("cuLaunchKernelEx", static_cast<cudaError_t>(err), file, line);
}

std::string device_description(int device) {
  check_device(device, "cuda_device_description");
  cudaDeviceProp prop{};
  EMBER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const double gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  char mem[32];
  std::snprintf(mem, sizeof(mem), "%.1f GiB", gib);
  return detail::concat(prop.name, " (sm_", prop.major, prop.minor, ", ", mem, ")");
}

}  // namespace cuda

}  // namespace ember
