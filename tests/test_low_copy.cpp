// tests/test_low_copy.cpp — Note [A lower-precision copy beside a tensor] (src/ops/autocast.cpp):
// under autocast layer_norm (and rms_norm) writes its f32 output's bf16 / f16 copy beside it, with
// the bits the cast gives, on both kernel paths (register rows and the general one); an in-place
// write retires it; and autocast's linear, which takes it instead of casting, gives the same output
// and gradients bit for bit as when it must cast. In the backward, layer_norm's kernel writes the
// residual stream's gradient's copy when it finalises a gradient the residual add reads in bf16
// (three casts fewer in a two-block net, the same bits). On the CPU here, on CUDA on the GPU
// machine.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/profiler.hpp"
#include "ops/common.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::seeded_randn;

// a and b have the same shape and the same f32 values (16-bit values widen exactly).
void expect_same_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  ASSERT_TRUE(b.defined()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<float> va = a.to(Device::cpu()).to(DType::f32).contiguous().to_vector<float>();
  const std::vector<float> vb = b.to(Device::cpu()).to(DType::f32).contiguous().to_vector<float>();
  for (size_t i = 0; i < va.size(); ++i) ASSERT_EQ(va[i], vb[i]) << what << ": element " << i;
}

// Widths that take the register-rows kernel (768), a row too long for it (1,100: the general
// path, then the cast as a pass of its own on CUDA) and an unvectorised one (5).
// layer_norm(x) with weight and bias, or rms_norm(x) with the weight.
Tensor norm_of(bool rms, const Tensor& x, int64_t n, const Tensor& w, const Tensor& b) {
  return rms ? rms_norm(x, Shape{n}, w) : layer_norm(x, Shape{n}, w, b);
}

void check_layer_norm_copy(Device device) {
  for (const bool rms : {false, true})
    for (const DType low : {DType::bf16, DType::f16}) {
      for (const int64_t n : {768, 1100, 5}) {
        SCOPED_TRACE(std::string(rms ? "rms_norm " : "layer_norm ") + std::string(dtype_name(low)) +
                     " n=" + std::to_string(n));
        const Tensor x = (seeded_randn({6, n}, 11 + n) * 3.0 + 0.5).to(device);
        const Tensor w = seeded_randn({n}, 12).to(device), b = seeded_randn({n}, 13).to(device);
        Tensor y;
        {
          AutocastGuard autocast(low);
          y = norm_of(rms, x, n, w, b);
        }
        EXPECT_EQ(y.dtype(), DType::f32) << "autocast's norms stay f32";
        const Tensor copy = ops::low_copy_of(y, low);
        expect_same_bits(copy, y.to(low), "the copy against the cast");
        EXPECT_EQ(copy.dtype(), low);
        EXPECT_FALSE(ops::low_copy_of(y, low == DType::bf16 ? DType::f16 : DType::bf16).defined())
            << "a copy is of one dtype";
        {
          NoGradGuard no_grad;
          y.add_(1.0);
        }
        EXPECT_FALSE(ops::low_copy_of(y, low).defined()) << "an in-place write retires the copy";
      }
    }
  const Tensor x = seeded_randn({4, 32}, 14).to(device);
  EXPECT_FALSE(ops::low_copy_of(layer_norm(x, Shape{32}), DType::bf16).defined())
      << "no copy outside autocast";
}

TEST(LowCopy, LayerNormWritesTheCastsBits) { check_layer_norm_copy(Device::cpu()); }

TEST(LowCopy, CudaLayerNormWritesTheCastsBits) {
  SKIP_WITHOUT_CUDA();
  check_layer_norm_copy(Device::cuda(0));
}

struct BlockRun {
  Tensor y, gx, gw, gb, gln_w, gln_b;
};

// y = linear(layer_norm(x), W, b) under autocast, loss Σ y·r; `through_mul` puts a ×1 between
// the two (its output has no copy, so the linear casts).
BlockRun run_block(Device device, bool through_mul) {
  const int64_t n = 768, out = 96;
  auto leaf = [&](const Tensor& t) { return t.to(device).requires_grad_(true); };
  Tensor x = leaf(seeded_randn({2, 5, n}, 21)), w = leaf(seeded_randn({out, n}, 22) * 0.05),
         b = leaf(seeded_randn({out}, 23)), lw = leaf(seeded_randn({n}, 24)),
         lb = leaf(seeded_randn({n}, 25));
  Tensor y;
  {
    AutocastGuard autocast(DType::bf16);
    Tensor h = layer_norm(x, Shape{n}, lw, lb);
    if (through_mul) h = h * 1.0;
    y = linear(h, w, b);
  }
  (y.to(DType::f32) * seeded_randn({2, 5, out}, 26).to(device)).sum().backward();
  return {y.detach(), x.grad(), w.grad(), b.grad(), lw.grad(), lb.grad()};
}

void check_block(Device device) {
  const BlockRun a = run_block(device, false), c = run_block(device, true);
  expect_same_bits(a.y, c.y, "output");
  expect_same_bits(a.gx, c.gx, "x's gradient");
  expect_same_bits(a.gw, c.gw, "W's gradient");
  expect_same_bits(a.gb, c.gb, "b's gradient");
  expect_same_bits(a.gln_w, c.gln_w, "the norm weight's gradient");
  expect_same_bits(a.gln_b, c.gln_b, "the norm bias's gradient");
}

TEST(LowCopy, AutocastLinearTakesItWithTheCastsResults) { check_block(Device::cpu()); }

// The linear reads the copy, not a fresh cast: zeroed behind the norm's back, the product is the
// bias alone — in training (autocast's linear, its casts made without a graph) and in inference
// (autocast's generic cast of a tensor that needs no gradient).
TEST(LowCopy, AutocastLinearReadsTheCopy) {
  for (const bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    const Tensor x = seeded_randn({3, 64}, 31);
    Tensor w = seeded_randn({8, 64}, 32);
    if (training) w.requires_grad_(true);
    const Tensor b = seeded_randn({8}, 33);
    AutocastGuard autocast(DType::bf16);
    const Tensor h = layer_norm(x, Shape{64});
    {
      NoGradGuard no_grad;
      ops::low_copy_of(h, DType::bf16).fill_(0.0);
    }
    expect_same_bits(linear(h, w, b).detach(), b.to(DType::bf16).expand({3, 8}),
                     "linear of the zeroed copy");
  }
}

TEST(LowCopy, CudaAutocastLinearTakesItWithTheCastsResults) {
  SKIP_WITHOUT_CUDA();
  check_block(Device::cuda(0));
}

// Restores the low copies' switch.
class CopiesSwitch {
 public:
  explicit CopiesSwitch(bool on) : previous_(ops::low_copies_enabled()) { ops::set_low_copies(on); }
  ~CopiesSwitch() { ops::set_low_copies(previous_); }
  CopiesSwitch(const CopiesSwitch&) = delete;
  CopiesSwitch& operator=(const CopiesSwitch&) = delete;

 private:
  bool previous_;
};

struct ResidualRun {
  std::vector<Tensor> values;  // the output, then every leaf's gradient
  int64_t copies = 0;          // copy kernels launched by the step
};

// Two pre-norm residual blocks under bf16 autocast, the stream f32 and each block's output bf16:
//   h = x + linear(layer_norm(x)); out = h + linear(layer_norm(h)); loss Σ out·r.
// h's gradient is the residual add's pass-through plus layer_norm(h)'s, which its kernel adds
// last; h's add reads it in bf16 for its block's output.
ResidualRun run_residual(Device device, bool copies, bool rms) {
  const CopiesSwitch use(copies);
  const int64_t n = 256;
  auto leaf = [&](const Tensor& t) { return t.to(device).requires_grad_(true); };
  std::vector<Tensor> leaves = {leaf(seeded_randn({2, 7, n}, 41))};
  for (int i = 0; i < 2; ++i) {
    leaves.push_back(leaf(seeded_randn({n, n}, 42 + i) * 0.06));  // W
    leaves.push_back(leaf(seeded_randn({n}, 44 + i)));            // b
    leaves.push_back(leaf(seeded_randn({n}, 46 + i)));            // norm weight
    leaves.push_back(leaf(seeded_randn({n}, 48 + i)));            // norm bias
  }
  const Tensor r = seeded_randn({2, 7, n}, 50).to(device);
  ResidualRun run;
  Profiler prof;
  Tensor out;
  {
    AutocastGuard autocast(DType::bf16);
    Tensor h = leaves[0];
    for (int i = 0; i < 2; ++i) {
      const Tensor* p = &leaves[1 + 4 * i];
      h = h + linear(norm_of(rms, h, n, p[2], p[3]), p[0], p[1]);
    }
    out = h;
  }
  EXPECT_EQ(out.dtype(), DType::f32);
  (out * r).sum().backward();
  prof.stop();
  for (const ProfileRow::Kernel& k : prof.kernels())
    if (k.name == "copy") run.copies += k.calls;
  run.values.push_back(out.detach());
  for (const Tensor& t : leaves) run.values.push_back(t.grad());
  return run;
}

void check_residual(Device device) {
  for (const bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms_norm" : "layer_norm");
    const ResidualRun on = run_residual(device, true, rms), off = run_residual(device, false, rms);
    ASSERT_EQ(on.values.size(), off.values.size());
    for (size_t i = 0; i < on.values.size(); ++i) {
      if (rms && (i == 5 || i == 9)) continue;  // rms_norm has no bias: those leaves get none
      expect_same_bits(
          on.values[i], off.values[i],
          i == 0 ? std::string("output") : "gradient of leaf " + std::to_string(i - 1));
    }
    // Two forward casts of the norms' outputs and the backward cast of h's gradient.
    EXPECT_EQ(off.copies - on.copies, 3)
        << "copies: " << on.copies << " with, " << off.copies << " without";
  }
}

TEST(LowCopy, ResidualGradientCopyGivesTheCastsBits) { check_residual(Device::cpu()); }

TEST(LowCopy, CudaResidualGradientCopyGivesTheCastsBits) {
  SKIP_WITHOUT_CUDA();
  check_residual(Device::cuda(0));
}

}  // namespace
