// src/distributed/mpi/backend.cpp — libember_mpi.so: MPI collectives behind a C table.
//
// The only file that includes <mpi.h> (Note [MPI behind dlopen] in ember_mpi.h). It knows
// nothing of tensors: host buffers, element counts and the dtypes of EmberMpiDType. MPI
// counts are int, so the blocking all-reduce and broadcast go in chunks of kChunk elements;
// the non-blocking all-reduce and the gathers take at most INT_MAX elements (DDP's buckets
// are megabytes).
#include <mpi.h>

#include <climits>
#include <cstdint>

#include "distributed/mpi/ember_mpi.h"

namespace {

constexpr int64_t kChunk = int64_t{1} << 30;  // elements per MPI call
bool g_we_initialised = false;

MPI_Datatype mpi_type(int dtype) {
  switch (dtype) {
    case EMBER_MPI_F32: return MPI_FLOAT;
    case EMBER_MPI_F64: return MPI_DOUBLE;
    case EMBER_MPI_I32: return MPI_INT32_T;
    case EMBER_MPI_I64: return MPI_INT64_T;
    case EMBER_MPI_U8: return MPI_UINT8_T;
    default: return MPI_BYTE;
  }
}

MPI_Op mpi_op(int op) {
  switch (op) {
    case EMBER_MPI_MAX: return MPI_MAX;
    case EMBER_MPI_MIN: return MPI_MIN;
    default: return MPI_SUM;
  }
}

int init(int* rank, int* world_size) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return rc;
    g_we_initialised = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rc = MPI_Comm_rank(MPI_COMM_WORLD, rank);
  if (rc == MPI_SUCCESS) rc = MPI_Comm_size(MPI_COMM_WORLD, world_size);
  return rc;
}

int finalize() {
  if (!g_we_initialised) return MPI_SUCCESS;
  int finalised = 0;
  MPI_Finalized(&finalised);
  g_we_initialised = false;
  return finalised ? MPI_SUCCESS : MPI_Finalize();
}

int barrier() { return MPI_Barrier(MPI_COMM_WORLD); }

int all_reduce(void* buf, int64_t count, int dtype, int op) {
  auto* bytes = static_cast<char*>(buf);
  for (int64_t done = 0; done < count; done += kChunk) {
    const int64_t n = count - done < kChunk ? count - done : kChunk;
    const int rc = MPI_Allreduce(MPI_IN_PLACE, bytes + done * int64_t(ember_mpi_type_size(dtype)),
                                 static_cast<int>(n), mpi_type(dtype), mpi_op(op), MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int iall_reduce(void* buf, int64_t count, int dtype, int op, void** request) {
  if (count > INT_MAX) return MPI_ERR_COUNT;
  auto* req = new MPI_Request;
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count), mpi_type(dtype),
                                mpi_op(op), MPI_COMM_WORLD, req);
  if (rc != MPI_SUCCESS) {
    delete req;
    return rc;
  }
  *request = req;
  return MPI_SUCCESS;
}

int test(void* request, int* done) {
  auto* req = static_cast<MPI_Request*>(request);
  const int rc = MPI_Test(req, done, MPI_STATUS_IGNORE);
  if (rc == MPI_SUCCESS && *done) delete req;
  return rc;
}

int wait(void* request) {
  auto* req = static_cast<MPI_Request*>(request);
  const int rc = MPI_Wait(req, MPI_STATUS_IGNORE);
  delete req;
  return rc;
}

int broadcast(void* buf, int64_t count, int dtype, int root) {
  auto* bytes = static_cast<char*>(buf);
  for (int64_t done = 0; done < count; done += kChunk) {
    const int64_t n = count - done < kChunk ? count - done : kChunk;
    const int rc = MPI_Bcast(bytes + done * int64_t(ember_mpi_type_size(dtype)),
                             static_cast<int>(n), mpi_type(dtype), root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int all_gather(const void* send, void* recv, int64_t count, int dtype) {
  if (count > INT_MAX) return MPI_ERR_COUNT;
  return MPI_Allgather(send, static_cast<int>(count), mpi_type(dtype), recv,
                       static_cast<int>(count), mpi_type(dtype), MPI_COMM_WORLD);
}

int reduce_scatter(const void* send, void* recv, int64_t count, int dtype, int op) {
  if (count > INT_MAX) return MPI_ERR_COUNT;
  return MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), mpi_type(dtype), mpi_op(op),
                                  MPI_COMM_WORLD);
}

void abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

const char* error_string(int code) {
  static thread_local char text[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "unknown MPI error";
  text[len] = '\0';
  return text;
}

const char* library_version() {
  static char text[MPI_MAX_LIBRARY_VERSION_STRING + 1];
  int len = 0;
  MPI_Get_library_version(text, &len);
  text[len] = '\0';
  for (int i = 0; i < len; ++i)  // the first line only
    if (text[i] == '\n' || text[i] == ',') text[i] = '\0';
  return text;
}

const EmberMpiApi kApi = {
    .abi_version = EMBER_MPI_ABI_VERSION,
    .init = init,
    .finalize = finalize,
    .barrier = barrier,
    .all_reduce = all_reduce,
    .iall_reduce = iall_reduce,
    .test = test,
    .wait = wait,
    .broadcast = broadcast,
    .all_gather = all_gather,
    .reduce_scatter = reduce_scatter,
    .abort_job = abort_job,
    .error_string = error_string,
    .library_version = library_version,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const EmberMpiApi* ember_mpi_api(void) {
  return &kApi;
}
