// src/distributed/tcp_backend.cpp — the tcp backend (tcp_backend.hpp): the mesh of sockets the
// rendezvous left (tcp_rendezvous.cpp), the collectives over it, and the end of the job when a
// rank fails.
//
// Note [The tcp backend]
// Launch: every rank is started with EMBER_RANK, EMBER_WORLD_SIZE and EMBER_RENDEZVOUS_FILE
// (process_group.cpp reads them, Note [Launching without mpirun]); the ranks meet through the
// file (Note [The rendezvous file] in tcp_rendezvous.cpp), which leaves each rank with one
// connected socket per peer.
//
// The mesh: one TCP connection per pair of ranks, n (n - 1) / 2 in all (fine for the tens of
// ranks this backend is meant for). All traffic runs on one engine thread per rank, in the
// order the collectives were issued (the same order on every rank, MPI's rule): a blocking
// collective queues its work and waits; iall_reduce queues it and returns. Each step of a
// collective sends to and receives from every peer at once over non-blocking sockets (poll), so
// no order of sends can deadlock. Every message is a frame: a 16-byte header (magic, type, payload
// bytes or exit status) and the payload; the receiver checks the length it expects.
//
// Algorithms (B bytes per rank, n ranks; "in / out" is what each rank's link carries):
//   all_reduce      reduce-scatter then all-gather, direct over the mesh: block k (B / n) of
//                   every rank goes to rank k, which combines the n blocks in rank order
//                   0, 1, .., n-1 and sends the result to all. 2 (n - 1) / n B out and in, two
//                   rounds; every rank gets rank k's bits for block k, so all ranks agree
//                   bit for bit (with MPI's answers for n = 2; for n > 2 a float sum may round
//                   differently from MPI's order).
//   reduce_scatter  the first half of the above: (n - 1) B/n out and in.
//   all_gather      each rank's B to every peer: (n - 1) B out and in.
//   broadcast       the root sends B to every peer (a star): (n - 1) B out of the root.
//   barrier         an empty frame to and from every peer.
//
// Note [Ending the job]
// Without mpirun nobody else ends the other ranks. A rank that ends the job (abort_job, the
// terminate handler) sends an abort frame with its exit status to every peer, then _exit()s;
// a peer that reads it prints "rank R ended the job" and ends with the same status. A rank
// whose peer's connection closes (a crash, SIGKILL, the watchdog's _Exit, a return from main
// without finalize()) prints "lost the connection to rank R" and ends with status 4, telling
// its own peers on the way, so the whole job ends within a moment. The engine watches every
// connection while idle too (it peeks: data for a later collective is left where it is), so a
// rank busy computing ends as promptly as one waiting in a collective. A frame the engine is
// half-way through writing cannot be interleaved with an abort frame: that connection is shut
// down instead (the peer sees it close). finalize() is collective: each rank sends a goodbye
// frame to every peer and waits for theirs, so a rank that finishes early is not mistaken
// for a lost one.
#include "distributed/tcp_backend.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/tcp_rendezvous.hpp"
#include "ember/error.hpp"

namespace ember::distributed::tcp {

namespace {

constexpr uint32_t kMagic = 0x524d4245;  // "EMBR" on the wire
constexpr int kLostPeerStatus = 4;       // exit status of a rank whose peer's connection closed

bool would_block() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

// ---- the mesh and its engine ----

// The 16-byte header of every message. value: payload bytes (data, goodbye) or exit status
// (abort).
struct Frame {
  uint32_t magic = kMagic;
  uint32_t type = 0;
  uint64_t value = 0;
};
static_assert(sizeof(Frame) == 16);
enum FrameType : uint32_t { kData = 1, kAbort = 2, kGoodbye = 3 };

struct Peer {
  Fd fd;
  // 0: idle, 1: the engine is writing a frame, 2: the job is ending (Note [Ending the job]).
  std::atomic<int> send_state{0};
  bool pending = false;  // data for a later step waits unread: not watched until the next step
  bool gone = false;     // said goodbye (finalize)
};

struct Task {
  std::function<int()> body;
  bool done = false;  // guarded by Mesh::mutex
  int rc = 0;
};

struct Mesh {
  int rank = 0;
  int size = 1;
  std::vector<std::unique_ptr<Peer>> peers;  // [size]; null at this rank
  std::mutex mutex;                          // guards the queue, stop and Task::done
  std::condition_variable done_cv;
  std::deque<std::shared_ptr<Task>> queue;
  Fd wake;  // eventfd: new work or stop
  bool stop = false;
  std::thread engine;
};

// Never destroyed at exit: a program that ends without finalize() must not meet a joinable
// std::thread in a static destructor; the engine dies with the process (its peers then see
// the connections close: Note [Ending the job]).
Mesh* g_mesh = nullptr;

std::mutex g_error_mutex;
std::string g_error = "no error";

int fail(const std::string& message) {
  std::lock_guard<std::mutex> lock(g_error_mutex);
  g_error = message;
  return 1;
}

// Set by the first thread that ends the job; another (the engine seeing the peers go while the
// main thread aborts) then waits for that _exit instead of ending with a status of its own.
std::atomic<bool> g_ending{false};

[[noreturn]] void wait_for_the_end() {
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// Note [Ending the job]: tell every peer, then end this process with `status`.
[[noreturn]] void tell_peers_and_exit(int status) {
  if (g_ending.exchange(true)) wait_for_the_end();
  if (Mesh* m = g_mesh) {
    const Frame abort{kMagic, kAbort, uint64_t(status)};
    for (const auto& p : m->peers) {
      if (!p || !p->fd.valid()) continue;
      int idle = 0;
      if (p->send_state.compare_exchange_strong(idle, 2))
        (void)::send(p->fd.get(), &abort, sizeof abort, MSG_NOSIGNAL | MSG_DONTWAIT);
      char sink[4096];  // unread input would turn the close into a reset, losing the frame
      while (::recv(p->fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
      }
      ::shutdown(p->fd.get(), SHUT_RDWR);
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(status);
}

[[noreturn]] void end_job(const Mesh& m, const std::string& message, int status) {
  if (g_ending.load()) wait_for_the_end();
  std::fprintf(stderr, "ember: rank %d of %d: %s\n", m.rank, m.size, message.c_str());
  tell_peers_and_exit(status);
}

[[noreturn]] void lost_peer(const Mesh& m, int q, const char* when, const std::string& why) {
  end_job(m,
          detail::concat("lost the connection to rank ", q, " ", when, " (", why, "): rank ", q,
                         " exited, was killed or left without distributed::finalize(); ending "
                         "the job"),
          kLostPeerStatus);
}

[[noreturn]] void aborted_by(const Mesh& m, int q, uint64_t status) {
  end_job(m, detail::concat("rank ", q, " ended the job (exit status ", status, "); ending too"),
          int(status));
}

// What to poll for on a peer this rank reads nothing from now: new input, or only its close
// when data for a later step already waits (a peer that closes with our data unread has ended).
short watch_events(const Peer& p) { return p.gone ? 0 : p.pending ? POLLRDHUP : POLLIN; }

// Something happened on such a peer's socket (`revents`): an abort frame or a closed
// connection ends the job; data for a later step is left for that step.
void watch(Mesh& m, int q, short revents, const char* when) {
  Peer& p = *m.peers[q];
  if (p.pending) {
    if (revents & (POLLRDHUP | POLLHUP | POLLERR)) lost_peer(m, q, when, "connection closed");
    return;
  }
  Frame f;
  const ssize_t n = ::recv(p.fd.get(), &f, sizeof f, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) lost_peer(m, q, when, "connection closed");
  if (n < 0 && !would_block()) lost_peer(m, q, when, std::strerror(errno));
  if (n == ssize_t(sizeof f) && f.magic == kMagic && f.type == kAbort) aborted_by(m, q, f.value);
  if (n > 0) p.pending = true;
}

// What one step of a collective sends to and receives from one peer.
struct Transfer {
  const char* send = nullptr;
  size_t send_bytes = 0;
  bool sends = false;
  char* recv = nullptr;
  size_t recv_bytes = 0;
  bool receives = false;
};

struct Progress {
  Frame out, in;
  size_t sent = 0;  // header and payload bytes
  size_t got = 0;
};

// Writes what the socket takes of the frame to `q`; true when the frame is complete.
bool send_some(Mesh& m, int q, const Transfer& t, Progress& pr, const char* when) {
  Peer& p = *m.peers[q];
  if (pr.sent == 0) {
    int idle = 0;
    if (!p.send_state.compare_exchange_strong(idle, 1)) wait_for_the_end();  // the job is ending
  }
  for (;;) {
    iovec iov[2];
    int k = 0;
    if (pr.sent < sizeof(Frame))
      iov[k++] = {reinterpret_cast<char*>(&pr.out) + pr.sent, sizeof(Frame) - pr.sent};
    const size_t body = pr.sent > sizeof(Frame) ? pr.sent - sizeof(Frame) : 0;
    if (t.send_bytes > body) iov[k++] = {const_cast<char*>(t.send) + body, t.send_bytes - body};
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = size_t(k);
    const ssize_t n = ::sendmsg(p.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && would_block()) return false;
    if (n < 0) lost_peer(m, q, when, std::strerror(errno));
    pr.sent += size_t(n);
    if (pr.sent == sizeof(Frame) + t.send_bytes) {
      p.send_state.store(0);
      return true;
    }
  }
}

// Reads what has arrived of the frame from `q`; 1 when complete, 0 when not yet, -1 (and the
// error text set) when the peer sent something else than this step expects.
int recv_some(Mesh& m, int q, const Transfer& t, Progress& pr, uint32_t type, const char* op,
              const char* when) {
  Peer& p = *m.peers[q];
  for (;;) {
    const bool header = pr.got < sizeof(Frame);
    char* to =
        header ? reinterpret_cast<char*>(&pr.in) + pr.got : t.recv + (pr.got - sizeof(Frame));
    const size_t want = header ? sizeof(Frame) - pr.got : t.recv_bytes - (pr.got - sizeof(Frame));
    const ssize_t n = want ? ::recv(p.fd.get(), to, want, MSG_DONTWAIT) : 0;
    if (want && n == 0) lost_peer(m, q, when, "connection closed");
    if (n < 0 && would_block()) return 0;
    if (n < 0) lost_peer(m, q, when, std::strerror(errno));
    pr.got += size_t(n);
    if (header && pr.got == sizeof(Frame)) {
      const Frame& f = pr.in;
      if (f.magic == kMagic && f.type == kAbort) aborted_by(m, q, f.value);
      if (f.magic != kMagic || f.type != type || f.value != t.recv_bytes) {
        const std::string what =
            f.magic != kMagic    ? std::string("bytes that are not an ember frame")
            : f.type == kGoodbye ? std::string("goodbye: it called distributed::finalize()")
            : f.type != type     ? std::string("data: it is still in a collective")
                                 : detail::concat(f.value, " bytes, expected ", t.recv_bytes);
        fail(detail::concat("rank ", q, " sent ", what, " during ", op,
                            " (expected every rank to call the same collectives on the same "
                            "sizes; InitOptions::check_consistency names them)"));
        return -1;
      }
    }
    if (pr.got == sizeof(Frame) + t.recv_bytes) return 1;
  }
}

// One step of a collective: sends and receives with every peer at once (Note [The tcp
// backend]). Returns 0, or 1 with the error text set.
int exchange(Mesh& m, const std::vector<Transfer>& t, const char* op, uint32_t type = kData) {
  const std::string when = detail::concat("during ", op);
  std::vector<Progress> pr(size_t(m.size));
  int open = 0;
  for (int q = 0; q < m.size; ++q) {
    if (q == m.rank) continue;
    pr[q].out.type = type;
    pr[q].out.value = t[q].send_bytes;
    open += int(t[q].sends) + int(t[q].receives);
  }
  std::vector<pollfd> fds;
  std::vector<int> who;
  while (open > 0) {
    fds.clear();
    who.clear();
    for (int q = 0; q < m.size; ++q) {
      if (q == m.rank) continue;
      const Peer& p = *m.peers[q];
      const bool sending = t[q].sends && pr[q].sent < sizeof(Frame) + t[q].send_bytes;
      const bool receiving = t[q].receives && pr[q].got < sizeof(Frame) + t[q].recv_bytes;
      const short events = short((sending ? POLLOUT : 0) | (receiving ? POLLIN : watch_events(p)));
      if (events) {
        fds.push_back({p.fd.get(), events, 0});
        who.push_back(q);
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return fail(detail::concat("poll failed during ", op, " (", std::strerror(errno), ")"));
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      const int q = who[i];
      const short re = fds[i].revents;
      if (!re) continue;
      const bool sending = t[q].sends && pr[q].sent < sizeof(Frame) + t[q].send_bytes;
      const bool receiving = t[q].receives && pr[q].got < sizeof(Frame) + t[q].recv_bytes;
      if (sending && (re & (POLLOUT | POLLERR | POLLHUP)) &&
          send_some(m, q, t[q], pr[q], when.c_str()))
        --open;
      if (re & (POLLIN | POLLRDHUP | POLLERR | POLLHUP)) {
        if (!receiving) {
          watch(m, q, re, when.c_str());
          continue;
        }
        const int got = recv_some(m, q, t[q], pr[q], type, op, when.c_str());
        if (got < 0) return 1;
        if (got > 0) --open;
      }
    }
  }
  return 0;
}

// While no collective runs, the engine watches every connection (Note [Ending the job]).
void watch_while_idle(Mesh& m) {
  std::vector<pollfd> fds{{m.wake.get(), POLLIN, 0}};
  std::vector<int> who{-1};
  for (int q = 0; q < m.size; ++q) {
    const Peer* p = m.peers[q].get();
    if (p && watch_events(*p)) {
      fds.push_back({p->fd.get(), watch_events(*p), 0});
      who.push_back(q);
    }
  }
  if (::poll(fds.data(), fds.size(), -1) < 0) return;
  if (fds[0].revents) {
    uint64_t count = 0;
    (void)::read(m.wake.get(), &count, sizeof count);
  }
  for (size_t i = 1; i < fds.size(); ++i)
    if (fds[i].revents) watch(m, who[i], fds[i].revents, "between collectives");
}

void engine_loop(Mesh* m) {
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::lock_guard<std::mutex> lock(m->mutex);
      if (!m->queue.empty()) {
        task = m->queue.front();
        m->queue.pop_front();
      } else if (m->stop) {
        return;
      }
    }
    if (!task) {
      watch_while_idle(*m);
      continue;
    }
    for (auto& p : m->peers)
      if (p) p->pending = false;
    const int rc = task->body();
    {
      std::lock_guard<std::mutex> lock(m->mutex);
      task->rc = rc;
      task->done = true;
    }
    m->done_cv.notify_all();
  }
}

void wake(Mesh& m) {
  const uint64_t one = 1;
  (void)::write(m.wake.get(), &one, sizeof one);
}

std::shared_ptr<Task> submit(Mesh& m, std::function<int()> body) {
  auto task = std::make_shared<Task>();
  task->body = std::move(body);
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    m.queue.push_back(task);
  }
  wake(m);
  return task;
}

int wait_for(Mesh& m, const std::shared_ptr<Task>& task) {
  std::unique_lock<std::mutex> lock(m.mutex);
  m.done_cv.wait(lock, [&] { return task->done; });
  return task->rc;
}

// Runs `body(mesh)` on the engine, after everything queued before it, and waits.
int run_on_engine(const std::function<int(Mesh&)>& body) {
  Mesh* m = g_mesh;
  if (!m) return fail("the tcp backend has not joined a job (distributed::init first)");
  return wait_for(*m, submit(*m, [m, &body] { return body(*m); }));
}

// ---- the collectives (host buffers, EmberMpiDType, EmberMpiOp) ----

template <typename T>
void combine_as(void* acc, const void* x, int64_t n, int op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(x);
  for (int64_t i = 0; i < n; ++i) {
    if (op == EMBER_MPI_MAX) {
      a[i] = b[i] > a[i] ? b[i] : a[i];
    } else if (op == EMBER_MPI_MIN) {
      a[i] = b[i] < a[i] ? b[i] : a[i];
    } else {
      a[i] = T(a[i] + b[i]);
    }
  }
}

// acc = acc op x, elementwise.
void combine(void* acc, const void* x, int64_t n, int dtype, int op) {
  switch (dtype) {
    case EMBER_MPI_F32: return combine_as<float>(acc, x, n, op);
    case EMBER_MPI_F64: return combine_as<double>(acc, x, n, op);
    case EMBER_MPI_I32: return combine_as<int32_t>(acc, x, n, op);
    case EMBER_MPI_I64: return combine_as<int64_t>(acc, x, n, op);
    default: return combine_as<uint8_t>(acc, x, n, op);
  }
}

// acc = from[0] op from[1] op .. op from[n-1], in rank order (so the bits do not depend on which
// rank combines). acc may be from[0], but no other from[r].
void reduce_in_rank_order(char* acc, const std::vector<const char*>& from, int64_t count, int dtype,
                          int op) {
  if (acc != from[0]) std::memcpy(acc, from[0], size_t(count) * ember_mpi_type_size(dtype));
  for (size_t r = 1; r < from.size(); ++r) combine(acc, from[r], count, dtype, op);
}

int all_reduce_now(Mesh& m, void* buf, int64_t count, int dtype, int op) {
  const int n = m.size, me = m.rank;
  const size_t es = ember_mpi_type_size(dtype);
  char* b = static_cast<char*>(buf);
  // Block k: count / n elements, one more for the first count % n blocks.
  auto begin = [&](int k) {
    return size_t(k * (count / n) + std::min<int64_t>(k, count % n)) * es;
  };
  auto bytes = [&](int k) { return begin(k + 1) - begin(k); };
  const size_t mine = bytes(me);
  std::vector<char> blocks(size_t(n) * mine);  // rank q's block `me` at q; our slot: the sum
  std::vector<Transfer> t(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q)
    if (q != me) t[q] = {b + begin(q), bytes(q), true, blocks.data() + q * mine, mine, true};
  if (int rc = exchange(m, t, "all_reduce")) return rc;
  std::vector<const char*> from(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) from[q] = q == me ? b + begin(me) : blocks.data() + q * mine;
  char* acc = me == 0 ? b + begin(me) : blocks.data() + me * mine;
  reduce_in_rank_order(acc, from, int64_t(mine / es), dtype, op);
  if (acc != b + begin(me)) std::memcpy(b + begin(me), acc, mine);
  for (int q = 0; q < n; ++q)
    if (q != me) t[q] = {b + begin(me), mine, true, b + begin(q), bytes(q), true};
  return exchange(m, t, "all_reduce");
}

int reduce_scatter_now(Mesh& m, const void* send, void* recv, int64_t count, int dtype, int op) {
  const int n = m.size, me = m.rank;
  const size_t block = size_t(count) * ember_mpi_type_size(dtype);
  const char* s = static_cast<const char*>(send);
  std::vector<char> blocks(size_t(n) * block);
  std::vector<Transfer> t(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q)
    if (q != me) t[q] = {s + q * block, block, true, blocks.data() + q * block, block, true};
  if (int rc = exchange(m, t, "reduce_scatter")) return rc;
  std::vector<const char*> from(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) from[q] = q == me ? s + me * block : blocks.data() + q * block;
  reduce_in_rank_order(static_cast<char*>(recv), from, count, dtype, op);
  return 0;
}

int all_gather_now(Mesh& m, const void* send, void* recv, int64_t count, int dtype) {
  const size_t block = size_t(count) * ember_mpi_type_size(dtype);
  char* r = static_cast<char*>(recv);
  std::memcpy(r + m.rank * block, send, block);
  std::vector<Transfer> t(size_t(m.size));
  for (int q = 0; q < m.size; ++q)
    if (q != m.rank)
      t[q] = {static_cast<const char*>(send), block, true, r + q * block, block, true};
  return exchange(m, t, "all_gather");
}

int broadcast_now(Mesh& m, void* buf, int64_t count, int dtype, int root) {
  const size_t bytes = size_t(count) * ember_mpi_type_size(dtype);
  std::vector<Transfer> t(size_t(m.size));
  char* b = static_cast<char*>(buf);
  for (int q = 0; q < m.size; ++q) {
    if (q == m.rank) continue;
    if (m.rank == root) t[q] = {b, bytes, true, nullptr, 0, false};
    if (q == root) t[q] = {nullptr, 0, false, b, bytes, true};
  }
  return exchange(m, t, "broadcast");
}

// Empty frames to and from every peer: of type kData (barrier) or kGoodbye (finalize).
int empty_round(Mesh& m, uint32_t type, const char* op) {
  std::vector<Transfer> t(size_t(m.size), Transfer{nullptr, 0, true, nullptr, 0, true});
  return exchange(m, t, op, type);
}

// ---- the table ----

int api_init(int* rank, int* world_size) {
  if (!g_mesh) return fail("the tcp backend has not joined a job (tcp::join first)");
  *rank = g_mesh->rank;
  *world_size = g_mesh->size;
  return 0;
}

int api_finalize() {
  Mesh* m = g_mesh;
  if (!m) return 0;
  const int rc = run_on_engine([](Mesh& mesh) {  // after every pending all-reduce
    const int r = empty_round(mesh, kGoodbye, "finalize");
    for (auto& p : mesh.peers)
      if (p) p->gone = true;
    return r;
  });
  {
    std::lock_guard<std::mutex> lock(m->mutex);
    m->stop = true;
  }
  wake(*m);
  m->engine.join();
  for (auto& p : m->peers)
    if (p) ::shutdown(p->fd.get(), SHUT_WR);
  g_mesh = nullptr;
  delete m;  // closes the sockets
  return rc;
}

int api_barrier() {
  return run_on_engine([](Mesh& m) { return empty_round(m, kData, "barrier"); });
}

int api_all_reduce(void* buf, int64_t count, int dtype, int op) {
  return run_on_engine([&](Mesh& m) { return all_reduce_now(m, buf, count, dtype, op); });
}

// The request of iall_reduce: the queued task (it completes on the engine thread).
using Request = std::shared_ptr<Task>;

int api_iall_reduce(void* buf, int64_t count, int dtype, int op, void** request) {
  Mesh* m = g_mesh;
  if (!m) return fail("the tcp backend has not joined a job (distributed::init first)");
  *request = new Request(
      submit(*m, [m, buf, count, dtype, op] { return all_reduce_now(*m, buf, count, dtype, op); }));
  return 0;
}

int api_test(void* request, int* done) {
  auto* r = static_cast<Request*>(request);
  int rc = 0;
  {
    std::lock_guard<std::mutex> lock(g_mesh->mutex);
    *done = (*r)->done ? 1 : 0;
    rc = (*r)->rc;
  }
  if (*done) delete r;
  return *done ? rc : 0;
}

int api_wait(void* request) {
  auto* r = static_cast<Request*>(request);
  const int rc = wait_for(*g_mesh, *r);
  delete r;
  return rc;
}

int api_broadcast(void* buf, int64_t count, int dtype, int root) {
  return run_on_engine([&](Mesh& m) { return broadcast_now(m, buf, count, dtype, root); });
}

int api_all_gather(const void* send, void* recv, int64_t count, int dtype) {
  return run_on_engine([&](Mesh& m) { return all_gather_now(m, send, recv, count, dtype); });
}

int api_reduce_scatter(const void* send, void* recv, int64_t count, int dtype, int op) {
  return run_on_engine(
      [&](Mesh& m) { return reduce_scatter_now(m, send, recv, count, dtype, op); });
}

void api_abort_job(int code) { tell_peers_and_exit(code); }

const char* api_error_string(int) {
  static thread_local std::string text;
  std::lock_guard<std::mutex> lock(g_error_mutex);
  text = g_error;
  return text.c_str();
}

const char* api_library_version() { return "tcp"; }

const EmberMpiApi kApi = {
    .abi_version = EMBER_MPI_ABI_VERSION,
    .init = api_init,
    .finalize = api_finalize,
    .barrier = api_barrier,
    .all_reduce = api_all_reduce,
    .iall_reduce = api_iall_reduce,
    .test = api_test,
    .wait = api_wait,
    .broadcast = api_broadcast,
    .all_gather = api_all_gather,
    .reduce_scatter = api_reduce_scatter,
    .abort_job = api_abort_job,
    .error_string = api_error_string,
    .library_version = api_library_version,
};

}  // namespace

const EmberMpiApi* join(const JoinOptions& options) {
  EMBER_CHECK(g_mesh == nullptr, "distributed::init: the tcp backend is already in a job (rank ",
              g_mesh ? g_mesh->rank : 0, "); call finalize() first");
  std::vector<Fd> sockets = rendezvous(options);
  auto m = std::make_unique<Mesh>();
  m->rank = options.rank;
  m->size = options.world_size;
  m->peers.resize(sockets.size());
  for (size_t q = 0; q < sockets.size(); ++q) {
    if (!sockets[q].valid()) continue;
    m->peers[q] = std::make_unique<Peer>();
    m->peers[q]->fd = std::move(sockets[q]);
  }
  m->wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  EMBER_CHECK(m->wake.valid(), "distributed::init: eventfd failed (", std::strerror(errno), ")");
  g_mesh = m.release();
  g_mesh->engine = std::thread(engine_loop, g_mesh);
  return &kApi;
}

}  // namespace ember::distributed::tcp
