// src/data/idx.cpp — IDX reader and writer (the MNIST file format), plain or gzip.
//
// Layout: magic 0x00 0x00 <type code> <rank>, `rank` big-endian u32 sizes, then the data
// row-major and big-endian. The reader validates everything before trusting a size: a
// header that promises more data than the file can hold is reported as truncated without
// allocating the promised amount (for gzip the bound is deflate's maximum ratio, 1032:1).
// Gzip is decoded with zlib's inflate directly so the count of good bytes is exact.
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "ember/data/readers.hpp"

namespace ember::data {
namespace {

constexpr uint64_t kMaxDeflateRatio = 1032;    // deflate never expands data more than this
constexpr size_t kInputChunkBytes = 1 << 18;   // compressed bytes read from disk at a time
constexpr size_t kOutputChunkBytes = 1 << 20;  // bytes converted per write_idx chunk

struct IdxType {
  uint8_t code;
  const char* name;
  size_t file_bytes;  // bytes per element in the file
  DType dtype;        // what it is read as
};

constexpr IdxType kIdxTypes[] = {
    {0x08, "u8", 1, DType::u8},   {0x09, "i8", 1, DType::i32},  {0x0B, "i16", 2, DType::i32},
    {0x0C, "i32", 4, DType::i32}, {0x0D, "f32", 4, DType::f32}, {0x0E, "f64", 8, DType::f64},
};

const IdxType* find_type(uint8_t code) {
  for (const IdxType& t : kIdxTypes)
    if (t.code == code) return &t;
  return nullptr;
}

template <typename... Args>
[[noreturn]] void fail(const char* op, const std::string& path, const Args&... args) {
  detail::throw_error(detail::concat(op, ": ", path, ": ", args...));
}

std::string hex_byte(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v & 0xFFu);
  return buf;
}

// Reverses the byte order of `count` elements of `width` bytes, in place, on a
// little-endian host (the file is big-endian).
void to_host_order(uint8_t* p, size_t count, size_t width) {
  if constexpr (std::endian::native == std::endian::big) return;
  if (width == 1) return;
  for (size_t i = 0; i < count; ++i, p += width)
    for (size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

// The bytes of a file, decompressed when it starts with the gzip magic. read() returns
// fewer bytes than asked only at the end of the data; corrupt gzip data throws.
class ByteSource {
 public:
  explicit ByteSource(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "rb");
    if (!file_) fail("read_idx", path, "cannot open (", std::strerror(errno), ")");
    std::error_code ec;
    file_bytes_ = std::filesystem::file_size(path, ec);
    if (ec) file_bytes_ = 0;
    unsigned char magic[2] = {0, 0};
    const size_t got = std::fread(magic, 1, 2, file_);
    std::rewind(file_);
    gzip_ = got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gzip_) {
      in_.resize(kInputChunkBytes);
      if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) {
        std::fclose(file_);
        fail("read_idx", path, "cannot start the gzip decoder");
      }
    }
  }
  ~ByteSource() {
    if (gzip_) inflateEnd(&zs_);
    std::fclose(file_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  bool gzip() const { return gzip_; }
  uint64_t file_bytes() const { return file_bytes_; }
  /// Why the data ended, when it ended inside a gzip member (else empty).
  const std::string& end_note() const { return end_note_; }

  size_t read(uint8_t* dst, size_t n) {
    if (!gzip_) {
      const size_t got = std::fread(dst, 1, n, file_);
      if (got < n && std::ferror(file_))
        fail("read_idx", path_, "read error (", std::strerror(errno), ")");
      return got;
    }
    size_t total = 0;
    while (total < n && !finished_) {
      const size_t want = std::min<size_t>(n - total, UINT_MAX);
      zs_.next_out = dst + total;
      zs_.avail_out = static_cast<uInt>(want);
      while (zs_.avail_out > 0 && !finished_) inflate_some();
      total += want - zs_.avail_out;
    }
    return total;
  }

  /// Reads to the end of the data and returns how many bytes were left.
  uint64_t count_rest() {
    std::vector<uint8_t> scratch(kInputChunkBytes);
    uint64_t rest = 0;
    for (size_t got; (got = read(scratch.data(), scratch.size())) > 0;) rest += got;
    return rest;
  }

 private:
  // Reads more compressed input; false at the end of the file.
  bool fill_input() {
    const size_t got = std::fread(in_.data(), 1, in_.size(), file_);
    if (got == 0 && std::ferror(file_))
      fail("read_idx", path_, "read error (", std::strerror(errno), ")");
    zs_.next_in = in_.data();
    zs_.avail_in = static_cast<uInt>(got);
    return got > 0;
  }

  void inflate_some() {
    if (zs_.avail_in == 0 && !fill_input()) {
      finished_ = true;
      if (in_member_) end_note_ = "the gzip stream ends early";
      return;
    }
    in_member_ = true;
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      // Another gzip member may follow (as `cat a.gz b.gz` makes); inflate checks its header.
      in_member_ = false;
      if (zs_.avail_in == 0 && !fill_input()) {
        finished_ = true;
        return;
      }
      inflateReset(&zs_);
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string why = zs_.msg ? zs_.msg : "error " + std::to_string(rc);
      fail("read_idx", path_, "corrupt gzip data (zlib: ", why, ")");
    }
  }

  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t file_bytes_ = 0;
  bool gzip_ = false;
  z_stream zs_{};
  std::vector<uint8_t> in_;
  bool finished_ = false;
  bool in_member_ = false;
  std::string end_note_;
};

// Throws the truncation error for `expected` data bytes of which `got` were present.
[[noreturn]] void fail_data_size(const std::string& path, const ByteSource& src, uint64_t expected,
                                 uint64_t got) {
  const std::string note = src.end_note().empty() ? "" : " (" + src.end_note() + ")";
  if (got < expected)
    fail("read_idx", path, "truncated: expected ", expected, " data bytes, got ", got, note);
  fail("read_idx", path, "trailing data: expected ", expected, " data bytes, got ", got,
       " (the sizes in the header do not match the file)");
}

}  // namespace

Tensor read_idx(const std::string& path) {
  ByteSource src(path);

  // ---- header ----
  uint8_t magic[4];
  const size_t got_magic = src.read(magic, 4);
  if (got_magic == 0 && src.end_note().empty())
    fail("read_idx", path, "empty file (expected an IDX header)");
  if (got_magic < 4)
    fail("read_idx", path, "truncated header: got ", got_magic, " bytes (expected at least 4)",
         src.end_note().empty() ? "" : " (" + src.end_note() + ")");
  if (magic[0] != 0 || magic[1] != 0)
    fail("read_idx", path, "bad magic ", hex_byte(magic[0]), " ", hex_byte(magic[1]), " ",
         hex_byte(magic[2]), " ", hex_byte(magic[3]),
         " (expected 0x00 0x00 <type> <rank>; is this an IDX file?)");
  const IdxType* type = find_type(magic[2]);
  if (!type)
    fail("read_idx", path, "unknown type code ", hex_byte(magic[2]),
         " (expected 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32 or 0x0E f64)");
  const int rank = magic[3];
  if (rank < 1 || rank > kMaxRank)
    fail("read_idx", path, "rank ", rank, " (expected 1 to ", kMaxRank, ")");

  uint8_t size_bytes[4 * kMaxRank];
  const size_t want_sizes = 4 * static_cast<size_t>(rank);
  const size_t got_sizes = src.read(size_bytes, want_sizes);
  if (got_sizes < want_sizes)
    fail("read_idx", path, "truncated header: got ", got_sizes, " of the ", want_sizes,
         " bytes holding ", rank, " sizes",
         src.end_note().empty() ? "" : " (" + src.end_note() + ")");
  Shape shape;
  for (int d = 0; d < rank; ++d) {
    const uint8_t* b = size_bytes + 4 * d;
    shape.push_back(static_cast<int64_t>((uint64_t{b[0]} << 24) | (uint64_t{b[1]} << 16) |
                                         (uint64_t{b[2]} << 8) | b[3]));
  }
  uint64_t numel = 1;
  const uint64_t max_numel = (uint64_t{1} << 62) / type->file_bytes;
  for (const int64_t n : shape) {
    if (n != 0 && numel > max_numel / static_cast<uint64_t>(n))
      fail("read_idx", path, "sizes ", shape.to_string(),
           " hold too many elements (expected at most ", max_numel, ")");
    numel *= static_cast<uint64_t>(n);
  }
  const uint64_t expected = numel * type->file_bytes;
  const uint64_t header_bytes = 4 + want_sizes;

  // ---- data size, checked before allocating when the file size bounds it ----
  if (!src.gzip()) {
    const uint64_t got = src.file_bytes() > header_bytes ? src.file_bytes() - header_bytes : 0;
    if (got != expected) fail_data_size(path, src, expected, got);
  } else if (expected > src.file_bytes() * kMaxDeflateRatio) {
    fail_data_size(path, src, expected, src.count_rest());
  }

  // ---- data ----
  Tensor out = empty(shape, {.dtype = type->dtype, .device = Device::cpu()});
  std::vector<uint8_t> narrow_buf;  // i8 and i16 are widened to i32 after reading
  uint8_t* dst = static_cast<uint8_t*>(out.data_ptr());
  if (type->code == 0x09 || type->code == 0x0B) {
    narrow_buf.resize(expected);
    dst = narrow_buf.data();
  }
  const uint64_t got = expected ? src.read(dst, expected) : 0;
  if (got < expected) fail_data_size(path, src, expected, got);
  const uint64_t extra = src.count_rest();
  if (extra) fail_data_size(path, src, expected, expected + extra);
  if (!src.end_note().empty())  // every data byte arrived but the gzip trailer (CRC, size) did not
    fail("read_idx", path, "truncated: ", src.end_note(), " (after all ", expected, " data bytes)");

  to_host_order(dst, numel, type->file_bytes);
  if (type->code == 0x09 || type->code == 0x0B) {
    auto* wide = out.data<int32_t>();
    for (uint64_t i = 0; i < numel; ++i) {
      if (type->code == 0x09) {
        wide[i] = static_cast<int8_t>(narrow_buf[i]);
      } else {
        int16_t v;
        std::memcpy(&v, narrow_buf.data() + 2 * i, 2);
        wide[i] = v;
      }
    }
  }
  return out;
}

// ---- writer ----

namespace {

// A plain or gzip output file; every failure throws naming the file.
class ByteSink {
 public:
  ByteSink(const std::string& path, bool gzip) : path_(path), gzip_(gzip) {
    if (gzip_) {
      gz_ = gzopen(path.c_str(), "wb6");
      if (!gz_) fail("write_idx", path, "cannot open for writing (", std::strerror(errno), ")");
    } else {
      file_ = std::fopen(path.c_str(), "wb");
      if (!file_) fail("write_idx", path, "cannot open for writing (", std::strerror(errno), ")");
    }
  }
  ~ByteSink() {
    if (gz_) gzclose(gz_);
    if (file_) std::fclose(file_);
  }
  ByteSink(const ByteSink&) = delete;
  ByteSink& operator=(const ByteSink&) = delete;

  void write(const uint8_t* p, size_t n) {
    if (n == 0) return;
    if (gzip_) {
      for (size_t done = 0; done < n;) {
        const unsigned part = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
        if (gzwrite(gz_, p + done, part) != static_cast<int>(part)) {
          int err = Z_OK;
          const char* msg = gzerror(gz_, &err);
          fail("write_idx", path_, "write failed (zlib: ", msg ? msg : "error", ")");
        }
        done += part;
      }
    } else if (std::fwrite(p, 1, n, file_) != n) {
      fail("write_idx", path_, "write failed (", std::strerror(errno), ")");
    }
  }

  void close() {
    if (gz_) {
      const int rc = gzclose(gz_);
      gz_ = nullptr;
      if (rc != Z_OK)
        fail("write_idx", path_, "closing the gzip stream failed (zlib error ", rc, ")");
    }
    if (file_) {
      const int rc = std::fclose(file_);
      file_ = nullptr;
      if (rc != 0) fail("write_idx", path_, "closing failed (", std::strerror(errno), ")");
    }
  }

 private:
  std::string path_;
  bool gzip_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
};

}  // namespace

void write_idx(const std::string& path, const Tensor& t, bool gzip) {
  EMBER_CHECK(t.defined(), "write_idx: ", path, ": the tensor is undefined");
  const IdxType* type = nullptr;
  for (const IdxType& c : kIdxTypes)
    if (c.dtype == t.dtype() && c.file_bytes == element_size(t.dtype())) type = &c;
  EMBER_CHECK(type, "write_idx: ", path, ": unsupported dtype ", dtype_name(t.dtype()),
              " (expected u8, i32, f32 or f64; convert with .to())");
  EMBER_CHECK(t.dim() >= 1 && t.dim() <= kMaxRank, "write_idx: ", path, ": rank ", t.dim(),
              " (expected 1 to ", kMaxRank, ")");
  for (int d = 0; d < t.dim(); ++d)
    EMBER_CHECK(t.shape()[d] <= int64_t{0xFFFFFFFF}, "write_idx: ", path, ": shape ",
                t.shape().to_string(), " has a size over 2^32 - 1 (the IDX limit)");

  const Tensor host = t.detach().to(Device::cpu()).contiguous();
  std::vector<uint8_t> header = {0, 0, type->code, static_cast<uint8_t>(t.dim())};
  for (int d = 0; d < t.dim(); ++d) {
    const auto n = static_cast<uint32_t>(t.shape()[d]);
    header.insert(header.end(), {static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(n >> 16),
                                 static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n)});
  }
  ByteSink sink(path, gzip);
  sink.write(header.data(), header.size());

  const size_t width = type->file_bytes;
  const auto* data = static_cast<const uint8_t*>(host.data_ptr());
  const size_t total = static_cast<size_t>(host.numel()) * width;
  std::vector<uint8_t> chunk(std::min(total, kOutputChunkBytes));
  for (size_t done = 0; done < total;) {
    const size_t n = std::min(total - done, chunk.size());  // a multiple of width
    std::memcpy(chunk.data(), data + done, n);
    to_host_order(chunk.data(), n / width, width);  // the swap is its own inverse
    sink.write(chunk.data(), n);
    done += n;
  }
  sink.close();
}

}  // namespace ember::data
