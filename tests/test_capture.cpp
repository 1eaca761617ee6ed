// tests/test_capture.cpp — captured steps (train::CapturedStep, docs/capture.md): a captured
// and replayed training step equals the eager step bitwise over 20 steps (an MLP with
// Dropout, a CNN with BatchNorm and Dropout, a TransformerEncoderLayer; Adam + cosine
// schedule + clip_grad_norm, and SGD with momentum), each wrong use raises its error, the
// captured pool stops growing, an inference-only capture. GPU tests skip without CUDA; on
// the CPU capture refuses with a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/ember.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/optim.hpp"
#include "ember/train/capture.hpp"
#include "ember/train/fit.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::kGpu;
using test_util::error_of;

// Every value of every parameter and buffer, as bytes (a bitwise comparison).
std::vector<float> state_of(const nn::Module& m) {
  std::vector<float> out;
  auto add = [&](const Tensor& t) {
    const std::vector<float> v = t.detach().to(DType::f32).to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  };
  for (const Tensor& p : m->parameters()) add(p);
  for (const auto& [name, b] : m->named_buffers()) add(b);
  return out;
}

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int shown = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && shown++ < 5)
      ADD_FAILURE() << what << ": value " << i << " is " << b[i] << " captured, " << a[i]
                    << " eager (expected the same bits)";
}

using ModelMaker = std::function<nn::Module()>;
using BatchMaker = std::function<std::vector<Tensor>(int64_t step)>;

struct CaptureRun {
  std::vector<float> losses;
  std::vector<float> state;
  int64_t kernels = 0;
};

// 20 steps of Adam (cosine schedule, gradient clipping) or SGD with momentum, eagerly or
// captured; the model and every batch are made from fixed seeds.
CaptureRun run_steps(const ModelMaker& make, const BatchMaker& batches, bool captured,
                     bool sgd = false, int64_t steps = 20) {
  manual_seed(7);
  nn::Module net = make();
  net->to(kGpu);
  net->train();
  std::unique_ptr<optim::Optimizer> opt;
  if (sgd)
    opt = std::make_unique<optim::SGD>(net->parameters(),
                                       optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  else
    opt = std::make_unique<optim::Adam>(net->parameters(),
                                        optim::AdamOptions{.lr = 3e-3, .weight_decay = 1e-4});
  optim::CosineAnnealingLR sched(*opt, steps, 1e-4);
  auto step = [&](const std::vector<Tensor>& in) {
    opt->zero_grad();
    Tensor loss = cross_entropy(net(in[0]), in[1]);
    loss.backward();
    optim::clip_grad_norm_tensor(net->parameters(), 0.5);
    opt->step();
    sched.step();
    return std::vector<Tensor>{loss};
  };
  std::vector<std::vector<Tensor>> data;
  manual_seed(11);
  for (int64_t s = 0; s < steps; ++s) data.push_back(batches(s));
  manual_seed(3);  // the dropout stream
  CaptureRun run;
  std::unique_ptr<train::CapturedStep> graph;
  if (captured) graph = std::make_unique<train::CapturedStep>(step);
  for (int64_t s = 0; s < steps; ++s) {
    const Tensor loss = captured ? (*graph)(data[s])[0] : step(data[s])[0];
    run.losses.push_back(loss.item<float>());
  }
  run.state = state_of(net);
  if (captured) {
    EXPECT_EQ(graph->graph_count(), 1);
    EXPECT_EQ(graph->eager_count(), 1);
    EXPECT_EQ(graph->replay_count(), steps - 1);
    run.kernels = graph->kernels_per_step();
  }
  return run;
}

void expect_captured_equals_eager(const ModelMaker& make, const BatchMaker& batches,
                                  const std::string& what, bool sgd = false) {
  const CaptureRun eager = run_steps(make, batches, false, sgd);
  const CaptureRun graph = run_steps(make, batches, true, sgd);
  expect_bitwise(eager.losses, graph.losses, what + " losses");
  expect_bitwise(eager.state, graph.state, what + " parameters and buffers");
  EXPECT_GT(graph.kernels, 10) << what;
  EXPECT_NE(eager.losses.front(), eager.losses.back()) << what << ": the model did not train";
}

nn::Module mlp() {
  return nn::Sequential({nn::Linear(64, 128), nn::ReLU(), nn::Dropout(0.2), nn::Linear(128, 128),
                         nn::ReLU(), nn::Linear(128, 10)});
}

std::vector<Tensor> mlp_batch(int64_t) {
  return {randn({32, 64}, {.device = kGpu}), randint(0, 10, {32}, {.device = kGpu})};
}

// The plain training step of `net` with `opt` (zero_grad, forward, loss, backward, step).
train::CapturedStep::StepFn adam_step(nn::Module& net, optim::Optimizer& opt) {
  return [&net, &opt](const std::vector<Tensor>& in) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net(in[0]), in[1]);
    loss.backward();
    opt.step();
    return std::vector<Tensor>{loss};
  };
}

nn::Module cnn() {
  return nn::Sequential({nn::Conv2d(1, 8, 3, 1, 1), nn::BatchNorm2d(8), nn::ReLU(),
                         nn::MaxPool2d(2), nn::Dropout(0.1), nn::Flatten(),
                         nn::Linear(8 * 6 * 6, 10)});
}

std::vector<Tensor> cnn_batch(int64_t) {
  return {randn({16, 1, 12, 12}, {.device = kGpu}), randint(0, 10, {16}, {.device = kGpu})};
}

// A TransformerEncoderLayer over 8 tokens of width 32, its mean token classified.
struct EncoderClassifierImpl : nn::ModuleImpl {
  nn::TransformerEncoderLayer layer{nn::TransformerEncoderLayerOptions{
      .d_model = 32, .nhead = 4, .dim_feedforward = 64, .batch_first = true}};
  nn::Linear head{32, 5};
  EncoderClassifierImpl() {
    register_module("layer", layer.ptr());
    register_module("head", head.ptr());
  }
  Tensor forward(const Tensor& x) override { return head(mean(layer(x), {1})); }
  std::string type_name() const override { return "EncoderClassifier"; }
};

std::vector<Tensor> encoder_batch(int64_t) {
  return {randn({4, 8, 32}, {.device = kGpu}), randint(0, 5, {4}, {.device = kGpu})};
}

}  // namespace

TEST(Capture, NeedsACudaDevice) {
  const std::string msg = error_of([] {
    train::CapturedStep step([](const std::vector<Tensor>& in) { return in; },
                             {.device = Device::cpu()});
  });
  EXPECT_NE(msg.find("graph capture needs a CUDA device (got cpu"), std::string::npos) << msg;
  const std::string empty = error_of([] { train::CapturedStep step(nullptr); });
  EXPECT_NE(empty.find("empty step function"), std::string::npos) << empty;
}

TEST(CaptureCuda, MlpWithDropoutAdamCosineClipEqualsEagerBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_captured_equals_eager(mlp, mlp_batch, "MLP");
}

TEST(CaptureCuda, MlpSgdMomentumEqualsEagerBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_captured_equals_eager(mlp, mlp_batch, "MLP (SGD)", /*sgd=*/true);
}

TEST(CaptureCuda, CnnWithBatchNormAndDropoutEqualsEagerBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_captured_equals_eager(cnn, cnn_batch, "CNN");
}

TEST(CaptureCuda, TransformerEncoderLayerEqualsEagerBitwise) {
  SKIP_WITHOUT_CUDA();
  expect_captured_equals_eager([] { return nn::Module(std::make_shared<EncoderClassifierImpl>()); },
                               encoder_batch, "TransformerEncoderLayer");
}

// A captured step whose body runs `inside` after the forward pass.
void capture_with(const std::function<void(const Tensor&)>& inside, const std::string& op) {
  manual_seed(1);
  nn::Module net = mlp();
  net->to(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  train::CapturedStep step(
      [&](const std::vector<Tensor>& in) {
        opt.zero_grad();
        Tensor loss = cross_entropy(net(in[0]), in[1]);
        inside(loss);
        loss.backward();
        opt.step();
        return std::vector<Tensor>{loss};
      },
      {.warmup = 0});
  const std::vector<Tensor> batch = mlp_batch(0);
  const std::string msg = error_of([&] { step(batch); }, op);
  EXPECT_NE(msg.find(op), std::string::npos) << msg;
  EXPECT_NE(msg.find("inside a captured step"), std::string::npos) << msg;
  EXPECT_EQ(step.graph_count(), 0);
  // Nothing is left half-captured: the same step runs eagerly afterwards.
  EXPECT_NO_THROW(synchronize(kGpu));
}

TEST(CaptureCuda, HostReadsInsideTheStepAreRefusedNamingTheOp) {
  SKIP_WITHOUT_CUDA();
  capture_with([](const Tensor& l) { (void)l.item<float>(); }, "item");
  capture_with([](const Tensor& l) { (void)l.to_vector<float>(); }, "to_vector");
  capture_with(
      [](const Tensor& l) {
        std::ostringstream out;
        out << l;
      },
      "printing a tensor");
  capture_with([](const Tensor& l) { (void)l.to(Device::cpu()); }, "to(cpu)");
  capture_with([](const Tensor&) { (void)from_vector<float>({1, 2}, {2}).to(kGpu); }, "to(cuda)");
}

TEST(CaptureCuda, NewInputShapesRecaptureOrAreRefusedNamingBothShapes) {
  SKIP_WITHOUT_CUDA();
  manual_seed(2);
  nn::Module net = mlp();
  net->to(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  const train::CapturedStep::StepFn fn = adam_step(net, opt);
  const std::vector<Tensor> big = mlp_batch(0);
  const std::vector<Tensor> small = {randn({7, 64}, {.device = kGpu}),
                                     randint(0, 10, {7}, {.device = kGpu})};
  train::CapturedStep fixed(fn, {.recapture = false});
  fixed(big);
  fixed(big);
  const std::string msg = error_of([&] { fixed(small); });
  EXPECT_NE(msg.find("[7, 64]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[32, 64]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("recapture is off"), std::string::npos) << msg;

  train::CapturedStep cached(fn, {.warmup = 0, .max_graphs = 2});
  cached(big);
  cached(small);
  cached(big);
  EXPECT_EQ(cached.graph_count(), 2);
  const std::vector<Tensor> third = {randn({3, 64}, {.device = kGpu}),
                                     randint(0, 10, {3}, {.device = kGpu})};
  const std::string full = error_of([&] { cached(third); });
  EXPECT_NE(full.find("max_graphs = 2"), std::string::npos) << full;
  EXPECT_NE(full.find("[3, 64]"), std::string::npos) << full;
}

// With recapture, the smaller last batch of an epoch gets its own graph and the run still
// equals the eager one.
TEST(CaptureCuda, RecapturedShapesStillEqualEager) {
  SKIP_WITHOUT_CUDA();
  auto batches = [](int64_t s) {
    const int64_t n = s % 4 == 3 ? 9 : 32;
    return std::vector<Tensor>{randn({n, 64}, {.device = kGpu}),
                               randint(0, 10, {n}, {.device = kGpu})};
  };
  const CaptureRun eager = run_steps(mlp, batches, false);
  manual_seed(7);
  // run_steps() expects one graph; this run counts its own.
  nn::Module net = mlp();
  net->to(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 3e-3, .weight_decay = 1e-4});
  optim::CosineAnnealingLR sched(opt, 20, 1e-4);
  train::CapturedStep step([&](const std::vector<Tensor>& in) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net(in[0]), in[1]);
    loss.backward();
    optim::clip_grad_norm_tensor(net->parameters(), 0.5);
    opt.step();
    sched.step();
    return std::vector<Tensor>{loss};
  });
  std::vector<std::vector<Tensor>> data;
  manual_seed(11);
  for (int64_t s = 0; s < 20; ++s) data.push_back(batches(s));
  manual_seed(3);
  std::vector<float> losses;
  for (int64_t s = 0; s < 20; ++s) losses.push_back(step(data[s])[0].item<float>());
  EXPECT_EQ(step.graph_count(), 2);
  expect_bitwise(eager.losses, losses, "recaptured MLP losses");
  expect_bitwise(eager.state, state_of(net), "recaptured MLP parameters");
}

TEST(CaptureCuda, ChangedOptimizerAfterCaptureIsRefused) {
  SKIP_WITHOUT_CUDA();
  manual_seed(4);
  nn::Module net = mlp();
  net->to(kGpu);
  nn::Module extra = nn::Linear(4, 4);
  extra->to(kGpu);
  auto opt = std::make_unique<optim::Adam>(net->parameters(), optim::AdamOptions{.lr = 1e-3});
  auto sched = std::make_unique<optim::CosineAnnealingLR>(*opt, 10);
  const train::CapturedStep::StepFn fn = [&](const std::vector<Tensor>& in) {
    opt->zero_grad();
    Tensor loss = cross_entropy(net(in[0]), in[1]);
    loss.backward();
    opt->step();
    sched->step();
    return std::vector<Tensor>{loss};
  };
  train::CapturedStep step(fn);
  const std::vector<Tensor> batch = mlp_batch(0);
  step(batch);
  step(batch);
  step(batch);
  opt->add_param_group(extra->parameters());
  const std::string msg = error_of([&] { step(batch); });
  EXPECT_NE(msg.find("parameters changed since the step was captured"), std::string::npos) << msg;

  train::CapturedStep again(fn);
  again(batch);
  again(batch);
  sched.reset();
  const std::string gone = error_of([&] { again(batch); });
  EXPECT_NE(gone.find("LR scheduler used by the captured step was destroyed"), std::string::npos)
      << gone;
}

TEST(CaptureCuda, CapturedPoolDoesNotGrowOverReplays) {
  SKIP_WITHOUT_CUDA();
  manual_seed(5);
  nn::Module net = mlp();
  net->to(kGpu);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  train::CapturedStep step(adam_step(net, opt));
  const std::vector<Tensor> batch = mlp_batch(0);
  step(batch);  // eager warm-up
  step(batch);  // capture + first launch
  step(batch);  // replay 2
  synchronize(kGpu);
  const MemoryStats after2 = memory_stats(kGpu);
  EXPECT_GT(after2.captured_reserved, 0);
  for (int i = 3; i <= 500; ++i) step(batch);
  synchronize(kGpu);
  const MemoryStats after500 = memory_stats(kGpu);
  EXPECT_EQ(after500.captured_reserved, after2.captured_reserved);
  EXPECT_EQ(after500.captured_in_use, after2.captured_in_use);
  EXPECT_EQ(after500.persistent_bytes, after2.persistent_bytes);
  EXPECT_EQ(after500.pass_reserved, after2.pass_reserved);
  EXPECT_EQ(after500.system_allocs, after2.system_allocs);
}

TEST(CaptureCuda, InferenceOnlyCaptureEqualsEager) {
  SKIP_WITHOUT_CUDA();
  manual_seed(6);
  nn::Module net = cnn();
  net->to(kGpu);
  net->eval();
  train::CapturedStep infer(
      [&](const std::vector<Tensor>& in) {
        NoGradGuard no_grad;
        return std::vector<Tensor>{softmax(net(in[0]), -1)};
      },
      {.warmup = 0});
  for (int i = 0; i < 3; ++i) {
    const Tensor x = randn({16, 1, 12, 12}, {.device = kGpu});
    std::vector<float> eager;
    {
      NoGradGuard no_grad;
      eager = softmax(net(x), -1).to_vector<float>();
    }
    expect_bitwise(eager, infer({x})[0].to_vector<float>(), "inference");
  }
  EXPECT_EQ(infer.graph_count(), 1);
}

// Inside a graph, a chained elementwise kernel right after a device-to-device copy (a same-dtype
// copy over 1 MiB is a cudaMemcpyAsync node) reads this replay's copy: the input changes before
// each replay. With set_poison_allocations on, the blocks the capture allocates (the step's
// static inputs among them) are poisoned once, when captured: a fill recorded into the graph
// would wipe, on every replay, the input written into it before the launch (the first version
// of the poison did, and every replay read NaN).
TEST(CaptureCuda, LargeCopiesAndPoisonedBlocksSeeEachReplaysInput) {
  SKIP_WITHOUT_CUDA();
  const int64_t n = int64_t{1} << 24;  // 64 MiB: the copy takes tens of microseconds
  Tensor x = zeros({n}, {.device = kGpu});
  for (bool poison : {false, true}) {
    const ember_test::PoisonScope poisoned(poison);
    train::CapturedStep step(
        [](const std::vector<Tensor>& in) {
          const Tensor copy = in[0].clone();  // cudaMemcpyAsync: over 1 MiB, one dtype
          return std::vector<Tensor>{copy * 2.0 + 1.0, copy.narrow(0, 0, 1024) - 1.0};
        },
        {.warmup = 1});
    for (int replay = 0; replay < 6; ++replay) {
      const float v = static_cast<float>(replay + 1) * (poison ? -1.0f : 1.0f);
      x.fill_(v);
      const std::vector<Tensor> r = step({x});
      const std::vector<float> doubled = r[0].to_vector<float>();
      const std::vector<float> head = r[1].to_vector<float>();
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += doubled[i] != 2.0f * v + 1.0f;
      for (float h : head) wrong += h != v - 1.0f;
      EXPECT_EQ(wrong, 0) << "replay " << replay << (poison ? " with poisoned allocations" : "")
                          << ": first value " << doubled[0] << ", expected " << 2.0f * v + 1.0f;
    }
  }
}

// fit(capture_step): the same epochs and weights as the eager fit, bitwise (100 rows in
// batches of 32: the last batch of 4 gets its own graph).
namespace {
std::pair<std::vector<double>, std::vector<float>> fit_mlp(bool capture, Device device) {
  manual_seed(8);
  const Tensor x = randn({100, 64});
  const Tensor y = randint(0, 10, {100});
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  data::DataLoader loader(ds, {.batch_size = 32, .shuffle = true, .seed = 3});
  manual_seed(9);
  nn::Module net = mlp();
  net->to(device);
  optim::Adam opt(net->parameters(), {.lr = 1e-3});
  optim::CosineAnnealingLR sched(opt, 12);
  const train::History h = train::fit(net, loader, opt, train::cross_entropy_loss(),
                                      {.epochs = 3,
                                       .scheduler = &sched,
                                       .scheduler_per_batch = true,
                                       .progress = train::Progress::none,
                                       .clip_grad_norm = 1.0,
                                       .capture_step = capture});
  std::vector<double> losses;
  for (const train::EpochLog& e : h.epochs) losses.push_back(e.train.loss);
  return {losses, state_of(net)};
}
}  // namespace

TEST(CaptureCuda, FitCaptureStepEqualsEagerFit) {
  SKIP_WITHOUT_CUDA();
  const auto eager = fit_mlp(false, kGpu);
  const auto graph = fit_mlp(true, kGpu);
  ASSERT_EQ(eager.first.size(), 3u);
  for (size_t e = 0; e < 3; ++e)
    EXPECT_EQ(eager.first[e], graph.first[e]) << "epoch " << e << " training loss";
  expect_bitwise(eager.second, graph.second, "fit(capture_step) parameters");
}

TEST(Capture, FitCaptureStepNeedsACudaModel) {
  const std::string msg = error_of([] { fit_mlp(true, Device::cpu()); });
  EXPECT_NE(msg.find("capture_step needs the model on a CUDA device (got cpu)"), std::string::npos)
      << msg;
}

// A captured step's memory goes when it does: its private pool is freed, and gradients the
// capture made (counted as captured, never as persistent) leave the eager pools' figures as
// they were (a rescued or dropped gradient once left them unbalanced).
TEST(CaptureCuda, EverythingIsFreedWithTheStep) {
  SKIP_WITHOUT_CUDA();
  synchronize(kGpu);
  const MemoryStats before = memory_stats(kGpu);
  {
    manual_seed(12);
    nn::Module net = mlp();
    net->to(kGpu);
    optim::Adam opt(net->parameters(), {.lr = 1e-3});
    train::CapturedStep step(adam_step(net, opt));
    const std::vector<Tensor> batch = mlp_batch(0);
    for (int i = 0; i < 4; ++i) step(batch);
    synchronize(kGpu);
    EXPECT_GT(memory_stats(kGpu).captured_in_use, 0);
  }
  synchronize(kGpu);
  const MemoryStats after = memory_stats(kGpu);
  EXPECT_EQ(after.persistent_bytes, before.persistent_bytes);
  EXPECT_EQ(after.pass_in_use, before.pass_in_use);
  EXPECT_EQ(after.captured_in_use, 0);
  EXPECT_EQ(after.captured_reserved, 0);
}
