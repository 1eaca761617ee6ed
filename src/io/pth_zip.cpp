// src/io/pth_zip.cpp — the zip container of torch.save files, read with pread: the end of
// central directory record (and its zip64 forms, which torch always writes), the central
// directory, and an entry's local header and data (stored, as torch writes them 64-byte
// aligned, or deflated through zlib, as a re-zipped file may be).
//
// Note [Trusting a zip directory]
// Every number in the directory is checked before it is used: the end record lies in the last
// 64 KiB + 22 bytes; the directory lies inside the file, before the end record; each entry's
// record and its name, extra and comment lie inside the directory; the local header and the
// entry's data lie inside the file and before the directory (so no entry overlaps it); a
// stored entry's compressed and uncompressed sizes agree, a deflated one claims no more than
// deflate can expand its bytes to (so no claimed size is allocated unchecked); names are unique;
// encrypted entries, other methods and multi-disk archives are refused. A read checks the local
// header's signature, name and method, then the data's CRC-32.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "core/thread_pool.hpp"
#include "ember/error.hpp"
#include "io/parallel_io.hpp"
#include "io/pth_format.hpp"

namespace ember::io::pth {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50,
                   kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr uint64_t kEndBytes = 22, kLocatorBytes = 20, kEnd64Bytes = 56, kCentralBytes = 46,
                   kLocalBytes = 30, kMaxComment = 65535;
constexpr uint64_t kMaxInflation = 1032;  // deflate's largest ratio of output to input bytes

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(u16(p)) | (uint32_t{u16(p + 2)} << 16);
}
uint64_t u64(const uint8_t* p) {
  return static_cast<uint64_t>(u32(p)) | (uint64_t{u32(p + 4)} << 32);
}

}  // namespace

void fail(const std::string& path, const std::string& what) {
  detail::throw_error(detail::concat("load_pth: ", path, ": ", what));
}

ZipArchive::ZipArchive(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path, detail::concat("cannot open (", std::strerror(errno), ")"));
  try {
    struct stat st {};
    if (::fstat(fd_, &st) != 0)
      fail(path, detail::concat("cannot stat (", std::strerror(errno), ")"));
    if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
    file_size_ = static_cast<uint64_t>(st.st_size);
    read_directory();
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
}

ZipArchive::~ZipArchive() {
  if (fd_ >= 0) ::close(fd_);
}

void ZipArchive::read_directory() {
  const std::string& path = path_;
  if (file_size_ >= 2) {  // a torch.save file of torch < 1.6 is a bare pickle (protocol 2)
    uint8_t head[2];
    io::parallel::pread_all(fd_, head, 0, 2, path);
    if (head[0] == 0x80 && head[1] <= 5)
      fail(path,
           "a legacy torch.save file (torch < 1.6, a bare pickle, not a zip archive): "
           "ember reads the zip format; load and save it again with torch >= 1.6");
  }
  if (file_size_ < kEndBytes)
    fail(path, detail::concat("not a zip archive (", file_size_,
                              " bytes; a torch.save file is a zip; truncated?)"));
  // The end record: the last signature in the file's final 64 KiB + 22 bytes.
  const uint64_t tail_size = std::min(file_size_, kEndBytes + kMaxComment);
  std::vector<uint8_t> tail(tail_size);
  io::parallel::pread_all(fd_, tail.data(), file_size_ - tail_size, tail_size, path);
  int64_t at = static_cast<int64_t>(tail_size - kEndBytes);
  while (at >= 0 && u32(&tail[static_cast<size_t>(at)]) != kEndSig) --at;
  if (at < 0)
    fail(path,
         "not a zip archive (no end of central directory record; truncated, or not a "
         "torch.save file)");
  const uint64_t end_pos = file_size_ - tail_size + static_cast<uint64_t>(at);
  const uint8_t* end = &tail[static_cast<size_t>(at)];
  uint64_t count = u16(end + 10), size = u32(end + 12), offset = u32(end + 16);
  if (u16(end + 4) != 0 || u16(end + 6) != 0 || u16(end + 8) != u16(end + 10))
    fail(path, "a multi-disk zip archive (not supported)");
  uint64_t directory_end = end_pos;
  // zip64: a locator right before the end record points at the zip64 end record.
  if (end_pos >= kLocatorBytes) {
    uint8_t loc[kLocatorBytes];
    io::parallel::pread_all(fd_, loc, end_pos - kLocatorBytes, kLocatorBytes, path);
    if (u32(loc) == kLocator64Sig) {
      const uint64_t end64_pos = u64(loc + 8);
      if (end64_pos > end_pos - kLocatorBytes || end_pos - kLocatorBytes - end64_pos < kEnd64Bytes)
        fail(path, detail::concat("the zip64 end record's offset ", end64_pos,
                                  " is outside the file (corrupt zip directory)"));
      uint8_t e64[kEnd64Bytes];
      io::parallel::pread_all(fd_, e64, end64_pos, kEnd64Bytes, path);
      if (u32(e64) != kEnd64Sig)
        fail(path, "the zip64 end record has a bad signature (corrupt zip directory)");
      const uint64_t count64 = u64(e64 + 32), size64 = u64(e64 + 40), offset64 = u64(e64 + 48);
      const bool agree = (count == 0xFFFF || count == count64) &&
                         (size == 0xFFFFFFFF || size == size64) &&
                         (offset == 0xFFFFFFFF || offset == offset64);
      if (!agree || u64(e64 + 24) != count64)
        fail(path, "the zip end records disagree on the central directory (corrupt zip)");
      count = count64, size = size64, offset = offset64;
      directory_end = end64_pos;
    }
  }
  if (offset > directory_end || size > directory_end - offset)
    fail(path, detail::concat("the central directory (", size, " bytes at ", offset,
                              ") runs past its end record at ", directory_end,
                              " (truncated or corrupt zip)"));
  if (count > size / kCentralBytes)
    fail(path, detail::concat("the central directory claims ", count, " entries in ", size,
                              " bytes (corrupt zip)"));
  directory_offset_ = offset;
  std::vector<uint8_t> dir(size);
  io::parallel::pread_all(fd_, dir.data(), offset, size, path);
  uint64_t p = 0;
  entries_.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    if (size - p < kCentralBytes || u32(&dir[p]) != kCentralSig)
      fail(path, detail::concat("zip directory entry ", i, " at ", offset + p,
                                " is malformed (corrupt zip)"));
    const uint8_t* c = &dir[p];
    const uint64_t name_len = u16(c + 28), extra_len = u16(c + 30), comment_len = u16(c + 32);
    if (size - p - kCentralBytes < name_len + extra_len + comment_len)
      fail(path,
           detail::concat("zip directory entry ", i, " runs past the directory (corrupt zip)"));
    ZipEntry e;
    e.name.assign(reinterpret_cast<const char*>(c + kCentralBytes), name_len);
    const uint16_t flags = u16(c + 8);
    e.method = u16(c + 10);
    e.crc = u32(c + 16);
    e.compressed = u32(c + 20);
    e.size = u32(c + 24);
    e.local_offset = u32(c + 42);
    // The zip64 extra field holds, in this order, whichever of the three are saturated.
    const uint8_t* x = c + kCentralBytes + name_len;
    for (uint64_t q = 0; q + 4 <= extra_len;) {
      const uint16_t id = u16(x + q), len = u16(x + q + 2);
      if (q + 4 + len > extra_len) break;
      if (id == 0x0001) {
        const uint8_t* f = x + q + 4;
        uint64_t left = len;
        for (uint64_t* v : {&e.size, &e.compressed, &e.local_offset}) {
          if (*v != 0xFFFFFFFF) continue;
          if (left < 8)
            fail(path, "zip entry '" + e.name + "' has a short zip64 field (corrupt zip)");
          *v = u64(f);
          f += 8, left -= 8;
        }
      }
      q += 4 + len;
    }
    if (flags & 1) fail(path, "zip entry '" + e.name + "' is encrypted (not supported)");
    if (e.method != 0 && e.method != 8)
      fail(path, detail::concat("zip entry '", e.name, "' uses compression method ", e.method,
                                " (ember reads stored and deflated entries)"));
    if (e.method == 0 && e.compressed != e.size)
      fail(path, detail::concat("zip entry '", e.name, "' is stored but its sizes differ (",
                                e.compressed, " and ", e.size, "; corrupt zip)"));
    if (e.method == 8 && e.size / kMaxInflation > e.compressed)  // before any allocation
      fail(path,
           detail::concat("zip entry '", e.name, "' claims ", e.size, " bytes from ", e.compressed,
                          " deflated ones (more than deflate can expand to; "
                          "corrupt zip)"));
    if (e.local_offset > offset || e.compressed > offset - e.local_offset)
      fail(path,
           detail::concat("zip entry '", e.name, "' (", e.compressed, " bytes at ", e.local_offset,
                          ") runs into the central directory at ", offset, " (corrupt zip)"));
    if (!by_name_.emplace(e.name, entries_.size()).second)
      fail(path, "zip entry '" + e.name + "' appears twice (corrupt zip)");
    entries_.push_back(std::move(e));
    p += kCentralBytes + name_len + extra_len + comment_len;
  }
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

void ZipArchive::read(const ZipEntry& e, void* dst, bool verify_crc) const {
  const std::string& path = path_;
  uint8_t h[kLocalBytes];
  if (directory_offset_ - e.local_offset < kLocalBytes)
    fail(path, "zip entry '" + e.name + "' has no room for its local header (corrupt zip)");
  io::parallel::pread_all(fd_, h, e.local_offset, kLocalBytes, path);
  if (u32(h) != kLocalSig || u16(h + 8) != e.method)
    fail(path, detail::concat("zip entry '", e.name, "' has a bad local header at ", e.local_offset,
                              " (corrupt zip)"));
  const uint64_t name_len = u16(h + 26), extra_len = u16(h + 28);
  const uint64_t data = e.local_offset + kLocalBytes + name_len + extra_len;
  if (data > directory_offset_ || e.compressed > directory_offset_ - data)
    fail(path, detail::concat("zip entry '", e.name, "' (", e.compressed, " bytes at ", data,
                              ") runs into the central directory (truncated or corrupt zip)"));
  std::string local_name(name_len, '\0');
  io::parallel::pread_all(fd_, local_name.data(), e.local_offset + kLocalBytes, name_len, path);
  if (local_name != e.name)
    fail(path,
         "zip entry '" + e.name + "' has local header name '" + local_name + "' (corrupt zip)");
  if (e.method == 0) {
    io::parallel::pread_all(fd_, dst, data, e.size, path);
  } else {
    std::vector<uint8_t> packed(e.compressed);
    io::parallel::pread_all(fd_, packed.data(), data, e.compressed, path);
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) fail(path, "zlib could not start inflating");
    z.next_in = packed.data();
    z.next_out = static_cast<Bytef*>(dst);
    uint64_t in_left = packed.size(), out_left = e.size;
    int rc = Z_OK;
    while (rc == Z_OK) {  // zlib counts in uInt: feed at most 1 GiB at a time
      const uInt in = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
      const uInt out = static_cast<uInt>(std::min<uint64_t>(out_left, 1u << 30));
      z.avail_in = in, z.avail_out = out;
      rc = inflate(&z, Z_NO_FLUSH);
      in_left -= in - z.avail_in, out_left -= out - z.avail_out;
      if (rc == Z_OK && z.avail_in == in && z.avail_out == out) rc = Z_BUF_ERROR;  // stuck
      if (rc == Z_OK && out_left == 0) {  // full: the stream must end here
        uint8_t probe;
        z.next_out = &probe, z.avail_out = 1;
        z.avail_in = static_cast<uInt>(std::min<uint64_t>(in_left, 1u << 30));
        rc = inflate(&z, Z_NO_FLUSH);
        if (rc != Z_STREAM_END) rc = Z_DATA_ERROR;
      }
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END || out_left != 0)
      fail(path, detail::concat("zip entry '", e.name, "' does not inflate to its ", e.size,
                                " bytes (corrupt data)"));
  }
  if (!verify_crc) return;
  // CRC-32 of 4 MiB chunks on the thread pool, combined in order (zlib's crc32_combine).
  constexpr uint64_t kChunk = uint64_t{4} << 20;
  const uint64_t chunks = std::max<uint64_t>((e.size + kChunk - 1) / kChunk, 1);
  std::vector<uLong> crcs(chunks);
  const auto* bytes = static_cast<const Bytef*>(dst);
  core::parallel_for(static_cast<int64_t>(chunks), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t at = static_cast<uint64_t>(i) * kChunk;
      crcs[static_cast<size_t>(i)] =
          crc32_z(crc32_z(0, nullptr, 0), bytes + at, std::min(kChunk, e.size - at));
    }
  });
  uLong crc = crcs[0];
  for (uint64_t i = 1; i < chunks; ++i)
    crc = crc32_combine(crc, crcs[i], static_cast<z_off_t>(std::min(kChunk, e.size - i * kChunk)));
  if (crc != e.crc)
    fail(path, detail::concat("zip entry '", e.name, "' fails its CRC-32 check (corrupt data)"));
}

}  // namespace ember::io::pth
