// src/distributed/process_group.cpp — init from a launch, the backend behind dlopen, and the
// collectives on tensors (include/ember/distributed.hpp).
//
// The world is one process-wide object. With the `local` backend (a world of one) every
// collective is the identity and no library is opened; with `mpi` the table of
// libember_mpi.so does the work (Note [MPI behind dlopen] in mpi/ember_mpi.h); with `tcp` the
// same table filled in-process by tcp_backend.cpp (Note [The tcp backend]), for a job started
// without mpirun (Note [Launching without mpirun]).
//
// Note [Staging through host memory]
// MPI sees host buffers of f32, f64, i32, i64 or u8. A contiguous CPU tensor of one of those
// dtypes is handed over as it is (the collective writes its buffer in place); any other
// tensor (a strided view, f16 / bf16, bool, a CUDA tensor when NCCL is not in use: Note
// [NCCL for CUDA tensors]) is copied into a contiguous CPU staging tensor of the nearest
// such dtype (f16 / bf16 as f32, bool as u8), and the result is copied back with copy_,
// which keeps the tensor's buffer and bumps its version.
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "distributed/mpi/ember_mpi.h"
#include "distributed/nccl.hpp"
#include "distributed/tcp_backend.hpp"
#include "distributed/watchdog_thread.hpp"
#include "ember/autograd.hpp"
#include "ember/device.hpp"
#include "ember/distributed.hpp"
#include "ember/error.hpp"

namespace ember::distributed {

namespace {

struct World {
  bool initialized = false;
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  bool check = true;
  const EmberMpiApi* api = nullptr;  // null for the local backend
  void* library = nullptr;
  std::string name = "local";
  const char* transport = "MPI";  // in error messages: "<transport> failed on rank R"
  std::terminate_handler previous_terminate = nullptr;
  std::optional<Device> previous_device;  // the default device before init() selected one
  CudaCollectives cuda_mode = CudaCollectives::automatic;
  int nccl_state = 0;  // 0: not decided yet, 1: NCCL, -1: host staging
  double timeout = 0;
};

World g_world;

const World& world(const char* op) {
  EMBER_CHECK(g_world.initialized, "distributed::", op,
              ": distributed::init() has not been called (expected init() first, e.g. at the "
              "start of main under mpirun)");
  return g_world;
}

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names)
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  return fallback;
}

// A whole number from the environment, -1 when unset; anything else is an error naming it.
int env_count(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  EMBER_CHECK(*end == '\0' && n >= 0 && n <= 1 << 24, "distributed::init: ", name, " is '", v,
              "' (expected a whole number, e.g. ", name, "=0)");
  return int(n);
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

// The folder libember.so was loaded from (libember_mpi.so is built beside it).
std::string library_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_folder), &info) == 0 || !info.dli_fname) return "";
  return std::filesystem::path(info.dli_fname).parent_path().string();
}

void* open_mpi_library(const std::string& requested) {
  std::vector<std::string> candidates;
  if (!requested.empty()) {
    candidates.push_back(requested);
  } else {
    if (const char* env = std::getenv("EMBER_MPI_LIBRARY"); env && *env) candidates.push_back(env);
    if (std::string dir = library_folder(); !dir.empty())
      candidates.push_back(dir + "/libember_mpi.so");
    candidates.push_back("libember_mpi.so");
  }
  std::string tried;
  for (const std::string& path : candidates) {
    // RTLD_GLOBAL: Open MPI opens its own components later, and they look for libmpi's
    // symbols in the global scope.
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return h;
    const char* why = dlerror();
    tried += detail::concat(tried.empty() ? "" : "; ", path, ": ", why ? why : "not found");
  }
  detail::throw_error(detail::concat(
      "distributed::init: cannot load the MPI backend (tried ", tried,
      "); it is built beside libember.so when CMake finds MPI: install Open MPI (`make deps`, or "
      "apt-get install openmpi-bin libopenmpi-dev) and rebuild, or set EMBER_MPI_LIBRARY to the "
      "path of libember_mpi.so"));
}

[[noreturn]] void on_terminate() {
  std::string what = "terminate called without an active exception";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = detail::concat("uncaught exception: ", ex.what());
    } catch (...) {
      what = "uncaught exception of unknown type";
    }
  }
  abort_job(what, 1);
}

void check_mpi(int rc, const char* op) {
  if (rc == 0) return;
  detail::throw_error(detail::concat("distributed::", op, ": ", g_world.transport,
                                     " failed on rank ", g_world.rank, " (",
                                     g_world.api->error_string(rc), ")"));
}

// Note [Collective timeout]
// MPI has no timeout of its own: a rank that hangs (alive, but never reaching the next
// collective) would leave the others waiting forever. With InitOptions::timeout_seconds > 0
// a watchdog thread checks, every quarter of the timeout (at most every second), how long
// this rank has been inside one blocking MPI call; past the timeout it prints
// "ember: rank R of N: distributed::<op> has waited ..." and ends the process with _Exit(3)
// (MPI_Abort may not be called from a second thread while the first is inside MPI), and
// mpirun then ends every other rank (with the tcp backend, they see the connection close: Note
// [Ending the job] in tcp_backend.cpp). The main thread only stores a time stamp per call.
struct Watchdog {
  double timeout = 0;
  std::atomic<int64_t> since_ns{0};  // when the current blocking call began; 0: none
  std::atomic<const char*> op{""};
  std::unique_ptr<WatchdogThread> thread;
};
// Never destroyed at exit: a program that ends without finalize() must not meet a joinable
// std::thread in a static destructor (that is std::terminate); the thread dies with the process.
Watchdog* g_watchdog = nullptr;

void start_watchdog(double timeout, int rank, int size) {
  g_watchdog = new Watchdog;
  Watchdog* w = g_watchdog;
  w->timeout = timeout;
  w->thread = std::make_unique<WatchdogThread>(std::min(1.0, timeout / 4), [w, rank, size] {
    const int64_t since = w->since_ns.load();
    const double waited = since ? double(now_ns() - since) * 1e-9 : 0.0;
    if (waited <= w->timeout) return;
    std::fprintf(stderr,
                 "ember: rank %d of %d: distributed::%s has waited %.1f s for the other ranks "
                 "(InitOptions::timeout_seconds = %g); ending the job\n",
                 rank, size, w->op.load(), waited, w->timeout);
    std::fflush(stderr);
    std::_Exit(3);
  });
}

void stop_watchdog() {
  delete g_watchdog;  // joins its thread
  g_watchdog = nullptr;
}

// A blocking MPI call, watched (Note [Collective timeout]) and checked.
template <typename F>
void mpi_call(const char* op, F&& call) {
  if (g_watchdog) {
    g_watchdog->op = op;
    g_watchdog->since_ns = now_ns();
  }
  const int rc = call();
  if (g_watchdog) g_watchdog->since_ns = 0;
  check_mpi(rc, op);
}

// ---- consistency: what each rank passes, compared before the collective ----

enum class Collective : int64_t { all_reduce, broadcast, all_gather, reduce_scatter };
constexpr const char* kCollectiveNames[] = {"all_reduce", "broadcast", "all_gather",
                                            "reduce_scatter"};
constexpr const char* kOpNames[] = {"sum", "avg", "max", "min"};
constexpr int kMaxDims = 8;
constexpr int kSignature = 4 + kMaxDims;  // collective, dtype, op or root, ndim, dims

std::string describe(const int64_t* sig) {
  std::vector<int64_t> dims(sig + 4, sig + 4 + std::min<int64_t>(sig[3], kMaxDims));
  std::string s = detail::concat(kCollectiveNames[sig[0]], " of ", Shape(dims).to_string(), " ",
                                 dtype_name(static_cast<DType>(sig[1])));
  if (sig[0] == int64_t(Collective::broadcast)) return s + detail::concat(" from rank ", sig[2]);
  if (sig[0] != int64_t(Collective::all_gather)) return s + " " + kOpNames[sig[2]];
  return s;
}

void check_same_everywhere(Collective c, const Tensor& t, int64_t argument) {
  if (!g_world.check || g_world.size == 1) return;
  int64_t sig[kSignature] = {int64_t(c), int64_t(t.dtype()), argument, t.dim()};
  for (int i = 0; i < t.dim(); ++i) sig[4 + std::min(i, kMaxDims - 1)] = t.shape()[i];
  if (t.dim() > kMaxDims) sig[4 + kMaxDims - 1] = t.numel();  // deeper shapes: compare sizes
  std::vector<int64_t> all(size_t(kSignature) * g_world.size);
  mpi_call(kCollectiveNames[int(c)],
           [&] { return g_world.api->all_gather(sig, all.data(), kSignature, EMBER_MPI_I64); });
  bool same = true;
  for (int r = 1; r < g_world.size; ++r)
    same = same && std::equal(sig, sig + kSignature, all.data() + size_t(r) * kSignature) &&
           std::equal(all.data(), all.data() + kSignature, all.data() + size_t(r) * kSignature);
  if (same) return;
  std::string ranks;
  for (int r = 0; r < g_world.size; ++r)
    ranks += detail::concat(r ? ", " : "", "rank ", r, ": ",
                            describe(all.data() + size_t(r) * kSignature));
  detail::throw_error(detail::concat(
      "distributed::", kCollectiveNames[int(c)], ": the ranks do not agree (", ranks,
      "); expected every rank to call the same collective on the same shape and dtype"));
}

// ---- tensors to host buffers (Note [Staging through host memory]) ----

int mpi_dtype(DType d) {
  switch (d) {
    case DType::f32: return EMBER_MPI_F32;
    case DType::f64: return EMBER_MPI_F64;
    case DType::i32: return EMBER_MPI_I32;
    case DType::i64: return EMBER_MPI_I64;
    case DType::u8: return EMBER_MPI_U8;
    default: return -1;
  }
}

DType staging_dtype(DType d) {
  if (d == DType::f16 || d == DType::bf16) return DType::f32;
  if (d == DType::boolean) return DType::u8;
  return d;
}

struct Host {
  Tensor buffer;  // contiguous, CPU, an MPI dtype
  bool staged = false;
};

Host to_host(const Tensor& t) {
  if (t.device().is_cpu() && t.is_contiguous() && mpi_dtype(t.dtype()) >= 0) return {t, false};
  NoGradGuard no_grad;
  Tensor h = t.to(Device::cpu()).to(staging_dtype(t.dtype())).contiguous();
  if (h.is_same(t)) h = h.clone();
  return {h, true};
}

void from_host(Tensor& t, const Host& h) {
  if (!h.staged) return;
  NoGradGuard no_grad;
  t.copy_(h.buffer);
}

void check_tensor(const char* op, const Tensor& t) {
  world(op);
  EMBER_CHECK(t.defined(), "distributed::", op,
              ": the tensor is undefined (expected a tensor with storage)");
}

void check_reduce_op(const char* op, const Tensor& t, ReduceOp r) {
  EMBER_CHECK(r != ReduceOp::avg || is_floating(t.dtype()), "distributed::", op,
              ": ReduceOp::avg needs a floating tensor (got ", dtype_name(t.dtype()),
              "; expected f32, f64, f16 or bf16, or ReduceOp::sum)");
  EMBER_CHECK(t.dtype() != DType::boolean || r == ReduceOp::max || r == ReduceOp::min,
              "distributed::", op, ": a bool tensor reduces with max (any) or min (all) (got ",
              kOpNames[int(r)], ")");
}

// Note [NCCL for CUDA tensors]
// At the first collective on a CUDA tensor the ranks decide together (two MIN all-reduces
// over MPI) whether NCCL is used: every rank must load libnccl and create the communicator
// (on that tensor's device, whose index is this rank's for the rest of the job); otherwise
// all of them stage through host memory (CudaCollectives::automatic) or throw (nccl). NCCL
// refuses, for example, two ranks on one GPU. Its calls are enqueued on ember's stream
// (the asynchronous all-reduce on the communication stream, Note [The communication stream]
// in src/cuda/comm_stream.hpp). In a world of one, collectives are the identity, except with
// CudaCollectives::nccl, where CUDA tensors go through a one-rank communicator (to test and
// to measure the NCCL path on one GPU).
bool single_rank_nccl(const Tensor& t) {
  return g_world.size == 1 && t.device().is_cuda() && g_world.cuda_mode == CudaCollectives::nccl;
}

bool all_ranks(bool mine) {
  if (g_world.size == 1) return mine;
  int32_t flag = mine ? 1 : 0;
  mpi_call("nccl setup",
           [&] { return g_world.api->all_reduce(&flag, 1, EMBER_MPI_I32, EMBER_MPI_MIN); });
  return flag == 1;
}

bool use_nccl(const Tensor& t, const char* op) {
  if (!t.device().is_cuda() || (g_world.size == 1 && !single_rank_nccl(t))) return false;
  if (g_world.nccl_state == 0) {
    std::string why;
    bool ok = g_world.cuda_mode != CudaCollectives::host && nccl::load(why);
    if (g_world.cuda_mode != CudaCollectives::host && all_ranks(ok)) {
      auto share = [](void* bytes, int64_t n) {
        if (g_world.size > 1)
          mpi_call("nccl setup",
                   [&] { return g_world.api->broadcast(bytes, n, EMBER_MPI_BYTE, 0); });
      };
      ok = nccl::create(g_world.rank, g_world.size, t.device().index, g_world.timeout, share, why);
      if (!all_ranks(ok)) {
        nccl::destroy();
        ok = false;
        if (why.empty()) why = "another rank could not create its NCCL communicator";
      }
    } else if (ok) {
      ok = false;
      why = "another rank could not load NCCL";
    }
    EMBER_CHECK(ok || g_world.cuda_mode != CudaCollectives::nccl, "distributed::", op,
                ": NCCL is not usable on rank ", g_world.rank, " (", why,
                "); set EMBER_NCCL_LIBRARY to your libnccl.so.2, or use "
                "InitOptions::cuda_collectives = CudaCollectives::host");
    g_world.nccl_state = ok ? 1 : -1;
  }
  if (g_world.nccl_state < 0) return false;
  EMBER_CHECK(t.device().index == nccl::device(), "distributed::", op, ": the tensor is on ",
              t.device().str(), ", but this rank's NCCL communicator is on cuda:", nccl::device(),
              " (expected every CUDA tensor of a rank on one device, the one init() made the "
              "default)");
  return true;
}

// Runs an in-place NCCL collective on `t` (a contiguous copy when `t` is strided, written back).
template <typename F>
void nccl_in_place(Tensor& t, F&& collective) {
  NoGradGuard no_grad;
  Tensor c = t.contiguous();
  collective(c.data_ptr(), c.numel(), c.dtype());
  if (!c.is_same(t)) t.copy_(c);
}

int mpi_op(ReduceOp r) {
  if (r == ReduceOp::max) return EMBER_MPI_MAX;
  if (r == ReduceOp::min) return EMBER_MPI_MIN;
  return EMBER_MPI_SUM;
}

// avg = sum / world_size, divided in the host buffer (f32 / f64 even for f16 tensors).
void finish_average(Tensor& buffer, ReduceOp r) {
  if (r != ReduceOp::avg || g_world.size == 1) return;
  NoGradGuard no_grad;
  buffer.mul_(1.0 / g_world.size);
}

}  // namespace

// Note [Launching without mpirun]
// Outside mpirun (none of its variables set), EMBER_WORLD_SIZE, EMBER_RANK, EMBER_LOCAL_RANK and
// EMBER_RENDEZVOUS_FILE describe the launch (InitOptions fields, when given, must agree with
// them). BackendKind::automatic picks tcp when that makes world_size > 1, mpi under mpirun,
// else the local world of one. The tcp backend needs this process's rank and the rendezvous
// file; init() names what is missing before it waits for anyone.
void init(InitOptions options) {
  EMBER_CHECK(!g_world.initialized, "distributed::init: already initialised (rank ", g_world.rank,
              " of ", g_world.size, "); call finalize() before init() again");
  const bool launched = launched_by_mpirun();
  const int ember_size = launched ? -1 : env_count("EMBER_WORLD_SIZE");
  const int ember_rank = launched ? -1 : env_count("EMBER_RANK");
  EMBER_CHECK(ember_size != 0, "distributed::init: EMBER_WORLD_SIZE must be at least 1 (got 0)");
  EMBER_CHECK(options.world_size == -1 || ember_size == -1 || options.world_size == ember_size,
              "distributed::init: world_size ", options.world_size,
              " was asked for, but EMBER_WORLD_SIZE is ", ember_size,
              " (expected the same, or InitOptions::world_size left at -1)");
  EMBER_CHECK(options.rank == -1 || ember_rank == -1 || options.rank == ember_rank,
              "distributed::init: rank ", options.rank, " was asked for, but EMBER_RANK is ",
              ember_rank, " (expected the same, or InitOptions::rank left at -1)");
  const int env_size =
      launched ? env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1) : std::max(ember_size, 1);
  const int want_size = options.world_size >= 0 ? options.world_size : env_size;
  const int want_rank = options.rank >= 0 ? options.rank : ember_rank;
  EMBER_CHECK(options.world_size == -1 || options.world_size >= 1,
              "distributed::init: world_size must be at least 1 (got ", options.world_size, ")");
  EMBER_CHECK(want_rank >= -1 && want_rank < want_size, "distributed::init: rank ", want_rank,
              " is out of range (expected 0 .. ", want_size - 1, " for world_size ", want_size,
              ")");
  EMBER_CHECK(options.timeout_seconds >= 0, "distributed::init: timeout_seconds must be >= 0 (got ",
              options.timeout_seconds, "; 0 waits forever)");
  BackendKind kind = options.backend;
  if (kind == BackendKind::automatic)
    kind = launched ? BackendKind::mpi : want_size > 1 ? BackendKind::tcp : BackendKind::local;
  EMBER_CHECK(kind != BackendKind::local || want_size == 1,
              "distributed::init: the local backend is a world of one process (got world_size ",
              want_size, "; expected 1, BackendKind::mpi under mpirun, or BackendKind::tcp)");

  World w;
  w.check = options.check_consistency;
  w.cuda_mode = options.cuda_collectives;
  w.timeout = options.timeout_seconds;
  if (kind == BackendKind::mpi) {
    w.library = open_mpi_library(options.mpi_library);
    using ApiFn = const EmberMpiApi* (*)();
    auto fn = reinterpret_cast<ApiFn>(dlsym(w.library, "ember_mpi_api"));
    EMBER_CHECK(fn != nullptr,
                "distributed::init: the MPI backend has no ember_mpi_api symbol "
                "(expected libember_mpi.so built with this ember)");
    w.api = fn();
    EMBER_CHECK(w.api->abi_version == EMBER_MPI_ABI_VERSION,
                "distributed::init: libember_mpi.so speaks interface version ", w.api->abi_version,
                " (expected ", EMBER_MPI_ABI_VERSION, "; rebuild it with this ember)");
    const int rc = w.api->init(&w.rank, &w.size);
    EMBER_CHECK(rc == 0, "distributed::init: MPI_Init failed (", w.api->error_string(rc), ")");
    w.name = detail::concat("mpi (", w.api->library_version(), ")");
    EMBER_CHECK(want_size == w.size || (options.world_size == -1 && !launched),
                "distributed::init: world_size ", want_size, " was asked for, but MPI has ", w.size,
                " ranks (expected the -np given to mpirun)");
    EMBER_CHECK(options.rank == -1 || options.rank == w.rank, "distributed::init: rank ",
                options.rank, " was asked for, but MPI says this process is rank ", w.rank);
  } else if (kind == BackendKind::tcp) {
    std::string file = options.rendezvous_file;
    if (const char* env = std::getenv("EMBER_RENDEZVOUS_FILE"); file.empty() && env) file = env;
    EMBER_CHECK(want_rank >= 0 || want_size == 1, "distributed::init: world_size ", want_size,
                " needs this process's rank: set InitOptions::rank or EMBER_RANK (0 .. ",
                want_size - 1, ")");
    EMBER_CHECK(!file.empty(), "distributed::init: world_size ", want_size,
                " needs a rendezvous file: set InitOptions::rendezvous_file or "
                "EMBER_RENDEZVOUS_FILE (a path every rank can reach)");
    w.api = tcp::join({.rank = std::max(want_rank, 0),
                       .world_size = want_size,
                       .rendezvous_file = file,
                       .timeout_seconds = options.timeout_seconds});
    w.api->init(&w.rank, &w.size);
    w.name = detail::concat("tcp (rendezvous ", file, ")");
    w.transport = "the tcp backend";
  } else {
    w.rank = 0;
    w.size = 1;
  }
  w.local_rank =
      options.local_rank >= 0
          ? options.local_rank
          : env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "EMBER_LOCAL_RANK"}, w.rank);
  if (options.select_cuda_device && cuda_available() && cuda_device_count() > 0)
    w.previous_device = set_default_device(Device::cuda(w.local_rank % cuda_device_count()));
  if (options.abort_on_uncaught) w.previous_terminate = std::set_terminate(on_terminate);
  if (w.api && w.size > 1 && options.timeout_seconds > 0)
    start_watchdog(options.timeout_seconds, w.rank, w.size);
  w.initialized = true;
  g_world = w;
}

bool is_initialized() { return g_world.initialized; }
int rank() { return world("rank").rank; }
int world_size() { return world("world_size").size; }
int local_rank() { return world("local_rank").local_rank; }
std::string backend_name() { return world("backend_name").name; }

void finalize() {
  if (!g_world.initialized) return;
  stop_watchdog();
  nccl::destroy();
  if (g_world.api) g_world.api->finalize();
  if (g_world.previous_terminate) std::set_terminate(g_world.previous_terminate);
  if (g_world.previous_device) set_default_device(*g_world.previous_device);  // init() chose it
  // The library stays open: Open MPI's own threads may still be winding down.
  g_world = World{};
}

void barrier() {
  const World& w = world("barrier");
  if (w.api) mpi_call("barrier", [&] { return w.api->barrier(); });
}

void all_reduce(Tensor& t, ReduceOp op) {
  check_tensor("all_reduce", t);
  check_reduce_op("all_reduce", t, op);
  if (g_world.size == 1 && !single_rank_nccl(t)) return;
  check_same_everywhere(Collective::all_reduce, t, int64_t(op));
  if (use_nccl(t, "all_reduce"))
    return nccl_in_place(t, [&](void* p, int64_t n, DType d) { nccl::all_reduce(p, n, d, op); });
  Host h = to_host(t);
  mpi_call("all_reduce", [&] {
    return g_world.api->all_reduce(h.buffer.data_ptr(), h.buffer.numel(),
                                   mpi_dtype(h.buffer.dtype()), mpi_op(op));
  });
  finish_average(h.buffer, op);
  from_host(t, h);
}

void broadcast(Tensor& t, int root) {
  check_tensor("broadcast", t);
  EMBER_CHECK(root >= 0 && root < g_world.size, "distributed::broadcast: root ", root,
              " is not a rank (expected 0 .. ", g_world.size - 1, ")");
  if (g_world.size == 1 && !single_rank_nccl(t)) return;
  check_same_everywhere(Collective::broadcast, t, root);
  if (use_nccl(t, "broadcast"))
    return nccl_in_place(t, [&](void* p, int64_t n, DType d) { nccl::broadcast(p, n, d, root); });
  Host h = to_host(t);
  mpi_call("broadcast", [&] {
    return g_world.api->broadcast(h.buffer.data_ptr(), h.buffer.numel(),
                                  mpi_dtype(h.buffer.dtype()), root);
  });
  from_host(t, h);
}

Tensor all_gather(const Tensor& t) {
  check_tensor("all_gather", t);
  std::vector<int64_t> dims{g_world.size};
  for (int64_t d : t.shape()) dims.push_back(d);
  NoGradGuard no_grad;
  if (g_world.size == 1 && !single_rank_nccl(t)) return t.unsqueeze(0).clone();
  check_same_everywhere(Collective::all_gather, t, 0);
  if (use_nccl(t, "all_gather")) {
    Tensor c = t.contiguous();
    Tensor out = empty(Shape(dims), {.dtype = t.dtype(), .device = t.device()});
    nccl::all_gather(c.data_ptr(), out.data_ptr(), c.numel(), c.dtype());
    return out;
  }
  Host h = to_host(t);
  Tensor out = empty(
      Shape(dims), {.dtype = h.buffer.dtype(), .device = Device::cpu()});  // MPI reads host memory
  mpi_call("all_gather", [&] {
    return g_world.api->all_gather(h.buffer.data_ptr(), out.data_ptr(), h.buffer.numel(),
                                   mpi_dtype(h.buffer.dtype()));
  });
  return out.to(t.dtype()).to(t.device());
}

Tensor reduce_scatter(const Tensor& t, ReduceOp op) {
  check_tensor("reduce_scatter", t);
  check_reduce_op("reduce_scatter", t, op);
  EMBER_CHECK(t.dim() >= 1 && t.shape()[0] % g_world.size == 0,
              "distributed::reduce_scatter: the first dim must split into world_size blocks (got "
              "shape ",
              t.shape().to_string(), "; expected [", g_world.size, " * k, ...])");
  NoGradGuard no_grad;
  if (g_world.size == 1 && !single_rank_nccl(t)) return t.clone();
  check_same_everywhere(Collective::reduce_scatter, t, int64_t(op));
  std::vector<int64_t> dims = t.shape().vec();
  dims[0] /= g_world.size;
  if (use_nccl(t, "reduce_scatter")) {
    Tensor c = t.contiguous();
    Tensor out = empty(Shape(dims), {.dtype = t.dtype(), .device = t.device()});
    nccl::reduce_scatter(c.data_ptr(), out.data_ptr(), out.numel(), c.dtype(), op);
    return out;
  }
  Host h = to_host(t);
  Tensor out = empty(
      Shape(dims), {.dtype = h.buffer.dtype(), .device = Device::cpu()});  // MPI reads host memory
  mpi_call("reduce_scatter", [&] {
    return g_world.api->reduce_scatter(h.buffer.data_ptr(), out.data_ptr(), out.numel(),
                                       mpi_dtype(h.buffer.dtype()), mpi_op(op));
  });
  finish_average(out, op);
  return out.to(t.dtype()).to(t.device());
}

// ---- asynchronous all-reduce ----

struct Work::State {
  Tensor target;
  Host host;
  ReduceOp op = ReduceOp::sum;
  void* request = nullptr;
  Tensor on_comm_stream;  // NCCL: the contiguous buffer being reduced on the comm stream
};

Work::Work() = default;
Work::~Work() {
  if (state_) {
    try {
      wait();
    } catch (...) {  // a destructor must not throw; the job is failing anyway
    }
  }
}
Work::Work(Work&& other) noexcept : state_(std::move(other.state_)) {}
Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    if (state_) {
      try {
        wait();
      } catch (...) {
      }
    }
    state_ = std::move(other.state_);
  }
  return *this;
}

bool Work::test() {
  if (!state_) return true;
  if (state_->on_comm_stream.defined()) return nccl::comm_stream_idle();
  if (!state_->request) return true;
  int done = 0;
  check_mpi(g_world.api->test(state_->request, &done), "all_reduce_async");
  if (done) state_->request = nullptr;
  return done != 0;
}

void Work::wait() {
  if (!state_) return;
  std::unique_ptr<State> s = std::move(state_);
  if (s->on_comm_stream.defined()) {  // the compute stream waits; the host does not
    nccl::check_async_error("all_reduce_async");
    nccl::join_comm_stream();
    NoGradGuard no_grad;
    if (!s->on_comm_stream.is_same(s->target)) s->target.copy_(s->on_comm_stream);
    return;
  }
  if (s->request) mpi_call("all_reduce_async", [&] { return g_world.api->wait(s->request); });
  if (s->host.buffer.defined()) {
    finish_average(s->host.buffer, s->op);
    from_host(s->target, s->host);
  }
}

Work all_reduce_async(Tensor& t, ReduceOp op) { return start_all_reduce(t, op, true); }

Work start_all_reduce(Tensor& t, ReduceOp op, bool check) {
  check_tensor("all_reduce_async", t);
  check_reduce_op("all_reduce_async", t, op);
  Work work;
  work.state_ = std::make_unique<Work::State>();
  work.state_->target = t;
  work.state_->op = op;
  if (g_world.size == 1 && !single_rank_nccl(t)) return work;
  if (check) check_same_everywhere(Collective::all_reduce, t, int64_t(op));
  if (use_nccl(t, "all_reduce_async")) {  // on the comm stream, after the kernels so far
    NoGradGuard no_grad;
    Tensor c = t.contiguous();
    nccl::all_reduce(c.data_ptr(), c.numel(), c.dtype(), op, nccl::Stream::comm);
    work.state_->on_comm_stream = c;  // kept alive until the compute stream has waited
    return work;
  }
  work.state_->host = to_host(t);
  const Tensor& b = work.state_->host.buffer;
  check_mpi(g_world.api->iall_reduce(b.data_ptr(), b.numel(), mpi_dtype(b.dtype()), mpi_op(op),
                                     &work.state_->request),
            "all_reduce_async");
  return work;
}

void abort_job(const std::string& message, int code) {
  const int r = g_world.initialized ? g_world.rank : 0;
  const int n = g_world.initialized ? g_world.size : 1;
  std::fprintf(stderr, "ember: rank %d of %d: %s\n", r, n, message.c_str());
  std::fflush(stderr);
  if (g_world.api) g_world.api->abort_job(code);
  std::abort();
}

}  // namespace ember::distributed
