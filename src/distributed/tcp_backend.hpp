// src/distributed/tcp_backend.hpp — the tcp backend: a job started without mpirun, whose ranks
// find each other through a rendezvous file on a shared path and talk over TCP sockets
// (Note [The tcp backend] in tcp_backend.cpp, docs/distributed.md "Launching without mpirun").
//
// It fills the same C table as libember_mpi.so (EmberMpiApi, mpi/ember_mpi.h), in-process, so
// every collective, the NCCL unique-id exchange, the consistency checks and the watchdog of
// process_group.cpp run on it unchanged.
#pragma once

#include <string>

#include "distributed/mpi/ember_mpi.h"

namespace ember::distributed::tcp {

struct JoinOptions {
  int rank = 0;
  int world_size = 1;
  std::string rendezvous_file;
  /// Bounds the rendezvous (every rank listed and connected); 0: wait forever.
  double timeout_seconds = 600;
};

/// Joins the job: the rendezvous through the file, then a full mesh of TCP connections.
/// Throws ember::Error (naming the file, the ranks still missing and what to fix) when the
/// file cannot be used, the ranks disagree on world_size, or the timeout passes. On success
/// returns the table whose functions use the mesh until its finalize().
/// Example: const EmberMpiApi* api = tcp::join({.rank = 1, .world_size = 2,
///                                               .rendezvous_file = "/shared/job.rdzv"});
const EmberMpiApi* join(const JoinOptions& options);

}  // namespace ember::distributed::tcp
