// tests/test_rms_rotary.cpp — the fused rms_norm and rotary_embedding ops beyond the catalogue's
// cases (tests/test_op_cases_more.cpp): rms_norm against its composite definition, the 16-bit
// input with an f32 weight against the f32 kernel (bitwise: the f32 result on the widened input,
// rounded once), the residual pattern's gradient that the kernel adds into x's pending one;
// rotary on a head-transposed view equal to rotary on its contiguous copy (bitwise, forward and
// backward), f32 rotary bitwise equal to the composite x·cos + cat(-x₂, x₁)·sin that Llama used;
// CUDA against the CPU (skipped without a device); and the errors of bad input.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;

// Elements of a and b (any float dtypes, read as f64) that differ by more than
// tol·(|b| + max|b|); bitwise when tol is 0. Names the first mismatch.
std::string mismatch(const Tensor& a, const Tensor& b, double tol) {
  if (a.shape() != b.shape())
    return "shapes " + a.shape().to_string() + " vs " + b.shape().to_string();
  const std::vector<double> x = a.to(DType::f64).contiguous().to_vector<double>();
  const std::vector<double> y = b.to(DType::f64).contiguous().to_vector<double>();
  double scale = 0;
  for (double v : y) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < x.size(); ++i) {
    const bool same =
        tol == 0 ? x[i] == y[i] : std::abs(x[i] - y[i]) <= tol * (std::abs(y[i]) + scale);
    if (!same)
      return "element " + std::to_string(i) + ": " + std::to_string(x[i]) + " vs " +
             std::to_string(y[i]) + " (shape " + a.shape().to_string() + ")";
  }
  return "";
}

Tensor grad_leaf(const Tensor& t) { return t.detach().requires_grad_(true); }

Tensor rms_composite(const Tensor& x, const Tensor& w, double eps) {
  return mul(x, rsqrt(add(mean(square(x), Shape{-1}, true), eps))) * w;
}

Tensor rotary_composite(const Tensor& x, const Tensor& c, const Tensor& s) {
  const std::vector<Tensor> halves = split(x, x.size(-1) / 2, -1);
  return x * c + cat({neg(halves[1]), halves[0]}, -1) * s;
}

TEST(RmsRotary, RmsNormMatchesItsDefinition) {
  manual_seed(1);
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = randn({4, 3, 40}, {.dtype = dt}) * 3.0, w = randn({40}, {.dtype = dt});
    const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    EXPECT_EQ(mismatch(rms_norm(x, {40}, w, 1e-6), rms_composite(x, w, 1e-6), tol), "")
        << dtype_name(dt);
    // eps left out: torch.finfo(x.dtype).eps
    const double eps = dt == DType::f32 ? 1.1920928955078125e-07 : 2.220446049250313e-16;
    EXPECT_EQ(mismatch(rms_norm(x, {40}), rms_composite(x, ones({40}, {.dtype = dt}), eps), tol),
              "")
        << dtype_name(dt);
  }
  // nn::RMSNorm is the op
  nn::RMSNorm norm(nn::RMSNormOptions{{40}, 1e-5});
  const Tensor x = randn({2, 40});
  EXPECT_EQ(mismatch(norm(x), rms_norm(x, {40}, norm->named_parameters()[0].second, 1e-5), 0), "");
}

// A bf16 (f16) input with an f32 weight: the f32 kernel's result on the widened input, rounded
// once (Note [16-bit layer norm]); its gradients within the 16-bit type's reach of the f32 ones.
TEST(RmsRotary, RmsNormHalfInputWithF32WeightIsTheF32ResultRounded) {
  manual_seed(2);
  for (DType half : {DType::bf16, DType::f16}) {
    const Tensor x16 = grad_leaf((randn({6, 96}) * 2.0).to(half));
    const Tensor w = grad_leaf(randn({96}));
    const Tensor x32 = grad_leaf(x16.to(DType::f32));
    const Tensor w32 = grad_leaf(w);
    const Tensor y16 = rms_norm(x16, {96}, w, 1e-6);
    const Tensor y32 = rms_norm(x32, {96}, w32, 1e-6);
    ASSERT_EQ(y16.dtype(), half);
    EXPECT_EQ(mismatch(y16, y32.to(half), 0), "") << dtype_name(half);
    const double tol = half == DType::bf16 ? 1e-2 : 2e-3;
    EXPECT_EQ(mismatch(y16, y32, tol), "") << dtype_name(half);
    const Tensor g = randn({6, 96});
    y16.backward(g.to(half));
    y32.backward(g);
    ASSERT_EQ(x16.grad().dtype(), half);
    ASSERT_EQ(w.grad().dtype(), DType::f32);
    EXPECT_EQ(mismatch(x16.grad(), x32.grad(), tol), "") << dtype_name(half) << " grad x";
    EXPECT_EQ(mismatch(w.grad(), w32.grad(), tol), "") << dtype_name(half) << " grad weight";
  }
}

// x + f(rms_norm(x)): the node adds its gradient into x's pending one (Note [Fused layer norm]).
TEST(RmsRotary, RmsNormGradcheck) {
  manual_seed(3);
  auto data = [](const Shape& shape) { return randn(shape, {.dtype = DType::f64}); };
  const GradcheckResult residual = gradcheck(
      [](const std::vector<Tensor>& in) { return in[0] + rms_norm(in[0], {5}, in[1]) * 2.0; },
      {data({3, 5}), data({5})});
  EXPECT_TRUE(residual.ok) << residual.message;
  const GradcheckResult plain = gradcheck(
      [](const std::vector<Tensor>& in) {
        return rms_norm(in[0], {4, 3}, Tensor(), 1e-3);
      },
      {data({2, 4, 3})});
  EXPECT_TRUE(plain.ok) << plain.message;
}

// The head view Llama rotates: [B, T, H, D] transposed to [B, H, T, D], read in place.
TEST(RmsRotary, RotaryOnAStridedViewEqualsItsContiguousCopy) {
  manual_seed(4);
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    for (bool interleaved : {false, true}) {
      const Tensor base = grad_leaf(randn({2, 5, 3, 8}).to(dt));
      const Tensor copy = grad_leaf(base.transpose(1, 2).contiguous());
      const Tensor c = randn({2, 1, 5, 8}).to(dt), s = randn({5, 8}).to(dt);
      const Tensor strided = rotary_embedding(base.transpose(1, 2), c, s, interleaved);
      const Tensor dense = rotary_embedding(copy, c, s, interleaved);
      const std::string what = std::string(dtype_name(dt)) + (interleaved ? " interleaved" : "");
      EXPECT_EQ(mismatch(strided, dense, 0), "") << what;
      const Tensor g = randn({2, 3, 5, 8}).to(dt);
      strided.backward(g);
      dense.backward(g);
      EXPECT_EQ(mismatch(base.grad().transpose(1, 2), copy.grad(), 0), "") << what << " grad";
    }
  }
}

// The fused kernel rounds as the composite did (Note [Rotary pairs]): bitwise at f32.
TEST(RmsRotary, RotaryIsTheCompositeBitwiseAtF32) {
  manual_seed(5);
  const Tensor x = randn({2, 4, 3, 16}).transpose(1, 2);
  const Tensor angles = randn({1, 1, 4, 8});
  const Tensor both = cat({angles, angles}, -1);
  const Tensor c = cos(both), s = sin(both);
  EXPECT_EQ(mismatch(rotary_embedding(x, c, s), rotary_composite(x, c, s), 0), "");
  const Tensor rc = randn({4, 16}), rs = randn({4, 16});  // not a rotation: any cos and sin
  EXPECT_EQ(mismatch(rotary_embedding(x, rc, rs), rotary_composite(x, rc, rs), 0), "");
}

// Under autocast rms_norm runs in f32 (as layer_norm, PyTorch's policy); rotary_embedding in the
// dtype it receives. Empty inputs give empty results and zero weight gradients.
TEST(RmsRotary, AutocastAndEmptyInputs) {
  manual_seed(7);
  {
    AutocastGuard autocast(DType::bf16);
    EXPECT_EQ(rms_norm(randn({3, 8}).to(DType::bf16), {8}, randn({8})).dtype(), DType::f32);
    const Tensor x = randn({2, 8}).to(DType::bf16);
    EXPECT_EQ(rotary_embedding(x, x, x).dtype(), DType::bf16);
  }
  const Tensor x = grad_leaf(randn({0, 4})), w = grad_leaf(randn({4}));
  const Tensor y = rms_norm(x, {4}, w);
  EXPECT_EQ(y.shape(), (Shape{0, 4}));
  y.sum().backward();
  EXPECT_EQ(mismatch(w.grad(), zeros({4}), 0), "");
  const Tensor lw = grad_leaf(randn({4}));  // layer_norm's kernels are the same (an empty batch)
  layer_norm(x, {4}, lw, lw).sum().backward();
  EXPECT_EQ(mismatch(lw.grad(), zeros({4}), 0), "");
  const Tensor q = grad_leaf(randn({2, 0, 8}));
  const Tensor r = rotary_embedding(q, randn({0, 8}), randn({1, 8}));
  EXPECT_EQ(r.shape(), (Shape{2, 0, 8}));
  r.sum().backward();
  EXPECT_EQ(q.grad().shape(), (Shape{2, 0, 8}));
}

TEST(RmsRotary, CudaMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(6);
  const Device gpu = Device::cuda(0);
  // rms_norm: register rows (n = 64, 1024), unvectorised (250) and the general path (3000)
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    for (int64_t n : {64, 250, 1024, 3000}) {
      const Tensor x = grad_leaf(randn({37, n}).to(dt)), w = grad_leaf(randn({n}));
      const Tensor xg = grad_leaf(x.to(gpu)), wg = grad_leaf(w.to(gpu));
      const Tensor y = rms_norm(x, {n}, w, 1e-5), yg = rms_norm(xg, {n}, wg, 1e-5);
      const double tol = dt == DType::f32 ? 1e-5 : dt == DType::bf16 ? 1e-2 : 2e-3;
      const std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      EXPECT_EQ(mismatch(yg.to(Device::cpu()), y, tol), "") << what;
      const Tensor g = randn({37, n}).to(dt);
      y.backward(g);
      yg.backward(g.to(gpu));
      EXPECT_EQ(mismatch(xg.grad().to(Device::cpu()), x.grad(), tol), "") << what << " grad x";
      EXPECT_EQ(mismatch(wg.grad().to(Device::cpu()), w.grad(), 1e-5), "") << what << " grad w";
    }
  }
  // rotary: the same roundings on both backends, so bitwise, strided and interleaved too
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64}) {
    for (bool interleaved : {false, true}) {
      const Tensor base = grad_leaf(randn({2, 7, 4, 64}).to(dt));
      const Tensor bg = grad_leaf(base.to(gpu));
      const Tensor c = randn({2, 1, 7, 64}).to(dt), s = randn({7, 64}).to(dt);
      const Tensor y = rotary_embedding(base.transpose(1, 2), c, s, interleaved);
      const Tensor yg = rotary_embedding(bg.transpose(1, 2), c.to(gpu), s.to(gpu), interleaved);
      const std::string what = std::string(dtype_name(dt)) + (interleaved ? " interleaved" : "");
      EXPECT_EQ(mismatch(yg.to(Device::cpu()), y, 0), "") << what;
      const Tensor g = randn({2, 4, 7, 64}).to(dt);
      y.backward(g);
      yg.backward(g.to(gpu));
      EXPECT_EQ(mismatch(bg.grad().to(Device::cpu()), base.grad(), 0), "") << what << " grad";
    }
  }
}

TEST(RmsRotary, BadInputIsRefused) {
  const Tensor x = randn({2, 4});
  auto says = [](const std::string& message, std::initializer_list<const char*> parts) {
    for (const char* p : parts)
      EXPECT_NE(message.find(p), std::string::npos) << "\"" << p << "\" not in: " << message;
  };
  says(error_of([&] { rms_norm(x, {5}); }),
       {"rms_norm", "input shape [2, 4]", "normalized_shape [5]"});
  says(error_of([&] { rms_norm(x, {3, 2, 4}); }), {"rms_norm", "[3, 2, 4]", "[2, 4]"});
  says(error_of([&] { rms_norm(x, {4}, ones({3})); }),
       {"rms_norm", "weight shape [3]", "expected [4]"});
  says(error_of([&] { rms_norm(x, {4}, ones({4}, {.dtype = DType::f64})); }),
       {"rms_norm", "weight dtype f64", "input dtype f32"});
  says(error_of([&] { rms_norm(x.to(DType::i64), {4}); }), {"rms_norm", "i64"});

  const Tensor q = randn({2, 3, 5, 8});
  says(error_of([&] {
         rotary_embedding(q, randn({4, 8}), randn({5, 8}));
       }),
       {"rotary_embedding", "cos shape [4, 8]", "input shape [2, 3, 5, 8]"});
  says(error_of([&] {
         rotary_embedding(q, randn({5, 8}), randn({3, 1, 5, 8, 1}));
       }),
       {"rotary_embedding", "sin shape [3, 1, 5, 8, 1]", "does not broadcast"});
  says(error_of([&] {
         rotary_embedding(randn({2, 5, 7}), randn({5, 7}), randn({5, 7}));
       }),
       {"rotary_embedding", "input shape [2, 5, 7]", "even"});
  says(error_of([&] {
         rotary_embedding(q, randn({5, 8}, {.dtype = DType::f64}), randn({5, 8}));
       }),
       {"rotary_embedding", "cos dtype f64", "input dtype f32"});
  says(error_of([&] {
         rotary_embedding(q.to(DType::i32), randn({5, 8}), randn({5, 8}));
       }),
       {"rotary_embedding", "i32"});
}

}  // namespace
