// src/io/safetensors.cpp — the safetensors reader (mmap, validate everything, one copy out)
// and the atomic writer (temporary file, streamed checksum, fsync, rename, fsync folder).
#include "ember/io/safetensors.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/make.hpp"
#include "ember/autograd.hpp"
#include "ops/tensor.hpp"

namespace ember::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;  // 100 MB, as ARCHITECTURE §7
constexpr const char* kChecksumKey = "ember.data_checksum";

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  detail::throw_error(detail::concat("safetensors: ", path, ": ", what));
}

std::string errno_text() { return std::strerror(errno); }

bool parse_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kTable[] = {
      {"F32", DType::f32}, {"F64", DType::f64}, {"F16", DType::f16}, {"BF16", DType::bf16},
      {"I32", DType::i32}, {"I64", DType::i64}, {"U8", DType::u8},   {"BOOL", DType::boolean}};
  for (auto& [name, t] : kTable)
    if (s == name) {
      *out = t;
      return true;
    }
  return false;
}

}  // namespace

std::string safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
  }
  return "?";
}

std::string checksum_hex(const void* data, size_t size) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(data, size)));
  return buf;
}

// ---------------------------------------------------------------- reading

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, "cannot open (" + errno_text() + ")");
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail(path, "cannot stat (" + errno_text() + ")");
    if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
    file_size_ = static_cast<uint64_t>(st.st_size);
    if (file_size_ < 8)
      fail(path, detail::concat("not a safetensors file (", file_size_,
                                " bytes; expected an 8-byte header length first)"));
    map_ = ::mmap(nullptr, file_size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd_, 0);
    if (map_ == MAP_FAILED) {
      map_ = nullptr;
      fail(path, "cannot map (" + errno_text() + ")");
    }
    const auto* base = static_cast<const uint8_t*>(map_);
    uint64_t n = 0;
    std::memcpy(&n, base, 8);
    if (n > kMaxHeaderBytes)
      fail(path, detail::concat("header length ", n,
                                " is over the 100 MB limit (not a safetensors file, or corrupt)"));
    if (n > file_size_ - 8)
      fail(path, detail::concat("header length ", n, " runs past the end of the file (", file_size_,
                                " bytes; truncated or not a safetensors file)"));
    if (n < 2 || base[8] != '{')
      fail(path, "not a safetensors file (the header does not start with '{')");
    data_ = base + 8 + n;
    data_size_ = file_size_ - 8 - n;

    // Parse with a callback that rejects duplicate keys (nlohmann would keep the last).
    std::vector<std::set<std::string>> seen;
    std::string duplicate;
    auto cb = [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::object_start) seen.emplace_back();
      if (event == json::parse_event_t::object_end && !seen.empty()) seen.pop_back();
      if (event == json::parse_event_t::key && !seen.empty() && duplicate.empty()) {
        const std::string k = parsed.get<std::string>();
        if (!seen.back().insert(k).second) duplicate = k;
      }
      (void)depth;
      return true;
    };
    json header;
    try {
      header = json::parse(reinterpret_cast<const char*>(base + 8),
                           reinterpret_cast<const char*>(base + 8 + n), cb);
    } catch (const json::exception& e) {
      fail(path, std::string("the header is not valid JSON (") + e.what() + ")");
    }
    if (!duplicate.empty()) fail(path, "duplicate name '" + duplicate + "' in the header");
    if (!header.is_object()) fail(path, "the header is not a JSON object");

    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const json& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) fail(path, "__metadata__ is not an object of strings");
        for (auto m = v.begin(); m != v.end(); ++m) {
          if (!m.value().is_string())
            fail(path, "metadata value of '" + m.key() + "' is not a string (got " +
                           m.value().dump().substr(0, 60) + ")");
          metadata_[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
          !v.contains("data_offsets"))
        fail(path, "entry '" + name + "' needs dtype, shape and data_offsets");
      TensorEntry e;
      e.name = name;
      if (!v["dtype"].is_string() || !parse_dtype(v["dtype"].get<std::string>(), &e.dtype))
        fail(path, "entry '" + name + "' has unknown dtype " + v["dtype"].dump().substr(0, 40) +
                       " (expected F32, F64, F16, BF16, I32, I64, U8 or BOOL)");
      const json& shape = v["shape"];
      if (!shape.is_array() || shape.size() > static_cast<size_t>(kMaxRank))
        fail(path, detail::concat("entry '", name, "' has a bad shape (expected a list of at most ",
                                  kMaxRank, " sizes)"));
      uint64_t numel = 1;
      for (const json& d : shape) {
        if (!d.is_number_unsigned())
          fail(path, "entry '" + name + "' has a negative or non-integer size in its shape");
        const uint64_t s = d.get<uint64_t>();
        if (s > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, s, &numel))
          fail(path, "entry '" + name + "': the shape's element count overflows");
        e.shape.push_back(static_cast<int64_t>(s));
      }
      uint64_t bytes = 0;
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(element_size(e.dtype)), &bytes))
        fail(path, "entry '" + name + "': the byte size overflows");
      const json& off = v["data_offsets"];
      if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
          !off[1].is_number_unsigned())
        fail(path, "entry '" + name + "' has bad data_offsets (expected [begin, end])");
      e.begin = off[0].get<uint64_t>();
      e.end = off[1].get<uint64_t>();
      if (e.end < e.begin)
        fail(path, detail::concat("entry '", name, "' ends before it begins (", e.begin, " > ",
                                  e.end, ")"));
      if (e.end > data_size_)
        fail(path, detail::concat("entry '", name, "' runs past the data (ends at ", e.end,
                                  ", data is ", data_size_, " bytes; truncated file?)"));
      if (e.end - e.begin != bytes)
        fail(path, detail::concat("entry '", name, "' has ", e.end - e.begin, " bytes but shape ",
                                  e.shape.to_string(), " ", safetensors_dtype_name(e.dtype),
                                  " needs ", bytes));
      entries_.push_back(std::move(e));
    }
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
    uint64_t at = 0;
    for (const TensorEntry& e : entries_) {
      if (e.begin < at)
        fail(path, detail::concat("entry '", e.name, "' overlaps the previous tensor (starts at ",
                                  e.begin, ", previous ends at ", at, ")"));
      if (e.begin > at)
        fail(path, detail::concat("a hole of ", e.begin - at, " bytes before entry '", e.name,
                                  "' (offsets must be back to back)"));
      at = e.end;
    }
    if (at != data_size_)
      fail(path, detail::concat("the data section has ", data_size_ - at,
                                " bytes after the last tensor (a hole)"));

    auto version = metadata_.find("ember.format_version");
    if (version != metadata_.end() && version->second != "1")
      fail(path, "ember.format_version " + version->second +
                     " is not supported (this ember reads version 1)");
    auto kind = metadata_.find("ember.kind");
    if (kind != metadata_.end() && kind->second != "model" && kind->second != "checkpoint")
      fail(path, "unknown ember.kind '" + kind->second + "' (expected model or checkpoint)");
  } catch (...) {
    if (map_) ::munmap(map_, file_size_);
    ::close(fd_);
    map_ = nullptr;
    fd_ = -1;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, file_size_);
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::verify_checksum() const {
  auto it = metadata_.find(kChecksumKey);
  if (it == metadata_.end()) return;
  // Hashed from read() calls into a small buffer that stays in cache, not from the mapping:
  // on the benchmark VM walking 1 GB of freshly mapped page cache hashed at about half the
  // speed of pread + hash (TLB misses under nested paging; bench/bench_checkpoint.cpp).
  constexpr size_t kChunk = 8u << 20;
  std::vector<uint8_t> buf(std::min<uint64_t>(kChunk, std::max<uint64_t>(data_size_, 1)));
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  const uint64_t start = static_cast<uint64_t>(data_ - static_cast<const uint8_t*>(map_));
  for (uint64_t done = 0; done < data_size_;) {
    const ssize_t n = ::pread(fd_, buf.data(), std::min<uint64_t>(buf.size(), data_size_ - done),
                              static_cast<off_t>(start + done));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      XXH3_freeState(state);
      fail(path_, "read failed while checking the checksum (" +
                      (n < 0 ? errno_text() : std::string("file shrank")) + ")");
    }
    XXH3_64bits_update(state, buf.data(), static_cast<size_t>(n));
    done += static_cast<uint64_t>(n);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits_digest(state)));
  XXH3_freeState(state);
  const std::string got = hex;
  if (got != it->second)
    fail(path_, "checksum mismatch (data hashes to " + got + ", header says " + it->second +
                    "): the file is corrupt; restore it from a good copy");
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  for (const TensorEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

namespace {
// A host tensor viewing (or, when misaligned, copying) an entry's bytes.
Tensor host_view(const SafetensorsFile& f, const TensorEntry& e) {
  const uint8_t* p = f.bytes(e);
  const size_t bytes = e.end - e.begin;
  if (reinterpret_cast<uintptr_t>(p) % element_size(e.dtype) == 0) {
    return core::wrap_storage(
        std::shared_ptr<Storage>(Storage::wrap_external(const_cast<uint8_t*>(p), bytes)), e.shape,
        e.dtype);
  }
  Tensor t =
      core::make_tensor(e.shape, e.dtype, Device::cpu());  // unaligned data from another writer
  if (bytes) std::memcpy(t.data_ptr(), p, bytes);
  return t;
}
}  // namespace

Tensor SafetensorsFile::read(const std::string& name, Device device) const {
  const TensorEntry* e = find(name);
  if (!e) fail(path_, "no tensor named '" + name + "'");
  Tensor out = core::make_tensor(e->shape, e->dtype, device);
  read_into(name, out);
  return out;
}

void SafetensorsFile::read_into(const std::string& name, Tensor& dst) const {
  const TensorEntry* e = find(name);
  if (!e) fail(path_, "no tensor named '" + name + "'");
  EMBER_CHECK(dst.defined() && dst.shape() == e->shape, "safetensors: ", path_, ": tensor '", name,
              "' has shape ", e->shape.to_string(), " but the destination has ",
              dst.defined() ? dst.shape().to_string() : "none");
  NoGradGuard g;
  const size_t size = e->end - e->begin;
  if (dst.dtype() == e->dtype && dst.is_contiguous()) {
    ops::copy_from_host(dst, bytes(*e), size);
    return;
  }
  dst.copy_(host_view(*this, *e).to(dst.dtype()));
}

// ---------------------------------------------------------------- writing

namespace {

struct TempFile {
  std::string path;
  int fd = -1;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!path.empty()) ::unlink(path.c_str());
  }
};

// Note [Stale temporary files]
// A writer killed between creating its temporary file and renaming it leaves
// ".NAME.tmp.PID.N.T" behind (the target itself is untouched: old or new, never torn). The
// next save of the same target removes the temporaries whose writer process is gone
// (kill(PID, 0) fails with ESRCH); those of live processes, another writer's included, are
// left alone. So at most one temporary per killed writer exists, and only until the next save.
void remove_stale_temporaries(const std::filesystem::path& dir, const std::string& filename) {
  const std::string prefix = "." + filename + ".tmp.";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const char* digits = name.c_str() + prefix.size();
    char* stop = nullptr;
    const long pid = std::strtol(digits, &stop, 10);
    if (stop == digits || *stop != '.' || pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink(it->path().c_str());
  }
}

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min<size_t>(size, 1u << 30));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "write failed (" + errno_text() + ")");
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       std::map<std::string, std::string> metadata) {
  // Host-side, contiguous views of every tensor, in falling element-size order.
  struct Item {
    std::string name;
    Tensor host;
  };
  std::vector<Item> items;
  std::set<std::string> names;
  {
    NoGradGuard g;
    for (const auto& [name, t] : tensors) {
      EMBER_CHECK(!name.empty() && name != "__metadata__", "safetensors: ", path,
                  ": bad tensor name '", name, "'");
      EMBER_CHECK(names.insert(name).second, "safetensors: ", path, ": duplicate tensor name '",
                  name, "'");
      EMBER_CHECK(t.defined(), "safetensors: ", path, ": tensor '", name, "' is undefined");
      Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
      items.push_back({name, h.contiguous()});
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return element_size(a.host.dtype()) > element_size(b.host.dtype());
  });

  // Header with a fixed-width checksum placeholder patched after the data is written.
  const std::string placeholder(16, '0');
  metadata["format"] = "pt";
  metadata[kChecksumKey] = placeholder;
  nlohmann::ordered_json header;
  header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const Item& it : items) {
    const uint64_t bytes = static_cast<uint64_t>(it.host.numel()) * element_size(it.host.dtype());
    header[it.name] = {{"dtype", safetensors_dtype_name(it.host.dtype())},
                       {"shape", it.host.shape().vec()},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string key = std::string("\"") + kChecksumKey + "\":\"" + placeholder + "\"";
  const size_t at = text.find(key);
  EMBER_ASSERT(at != std::string::npos, "checksum placeholder missing");
  const size_t checksum_pos = 8 + at + key.size() - 1 - placeholder.size();

  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  static std::atomic<uint64_t> counter{0};
  remove_stale_temporaries(dir, target.filename().string());
  TempFile tmp;
  tmp.path = (dir / (std::string(".") + target.filename().string() + ".tmp." +
                     std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1)) + "." +
                     std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())))
                 .string();
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (tmp.fd < 0) {
    const std::string why = errno_text();
    tmp.path.clear();
    fail(path, "cannot create a temporary file in " + dir.string() + " (" + why + ")");
  }
  const uint64_t n = text.size();
  write_all(tmp.fd, &n, 8, path);
  write_all(tmp.fd, text.data(), text.size(), path);
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  try {
    constexpr size_t kChunk = 4u << 20;  // hash a chunk while it is in cache, then write it
    for (const Item& it : items) {
      const auto* p = static_cast<const uint8_t*>(it.host.data_ptr());
      size_t left = static_cast<size_t>(it.host.numel()) * element_size(it.host.dtype());
      while (left) {
        const size_t c = std::min(left, kChunk);
        XXH3_64bits_update(state, p, c);
        write_all(tmp.fd, p, c, path);
        p += c;
        left -= c;
      }
    }
  } catch (...) {
    XXH3_freeState(state);
    throw;
  }
  char sum[17];
  std::snprintf(sum, sizeof sum, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits_digest(state)));
  XXH3_freeState(state);
  if (::pwrite(tmp.fd, sum, 16, static_cast<off_t>(checksum_pos)) != 16)
    fail(path, "write failed (" + errno_text() + ")");
  if (::fsync(tmp.fd) != 0) fail(path, "fsync failed (" + errno_text() + ")");
  if (::close(tmp.fd) != 0) {
    tmp.fd = -1;
    fail(path, "close failed (" + errno_text() + ")");
  }
  tmp.fd = -1;
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    fail(path, "rename failed (" + errno_text() + ")");
  tmp.path.clear();  // now the target: keep it
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace ember::io
