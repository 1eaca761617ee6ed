// ember/io/safetensors.hpp — reading and writing safetensors files (ARCHITECTURE §7).
//
// Layout: u64 little-endian header length N, N bytes of UTF-8 JSON (padded with spaces
// to a multiple of 8), then the tensors' raw little-endian bytes back to back. Writes are
// atomic (temporary file, fsync, rename, fsync of the folder). Reading validates everything
// before a single byte is trusted and reads with pread, never a mapping (so network file
// systems are safe); every problem is an ember::Error naming the file and what is wrong.
// ember's files carry a checksum of the data, hashed in chunks on every thread (format
// version 2; version-1 files, hashed whole, still load).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::io {

/// "F32", "F64", "F16", "BF16", "I32", "I64", "U8", "BOOL".
std::string safetensors_dtype_name(DType t);

/// One tensor entry of a file: name, dtype, shape, and its byte range in the data section.
struct TensorEntry {
  std::string name{};
  DType dtype = DType::f32;
  Shape shape{};
  uint64_t begin = 0, end = 0;  // offsets into the data section
};

/// A validated safetensors file, open for reading with pread (never mapped). read_into reads
/// straight into host memory of the stored dtype (one copy, in parallel); load_into reads a
/// verified file once, in parallel, hashing as it goes.
class SafetensorsFile {
 public:
  /// Opens and validates `path` (see ARCHITECTURE §7 for the checks, in order).
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Entries in file order (ascending offsets).
  const std::vector<TensorEntry>& entries() const { return entries_; }
  const TensorEntry* find(const std::string& name) const;
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  uint64_t data_size() const { return data_size_; }
  uint64_t file_size() const { return file_size_; }
  /// Reads an entry's raw bytes (e.end - e.begin of them) into `dst`.
  void read_bytes(const TensorEntry& e, void* dst) const;
  /// Deprecated since files are no longer mapped (Note [No mapping] in src/io/safetensors.cpp):
  /// an entry's raw bytes, read once with read_bytes into a buffer this object keeps, so the
  /// pointer stays valid while the object lives, as the mapping's did.
  [[deprecated("use read_bytes(entry, dst)")]] const uint8_t* bytes(const TensorEntry& e) const;
  /// The checksum chunk of a version-2 file (ember.checksum_chunk); 0 for a whole-data one.
  uint64_t checksum_chunk() const { return checksum_chunk_; }
  /// A new tensor with the entry's values on `device` (dtype as stored).
  Tensor read(const std::string& name, Device device = Device::cpu()) const;
  /// Copies the entry into `dst` (same shape; dtype converted when different; dst keeps
  /// its buffer). One read straight into dst's memory when it is contiguous host memory of
  /// the stored dtype.
  void read_into(const std::string& name, Tensor& dst) const;
  /// Checks `ember.data_checksum` when present (chunked on the thread pool for version-2
  /// files); throws on mismatch.
  void verify_checksum() const;
  /// read_into for every (name, destination) of `plan`, after checking the checksum when
  /// `verify` (nothing is written unless the whole file checks out). Host destinations of a
  /// version-2 file are loaded in one pass: the file is read once, in parallel, into fresh
  /// buffers while it is hashed, and once it checks out the buffers are exchanged into the
  /// destinations' storages (data_ptr() changes; views sharing the storage see the new
  /// values) or copied into destinations that are not their whole storage (Note [Loading by
  /// exchange] in src/io/safetensors.cpp; peak memory: one extra copy of the destinations).
  /// Contiguous GPU destinations of the stored dtype are streamed: the file is read once, in
  /// parallel, into pinned staging buffers whose copies to the device overlap the reading and
  /// hashing (verified into fresh device buffers that are copied into place at the end; when
  /// the device has no room for them, verified first). Staging is bounded: 8 MiB per CPU
  /// thread. With `fresh_destinations` the destinations are new tensors nobody has seen
  /// (load_model): they are read into directly while hashing, and hold part of the file when
  /// the checksum then fails (the caller drops them). Never maps the file.
  void load_into(const std::vector<std::pair<std::string, Tensor>>& plan, bool verify,
                 bool fresh_destinations = false) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  uint64_t data_offset_ = 0;  // 8 + header length
  uint64_t data_size_ = 0;
  uint64_t checksum_chunk_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorEntry> entries_;
  // bytes()' buffers, by the entry's [begin, end) (the deprecated pointer API).
  mutable std::mutex bytes_mutex_;
  mutable std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<uint8_t[]>> bytes_buffers_;
  void check_digest(uint64_t digest) const;  // against ember.data_checksum
  // load_into's two halves: GPU destinations (verifying unless `verified`), and host ones in
  // one verifying pass (false, having read nothing, when the buffers do not fit).
  void stream_onto_device(const std::vector<std::pair<const TensorEntry*, Tensor>>& streamed,
                          bool verified, bool fresh_destinations) const;
  bool load_host_in_one_pass(const std::vector<std::pair<const TensorEntry*, Tensor>>& host,
                             bool fresh_destinations) const;
};

/// Writes tensors (any device; written in falling element-size order, no holes) and
/// string metadata atomically to `path`, adding `format: pt`, `ember.data_checksum` and
/// `ember.checksum_chunk` (hashing and writing on the thread pool). A full disk is an error
/// that says so; the target is then unchanged.
/// Duplicate names are refused; tensors sharing one storage range (tied weights) must be
/// passed once. Writes to one file land in the order they were issued: this one waits for the
/// earlier ones to the same file, from any thread (save_checkpoint_async's included).
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       std::map<std::string, std::string> metadata);

/// Writes `bytes` to `path` atomically, as write_safetensors writes (temporary file in the same
/// folder, fsync, rename, fsync of the folder; in issue order with other writes to `path`):
/// e.g. a sharded checkpoint's model.safetensors.index.json.
void write_file_atomically(const std::string& path, const std::string& bytes);

/// XXH3-64 of `size` bytes as 16 lowercase hex digits (the checksum format).
std::string checksum_hex(const void* data, size_t size);

}  // namespace ember::io
