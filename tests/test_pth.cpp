// tests/test_pth.cpp — io::load_pth and io::pth_catalogue on files written by torch.save
// (Debian's torch 1.13, tests/gen_pth_fixtures.py, tests/data/pth/; torch 2.11's in
// tests/data/pth_torch2/) and on bad files: every refusal an ember::Error naming the file and
// the problem.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ember/io/pth.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using nlohmann::json;

std::string pth(const std::string& name) { return ember_test::data_dir() + "/pth/" + name; }

const json& pth_expected() {
  static const json e = [] {
    std::ifstream in(pth("expected.json"));
    return json::parse(in);
  }();
  return e;
}

// A tensor's values as doubles (exact for every dtype the fixtures use).
std::vector<double> stored_values(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (c.dtype()) {
      case DType::f32: v[i] = static_cast<const float*>(c.data_ptr())[i]; break;
      case DType::f64: v[i] = static_cast<const double*>(c.data_ptr())[i]; break;
      case DType::f16: v[i] = static_cast<const Half*>(c.data_ptr())[i]; break;
      case DType::bf16: v[i] = static_cast<const BFloat16*>(c.data_ptr())[i]; break;
      case DType::i32: v[i] = static_cast<const int32_t*>(c.data_ptr())[i]; break;
      case DType::i64:
        v[i] = static_cast<double>(static_cast<const int64_t*>(c.data_ptr())[i]);
        break;
      case DType::u8: v[i] = static_cast<const uint8_t*>(c.data_ptr())[i]; break;
      case DType::boolean: v[i] = static_cast<const uint8_t*>(c.data_ptr())[i]; break;
    }
  }
  return v;
}

DType ember_dtype(const std::string& torch) {
  if (torch == "float32") return DType::f32;
  if (torch == "float64") return DType::f64;
  if (torch == "float16") return DType::f16;
  if (torch == "bfloat16") return DType::bf16;
  if (torch == "int64") return DType::i64;
  if (torch == "uint8") return DType::u8;
  if (torch == "bool") return DType::boolean;
  return DType::i32;  // int32, and int16/int8 widened
}

// The file's state dict equals what torch held: names in order, dtypes, shapes, values.
void expect_matches(const std::string& file, const nn::StateDict& sd,
                    const std::string& prefix = "", const json& fixtures = pth_expected()) {
  const json& want = fixtures.at(file);
  std::vector<std::string> names;
  for (const auto& n : want.at("order")) {
    const std::string s = n.get<std::string>();
    if (s.rfind(prefix, 0) == 0) names.push_back(s.substr(prefix.size()));
  }
  ASSERT_EQ(sd.size(), names.size()) << file;
  for (size_t i = 0; i < sd.size(); ++i) {
    const auto& [name, t] = sd[i];
    EXPECT_EQ(name, names[i]) << file;
    const json& w = want.at("tensors").at(prefix + name);
    EXPECT_EQ(t.dtype(), ember_dtype(w.at("dtype"))) << file << " " << name;
    EXPECT_EQ(t.shape().vec(), w.at("shape").get<std::vector<int64_t>>()) << file << " " << name;
    if (name != "expanded") EXPECT_TRUE(t.is_contiguous()) << file << " " << name;
    EXPECT_EQ(stored_values(t), w.at("data").get<std::vector<double>>()) << file << " " << name;
  }
}

// Expects `fn` to throw an ember::Error naming `path` and containing each of `parts`.
template <typename Fn>
void expect_refused(const std::string& path, Fn&& fn, std::initializer_list<const char*> parts) {
  const std::string msg = error_of(fn, path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  for (const char* p : parts)
    EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

TEST(Pth, LinearBatchNormStateDictLoadsIntoTheModule) {
  const nn::StateDict sd = io::load_pth(pth("linear_bn.pth"));
  expect_matches("linear_bn.pth", sd);
  nn::Sequential net(std::vector<nn::Module>{nn::Linear(3, 2), nn::BatchNorm1d(2)});
  const nn::LoadReport r = net->load_state_dict(sd);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.applied.size(), 7u);
  std::map<std::string, Tensor> by;
  for (const auto& [name, t] : net->state_dict()) by[name] = t;
  EXPECT_EQ(stored_values(by["1.num_batches_tracked"]), std::vector<double>{1});
  EXPECT_EQ(stored_values(by["1.running_var"]),
            pth_expected()["linear_bn.pth"]["tensors"]["1.running_var"]["data"]
                .get<std::vector<double>>());
}

TEST(Pth, EverySupportedDtype) {
  const nn::StateDict sd = io::load_pth(pth("dtypes.pth"));
  expect_matches("dtypes.pth", sd);  // int16 and int8 widened to i32, exactly
  const io::PthCatalogue c = io::pth_catalogue(pth("dtypes.pth"));
  std::map<std::string, std::string> torch_dtype;
  for (const auto& t : c.tensors) torch_dtype[t.name] = t.torch_dtype;
  EXPECT_EQ(torch_dtype["i8"], "int8");
  EXPECT_EQ(torch_dtype["i16"], "int16");
  EXPECT_EQ(torch_dtype["bf16"], "bfloat16");
  EXPECT_EQ(torch_dtype["bool"], "bool");
}

TEST(Pth, ViewsAreCopiedOutAndOneViewIsOneTensor) {
  const nn::StateDict sd = io::load_pth(pth("views.pth"));
  expect_matches("views.pth", sd);  // transposed, narrowed, strided, offset rows
  std::map<std::string, Tensor> by;
  for (const auto& [n, t] : sd) by[n] = t;
  EXPECT_EQ(by["tied_a"].data_ptr(), by["tied_b"].data_ptr());  // tied weights stay tied
  EXPECT_NE(by["row"].data_ptr(), by["whole"].data_ptr());
  // An expanded view (stride 0) past 4x its storage stays a view of the 2 elements, as in torch.
  EXPECT_EQ(by["expanded"].strides().vec(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(by["expanded"].storage()->bytes(), 2u * 4u);
}

TEST(Pth, CatalogueListsViewsWithoutReadingData) {
  ember_test::ScratchDir dir;
  std::vector<uint8_t> bytes = ember_test::read_bytes(pth("views.pth"));
  // Corrupt every storage byte (the entries after data.pkl): the catalogue never reads them.
  const io::PthCatalogue good = io::pth_catalogue(pth("views.pth"));
  const std::string path = dir.file("views.pth");
  const std::string marker = "views/data/0";
  auto at = std::search(bytes.begin(), bytes.end(), marker.begin(), marker.end());
  ASSERT_NE(at, bytes.end());
  // torch pads the local header's extra field so that the data starts 64-byte aligned.
  const size_t data = (static_cast<size_t>(at - bytes.begin()) + marker.size() + 4 + 63) / 64 * 64;
  bytes[data + 4] ^= 0xff;
  ember_test::write_bytes(path, bytes);
  const io::PthCatalogue c = io::pth_catalogue(path);
  EXPECT_EQ(c.archive, "views");
  EXPECT_EQ(c.storage_count, 3u);
  EXPECT_EQ(c.data_bytes, (24u + 12u + 2u) * 4u);
  ASSERT_EQ(c.tensors.size(), good.tensors.size());
  for (const io::PthTensorInfo& t : c.tensors) {
    const json& w = pth_expected()["views.pth"]["tensors"][t.name];
    EXPECT_EQ(t.shape.vec(), w["shape"].get<std::vector<int64_t>>()) << t.name;
    EXPECT_EQ(t.stride, w["stride"].get<std::vector<int64_t>>()) << t.name;
    EXPECT_EQ(t.storage_offset, w["offset"].get<int64_t>()) << t.name;
    EXPECT_EQ(t.dtype, DType::f32);
  }
  expect_refused(path, [&] { io::load_pth(path); }, {"CRC-32"});
  EXPECT_EQ(io::load_pth(path, {.verify_crc = false}).size(), c.tensors.size());
}

TEST(Pth, NestedCheckpointByKeyOrFlattened) {
  const std::string path = pth("nested.pth");
  const nn::StateDict model = io::load_pth(path, {.key = "model"});
  expect_matches("nested.pth", model, "model.");
  nn::Sequential net(std::vector<nn::Module>{nn::Linear(3, 2), nn::BatchNorm1d(2)});
  EXPECT_TRUE(net->load_state_dict(model).ok());
  expect_matches("nested.pth", io::load_pth(path));  // model.*, optimizer.state.N.exp_avg, ...
  const io::PthCatalogue c = io::pth_catalogue(path);
  EXPECT_EQ(c.values["epoch"], 3);
  EXPECT_EQ(c.values["best"], 0.25);
  EXPECT_EQ(c.values["name"], "run-1");
  EXPECT_EQ(c.values["done"], false);
  EXPECT_TRUE(c.values["note"].is_null());
  EXPECT_EQ(c.values["optimizer.param_groups.0.lr"], 0.01);
  EXPECT_EQ(c.values["optimizer.param_groups.0.params.3"], 3);
  expect_refused(path, [&] { io::load_pth(path, {.key = "weights"}); },
                 {"no tensors under key 'weights'", "'model', 'optimizer'"});
}

TEST(Pth, ProtocolFourParametersDevicesBareTensorsAndDeflatedZips) {
  expect_matches("protocol4.pth", io::load_pth(pth("protocol4.pth")));      // FRAME, MEMOIZE, ...
  expect_matches("parameter.pth", io::load_pth(pth("parameter.pth")));      // _rebuild_parameter
  EXPECT_EQ(io::pth_catalogue(pth("parameter.pth")).values["dev"], "cpu");  // torch.device
  const nn::StateDict bare = io::load_pth(pth("bare_tensor.pth"));
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0].first, "");
  expect_matches("bare_tensor.pth", bare);
  // Another top folder, deflated entries, byteorder "little", two views of one storage.
  expect_matches("deflated.pth", io::load_pth(pth("deflated.pth")));
  EXPECT_EQ(io::pth_catalogue(pth("deflated.pth")).storage_count, 1u);
  // Sizes and offsets in zip64 extra fields, the end record's fields saturated (files > 4 GiB).
  expect_matches("zip64.pth", io::load_pth(pth("zip64.pth")));
}

// The same objects saved by torch 2.11 (the GPU machine's; EMBER_PTH_OUT=tests/data/pth_torch2
// python3 tests/gen_pth_fixtures.py) read alike: names, dtypes, shapes and values.
TEST(Pth, FilesWrittenByTorch2ReadAlike) {
  const std::string dir = ember_test::data_dir() + "/pth_torch2/";
  std::ifstream in(dir + "expected.json");
  ASSERT_TRUE(in) << "fixture missing: " << dir << "expected.json";
  const json want = json::parse(in);
  ASSERT_GE(want.size(), 9u);
  for (const auto& [file, tensors] : want.items()) {
    SCOPED_TRACE(file);
    expect_matches(file, io::load_pth(dir + file), "", want);
    EXPECT_EQ(io::pth_catalogue(dir + file).tensors.size(), tensors.at("order").size());
  }
}

TEST(Pth, BadFilesAreClearErrors) {
  struct Case {
    const char* file;
    std::initializer_list<const char*> parts;
  };
  const Case cases[] = {
      {"evil_global.pth", {"archive/data.pkl, offset 169: global 'posix.system' is not allowed"}},
      {"unknown_opcode.pth", {"archive/data.pkl, offset 5: unknown pickle opcode 0xff"}},
      {"set_opcode.pth", {"pickle opcode EMPTY_SET (0x8f) is not one ember reads"}},
      {"offset_out_of_range.pth",
       {"tensor 'w'", "reaches element 12 of storage '0'", "out of range"}},
      {"stride_out_of_range.pth", {"tensor 'w'", "reaches element 13", "out of range"}},
      {"storage_size.pth", {"storage '0'", "has a data entry of 48 bytes"}},
      {"missing_storage.pth", {"storage '7' has no data entry"}},
      {"big_endian.pth", {"'big'-endian"}},
      {"complex_storage.pth", {"global 'torch.ComplexFloatStorage'", "no dtype for"}},
      {"torchscript.pth", {"a TorchScript archive (torch.jit.save)", "state_dict()"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    expect_refused(
        pth(c.file), [&] { io::load_pth(pth(c.file)); }, c.parts);
    expect_refused(
        pth(c.file), [&] { io::pth_catalogue(pth(c.file)); }, c.parts);
  }
  expect_refused("/nonexistent/x.pth", [] { io::load_pth("/nonexistent/x.pth"); }, {"cannot open"});
  expect_refused(pth("expected.json"), [] { io::load_pth(pth("expected.json")); },
                 {"not a zip archive"});
}

TEST(Pth, TruncatedAtEveryByteIsAClearError) {
  ember_test::ScratchDir dir;
  const std::vector<uint8_t> bytes = ember_test::read_bytes(pth("linear_bn.pth"));
  const std::string path = dir.file("cut.pth");
  for (size_t n = 0; n < bytes.size(); ++n) {
    ember_test::write_bytes(path, bytes.data(), n);
    const std::string msg = error_of([&] { io::load_pth(path); }, detail::concat(n, " bytes"));
    ASSERT_NE(msg.find(path), std::string::npos) << msg;
  }
  ember_test::write_bytes(path, bytes.data(), bytes.size() - 1);
  expect_refused(path, [&] { io::load_pth(path); }, {"not a zip archive", "truncated"});
}

TEST(Pth, CorruptZipDirectoryAndPickleBytesNeverCrash) {
  ember_test::ScratchDir dir;
  const std::vector<uint8_t> good = ember_test::read_bytes(pth("linear_bn.pth"));
  const std::string path = dir.file("bad.pth");
  // The end record's directory offset pointed past the file.
  std::vector<uint8_t> bytes = good;
  const size_t end = bytes.size() - 22;
  ASSERT_EQ(bytes[end], 'P');
  bytes[end + 16] = bytes[end + 17] = bytes[end + 18] = bytes[end + 19] = 0x7f;
  ember_test::write_bytes(path, bytes);
  expect_refused(path, [&] { io::load_pth(path); }, {"corrupt zip"});
  // A deflated entry claiming far more bytes than its deflated ones can make.
  bytes = ember_test::read_bytes(pth("deflated.pth"));
  const std::string name = "my_model/data/s";
  auto local = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  auto central = std::search(local + 1, bytes.end(), name.begin(), name.end());
  ASSERT_NE(central, bytes.end());
  const size_t size_at = static_cast<size_t>(central - bytes.begin()) - 46 + 24;
  bytes[size_at + 3] = 0x7f;  // 2 GB from a few dozen bytes
  ember_test::write_bytes(path, bytes);
  expect_refused(path, [&] { io::load_pth(path); }, {"my_model/data/s", "more than deflate can"});
  // Every byte of the directory and of data.pkl flipped in turn (CRC off so the pickle is
  // interpreted): each file loads or is refused with an ember::Error.
  const std::string pkl = "linear_bn/data.pkl";
  const size_t pkl_at =
      static_cast<size_t>(std::search(good.begin(), good.end(), pkl.begin(), pkl.end()) -
                          good.begin()) +
      pkl.size();
  int refused = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    if (i > pkl_at + 800 && i < good.size() - 700) continue;  // storage bytes: only values
    bytes = good;
    bytes[i] ^= 0xff;
    ember_test::write_bytes(path, bytes);
    try {
      io::load_pth(path, {.verify_crc = false});
    } catch (const Error& e) {
      ++refused;
      ASSERT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(refused, 100);
}

}  // namespace
