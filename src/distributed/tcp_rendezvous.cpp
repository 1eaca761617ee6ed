// src/distributed/tcp_rendezvous.cpp — the rendezvous of a tcp job (tcp_rendezvous.hpp): the
// ranks list themselves in a file on a shared path, then connect to each other over TCP.
//
// Each rank listens on an ephemeral TCP port (all IPv4 interfaces) and advertises "host port",
// host being $EMBER_HOST or else gethostname() (it must resolve, on every rank, to this
// machine; set EMBER_HOST to an address when it does not).
//
// Note [The rendezvous file]
// The file belongs to rank 0 of the job that is starting. Rank 0 truncates it, under an
// exclusive flock, and writes a header with a fresh random 64-bit generation and its own line:
//   ember-rendezvous generation 9f3a0c2b7d1e4f60 world_size 2
//   0 node1 40123 9f3a0c2b7d1e4f60
// Every other rank waits for a header, then appends its own line "rank host port generation"
// under the lock, tagged with the header's generation; lines of another generation do not
// count, and when the header changes (rank 0 truncated after this rank had read an earlier
// job's file) the rank appends again. Rank r connects to rank 0 first and says which
// generation it read: rank 0 accepts only its own, so a rank that read a stale file (an
// earlier job's, left on disk) is refused (that rank 0 is gone) or told so, and waits for the
// new header; jobs never mix. Then rank r connects to ranks 1 .. r-1 (listed under the same,
// now verified, generation) and accepts ranks r+1 .. n-1. All of it is bounded by
// InitOptions::timeout_seconds. The file stays after the job; the next job's rank 0 truncates
// it. Two jobs running at once must not share a file (the later rank 0 would take it over).
//
// Connections: rank r connects to the ranks below it and accepts those above; each connection
// opens with a hello (magic, version, generation, rank, world_size) and the acceptor's answer
// (accepted, stale generation, other world_size, rank taken). Connections only point
// downwards, and rank 0 only accepts, so no rank waits on one that waits on it.
#include "distributed/tcp_rendezvous.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/watchdog_thread.hpp"
#include "ember/error.hpp"

namespace ember::distributed::tcp {

namespace {

constexpr uint32_t kMagic = 0x524d4245;  // "EMBR" on the wire
constexpr uint32_t kVersion = 1;
constexpr int kRetryMs = 20;            // between reads of the file
constexpr double kAnswerSeconds = 5.0;  // for rank 0's answer to a hello

struct Deadline {
  int64_t at_ns = 0;  // 0: never
  static Deadline after(double seconds) {
    return {seconds > 0 ? now_ns() + int64_t(seconds * 1e9) : 0};
  }
  static Deadline earlier(Deadline a, Deadline b) {
    if (!a.at_ns || !b.at_ns) return {a.at_ns ? a.at_ns : b.at_ns};
    return {std::min(a.at_ns, b.at_ns)};
  }
  bool passed() const { return at_ns && now_ns() >= at_ns; }
  /// For poll(): the milliseconds left (at least 0), or -1 without a deadline.
  int poll_ms() const {
    if (!at_ns) return -1;
    return int(std::clamp<int64_t>((at_ns - now_ns()) / 1000000 + 1, 0, INT_MAX));
  }
};

bool would_block() { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR; }

struct Job {
  int rank = 0;
  int size = 1;
  std::string file;
  double timeout = 0;
  Deadline deadline;
};

[[noreturn]] void timed_out(const Job& job, const std::string& waiting) {
  detail::throw_error(detail::concat(
      "distributed::init: rank ", job.rank, " of ", job.size, " waited ", job.timeout,
      " s in the rendezvous ", job.file, ": ", waiting,
      " (expected every rank started with the same EMBER_RENDEZVOUS_FILE and EMBER_WORLD_SIZE; "
      "or raise InitOptions::timeout_seconds)"));
}

// ---- the file ----

struct Address {
  std::string host;
  int port = 0;
};

struct Listing {
  bool exists = false;
  bool has_header = false;
  uint64_t generation = 0;
  std::map<int, Address> ranks;  // the lines of `generation`
};

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

Listing parse(const std::string& text) {
  Listing l;
  l.exists = true;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string first, host, generation;
    words >> first;
    if (first == "ember-rendezvous") {
      std::string key;
      words >> key >> generation;
      l.has_header = key == "generation" && !generation.empty();
      l.generation = std::strtoull(generation.c_str(), nullptr, 16);
      l.ranks.clear();  // a header starts the listing over
      continue;
    }
    int port = 0;
    if (!l.has_header || first.empty() ||
        !std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (words >> host >> port >> generation && generation == hex(l.generation))
      l.ranks[std::atoi(first.c_str())] = {host, port};
  }
  return l;
}

std::string read_text(int fd) {
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  return text;
}

bool write_text(int fd, const std::string& text) {
  return ::write(fd, text.data(), text.size()) == ssize_t(text.size());
}

// The file as it is now, read under a shared lock; exists = false when it is not there yet.
Listing read_listing(const Job& job) {
  Fd fd(::open(job.file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    EMBER_CHECK(errno == ENOENT, "distributed::init: cannot read the rendezvous file ", job.file,
                " (", std::strerror(errno), "; expected a readable path every rank can reach)");
    return {};
  }
  ::flock(fd.get(), LOCK_SH);
  return parse(read_text(fd.get()));  // closing the file releases the lock
}

std::string line_of(int rank, const Address& a, uint64_t generation) {
  return detail::concat(rank, " ", a.host, " ", a.port, " ", hex(generation), "\n");
}

// Rank 0: the file starts over with a new generation and rank 0's line.
void start_listing(const Job& job, uint64_t generation, const Address& me) {
  Fd fd(::open(job.file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  EMBER_CHECK(fd.valid(), "distributed::init: cannot create the rendezvous file ", job.file, " (",
              std::strerror(errno), "; expected a writable path every rank can reach)");
  ::flock(fd.get(), LOCK_EX);
  const bool ok = ::ftruncate(fd.get(), 0) == 0 &&
                  write_text(fd.get(), detail::concat("ember-rendezvous generation ",
                                                      hex(generation), " world_size ", job.size,
                                                      "\n", line_of(0, me, generation)));
  EMBER_CHECK(ok, "distributed::init: cannot write the rendezvous file ", job.file, " (",
              std::strerror(errno), ")");
}

// Rank r > 0: appends its line, under the lock, if the header is still `generation`.
bool append_line(const Job& job, uint64_t generation, const Address& me) {
  Fd fd(::open(job.file.c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
  if (!fd.valid()) return false;
  ::flock(fd.get(), LOCK_EX);
  const Listing now = parse(read_text(fd.get()));
  if (!now.has_header || now.generation != generation) return false;
  EMBER_CHECK(write_text(fd.get(), line_of(job.rank, me, generation)),
              "distributed::init: cannot append to the rendezvous file ", job.file, " (",
              std::strerror(errno), "; expected a writable path)");
  return true;
}

uint64_t fresh_generation() {
  std::random_device device;
  const uint64_t high = uint64_t(device()) << 32 | device();
  return high ^ uint64_t(now_ns()) ^ (uint64_t(::getpid()) << 17);
}

std::string advertised_host() {
  if (const char* host = std::getenv("EMBER_HOST"); host && *host) return host;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || !*name) return "127.0.0.1";
  return name;
}

// ---- connections ----

struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t generation = 0;
  int32_t rank = 0;
  int32_t world_size = 0;
};
enum Answer : int32_t { kAccepted = 0, kStale = 1, kOtherSize = 2, kTaken = 3 };
struct Reply {
  uint32_t magic = kMagic;
  int32_t answer = kAccepted;
  int32_t world_size = 0;
  int32_t rank = 0;
};

Fd listen_socket(int& port) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  const bool ok = s.valid() && ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::listen(s.get(), 128) == 0 &&
                  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0;
  EMBER_CHECK(ok, "distributed::init: cannot listen on a TCP port (", std::strerror(errno), ")");
  port = ntohs(a.sin_port);
  return s;
}

// Reads (or writes) exactly n bytes before the deadline; false on a closed socket, an error or
// the deadline.
bool io_exact(int fd, void* data, size_t n, bool write, const Deadline& d) {
  char* p = static_cast<char*>(data);
  for (size_t done = 0; done < n;) {
    const ssize_t k = write ? ::send(fd, p + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : ::recv(fd, p + done, n - done, MSG_DONTWAIT);
    if (k > 0) {
      done += size_t(k);
      continue;
    }
    if (k == 0 || !would_block()) return false;
    pollfd pf{fd, short(write ? POLLOUT : POLLIN), 0};
    if (::poll(&pf, 1, d.poll_ms()) == 0) return false;
  }
  return true;
}

// One attempt to connect to `to` before the deadline: a non-blocking socket, or an invalid one
// and `why`.
Fd connect_once(const Address& to, const Deadline& d, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(to.port);
  if (int rc = ::getaddrinfo(to.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    why = detail::concat("cannot resolve '", to.host, "': ", ::gai_strerror(rc),
                         "; set EMBER_HOST on that rank to an address");
    return {};
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(found, ::freeaddrinfo);
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid() ||
      (::connect(s.get(), found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS)) {
    why = std::strerror(errno);
    return {};
  }
  pollfd pf{s.get(), POLLOUT, 0};
  if (::poll(&pf, 1, d.poll_ms()) <= 0) {
    why = "no answer";
    return {};
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    why = std::strerror(err);
    return {};
  }
  return s;
}

// Connects to rank q at `to` and introduces this rank: the socket when q accepted, an invalid
// one and `why` when q is unreachable or says the generation is stale; throws when q says this
// job cannot work (another world_size, this rank taken).
Fd introduce(const Job& job, int q, const Address& to, uint64_t generation, const Deadline& d,
             std::string& why) {
  Fd s = connect_once(to, d, why);
  if (!s.valid()) return s;
  const Hello hello{kMagic, kVersion, generation, job.rank, job.size};
  Reply reply;
  if (!io_exact(s.get(), const_cast<Hello*>(&hello), sizeof hello, true, d) ||
      !io_exact(s.get(), &reply, sizeof reply, false, d) || reply.magic != kMagic) {
    why = "no answer from an ember rank there";
    return {};
  }
  EMBER_CHECK(reply.answer != kOtherSize, "distributed::init: rank ", q, " of the rendezvous ",
              job.file, " was started with world_size ", reply.world_size, ", this rank (",
              job.rank, ") with ", job.size,
              " (expected the same EMBER_WORLD_SIZE / InitOptions::world_size on every rank)");
  EMBER_CHECK(reply.answer != kTaken, "distributed::init: rank ", q, " already has a rank ",
              job.rank, " (two processes were started with EMBER_RANK=", job.rank,
              "; expected one process per rank)");
  if (reply.answer == kStale) {
    why = "it belongs to another generation of the file";
    return {};
  }
  return s;
}

// Accepts the ranks above this one until each has introduced itself; stale or foreign
// connections are answered and dropped.
void accept_higher(const Job& job, int listener, uint64_t generation, std::vector<Fd>& peers) {
  for (;;) {
    std::string missing;
    for (int q = job.rank + 1; q < job.size; ++q)
      if (!peers[q].valid()) missing += detail::concat(missing.empty() ? "" : ", ", q);
    if (missing.empty()) return;
    pollfd pf{listener, POLLIN, 0};
    if (job.deadline.passed() || ::poll(&pf, 1, job.deadline.poll_ms()) == 0)
      timed_out(job, detail::concat("rank(s) ", missing, " never connected to this rank"));
    Fd c(::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    Hello h;
    const Deadline d = Deadline::earlier(job.deadline, Deadline::after(kAnswerSeconds));
    if (!c.valid() || !io_exact(c.get(), &h, sizeof h, false, d) || h.magic != kMagic ||
        h.version != kVersion)
      continue;
    Reply r{kMagic, kAccepted, job.size, job.rank};
    if (h.generation != generation)
      r.answer = kStale;
    else if (h.world_size != job.size)
      r.answer = kOtherSize;
    else if (h.rank <= job.rank || h.rank >= job.size || peers[h.rank].valid())
      r.answer = kTaken;
    io_exact(c.get(), &r, sizeof r, true, d);
    EMBER_CHECK(r.answer != kOtherSize, "distributed::init: rank ", h.rank,
                " joined the rendezvous ", job.file, " with world_size ", h.world_size,
                " (expected ", job.size,
                ", this rank's: start every rank with the same EMBER_WORLD_SIZE)");
    EMBER_CHECK(r.answer != kTaken, "distributed::init: two processes joined the rendezvous ",
                job.file, " as rank ", h.rank, " (expected one process per EMBER_RANK)");
    if (r.answer == kAccepted) peers[h.rank] = std::move(c);
  }
}

// Rank r > 0: lists itself under the current header and connects to ranks 0 .. r-1 (rank 0
// first, which proves the generation current); returns the generation.
uint64_t connect_lower(const Job& job, const Address& me, std::vector<Fd>& peers) {
  bool listed = false;
  uint64_t listed_under = 0;
  for (;;) {
    const Listing l = read_listing(job);
    std::string waiting;
    if (!l.exists) {
      waiting = "the file does not exist yet (rank 0 creates it)";
    } else if (!l.has_header) {
      waiting = "the file has no header yet (rank 0 writes it)";
    } else if (!listed || listed_under != l.generation) {
      listed = append_line(job, l.generation, me);
      listed_under = l.generation;
      continue;
    } else {
      std::string unlisted;
      for (int q = 0; q < job.rank; ++q)
        if (!l.ranks.count(q)) unlisted += detail::concat(unlisted.empty() ? "" : ", ", q);
      if (unlisted.empty()) {
        const Address& zero = l.ranks.at(0);
        std::string why;
        Fd s = introduce(job, 0, zero, l.generation,
                         Deadline::earlier(job.deadline, Deadline::after(kAnswerSeconds)), why);
        if (s.valid()) {
          peers[0] = std::move(s);
          for (int q = 1; q < job.rank; ++q) {
            peers[q] = introduce(job, q, l.ranks.at(q), l.generation, job.deadline, why);
            if (!peers[q].valid() && job.deadline.passed())
              timed_out(job, detail::concat("rank ", q, " did not answer (", why, ")"));
            EMBER_CHECK(peers[q].valid(), "distributed::init: cannot connect to rank ", q, " at ",
                        l.ranks.at(q).host, ":", l.ranks.at(q).port, " (", why,
                        "; expected every rank reachable from every other)");
          }
          return l.generation;
        }
        waiting = detail::concat("rank 0 listed at ", zero.host, ":", zero.port,
                                 " did not take the connection (", why,
                                 "): an earlier job's file? waiting for rank 0 to start it over");
      } else {
        waiting = detail::concat("rank(s) ", unlisted, " not listed yet");
      }
    }
    if (job.deadline.passed()) timed_out(job, waiting);
    std::this_thread::sleep_for(std::chrono::milliseconds(kRetryMs));
  }
}

}  // namespace

std::vector<Fd> rendezvous(const JoinOptions& options) {
  Job job{options.rank, options.world_size, options.rendezvous_file, options.timeout_seconds,
          Deadline::after(options.timeout_seconds)};
  const std::filesystem::path folder = std::filesystem::absolute(job.file).parent_path();
  EMBER_CHECK(std::filesystem::is_directory(folder),
              "distributed::init: the folder of the "
              "rendezvous file ",
              job.file,
              " does not exist (expected a folder every rank can "
              "reach, e.g. on a shared filesystem)");
  int port = 0;
  Fd listener = listen_socket(port);
  const Address me{advertised_host(), port};
  std::vector<Fd> peers(size_t(job.size));
  uint64_t generation = 0;
  if (job.rank == 0) {
    generation = fresh_generation();
    start_listing(job, generation, me);
  } else {
    generation = connect_lower(job, me, peers);
  }
  accept_higher(job, listener.get(), generation, peers);
  for (Fd& p : peers) {
    const int one = 1;
    if (p.valid()) ::setsockopt(p.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return peers;
}

}  // namespace ember::distributed::tcp
