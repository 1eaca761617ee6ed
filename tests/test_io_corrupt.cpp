// tests/test_io_corrupt.cpp — the bad-file corpus (ARCHITECTURE §7, "Loading checks").
//
// Built here from small valid files: truncation at every byte, bit flips in the header and
// in the data, a huge header length, overflowing shapes, overlapping, out-of-range and
// holey offsets, duplicate names, unknown dtypes, unknown kind or version, non-string
// metadata, malformed ember.* metadata, non-JSON headers. Every file must be refused with an
// ember::Error naming the file and the problem (asserted on message substrings), by every
// reader (tests/io_load_all.hpp); nothing may crash. This suite also runs under ASan+UBSan
// (the ember_io_tests binary of the EMBER_SANITIZE build).
#include <gtest/gtest.h>

#include "io_load_all.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::load_all;
using ember_test::raw_safetensors;
using ember_test::ScratchDir;
using nlohmann::ordered_json;

// A valid checkpoint of the fixture (every kind of metadata) and its parts.
struct ValidFile {
  std::vector<uint8_t> bytes;
  uint64_t header_len = 0;
  ordered_json header;
  std::vector<uint8_t> data;
};

ValidFile make_valid(const ScratchDir& dir, bool checkpoint) {
  manual_seed(3);
  ember_test::IoFixture fx;
  fx.step();
  const std::string path = dir.file("valid.safetensors");
  if (checkpoint)
    io::save_checkpoint(path, fx.model, *fx.optimizer, fx.scheduler.get(), 1, {{"k", 1}},
                        fx.loader.get());
  else
    io::save_model(fx.model, path);
  ValidFile v;
  v.bytes = ember_test::read_bytes(path);
  std::memcpy(&v.header_len, v.bytes.data(), 8);
  v.header = ordered_json::parse(v.bytes.begin() + 8,
                                 v.bytes.begin() + 8 + static_cast<std::ptrdiff_t>(v.header_len));
  v.data.assign(v.bytes.begin() + 8 + static_cast<std::ptrdiff_t>(v.header_len), v.bytes.end());
  return v;
}

// The file with its header replaced by `header` (data unchanged, so the checksum holds).
std::vector<uint8_t> with_header(const ValidFile& v, const ordered_json& header) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return raw_safetensors(text, v.data);
}

// Writes `bytes`, reads them every way; every reader must refuse with a message naming the
// file and containing each of `parts` (when `every_reader`; otherwise at least one reader).
void expect_refused(const ScratchDir& dir, const std::vector<uint8_t>& bytes,
                    const std::vector<std::string>& parts, const std::string& what,
                    bool every_reader = true) {
  SCOPED_TRACE(what);
  const std::string path = dir.file("bad.safetensors");
  ember_test::write_bytes(path, bytes);
  const std::vector<std::string> errors = load_all(path);
  ASSERT_FALSE(errors.empty()) << "the file was accepted by every reader";
  if (every_reader) {
    EXPECT_EQ(errors.size(), 6u) << "some reader accepted it; first error: " << errors[0];
  }
  bool any = false;
  for (const std::string& msg : errors) {
    EXPECT_NE(msg.find(path), std::string::npos) << "the message does not name the file: " << msg;
    bool all = true;
    for (const std::string& p : parts) all = all && msg.find(p) != std::string::npos;
    any = any || all;
    if (every_reader) {
      for (const std::string& p : parts)
        EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    }
  }
  EXPECT_TRUE(any) << "no message has all of the expected parts; first: " << errors[0];
}

TEST(IoCorrupt, ValidFilesLoadEveryWay) {
  ScratchDir dir;
  for (bool checkpoint : {false, true}) {
    const ValidFile v = make_valid(dir, checkpoint);
    const std::string path = dir.file("ok.safetensors");
    ember_test::write_bytes(path, v.bytes);
    const auto errors = load_all(path);
    // A model file is not a checkpoint; everything else accepts both.
    EXPECT_EQ(errors.size(), checkpoint ? 0u : 1u) << (errors.empty() ? "" : errors[0]);
  }
}

TEST(IoCorrupt, TruncationAtEveryByte) {
  ScratchDir dir;
  const ValidFile v = make_valid(dir, true);
  const uint64_t data_start = 8 + v.header_len;
  for (size_t k = 0; k < v.bytes.size(); ++k) {
    const std::vector<uint8_t> cut(v.bytes.begin(),
                                   v.bytes.begin() + static_cast<std::ptrdiff_t>(k));
    const std::string why = k < 8            ? "not a safetensors file"
                            : k < data_start ? "runs past the end of the file"
                                             : "truncated";
    expect_refused(
        dir, cut, {why},
        "truncated to " + std::to_string(k) + " of " + std::to_string(v.bytes.size()) + " bytes");
    if (::testing::Test::HasFailure()) return;  // one truncation point is enough to read
  }
}

TEST(IoCorrupt, BitFlipsInTheData) {
  ScratchDir dir;
  const ValidFile v = make_valid(dir, true);
  const uint64_t data_start = 8 + v.header_len;
  for (size_t i = data_start; i < v.bytes.size(); ++i) {
    std::vector<uint8_t> b = v.bytes;
    b[i] ^= static_cast<uint8_t>(1u << (i % 8));
    const std::string path = dir.file("flip.safetensors");
    ember_test::write_bytes(path, b);
    // Readers that check the checksum refuse; inspect (which does not) still works.
    ember_test::IoFixture fx;
    ember_test::expect_error([&] { io::load_model(path); }, {path, "checksum mismatch"},
                             "data byte " + std::to_string(i));
    ember_test::expect_error([&] { io::load_state(fx.model, path); }, {path, "checksum mismatch"});
    ember_test::expect_error(
        [&] { io::load_checkpoint(path, fx.model, *fx.optimizer, fx.scheduler.get()); },
        {path, "checksum mismatch"});
    EXPECT_NO_THROW(io::inspect(path));
  }
}

// Any bit of the header flipped: the file is refused with an ember::Error, or (a flip in a
// provenance string, say) it loads with exactly the original values.
TEST(IoCorrupt, BitFlipsInTheHeader) {
  ScratchDir dir;
  const ValidFile v = make_valid(dir, false);
  ember_test::IoFixture reference;
  {
    const std::string ok = dir.file("ok.safetensors");
    ember_test::write_bytes(ok, v.bytes);
    io::load_state(reference.model, ok);
  }
  int refused = 0, loaded = 0;
  const std::string path = dir.file("flip.safetensors");
  for (size_t i = 0; i < 8 + v.header_len; ++i) {
    for (int bit = 0; bit < 8;
         bit += (i < 8 ? 1 : 3)) {  // every bit of the length, 3 of 8 elsewhere
      std::vector<uint8_t> b = v.bytes;
      b[i] ^= static_cast<uint8_t>(1u << bit);
      ember_test::write_bytes(path, b);
      try {
        nn::Module m = io::load_model(path);
        ember_test::expect_same_state(reference.model, m, std::nullopt,
                                      "header byte " + std::to_string(i));
        ++loaded;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        ++refused;
      }
      (void)load_all(path);  // no reader may crash or throw anything but ember::Error
    }
  }
  EXPECT_GT(refused, 100);
  std::cout << "[ header bit flips: " << refused << " refused, " << loaded
            << " loaded unchanged ]\n";
}

TEST(IoCorrupt, HeaderLength) {
  ScratchDir dir;
  const ValidFile v = make_valid(dir, false);
  for (uint64_t n :
       {uint64_t{1} << 63, ~uint64_t{0}, uint64_t{100} * 1024 * 1024 + 1, uint64_t{1} << 40}) {
    std::vector<uint8_t> b = v.bytes;
    std::memcpy(b.data(), &n, 8);
    expect_refused(dir, b, {"header length", "over the 100 MB limit"},
                   "header length " + std::to_string(n));
  }
  std::vector<uint8_t> b = v.bytes;
  const uint64_t past = b.size() - 7;
  std::memcpy(b.data(), &past, 8);
  expect_refused(dir, b, {"runs past the end of the file"}, "header length past the end");
  for (uint64_t n : {uint64_t{0}, uint64_t{1}}) {
    std::memcpy(b.data(), &n, 8);
    expect_refused(dir, b, {"not a safetensors file"}, "header length " + std::to_string(n));
  }
  expect_refused(dir, {}, {"not a safetensors file", "0 bytes"}, "empty file");
  const std::string missing = dir.file("does-not-exist.safetensors");
  ember_test::expect_error([&] { io::load_model(missing); }, {missing, "cannot open"});
  ember_test::expect_error([&] { io::load_model(dir.path); }, {dir.path, "not a regular file"});
}

// Hand-written headers over a data section of `data_bytes` zero bytes.
void expect_header_refused(const ScratchDir& dir, const std::string& header, size_t data_bytes,
                           const std::vector<std::string>& parts) {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  expect_refused(dir, raw_safetensors(h, std::vector<uint8_t>(data_bytes)), parts, header);
}

TEST(IoCorrupt, Shapes) {
  ScratchDir dir;
  expect_header_refused(
      dir, R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,16]}})", 16,
      {"'a'", "element count overflows"});
  expect_header_refused(
      dir, R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", 16,
      {"'a'", "element count overflows"});
  expect_header_refused(
      dir, R"({"a":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,16]}})", 16,
      {"'a'", "element count overflows"});
  expect_header_refused(
      dir, R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,16]}})", 16,
      {"'a'", "byte size overflows"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})", 16,
                        {"'a'", "negative or non-integer size"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})", 16,
                        {"'a'", "negative or non-integer size"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":"4","data_offsets":[0,16]}})", 16,
                        {"'a'", "bad shape"});
  expect_header_refused(
      dir,
      R"({"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}})",
      8, {"'a'", "bad shape"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16,
                        {"'a' has 16 bytes but shape [3] F32 needs 12"});
}

TEST(IoCorrupt, Offsets) {
  ScratchDir dir;
  expect_header_refused(
      dir,
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12, {"'b' overlaps the previous tensor"});
  expect_header_refused(
      dir,
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
      8, {"overlaps the previous tensor"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1000]}})", 8,
                        {"'a' runs past the data", "truncated"});
  expect_header_refused(
      dir, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,0]}})", 8,
      {"'a' ends before it begins"});
  expect_header_refused(
      dir,
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615]}})",
      8, {"'a' runs past the data"});
  expect_header_refused(
      dir,
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      12, {"a hole of 4 bytes before entry 'b'"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8,
                        {"a hole of 4 bytes before entry 'a'"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12,
                        {"8 bytes after the last tensor"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4,
                        {"'a' has bad data_offsets"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", 4,
                        {"'a' has bad data_offsets"});
  expect_header_refused(dir, R"({"a":{"dtype":"F32","shape":[1]}})", 4,
                        {"'a' needs dtype, shape and data_offsets"});
  expect_header_refused(dir, R"({"a":[1,2,3]})", 4, {"'a' needs dtype, shape and data_offsets"});
}

TEST(IoCorrupt, NamesAndDtypes) {
  ScratchDir dir;
  expect_header_refused(
      dir,
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8, {"duplicate name 'a'"});
  expect_header_refused(dir, R"({"__metadata__":{"format":"pt","format":"pt"}})", 0,
                        {"duplicate name 'format'"});
  expect_header_refused(dir, R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 8,
                        {"'a' has unknown dtype \"F8_E4M3\"", "expected F32"});
  expect_header_refused(dir, R"({"a":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 8,
                        {"'a' has unknown dtype 32"});
}

TEST(IoCorrupt, HeaderSyntax) {
  ScratchDir dir;
  expect_header_refused(dir, R"({"a":{"dtype":"F32",)", 0, {"not valid JSON"});
  expect_header_refused(dir, R"({} trailing)", 0, {"not valid JSON"});
  expect_header_refused(dir, "{\"\xff\xfe\":1}", 0, {"not valid JSON"});
  expect_header_refused(dir, R"([{"a":1}])", 0, {"does not start with '{'"});
  expect_header_refused(dir, "  {}", 0, {"does not start with '{'"});
  expect_header_refused(dir, R"({"__metadata__":["format","pt"]})", 0,
                        {"__metadata__ is not an object of strings"});
  expect_header_refused(dir, R"({"__metadata__":{"format":"pt","n":1}})", 0,
                        {"metadata value of 'n' is not a string (got 1)"});
  expect_header_refused(dir, R"({"__metadata__":{"x":{"y":"z"}}})", 0,
                        {"metadata value of 'x' is not a string"});
  expect_header_refused(dir, R"({"__metadata__":{"x":null}})", 0,
                        {"metadata value of 'x' is not a string"});
}

TEST(IoCorrupt, KindAndVersion) {
  ScratchDir dir;
  const ValidFile v = make_valid(dir, true);
  ordered_json h = v.header;
  h["__metadata__"]["ember.format_version"] = "3";
  expect_refused(dir, with_header(v, h),
                 {"ember.format_version 3 is not supported", "reads versions 1 and 2"},
                 "version 3");
  h["__metadata__"]["ember.format_version"] = "1.0";
  expect_refused(dir, with_header(v, h), {"ember.format_version 1.0 is not supported"},
                 "version 1.0");
  h = v.header;
  h["__metadata__"]["ember.kind"] = "optimizer";
  expect_refused(dir, with_header(v, h),
                 {"unknown ember.kind 'optimizer'", "expected model or checkpoint"}, "kind");
}

// Files whose safetensors layer is sound but whose ember.* metadata is not what ember wrote
// (the header is not covered by the checksum). At least the readers that use the key refuse.
TEST(IoCorrupt, MalformedEmberMetadata) {
  ScratchDir dir;
  const ValidFile v = make_valid(dir, true);
  struct Case {
    std::string key, value, expect;
  };
  const std::vector<Case> cases = {
      {"ember.architecture", "{not json", "'ember.architecture' is not valid JSON"},
      {"ember.architecture", "[1,2]", "architecture"},
      {"ember.architecture", R"({"type":"NoSuchLayer"})", "NoSuchLayer"},
      {"ember.architecture", R"({"type":7})", "architecture"},
      {"ember.architecture",
       R"({"type":"Linear","options":{"in_features":"three","out_features":2}})", "architecture"},
      {"ember.architecture", R"({"type":"Linear","options":{"in_features":-3,"out_features":2}})",
       "architecture"},
      {"ember.architecture",
       R"({"type":"Sequential","children":[{"type":"Linear","options":{"in_features":3,"out_features":2}}]})",
       "does not match the model"},
      {"ember.tied", R"({"0.weight":5})", "ember.tied"},
      {"ember.tied", R"([1])", "ember.tied"},
      {"ember.dtypes", R"({"0.weight":["f32"]})", "ember.dtypes"},
      {"ember.buffers", R"({"a":1})", "ember.buffers"},
      {"ember.optimizer", "3", "optimizer"},
      {"ember.optimizer", R"({"type":"SGD"})", "optimizer"},
      {"ember.scheduler", "[]", "scheduler"},
      {"ember.scheduler", R"({"type":"CosineAnnealingLR"})", "scheduler"},
      {"ember.rng", R"({"seed":"x","offset":"1"})", "ember.rng"},
      {"ember.rng", R"({"seed":1})", "ember.rng"},
      {"ember.rng", R"({"seed":"99999999999999999999999","offset":"0"})", "ember.rng"},
      {"ember.step", "three", "ember.step"},
      {"ember.step", "", "ember.step"},
      {"ember.dataloader", R"({"epoch":"0","position":1})", "ember.dataloader"},
      {"ember.dataloader", R"({"epoch":0,"position":99})", "ember.dataloader"},
      {"ember.dataloader", "null", "ember.dataloader"},
      {"ember.dataloader", R"({"epoch":0,"position":1,"batch_size":2})", "ember.dataloader"},
      {"ember.dataloader",
       R"({"epoch":0,"position":1,"size":4,"batch_size":2,"shuffle":false,"drop_last":false,"seed":7})",
       "ember.dataloader"},
      {"ember.dataloader",
       R"({"epoch":0,"position":1,"size":4,"batch_size":2,"shuffle":false,"drop_last":false,"seed":"x"})",
       "ember.dataloader"},
      {"ember.extra", "{", "ember.extra"},
  };
  for (const Case& c : cases) {
    ordered_json h = v.header;
    h["__metadata__"][c.key] = c.value;
    expect_refused(dir, with_header(v, h), {c.expect}, c.key + " = " + c.value,
                   /*every_reader=*/false);
  }
}

}  // namespace
