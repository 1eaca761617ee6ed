// tests/test_fused_loss.cpp — the fused kernels on the CPU against their composite
// definitions: cross-entropy with class indices (one kernel forward, one backward) against
// log_softmax + gather + smoothing + masked mean, and linear with a ReLU / tanh-GELU epilogue
// against the activation applied after linear; plus f64 gradchecks of the fused forms.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "fixtures.hpp"

namespace {

using namespace ember;  // NOLINT: test file

// PyTorch's definition, from primitives: per-row (1-ε)·nll + (ε/C)·Σ_c -log p_c, ignored rows
// 0, mean divided by the count of rows not ignored.
Tensor reference_ce(const Tensor& logits, const Tensor& target, CrossEntropyOptions o) {
  const int64_t c = logits.shape()[1];
  Tensor logp = log_softmax(logits, 1);
  Tensor t = target.to(DType::i64);
  Tensor valid = ne(t, full(Shape{}, static_cast<double>(o.ignore_index), {.dtype = DType::i64}));
  Tensor safe = where(valid, t, zeros(Shape{}, {.dtype = DType::i64}));
  Tensor vf = valid.to(logits.dtype());
  Tensor nll = mul(neg(gather(logp, 1, safe.unsqueeze(1)).squeeze(1)), vf);
  Tensor smooth = mul(neg(sum(logp, {1})), vf);
  Tensor per_row = add(mul(nll, 1.0 - o.label_smoothing),
                       mul(smooth, o.label_smoothing / static_cast<double>(c)));
  switch (o.reduction) {
    case Reduction::none: return per_row;
    case Reduction::sum: return sum(per_row);
    case Reduction::mean: return div(sum(per_row), sum(vf));
    case Reduction::batchmean: break;  // kl_div's only: cross_entropy refuses it
  }
  return per_row;
}

void expect_same_with_grad(const std::string& what, const Tensor& x0, const Tensor& target,
                           CrossEntropyOptions o, double tol) {
  Tensor a = x0.clone().requires_grad_(), b = x0.clone().requires_grad_();
  const Tensor fused = cross_entropy(a, target, o);
  const Tensor ref = reference_ce(b, target, o);
  EXPECT_TRUE(ember_test::check_close(fused.detach(), ref.detach(), tol, tol, what));
  manual_seed(99);
  const Tensor w = randn(ref.shape(), {.dtype = ref.dtype()});
  sum(fused * w).backward();
  sum(ref * w).backward();
  EXPECT_TRUE(ember_test::check_close(a.grad(), b.grad(), tol, tol, what + " grad"));
}

TEST(FusedCrossEntropy, MatchesTheCompositeDefinition) {
  manual_seed(1);
  const Tensor x = randn({50, 7}) * 3.0;
  manual_seed(2);
  Tensor t = randint(0, 7, {50});
  t = where(lt(rand({50}), 0.2), full({50}, -100.0, {.dtype = DType::i64}), t);
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none})
    for (double eps : {0.0, 0.1, 1.0})
      for (DType dt : {DType::f32, DType::f64})
        expect_same_with_grad("cross_entropy r=" + std::to_string(static_cast<int>(r)) +
                                  " eps=" + std::to_string(eps) + " " + std::string(dtype_name(dt)),
                              x.to(dt), t, {.reduction = r, .label_smoothing = eps},
                              dt == DType::f32 ? 2e-5 : 1e-12);
  manual_seed(3);
  expect_same_with_grad("cross_entropy i32 targets, ignore_index 3", x,
                        randint(0, 7, {50}, {.dtype = DType::i32}),
                        {.ignore_index = 3, .label_smoothing = 0.2}, 2e-5);
  manual_seed(4);
  const Tensor wide = randn({6, 3000}) * 4.0;
  expect_same_with_grad("cross_entropy wide rows", wide, randint(0, 3000, {6}), {}, 2e-5);
}

TEST(FusedCrossEntropy, LabelErrorsNameLabelPositionAndClasses) {
  const Tensor x = randn({4, 10});
  const Tensor t = from_vector(std::vector<int64_t>{0, 1, 2, 12}, {4});
  try {
    (void)cross_entropy(x, t);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "cross_entropy: label 12 at position 3 is out of range for 10 classes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(cross_entropy(x, t.to(DType::i32)), Error);
  EXPECT_NO_THROW(cross_entropy(x, t, {.ignore_index = 12}));
}

TEST(FusedCrossEntropy, GradcheckF64) {
  manual_seed(3);
  const Tensor t = from_vector(std::vector<int64_t>{1, -100, 4, 2, 0}, {5});
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    const auto res = gradcheck(
        [t, r](const std::vector<Tensor>& in) {
          return cross_entropy(in[0], t, {.reduction = r, .label_smoothing = 0.15});
        },
        {randn({5, 6}, {.dtype = DType::f64}) * 2.0});
    EXPECT_TRUE(res.ok) << res.message;
  }
}

TEST(FusedLinear, EpiloguesMatchActivationAfterLinear) {
  manual_seed(4);
  const Tensor x = randn({13, 9}), w = randn({6, 9}), b = randn({6});
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(ember_test::check_close(linear(x, w, b, Activation::relu), relu(linear(x, w, b)),
                                        1e-6, 1e-6, "relu"));
    EXPECT_TRUE(ember_test::check_close(linear(x, w, b, Activation::gelu_tanh),
                                        gelu(linear(x, w, b), "tanh"), 1e-6, 1e-6, "gelu_tanh"));
    EXPECT_TRUE(ember_test::check_close(linear(x, w, Tensor(), Activation::relu),
                                        relu(linear(x, w)), 1e-6, 1e-6, "relu no bias"));
    EXPECT_TRUE(
        ember_test::check_close(linear(x, w, b, Activation::none), linear(x, w, b), 0, 0, "none"));
  }
  const auto res = gradcheck(
      [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2], Activation::relu); },
      {randn({5, 4}, {.dtype = DType::f64}), randn({3, 4}, {.dtype = DType::f64}),
       randn({3}, {.dtype = DType::f64})});
  EXPECT_TRUE(res.ok) << res.message;
  const auto res_gelu = gradcheck(
      [](const std::vector<Tensor>& in) {
        return linear(in[0], in[1], in[2], Activation::gelu_tanh);
      },
      {randn({5, 4}, {.dtype = DType::f64}), randn({3, 4}, {.dtype = DType::f64}),
       randn({3}, {.dtype = DType::f64})});
  EXPECT_TRUE(res_gelu.ok) << res_gelu.message;
}

TEST(FusedLinear, SequentialLinearReluEqualsTheUnfusedChain) {
  // Sequential runs Linear + ReLU as one GEMM with a ReLU epilogue; values and gradients must
  // be those of the modules run one by one.
  manual_seed(3);
  nn::Sequential net(
      {nn::Linear(7, 5), nn::ReLU(), nn::Linear(5, 3), nn::ReLU(), nn::Linear(3, 2)});
  const Tensor x = randn({6, 7});
  Tensor fused = net(x);
  fused.sum().backward();
  std::vector<std::vector<float>> fused_grads;
  for (const Tensor& p : net->parameters()) fused_grads.push_back(p.grad().to_vector<float>());
  net->zero_grad();
  Tensor h = x;
  for (const auto& [name, m] : net->named_children()) h = m->forward(h);  // one by one
  h.sum().backward();
  EXPECT_EQ(fused.to_vector<float>(), h.to_vector<float>());
  const std::vector<Tensor> params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(fused_grads[i], params[i].grad().to_vector<float>()) << "parameter " << i;
}

}  // namespace
