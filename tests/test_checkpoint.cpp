// tests/test_checkpoint.cpp — activation checkpointing (ember/checkpoint.hpp, docs/autograd.md
// "Activation checkpointing"): a checkpointed step's loss, outputs and every gradient (inputs
// and parameters) are bitwise those of the plain step — an MLP, a segment with dropout, a
// transformer-ish block (LayerNorm, Linear, gelu, causal attention, residuals) also under bf16
// autocast, nested segments, several outputs, a weight shared with the outside — the generator
// ends where the plain step leaves it, a checkpointed chain keeps less Pass memory alive after
// the forward, autograd::grad, gradcheck and retain_graph work through it, and wrong use is an
// ember::Error naming "checkpoint". Each case runs on the CPU and (CheckpointCuda, skipped
// without a device) on the GPU, plus a captured step replaying a checkpointed segment.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/checkpoint.hpp"
#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/optim.hpp"
#include "ember/train/capture.hpp"
#include "error_of.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::DeterministicScope;
using ember_test::kGpu;
using test_util::error_of;

const Device kCpu = Device::cpu();

// ---- what a step produced, compared bit for bit ----

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.detach().contiguous().to(Device::cpu());
  std::vector<uint8_t> b(static_cast<size_t>(c.numel()) * element_size(c.dtype()));
  if (!b.empty()) std::memcpy(b.data(), c.data_ptr(), b.size());
  return b;
}

// Named tensors of one run (the loss, outputs, every gradient) and the generator's state after.
struct StepRun {
  std::vector<std::string> names;
  std::vector<Tensor> values;
  RngState rng;
  void add(const std::string& name, const Tensor& t) {
    names.push_back(name);
    values.push_back(t.defined() ? t.detach().clone() : Tensor());
  }
  void add_grads(const std::string& prefix, const std::vector<Tensor>& ts) {
    for (size_t i = 0; i < ts.size(); ++i) add(prefix + std::to_string(i) + ".grad", ts[i].grad());
  }
};

// Every value of `ckpt` has the bits of the same value of `plain`; names the first mismatches.
void expect_bitwise(const StepRun& plain, const StepRun& ckpt) {
  ASSERT_EQ(plain.names, ckpt.names);
  for (size_t i = 0; i < plain.values.size(); ++i) {
    const Tensor& a = plain.values[i];
    const Tensor& b = ckpt.values[i];
    const std::string& what = plain.names[i];
    ASSERT_EQ(a.defined(), b.defined()) << what << ": defined in one run only";
    if (!a.defined()) continue;
    ASSERT_EQ(a.shape(), b.shape()) << what;
    ASSERT_EQ(a.dtype(), b.dtype()) << what;
    const std::vector<uint8_t> x = bytes_of(a), y = bytes_of(b);
    if (std::memcmp(x.data(), y.data(), x.size()) == 0) continue;
    const std::vector<float> fa = a.to(DType::f32).to(Device::cpu()).to_vector<float>();
    const std::vector<float> fb = b.to(DType::f32).to(Device::cpu()).to_vector<float>();
    int shown = 0;
    for (size_t k = 0; k < fa.size() && shown < 5; ++k)
      if (std::memcmp(&fa[k], &fb[k], sizeof(float)) != 0 || fa[k] != fb[k])
        ADD_FAILURE() << what << " " << a.shape().to_string() << " element " << k << ": plain "
                      << fa[k] << ", checkpointed " << fb[k] << " (expected the same bits)",
            ++shown;
    if (shown == 0) ADD_FAILURE() << what << ": the bytes differ (expected the same bits)";
  }
  EXPECT_EQ(plain.rng.seed, ckpt.rng.seed);
  EXPECT_EQ(plain.rng.offset, ckpt.rng.offset)
      << "the generator's offset after the step differs from the plain step's";
}

std::vector<Tensor> params_of(const std::vector<nn::Module>& modules) {
  std::vector<Tensor> out;
  for (const nn::Module& m : modules)
    for (const Tensor& p : m->parameters()) out.push_back(p);
  return out;
}

// ---- the segments under test ----

// A pre-norm transformer block: x + drop(proj(attn(ln1(x)))), then + drop(fc2(gelu(fc1(ln2)))).
struct Block {
  int64_t d, heads;
  double p;
  nn::LayerNorm ln1, ln2;
  nn::Linear qkv, proj, fc1, fc2;
  Block(int64_t dim, int64_t h, double drop, Device dev)
      : d(dim),
        heads(h),
        p(drop),
        ln1(Shape{dim}),
        ln2(Shape{dim}),
        qkv(dim, 3 * dim),
        proj(dim, dim),
        fc1(dim, 4 * dim),
        fc2(4 * dim, dim) {
    for (const nn::Module& m : modules()) m->to(dev);
  }
  std::vector<nn::Module> modules() const { return {ln1, ln2, qkv, proj, fc1, fc2}; }
  Tensor operator()(const Tensor& x) const {
    const int64_t b = x.shape()[0], t = x.shape()[1], e = d / heads;
    const Tensor h = qkv(ln1(x));
    auto heads_of = [&](int64_t i) {
      return h.narrow(-1, i * d, d).reshape({b, t, heads, e}).transpose(1, 2);
    };
    const Tensor a =
        scaled_dot_product_attention(heads_of(0), heads_of(1), heads_of(2), {.is_causal = true});
    const Tensor y = x + dropout(proj(a.transpose(1, 2).contiguous().reshape({b, t, d})), p);
    return y + dropout(fc2(gelu(fc1(ln2(y)), "tanh")), p);
  }
};

struct BlockRunOptions {
  Device device = kCpu;
  bool checkpointed = false;
  bool autocast = false;  // bf16
  bool nested = false;    // both blocks inside one outer checkpoint as well
  double p = 0.1;
};

// Two blocks and a head on [2, 8, 32]; the loss is the head's mean square. Same seeds each run.
StepRun run_blocks(const BlockRunOptions& o) {
  manual_seed(11);
  Block b0(32, 4, o.p, o.device), b1(32, 4, o.p, o.device);
  nn::Linear head(32, 8);
  head->to(o.device);
  Tensor x = randn({2, 8, 32}, {.device = o.device}).requires_grad_();
  manual_seed(12);
  StepRun r;
  Tensor y, loss;
  // Outside the autocast scope: the nested checkpoint keeps `both`, which refers to `one`, until
  // backward (a segment's fn must outlive its backward).
  auto one = [&](const Block& blk, const Tensor& in) {
    return o.checkpointed ? checkpoint(blk, in) : blk(in);
  };
  auto both = [&](const Tensor& in) { return one(b1, one(b0, in)); };
  {
    AutocastGuard autocast(DType::bf16, o.autocast);
    y = o.checkpointed && o.nested ? checkpoint(both, x) : both(x);
    loss = mean(square(head(y)));
  }
  loss.backward();
  r.add("loss", loss);
  r.add("y", y);
  r.add("x.grad", x.grad());
  r.add_grads("block0.", params_of(b0.modules()));
  r.add_grads("block1.", params_of(b1.modules()));
  r.add_grads("head.", head->parameters());
  r.rng = get_rng_state();
  return r;
}

// An MLP segment (Sequential: Linear+ReLU and Linear+GELU(tanh) are its fused pairs) with a
// plain head after it; `drop` adds two dropouts in training mode. Checkpointed as a module.
StepRun run_mlp(Device dev, bool checkpointed, double drop) {
  manual_seed(3);
  nn::Sequential seg({nn::Linear(16, 32), nn::ReLU(), nn::Dropout(drop), nn::Linear(32, 32),
                      nn::GELU("tanh"), nn::Dropout(drop), nn::Linear(32, 8)});
  nn::Linear head(8, 1);
  seg->to(dev);
  head->to(dev);
  seg->train();
  Tensor x = randn({6, 16}, {.device = dev}).requires_grad_();
  Tensor target = randn({6, 1}, {.device = dev});
  manual_seed(4);
  Tensor y = checkpointed ? checkpoint(seg, x) : seg(x);
  Tensor loss = mse_loss(head(y), target);
  loss.backward();
  StepRun r;
  r.add("loss", loss);
  r.add("y", y);
  r.add("x.grad", x.grad());
  r.add_grads("seg.", seg->parameters());
  r.add_grads("head.", head->parameters());
  r.rng = get_rng_state();
  return r;
}

// Two outputs from one segment (the vector form), a weight used inside and outside the segment,
// and a non-leaf tensor the segment captures instead of taking it as an input.
StepRun run_multi(Device dev, bool checkpointed) {
  manual_seed(5);
  Tensor w = parameter(randn({12, 12}, {.device = dev}) * 0.3);
  Tensor v = parameter(randn({12}, {.device = dev}));
  Tensor x = randn({5, 12}, {.device = dev}).requires_grad_();
  Tensor u = randn({5, 12}, {.device = dev});  // needs no gradient
  Tensor scale = sigmoid(v * 2.0);             // non-leaf, captured by the segment
  auto seg = [&](const std::vector<Tensor>& in) {
    Tensor h = tanh(linear(in[0], w) + in[1]);
    return std::vector<Tensor>{h * scale, relu(matmul(h, w.t())).sum(Shape{1})};
  };
  const std::vector<Tensor> out = checkpointed ? checkpoint(seg, {x, u}) : seg({x, u});
  Tensor loss = (out[0] * out[0]).mean() + out[1].mean() + sum(linear(out[0], w)) * 0.01;
  loss.backward();
  StepRun r;
  r.add("loss", loss);
  r.add("out0", out[0]);
  r.add("out1", out[1]);
  r.add("x.grad", x.grad());
  r.add("u.grad", u.grad());
  r.add("w.grad", w.grad());
  r.add("v.grad", v.grad());
  r.rng = get_rng_state();
  return r;
}

// A chain of `n` residual MLP blocks on [rows, d]; returns the Pass bytes the forward leaves
// alive (output and everything saved for backward), then runs backward.
int64_t chain_forward_bytes(Device dev, bool checkpointed, int64_t n, int64_t rows, int64_t d) {
  manual_seed(9);
  std::vector<nn::Sequential> blocks;
  for (int64_t i = 0; i < n; ++i) {
    blocks.push_back(nn::Sequential({nn::Linear(d, 4 * d), nn::GELU(), nn::Linear(4 * d, d)}));
    blocks.back()->to(dev);
  }
  Tensor x = randn({rows, d}, {.device = dev}).requires_grad_();
  synchronize(dev);
  const int64_t before = memory_stats(dev).pass_in_use;
  Tensor h = x;
  for (const nn::Sequential& b : blocks) {
    auto residual = [b](const Tensor& in) { return in + b(in); };
    h = checkpointed ? checkpoint(residual, h) : residual(h);
  }
  synchronize(dev);
  const int64_t kept = memory_stats(dev).pass_in_use - before;
  h.sum().backward();
  return kept;
}

void expect_memory_bound(Device dev) {
  const int64_t n = 8, rows = 64, d = 128;
  const int64_t plain = chain_forward_bytes(dev, false, n, rows, d);
  const int64_t ckpt = chain_forward_bytes(dev, true, n, rows, d);
  ::testing::Test::RecordProperty("pass_bytes_after_forward_plain", std::to_string(plain));
  ::testing::Test::RecordProperty("pass_bytes_after_forward_checkpointed", std::to_string(ckpt));
  // Checkpointed, a block keeps only its input (the previous block's output) and the chain its
  // output: (n + 1) activations of rows x d f32, 32 KiB each, plus pool rounding. The plain chain
  // also keeps each block's two hidden activations (4x wider) and the block outputs.
  const int64_t activation = rows * d * 4;
  EXPECT_LE(ckpt, (n + 1) * activation + 64 * 1024)
      << "checkpointed chain keeps " << ckpt << " bytes after forward";
  EXPECT_LE(ckpt * 4, plain) << "checkpointed " << ckpt << " bytes, plain " << plain
                             << " bytes after forward (expected at most a quarter)";
}

// ---- the generator ----

void expect_rng_stream(Device dev) {
  // After a checkpointed step (forward, backward) the generator is where the plain step leaves
  // it, and the next draw is the same.
  auto step = [&](bool checkpointed) {
    manual_seed(21);
    Tensor w = parameter(randn({8, 8}, {.device = dev}));
    Tensor x = randn({4, 8}, {.device = dev}).requires_grad_();
    auto seg = [&](const Tensor& in) { return dropout(relu(linear(in, w)), 0.5); };
    Tensor y = checkpointed ? checkpoint(seg, x) : seg(x);
    (y * y).sum().backward();
    const RngState s = get_rng_state();
    return std::make_pair(s, bytes_of(randn({16}, {.device = dev})));
  };
  const auto [plain_state, plain_next] = step(false);
  const auto [ckpt_state, ckpt_next] = step(true);
  EXPECT_EQ(plain_state.seed, ckpt_state.seed);
  EXPECT_EQ(plain_state.offset, ckpt_state.offset);
  EXPECT_EQ(plain_next, ckpt_next) << "the draw after the step differs";
}

// ---- CPU ----

TEST(Checkpoint, MlpSegmentGradientsAreBitwiseThePlainOnes) {
  expect_bitwise(run_mlp(kCpu, false, 0.0), run_mlp(kCpu, true, 0.0));
}

TEST(Checkpoint, DropoutMasksReplayedGradientsBitwise) {
  const StepRun plain = run_mlp(kCpu, false, 0.4), ckpt = run_mlp(kCpu, true, 0.4);
  expect_bitwise(plain, ckpt);
  // The masks really drop something (so equal gradients mean equal masks).
  const StepRun no_dropout = run_mlp(kCpu, false, 0.0);
  EXPECT_NE(bytes_of(plain.values[2]), bytes_of(no_dropout.values[2]));
}

TEST(Checkpoint, TheSegmentRunsAgainOnceInBackward) {
  int calls = 0;
  Tensor w = parameter(randn({4, 4}));
  Tensor y = checkpoint(
      [&](const Tensor& in) {
        ++calls;
        return tanh(linear(in, w));
      },
      randn({2, 4}));
  EXPECT_EQ(calls, 1);
  Tensor loss = sum(square(y));
  loss.backward(Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(calls, 2);
  loss.backward();  // the refilled tensors are kept with the retained graph
  EXPECT_EQ(calls, 2);
}

TEST(Checkpoint, TransformerBlockBitwise) {
  expect_bitwise(run_blocks({}), run_blocks({.checkpointed = true}));
}

TEST(Checkpoint, TransformerBlockUnderBf16AutocastBitwise) {
  expect_bitwise(run_blocks({.autocast = true}),
                 run_blocks({.checkpointed = true, .autocast = true}));
}

TEST(Checkpoint, NestedCheckpointsBitwise) {
  expect_bitwise(run_blocks({}), run_blocks({.checkpointed = true, .nested = true}));
}

TEST(Checkpoint, MultipleOutputsSharedWeightAndCapturedTensorBitwise) {
  expect_bitwise(run_multi(kCpu, false), run_multi(kCpu, true));
}

TEST(Checkpoint, GeneratorAfterTheStepEqualsThePlainStep) { expect_rng_stream(kCpu); }

TEST(Checkpoint, PreserveRngStateOffLetsTheRecomputationDraw) {
  manual_seed(1);
  Tensor x = randn({64}).requires_grad_();
  auto seg = [](const Tensor& in) { return dropout(in, 0.5); };
  Tensor y = checkpoint(seg, {x}, {.preserve_rng_state = false});
  const uint64_t after_forward = get_rng_state().offset;
  y.sum().backward();
  EXPECT_GT(get_rng_state().offset, after_forward) << "the recomputation drew nothing";
}

TEST(Checkpoint, ChainKeepsLessPassMemoryAfterForward) { expect_memory_bound(kCpu); }

TEST(Checkpoint, InputsWithoutGradStillGiveParameterGradients) {
  auto run = [](bool checkpointed) {
    manual_seed(6);
    nn::Linear fc(8, 8);
    Tensor x = randn({3, 8});
    Tensor y = checkpointed ? checkpoint(fc, x) : fc(x);
    EXPECT_TRUE(y.requires_grad());
    (y * y).sum().backward();
    StepRun r;
    r.add("y", y);
    r.add("x.grad", x.grad());
    r.add_grads("fc.", fc->parameters());
    r.rng = get_rng_state();
    return r;
  };
  expect_bitwise(run(false), run(true));
}

TEST(Checkpoint, OutputWithoutGradRecordsNothing) {
  Tensor x = randn({4});
  Tensor y = checkpoint([](const Tensor& in) { return exp(in); }, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_leaf());
  EXPECT_EQ(bytes_of(y), bytes_of(exp(x)));
  {
    NoGradGuard no_grad;  // recording off: fn just runs
    Tensor w = randn({4}, {.requires_grad = true});
    Tensor z = checkpoint([&](const Tensor& in) { return in * w; }, x);
    EXPECT_FALSE(z.requires_grad());
  }
}

TEST(Checkpoint, AutogradGradAndGradcheckGoThroughIt) {
  manual_seed(8);
  Tensor w = parameter(randn({6, 6}));
  Tensor x = randn({2, 6}).requires_grad_();
  auto seg = [&](const Tensor& in) { return tanh(linear(in, w)); };
  const std::vector<Tensor> plain = grad({(seg(x) * 3.0).sum()}, {x, w});
  const std::vector<Tensor> ckpt = grad({(checkpoint(seg, x) * 3.0).sum()}, {x, w});
  EXPECT_EQ(bytes_of(plain[0]), bytes_of(ckpt[0]));
  EXPECT_EQ(bytes_of(plain[1]), bytes_of(ckpt[1]));
  EXPECT_FALSE(w.grad().defined()) << "grad() must leave .grad alone";
  EXPECT_FALSE(x.grad().defined());
  GradcheckResult r = gradcheck(
      [](const std::vector<Tensor>& in) {
        return checkpoint(
            [](const std::vector<Tensor>& a) { return sigmoid(matmul(a[0], a[1])) * a[0]; }, in);
      },
      {randn({3, 3}, {.requires_grad = true}), randn({3, 3}, {.requires_grad = true})});
  EXPECT_TRUE(r) << r.message;
}

TEST(Checkpoint, RetainGraphBackwardTwice) {
  auto run = [](bool checkpointed) {
    manual_seed(10);
    Tensor w = parameter(randn({5, 5}));
    Tensor x = randn({2, 5}).requires_grad_();
    auto seg = [&](const Tensor& in) { return dropout(gelu(linear(in, w)), 0.3); };
    Tensor loss = sum(square(checkpointed ? checkpoint(seg, x) : seg(x)));
    loss.backward(Tensor(), /*retain_graph=*/true);
    loss.backward();
    StepRun r;
    r.add("x.grad", x.grad());
    r.add("w.grad", w.grad());
    r.rng = get_rng_state();
    return r;
  };
  expect_bitwise(run(false), run(true));
}

TEST(Checkpoint, WrongUseIsAnErrorNamingCheckpoint) {
  Tensor x = randn({3}, {.requires_grad = true});
  auto id = [](const std::vector<Tensor>& in) { return in[0] * 2.0; };
  std::string e = error_of([&] { checkpoint(CheckpointFn(), {x}); });
  EXPECT_NE(e.find("checkpoint: fn is empty"), std::string::npos) << e;
  e = error_of([&] { checkpoint(CheckpointMultiFn(), {x}); });
  EXPECT_NE(e.find("checkpoint: fn is empty"), std::string::npos) << e;
  e = error_of([&] { checkpoint(std::function<Tensor(const Tensor&)>(), x); });
  EXPECT_NE(e.find("checkpoint: fn is empty"), std::string::npos) << e;
  e = error_of([&] { checkpoint(id, {}); });
  EXPECT_NE(e.find("checkpoint: no inputs"), std::string::npos) << e;
  e = error_of([&] { checkpoint(id, {x, Tensor()}); });
  EXPECT_NE(e.find("checkpoint: input 1 is undefined"), std::string::npos) << e;
  e = error_of([&] { checkpoint([](const std::vector<Tensor>&) { return Tensor(); }, {x}); });
  EXPECT_NE(e.find("checkpoint: fn returned an undefined tensor"), std::string::npos) << e;
  e = error_of([&] {
    checkpoint(
        [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{in[0] * 2.0, Tensor()};
        },
        {x});
  });
  EXPECT_NE(e.find("checkpoint: fn returned an undefined tensor (output 1 of 2"), std::string::npos)
      << e;

  // An input changed in place between forward and backward.
  Tensor a = randn({3});
  Tensor w = parameter(randn({3}));
  Tensor y = checkpoint([&](const Tensor& in) { return (in * w).exp(); }, a);
  {
    NoGradGuard g;
    a.add_(1.0);
  }
  e = error_of([&] { y.sum().backward(); });
  EXPECT_NE(e.find("checkpoint:"), std::string::npos) << e;
  EXPECT_NE(e.find("modified in place"), std::string::npos) << e;

  // A segment that saves other tensors when recomputed (it branches on host state) is refused,
  // and the generator is left where it was.
  int calls = 0;
  Tensor v = parameter(randn({4}));
  Tensor z = checkpoint(
      [&](const Tensor& in) { return ++calls == 1 ? in * v : (in * v).exp() * v; }, randn({4}));
  const RngState before = get_rng_state();
  e = error_of([&] { z.sum().backward(); });
  EXPECT_NE(e.find("checkpoint: the recomputation"), std::string::npos) << e;
  EXPECT_EQ(get_rng_state().offset, before.offset);
}

// ---- CUDA twins ----

// On CUDA the fused attention's default backward adds dQ with atomics, so even two plain runs
// may differ in the last bits (docs/cuda.md, "Deterministic mode"): the CUDA twins compare
// under deterministic mode (DeterministicScope), set before the forward as that section asks.

TEST(CheckpointCuda, MlpSegmentGradientsAreBitwiseThePlainOnes) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_bitwise(run_mlp(kGpu, false, 0.0), run_mlp(kGpu, true, 0.0));
}

TEST(CheckpointCuda, DropoutMasksReplayedGradientsBitwise) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_bitwise(run_mlp(kGpu, false, 0.4), run_mlp(kGpu, true, 0.4));
}

TEST(CheckpointCuda, TransformerBlockBitwise) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_bitwise(run_blocks({.device = kGpu}), run_blocks({.device = kGpu, .checkpointed = true}));
}

TEST(CheckpointCuda, TransformerBlockUnderBf16AutocastBitwise) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_bitwise(run_blocks({.device = kGpu, .autocast = true}),
                 run_blocks({.device = kGpu, .checkpointed = true, .autocast = true}));
  // The last attention call was the recomputation's: on the fused path, as the forward's.
  EXPECT_EQ(sdpa_last_backend(), SdpaBackend::cudnn) << sdpa_fallback_reason();
}

TEST(CheckpointCuda, NestedCheckpointsBitwise) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_bitwise(
      run_blocks({.device = kGpu, .autocast = true}),
      run_blocks({.device = kGpu, .checkpointed = true, .autocast = true, .nested = true}));
}

TEST(CheckpointCuda, MultipleOutputsSharedWeightAndCapturedTensorBitwise) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_bitwise(run_multi(kGpu, false), run_multi(kGpu, true));
}

TEST(CheckpointCuda, GeneratorAfterTheStepEqualsThePlainStep) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_rng_stream(kGpu);
}

TEST(CheckpointCuda, ChainKeepsLessPassMemoryAfterForward) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  expect_memory_bound(kGpu);
}

// A segment whose forward ran eagerly cannot be recomputed inside a capture: its random kernels
// would draw relative to the capture's start, not the forward's numbers.
TEST(CheckpointCuda, ForwardOutsideACaptureAndBackwardInsideIsRefused) {
  SKIP_WITHOUT_CUDA();
  Tensor w = parameter(randn({8, 8}, {.device = kGpu}));
  Tensor y = checkpoint([&](const Tensor& in) { return dropout(tanh(linear(in, w)), 0.5); },
                        randn({4, 8}, {.device = kGpu}));
  train::CapturedStep step(
      [&](const std::vector<Tensor>& in) {
        Tensor loss = sum(y * in[0]);
        loss.backward();
        return std::vector<Tensor>{loss};
      },
      {.warmup = 0});
  const std::string e = error_of([&] { step({ones({4, 8}, {.device = kGpu})}); });
  EXPECT_NE(e.find("checkpoint: the segment's forward ran outside any captured step but its "
                   "backward runs inside one"),
            std::string::npos)
      << e;
}

// A captured step whose checkpointed blocks use dropout: every replay recomputes with the masks
// of its own forward, so 6 steps (eager, capture, replays) equal 6 eager plain steps bitwise.
TEST(CheckpointCuda, CapturedStepReplaysTheRecomputationBitwise) {
  SKIP_WITHOUT_CUDA();
  const DeterministicScope deterministic_mode;
  auto train = [](bool checkpointed, bool captured) {
    manual_seed(31);
    Block b0(32, 4, 0.2, kGpu), b1(32, 4, 0.2, kGpu);
    std::vector<Tensor> params = params_of(b0.modules());
    for (const Tensor& p : params_of(b1.modules())) params.push_back(p);
    optim::SGD opt(params, {.lr = 0.05, .momentum = 0.9});
    auto step_fn = [&](const std::vector<Tensor>& in) {
      opt.zero_grad();
      auto one = [&](const Block& b, const Tensor& h) {
        return checkpointed ? checkpoint(b, h) : b(h);
      };
      Tensor loss = mean(square(one(b1, one(b0, in[0]))));
      loss.backward();
      opt.step();
      return std::vector<Tensor>{loss};
    };
    train::CapturedStep step(step_fn);
    StepRun r;
    for (int i = 0; i < 6; ++i) {
      Tensor x = randn({2, 8, 32}, {.device = kGpu});
      r.add("loss" + std::to_string(i), captured ? step({x})[0] : step_fn({x})[0]);
    }
    r.add_grads("param", params);
    for (size_t i = 0; i < params.size(); ++i) r.add("param" + std::to_string(i), params[i]);
    r.rng = get_rng_state();
    return r;
  };
  expect_bitwise(train(false, false), train(true, true));
}

}  // namespace
