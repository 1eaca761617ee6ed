// tests/test_profiler.cpp — the Profiler (issue 28 item 1): ops with their module paths and
// phases, kernels and their device time, bytes, ranges, the table and the Chrome trace, on
// the CPU and on a CUDA device.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "ember/ember.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/train/capture.hpp"

namespace {

using namespace ember;

const ProfileRow* find_row(const std::vector<ProfileRow>& rows, const std::string& name,
                           const std::string& module, ProfilePhase phase) {
  for (const ProfileRow& r : rows)
    if (r.name == name && r.module == module && r.phase == phase) return &r;
  return nullptr;
}

std::string names(const std::vector<ProfileRow>& rows) {
  std::string out;
  for (const ProfileRow& r : rows)
    out += r.name + "@" + r.module + (r.phase == ProfilePhase::backward ? "(bwd) " : " ");
  return out;
}

// Two Linear layers with a Tanh between (no fused epilogue), SGD.
struct Net {
  nn::Sequential net{nn::Linear(8, 16), nn::Tanh(), nn::Linear(16, 4)};
  optim::SGD opt;
  explicit Net(Device d) : opt((net->to(d), net->parameters()), {.lr = 0.1}) {}
  void step(const Tensor& x) {
    opt.zero_grad();
    Tensor loss = mean(square(net(x)));
    loss.backward();
    opt.step();
  }
};

TEST(Profiler, OffRecordsNothingAndOneAtATime) {
  Tensor x = randn({4, 4});
  (void)exp(x);  // before any profiler: nothing to see later
  Profiler prof;
  EXPECT_TRUE(prof.recording());
  EXPECT_THROW(Profiler second, Error);
  prof.stop();
  EXPECT_FALSE(prof.recording());
  (void)exp(x);  // after stop: not recorded
  EXPECT_TRUE(prof.rows().empty()) << names(prof.rows());
  EXPECT_EQ(prof.device_ms(), 0.0);
  Profiler again;  // a stopped one no longer blocks a new one
  EXPECT_TRUE(again.recording());
}

TEST(Profiler, OpsModulesPhasesAndKernels) {
  manual_seed(0);
  Net n(Device::cpu());
  Tensor x = randn({32, 8});
  n.step(x);  // warm-up, unrecorded
  Profiler prof;
  prof.name_modules(n.net);
  for (int i = 0; i < 3; ++i) {
    n.step(x);
    prof.step();
  }
  const auto rows = prof.rows();
  ASSERT_FALSE(rows.empty());
  // The forward of each Linear, under its module's name, three calls each.
  for (const char* module : {"0", "2"}) {
    const ProfileRow* fwd = find_row(rows, "linear", module, ProfilePhase::forward);
    ASSERT_NE(fwd, nullptr) << module << ": " << names(rows);
    EXPECT_EQ(fwd->calls, 3);
    EXPECT_GE(fwd->kernel_calls, 3);
    ASSERT_FALSE(fwd->kernels.empty());
    EXPECT_EQ(fwd->kernels[0].name, "gemm");
    EXPECT_GT(fwd->device_ms, 0.0);
    const ProfileRow* bwd = find_row(rows, "linear", module, ProfilePhase::backward);
    ASSERT_NE(bwd, nullptr) << module << ": " << names(rows);
    EXPECT_EQ(bwd->calls, 3);
  }
  const ProfileRow* tanh_row = find_row(rows, "tanh", "1", ProfilePhase::forward);
  ASSERT_NE(tanh_row, nullptr) << names(rows);
  EXPECT_EQ(tanh_row->calls, 3);
  // Each forward allocates its output: a [32, 16] f32 tensor.
  EXPECT_EQ(tanh_row->bytes_allocated, 3 * 32 * 16 * 4);
  // The program's ranges: the backward pass and the optimizer.
  EXPECT_NE(find_row(rows, "backward", "", ProfilePhase::backward), nullptr) << names(rows);
  EXPECT_NE(find_row(rows, "optimizer.step", "", ProfilePhase::forward), nullptr) << names(rows);
  // Self device times partition the total: every kernel is charged to exactly one row.
  double sum = 0;
  for (const ProfileRow& r : rows) sum += r.device_ms;
  EXPECT_NEAR(sum, prof.device_ms(), 1e-9 + 1e-9 * prof.device_ms());
  EXPECT_GT(prof.device_ms(), 0.0);
  EXPECT_LE(prof.device_ms(), prof.wall_ms());
  EXPECT_EQ(prof.steps(), 3);
  // Sorted by device time.
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].device_ms, rows[i].device_ms);
  const auto kernels = prof.kernels();
  ASSERT_FALSE(kernels.empty());
  double ksum = 0;
  for (const auto& k : kernels) ksum += k.device_ms;
  EXPECT_NEAR(ksum, prof.device_ms(), 1e-9 + 1e-9 * ksum);
}

TEST(Profiler, ModulePathsWithoutNamesAreTypeChains) {
  nn::Sequential net{nn::Linear(3, 3), nn::Tanh()};
  Tensor x = randn({2, 3});
  Profiler prof;
  (void)net(x);
  const auto rows = prof.rows();
  EXPECT_NE(find_row(rows, "linear", "Sequential/Linear", ProfilePhase::forward), nullptr)
      << names(rows);
  EXPECT_NE(find_row(rows, "tanh", "Sequential/Tanh", ProfilePhase::forward), nullptr)
      << names(rows);
  const auto flat = prof.rows({.group_by_module = false});
  EXPECT_NE(find_row(flat, "linear", "", ProfilePhase::forward), nullptr) << names(flat);
}

TEST(Profiler, CompositeOpsNestAndSameOpChecksAreOneCall) {
  Tensor a = randn({16, 16}), b = randn({16, 16});
  Profiler prof;
  (void)mm(a, b);  // UserOp(mm) around matmul around the GEMM
  const auto rows = prof.rows();
  const ProfileRow* mm_row = find_row(rows, "mm", "", ProfilePhase::forward);
  const ProfileRow* matmul_row = find_row(rows, "matmul", "", ProfilePhase::forward);
  ASSERT_NE(mm_row, nullptr) << names(rows);
  ASSERT_NE(matmul_row, nullptr) << names(rows);
  EXPECT_EQ(mm_row->calls, 1);
  EXPECT_EQ(matmul_row->calls, 1);
  // The GEMM is matmul's own kernel; mm's total includes it.
  EXPECT_EQ(mm_row->kernel_calls, 0);
  EXPECT_EQ(matmul_row->kernel_calls, 1);
  EXPECT_GE(mm_row->total_device_ms, matmul_row->device_ms);
  EXPECT_GE(mm_row->host_ms, matmul_row->host_ms);
}

TEST(Profiler, RecordScopeAndTable) {
  Tensor x = randn({64});
  Profiler prof;
  {
    RecordScope r("my data step");
    (void)exp(x);
  }
  prof.stop();
  const auto rows = prof.rows();
  const ProfileRow* mine = find_row(rows, "my data step", "", ProfilePhase::forward);
  ASSERT_NE(mine, nullptr) << names(rows);
  EXPECT_EQ(mine->calls, 1);
  EXPECT_GE(mine->host_ms, find_row(rows, "exp", "", ProfilePhase::forward)->host_ms);
  const std::string table = prof.table();
  EXPECT_NE(table.find("Name"), std::string::npos) << table;
  EXPECT_NE(table.find("exp"), std::string::npos) << table;
  EXPECT_NE(table.find("my data step"), std::string::npos) << table;
  EXPECT_NE(table.find("unary×1"), std::string::npos) << table;
}

TEST(Profiler, ChromeTraceIsValidJson) {
  Net n(Device::cpu());
  Tensor x = randn({8, 8});
  Profiler prof;
  prof.name_modules(n.net);
  n.step(x);
  prof.step();
  const std::string path = ::testing::TempDir() + "/ember_profile_trace.json";
  prof.export_chrome_trace(path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_TRUE(j.contains("traceEvents"));
  std::set<std::string> seen;
  int steps = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "i") ++steps;
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    seen.insert(e["name"].get<std::string>());
  }
  EXPECT_EQ(steps, 1);
  for (const char* name : {"linear", "gemm", "tanh", "backward", "optimizer.step", "Linear"})
    EXPECT_TRUE(seen.count(name)) << name;
  std::remove(path.c_str());
  EXPECT_THROW(prof.export_chrome_trace("/nonexistent-dir/trace.json"), Error);
}

TEST(Profiler, BadInput) {
  Profiler prof;
  EXPECT_THROW(prof.name_modules(nn::Module()), Error);
}

TEST(ProfilerCuda, KernelsHaveDeviceTimeAndATrack) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: the profiler's device time needs one";
  const Device gpu = Device::cuda(0);
  manual_seed(1);
  Net n(gpu);
  Tensor x = randn({256, 8}).to(gpu);
  n.step(x);
  synchronize(gpu);
  Profiler prof;
  prof.name_modules(n.net);
  for (int i = 0; i < 2; ++i) n.step(x);
  const auto rows = prof.rows();
  const ProfileRow* fwd = find_row(rows, "linear", "0", ProfilePhase::forward);
  ASSERT_NE(fwd, nullptr) << names(rows);
  EXPECT_EQ(fwd->calls, 2);
  EXPECT_GT(fwd->device_ms, 0.0);
  EXPECT_NE(find_row(rows, "linear", "2", ProfilePhase::backward), nullptr) << names(rows);
  EXPECT_GT(prof.device_ms(), 0.0);
  const std::string path = ::testing::TempDir() + "/ember_profile_cuda.json";
  prof.export_chrome_trace(path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  int device_events = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == 1) ++device_events;
  EXPECT_GT(device_events, 10);
  std::remove(path.c_str());
}

TEST(ProfilerCuda, CapturedStepReplaysAreOneKernelRow) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: captured steps need one";
  const Device gpu = Device::cuda(0);
  Tensor a = randn({64, 64}).to(gpu);
  train::CapturedStep step(
      [](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(matmul(in[0], in[0]))}; },
      {.device = gpu});
  step({a});  // warm-up and capture, unrecorded
  step({a});
  Profiler prof;
  step({a});  // a replay: the graph's kernels are one launch
  const auto rows = prof.rows();
  EXPECT_EQ(find_row(rows, "matmul", "", ProfilePhase::forward), nullptr) << names(rows);
  double launches = 0;
  for (const auto& k : prof.kernels())
    if (k.name == "graph_launch") launches += static_cast<double>(k.calls);
  EXPECT_EQ(launches, 1) << names(rows);
}

}  // namespace
