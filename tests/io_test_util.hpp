// tests/io_test_util.hpp — shared helpers of the checkpoint tests (tests/test_io_*.cpp):
// a scratch folder, raw file bytes, hand-built safetensors files, bitwise state comparison.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/module.hpp"
#include "error_of.hpp"

namespace ember_test {

// The checkpoint tests name it ember_test::expect_error (tests/error_of.hpp).
using ember::test_util::expect_error;

/// A fresh folder under $TMPDIR (or /tmp), removed with everything in it at scope exit.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ember_io_XXXXXX";
    path = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
    EXPECT_FALSE(path.empty()) << "mkdtemp failed";
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return path + "/" + name; }
  /// Names of the entries of the folder (temporary files included), sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Writes `text` to `path` as it is (binary).
inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline void write_bytes(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}
inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_bytes(path, bytes.data(), bytes.size());
}

/// A safetensors file from a header text and a data section, exactly as given (no padding,
/// no validation): the 8-byte little-endian length, the header, the data.
inline std::vector<uint8_t> raw_safetensors(const std::string& header,
                                            const std::vector<uint8_t>& data) {
  // Sized once and filled with memcpy (GCC 12's -Warray-bounds misfires on vector::insert here).
  std::vector<uint8_t> out(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  if (!header.empty()) std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

/// A contiguous CPU tensor's bytes.
inline std::vector<uint8_t> tensor_bytes(const ember::Tensor& t) {
  ember::Tensor c = t.to(ember::Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p,
                              p + c.numel() * static_cast<int64_t>(ember::element_size(c.dtype())));
}

/// What a stored tensor reads back as: floating tensors pass through `storage` and back.
inline ember::Tensor stored_value(const ember::Tensor& t, std::optional<ember::DType> storage) {
  if (!storage || !ember::is_floating(t.dtype()) || t.dtype() == *storage) return t;
  return t.to(*storage).to(t.dtype());
}

/// Every state_dict entry of `got` has the name, dtype and shape of `want`'s, and the bytes
/// of want's value after the storage round trip. Reports the first mismatches by name.
inline void expect_same_state(const ember::nn::Module& want, const ember::nn::Module& got,
                              std::optional<ember::DType> storage = std::nullopt,
                              const std::string& what = "") {
  const ember::nn::StateDict a = want->state_dict(), b = got->state_dict();
  ASSERT_EQ(a.size(), b.size()) << what << ": state_dict sizes";
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(what + ": " + a[i].first);
    ASSERT_EQ(a[i].first, b[i].first);
    ASSERT_EQ(a[i].second.dtype(), b[i].second.dtype());
    ASSERT_EQ(a[i].second.shape(), b[i].second.shape());
    EXPECT_TRUE(tensor_bytes(stored_value(a[i].second, storage)) == tensor_bytes(b[i].second))
        << "values differ from the original after the "
        << (storage ? ember::dtype_name(*storage) : "f32") << " round trip";
  }
}

}  // namespace ember_test
