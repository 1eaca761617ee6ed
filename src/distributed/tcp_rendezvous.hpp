// src/distributed/tcp_rendezvous.hpp — how the ranks of a tcp job find each other: the
// rendezvous file and the full mesh of TCP connections (Note [The rendezvous file] in
// tcp_rendezvous.cpp). The tcp backend (tcp_backend.cpp) runs its collectives on the result.
#pragma once

#include <unistd.h>

#include <utility>
#include <vector>

#include "distributed/tcp_backend.hpp"

namespace ember::distributed::tcp {

/// A file descriptor, closed when destroyed. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

/// Meets the other ranks through options.rendezvous_file and connects to each of them:
/// returns world_size sockets (invalid at this rank's index), non-blocking, TCP_NODELAY.
/// Throws ember::Error naming the file and what is missing when the file cannot be used, the
/// ranks disagree on world_size, a rank is started twice, or the timeout passes.
/// Example: std::vector<Fd> peers = rendezvous({.rank = 0, .world_size = 2,
///                                              .rendezvous_file = "/shared/job.rdzv"});
std::vector<Fd> rendezvous(const JoinOptions& options);

}  // namespace ember::distributed::tcp
