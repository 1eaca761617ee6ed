// src/io/pth_format.hpp — the two formats inside a torch.save file, for src/io/pth.cpp: the zip
// container (pth_zip.cpp) and the restricted pickle interpreter (pth_pickle.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ember/dtype.hpp"

namespace ember::io::pth {

/// Throws ember::Error "load_pth: PATH: WHAT".
[[noreturn]] void fail(const std::string& path, const std::string& what);

// ---------------------------------------------------------------- zip

/// One entry of the central directory.
struct ZipEntry {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint32_t crc = 0;
  uint64_t compressed = 0, size = 0, local_offset = 0;
};

/// A zip archive open for reading with pread: the central directory is read and checked when
/// opened (every offset and size inside the file), an entry's local header when it is read.
class ZipArchive {
 public:
  explicit ZipArchive(const std::string& path);
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  /// Reads the entry's `size` bytes into `dst` (inflating a deflated one), checking its CRC-32
  /// when `verify_crc`.
  void read(const ZipEntry& e, void* dst, bool verify_crc) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0, directory_offset_ = 0;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, size_t> by_name_;
  void read_directory();
};

// ---------------------------------------------------------------- pickle

/// The element types torch storages hold that ember reads (Note [Torch dtypes] in pth.cpp).
struct TorchType {
  const char* dtype;    // torch's name: "float32"
  const char* storage;  // its legacy storage class: "FloatStorage"
  size_t size;          // bytes per element in the file
  DType ember;          // what it loads as (widened when larger than `size`)
};
/// The table; index 0 is float32. nullptr when `name` is no supported dtype / storage class.
const TorchType* torch_type_by_dtype(const std::string& name);
const TorchType* torch_type_by_storage(const std::string& name);
/// The byte type of torch.UntypedStorage.
const TorchType* torch_byte_type();

/// A storage a persistent id names: ARCHIVE/data/KEY.
struct StorageRef {
  std::string key;
  const TorchType* type = nullptr;
  uint64_t bytes = 0;  // its zip entry's size
  const ZipEntry* entry = nullptr;
};

/// A tensor a rebuild function made: a view of a storage (checked against it by pth.cpp).
struct TensorRef {
  uint32_t storage = 0;
  const TorchType* type = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> size, stride;
};

/// One value of the unpickled object, in an arena (Unpickled::objects), so that shared and
/// even cyclic references (the memo allows them) cost nothing and leak nothing.
struct Object {
  enum class Kind : uint8_t {
    none,
    boolean,
    integer,
    floating,
    string,
    tuple,
    list,
    dict,
    global,
    storage,
    tensor
  };
  Kind kind = Kind::none;
  int64_t i = 0;  // boolean, integer; global: its id; storage, tensor: their index
  double f = 0;
  std::string s;                // string; global: "module.name"
  std::vector<uint32_t> items;  // tuple, list; dict: key, value, key, value, ...
  std::unordered_map<std::string, uint32_t> index;  // dict: key → its position in items
};

struct Unpickled {
  std::vector<Object> objects;
  uint32_t root = 0;
  std::vector<StorageRef> storages;
  std::vector<TensorRef> tensors;
};

/// Resolves a persistent id's storage key to its zip entry (nullptr: no such entry).
using FindStorage = std::function<const ZipEntry*(const std::string& key)>;

/// Runs the restricted interpreter over `bytes` (the data.pkl entry `where` of `path`).
Unpickled unpickle(const std::string& bytes, const std::string& path, const std::string& where,
                   const FindStorage& find_storage);

/// "tuple", "dict", ... for messages.
const char* kind_name(Object::Kind k);

}  // namespace ember::io::pth
