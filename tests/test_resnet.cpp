// tests/test_resnet.cpp — nn::ResNet and models::resnet* against torchvision 0.14: every
// state_dict name, shape and dtype (tests/data/resnet_names.json, no Python at run time), the
// initialisation, checkpoints, bad input; then torchvision models with seeded weights, written
// at test time by tests/gen_resnet_fixtures.py (too big to commit): eval and train logits,
// running statistics, every gradient and an SGD loss trajectory; a tiny training run; and
// the GPU against the CPU (CudaResNet.*, skipped without a device).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/io/foreign.hpp"
#include "ember/io/pth.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/resnet.hpp"
#include "ember/nn/init.hpp"
#include "ember/optim/sgd.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "model_compare.hpp"
#include "torchvision_reference.hpp"

namespace {

using namespace ember;
using ember::test_util::error_of;
using ember_test::expect_close;
namespace fs = std::filesystem;

// torch's dtype names, as the names fixture writes them.
std::string torch_dtype(DType t) {
  return t == DType::f32 ? "float32" : t == DType::i64 ? "int64" : std::string(dtype_name(t));
}

nn::ResNet uninitialised(const std::string& arch, nn::ResNetOptions options = {}) {
  nn::init::SkipInitGuard skip;  // every value is about to be compared by name only, or loaded
  return models::resnet(arch, options);
}

TEST(ResNet, NamesShapesAndOrderAreTorchvisions) {
  std::ifstream in(ember_test::data_dir() + "/resnet_names.json");
  ASSERT_TRUE(in) << "tests/data/resnet_names.json is missing (tests/gen_resnet_fixtures.py)";
  const nn::json fixture = nn::json::parse(in);
  ASSERT_EQ(fixture["models"].size(), models::resnet_names().size());
  for (const std::string& arch : models::resnet_names()) {
    SCOPED_TRACE(arch);
    const nn::json& rows = fixture["models"].at(arch);
    nn::ResNet net = uninitialised(arch);
    std::set<std::string> buffers;
    for (const auto& [name, t] : net->named_buffers()) buffers.insert(name);
    const nn::StateDict sd = net->state_dict();
    ASSERT_EQ(sd.size(), rows.size());
    for (size_t i = 0; i < sd.size(); ++i) {
      const auto& [name, t] = sd[i];
      const nn::json& row = rows[i];
      EXPECT_EQ(name, row[0].get<std::string>()) << "entry " << i;
      EXPECT_EQ(std::vector<int64_t>(t.shape().begin(), t.shape().end()),
                row[1].get<std::vector<int64_t>>())
          << name;
      EXPECT_EQ(torch_dtype(t.dtype()), row[2].get<std::string>()) << name;
      EXPECT_EQ(buffers.count(name) ? "buffer" : "parameter", row[3].get<std::string>()) << name;
    }
  }
  // torchvision's documented sizes.
  EXPECT_EQ(uninitialised("resnet18")->parameter_count(), 11689512);
  EXPECT_EQ(uninitialised("resnet50")->parameter_count(), 25557032);
}

TEST(ResNet, InitialisationIsTorchvisions) {
  manual_seed(0);
  nn::ResNet net = models::resnet18({.num_classes = 10});
  int convs = 0;
  for (const auto& [name, m] : net->named_modules()) {
    if (auto conv = std::dynamic_pointer_cast<nn::Conv2dImpl>(m)) {
      const Tensor& w = conv->weight();
      const double want = std::sqrt(2.0 / static_cast<double>(nn::init::fans(w.shape()).second));
      const double got = ember::std(w).item<float>();
      EXPECT_NEAR(got / want, 1.0, 0.05) << name << ": kaiming_normal_(fan_out, relu)";
      EXPECT_NEAR(mean(w).item<float>() / want, 0.0, 0.05) << name;
      ++convs;
    }
    if (auto bn = std::dynamic_pointer_cast<nn::BatchNorm2dImpl>(m)) {
      EXPECT_EQ(min(bn->param("weight")).item<float>(), 1.0f) << name;
      EXPECT_EQ(max(bn->param("weight")).item<float>(), 1.0f) << name;
      EXPECT_EQ(max(abs(bn->param("bias"))).item<float>(), 0.0f) << name;
    }
  }
  EXPECT_EQ(convs, 20);                         // the stem, 16 in the blocks, 3 downsamples
  const double bound = 1.0 / std::sqrt(512.0);  // nn.Linear's default
  const Tensor fc = net->fc()->weight();
  EXPECT_LE(max(abs(fc)).item<float>(), bound);
  EXPECT_GT(max(abs(fc)).item<float>(), 0.95 * bound);

  // zero_init_residual: the last BatchNorm of each block starts at 0, the others at 1.
  for (const std::string arch : {"resnet18", "resnet50"}) {
    nn::ResNet zeroed = models::resnet(arch, {.zero_init_residual = true});
    const std::string last = arch == "resnet18" ? "bn2" : "bn3";
    int zeroed_norms = 0;
    for (const auto& [name, p] : zeroed->named_parameters()) {
      if (!name.starts_with("layer") || !name.ends_with(".weight") || p.dim() != 1) continue;
      const bool is_last = name.ends_with("." + last + ".weight");
      EXPECT_EQ(max(abs(p)).item<float>(), is_last ? 0.0f : 1.0f) << arch << " " << name;
      zeroed_norms += is_last;
    }
    EXPECT_EQ(zeroed_norms, arch == "resnet18" ? 8 : 16) << arch;
  }
}

TEST(ResNet, KaimingNormalAndGainsAreTorchs) {
  manual_seed(1);
  Tensor w = zeros({256, 64, 3, 3});
  nn::init::kaiming_normal_(w, {.mode = nn::init::FanMode::fan_out, .nonlinearity = "relu"});
  EXPECT_NEAR(ember::std(w).item<float>(), std::sqrt(2.0 / (256 * 9)),
              0.01 * std::sqrt(2.0 / 2304));
  nn::init::kaiming_normal_(w);  // fan_in, leaky_relu with a = 0: gain √2
  EXPECT_NEAR(ember::std(w).item<float>(), std::sqrt(2.0 / (64 * 9)), 0.01 * std::sqrt(2.0 / 576));
  nn::init::kaiming_normal_(w, {.a = 0.2});
  EXPECT_NEAR(ember::std(w).item<float>(), std::sqrt(2.0 / 1.04) / std::sqrt(576.0),
              0.01 / std::sqrt(576.0));
  {
    nn::init::SkipInitGuard skip;  // draws nothing, keeps the values
    const Tensor before = w.clone();
    nn::init::kaiming_normal_(w);
    expect_close(w, before, 0, 0, "kaiming_normal_ under SkipInitGuard");
  }
  // torch.nn.init.calculate_gain's values.
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("conv2d"), 1.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("leaky_relu", 0.01), std::sqrt(2.0 / 1.0001));
  EXPECT_DOUBLE_EQ(nn::init::calculate_gain("selu"), 0.75);
  nn::init::constant_(w, 0.5);
  EXPECT_EQ(min(w).item<float>(), 0.5f);
}

TEST(ResNet, ForwardShapesAndTrainEvalModes) {
  manual_seed(2);
  nn::ResNet net = models::resnet18({.num_classes = 7});
  const Tensor x = randn({2, 3, 40, 52});
  net->train();
  const Tensor y = net(x);
  EXPECT_EQ(y.shape(), Shape({2, 7}));
  Tensor& tracked =
      net->layer(4)->named_children()[0].second->child("bn2")->buffer("num_batches_tracked");
  EXPECT_EQ(tracked.item<int64_t>(), 1) << "a train-mode forward updates the running stats";
  EXPECT_GT(max(abs(net->named_buffers()[0].second)).item<float>(), 0.0f) << "bn1.running_mean";

  net->eval();
  const Tensor stats = net->named_buffers()[0].second.clone();
  NoGradGuard no_grad;
  const Tensor a = net(x), b = net(x);
  expect_close(a, b, 0, 0, "eval forward twice");
  expect_close(net->named_buffers()[0].second, stats, 0, 0, "eval keeps bn1.running_mean");
  EXPECT_EQ(tracked.item<int64_t>(), 1);
  expect_close(net->fc()(net->features(x)), a, 0, 0, "fc(features(x))");
  EXPECT_EQ(net->features(x).shape(), Shape({2, 512}));

  nn::ResNet bottleneck = models::resnet50({.num_classes = 3});
  bottleneck->eval();  // train mode refuses one value per channel, as torch's BatchNorm does
  EXPECT_EQ(bottleneck->features(randn({1, 3, 32, 32})).shape(), Shape({1, 2048}));
  // Dilation instead of stride (Bottleneck only) keeps layer3/4 at layer2's resolution.
  nn::ResNet dilated =
      models::resnet50({.num_classes = 3, .replace_stride_with_dilation = {false, true, true}});
  dilated->eval();
  EXPECT_EQ(dilated(randn({1, 3, 32, 32})).shape(), Shape({1, 3}));
}

TEST(ResNet, SavesAndLoadsFromItsConfig) {
  manual_seed(3);
  nn::ResNet net = models::resnet18({.num_classes = 5, .zero_init_residual = true});
  const Tensor x = randn({2, 3, 32, 32});
  net->train();
  net(x);  // running stats away from their start
  net->eval();
  NoGradGuard no_grad;
  const Tensor want = net(x);
  const fs::path dir = fs::temp_directory_path() / ("ember_resnet_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "resnet18.safetensors").string();
  io::save_model(net, path);
  nn::Module back = io::load_model(path);
  fs::remove_all(dir);
  EXPECT_EQ(back->type_name(), "ResNet");
  EXPECT_EQ(back->config(), net->config());
  EXPECT_FALSE(back->is_training());
  expect_close(back(x), want, 0, 0, "load_model(save_model(resnet18)) logits");

  // Every builder's config rebuilds the same tree; a block alone rebuilds from its own.
  for (const std::string& arch : models::resnet_names()) {
    nn::ResNet a = uninitialised(arch, {.num_classes = 11});
    nn::Module b;
    {
      nn::init::SkipInitGuard skip;
      b = nn::build(a->config());
    }
    ASSERT_EQ(b->state_dict().size(), a->state_dict().size()) << arch;
    for (size_t i = 0; i < a->state_dict().size(); ++i) {
      EXPECT_EQ(b->state_dict()[i].first, a->state_dict()[i].first) << arch;
      EXPECT_EQ(b->state_dict()[i].second.shape(), a->state_dict()[i].second.shape()) << arch;
    }
  }
  nn::ModulePtr block = net->layer(2)->named_children()[0].second;
  EXPECT_EQ(block->type_name(), "BasicBlock");
  EXPECT_EQ(nn::build(block->config())->config(), block->config());
  EXPECT_TRUE(block->config()["options"]["downsample"].get<bool>());
}

TEST(ResNet, BadInputNamesTheModuleAndWhatWasExpected) {
  nn::ResNet net = uninitialised("resnet18");
  EXPECT_NE(error_of([&] {
              net(zeros({2, 1, 32, 32}));
            }).find("ResNet: input [2, 1, 32, 32] (expected [N, 3, H, W])"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              net(zeros({3, 32, 32}));
            }).find("ResNet: input [3, 32, 32]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              nn::ResNet(nn::ResNetBlock::basic, std::vector<int64_t>{2, 2, 2});
            }).find("ResNet: layers has 3 entries (expected 4"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              nn::ResNet(nn::ResNetBlock::basic, std::vector<int64_t>{2, 0, 2, 2});
            }).find("ResNet: layers[1] = 0 (expected >= 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              models::resnet18({.num_classes = 0});
            }).find("ResNet: num_classes 0 (expected >= 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              models::resnet34({.groups = 32, .width_per_group = 4});
            }).find("BasicBlock: groups 32, base_width 4 (expected 1 and 64"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              models::resnet18({.replace_stride_with_dilation = {false, false, true}});
            }).find("BasicBlock: dilation 2 (expected 1"),
            std::string::npos);
  const std::string unknown = error_of([] { models::resnet("resnet19"); });
  EXPECT_NE(unknown.find("models::resnet: unknown model \"resnet19\" (expected one of resnet18, "
                         "resnet34, resnet50, resnet101, resnet152, resnext50_32x4d, "
                         "wide_resnet50_2)"),
            std::string::npos)
      << unknown;
  EXPECT_NE(error_of([&] { net->layer(5); }).find("ResNet::layer: 5 (expected 1..4"),
            std::string::npos);
  nn::json config = net->config();
  config["options"]["block"] = "Inverted";
  EXPECT_NE(error_of([&] {
              nn::build(config);
            }).find("nn::build: ResNet block \"Inverted\" (expected BasicBlock or Bottleneck)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              nn::init::calculate_gain("swish");
            }).find("init::calculate_gain: unknown nonlinearity \"swish\" (expected linear"),
            std::string::npos);
  Tensor bias = zeros({8});
  EXPECT_NE(error_of([&] {
              nn::init::kaiming_normal_(bias);
            }).find("init: fan in/out need at least 2 dims (got shape [8])"),
            std::string::npos);
  Tensor empty_weight = zeros({0, 3, 3, 3});
  nn::init::kaiming_normal_(empty_weight);  // a no-op, as torch's
  EXPECT_EQ(empty_weight.numel(), 0);
}

// The losses of `steps` SGD steps of `net` (train mode) on one batch; `after_first_backward`
// looks at the first step's gradients before the update.
std::vector<double> sgd_losses(nn::ResNet& net, const Tensor& x, const Tensor& y,
                               optim::SGDOptions options, int steps,
                               const std::function<void()>& after_first_backward = {}) {
  optim::SGD opt(net->parameters(), options);
  net->train();
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(net(x), y);
    loss.backward();
    if (step == 0 && after_first_backward) after_first_backward();
    opt.step();
    losses.push_back(loss.to(DType::f64).item<double>());
  }
  return losses;
}

// Tiny ResNet-18 (10 classes, 32×32): SGD memorises a batch, every parameter gets a gradient.
TEST(ResNet, TinyResNet18LearnsAndEveryParameterGetsAGradient) {
  manual_seed(4);
  nn::ResNet net = models::resnet18({.num_classes = 10});
  const Tensor x = randn({8, 3, 32, 32});
  const Tensor y = randint(0, 10, {8});
  const std::vector<double> losses = sgd_losses(net, x, y, {.lr = 0.05, .momentum = 0.9}, 8, [&] {
    for (const auto& [name, p] : net->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_GT(norm(p.grad()).item<float>(), 0.0f) << name;
    }
  });
  EXPECT_GT(losses.front(), 1.5);
  EXPECT_LT(losses.back(), 0.3 * losses.front())
      << "losses " << from_vector(losses, {static_cast<int64_t>(losses.size())});
}

// ---- against torchvision, at test time ----

// The torchvision reference of `arch` (tests/torchvision_reference.hpp), or why there is none.
using Reference = ember_test::TorchvisionReference;
Reference reference(const std::string& arch, const std::string& args = "") {
  return ember_test::torchvision_reference(arch, args);
}

#define SKIP_WITHOUT_REFERENCE(r) EMBER_SKIP_WITHOUT_REFERENCE(r)

// torchvision's weights into a model built without drawing any (strict: every name, shape).
nn::ResNet load_torchvision(const std::string& arch, const Reference& r) {
  nn::ResNet net = uninitialised(arch, {.num_classes = 10});
  io::load_state(net, r.weights.string(), io::LoadStateOptions{});
  return net;
}

// f32 eval logits within 1e-4; f32 train logits within 1e-3 (batch statistics over layer4's
// 8 values per channel amplify rounding); train mode's exact checks in f64 (Note in
// tests/gen_resnet_fixtures.py), where ember and torch agree to rounding.
constexpr double kRtol32 = 1e-4, kAtol32 = 1e-5, kRtol64 = 1e-9, kAtol64 = 1e-11;

// Eval logits (f32, f64); train-mode logits (f32, f64), loss and every BatchNorm buffer after
// that forward (f64). Leaves `net` in f64 and train mode.
void expect_forward_matches(const std::string& arch, nn::ResNet& net, const Reference& r) {
  const io::SafetensorsFile want(r.expected.string());
  const Tensor x = want.read("x"), y = want.read("y");
  nn::ResNet f32 = uninitialised(arch, {.num_classes = 10});  // train mode changes the stats
  f32->load_state_dict(net->state_dict());
  net->eval();
  f32->train();
  {
    NoGradGuard no_grad;
    expect_close(net(x), want.read("logits_eval"), kRtol32, kAtol32, arch + " eval logits");
    expect_close(f32(x), want.read("logits_train_f32"), 1e-3, 1e-4, arch + " f32 train logits");
  }
  net->to(DType::f64);
  const Tensor x64 = x.to(DType::f64);
  {
    NoGradGuard no_grad;
    expect_close(net(x64), want.read("logits_eval_f64"), kRtol64, kAtol64,
                 arch + " f64 eval logits");
  }
  net->train();
  const Tensor logits = net(x64);
  expect_close(logits, want.read("logits_train"), kRtol64, kAtol64, arch + " train logits");
  expect_close(cross_entropy(logits, y), want.read("loss"), kRtol64, kAtol64, arch + " loss");
  int buffers = 0;
  for (const auto& [name, t] : net->named_buffers()) {
    expect_close(t, want.read("after." + name), kRtol64, kAtol64, arch + " " + name);
    ++buffers;
  }
  EXPECT_EQ(buffers, arch == "resnet18" ? 60 : 159);
}

TEST(ResNetTorchvision, Resnet18LogitsRunningStatsAndGradients) {
  const Reference r = reference("resnet18", "--steps 3 --grads --pth");
  SKIP_WITHOUT_REFERENCE(r);
  nn::ResNet net = load_torchvision("resnet18", r);
  expect_forward_matches("resnet18", net, r);
  const io::SafetensorsFile want(r.expected.string());
  net->zero_grad();
  cross_entropy(net(want.read("x").to(DType::f64)), want.read("y")).backward();
  // The second train-mode forward saw the same batch: the gradients are of the same loss.
  int grads = 0;
  for (const auto& [name, p] : net->named_parameters()) {
    expect_close(p.grad(), want.read("grad." + name), 1e-8, 1e-10, "resnet18 grad of " + name);
    ++grads;
  }
  EXPECT_EQ(grads, 62);
}

TEST(ResNetTorchvision, Resnet18SgdLossTrajectory) {
  const Reference r = reference("resnet18", "--steps 3 --grads --pth");
  SKIP_WITHOUT_REFERENCE(r);
  nn::ResNet net = load_torchvision("resnet18", r);
  net->to(DType::f64);
  const io::SafetensorsFile want(r.expected.string());
  const Tensor x = want.read("x").to(DType::f64), y = want.read("y");
  const std::vector<double> losses =
      sgd_losses(net, x, y, {.lr = 0.01, .momentum = 0.9, .weight_decay = 1e-4}, 3);
  expect_close(from_vector(losses, {3}), want.read("losses"), 1e-8, 1e-10,
               "resnet18 losses of 3 SGD steps");
}

TEST(ResNetTorchvision, Resnet50LogitsAndRunningStats) {
  const Reference r = reference("resnet50");
  SKIP_WITHOUT_REFERENCE(r);
  nn::ResNet net = load_torchvision("resnet50", r);
  expect_forward_matches("resnet50", net, r);
}

TEST(ResNetTorchvision, Resnext50GroupedLogits) {
  const Reference r = reference("resnext50_32x4d");
  SKIP_WITHOUT_REFERENCE(r);
  nn::ResNet net = load_torchvision("resnext50_32x4d", r);
  expect_forward_matches("resnext50_32x4d", net, r);
}

// torchvision's downloads are torch.save archives of the state_dict: io::load_pth reads them
// without Python.
TEST(ResNetTorchvision, Resnet18FromTorchSaveArchive) {
  const Reference r = reference("resnet18", "--steps 3 --grads --pth");
  SKIP_WITHOUT_REFERENCE(r);
  nn::ResNet net = uninitialised("resnet18", {.num_classes = 10});
  const nn::LoadReport report =
      net->load_state_dict(io::load_pth((r.weights.parent_path() / "resnet18.pth").string()));
  EXPECT_EQ(report.applied.size(), 122u);
  const io::SafetensorsFile want(r.expected.string());
  net->eval();
  NoGradGuard no_grad;
  expect_close(net(want.read("x")), want.read("logits_eval"), kRtol32, kAtol32,
               "resnet18 from resnet18.pth, eval logits");
}

TEST(ResNetTorchvision, MissingOrMisshapenWeightsAreRefused) {
  const Reference r = reference("resnet18", "--steps 3 --grads --pth");
  SKIP_WITHOUT_REFERENCE(r);
  nn::ResNet wrong = uninitialised("resnet18", {.num_classes = 1000});
  const std::string e =
      error_of([&] { io::load_state(wrong, r.weights.string(), io::LoadStateOptions{}); });
  EXPECT_NE(e.find("fc.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("[1000, 512]"), std::string::npos) << e;
  nn::ResNet other = uninitialised("resnet34", {.num_classes = 10});
  const std::string missing =
      error_of([&] { io::load_state(other, r.weights.string(), io::LoadStateOptions{}); });
  EXPECT_NE(missing.find("layer1.2.conv1.weight"), std::string::npos) << missing;
}

// ---- the GPU against the CPU (the H200 runs these) ----

TEST(CudaResNet, Resnet18ForwardBackwardMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(5);
  nn::ResNet cpu = models::resnet18({.num_classes = 10});
  nn::ResNet gpu = uninitialised("resnet18", {.num_classes = 10});
  gpu->load_state_dict(cpu->state_dict());
  gpu->to(Device::cuda(0));
  const Tensor x = randn({4, 3, 64, 64});
  const Tensor y = randint(0, 10, {4});
  for (nn::ResNet* net : {&cpu, &gpu}) (*net)->train();
  const Tensor logits_cpu = cpu(x);
  const Tensor logits_gpu = gpu(x.to(Device::cuda(0)));
  expect_close(logits_gpu.to(Device::cpu()), logits_cpu, 1e-3, 1e-4, "cuda train logits");
  cross_entropy(logits_cpu, y).backward();
  cross_entropy(logits_gpu, y.to(Device::cuda(0))).backward();
  ASSERT_EQ(cpu->named_parameters().size(), 62u);
  ember_test::expect_grads_close_in_norm(cpu->named_parameters(), gpu->named_parameters(), 1e-3f,
                                         0.0f, "cuda");
  ember_test::expect_buffers_close(cpu->named_buffers(), gpu->named_buffers(), 1e-4, 1e-5, "cuda");
  cpu->eval();
  gpu->eval();
  NoGradGuard no_grad;
  expect_close(gpu(x.to(Device::cuda(0))).to(Device::cpu()), cpu(x), 1e-3, 1e-4,
               "cuda eval logits");
}

// The same step in f64 (model_compare.hpp): a gap here is a wrong kernel, one in f32 alone may
// be rounding (docs/benchmarks.md, H100 2026-12-05).
TEST(CudaResNet, Resnet18F64StepMatchesCpuClosely) {
  SKIP_WITHOUT_CUDA();
  manual_seed(5);
  nn::ResNet cpu = models::resnet18({.num_classes = 10});
  ember_test::expect_f64_step_matches(cpu, uninitialised("resnet18", {.num_classes = 10}));
}

TEST(CudaResNet, Bf16AutocastTrainingStepRuns) {
  SKIP_WITHOUT_CUDA();
  for (const std::string arch : {"resnet18", "resnet50"}) {
    SCOPED_TRACE(arch);
    manual_seed(6);
    nn::ResNet net = models::resnet(arch, {.num_classes = 10});
    net->to(Device::cuda(0));
    net->train();
    const Tensor x = randn({8, 3, 64, 64}).to(Device::cuda(0));
    const Tensor y = randint(0, 10, {8}).to(Device::cuda(0));
    const float f32_loss = cross_entropy(net(x), y).item<float>();
    optim::SGD opt(net->parameters(), {.lr = 0.01, .momentum = 0.9});
    opt.zero_grad();
    Tensor loss;
    {
      AutocastGuard autocast(DType::bf16);
      loss = cross_entropy(net(x), y);
    }
    loss.backward();
    EXPECT_EQ(loss.dtype(), DType::f32);
    EXPECT_NEAR(loss.item<float>(), f32_loss, 0.05 * f32_loss) << "bf16 autocast vs f32 loss";
    for (const auto& [name, p] : net->named_parameters()) {
      ASSERT_EQ(p.dtype(), DType::f32) << name;
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_EQ(p.grad().dtype(), DType::f32) << name;
      EXPECT_TRUE(all(isfinite(p.grad())).item<bool>()) << name;
    }
    opt.step();
  }
}

}  // namespace
