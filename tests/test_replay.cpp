// tests/test_replay.cpp — ReplayBuffer and get_rows (ember/replay.hpp, docs/rl.md): ring order
// and wrap-around against a row-by-row reference, sampling from the filled rows with the
// documented formula, get_rows' gradient against index_select and f64 finite differences,
// every bad input's error, the Persistent pool. GPU tests (skip without CUDA): the same draws
// on the GPU as on the CPU, pushes and sampling with no host transfer, release_device, and a
// captured step sampling new rows on each replay, equal to the eager step, with no host
// transfer per replay.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "ember/replay.hpp"
#include "ember/train/capture.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::expect_contains;
using test_util::error_of;

// A buffer of `capacity` rows: "obs" [2] f32 (row k of a batch holds k0 + k and -(k0 + k)),
// "act" scalar i64 (k0 + k).
ReplayBuffer make_buffer(int64_t capacity, Device device = Device::cpu()) {
  return ReplayBuffer(capacity, {{"obs", {2}}, {"act", {}, DType::i64}}, {.device = device});
}

ReplayBatch rows_from(int64_t k0, int64_t n, Device device = Device::cpu()) {
  std::vector<float> obs;
  std::vector<int64_t> act;
  for (int64_t k = k0; k < k0 + n; ++k) {
    obs.push_back(static_cast<float>(k));
    obs.push_back(-static_cast<float>(k));
    act.push_back(k);
  }
  return {{"obs", from_vector<float>(obs, {n, 2}).to(device)},
          {"act", from_vector<int64_t>(act, {n}).to(device)}};
}

}  // namespace

TEST(Replay, RingOrderAndWrapAroundMatchRowByRowPushes) {
  ReplayBuffer buf = make_buffer(5);
  std::vector<int64_t> ref(5, 0);  // act per slot, written row by row
  int64_t pos = 0, size = 0, next = 0;
  for (int64_t n : {3, 4, 1, 12, 5, 2}) {  // 3+4 wraps; 12 > capacity; 5 == capacity
    buf.push(rows_from(next, n));
    for (int64_t k = next; k < next + n; ++k) {
      ref[pos] = k;
      pos = (pos + 1) % 5;
      size = std::min<int64_t>(5, size + 1);
    }
    next += n;
    ASSERT_EQ(buf.size(), size) << "after " << next << " rows";
    ASSERT_EQ(buf.position(), pos) << "after " << next << " rows";
    EXPECT_EQ(buf.table("act").to_vector<int64_t>(), ref) << "after " << next << " rows";
    const std::vector<float> obs = buf.table("obs").to_vector<float>();
    for (int64_t r = 0; r < size; ++r) {
      EXPECT_EQ(obs[2 * r], static_cast<float>(ref[r])) << "slot " << r;
      EXPECT_EQ(obs[2 * r + 1], -static_cast<float>(ref[r])) << "slot " << r;
    }
    EXPECT_EQ(buf.filled().item<double>(), static_cast<double>(size));
  }
}

TEST(Replay, OneRowPushAndGetReturnRowsOfEveryField) {
  ReplayBuffer buf = make_buffer(4);
  buf.push({{"obs", tensor({7.0f, 8.0f}, {2})}, {"act", scalar_tensor(3, {.dtype = DType::i64})}});
  buf.push(rows_from(10, 2));
  EXPECT_EQ(buf.size(), 3);
  const ReplayBatch b = buf.get(from_vector<int64_t>({2, 0, 0}, {3}));
  EXPECT_EQ(b["obs"].shape(), Shape({3, 2}));
  EXPECT_EQ(b["obs"].to_vector<float>(), (std::vector<float>{11, -11, 7, 8, 7, 8}));
  EXPECT_EQ(b["act"].to_vector<int64_t>(), (std::vector<int64_t>{11, 3, 3}));
  const ReplayBatch i32 = buf.get(from_vector<int32_t>({1}, {1}));
  EXPECT_EQ(i32["act"].to_vector<int64_t>(), (std::vector<int64_t>{10}));
  // Copies of the handle share the buffer.
  ReplayBuffer other = buf;
  other.push(rows_from(20, 1));
  EXPECT_EQ(buf.size(), 4);
  buf.clear();
  EXPECT_EQ(other.size(), 0);
  EXPECT_EQ(other.position(), 0);
  EXPECT_EQ(other.filled().item<double>(), 0.0);
}

TEST(Replay, SampleDrawsFilledRowsByTheDocumentedFormula) {
  ReplayBuffer buf = make_buffer(64);
  buf.push(rows_from(100, 10));
  manual_seed(5);
  const std::vector<int64_t> idx = buf.sample_indices(4000).to_vector<int64_t>();
  manual_seed(5);
  const std::vector<double> u = rand({4000}, {.dtype = DType::f64}).to_vector<double>();
  std::vector<int> hits(10, 0);
  for (size_t i = 0; i < idx.size(); ++i) {
    ASSERT_EQ(idx[i], std::min<int64_t>(static_cast<int64_t>(std::floor(u[i] * 10)), 9)) << i;
    ++hits[idx[i]];
  }
  for (int r = 0; r < 10; ++r) EXPECT_GT(hits[r], 300) << "row " << r << " (expected ~400)";
  // The count grows with pushes: later draws reach the new rows.
  buf.push(rows_from(200, 40));
  const std::vector<int64_t> wide = buf.sample_indices(2000).to_vector<int64_t>();
  EXPECT_GE(*std::max_element(wide.begin(), wide.end()), 40);
  EXPECT_LT(*std::max_element(wide.begin(), wide.end()), 50);
  EXPECT_GE(*std::min_element(wide.begin(), wide.end()), 0);
  // sample() gathers the drawn rows: act equals the row's obs.
  manual_seed(9);
  const Tensor drawn = buf.sample_indices(16);
  manual_seed(9);
  const ReplayBatch b = buf.sample(16);
  const std::vector<int64_t> d = drawn.to_vector<int64_t>();
  const std::vector<int64_t> act = b["act"].to_vector<int64_t>();
  const std::vector<float> obs = b["obs"].to_vector<float>();
  for (size_t i = 0; i < d.size(); ++i) {
    EXPECT_EQ(act[i], d[i] < 10 ? 100 + d[i] : 200 + d[i] - 10) << i;
    EXPECT_EQ(obs[2 * i], static_cast<float>(act[i])) << i;
  }
}

TEST(Replay, GetRowsGradientFlowsToTheTableAsIndexSelect) {
  manual_seed(1);
  const Tensor idx = from_vector<int64_t>({3, 0, 3, 1}, {4});
  Tensor table = randn({5, 3}, {.dtype = DType::f64, .requires_grad = true});
  Tensor weights = randn({4, 3}, {.dtype = DType::f64});
  (get_rows(table, idx) * weights).sum().backward();
  const std::vector<double> g = table.grad().to_vector<double>();
  Tensor ref = table.detach().clone().requires_grad_();
  (index_select(ref, 0, idx) * weights).sum().backward();
  EXPECT_EQ(g, ref.grad().to_vector<double>());
  const std::vector<double> w = weights.to_vector<double>();
  for (int c = 0; c < 3; ++c) {  // row 3 is picked twice: both gradients add up
    EXPECT_DOUBLE_EQ(g[3 * 3 + c], w[0 * 3 + c] + w[2 * 3 + c]);
    EXPECT_DOUBLE_EQ(g[2 * 3 + c], 0.0);  // row 2 is not picked
  }
  const GradcheckResult r =
      gradcheck([&](const std::vector<Tensor>& x) { return get_rows(x[0], idx).tanh(); },
                {randn({5, 3}, {.dtype = DType::f64, .requires_grad = true})});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(Replay, BadConstructionIsRefused) {
  expect_contains(error_of([] { make_buffer(0); }),
                  "ReplayBuffer: capacity 0 (expected at least 1 row)");
  expect_contains(error_of([] { ReplayBuffer(4, {}); }), "ReplayBuffer: no fields");
  expect_contains(error_of([] {
                    ReplayBuffer(4, {{"a", {2}}, {"a", {3}}});
                  }),
                  "field 'a' is named twice");
  expect_contains(error_of([] { ReplayBuffer(4, {{"", {2}}}); }), "a field has an empty name");
  expect_contains(error_of([] {
                    ReplayBuffer(4, {{"a", {2, -1}}});
                  }),
                  "field 'a' has row shape [2, -1] (expected sizes >= 0)");
}

TEST(Replay, BadPushesAreRefusedAndWriteNothing) {
  ReplayBuffer buf = make_buffer(4);
  const Tensor obs = zeros({3, 2});
  const Tensor act = zeros({3}, {.dtype = DType::i64});
  expect_contains(error_of([&] {
                    buf.push({{"obs", obs}, {"act", act}, {"rew", act}});
                  }),
                  "ReplayBuffer::push: unknown field 'rew' (the buffer has: obs, act)");
  expect_contains(error_of([&] {
                    buf.push({{"obs", obs}});
                  }),
                  "ReplayBuffer::push: field 'act' is missing");
  expect_contains(error_of([&] {
                    buf.push({{"obs", obs}, {"act", zeros({3})}});
                  }),
                  "ReplayBuffer::push: field 'act' has dtype f32 (expected i64)");
  expect_contains(
      error_of([&] {
        buf.push({{"obs", zeros({3, 4})}, {"act", act}});
      }),
      "ReplayBuffer::push: field 'obs' has shape [3, 4] (expected [B, 2] or one row [2])");
  expect_contains(error_of([&] {
                    buf.push({{"obs", zeros({})}, {"act", act}});
                  }),
                  "field 'obs' has shape [] (expected [B, 2]");
  expect_contains(error_of([&] {
                    buf.push({{"obs", zeros({2, 2})}, {"act", act}});
                  }),
                  "field 'act' has 3 rows and 'obs' 2 (expected the same count for every field)");
  expect_contains(error_of([&] {
                    buf.push({{"obs", Tensor()}, {"act", act}});
                  }),
                  "field 'obs' is an empty tensor handle");
  EXPECT_EQ(buf.size(), 0);
  EXPECT_EQ(buf.position(), 0);
}

TEST(Replay, BadReadsAreRefused) {
  ReplayBuffer buf = make_buffer(8);
  expect_contains(error_of([&] { buf.sample(4); }),
                  "ReplayBuffer::sample: the buffer is empty (expected push() before sample())");
  buf.push(rows_from(0, 3));
  expect_contains(error_of([&] { buf.sample(0); }),
                  "ReplayBuffer::sample: batch size 0 (expected at least 1)");
  // Index 5 is inside the capacity but past the 3 filled rows.
  expect_contains(error_of([&] {
                    buf.get(from_vector<int64_t>({0, 5, 1}, {3}));
                  }),
                  "ReplayBuffer::get: index 5 is outside the filled rows (expected indices in [0, "
                  "3); capacity 8)");
  expect_contains(error_of([&] {
                    buf.get(from_vector<int64_t>({-1, 2}, {2}));
                  }),
                  "ReplayBuffer::get: index -1 is outside the filled rows");
  expect_contains(error_of([&] { buf.get(zeros({2})); }),
                  "ReplayBuffer::get: indices dtype f32 (expected i64 or i32)");
  expect_contains(error_of([&] {
                    buf.get(zeros({2, 1}, {.dtype = DType::i64}));
                  }),
                  "ReplayBuffer::get: indices shape [2, 1] (expected a 1-D index)");
  expect_contains(error_of([&] { buf.table("rew"); }),
                  "ReplayBuffer::table: no field 'rew' (the buffer has: obs, act)");
  const ReplayBatch b = buf.get(from_vector<int64_t>({2}, {1}));
  expect_contains(error_of([&] { (void)b["rew"]; }),
                  "ReplayBatch: no field 'rew' (the batch has: act, obs)");
  expect_contains(error_of([] { get_rows(scalar_tensor(1.0), from_vector<int64_t>({0}, {1})); }),
                  "get_rows: table shape [] (expected at least one dim");
  expect_contains(error_of([] {
                    get_rows(zeros({3, 2}), zeros({1, 1}, {.dtype = DType::i64}));
                  }),
                  "get_rows: indices shape [1, 1] (expected a 1-D index)");
  expect_contains(error_of([] {
                    get_rows(zeros({3, 2}), from_vector<int64_t>({3}, {1}));
                  }),
                  "index 3 (at position 0) is out of range for dim 0 of size 3");
}

TEST(Replay, TablesLiveInThePersistentPool) {
  const MemoryStats before = memory_stats(Device::cpu());
  ReplayBuffer buf(1000, {{"obs", {4}}, {"act", {}, DType::i64}});
  const MemoryStats after = memory_stats(Device::cpu());
  EXPECT_EQ(pool_of(buf.table("obs")), Pool::Persistent);
  EXPECT_EQ(pool_of(buf.table("act")), Pool::Persistent);
  EXPECT_EQ(pool_of(buf.filled()), Pool::Persistent);
  EXPECT_GE(after.persistent_bytes - before.persistent_bytes, 1000 * 4 * 4 + 1000 * 8 + 8);
  EXPECT_EQ(after.pass_in_use, before.pass_in_use);
  // Pushes and reads allocate no persistent memory.
  buf.push({{"obs", ones({10, 4})}, {"act", zeros({10}, {.dtype = DType::i64})}});
  (void)buf.sample(32);
  EXPECT_EQ(memory_stats(Device::cpu()).persistent_bytes, after.persistent_bytes);
}

// ---- GPU: compared with the CPU ----

TEST(ReplayCuda, SamplingAndGatherEqualTheCpu) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  ReplayBuffer cpu = make_buffer(16), dev = make_buffer(16, gpu);
  for (int64_t n : {5, 9, 7}) {
    cpu.push(rows_from(cpu.size() * 3, n));
    dev.push(rows_from(dev.size() * 3, n, gpu));
  }
  EXPECT_EQ(dev.device(), gpu);
  EXPECT_EQ(dev.table("obs").to_vector<float>(), cpu.table("obs").to_vector<float>());
  manual_seed(4);
  const ReplayBatch a = cpu.sample(256);
  manual_seed(4);
  const ReplayBatch b = dev.sample(256);
  EXPECT_EQ(b["act"].device(), gpu);
  EXPECT_EQ(b["act"].to_vector<int64_t>(), a["act"].to_vector<int64_t>());
  EXPECT_EQ(b["obs"].to_vector<float>(), a["obs"].to_vector<float>());
  expect_contains(error_of([&] { dev.get(from_vector<int64_t>({0}, {1})); }),
                  "ReplayBuffer::get: indices on cpu (expected the buffer's device, cuda:0)");
  expect_contains(error_of([&] { dev.get(from_vector<int64_t>({16}, {1}).to(gpu)); }),
                  "ReplayBuffer::get: index 16 is outside the filled rows");
}

TEST(ReplayCuda, DevicePushesAndSamplingMoveNoByteOverTheBus) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  ReplayBuffer buf = make_buffer(32, gpu);
  const ReplayBatch rows = rows_from(0, 20, gpu);
  synchronize(gpu);
  const MemoryStats before = memory_stats(gpu);
  for (int i = 0; i < 5; ++i) {
    buf.push(rows);  // wraps from the second push on
    (void)buf.sample(64);
  }
  const MemoryStats after = memory_stats(gpu);
  EXPECT_EQ(after.host_to_device_bytes, before.host_to_device_bytes);
  EXPECT_EQ(after.device_to_host_bytes, before.device_to_host_bytes);
  EXPECT_EQ(buf.size(), 32);
}

TEST(ReplayCuda, ReleaseDeviceMovesTheBufferToTheHost) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  ReplayBuffer buf = make_buffer(8, gpu);
  buf.push(rows_from(0, 6, gpu));
  EXPECT_EQ(pool_of(buf.table("obs")), Pool::Persistent);
  const std::vector<float> obs = buf.table("obs").to_vector<float>();
  release_device(gpu);
  EXPECT_TRUE(buf.device().is_cpu());
  EXPECT_TRUE(buf.table("act").device().is_cpu());
  EXPECT_EQ(buf.table("obs").to_vector<float>(), obs);
  EXPECT_EQ(buf.filled().item<double>(), 6.0);
  buf.push(rows_from(6, 4));  // wraps, now on the host
  EXPECT_EQ(buf.table("act").to_vector<int64_t>(), (std::vector<int64_t>{8, 9, 2, 3, 4, 5, 6, 7}));
  const ReplayBatch b = buf.get(from_vector<int64_t>({1, 7}, {2}));
  EXPECT_EQ(b["act"].to_vector<int64_t>(), (std::vector<int64_t>{9, 7}));
  manual_seed(2);
  const std::vector<int64_t> idx = buf.sample_indices(100).to_vector<int64_t>();
  for (int64_t i : idx) EXPECT_TRUE(i >= 0 && i < 8) << i;
}

namespace {

struct ReplayRun {
  std::vector<std::vector<int64_t>> drawn;  // the rows each step sampled
  std::vector<float> losses;
  std::vector<float> weights;
  int64_t host_to_device = 0, device_to_host = 0;  // over the steps after the first two
};

// 12 steps of a linear regression on rows sampled from a GPU replay buffer, with 8 rows pushed
// (from the device) between steps: eagerly or through a CapturedStep. The step returns the
// sampled "act" (the row's own number) and the loss; they are cloned on the device and read
// after the loop, so the window of steps 2..11 holds nothing but pushes and steps.
ReplayRun run_replay_steps(bool captured) {
  const Device gpu = Device::cuda(0);
  manual_seed(21);
  ReplayBuffer buf(128, {{"x", {3}}, {"y", {1}}, {"act", {}, DType::i64}}, {.device = gpu});
  const Tensor all_x = randn({128, 3}, {.device = gpu});
  const Tensor all_y = all_x.sum({1}, true) * 0.5 + 1.0;
  const Tensor all_act = arange(0, 128, 1, {.dtype = DType::i64, .device = gpu});
  int64_t pushed = 0;
  auto push = [&](int64_t n) {
    buf.push({{"x", all_x.narrow(0, pushed, n)},
              {"y", all_y.narrow(0, pushed, n)},
              {"act", all_act.narrow(0, pushed, n)}});
    pushed += n;
  };
  push(8);
  nn::Linear net(3, 1);
  net->to(gpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  auto step = [&](const std::vector<Tensor>&) {
    const ReplayBatch b = buf.sample(16);
    opt.zero_grad();
    Tensor loss = mse_loss(net(b["x"]), b["y"]);
    loss.backward();
    opt.step();
    return std::vector<Tensor>{b["act"], loss};
  };
  train::CapturedStep graph(step);
  std::vector<Tensor> kept;
  ReplayRun run;
  MemoryStats start;
  for (int s = 0; s < 12; ++s) {
    if (s == 2) {
      synchronize(gpu);
      start = memory_stats(gpu);
    }
    const std::vector<Tensor> out = captured ? graph({}) : step({});
    kept.push_back(out[0].clone());
    kept.push_back(out[1].clone());
    push(8);
  }
  const MemoryStats end = memory_stats(gpu);
  run.host_to_device = end.host_to_device_bytes - start.host_to_device_bytes;
  run.device_to_host = end.device_to_host_bytes - start.device_to_host_bytes;
  for (size_t i = 0; i < kept.size(); i += 2) {
    run.drawn.push_back(kept[i].to_vector<int64_t>());
    run.losses.push_back(kept[i + 1].item<float>());
  }
  for (const Tensor& p : net->parameters()) {
    const std::vector<float> v = p.detach().to_vector<float>();
    run.weights.insert(run.weights.end(), v.begin(), v.end());
  }
  if (captured) {
    EXPECT_EQ(graph.eager_count(), 1);
    EXPECT_EQ(graph.replay_count(), 11);
  }
  return run;
}

}  // namespace

TEST(ReplayCuda, CapturedStepSamplesNewRowsEachReplayAsEagerWithNoHostTransfer) {
  SKIP_WITHOUT_CUDA();
  const ReplayRun eager = run_replay_steps(false);
  const ReplayRun graph = run_replay_steps(true);
  ASSERT_EQ(graph.drawn.size(), 12u);
  for (size_t s = 0; s < graph.drawn.size(); ++s) {
    EXPECT_EQ(graph.drawn[s], eager.drawn[s]) << "step " << s;
    const int64_t filled = 8 * static_cast<int64_t>(s + 1);  // rows pushed before step s
    for (int64_t r : graph.drawn[s]) EXPECT_TRUE(r >= 0 && r < filled) << "step " << s << ": " << r;
    if (s > 0) EXPECT_NE(graph.drawn[s], graph.drawn[s - 1]) << "step " << s;
  }
  // The count is read on the device: late replays reach rows pushed after the capture (16).
  const std::vector<int64_t>& last = graph.drawn.back();
  EXPECT_GE(*std::max_element(last.begin(), last.end()), 16);
  EXPECT_EQ(std::memcmp(graph.losses.data(), eager.losses.data(), 12 * sizeof(float)), 0);
  EXPECT_EQ(graph.weights, eager.weights);
  EXPECT_NE(graph.losses.front(), graph.losses.back());
  EXPECT_EQ(graph.host_to_device, 0);
  EXPECT_EQ(graph.device_to_host, 0);
}

TEST(ReplayCuda, PushInsideACapturedStepIsRefused) {
  SKIP_WITHOUT_CUDA();
  const Device gpu = Device::cuda(0);
  ReplayBuffer buf = make_buffer(8, gpu);
  buf.push(rows_from(0, 4, gpu));
  const ReplayBatch rows = rows_from(4, 1, gpu);
  train::CapturedStep graph(
      [&](const std::vector<Tensor>& in) {
        buf.push(rows);
        return in;
      },
      {.warmup = 0});
  expect_contains(error_of([&] { graph({zeros({1}, {.device = gpu})}); }),
                  "ReplayBuffer::push: called inside a captured step");
  EXPECT_EQ(buf.size(), 4);
}
