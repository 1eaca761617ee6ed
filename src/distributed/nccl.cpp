// src/distributed/nccl.cpp — the NCCL entry points ember uses, resolved with dlopen.
//
// libember links no NCCL (the GPU machine's NCCL is the one its torch ships; a user may have
// another): the library is opened at the first collective on a CUDA tensor, from
// $EMBER_NCCL_LIBRARY, else "libnccl.so.2" on the loader's path. Only nccl.h's types are used
// at build time (the CUDA toolkit's copy). Built only with CUDA; otherwise load() says so.
#include "distributed/nccl.hpp"

#include "ember/error.hpp"

#if defined(EMBER_WITH_CUDA)

#include <dlfcn.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include "cuda/common.cuh"

namespace ember::distributed::nccl {

namespace {

struct Api {
  void* lib = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
};

Api g_api;
ncclComm_t g_comm = nullptr;
int g_device = -1;

template <typename Fn>
bool resolve(Fn& fn, const char* name, std::string& why) {
  fn = reinterpret_cast<Fn>(dlsym(g_api.lib, name));
  if (!fn) why = detail::concat("libnccl has no symbol ", name, " (expected NCCL 2.10 or newer)");
  return fn != nullptr;
}

void check(ncclResult_t rc, const char* op) {
  EMBER_CHECK(rc == ncclSuccess, "distributed::", op, ": NCCL failed (", g_api.error_string(rc),
              ")");
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

cudaStream_t current_stream() { return cuda::stream(g_device); }

}  // namespace

bool load(std::string& why) {
  if (g_api.lib) return true;
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

bool create(int rank, int world_size, int device,
            const std::function<void(void* bytes, int64_t size)>& share, std::string& why) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  ncclResult_t rc = ncclSuccess;
  if (rank == 0) rc = g_api.get_unique_id(&id);
  share(&id, sizeof id);  // every rank takes part, even when rank 0 failed (then id is zeros)
  if (rc == ncclSuccess) {
    cuda::stream(device);  // makes `device` current on this thread
    rc = g_api.comm_init_rank(&g_comm, world_size, id, rank);
  }
  if (rc != ncclSuccess) {
    why = g_api.error_string(rc);
    g_comm = nullptr;
    return false;
  }
  g_device = device;
  return true;
}

int device() { return g_comm ? g_device : -1; }

void destroy() {
  if (g_comm) g_api.comm_destroy(g_comm);
  g_comm = nullptr;
  g_device = -1;
}

void all_reduce(void* buf, int64_t count, DType dtype, ReduceOp op) {
  check(g_api.all_reduce(buf, buf, size_t(count), nccl_type(dtype), nccl_op(op), g_comm,
                         current_stream()),
        "all_reduce");
}

void broadcast(void* buf, int64_t count, DType dtype, int root) {
  check(g_api.broadcast(buf, buf, size_t(count), nccl_type(dtype), root, g_comm, current_stream()),
        "broadcast");
}

void all_gather(const void* send, void* recv, int64_t count, DType dtype) {
  check(g_api.all_gather(send, recv, size_t(count), nccl_type(dtype), g_comm, current_stream()),
        "all_gather");
}

void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype, ReduceOp op) {
  check(g_api.reduce_scatter(send, recv, size_t(count), nccl_type(dtype), nccl_op(op), g_comm,
                             current_stream()),
        "reduce_scatter");
}

}  // namespace ember::distributed::nccl

#else  // a build without CUDA: no CUDA tensors, so nothing past load() is ever reached

namespace ember::distributed::nccl {

bool load(std::string& why) {
  why = "ember was built without CUDA";
  return false;
}
bool create(int, int, int, const std::function<void(void*, int64_t)>&, std::string& why) {
  why = "ember was built without CUDA";
  return false;
}
int device() { return -1; }
void destroy() {}
void all_reduce(void*, int64_t, DType, ReduceOp) {}
void broadcast(void*, int64_t, DType, int) {}
void all_gather(const void*, void*, int64_t, DType) {}
void reduce_scatter(const void*, void*, int64_t, DType, ReduceOp) {}

}  // namespace ember::distributed::nccl

#endif
