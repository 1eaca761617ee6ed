// src/io/parallel_io.cpp — chunked checksums, parallel pread and the parallel writer of the
// safetensors layer (src/io/parallel_io.hpp, Note [Chunked checksum]).
#include "io/parallel_io.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "backend/device_runtime.hpp"
#include "core/thread_pool.hpp"
#include "ember/error.hpp"

namespace ember::io::parallel {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  ember::detail::throw_error(ember::detail::concat("safetensors: ", path, ": ", what));
}

// pread until `size` bytes are in, retrying EINTR; a short file or an error throws.
void pread_exact(int fd, void* dst, uint64_t size, uint64_t offset, const std::string& path) {
  auto* p = static_cast<uint8_t*>(dst);
  while (size > 0) {
    const ssize_t n =
        ::pread(fd, p, std::min<uint64_t>(size, uint64_t{1} << 30), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail(path, n < 0 ? std::string("read failed (") + std::strerror(errno) + ")"
                       : std::string("read failed (the file shrank while being read)"));
    p += n;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
}

uint64_t chunk_count(uint64_t size, uint64_t chunk) { return (size + chunk - 1) / chunk; }

// An XXH3 streaming state, freed at scope exit (also when a read or write throws).
struct Hasher {
  XXH3_state_t* state = XXH3_createState();
  Hasher() { XXH3_64bits_reset(state); }
  ~Hasher() { XXH3_freeState(state); }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  void reset() { XXH3_64bits_reset(state); }
  void update(const void* p, uint64_t n) { XXH3_64bits_update(state, p, n); }
  uint64_t digest() const { return XXH3_64bits_digest(state); }
};

}  // namespace

uint64_t combine_digests(const std::vector<uint64_t>& digests) {
  // The digests as little-endian bytes (the host is little-endian: safetensors.cpp asserts it).
  return XXH3_64bits(digests.data(), digests.size() * sizeof(uint64_t));
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string write_error_text(int err, const std::string& path) {
  if (err == ENOSPC || err == EDQUOT || err == EFBIG)
    return ember::detail::concat(
        "write failed (", std::strerror(err),
        "): the disk is full or a size limit was reached; nothing was written to ", path,
        " (an existing file there is unchanged); free space and save again");
  return ember::detail::concat("write failed (", std::strerror(err), ")");
}

void pread_all(int fd, void* dst, uint64_t offset, uint64_t size, const std::string& path) {
  constexpr uint64_t kPiece = uint64_t{8} << 20;
  const int64_t pieces = static_cast<int64_t>(chunk_count(size, kPiece));
  core::parallel_for(pieces, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t at = static_cast<uint64_t>(i) * kPiece;
      pread_exact(fd, static_cast<uint8_t*>(dst) + at, std::min(kPiece, size - at), offset + at,
                  path);
    }
  });
}

uint64_t chunked_file_checksum(int fd, uint64_t offset, uint64_t size, uint64_t chunk,
                               const std::string& path) {
  const uint64_t n = chunk_count(size, chunk);
  std::vector<uint64_t> digests(n);
  constexpr uint64_t kBuffer = uint64_t{2} << 20;  // a thread's read buffer: stays in cache
  core::parallel_for(static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> buf(std::min(kBuffer, std::max<uint64_t>(size, 1)));
    Hasher h;
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t at = static_cast<uint64_t>(i) * chunk, len = std::min(chunk, size - at);
      h.reset();
      for (uint64_t done = 0; done < len;) {
        const uint64_t piece = std::min<uint64_t>(buf.size(), len - done);
        pread_exact(fd, buf.data(), piece, offset + at + done, path);
        h.update(buf.data(), piece);
        done += piece;
      }
      digests[static_cast<size_t>(i)] = h.digest();
    }
  });
  return combine_digests(digests);
}

// Note [One pass on the CPU]
// A CPU load that verifies reads each byte of the file once: a pool thread preads a 1 MiB
// piece of its chunk straight into the targets the piece overlaps (bytes between targets into
// a thread buffer), then hashes the piece from there while it is still in the core's cache.
// The two-pass load (hash the file through a small buffer, then pread it into place) read the
// page cache twice; this reads it once and writes each destination once. The targets must be
// memory that may hold unverified bytes: fresh buffers that SafetensorsFile::load_into
// exchanges into the parameters' storages once the whole file checks out (Note [Loading by
// exchange] in safetensors.cpp), or the tensors of a module being built (load_model).
namespace {
// Read, then hashed while in L2 (on the 2-core VM 256 KiB loaded 1 GB in 0.069 s, 1 MiB in
// 0.10-0.13 s, 4 MiB in 0.10 s: larger pieces are evicted before they are hashed).
constexpr uint64_t kHashPiece = uint64_t{256} << 10;
constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

// Asks for transparent huge pages over the whole 2 MiB pages inside each target, before the
// reads first touch them: a fresh buffer then costs one fault per 2 MiB instead of one per
// 4 KiB (on the 2-core VM a first load of 1 GB took 3.3 s with 4 KiB faults and 0.10 s
// with huge pages), and the copy into it misses the TLB less. Memory already touched keeps
// its pages (khugepaged may merge them later); with THP disabled this does nothing.
void advise_huge_pages(const std::vector<HostTarget>& targets) {
  for (const HostTarget& t : targets) {
    const auto at = reinterpret_cast<uintptr_t>(t.dst);
    const uintptr_t lo = (at + kHugePage - 1) & ~(kHugePage - 1);
    const uintptr_t hi = (at + (t.end - t.begin)) & ~(kHugePage - 1);
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
}
}  // namespace

uint64_t read_and_checksum(int fd, uint64_t data_offset, uint64_t data_size,
                           std::vector<HostTarget> targets, uint64_t chunk,
                           const std::string& path) {
  std::erase_if(targets, [](const HostTarget& t) { return t.end <= t.begin; });
  std::sort(targets.begin(), targets.end(),
            [](const HostTarget& a, const HostTarget& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < targets.size(); ++k)
    EMBER_ASSERT(targets[k - 1].end <= targets[k].begin, "read_and_checksum: targets overlap");
  advise_huge_pages(targets);
  const uint64_t n = chunk_count(data_size, chunk);
  std::vector<uint64_t> digests(n);
  core::parallel_for(static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> scratch;  // the bytes no target wants, allocated when first needed
    std::vector<std::pair<const uint8_t*, uint64_t>> spans;
    Hasher h;
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t lo = static_cast<uint64_t>(i) * chunk, hi = std::min(data_size, lo + chunk);
      h.reset();
      for (uint64_t at = lo; at < hi; at += kHashPiece) {
        const uint64_t stop = std::min(hi, at + kHashPiece);
        // The first target ending after `at` (targets are sorted and disjoint).
        size_t k = static_cast<size_t>(
            std::partition_point(targets.begin(), targets.end(),
                                 [at](const HostTarget& t) { return t.end <= at; }) -
            targets.begin());
        spans.clear();
        for (uint64_t pos = at; pos < stop;) {
          uint8_t* dst = nullptr;
          uint64_t len = 0;
          if (k < targets.size() && targets[k].begin <= pos) {
            len = std::min(targets[k].end, stop) - pos;
            dst = static_cast<uint8_t*>(targets[k].dst) + (pos - targets[k].begin);
            if (pos + len == targets[k].end) ++k;
          } else {
            len = (k < targets.size() ? std::min(targets[k].begin, stop) : stop) - pos;
            if (scratch.empty()) scratch.resize(kHashPiece);
            dst = scratch.data() + (pos - at);
          }
          pread_exact(fd, dst, len, data_offset + pos, path);
          spans.emplace_back(dst, len);
          pos += len;
        }
        for (const auto& [p, len] : spans) h.update(p, len);
      }
      digests[static_cast<size_t>(i)] = h.digest();
    }
  });
  return combine_digests(digests);
}

int write_format_version() {
  static const int version = [] {
    const char* v = std::getenv("EMBER_CHECKPOINT_FORMAT");
    return v && std::string(v) == "1" ? 1 : 2;
  }();
  return version;
}

uint64_t whole_file_checksum(int fd, uint64_t offset, uint64_t size, const std::string& path) {
  // Hashed from pread into a small buffer that stays in cache: on the benchmark VM walking
  // 1 GB of freshly mapped page cache hashed at about half the speed of pread + hash.
  std::vector<uint8_t> buf(std::min<uint64_t>(uint64_t{8} << 20, std::max<uint64_t>(size, 1)));
  Hasher h;
  for (uint64_t done = 0; done < size;) {
    const uint64_t piece = std::min<uint64_t>(buf.size(), size - done);
    pread_exact(fd, buf.data(), piece, offset + done, path);
    h.update(buf.data(), piece);
    done += piece;
  }
  return h.digest();
}

// Note [Writeback behind the writes]
// A save is done when fsync returns, and the disk, not the copy into the page cache, is
// what takes the time. Left alone, the kernel starts writing a 1 GB file back only at the
// fsync (the dirty bytes stay under its background threshold), so the disk idles while the
// pages fill. Each chunk therefore asks for its writeback as soon as it is written
// (sync_file_range(SYNC_FILE_RANGE_WRITE): start, do not wait), and the final fsync finds
// little left; write_safetensors also reserves the file's blocks with fallocate first, so
// the writes do not allocate as they go and a full disk is found before any data is written.
// On the 2-core VM (1.074 GB, medians of 5): 1.15-1.27 s without either, 1.06-1.18 with the
// writeback alone, 1.13-1.15 with fallocate alone, 1.02 s with both.
uint64_t write_and_checksum(int fd, uint64_t offset, const std::vector<Piece>& pieces,
                            uint64_t chunk, const std::string& path) {
  // Where each piece starts in the data section.
  std::vector<uint64_t> starts(pieces.size());
  uint64_t size = 0;
  for (size_t i = 0; i < pieces.size(); ++i) {
    starts[i] = size;
    size += pieces[i].size;
  }
  const uint64_t n = chunk_count(size, chunk);
  std::vector<uint64_t> digests(n);
  core::parallel_for(static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
    Hasher h;
    {
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t lo = static_cast<uint64_t>(i) * chunk, hi = std::min(size, lo + chunk);
        h.reset();
        // The pieces overlapping [lo, hi): the first is the last one starting at or before lo.
        size_t p = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), lo) -
                                       starts.begin());
        p = p == 0 ? 0 : p - 1;
        for (uint64_t at = lo; at < hi; ++p) {
          if (pieces[p].size == 0) continue;
          const uint64_t from = at - starts[p];
          const uint64_t len = std::min(pieces[p].size - from, hi - at);
          const auto* src = static_cast<const uint8_t*>(pieces[p].data) + from;
          h.update(src, len);
          for (uint64_t done = 0; done < len;) {
            const ssize_t w =
                ::pwrite(fd, src + done, len - done, static_cast<off_t>(offset + at + done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) fail(path, write_error_text(errno, path));
            done += static_cast<uint64_t>(w);
          }
          at += len;
        }
        // Note [Writeback behind the writes]: this chunk starts on its way to the disk now.
        ::sync_file_range(fd, static_cast<off_t>(offset + lo), static_cast<off_t>(hi - lo),
                          SYNC_FILE_RANGE_WRITE);
        digests[static_cast<size_t>(i)] = h.digest();
      }
    }
  });
  return combine_digests(digests);
}

// Note [Streaming onto the GPU]
// A GPU load reads each piece of the file once: a pool thread preads 4 MiB into a pinned
// staging buffer, hashes it while it is in cache, and queues its copy to the device; the
// thread's second buffer is filled while the first one's copy runs (a thread owns a pair of
// buffers while it works, and waits for a buffer's last copy before refilling it). No
// pageable copy of the file is made, and staging is bounded: two 4 MiB pinned buffers per
// pool thread, allocated on first use and kept for later loads (128 MiB with 16 threads).
// Pieces are copied to the targets they overlap; with `digests` every chunk is read (the
// checksum covers the whole data section), otherwise only the chunks the targets need.
namespace {

constexpr uint64_t kStagingPiece = uint64_t{4} << 20;

// The process's pinned staging buffers of one device type (each with its own copy slot: Note
// [Pinned slots are leased] in src/backend/device_runtime.cpp), in pairs leased to one thread
// at a time. One pool per device type: a buffer copies through the runtime it was made by, so
// a CPU load's buffers (plain memory, copies by memcpy) must never serve a GPU load, which they
// did while the pool was shared (a segmentation fault on the H200 when a CPU stream preceded a
// GPU one in the same process).
class Staging {
 public:
  static Staging& get(DeviceType type) {
    static Staging* pools[kNumDeviceTypes] = {};  // intentionally leaked: the runtime may go first
    static std::mutex made;
    const auto t = static_cast<size_t>(type);
    EMBER_ASSERT(t < static_cast<size_t>(kNumDeviceTypes), "Staging: device type out of range");
    std::lock_guard<std::mutex> lock(made);
    if (!pools[t]) pools[t] = new Staging(type);
    return *pools[t];
  }
  // A free pair (made on first need; at most 127 pairs).
  int lease() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (free_.empty() && buffers_.size() < 254) {
      const int pair = static_cast<int>(buffers_.size() / 2);
      for (int k = 0; k < 2; ++k) buffers_.emplace_back(type_, kStagingPiece);
      return pair;
    }
    available_.wait(lock, [&] { return !free_.empty(); });
    const int pair = free_.back();
    free_.pop_back();
    return pair;
  }
  void release(int pair) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      free_.push_back(pair);
    }
    available_.notify_one();
  }
  backend::PinnedStaging& buffer(int k) {
    std::lock_guard<std::mutex> lock(mutex_);
    return buffers_[static_cast<size_t>(k)];
  }
  int size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(buffers_.size());
  }

 private:
  explicit Staging(DeviceType type) : type_(type) {}
  DeviceType type_;
  std::mutex mutex_;
  std::condition_variable available_;
  std::deque<backend::PinnedStaging> buffers_;  // a deque: references stay valid as it grows
  std::vector<int> free_;
};

struct Lease {
  Staging& staging;
  int pair;
  explicit Lease(Staging& s) : staging(s), pair(s.lease()) {}
  ~Lease() { staging.release(pair); }
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
};

}  // namespace

void stream_to_device(DeviceType type, int device, int fd, uint64_t data_offset, uint64_t data_size,
                      std::vector<DeviceTarget> targets, uint64_t chunk,
                      std::vector<uint64_t>* digests, const std::string& path) {
  std::sort(targets.begin(), targets.end(),
            [](const DeviceTarget& a, const DeviceTarget& b) { return a.begin < b.begin; });
  const uint64_t n = chunk_count(data_size, chunk);
  std::vector<uint64_t> work;  // the chunks to read
  if (digests) {
    digests->assign(n, 0);
    for (uint64_t i = 0; i < n; ++i) work.push_back(i);
  } else {
    for (const DeviceTarget& t : targets)
      for (uint64_t i = t.begin / chunk; t.end > t.begin && i * chunk < t.end; ++i)
        if (work.empty() || work.back() < i) work.push_back(i);
  }
  Staging& staging = Staging::get(type);
  auto run = [&](int64_t begin, int64_t end) {
    Lease lease(staging);
    int turn = 0;
    for (int64_t w = begin; w < end; ++w) {
      const uint64_t i = work[static_cast<size_t>(w)];
      const uint64_t lo = i * chunk, hi = std::min(data_size, lo + chunk);
      Hasher h;
      for (uint64_t at = lo; at < hi; at += kStagingPiece) {
        backend::PinnedStaging& staged = staging.buffer(2 * lease.pair + turn);
        turn ^= 1;
        auto* buf = static_cast<uint8_t*>(staged.data());
        staged.wait(device);  // its previous copy has finished
        const uint64_t len = std::min(kStagingPiece, hi - at);
        pread_exact(fd, buf, len, data_offset + at, path);
        if (digests) h.update(buf, len);
        // The targets overlapping [at, at + len): from the last one starting at or before `at`.
        auto t = std::upper_bound(targets.begin(), targets.end(), at,
                                  [](uint64_t v, const DeviceTarget& x) { return v < x.begin; });
        if (t != targets.begin()) --t;
        for (; t != targets.end() && t->begin < at + len; ++t) {
          const uint64_t from = std::max(at, t->begin), to = std::min(at + len, t->end);
          if (from >= to) continue;
          staged.copy_to_device(device, static_cast<uint8_t*>(t->dst) + (from - t->begin),
                                from - at, to - from);
        }
      }
      if (digests) (*digests)[i] = h.digest();
    }
  };
  auto wait_all = [&] {
    for (int k = 0, n = staging.size(); k < n; ++k) staging.buffer(k).wait(device);
  };
  try {
    core::parallel_for(static_cast<int64_t>(work.size()), 1, run);
  } catch (...) {
    wait_all();  // no copy may still write into a target the caller is about to free
    throw;
  }
  wait_all();
}

}  // namespace ember::io::parallel
