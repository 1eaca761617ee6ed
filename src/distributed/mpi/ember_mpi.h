// src/distributed/mpi/ember_mpi.h — the C interface between libember and libember_mpi.so.
//
// Note [MPI behind dlopen]
// libember must load on machines without OpenMPI (the GPU machine has no MPI packages), so
// it never links libmpi. The MPI calls live in a separate small library, libember_mpi.so
// (src/distributed/mpi/backend.cpp, built only when CMake finds MPI), which links libmpi and
// exports one C function, ember_mpi_api(), returning this table. libember opens it with
// dlopen at distributed::init() (src/distributed/process_group.cpp) and reports a clear
// ember::Error naming the missing file when it is not there. The table is plain C (no ember
// types cross it), so the two libraries share no C++ ABI; `abi_version` guards mismatches.
//
// Every function returns 0 on success or an MPI error code; error_string() explains a code.
// Buffers are host memory. Counts are elements of `dtype` (an EmberMpiDType).
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EMBER_MPI_ABI_VERSION 1

enum EmberMpiDType {
  EMBER_MPI_F32 = 0,
  EMBER_MPI_F64 = 1,
  EMBER_MPI_I32 = 2,
  EMBER_MPI_I64 = 3,
  EMBER_MPI_U8 = 4,
  EMBER_MPI_BYTE = 5,  // raw bytes (broadcast / gather only)
};

enum EmberMpiOp { EMBER_MPI_SUM = 0, EMBER_MPI_MAX = 1, EMBER_MPI_MIN = 2 };

/// Bytes per element of an EmberMpiDType.
static inline size_t ember_mpi_type_size(int dtype) {
  switch (dtype) {
    case EMBER_MPI_F64:
    case EMBER_MPI_I64: return 8;
    case EMBER_MPI_F32:
    case EMBER_MPI_I32: return 4;
    default: return 1;
  }
}

typedef struct EmberMpiApi {
  int abi_version;  // EMBER_MPI_ABI_VERSION of the library that filled the table
  /// MPI_Init_thread(MPI_THREAD_SERIALIZED) unless MPI is already initialised; fills rank and
  /// size of MPI_COMM_WORLD and sets MPI_ERRORS_RETURN on it.
  int (*init)(int* rank, int* world_size);
  /// MPI_Finalize, unless this library did not initialise MPI.
  int (*finalize)(void);
  int (*barrier)(void);
  /// In place: buf = op over ranks of buf.
  int (*all_reduce)(void* buf, int64_t count, int dtype, int op);
  /// Starts an in-place all-reduce; *request receives a handle for test / wait.
  int (*iall_reduce)(void* buf, int64_t count, int dtype, int op, void** request);
  /// *done = 1 when the request has completed (then it is freed).
  int (*test)(void* request, int* done);
  /// Waits for the request and frees it.
  int (*wait)(void* request);
  int (*broadcast)(void* buf, int64_t count, int dtype, int root);
  /// recv (world_size * count elements) = every rank's send, in rank order.
  int (*all_gather)(const void* send, void* recv, int64_t count, int dtype);
  /// recv (count elements) = rank's block of op over ranks of send (world_size * count).
  int (*reduce_scatter)(const void* send, void* recv, int64_t count, int dtype, int op);
  /// MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job.
  void (*abort_job)(int code);
  /// A readable text for an error code (static storage).
  const char* (*error_string)(int code);
  /// The MPI library's version line (MPI_Get_library_version).
  const char* (*library_version)(void);
} EmberMpiApi;

/// The one exported symbol of libember_mpi.so.
const EmberMpiApi* ember_mpi_api(void);

#ifdef __cplusplus
}
#endif
