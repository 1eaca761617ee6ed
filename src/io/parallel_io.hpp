// src/io/parallel_io.hpp — the safetensors layer's file work on the CPU thread pool: the
// chunked checksum of format version 2, pread straight into memory, and the writer's
// hash-and-pwrite of the data section.
//
// Note [Chunked checksum]
// Version 1 files hold ember.data_checksum = XXH3-64 of the whole data section, which only
// one thread can compute. Version 2 files add ember.checksum_chunk = C (bytes) and store
// XXH3-64 of the array of little-endian u64 digests XXH3-64(chunk i), the chunks being the
// data section cut every C bytes (the last one shorter). Every chunk hashes on its own thread
// and any changed byte changes its chunk's digest, hence the stored value. Readers pick the
// scheme by the presence of ember.checksum_chunk, so version-1 files keep loading.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/device.hpp"

namespace ember::io::parallel {

/// The chunk size version-2 files are written with (16 MiB: a few per thread even for a
/// model of a few hundred MB, and large enough that one pread costs nothing extra).
inline constexpr uint64_t kChecksumChunk = uint64_t{16} << 20;

/// Reads [offset, offset + size) of `fd` into `dst` with pread, in chunks on the thread
/// pool; an error or a short file throws naming `path`.
void pread_all(int fd, void* dst, uint64_t offset, uint64_t size, const std::string& path);

/// The version-2 checksum (Note [Chunked checksum]) of [offset, offset + size) of `fd`, each
/// chunk read with pread into a per-thread buffer and hashed on the thread pool.
uint64_t chunked_file_checksum(int fd, uint64_t offset, uint64_t size, uint64_t chunk,
                               const std::string& path);

/// One destination in host memory of read_and_checksum: the data section's bytes
/// [begin, end) go to `dst`.
struct HostTarget {
  uint64_t begin, end;
  void* dst;
};

/// Note [One pass on the CPU] (parallel_io.cpp): reads the whole data section [data_offset,
/// data_offset + data_size) of `fd` once, with pread on the thread pool, each piece straight
/// into the targets it overlaps (bytes no target wants into a per-thread buffer), and hashes
/// each piece right after its read, while it is in cache. Returns the version-2 checksum;
/// an error throws naming `path`, with the targets partly written.
uint64_t read_and_checksum(int fd, uint64_t data_offset, uint64_t data_size,
                           std::vector<HostTarget> targets, uint64_t chunk,
                           const std::string& path);

/// The version-1 checksum: XXH3-64 of the whole range, on one thread.
uint64_t whole_file_checksum(int fd, uint64_t offset, uint64_t size, const std::string& path);

/// The format version ember's checkpoint writers produce: 2, or 1 when the environment sets
/// EMBER_CHECKPOINT_FORMAT=1 (files for readers older than version 2, and the test suite's
/// run of every checkpoint test on version-1 files). Read once per process.
int write_format_version();

/// One tensor's bytes in the data section being written.
struct Piece {
  const void* data;
  uint64_t size;
};

/// Writes the pieces back to back at `offset` of `fd` with pwrite and returns their
/// version-2 checksum; chunks are hashed and written on the thread pool. A failed write
/// throws naming `path` (a full disk says so).
uint64_t write_and_checksum(int fd, uint64_t offset, const std::vector<Piece>& pieces,
                            uint64_t chunk, const std::string& path);

/// The version-2 checksum from the chunks' digests (Note [Chunked checksum]).
uint64_t combine_digests(const std::vector<uint64_t>& digests);

/// One destination of stream_to_device: the data section's bytes [begin, end) go to `dst`,
/// contiguous device memory.
struct DeviceTarget {
  uint64_t begin, end;
  void* dst;
};

/// Note [Streaming onto the GPU] (parallel_io.cpp): reads with pread on the thread pool, into
/// pinned staging buffers, the chunks of the data section [data_offset, data_offset +
/// data_size) of `fd` that the targets need — every chunk when `digests` is given, each
/// chunk's XXH3-64 then going into it — and queues each piece's copy to its target on
/// `device` (of type `type`) through the device runtime's pinned staging. Returns when every
/// copy has completed.
void stream_to_device(DeviceType type, int device, int fd, uint64_t data_offset, uint64_t data_size,
                      std::vector<DeviceTarget> targets, uint64_t chunk,
                      std::vector<uint64_t>* digests, const std::string& path);

/// 16 lowercase hex digits.
std::string hex64(uint64_t v);

/// The error text of a failed write (errno): a full disk or a file-size limit is named as
/// such, with the guarantee that the target file was not touched.
std::string write_error_text(int err, const std::string& path);

}  // namespace ember::io::parallel
