// src/io/parallel_io.cpp — chunked checksums, parallel pread and the parallel writer of the
// safetensors layer (src/io/parallel_io.hpp, Note [Chunked checksum]).
#include "io/parallel_io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cpu/thread_pool.hpp"
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

uint64_t combine(const std::vector<uint64_t>& digests) {
  // The digests as little-endian bytes (the host is little-endian: safetensors.cpp asserts it).
  return XXH3_64bits(digests.data(), digests.size() * sizeof(uint64_t));
}

}  // namespace

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
  cpu::parallel_for(pieces, 1, [&](int64_t begin, int64_t end) {
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
  cpu::parallel_for(static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
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
  return combine(digests);
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
  cpu::parallel_for(static_cast<int64_t>(n), 1, [&](int64_t begin, int64_t end) {
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
        digests[static_cast<size_t>(i)] = h.digest();
      }
    }
  });
  return combine(digests);
}

}  // namespace ember::io::parallel
