// ember/distributed.hpp — processes launched by mpirun (or by hand, with a rendezvous file),
// collectives on tensors, and data-parallel training (ARCHITECTURE §8, docs/distributed.md).
//
// Every rank runs the same program; `mpirun -np 2 ./train` starts two. init() reads the
// launch (OpenMPI's OMPI_COMM_WORLD_* variables) and opens the MPI backend, which lives in
// its own library (libember_mpi.so, Note [MPI behind dlopen]) so that libember itself never
// needs libmpi. Without mpirun, processes started with EMBER_RANK, EMBER_WORLD_SIZE and
// EMBER_RENDEZVOUS_FILE meet through that file and talk over TCP (the tcp backend, no MPI):
//   EMBER_RANK=0 EMBER_WORLD_SIZE=2 EMBER_RENDEZVOUS_FILE=/shared/job.rdzv ./train &
//   EMBER_RANK=1 EMBER_WORLD_SIZE=2 EMBER_RENDEZVOUS_FILE=/shared/job.rdzv ./train
// With neither, init() makes a world of one process, and every collective is then the
// identity.
//
//   distributed::init();                                     // under mpirun
//   Tensor t = full({3}, float(distributed::rank()));
//   distributed::all_reduce(t, distributed::ReduceOp::sum);  // every rank: 0 + 1 = [1, 1, 1]
//   distributed::finalize();
//
// Collectives run on the world group, in the same order on every rank (MPI's rule). CPU
// tensors go through MPI; CUDA tensors through NCCL (opened with dlopen at the first CUDA
// collective) or, where NCCL is missing or refuses, staged through host memory over MPI.
// Before each collective the ranks compare what they pass (op, dtype, shape, root) unless
// InitOptions::check_consistency is off, so a mismatch is an ember::Error on every rank
// naming each rank's tensor, never a hang or a silent mix.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::distributed {

/// How values combine across ranks. avg is sum / world_size (floating dtypes only).
enum class ReduceOp { sum, avg, max, min };

/// Where collectives go. automatic: MPI under a launcher; else tcp when world_size > 1 (from
/// EMBER_WORLD_SIZE or InitOptions); else the in-process world of one (`local`). tcp: sockets
/// between ranks that met through InitOptions::rendezvous_file (docs/distributed.md,
/// "Launching without mpirun"); needs no MPI.
enum class BackendKind { automatic, local, mpi, tcp };

/// How collectives on CUDA tensors travel. automatic: NCCL when every rank can load it and
/// create the communicator, else host staging over MPI; nccl: NCCL or an error; host: always
/// staged through host memory over MPI.
enum class CudaCollectives { automatic, nccl, host };

struct InitOptions {
  /// -1: from the launcher's environment (OMPI_COMM_WORLD_RANK, PMI_RANK; without mpirun
  /// EMBER_RANK), else 0. A value given here must agree with MPI's (or EMBER_RANK).
  int rank = -1;
  /// -1: from the launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE; without mpirun EMBER_WORLD_SIZE),
  /// else 1. Checked against MPI's (or EMBER_WORLD_SIZE).
  int world_size = -1;
  /// -1: from OMPI_COMM_WORLD_LOCAL_RANK (MPI_LOCALRANKID, EMBER_LOCAL_RANK), else the rank.
  /// Picks the GPU.
  int local_rank = -1;
  BackendKind backend = BackendKind::automatic;
  /// libember_mpi.so to open; empty: $EMBER_MPI_LIBRARY, then the folder of libember.so,
  /// then the loader's search path.
  std::string mpi_library = "";
  /// The tcp backend's meeting point: a path every rank can reach (a shared filesystem across
  /// hosts); rank 0 starts it over for each job. Empty: $EMBER_RENDEZVOUS_FILE.
  std::string rendezvous_file = "";
  /// When CUDA devices are present, make cuda(local_rank % count) the default device (until
  /// finalize(), which restores the previous one).
  bool select_cuda_device = true;
  /// Compare op, dtype, shape and root across ranks before each collective (one small
  /// all-gather each). DistributedDataParallel checks its buckets once, at construction.
  bool check_consistency = true;
  /// An exception that leaves main() (std::terminate) prints "ember: rank R of N: ..." and
  /// ends the whole job with MPI_Abort instead of leaving the other ranks waiting.
  bool abort_on_uncaught = true;
  CudaCollectives cuda_collectives = CudaCollectives::automatic;
  /// A rank that waits longer than this in one collective (another rank hangs, or called a
  /// different one) prints "ember: rank R of N: distributed::<op> has waited ..." and ends
  /// the job. Also bounds the tcp backend's rendezvous. 0: wait forever.
  double timeout_seconds = 600;
};

/// Joins the job. Throws when already initialised, when MPI is needed and libember_mpi.so
/// (or libmpi) cannot be loaded, when rank / world_size disagree with the launch, or when
/// the tcp backend lacks its rank or rendezvous file or does not meet every rank in time.
/// Example: distributed::init({.backend = distributed::BackendKind::mpi});
void init(InitOptions options = {});
bool is_initialized();
/// This process's rank (0 .. world_size() - 1); throws before init().
int rank();
int world_size();
/// The rank among the processes on this host.
int local_rank();
/// "local", "mpi (Open MPI v4.1.4)" or "tcp (rendezvous /shared/job.rdzv)".
std::string backend_name();
/// Leaves the job (MPI_Finalize when init() started MPI). A no-op when not initialised.
void finalize();

/// Waits until every rank has reached it.
void barrier();
/// In place: `t` becomes op over every rank's `t`. Example: all_reduce(g, ReduceOp::avg).
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::sum);
/// In place: every rank's `t` becomes root's `t`.
void broadcast(Tensor& t, int root = 0);
/// Every rank's `t` stacked in rank order: shape [world_size, ...t.shape()].
Tensor all_gather(const Tensor& t);
/// `t` has shape [world_size * k, ...]; returns this rank's block [k, ...] of op over ranks.
Tensor reduce_scatter(const Tensor& t, ReduceOp op = ReduceOp::sum);

/// An all-reduce in flight (all_reduce_async). wait() finishes it (applying avg); the
/// destructor waits too. Move-only.
class Work {
 public:
  Work();
  ~Work();
  Work(Work&& other) noexcept;
  Work& operator=(Work&& other) noexcept;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  /// Lets MPI progress; true when finished (then wait() returns at once).
  bool test();
  void wait();
  bool pending() const { return state_ != nullptr; }

  struct State;

 private:
  friend Work start_all_reduce(Tensor& t, ReduceOp op, bool check);
  std::unique_ptr<State> state_;
};

/// Starts an in-place all-reduce of `t` and returns at once; `t` holds the result after
/// wait(). Collectives issued meanwhile must follow the same order on every rank.
Work all_reduce_async(Tensor& t, ReduceOp op = ReduceOp::sum);
/// all_reduce_async without the cross-rank comparison (for callers that checked once, as
/// DistributedDataParallel does for its buckets).
Work start_all_reduce(Tensor& t, ReduceOp op, bool check);

/// Prints "ember: rank R of N: message" to stderr and ends every rank of the job (MPI_Abort
/// with `code`; the tcp backend tells every peer, which exit with `code` too; std::abort in a
/// world of one). For a program's own catch blocks:
///   try { run(); } catch (const std::exception& e) { distributed::abort_job(e.what()); }
[[noreturn]] void abort_job(const std::string& message, int code = 1);

}  // namespace ember::distributed
