// src/distributed/nccl.cpp — the NCCL entry points ember uses, resolved with dlopen, and the
// watchdog that aborts a stuck or failed communicator.
//
// libember links no NCCL (the GPU machine's NCCL is the one its torch ships; a user may have
// another): the library is opened at the first collective on a CUDA tensor, from
// $EMBER_NCCL_LIBRARY, else "libnccl.so.2" on the loader's path. Only nccl.h's types are used
// at build time (the CUDA toolkit's copy). Built only with CUDA; otherwise load() says so.
// The device is reached through the device runtime alone (the two streams of a device:
// backend::runtime_for(DeviceType::cuda), Note [The communication stream]).
//
// Note [NCCL watchdog]
// NCCL collectives are enqueued and return at once, so a peer that hangs or dies leaves this
// rank's kernels spinning and its host stuck at the next synchronisation, where no MPI call
// (and so no MPI watchdog, Note [Collective timeout] in process_group.cpp) is waiting. With
// InitOptions::timeout_seconds > 0, each collective records a CUDA event behind itself, and a
// watchdog thread wakes every quarter of the timeout (at most every second): it drops the
// completed events, polls ncclCommGetAsyncError, and when the oldest collective has been
// pending longer than the timeout (counted from its enqueue, so it includes kernels queued
// before it), or NCCL reports an error, it prints "ember: rank R of N: ..." naming the
// collective, calls ncclCommAbort (which stops this rank's NCCL kernels) and ends the process
// with _Exit(3); mpirun then ends the others. Communicator creation is watched the same way.
// The main thread also checks ncclCommGetAsyncError before each collective and when an
// asynchronous all-reduce is waited for, so an error seen there is an ember::Error.
// NCCL_NVLS_ENABLE=0 is set (when unset) before NCCL is loaded: the GPU machines ember is
// tested on need NVLink multicast off.
#include "distributed/nccl.hpp"

#include "ember/error.hpp"

#if defined(EMBER_WITH_CUDA)

#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/device_runtime.hpp"
#include "distributed/watchdog_thread.hpp"

namespace ember::distributed::nccl {

namespace {
const backend::DeviceRuntime& cuda_runtime() { return backend::runtime_for(DeviceType::cuda); }
}  // namespace

namespace {

struct Api {
  void* lib = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
};

Api g_api;
ncclComm_t g_comm = nullptr;
int g_device = -1;
int g_rank = 0;
int g_size = 1;

// ---- the watchdog (Note [NCCL watchdog]) ----

struct Pending {
  cudaEvent_t done;
  int64_t since_ns;
  const char* op;
};

// Everything here, and g_comm once set, is guarded by thread->mutex().
struct Watchdog {
  double timeout = 0;
  int64_t creating_since_ns = 0;  // communicator creation in progress; 0: none
  std::deque<Pending> pending;    // enqueued collectives, oldest first
  std::vector<cudaEvent_t> spare;
  std::unique_ptr<WatchdogThread> thread;
};
Watchdog* g_watchdog = nullptr;

[[noreturn]] void end_job(const std::string& what) {
  std::fprintf(stderr, "ember: rank %d of %d: %s; %sending the job\n", g_rank, g_size, what.c_str(),
               g_comm ? "aborting the NCCL communicator and " : "");
  std::fflush(stderr);
  if (g_comm) g_api.comm_abort(g_comm);
  std::_Exit(3);
}

// One look, under the watchdog's mutex: ends the job on a timeout or an asynchronous error.
void inspect(Watchdog& w) {
  const double t = w.timeout;
  if (w.creating_since_ns) {
    const double waited = double(now_ns() - w.creating_since_ns) * 1e-9;
    if (waited > t)
      end_job(detail::concat("creating the NCCL communicator has taken ", waited,
                             " s (InitOptions::timeout_seconds = ", t, ")"));
    return;
  }
  while (!w.pending.empty() && cudaEventQuery(w.pending.front().done) != cudaErrorNotReady) {
    w.spare.push_back(w.pending.front().done);
    w.pending.pop_front();
  }
  const char* op = w.pending.empty() ? "a collective" : w.pending.front().op;
  ncclResult_t async = ncclSuccess;
  if (g_comm && g_api.get_async_error(g_comm, &async) == ncclSuccess && async != ncclSuccess &&
      async != ncclInProgress)
    end_job(detail::concat("NCCL reported an error during distributed::", op, " (",
                           g_api.error_string(async), "; a peer rank may have failed)"));
  if (w.pending.empty()) return;
  const double waited = double(now_ns() - w.pending.front().since_ns) * 1e-9;
  if (waited > t)
    end_job(detail::concat("distributed::", op, " (NCCL) has not completed after ", waited,
                           " s (InitOptions::timeout_seconds = ", t, ")"));
}

void start_watchdog(double timeout, int device) {
  g_watchdog = new Watchdog;
  Watchdog* w = g_watchdog;
  w->timeout = timeout;
  w->creating_since_ns = now_ns();
  w->thread = std::make_unique<WatchdogThread>(std::min(1.0, timeout / 4), [w, device] {
    cudaSetDevice(device);  // the events live on `device` (cheap when already current)
    inspect(*w);
  });
}

void stop_watchdog() {
  if (!g_watchdog) return;
  g_watchdog->thread.reset();  // joins it
  for (const Pending& p : g_watchdog->pending) cudaEventDestroy(p.done);
  for (cudaEvent_t e : g_watchdog->spare) cudaEventDestroy(e);
  delete g_watchdog;
  g_watchdog = nullptr;
}

// Records an event behind the collective just enqueued on `stream`, for the watchdog.
void watch(const char* op, cudaStream_t stream) {
  if (!g_watchdog) return;
  std::lock_guard<std::mutex> lock(g_watchdog->thread->mutex());
  cudaEvent_t e = nullptr;
  if (g_watchdog->spare.empty()) {
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return;
  } else {
    e = g_watchdog->spare.back();
    g_watchdog->spare.pop_back();
  }
  if (cudaEventRecord(e, stream) != cudaSuccess) {
    g_watchdog->spare.push_back(e);
    return;
  }
  g_watchdog->pending.push_back({e, now_ns(), op});
}

// ---- calls ----

template <typename Fn>
bool resolve(Fn& fn, const char* name, std::string& why) {
  fn = reinterpret_cast<Fn>(dlsym(g_api.lib, name));
  if (!fn) why = detail::concat("libnccl has no symbol ", name, " (expected NCCL 2.10 or newer)");
  return fn != nullptr;
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8:
    case DType::boolean: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
  }
  return ncclSum;
}

cudaStream_t stream_of(Stream on) {
  if (on == Stream::compute)
    return static_cast<cudaStream_t>(cuda_runtime().compute_stream(g_device));
  cuda_runtime().comm_wait_for_compute(g_device);
  return static_cast<cudaStream_t>(cuda_runtime().comm_stream(g_device));
}

// Enqueues `call(stream)` after checking for an earlier asynchronous error, checks its
// result and hands the collective to the watchdog.
template <typename F>
void enqueue(const char* op, Stream on, F&& call) {
  check_async_error(op);
  cudaStream_t s = stream_of(on);
  const ncclResult_t rc = call(s);
  EMBER_CHECK(rc == ncclSuccess, "distributed::", op, ": NCCL failed on rank ", g_rank, " (",
              g_api.error_string(rc), ")");
  watch(op, s);
}

}  // namespace

bool load(std::string& why) {
  if (g_api.lib) return true;
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast off unless the user chose (Note above)
  const char* env = std::getenv("EMBER_NCCL_LIBRARY");
  const char* path = env && *env ? env : "libnccl.so.2";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* reason = dlerror();
    why = detail::concat("cannot load ", path, " (", reason ? reason : "not found", ")");
    return false;
  }
  g_api.lib = lib;
  const bool ok = resolve(g_api.get_unique_id, "ncclGetUniqueId", why) &&
                  resolve(g_api.comm_init_rank, "ncclCommInitRank", why) &&
                  resolve(g_api.comm_destroy, "ncclCommDestroy", why) &&
                  resolve(g_api.comm_abort, "ncclCommAbort", why) &&
                  resolve(g_api.get_async_error, "ncclCommGetAsyncError", why) &&
                  resolve(g_api.error_string, "ncclGetErrorString", why) &&
                  resolve(g_api.all_reduce, "ncclAllReduce", why) &&
                  resolve(g_api.broadcast, "ncclBroadcast", why) &&
                  resolve(g_api.all_gather, "ncclAllGather", why) &&
                  resolve(g_api.reduce_scatter, "ncclReduceScatter", why);
  if (!ok) {
    dlclose(lib);
    g_api = Api{};
  }
  return ok;
}

bool create(int rank, int world_size, int device, double timeout_seconds,
            const std::function<void(void* bytes, int64_t size)>& share, std::string& why) {
  g_rank = rank;
  g_size = world_size;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  ncclResult_t rc = ncclSuccess;
  if (rank == 0) rc = g_api.get_unique_id(&id);
  share(&id, sizeof id);  // every rank takes part, even when rank 0 failed (then id is zeros)
  if (rc == ncclSuccess) {
    cuda_runtime().compute_stream(device);  // makes `device` current on this thread
    if (timeout_seconds > 0) start_watchdog(timeout_seconds, device);
    ncclComm_t comm = nullptr;
    rc = g_api.comm_init_rank(&comm, world_size, id, rank);
    if (g_watchdog) {
      std::lock_guard<std::mutex> lock(g_watchdog->thread->mutex());
      g_watchdog->creating_since_ns = 0;
      g_comm = rc == ncclSuccess ? comm : nullptr;
    } else {
      g_comm = rc == ncclSuccess ? comm : nullptr;
    }
  }
  if (rc != ncclSuccess) {
    stop_watchdog();
    why = g_api.error_string(rc);
    return false;
  }
  g_device = device;
  return true;
}

int device() { return g_comm ? g_device : -1; }

void destroy() {
  stop_watchdog();
  if (g_comm) g_api.comm_destroy(g_comm);
  g_comm = nullptr;
  g_device = -1;
}

void check_async_error(const char* op) {
  if (!g_comm) return;
  ncclResult_t async = ncclSuccess;
  const ncclResult_t rc = g_api.get_async_error(g_comm, &async);
  const ncclResult_t bad = rc != ncclSuccess ? rc : async;
  EMBER_CHECK(bad == ncclSuccess || bad == ncclInProgress, "distributed::", op,
              ": NCCL reported an asynchronous error on rank ", g_rank, " (",
              g_api.error_string(bad),
              "; a peer rank may have failed, or the communicator was aborted)");
}

void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op, Stream on) {
  enqueue("all_reduce", on, [&](cudaStream_t s) {
    return g_api.all_reduce(buf, buf, size_t(count), nccl_type(dtype), nccl_op(op), g_comm, s);
  });
}

void broadcast(void* buf, int64_t count, DType dtype, int root) {
  enqueue("broadcast", Stream::compute, [&](cudaStream_t s) {
    return g_api.broadcast(buf, buf, size_t(count), nccl_type(dtype), root, g_comm, s);
  });
}

void all_gather(const void* send, void* recv, int64_t count, DType dtype) {
  enqueue("all_gather", Stream::compute, [&](cudaStream_t s) {
    return g_api.all_gather(send, recv, size_t(count), nccl_type(dtype), g_comm, s);
  });
}

void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  enqueue("reduce_scatter", Stream::compute, [&](cudaStream_t s) {
    return g_api.reduce_scatter(send, recv, size_t(count), nccl_type(dtype), nccl_op(op), g_comm,
                                s);
  });
}

void join_comm_stream() {
  if (g_comm) cuda_runtime().compute_wait_for_comm(g_device);
}

bool comm_stream_idle() { return !g_comm || cuda_runtime().comm_stream_idle(g_device); }

}  // namespace ember::distributed::nccl

#else  // a build without CUDA: no CUDA tensors, so nothing past load() is ever reached

namespace ember::distributed::nccl {

bool load(std::string& why) {
  why = "ember was built without CUDA";
  return false;
}
bool create(int, int, int, double, const std::function<void(void*, int64_t)>&, std::string& why) {
  why = "ember was built without CUDA";
  return false;
}
int device() { return -1; }
void destroy() {}
void check_async_error(const char*) {}
void all_reduce(void*, int64_t, DType, ReduceOp, Stream) {}
void broadcast(void*, int64_t, DType, int) {}
void all_gather(const void*, void*, int64_t, DType) {}
void reduce_scatter(const void*, void*, int64_t, DType, ReduceOp) {}
void join_comm_stream() {}
bool comm_stream_idle() { return true; }

}  // namespace ember::distributed::nccl

#endif
