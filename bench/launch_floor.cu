// bench/launch_floor.cu — bench_capture's launch-floor probes (issue 9): what one kernel
// launch costs, with no ember code in the way, by launch path, parameter size, block size and
// dependency mode, on the host and on the GPU.
//
// Each probe launches the same kernel kLaunches times on one stream and gives three figures:
//   host    µs per launch call, the stream held by a spinning kernel so that no launch waits
//           for queue space (the cost of the call itself);
//   stream  µs per kernel on the GPU, the queued launches run back to back (events around
//           them): what a dependent chain of eager launches costs the device;
//   graph   µs per kernel of the same launches captured into one CUDA graph and replayed.
// Kernels: `empty` (no work), `fma16` (z = z * a + b on 16 floats: the tiny op of the
// chain), with no arguments, slim arguments (3 pointers + n) or a 280-byte by-value argument
// (the size of a Geometry<3>). "pdl" launches allow programmatic dependent launch
// (cudaLaunchAttributeProgrammaticStreamSerialization): the kernel waits for its
// predecessor with griddepcontrol.wait and lets its successor launch early with
// griddepcontrol.launch_dependents.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch_floor.hpp"

namespace ember::cuda {
cudaStream_t stream(int device);  // src/cuda/runtime.cpp: ember's per-device stream lookup
}

namespace {

constexpr int kLaunches = 1000;
constexpr int kN = 16;

struct Big {  // 280 bytes: sizeof(Geometry<3>) in src/cuda/loops.cuh
  long long v[35];
};

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;" :::);
}

__global__ void empty_kernel() {}
__global__ void empty_big_kernel(Big) {}
__global__ void empty_pdl_kernel() {
  pdl_trigger();
  pdl_wait();
}

__global__ void fma_kernel(float* z, const float* a, const float* b, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = z[i] * a[i] + b[i];
}
__global__ void fma_loop_kernel(float* z, const float* a, const float* b, long long n) {
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(blockDim.x) * gridDim.x)
    z[i] = z[i] * a[i] + b[i];
}
__global__ void fma_big_kernel(Big g, float* z, const float* a, const float* b) {
  const long long n = g.v[0];
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(blockDim.x) * gridDim.x)
    z[i] = z[i] * a[i] + b[i];
}
__global__ void fma_pdl_kernel(float* z, const float* a, const float* b, int n) {
  pdl_trigger();
  pdl_wait();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = z[i] * a[i] + b[i];
}
__global__ void fma_pdl_late_kernel(float* z, const float* a, const float* b, int n) {
  pdl_wait();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = z[i] * a[i] + b[i];
}

// The tiny chain as ember runs it: out = a * b, then out = a + b, into other buffers, with
// 16-byte packs and a 64-bit grid-stride loop (src/cuda/elementwise.cu's flat kernels).
struct alignas(16) Float4 {
  float v[4];
};
template <bool kMul>
__global__ void pack_pdl_kernel(float* out, const float* a, const float* b, long long n) {
  pdl_trigger();
  pdl_wait();
  const long long packs = n / 4;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < packs;
       i += static_cast<long long>(blockDim.x) * gridDim.x) {
    Float4 x = reinterpret_cast<const Float4*>(a)[i];
    const Float4 y = reinterpret_cast<const Float4*>(b)[i];
#pragma unroll
    for (int j = 0; j < 4; ++j) x.v[j] = kMul ? x.v[j] * y.v[j] : x.v[j] + y.v[j];
    reinterpret_cast<Float4*>(out)[i] = x;
  }
  const long long tail = packs * 4 + static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (tail < n) out[tail] = kMul ? a[tail] * b[tail] : a[tail] + b[tail];
}
template <bool kMul>
__global__ void scalar_pdl_kernel(float* out, const float* a, const float* b, int n) {
  pdl_trigger();
  pdl_wait();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = kMul ? a[i] * b[i] : a[i] + b[i];
}

// Holds the stream for about `ns` nanoseconds.
__global__ void spin_kernel(long long ns) {
  long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= ns) break;
  }
}

// A failed call ends the probe it is in (its figures are NaN), not the benchmark.
struct ProbeFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw ProbeFailed(std::string(what) + " failed: " + cudaGetErrorString(e));
}
void check(CUresult e, const char* what) {
  if (e != CUDA_SUCCESS)
    throw ProbeFailed(std::string(what) + " failed: CUresult " + std::to_string(e));
}

template <typename Fn>
Fn driver(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found), name);
  if (!fn || found != cudaDriverEntryPointSuccess)
    throw ProbeFailed(std::string("driver entry point ") + name + " not found");
  return reinterpret_cast<Fn>(fn);
}

using Clock = std::chrono::steady_clock;
double since_us(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count() * 1e6;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Probe {
  std::string name;
  std::function<void(cudaStream_t)> launch;
};

LaunchFloorFigure measure(const Probe& p, cudaStream_t st) {
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  for (int i = 0; i < 50; ++i) p.launch(st);  // warm: lazy loading, first-launch costs
  check(cudaStreamSynchronize(st), "sync");
  std::vector<double> host, gpu;
  for (int rep = 0; rep < 5; ++rep) {
    spin_kernel<<<1, 1, 0, st>>>(30'000'000);  // 30 ms: longer than kLaunches calls take
    check(cudaEventRecord(e0, st), "cudaEventRecord");
    const auto t = Clock::now();
    for (int i = 0; i < kLaunches; ++i) p.launch(st);
    host.push_back(since_us(t) / kLaunches);
    check(cudaEventRecord(e1, st), "cudaEventRecord");
    check(cudaStreamSynchronize(st), "sync");
    check(cudaGetLastError(), p.name.c_str());
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    gpu.push_back(ms * 1e3 / kLaunches);
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < kLaunches; ++i) p.launch(st);
  check(cudaStreamEndCapture(st, &graph), "capture end");
  check(cudaGraphInstantiate(&exec, graph, 0), "instantiate");
  std::vector<double> replay;
  for (int rep = 0; rep < 13; ++rep) {
    check(cudaEventRecord(e0, st), "cudaEventRecord");
    check(cudaGraphLaunch(exec, st), "cudaGraphLaunch");
    check(cudaEventRecord(e1, st), "cudaEventRecord");
    check(cudaStreamSynchronize(st), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    if (rep >= 2) replay.push_back(ms * 1e3 / kLaunches);
  }
  check(cudaGraphExecDestroy(exec), "destroy");
  check(cudaGraphDestroy(graph), "destroy");
  check(cudaEventDestroy(e0), "destroy");
  check(cudaEventDestroy(e1), "destroy");
  return {p.name, median(host), median(gpu), median(replay)};
}

// µs per call of `fn`, the median of 5 blocks of 10000.
double call_us(const std::function<void()>& fn) {
  std::vector<double> us;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t = Clock::now();
    for (int i = 0; i < 10000; ++i) fn();
    us.push_back(since_us(t) / 10000);
  }
  return median(us);
}

}  // namespace

LaunchFloor launch_floor() {
  LaunchFloor out;
  cudaStream_t st = ember::cuda::stream(0);  // ember's stream: non-blocking, current device 0
  using LaunchFn = decltype(&::cuLaunchKernel);
  using LaunchExFn = decltype(&::cuLaunchKernelEx);
  const auto cu_launch = driver<LaunchFn>("cuLaunchKernel");
  const auto cu_launch_ex = driver<LaunchExFn>("cuLaunchKernelEx");
  auto function_of = [](const void* kernel) {
    cudaFunction_t f;
    check(cudaGetFuncBySymbol(&f, kernel), "cudaGetFuncBySymbol");
    return reinterpret_cast<CUfunction>(f);
  };
  auto kernel_of = [](const void* kernel) {
    cudaKernel_t k;
    check(cudaGetKernel(&k, kernel), "cudaGetKernel");
    return reinterpret_cast<CUfunction>(k);  // cuLaunchKernel takes a CUkernel as a CUfunction
  };
  const CUfunction f_empty = function_of(reinterpret_cast<const void*>(empty_kernel));
  const CUfunction k_empty = kernel_of(reinterpret_cast<const void*>(empty_kernel));
  const CUfunction f_empty_big = function_of(reinterpret_cast<const void*>(empty_big_kernel));
  const CUfunction f_fma = function_of(reinterpret_cast<const void*>(fma_kernel));
  const CUfunction f_fma_pdl = function_of(reinterpret_cast<const void*>(fma_pdl_kernel));

  float *z, *a, *b, *t;
  check(cudaMalloc(&z, 4 * kN * sizeof(float)), "cudaMalloc");
  a = z + kN;
  b = z + 2 * kN;
  t = z + 3 * kN;
  check(cudaMemsetAsync(z, 0, 4 * kN * sizeof(float), st), "memset");
  int n = kN;
  long long n64 = kN;
  std::function<void(cudaStream_t, const void*, unsigned, void**)> rt_pdl_any;
  Big big{};
  big.v[0] = kN;
  void* fma_args[] = {&z, &a, &b, &n};
  void* big_args[] = {&big};

  cudaLaunchAttribute pdl_attr{};
  pdl_attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl_attr.val.programmaticStreamSerializationAllowed = 1;
  CUlaunchAttribute cu_pdl_attr{};
  cu_pdl_attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  cu_pdl_attr.value.programmaticStreamSerializationAllowed = 1;
  rt_pdl_any = [&](cudaStream_t s, const void* kernel, unsigned block, void** args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(block);
    cfg.stream = s;
    cfg.attrs = &pdl_attr;
    cfg.numAttrs = 1;
    check(cudaLaunchKernelExC(&cfg, kernel, args), "cudaLaunchKernelExC");
  };
  const auto& rt_pdl = rt_pdl_any;
  long long n64b = kN;
  void* mul_args[] = {&t, &z, &a, &n64b};
  void* add_args[] = {&z, &t, &b, &n64b};
  void* mul_args32[] = {&t, &z, &a, &n};
  void* add_args32[] = {&z, &t, &b, &n};
  // z -> t = z * a -> z = t + b -> ...: two kernels alternating, as ember's chain.
  int turn = 0;
  auto alternate = [&](cudaStream_t s, const void* mul, const void* add, void** mul_args,
                       void** add_args) {
    const bool first = turn++ % 2 == 0;
    rt_pdl_any(s, first ? mul : add, 32, first ? mul_args : add_args);
  };

  const std::vector<Probe> probes = {
      {"empty <<<1,32>>> no args", [&](cudaStream_t s) { empty_kernel<<<1, 32, 0, s>>>(); }},
      {"empty <<<1,256>>> no args", [&](cudaStream_t s) { empty_kernel<<<1, 256, 0, s>>>(); }},
      {"empty <<<1,32>>> 280 B arg",
       [&](cudaStream_t s) { empty_big_kernel<<<1, 32, 0, s>>>(big); }},
      {"empty cudaLaunchKernel",
       [&](cudaStream_t s) {
         check(cudaLaunchKernel(reinterpret_cast<const void*>(empty_kernel), dim3(1), dim3(32),
                                nullptr, 0, s),
               "cudaLaunchKernel");
       }},
      {"empty cuLaunchKernel CUfunction",
       [&](cudaStream_t s) {
         check(cu_launch(f_empty, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr), "cuLaunchKernel");
       }},
      {"empty cuLaunchKernel CUkernel",
       [&](cudaStream_t s) {
         check(cu_launch(k_empty, 1, 1, 1, 32, 1, 1, 0, s, nullptr, nullptr), "cuLaunchKernel");
       }},
      {"empty cuLaunchKernel 280 B arg",
       [&](cudaStream_t s) {
         check(cu_launch(f_empty_big, 1, 1, 1, 32, 1, 1, 0, s, big_args, nullptr),
               "cuLaunchKernel");
       }},
      {"empty pdl cudaLaunchKernelEx",
       [&](cudaStream_t s) {
         rt_pdl(s, reinterpret_cast<const void*>(empty_pdl_kernel), 32, nullptr);
       }},
      {"cudaMemcpyAsync D2D 64 B",
       [&](cudaStream_t s) {
         check(cudaMemcpyAsync(z, a, kN * sizeof(float), cudaMemcpyDeviceToDevice, s),
               "cudaMemcpyAsync");
       }},
      {"fma16 <<<1,32>>> slim", [&](cudaStream_t s) { fma_kernel<<<1, 32, 0, s>>>(z, a, b, n); }},
      {"fma16 <<<1,256>>> slim", [&](cudaStream_t s) { fma_kernel<<<1, 256, 0, s>>>(z, a, b, n); }},
      {"fma16 <<<1,256>>> slim grid-stride",
       [&](cudaStream_t s) { fma_loop_kernel<<<1, 256, 0, s>>>(z, a, b, n64); }},
      {"fma16 <<<1,256>>> 280 B arg",
       [&](cudaStream_t s) { fma_big_kernel<<<1, 256, 0, s>>>(big, z, a, b); }},
      {"fma16 cuLaunchKernel slim 32",
       [&](cudaStream_t s) {
         check(cu_launch(f_fma, 1, 1, 1, 32, 1, 1, 0, s, fma_args, nullptr), "cuLaunchKernel");
       }},
      {"fma16 pdl cudaLaunchKernelEx 32",
       [&](cudaStream_t s) {
         rt_pdl(s, reinterpret_cast<const void*>(fma_pdl_kernel), 32, fma_args);
       }},
      {"fma16 pdl cudaLaunchKernelEx 256",
       [&](cudaStream_t s) {
         rt_pdl(s, reinterpret_cast<const void*>(fma_pdl_kernel), 256, fma_args);
       }},
      {"fma16 pdl no early trigger 32",
       [&](cudaStream_t s) {
         rt_pdl(s, reinterpret_cast<const void*>(fma_pdl_late_kernel), 32, fma_args);
       }},
      {"mul,add pdl alternating, scalar 32",
       [&](cudaStream_t s) {
         alternate(s, reinterpret_cast<const void*>(scalar_pdl_kernel<true>),
                   reinterpret_cast<const void*>(scalar_pdl_kernel<false>), mul_args32, add_args32);
       }},
      {"mul,add pdl alternating, packs 32",
       [&](cudaStream_t s) {
         alternate(s, reinterpret_cast<const void*>(pack_pdl_kernel<true>),
                   reinterpret_cast<const void*>(pack_pdl_kernel<false>), mul_args, add_args);
       }},
      {"mul pdl only, packs 32",
       [&](cudaStream_t s) {
         rt_pdl(s, reinterpret_cast<const void*>(pack_pdl_kernel<true>), 32, mul_args);
       }},
      {"fma16 pdl cuLaunchKernelEx 32",
       [&](cudaStream_t s) {
         CUlaunchConfig cfg{};
         cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
         cfg.blockDimX = 32;
         cfg.blockDimY = cfg.blockDimZ = 1;
         cfg.hStream = s;
         cfg.attrs = &cu_pdl_attr;
         cfg.numAttrs = 1;
         check(cu_launch_ex(&cfg, f_fma_pdl, fma_args, nullptr), "cuLaunchKernelEx");
       }},
  };
  for (const Probe& p : probes) {
    try {
      out.launches.push_back(measure(p, st));
    } catch (const ProbeFailed& e) {
      std::fprintf(stderr, "launch_floor: probe \"%s\": %s\n", p.name.c_str(), e.what());
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      (void)cudaStreamIsCapturing(st, &capturing);
      if (capturing != cudaStreamCaptureStatusNone) {
        cudaGraph_t g = nullptr;
        (void)cudaStreamEndCapture(st, &g);
        if (g) (void)cudaGraphDestroy(g);
      }
      (void)cudaStreamSynchronize(st);
      (void)cudaGetLastError();
      out.launches.push_back({p.name, NAN, NAN, NAN});
    }
  }

  out.calls.push_back({"cudaGetLastError", call_us([] { (void)cudaGetLastError(); })});
  out.calls.push_back({"ember::cuda::stream(0)", call_us([] {
                         cudaStream_t s = ember::cuda::stream(0);
                         asm volatile("" : : "r"(s) : "memory");
                       })});
  out.calls.push_back({"cudaGetDevice", call_us([] {
                         int d;
                         (void)cudaGetDevice(&d);
                       })});
  out.calls.push_back({"cudaStreamGetCaptureInfo", call_us([&] {
                         cudaStreamCaptureStatus s;
                         (void)cudaStreamGetCaptureInfo(st, &s);
                       })});
  check(cudaStreamSynchronize(st), "sync");
  check(cudaFree(z), "cudaFree");
  return out;
}
