// src/io/safetensors.cpp — the safetensors reader (pread, validate everything, read the data
// once) and the atomic writer (temporary file reserved with fallocate, chunked checksum and
// writes on the thread pool with writeback behind them, fsync, rename, fsync folder).
//
// Note [No mapping]
// The reader never maps the file, on any path (load_state, load_model, load_checkpoint,
// inspect; CPU or GPU destinations): the header and every tensor are read with pread (into
// fresh buffers, the destinations or pinned staging, in parallel: src/io/parallel_io.cpp). So a
// file on a network file system, where a mapping can fault or see another client's writes, reads as
// safely as a local one, and a 1 GB model does not pay for mapping 262144 pages. The open
// descriptor pins the inode: a writer replacing the file (ember's writers rename a finished
// temporary file over it) cannot change what this reader sees between verifying and copying.
#include "ember/io/safetensors.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/make.hpp"
#include "ember/autograd.hpp"
#include "io/parallel_io.hpp"
#include "io/write_order.hpp"

namespace ember::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;  // 100 MB, as ARCHITECTURE §7
constexpr const char* kChecksumKey = "ember.data_checksum";
constexpr const char* kChunkKey = "ember.checksum_chunk";  // Note [Chunked checksum]

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
  return io::parallel::hex64(XXH3_64bits(data, size));
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
    uint64_t n = 0;
    io::parallel::pread_all(fd_, &n, 0, 8, path);
    if (n > kMaxHeaderBytes)
      fail(path, detail::concat("header length ", n,
                                " is over the 100 MB limit (not a safetensors file, or corrupt)"));
    if (n > file_size_ - 8)
      fail(path, detail::concat("header length ", n, " runs past the end of the file (", file_size_,
                                " bytes; truncated or not a safetensors file)"));
    std::string text(n, '\0');
    io::parallel::pread_all(fd_, text.data(), 8, n, path);
    if (n < 2 || text[0] != '{')
      fail(path, "not a safetensors file (the header does not start with '{')");
    data_offset_ = 8 + n;
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
      header = json::parse(text.data(), text.data() + text.size(), cb);
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
    // By start, then end: an empty entry sharing its start with the next tensor comes first,
    // so it is never taken for an overlap (ember writes such files: an empty tensor between
    // two others).
    std::stable_sort(entries_.begin(), entries_.end(),
                     [](const TensorEntry& a, const TensorEntry& b) {
                       return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
                     });
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
    if (version != metadata_.end() && version->second != "1" && version->second != "2")
      fail(path, "ember.format_version " + version->second +
                     " is not supported (this ember reads versions 1 and 2)");
    auto chunk = metadata_.find(kChunkKey);
    if (chunk != metadata_.end()) {
      const std::string& c = chunk->second;
      const bool digits =
          !c.empty() && c.size() <= 12 &&
          std::all_of(c.begin(), c.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      checksum_chunk_ = digits ? std::stoull(c) : 0;
      if (checksum_chunk_ < 4096 || checksum_chunk_ > (uint64_t{1} << 34))
        fail(path, "ember.checksum_chunk '" + c.substr(0, 20) +
                       "' is not a chunk size (expected a byte count from 4096 to 2^34)");
    }
    if (version != metadata_.end() && version->second == "2" && checksum_chunk_ == 0 &&
        metadata_.count(kChecksumKey))
      fail(path, "ember.format_version 2 without ember.checksum_chunk (corrupt header)");
    auto kind = metadata_.find("ember.kind");
    if (kind != metadata_.end() && kind->second != "model" && kind->second != "checkpoint")
      fail(path, "unknown ember.kind '" + kind->second + "' (expected model or checkpoint)");
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::verify_checksum() const {
  auto it = metadata_.find(kChecksumKey);
  if (it == metadata_.end()) return;
  // Note [Chunked checksum]: version-2 files hash in chunks on every thread.
  const uint64_t digest =
      checksum_chunk_ ? io::parallel::chunked_file_checksum(fd_, data_offset_, data_size_,
                                                            checksum_chunk_, path_)
                      : io::parallel::whole_file_checksum(fd_, data_offset_, data_size_, path_);
  check_digest(digest);
}

void SafetensorsFile::check_digest(uint64_t digest) const {
  const std::string want = metadata_.at(kChecksumKey), got = io::parallel::hex64(digest);
  if (got != want)
    fail(path_, "checksum mismatch (data hashes to " + got + ", header says " + want +
                    "): the file is corrupt; restore it from a good copy");
}

// Note [Loading by exchange]
// A CPU load that verifies (load_state) reads the file once (Note [One pass on the CPU] in
// parallel_io.cpp) into fresh buffers, one per destination, and only once the whole file
// checks out gives them to the destinations: a destination that is exactly its storage
// (offset 0, contiguous, the stored dtype, the storage no larger) trades blocks with its
// buffer (detail::StorageAccess::exchange: the Storage object stays, so every tensor and view
// sharing it sees the new values, and parameter identity, optimizer state and hooks keep
// working; data_ptr() changes, the version is bumped); any other destination is copied from
// its buffer. The old blocks go back to the caching allocator, so a model loaded again reuses
// them (no page faults). Peak host memory is one extra copy of the destinations; when that
// is over half the memory the system has available (MemAvailable), or the buffers cannot be
// allocated, or the file is version 1 (one whole-file hash), the load verifies first and then
// reads straight into place (two passes over the page cache). "Verify everything, then
// change anything" holds either way: a corrupt chunk leaves every destination unchanged.
namespace {

// Bytes the system could give without swapping (/proc/meminfo MemAvailable); unknown: no limit.
uint64_t available_memory() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return UINT64_MAX;
  char line[256];
  unsigned long long kb = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f))
    found = std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
  std::fclose(f);
  return found ? static_cast<uint64_t>(kb) * 1024 : UINT64_MAX;
}

// Whether `dst` is the whole of its storage, in the stored layout: it can take a buffer's block.
bool owns_storage_exactly(const Tensor& dst, const TensorEntry& e) {
  return dst.device().is_cpu() && dst.dtype() == e.dtype && dst.offset() == 0 &&
         dst.is_contiguous() && dst.storage()->bytes() == e.end - e.begin;
}

}  // namespace

void SafetensorsFile::load_into(const std::vector<std::pair<std::string, Tensor>>& plan,
                                bool verify, bool fresh_destinations) const {
  // Destinations a stream can fill (Note [Streaming onto the GPU]): contiguous device
  // tensors of the stored dtype, all on one device; host destinations (Note [Loading by
  // exchange]); the rest is read one by one. A tensor named twice for one entry (tied
  // weights) is read once.
  using Item = std::pair<const TensorEntry*, Tensor>;
  std::vector<Item> streamed, host;
  std::vector<std::pair<std::string, Tensor>> rest;
  std::set<std::pair<const TensorImpl*, const TensorEntry*>> seen;
  for (const auto& [name, dst] : plan) {
    const TensorEntry* e = find(name);
    if (!e) fail(path_, "no tensor named '" + name + "'");
    if (dst.defined() && !seen.insert({detail::TensorAccess::impl(dst), e}).second) continue;
    const bool fits = dst.defined() && dst.device().is_cuda() && dst.dtype() == e->dtype &&
                      dst.is_contiguous() && dst.shape() == e->shape &&
                      (streamed.empty() || streamed[0].second.device() == dst.device());
    if (fits)
      streamed.emplace_back(e, dst);
    else if (dst.defined() && dst.device().is_cpu() && dst.shape() == e->shape)
      host.emplace_back(e, dst);
    else
      rest.emplace_back(name, dst);
  }
  NoGradGuard no_grad;
  // A file without a checksum (written by another tool) has nothing to verify.
  bool verified = !verify || metadata_.count(kChecksumKey) == 0;
  if (!streamed.empty()) {
    stream_onto_device(streamed, verified, fresh_destinations);
    verified = true;
  }
  if (!host.empty() && !verified && checksum_chunk_ != 0 &&
      load_host_in_one_pass(host, fresh_destinations)) {
    verified = true;
    host.clear();
  }
  if (!verified) verify_checksum();  // two passes: the checksum, then the copies
  for (auto& [e, dst] : host) {
    Tensor d = dst;
    read_into(e->name, d);
  }
  for (auto& [name, dst] : rest) {
    Tensor d = dst;
    read_into(name, d);
  }
}

void SafetensorsFile::stream_onto_device(
    const std::vector<std::pair<const TensorEntry*, Tensor>>& streamed, bool verified,
    bool fresh_destinations) const {
  // Verified while streaming: into fresh device buffers, copied into the destinations only
  // once the whole file checks out ("verify everything, then change anything"); straight into
  // destinations that are new themselves (load_model).
  bool stream_verifies = !verified && checksum_chunk_ != 0;
  std::vector<Tensor> scratch;
  if (stream_verifies && !fresh_destinations) {
    try {
      for (const auto& [e, dst] : streamed)
        scratch.push_back(core::make_tensor(dst.shape(), dst.dtype(), dst.device()));
    } catch (const Error&) {  // no room for a second copy on the device: verify first instead
      scratch.clear();
      stream_verifies = false;
    }
  }
  if (!verified && !stream_verifies) verify_checksum();
  std::vector<io::parallel::DeviceTarget> targets;
  for (size_t i = 0; i < streamed.size(); ++i)
    targets.push_back({streamed[i].first->begin, streamed[i].first->end,
                       (scratch.empty() ? streamed[i].second : scratch[i]).data_ptr()});
  std::vector<uint64_t> digests;
  const Tensor& first = streamed[0].second;
  io::parallel::stream_to_device(first.device().type, first.device().index, fd_, data_offset_,
                                 data_size_, std::move(targets),
                                 checksum_chunk_ ? checksum_chunk_ : io::parallel::kChecksumChunk,
                                 stream_verifies ? &digests : nullptr, path_);
  if (stream_verifies) check_digest(io::parallel::combine_digests(digests));
  for (size_t i = 0; i < streamed.size(); ++i) {
    const Tensor& dst = streamed[i].second;
    detail::StorageAccess::bump_version(*dst.storage());
    if (!scratch.empty()) Tensor(dst).copy_(scratch[i]);
  }
}

bool SafetensorsFile::load_host_in_one_pass(
    const std::vector<std::pair<const TensorEntry*, Tensor>>& host, bool fresh_destinations) const {
  // Note [Loading by exchange]: one fresh buffer per entry, except for an entry with one
  // destination that is new itself and in the stored layout (load_model): that is read into
  // directly. An entry with several destinations is copied into each from its buffer.
  std::map<const TensorEntry*, size_t> owner, uses;  // entry -> its first item, its items
  for (size_t i = 0; i < host.size(); ++i)
    if (++uses[host[i].first] == 1) owner[host[i].first] = i;
  auto sole = [&](size_t i) { return uses[host[i].first] == 1; };
  auto direct = [&](size_t i) {
    const auto& [e, dst] = host[i];
    return fresh_destinations && sole(i) && dst.dtype() == e->dtype && dst.is_contiguous();
  };
  uint64_t fresh_bytes = 0;
  for (size_t i = 0; i < host.size(); ++i)
    if (owner[host[i].first] == i && !direct(i))
      fresh_bytes += host[i].first->end - host[i].first->begin;
  if (fresh_bytes > available_memory() / 2) return false;
  std::vector<Tensor> buffers(host.size());  // indexed by owner
  std::vector<io::parallel::HostTarget> targets;
  try {
    for (size_t i = 0; i < host.size(); ++i) {
      const auto& [e, dst] = host[i];
      if (owner[e] != i) continue;
      void* at = nullptr;
      if (direct(i)) {
        at = dst.data_ptr();
      } else {  // in the destination's pool, so an exchange keeps the pools' figures
        const Pool pool =
            sole(i) && owns_storage_exactly(dst, *e) ? dst.storage()->pool() : Pool::Pass;
        buffers[i] = core::wrap_storage(
            std::make_shared<Storage>(e->end - e->begin, Device::cpu(), pool), e->shape, e->dtype);
        at = buffers[i].data_ptr();
      }
      targets.push_back({e->begin, e->end, at});
    }
  } catch (const Error&) {  // no room for the buffers: two passes instead
    return false;
  }
  check_digest(io::parallel::read_and_checksum(fd_, data_offset_, data_size_, std::move(targets),
                                               checksum_chunk_, path_));
  // The whole file checks out: hand the buffers over, in plan order. A storage something
  // was written into is not exchanged afterwards (that would drop those bytes).
  std::set<const Storage*> written;
  for (size_t i = 0; i < host.size(); ++i) {
    const auto& [e, dst] = host[i];
    Storage& storage = *dst.storage();
    const Tensor& buffer = buffers[owner[e]];
    if (direct(i)) {  // read in place
      detail::StorageAccess::bump_version(storage);
    } else if (!(sole(i) && owns_storage_exactly(dst, *e) && !written.count(&storage) &&
                 detail::StorageAccess::exchange(storage, *buffer.storage()))) {
      Tensor d = dst;
      d.copy_(buffer.dtype() == dst.dtype() ? buffer : buffer.to(dst.dtype()));
    }
    written.insert(&storage);
  }
  return true;  // the buffers (now holding the replaced blocks) go back to the allocator
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  for (const TensorEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

void SafetensorsFile::read_bytes(const TensorEntry& e, void* dst) const {
  io::parallel::pread_all(fd_, dst, data_offset_ + e.begin, e.end - e.begin, path_);
}

const uint8_t* SafetensorsFile::bytes(const TensorEntry& e) const {
  const std::lock_guard<std::mutex> lock(bytes_mutex_);
  std::unique_ptr<uint8_t[]>& kept = bytes_buffers_[{e.begin, e.end}];
  if (!kept) {
    // Kept only once read whole: a failed read leaves no half-filled buffer behind.
    auto buffer = std::make_unique<uint8_t[]>(std::max<uint64_t>(e.end - e.begin, 1));
    read_bytes(e, buffer.get());
    kept = std::move(buffer);
  }
  return kept.get();
}

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
  if (dst.dtype() == e->dtype && dst.is_contiguous() && dst.device().is_cpu()) {
    detail::StorageAccess::bump_version(*dst.storage());
    read_bytes(*e, dst.data_ptr());  // straight into the destination (Note [No mapping])
    return;
  }
  Tensor host = core::make_tensor(e->shape, e->dtype, Device::cpu());
  read_bytes(*e, host.data_ptr());
  if (dst.dtype() == e->dtype && dst.is_contiguous()) {
    core::copy_from_host(dst, host.data_ptr(), e->end - e->begin);
    return;
  }
  dst.copy_(host.to(dst.dtype()));
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
      fail(path, io::parallel::write_error_text(errno, path));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// The folder of `path` ("." for a bare file name).
std::filesystem::path folder_of(const std::string& path) {
  const std::filesystem::path target(path);
  return target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
}

// Creates `tmp`, the temporary file beside `path` that an atomic write fills (Note [Stale
// temporary files]).
void open_temporary(TempFile& tmp, const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path dir = folder_of(path);
  const std::string filename = std::filesystem::path(path).filename().string();
  remove_stale_temporaries(dir, filename);
  tmp.path = (dir / ("." + filename + ".tmp." + std::to_string(::getpid()) + "." +
                     std::to_string(counter.fetch_add(1)) + "." +
                     std::to_string(std::chrono::steady_clock::now().time_since_epoch().count())))
                 .string();
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (tmp.fd < 0) {
    const std::string why = errno_text();
    tmp.path.clear();
    fail(path, "cannot create a temporary file in " + dir.string() + " (" + why + ")");
  }
}

// Makes the written `tmp` the file `path`: fsync, close, rename over it, fsync the folder.
void commit_temporary(TempFile& tmp, const std::string& path) {
  if (::fsync(tmp.fd) != 0)
    fail(path, "fsync failed (" + io::parallel::write_error_text(errno, path) + ")");
  if (::close(tmp.fd) != 0) {
    tmp.fd = -1;
    fail(path, "close failed (" + errno_text() + ")");
  }
  tmp.fd = -1;
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    fail(path, "rename failed (" + errno_text() + ")");
  tmp.path.clear();  // now the target: keep it
  const int dfd = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       std::map<std::string, std::string> metadata) {
  write_order::Turn turn(path);  // Note [Writes land in issue order]
  write_order::write_safetensors_in_turn(turn, path, tensors, std::move(metadata));
}

void write_order::write_safetensors_in_turn(
    Turn& turn, const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
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
  // A version-1 file (ember.format_version "1") carries the whole-section checksum instead.
  auto version = metadata.find("ember.format_version");
  const bool whole = version != metadata.end() && version->second == "1";
  if (!whole) metadata[kChunkKey] = std::to_string(io::parallel::kChecksumChunk);
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

  turn.wait();  // the earlier writes to this file land first
  TempFile tmp;
  open_temporary(tmp, path);
  const uint64_t n = text.size();
  // Note [Writeback behind the writes]: the file's blocks reserved up front (a full disk
  // fails here, before any data is written; a file system without fallocate skips it).
  const uint64_t total = 8 + n + offset;
  if (::fallocate(tmp.fd, 0, 0, static_cast<off_t>(total)) != 0 && errno != EOPNOTSUPP &&
      errno != ENOSYS && errno != EINVAL)
    fail(path, io::parallel::write_error_text(errno, path));
  write_all(tmp.fd, &n, 8, path);
  write_all(tmp.fd, text.data(), text.size(), path);
  // Note [Chunked checksum]: the data is hashed and written chunk by chunk on the pool.
  std::vector<io::parallel::Piece> pieces;
  for (const Item& it : items)
    pieces.push_back({it.host.data_ptr(),
                      static_cast<uint64_t>(it.host.numel()) * element_size(it.host.dtype())});
  uint64_t digest = io::parallel::write_and_checksum(tmp.fd, 8 + text.size(), pieces,
                                                     io::parallel::kChecksumChunk, path);
  if (whole) {  // version 1: XXH3-64 of the whole data section, in order
    XXH3_state_t* state = XXH3_createState();
    EMBER_CHECK(state != nullptr, "safetensors: ", path, ": out of memory for the checksum");
    XXH3_64bits_reset(state);
    for (const io::parallel::Piece& p : pieces) XXH3_64bits_update(state, p.data, p.size);
    digest = XXH3_64bits_digest(state);
    XXH3_freeState(state);
  }
  const std::string sum = io::parallel::hex64(digest);
  if (::pwrite(tmp.fd, sum.data(), 16, static_cast<off_t>(checksum_pos)) != 16)
    fail(path, io::parallel::write_error_text(errno, path));
  commit_temporary(tmp, path);
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_order::Turn turn(path);  // Note [Writes land in issue order]
  turn.wait();
  TempFile tmp;
  open_temporary(tmp, path);
  write_all(tmp.fd, bytes.data(), bytes.size(), path);
  commit_temporary(tmp, path);
}

}  // namespace ember::io
