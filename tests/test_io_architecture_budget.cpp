// tests/test_io_architecture_budget.cpp — load_model refuses a file whose ember.architecture
// asks for far more memory than its tensors hold, before allocating it (Note [An architecture
// asking for more than its file holds] in src/io/checkpoint.cpp): a valid file is written,
// then its architecture is rewritten by hand (the header is not covered by the checksum) to
// ask for Linear(100000, 100000) — 40 GB — and load_model must name the file, the module path,
// the bytes asked and the bytes present, with memory_stats showing no large allocation. The
// valid file still loads; negative, zero and overflowing dimensions give clear errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "io_test_util.hpp"
#include "memory_stats.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::expect_error;
using ember_test::ScratchDir;
using json = nn::json;
using ember_test::kMiB;

// A saved Sequential(Linear(8, 4), ReLU, Linear(4, 2)) and its header, for rewriting.
struct SavedModel {
  nn::Sequential model{nn::Linear(8, 4), nn::ReLU(), nn::Linear(4, 2)};
  std::string path;
  json header;
  std::vector<uint8_t> data;
  // (8*4 + 4 + 4*2 + 2) f32 values: what the file's tensors take loaded.
  static constexpr int64_t kPresent = (8 * 4 + 4 + 4 * 2 + 2) * 4;
};

SavedModel save(const ScratchDir& dir) {
  SavedModel s;
  s.path = dir.file("valid.safetensors");
  io::save_model(s.model, s.path);
  const std::vector<uint8_t> bytes = ember_test::read_bytes(s.path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  s.header = json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n)));
  s.data.assign(bytes.begin() + 8 + static_cast<long>(n), bytes.end());
  return s;
}

// The saved file with its architecture replaced by `arch`, written to `name`.
std::string with_architecture(const ScratchDir& dir, const SavedModel& s, const json& arch,
                              const std::string& name) {
  json h = s.header;
  h["__metadata__"]["ember.architecture"] = arch.dump();
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::string path = dir.file(name);
  ember_test::write_bytes(path, ember_test::raw_safetensors(text, s.data));
  return path;
}

json linear(int64_t in, int64_t out) {
  return {{"type", "Linear"}, {"options", {{"in_features", in}, {"out_features", out}}}};
}

json architecture_of(const SavedModel& s) {
  return json::parse(s.header["__metadata__"]["ember.architecture"].get<std::string>());
}

// load_model(path) on `device` must refuse with every one of `parts`, having allocated
// less than 1 MiB at its highest on the device.
void expect_refused_without_allocating(const std::string& path, Device device,
                                       const std::vector<std::string>& parts) {
  reset_peak_memory_stats(device);
  const MemoryStats before = memory_stats(device);
  expect_error([&] { (void)io::load_model(path, device); }, parts, path);
  const MemoryStats after = memory_stats(device);
  const int64_t in_use_before = before.persistent_bytes + before.pass_in_use;
  EXPECT_LT(after.peak_allocated - in_use_before, kMiB)
      << "the refused architecture was allocated on " << device.str();
  EXPECT_EQ(after.persistent_bytes + after.pass_in_use, in_use_before);
}

TEST(IoArchitectureBudget, HugeLinearIsRefusedBeforeAllocating) {
  ScratchDir dir;
  const SavedModel s = save(dir);
  json arch = architecture_of(s);
  ASSERT_EQ(arch["children"][0]["type"], "Linear");
  arch["children"][0]["options"]["in_features"] = 100000;
  arch["children"][0]["options"]["out_features"] = 100000;
  const std::string path = with_architecture(dir, s, arch, "huge.safetensors");
  expect_refused_without_allocating(
      path, Device::cpu(),
      {path, "ember.architecture asks for far more memory than the file's tensors hold",
       "building module '0' asked for 40000000000 bytes",
       "the file's tensors take " + std::to_string(SavedModel::kPresent) + " bytes",
       "refused before allocating"});
  // The valid file still loads, with its values.
  const nn::Module loaded = io::load_model(s.path);
  const auto want = s.model->named_parameters(), got = loaded->named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].second.to_vector<float>(), want[i].second.to_vector<float>()) << want[i].first;
}

TEST(IoArchitectureBudget, NestedPathAndManyMediumLayersAreRefused) {
  ScratchDir dir;
  const SavedModel s = save(dir);
  // A Sequential inside the Sequential: the path names the inner layer.
  json inner = {{"type", "Sequential"},
                {"children", json::array({linear(4, 4), linear(50000, 50000)})}};
  json arch = architecture_of(s);
  arch["children"][2] = inner;
  std::string path = with_architecture(dir, s, arch, "nested.safetensors");
  expect_refused_without_allocating(path, Device::cpu(),
                                    {path, "building module '2.1' asked for 10000000000 bytes"});
  // Forty layers of 4 MB each: none alone is too large, all together are (160 MB against
  // twice the file's 184 bytes plus 64 MiB).
  json many = {{"type", "Sequential"}, {"children", json::array()}};
  for (int i = 0; i < 40; ++i) many["children"].push_back(linear(1000, 1000));
  path = with_architecture(dir, s, many, "many.safetensors");
  expect_error([&] { (void)io::load_model(path); },
               {path, "building the model asked for", "bytes, but the file's tensors take 184"});
}

TEST(IoArchitectureBudget, BadDimensionsGiveClearErrors) {
  ScratchDir dir;
  const SavedModel s = save(dir);
  struct Case {
    int64_t in, out;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {-3, 4, {"cannot rebuild the module from ember.architecture", "in_features", "-3"}},
      {0, 4, {"cannot rebuild the module from ember.architecture", "in_features", "0"}},
      {int64_t{1} << 40,
       int64_t{1} << 40,
       {"cannot rebuild the module from ember.architecture", "1099511627776"}},
  };
  for (const Case& c : cases) {
    json arch = architecture_of(s);
    arch["children"][0] = linear(c.in, c.out);
    const std::string path = with_architecture(dir, s, arch, "bad.safetensors");
    std::vector<std::string> parts = c.parts;
    parts.push_back(path);
    SCOPED_TRACE(std::to_string(c.in) + " x " + std::to_string(c.out));
    expect_refused_without_allocating(path, Device::cpu(), parts);
  }
}

TEST(IoArchitectureBudgetCuda, HugeLinearIsRefusedBeforeAllocatingOnTheDevice) {
  SKIP_WITHOUT_CUDA();
  ScratchDir dir;
  const SavedModel s = save(dir);
  json arch = architecture_of(s);
  arch["children"][0] = linear(100000, 100000);
  const std::string path = with_architecture(dir, s, arch, "huge.safetensors");
  expect_refused_without_allocating(path, Device::cuda(0),
                                    {path, "building module '0' asked for 40000000000 bytes"});
  const nn::Module loaded = io::load_model(s.path, Device::cuda(0));
  EXPECT_TRUE(loaded->parameters()[0].device().is_cuda());
}

}  // namespace
