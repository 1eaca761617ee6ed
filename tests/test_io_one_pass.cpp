// tests/test_io_one_pass.cpp — the single-pass CPU load (Note [One pass on the CPU] in
// src/io/parallel_io.cpp, Note [Loading by exchange] in src/io/safetensors.cpp): a corrupt
// chunk leaves every destination bitwise unchanged; views sharing a parameter's storage see
// the loaded values; destinations that are not their whole storage (a slice, a transposed
// view, another dtype) load by copy with the rest of their storage untouched; tied names
// read once; optimizer state keyed by parameter survives a load; load_model reads straight
// into the module it builds. Runs on version-1 files too (unit.io_format_v1), where the
// load verifies first and then copies: every guarantee but the exchange itself holds there.
#include <gtest/gtest.h>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::ScratchDir;
using ember_test::tensor_bytes;

bool version_two(const std::string& path) { return io::inspect(path).format_version == "2"; }

// The bytes of the data section's `at`-th byte flipped, written to `bad`.
void write_flipped(const std::string& good, const std::string& bad, uint64_t at) {
  std::vector<uint8_t> bytes = ember_test::read_bytes(good);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  bytes[8 + header + at] ^= 0x40;
  ember_test::write_bytes(bad, bytes);
}

TEST(IoOnePass, ACorruptChunkLeavesEveryDestinationUnchanged) {
  ScratchDir dir;
  manual_seed(31);
  // 2100 × 2048 f32 weights (two checksum chunks) and a bias: the flip is in the last chunk,
  // so the weights' first chunk and the bias were read and hashed before it was met.
  const nn::Module net = nn::Linear(2048, 2100);
  const std::string path = dir.file("m.safetensors"), bad = dir.file("bad.safetensors");
  io::save_model(net, path);
  const uint64_t data = io::SafetensorsFile(path).data_size();
  write_flipped(path, bad, data - 5);
  manual_seed(32);
  nn::Module target = nn::Linear(2048, 2100);
  const Tensor weight_view = target->parameters()[0].slice(0, 7, 9);
  std::vector<std::vector<uint8_t>> before;
  std::vector<void*> pointers;
  for (const Tensor& p : target->parameters()) {
    before.push_back(tensor_bytes(p));
    pointers.push_back(p.data_ptr());
  }
  const std::vector<uint8_t> view_before = tensor_bytes(weight_view);
  ember_test::expect_error([&] { io::load_state(target, bad); }, {bad, "checksum mismatch"});
  const std::vector<Tensor> params = target->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(tensor_bytes(params[i]), before[i]) << "parameter " << i << " changed";
    EXPECT_EQ(params[i].data_ptr(), pointers[i]) << "parameter " << i << " lost its buffer";
  }
  EXPECT_EQ(tensor_bytes(weight_view), view_before);
  // The same through load_into with destinations of every kind (exact, a slice, another
  // dtype): none changes.
  io::SafetensorsFile f(bad);
  Tensor big = zeros({2200, 2048});
  Tensor exact = zeros({2100, 2048}), sliced = big.slice(0, 50, 2150),
         wide = zeros({2100}, {.dtype = DType::f64});
  ember_test::expect_error(
      [&] {
        f.load_into({{"weight", exact}, {"weight", sliced}, {"bias", wide}}, true);
      },
      {"checksum mismatch"});
  EXPECT_EQ(count_nonzero(exact).item<int64_t>(), 0);
  EXPECT_EQ(count_nonzero(big).item<int64_t>(), 0);
  EXPECT_EQ(count_nonzero(wide).item<int64_t>(), 0);
}

TEST(IoOnePass, ViewsSharingAParameterSeeTheLoadedValues) {
  ScratchDir dir;
  manual_seed(33);
  const nn::Module source = nn::Linear(64, 48);
  const std::string path = dir.file("m.safetensors");
  io::save_model(source, path);
  manual_seed(34);
  nn::Module target = nn::Linear(64, 48);
  const Tensor weight = target->parameters()[0];
  const Tensor rows = weight.slice(0, 10, 20), flat = weight.reshape({48 * 64}),
               transposed = weight.transpose(0, 1);
  const void* old_pointer = weight.data_ptr();
  const uint64_t old_version = weight.version();
  io::load_state(target, path);
  const Tensor want = source->parameters()[0];
  EXPECT_EQ(tensor_bytes(weight), tensor_bytes(want));
  EXPECT_EQ(tensor_bytes(rows), tensor_bytes(want.slice(0, 10, 20)));
  EXPECT_EQ(tensor_bytes(flat), tensor_bytes(want.reshape({48 * 64})));
  EXPECT_EQ(tensor_bytes(transposed), tensor_bytes(want.transpose(0, 1)));
  EXPECT_GT(weight.version(), old_version) << "a load must bump the version";
  EXPECT_EQ(detail::TensorAccess::impl(target->parameters()[0]), detail::TensorAccess::impl(weight))
      << "the module's parameter is no longer the same tensor";
  if (version_two(path)) {
    EXPECT_NE(weight.data_ptr(), old_pointer)
        << "a version-2 load of an exact parameter exchanges its buffer (Note [Loading by "
           "exchange]), it does not copy";
  }
}

TEST(IoOnePass, DestinationsThatAreNotTheirWholeStorageLoadByCopy) {
  ScratchDir dir;
  manual_seed(35);
  const Tensor w = randn({300, 200}), b = randn({300});
  const std::string path = dir.file("t.safetensors");
  io::write_safetensors(path, {{"w", w}, {"b", b}}, {});
  io::SafetensorsFile f(path);
  // A slice with an offset into a larger storage, one at offset 0 of a larger storage, a
  // transposed (non-contiguous) view, another dtype, and an exact tensor.
  Tensor big = full({320, 200}, 7.0), head = full({900}, 7.0);
  Tensor at_offset = big.slice(0, 20, 320), at_start = head.slice(0, 0, 300);
  Tensor backing = full({200, 300}, 7.0);
  Tensor strided = backing.transpose(0, 1);
  Tensor wide = zeros({300}, {.dtype = DType::f64});
  Tensor exact = zeros({300, 200});
  const void* big_pointer = big.data_ptr();
  f.load_into({{"w", at_offset}, {"b", at_start}, {"w", strided}, {"b", wide}, {"w", exact}}, true);
  EXPECT_EQ(tensor_bytes(at_offset), tensor_bytes(w));
  EXPECT_EQ(tensor_bytes(at_start), tensor_bytes(b));
  EXPECT_EQ(tensor_bytes(strided), tensor_bytes(w));
  EXPECT_EQ(tensor_bytes(wide), tensor_bytes(b.to(DType::f64)));
  EXPECT_EQ(tensor_bytes(exact), tensor_bytes(w));
  // The rest of the larger storages is untouched, and they keep their buffers.
  EXPECT_EQ(tensor_bytes(big.slice(0, 0, 20)), tensor_bytes(full({20, 200}, 7.0)));
  EXPECT_EQ(tensor_bytes(head.slice(0, 300, 900)), tensor_bytes(full({600}, 7.0)));
  EXPECT_EQ(big.data_ptr(), big_pointer);
}

TEST(IoOnePass, TiedNamesAndAViewOfAnExchangedStorageLoadInPlanOrder) {
  ScratchDir dir;
  manual_seed(36);
  const Tensor a = randn({40, 30}), c = randn({10, 30});
  const std::string path = dir.file("t.safetensors");
  io::write_safetensors(path, {{"a", a}, {"c", c}}, {});
  io::SafetensorsFile f(path);
  Tensor dst = zeros({40, 30});
  // "a" twice for one tensor (tied weights), then "c" into rows 5..15 of the same storage:
  // the later write wins, as with one read_into after another.
  const Tensor rows = dst.slice(0, 5, 15);
  f.load_into({{"a", dst}, {"a", dst}, {"c", rows}}, true);
  Tensor want = a.clone();
  want.slice(0, 5, 15).copy_(c);
  EXPECT_EQ(tensor_bytes(dst), tensor_bytes(want));
  // The other order: the slice first, then the exact tensor over it.
  Tensor dst2 = zeros({40, 30});
  f.load_into({{"c", dst2.slice(0, 5, 15)}, {"a", dst2}}, true);
  EXPECT_EQ(tensor_bytes(dst2), tensor_bytes(a));
}

TEST(IoOnePass, OptimizerStateKeyedByParameterSurvivesALoad) {
  ScratchDir dir;
  manual_seed(37);
  const nn::Module source = nn::Linear(16, 8);
  const std::string path = dir.file("m.safetensors");
  io::save_model(source, path);
  manual_seed(38);
  nn::Module net = nn::Linear(16, 8);
  const double lr = 0.1, momentum = 0.9;
  optim::SGD opt(net->parameters(), {.lr = lr, .momentum = momentum});
  const Tensor c1 = randn({8, 16}), c2 = randn({8, 16});
  auto step = [&](const Tensor& c) {  // d loss / d weight = c; the bias gets 0
    opt.zero_grad();
    ((net->parameters()[0] * c).sum() + net->parameters()[1].sum() * 0.0).backward();
    opt.step();
  };
  step(c1);  // momentum buffer of the weight: c1
  io::load_state(net, path);
  const Tensor loaded = source->parameters()[0];
  EXPECT_EQ(tensor_bytes(net->parameters()[0]), tensor_bytes(loaded));
  step(c2);  // buffer 0.9 c1 + c2, applied to the loaded values
  const std::vector<float> got = net->parameters()[0].to_vector<float>();
  const std::vector<float> w = loaded.to_vector<float>(), g1 = c1.to_vector<float>(),
                           g2 = c2.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    const float buf = static_cast<float>(momentum) * g1[i] + g2[i];
    ASSERT_NEAR(got[i], w[i] - static_cast<float>(lr) * buf, 1e-5) << "element " << i;
  }
}

TEST(IoOnePass, LoadModelReadsStraightIntoTheModuleItBuilds) {
  ScratchDir dir;
  manual_seed(39);
  const nn::Module net = nn::Linear(2048, 2100);
  const std::string path = dir.file("m.safetensors"), bad = dir.file("bad.safetensors");
  io::save_model(net, path);
  ember_test::expect_same_state(net, io::load_model(path));
  write_flipped(path, bad, 3);
  ember_test::expect_error([&] { io::load_model(bad); }, {bad, "checksum mismatch"});
  if (cuda_available()) {
    nn::Module on_gpu = io::load_model(path, Device::cuda(0));
    on_gpu->to(Device::cpu());
    ember_test::expect_same_state(net, on_gpu);
    ember_test::expect_error([&] { io::load_model(bad, Device::cuda(0)); },
                             {bad, "checksum mismatch"});
  }
}

TEST(IoOnePass, SavedFilesVerifyAndTheWholeFileIsWritten) {
  ScratchDir dir;
  manual_seed(40);
  // 3 checksum chunks of data and a small tensor after them.
  const Tensor w = randn({9, 1 << 20}), b = randn({7});
  const std::string path = dir.file("t.safetensors");
  io::write_safetensors(path, {{"w", w}, {"b", b}}, {});
  EXPECT_EQ(io::inspect(path, true).checksum, "verified");
  io::SafetensorsFile f(path);
  EXPECT_EQ(f.file_size(), std::filesystem::file_size(path));
  EXPECT_EQ(tensor_bytes(f.read("w")), tensor_bytes(w));
  EXPECT_EQ(tensor_bytes(f.read("b")), tensor_bytes(b));
}

}  // namespace

namespace {

// A file that names a checksum chunk but carries no checksum (another writer's, or ember's
// metadata copied without it) has nothing to verify: it loads, on the CPU and onto a GPU.
// Before the single-pass change the GPU stream looked the missing checksum up with
// std::map::at and threw std::out_of_range instead.
TEST(IoOnePass, AChunkSizeWithoutAChecksumHasNothingToVerify) {
  ScratchDir dir;
  std::vector<uint8_t> data(4 * 6);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  const std::string header = R"({"__metadata__":{"ember.checksum_chunk":"16777216"},)"
                             R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  const std::string path = dir.file("no_checksum.safetensors");
  ember_test::write_bytes(path, ember_test::raw_safetensors(header, data));
  io::SafetensorsFile f(path);
  Tensor cpu = zeros({2, 3});
  f.load_into({{"w", cpu}}, true);
  EXPECT_EQ(tensor_bytes(cpu), data);
  if (cuda_available()) {
    Tensor gpu = zeros({2, 3}, {.device = Device::cuda(0)});
    f.load_into({{"w", gpu}}, true);
    EXPECT_EQ(tensor_bytes(gpu), data);
  }
}

}  // namespace
