// tests/test_few_rows_gemm.cpp — the CUDA product of a few rows with a weight matrix (Note
// [Products of a few rows] in src/cuda/gemv.cu): a bf16/f16 linear of 1 to 4 rows, with bias
// and each epilogue, against the CPU's f32 computation of the same rounded operands, and
// equal to itself run to run; and linear with a residual (Note [A residual in the product] in
// src/ops/linalg.cpp) on both backends against the composite residual + linear; and
// layer_norm_linear / rms_norm_linear of one or several weights and rms_norm_swiglu (Note [A
// norm in front of a few rows] in src/cuda/gemv.cu) against the norm and the linears run apart.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/models/gpt2.hpp"
#include "ember/models/llama.hpp"
#include "ember/read_only.hpp"
#include "error_of.hpp"
#include "slot_calls.hpp"

namespace {

using namespace ember;

TEST(FewRowsGemm, CudaLinearOfFewRowsMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  manual_seed(11);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    // k 3072: four warps a column (an odd column count leaves a block's second column empty)
    for (const auto& [k, n] : {std::pair<int64_t, int64_t>{264, 72}, {3072, 73}})
      for (const int64_t m : {1, 2, 3, 4, 5}) {  // 5 rows: cuBLASLt, the same answers
        for (const Activation act : {Activation::none, Activation::relu, Activation::gelu_tanh}) {
          SCOPED_TRACE(std::string(dtype_name(dtype)) + " k " + std::to_string(k) + " m " +
                       std::to_string(m));
          const Tensor x = randn({m, k}).to(dtype), w = (randn({n, k}) * 0.1).to(dtype);
          const Tensor b = randn({n}).to(dtype);
          const Tensor want = linear(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32), act);
          const Tensor gx = x.to(Device::cuda(0)), gw = w.to(Device::cuda(0)),
                       gb = b.to(Device::cuda(0));
          const Tensor got = linear(gx, gw, gb, act).to(Device::cpu());
          EXPECT_EQ(got.dtype(), dtype);
          // One rounding to the 16-bit dtype of an f32 sum: within 1% of the largest value.
          const double scale = max(abs(want)).item<double>();
          EXPECT_LT(max(abs(got.to(DType::f32) - want)).item<double>(), 1e-2 * scale);
          // no bias, and the same bits again
          const Tensor plain = linear(gx, gw, Tensor(), act).to(Device::cpu());
          EXPECT_EQ(max(abs(plain.to(DType::f32) -
                            linear(gx, gw, Tensor(), act).to(Device::cpu()).to(DType::f32)))
                        .item<double>(),
                    0.0);
        }
      }
  }
}

// The sum's one rounding against the composite's two: within one unit of the dtype's last
// place at the largest value, per element.
void expect_near_composite(const Tensor& got, const Tensor& composite, double rel) {
  ASSERT_EQ(got.shape(), composite.shape());
  ASSERT_EQ(got.dtype(), composite.dtype());
  const Tensor a = got.to(Device::cpu()).to(DType::f64),
               b = composite.to(Device::cpu()).to(DType::f64);
  const double scale = max(abs(b)).item<double>();
  EXPECT_LE(max(abs(a - b)).item<double>(), rel * scale);
}

using ember_test::slot_calls;

bool same_values(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         max(abs(a.to(DType::f64) - b.to(DType::f64))).item<double>() == 0.0;
}

TEST(ResidualLinear, CpuEqualsTheCompositeAndKeepsItsGradients) {
  manual_seed(12);
  for (const DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    NoGradGuard no_grad;
    for (const int64_t rows : {1, 3, 17}) {
      const Tensor x = randn({rows, 2, 40}).to(dtype), w = randn({24, 40}).to(dtype);
      const Tensor b = randn({24}).to(dtype), r = randn({rows, 2, 24}).to(dtype);
      const double rel = dtype == DType::bf16 ? 8e-3 : dtype == DType::f32 ? 1e-6 : 1e-14;
      expect_near_composite(linear(x, w, b, r), r + linear(x, w, b), rel);
      expect_near_composite(linear(x, w, Tensor(), r), r + linear(x, w), rel);
      // an empty inner dimension: the bias plus the residual
      const Tensor x0 = zeros({rows, 2, 0}, {.dtype = dtype}),
                   w0 = zeros({24, 0}, {.dtype = dtype});
      expect_near_composite(linear(x0, w0, b, r), r + b, rel);
    }
  }
  // a residual that only broadcasts, or of another dtype: the composite, exactly
  const Tensor x = randn({3, 8}), w = randn({5, 8}), b = randn({5}), row = randn({5});
  EXPECT_TRUE(same_values(linear(x, w, b, row), row + linear(x, w, b)));
  const Tensor r64 = randn({3, 5}, {.dtype = DType::f64});
  EXPECT_TRUE(same_values(linear(x, w, b, r64), r64 + linear(x, w, b)));
  // with a gradient: the composite's values and gradients
  const Tensor xg = x.clone().requires_grad_(), wg = w.clone().requires_grad_(),
               rg = randn({3, 5}).requires_grad_();
  const Tensor y = linear(xg, wg, b, rg);
  EXPECT_TRUE(same_values(y, rg + linear(x, w, b)));
  (y * y).sum().backward();
  const Tensor xc = x.clone().requires_grad_(), wc = w.clone().requires_grad_(),
               rc = rg.detach().clone().requires_grad_();
  (square(rc + linear(xc, wc, b))).sum().backward();
  EXPECT_TRUE(same_values(rg.grad(), rc.grad()));
  EXPECT_TRUE(same_values(xg.grad(), xc.grad()));
  EXPECT_TRUE(same_values(wg.grad(), wc.grad()));
  // Linear::forward(x, residual): a forward hook sees the layer's own output, the add after it
  nn::Linear layer(8, 5);
  Tensor hooked;
  auto handle = layer->register_forward_hook(
      [&](nn::ModuleImpl&, const Tensor&, const Tensor& out) -> std::optional<Tensor> {
        hooked = out;
        return out * 2.0;
      });
  NoGradGuard no_grad;
  const Tensor r = randn({3, 5});
  const Tensor out = layer->forward(x, r);
  EXPECT_TRUE(same_values(hooked, linear(x, layer->weight(), layer->bias())));
  EXPECT_TRUE(same_values(out, r + hooked * 2.0));
  handle.remove();
  expect_near_composite(layer->forward(x, r), r + layer(x), 1e-6);
}

// On the GPU: the few-rows kernel adds the residual (1-4 rows, bf16/f16), cuBLASLt gets it
// copied into C (more rows, and f32); both against the composite on the same device.
TEST(ResidualLinear, CudaEqualsTheComposite) {
  SKIP_WITHOUT_CUDA();
  manual_seed(13);
  NoGradGuard no_grad;
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    for (const int64_t m : {1, 2, 4, 5, 64}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " m " + std::to_string(m));
      const Tensor x = randn({m, 264}).to(dtype).to(gpu),
                   w = (randn({72, 264}) * 0.1).to(dtype).to(gpu);
      const Tensor b = randn({72}).to(dtype).to(gpu), r = (randn({m, 72}) * 4).to(dtype).to(gpu);
      const double rel = dtype == DType::f32 ? 1e-5 : 1e-2;
      expect_near_composite(linear(x, w, b, r), r + linear(x, w, b), rel);
      expect_near_composite(linear(x, w, Tensor(), r), r + linear(x, w), rel);
      // against the CPU's f64 sum of the same operands
      const Tensor want =
          r.to(Device::cpu()).to(DType::f64) + linear(x.to(Device::cpu()).to(DType::f64),
                                                      w.to(Device::cpu()).to(DType::f64),
                                                      b.to(Device::cpu()).to(DType::f64));
      expect_near_composite(linear(x, w, b, r).to(DType::f64), want, rel);
    }
  }
}

// On the CPU the fused ops are the composites; bad input is named.
TEST(NormLinear, CpuIsTheCompositeAndRefusesBadInput) {
  manual_seed(14);
  const Tensor x = randn({3, 16}), g = randn({16}), b = randn({16}), w = randn({8, 16}),
               bias = randn({8});
  EXPECT_TRUE(same_values(layer_norm_linear(x, g, b, 1e-5, w, bias, Activation::gelu_tanh),
                          linear(layer_norm(x, {16}, g, b, 1e-5), w, bias, Activation::gelu_tanh)));
  EXPECT_TRUE(same_values(rms_norm_linear(x, g, 1e-6, w), linear(rms_norm(x, {16}, g, 1e-6), w)));
  {  // under autocast a 16-bit x's norm runs in its own dtype: the f32 norm's bits, cast back
    NoGradGuard no_grad;
    const AutocastGuard autocast(DType::bf16);
    const Tensor xh = x.to(DType::bf16), gh = g.to(DType::bf16), bh = b.to(DType::bf16),
                 wh = w.to(DType::bf16), biash = bias.to(DType::bf16);
    const Tensor fused = layer_norm_linear(xh, gh, bh, 1e-5, wh, biash);
    EXPECT_EQ(fused.dtype(), DType::bf16);
    EXPECT_TRUE(same_values(fused, linear(layer_norm(xh, {16}, gh, bh, 1e-5), wh, biash)));
    const auto calls = slot_calls([&] { layer_norm_linear(xh, gh, bh, 1e-5, wh, biash); });
    EXPECT_EQ(calls.count("copy"), 0u);  // no cast to f32 and back, which the composite makes:
    EXPECT_GT(slot_calls([&] { linear(layer_norm(xh, {16}, gh, bh, 1e-5), wh, biash); })["copy"],
              0);
  }
  EXPECT_NE(ember::test_util::error_of([&] {
              layer_norm_linear(Tensor(), g, b, 1e-5, w);
            }).find("undefined"),
            std::string::npos);
  EXPECT_NE(ember::test_util::error_of([&] {
              layer_norm_linear(randn({3, 12}), Tensor(), Tensor(), 1e-5, w);
            }).find("[3, 12]"),
            std::string::npos);
}

// On the GPU: one kernel for 1-4 rows of bf16/f16, the bits of layer_norm (rms_norm) then the
// linear while the norm's row fits its registers (k <= 1024), within a rounding beyond; with a
// gradient, 5 rows, or f32, the composite itself.
TEST(NormLinear, CudaFewRowsEqualTheNormThenTheLinear) {
  SKIP_WITHOUT_CUDA();
  manual_seed(15);
  NoGradGuard no_grad;
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const int64_t k : {64, 768, 1024, 2048}) {
      for (const int64_t m : {1, 2, 3, 4, 5}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " k " + std::to_string(k) + " m " +
                     std::to_string(m));
        auto dev = [&](const Tensor& t) { return t.to(dtype).to(gpu); };
        const Tensor x = dev(randn({m, k}) * 3 + 1), g = dev(randn({k})), b = dev(randn({k}));
        const Tensor w = dev(randn({96, k}) * 0.05), bias = dev(randn({96}));
        // parameters that would want gradients, under NoGradGuard: the fused kernel runs (one
        // launch, no norm of its own) for 1-4 rows, and not for 5
        const Tensor gp = g.clone().requires_grad_(), wp = w.clone().requires_grad_();
        const auto calls = slot_calls([&] { layer_norm_linear(x, gp, b, 1e-5, wp, bias); });
        if (m <= 4) EXPECT_EQ(calls.count("norm_linear") ? calls.at("norm_linear") : 0, 1);
        EXPECT_EQ(calls.count("layer_norm_forward"), m <= 4 ? 0u : 1u);
        EXPECT_EQ(calls.count("gemm"), m <= 4 ? 0u : 1u);
        for (const Activation act : {Activation::none, Activation::gelu_tanh}) {
          const Tensor fused = layer_norm_linear(x, g, b, 1e-5, w, bias, act);
          const Tensor apart = linear(layer_norm(x, {k}, g, b, 1e-5), w, bias, act);
          const Tensor fused_rms = rms_norm_linear(x, g, 1e-6, w, Tensor(), act);
          const Tensor apart_rms = linear(rms_norm(x, {k}, g, 1e-6), w, Tensor(), act);
          if (k <= 1024) {
            EXPECT_TRUE(same_values(fused, apart));
            EXPECT_TRUE(same_values(fused_rms, apart_rms));
          } else {
            expect_near_composite(fused, apart, 2e-2);
            expect_near_composite(fused_rms, apart_rms, 2e-2);
          }
        }
        // no norm parameters, no bias
        EXPECT_TRUE(k > 1024 ||
                    same_values(layer_norm_linear(x, Tensor(), Tensor(), 1e-5, w),
                                linear(layer_norm(x, {k}, Tensor(), Tensor(), 1e-5), w)));
      }
    }
  }
  // against the CPU's f64 computation of the same operands
  const Tensor x = randn({2, 768}), g = randn({768}), b = randn({768}), w = randn({40, 768}) * 0.05;
  const Tensor want =
      linear(layer_norm(x.to(DType::f64), {768}, g.to(DType::f64), b.to(DType::f64)),
             w.to(DType::bf16).to(DType::f64));
  const Tensor got = layer_norm_linear(x.to(DType::bf16).to(gpu), g.to(DType::bf16).to(gpu),
                                       b.to(DType::bf16).to(gpu), 1e-5, w.to(DType::bf16).to(gpu));
  expect_near_composite(got.to(DType::f64), want, 3e-2);
}

// A bf16 model's decode-shaped forward (one row) through the fused norms makes
// `fused_launches` norm_linear calls and one `norm_slot` call (the final norm), and equals the
// same forward with every norm and linear run apart: a forward hook on each module whose name
// ends with one of `hooked` (two a layer) makes the model take the modules.
template <typename Model>
void expect_fused_row_equals_apart(Model& model, const std::vector<std::string>& hooked,
                                   const std::string& norm_slot, int64_t fused_launches) {
  NoGradGuard no_grad;
  model->to(Device::cuda(0));
  model->to(DType::bf16);
  const Tensor ids = from_vector<int64_t>({5}, {1, 1}, {.device = Device::cuda(0)});
  auto times = [](const std::map<std::string, int64_t>& calls, const std::string& slot) {
    return calls.count(slot) ? calls.at(slot) : 0;
  };
  Tensor fused;
  const auto calls = slot_calls([&] { fused = model->forward(ids); });
  EXPECT_EQ(times(calls, "norm_linear"), fused_launches);
  EXPECT_EQ(times(calls, norm_slot), 1);
  std::vector<nn::ModuleHookHandle> hooks;
  for (auto& [name, module] : model->named_modules())
    for (const std::string& end : hooked)
      if (name.ends_with(end))
        hooks.push_back(module->register_forward_hook(
            [](nn::ModuleImpl&, const Tensor&, const Tensor&) { return std::optional<Tensor>(); }));
  ASSERT_EQ(hooks.size(), 4u);
  Tensor apart;
  const auto apart_calls = slot_calls([&] { apart = model->forward(ids); });
  EXPECT_EQ(times(apart_calls, "norm_linear"), 0);
  EXPECT_EQ(times(apart_calls, norm_slot), 5);  // two a layer and the final one
  EXPECT_TRUE(same_values(fused, apart));
}

// GPT-2: each block's two norms ride in its c_attn and c_fc products (ln_f runs on its own).
TEST(NormLinear, CudaGpt2RowEqualsTheModulesRunApart) {
  SKIP_WITHOUT_CUDA();
  manual_seed(16);
  nn::GPT2Config c;
  c.vocab_size = 96;
  c.n_positions = 16;
  c.n_embd = 64;
  c.n_layer = 2;
  c.n_head = 4;
  nn::GPT2 model(c);
  expect_fused_row_equals_apart(model, {"c_attn", "c_fc"}, "layer_norm_forward", 4);
}

// Several weights of one normalised x, and SwiGLU's gate and up: on the CPU exactly the
// composite; bad input named.
TEST(NormLinear, CpuSeveralWeightsAndSwigluAreTheComposite) {
  manual_seed(17);
  const Tensor x = randn({3, 16}), g = randn({16}), b = randn({16});
  const Tensor wq = randn({8, 16}), wk = randn({4, 16}), wv = randn({4, 16}), bq = randn({8});
  const Tensor n = rms_norm(x, {16}, g, 1e-6);
  const auto qkv = rms_norm_linear(x, g, 1e-6, {wq, wk, wv}, {bq, Tensor(), Tensor()});
  ASSERT_EQ(qkv.size(), 3u);
  EXPECT_TRUE(same_values(qkv[0], linear(n, wq, bq)));
  EXPECT_TRUE(same_values(qkv[1], linear(n, wk)));
  EXPECT_TRUE(same_values(qkv[2], linear(n, wv)));
  const auto two = layer_norm_linear(x, g, b, 1e-5, {wq, wk}, {}, Activation::relu);
  const Tensor ln = layer_norm(x, {16}, g, b, 1e-5);
  EXPECT_TRUE(same_values(two[0], linear(ln, wq, Tensor(), Activation::relu)));
  EXPECT_TRUE(same_values(two[1], linear(ln, wk, Tensor(), Activation::relu)));
  const Tensor wu = randn({8, 16}), bu = randn({8});
  EXPECT_TRUE(same_values(rms_norm_swiglu(x, g, 1e-6, wq, wu, bq, bu),
                          silu(linear(n, wq, bq)) * linear(n, wu, bu)));
  {  // gradients flow through the composite
    const Tensor gw = wq.clone().requires_grad_();
    sum(rms_norm_swiglu(x, g, 1e-6, gw, wu)).backward();
    const Tensor gw2 = wq.clone().requires_grad_();
    sum(silu(linear(n, gw2)) * linear(n, wu)).backward();
    EXPECT_TRUE(same_values(gw.grad(), gw2.grad()));
  }
  using ember::test_util::error_of;
  EXPECT_NE(
      error_of([&] { rms_norm_linear(x, g, 1e-6, std::vector<Tensor>{}); }).find("no weights"),
      std::string::npos);
  EXPECT_NE(error_of([&] {
              rms_norm_linear(x, g, 1e-6, {wq, wk}, {bq});
            }).find("1 biases for 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              rms_norm_linear(x, g, 1e-6, {wq, Tensor()});
            }).find("undefined"),
            std::string::npos);
  EXPECT_NE(error_of([&] { rms_norm_swiglu(x, g, 1e-6, wq, wk); }).find("[4, 16]"),
            std::string::npos);
}

// On the GPU: q, k and v (up to three weights) in one launch that normalises once, and the
// gate, up, silu and multiply of SwiGLU in one, each the bits of the modules run apart while the
// norm's row fits its registers (k <= 1024) and within a rounding beyond; with more column
// groups than the device holds blocks (each block then takes several after its one norm).
TEST(NormLinear, CudaSeveralWeightsAndSwigluInOneLaunch) {
  SKIP_WITHOUT_CUDA();
  manual_seed(18);
  NoGradGuard no_grad;
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    // (k, q columns, k/v columns, MLP columns): GPT-2 and Llama-sized rows, a Llama 1B MLP
    for (const auto& [k, nq, nkv, nmlp] :
         {std::tuple<int64_t, int64_t, int64_t, int64_t>{64, 96, 24, 40},
          {768, 768, 200, 3000},
          {2048, 2048, 512, 8192}}) {
      for (const int64_t m : {1, 2, 3, 4, 5}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " k " + std::to_string(k) + " m " +
                     std::to_string(m));
        auto dev = [&](const Tensor& t) { return t.to(dtype).to(gpu); };
        const Tensor x = dev(randn({m, k}) * 3 + 1), g = dev(randn({k}));
        const Tensor wq = dev(randn({nq, k}) * 0.05), wk = dev(randn({nkv, k}) * 0.05),
                     wv = dev(randn({nkv, k}) * 0.05), bq = dev(randn({nq})),
                     bv = dev(randn({nkv}));
        const Tensor wg = dev(randn({nmlp, k}) * 0.05), wu = dev(randn({nmlp, k}) * 0.05),
                     bg = dev(randn({nmlp})), bu = dev(randn({nmlp}));
        std::vector<Tensor> qkv;
        const auto calls = slot_calls([&] {
          qkv = rms_norm_linear(x, g, 1e-6, {wq, wk, wv}, {bq, Tensor(), bv});
        });
        EXPECT_EQ(calls.count("norm_linear") ? calls.at("norm_linear") : 0, 1);
        EXPECT_EQ(calls.count("gemm") ? calls.at("gemm") : 0, m <= 4 ? 0 : 3);
        Tensor a, a_nobias;
        const auto mlp_calls = slot_calls([&] {
          a = rms_norm_swiglu(x, g, 1e-6, wg, wu, bg, bu);
          a_nobias = rms_norm_swiglu(x, g, 1e-6, wg, wu);
        });
        EXPECT_EQ(mlp_calls.count("norm_linear") ? mlp_calls.at("norm_linear") : 0, 2);
        EXPECT_EQ(mlp_calls.count("unary") ? mlp_calls.at("unary") : 0, m <= 4 ? 0 : 2);  // silu
        const Tensor n = rms_norm(x, {k}, g, 1e-6);
        const std::vector<Tensor> want{linear(n, wq, bq), linear(n, wk), linear(n, wv, bv)};
        const Tensor want_a = silu(linear(n, wg, bg)) * linear(n, wu, bu),
                     want_nobias = silu(linear(n, wg)) * linear(n, wu);
        std::vector<std::pair<Tensor, Tensor>> pairs{{qkv[0], want[0]},
                                                     {qkv[1], want[1]},
                                                     {qkv[2], want[2]},
                                                     {a, want_a},
                                                     {a_nobias, want_nobias}};
        for (const auto& [got, composite] : pairs) {
          if (k <= 1024)
            EXPECT_TRUE(same_values(got, composite));
          else
            expect_near_composite(got, composite, 2e-2);
        }
      }
    }
  }
}

// Llama: a layer's q, k, v in one launch (rms_norm_linear of three weights) and its MLP's
// input in another (rms_norm_swiglu); hooks on q_proj and gate_proj turn both off.
TEST(NormLinear, CudaLlamaRowEqualsTheModulesRunApart) {
  SKIP_WITHOUT_CUDA();
  manual_seed(19);
  nn::LlamaConfig c;
  c.vocab_size = 96;
  c.hidden_size = 64;
  c.intermediate_size = 136;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.max_position_embeddings = 16;
  nn::Llama model(c);
  expect_fused_row_equals_apart(model, {"q_proj", "gate_proj"}, "rms_norm_forward", 4);
}

}  // namespace

// Note [Weights loaded before the wait] in src/cuda/gemv.cu: weights a ReadOnlyGuard holds are
// loaded before the kernel ahead finishes. The products keep their bits (linear, the norm in
// front of three weights, the gated pair), and a weight changed just before the guard starts
// is read as changed (the guard's first kernel waits for the work before it).
TEST(FewRowsGemm, CudaReadOnlyWeightsKeepTheirBits) {
  SKIP_WITHOUT_CUDA();
  manual_seed(23);
  NoGradGuard no_grad;
  const Device gpu = Device::cuda(0);
  for (const DType dtype : {DType::bf16, DType::f16}) {
    auto dev = [&](const Tensor& t) { return t.to(dtype).to(gpu); };
    for (const auto& [k, n] : {std::pair<int64_t, int64_t>{768, 2304}, {3072, 768}, {2048, 8192}}) {
      for (const int64_t m : {1, 3}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " k " + std::to_string(k) + " m " +
                     std::to_string(m));
        const Tensor x = dev(randn({m, k})), w = dev(randn({n, k}) * 0.05), b = dev(randn({n}));
        const Tensor r = dev(randn({m, n})), g = dev(randn({k}));
        const Tensor w2 = dev(randn({n / 4, k}) * 0.05), w3 = dev(randn({n / 4, k}) * 0.05);
        auto run = [&] {
          std::vector<Tensor> out{linear(x, w, b), linear(x, w, b, Activation::gelu_tanh),
                                  linear(x, w, Tensor(), r)};
          for (const Tensor& t : rms_norm_linear(x, g, 1e-6, {w, w2, w3}, {b, Tensor(), Tensor()}))
            out.push_back(t);
          out.push_back(layer_norm_linear(x, g, Tensor(), 1e-5, w, b));
          out.push_back(rms_norm_swiglu(x, g, 1e-6, w2, w3));
          return out;
        };
        const std::vector<Tensor> plain = run();
        std::vector<Tensor> early;
        {
          const ReadOnlyGuard weights({w, w2, w3});
          early = run();
        }
        ASSERT_EQ(early.size(), plain.size());
        for (size_t i = 0; i < plain.size(); ++i)
          EXPECT_TRUE(same_values(early[i], plain[i])) << "output " << i;
      }
    }
  }
  // A weight filled by the kernel just before the guard: y = x·wᵀ with x ones, exact in bf16.
  const Tensor x = ones({1, 64}, {.dtype = DType::bf16, .device = gpu});
  Tensor w = zeros({4096, 64}, {.dtype = DType::bf16, .device = gpu});
  for (int i = 1; i <= 40; ++i) {
    w.fill_(static_cast<double>(i));
    const ReadOnlyGuard weights({w});
    const Tensor y = linear(x, w);
    EXPECT_EQ(max(abs(y.to(DType::f32) - 64.0 * i)).item<double>(), 0.0) << "fill " << i;
  }
}
