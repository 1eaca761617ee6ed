// tests/test_sdpa.cpp — scaled_dot_product_attention (src/ops/attention.cpp, the fused path in
// src/cuda/attention.cpp).
//
// CPU: every case of tests/data/sdpa_fixtures.json (tests/gen_sdpa_fixtures.py: no mask, bool,
// key-padding and float masks, causal, broadcast leads and masks, rank 2 and 3) against
// PyTorch, output and the gradients of q, k, v (and a float mask); f64 gradcheck; errors;
// dropout; f16/bf16 on the CPU (computed in f32).
// GPU (skipped without a CUDA device): the fused cuDNN path against the composed path in f32
// on the same rounded inputs, forward and the three input gradients, for each mask kind (none,
// causal, key padding), head dims 64 and 128, bf16 and f16, each test first asserting that the
// fused path ran (sdpa_last_backend()), so none can pass on the fallback. Tolerances (scaled
// as in fixtures.hpp: |got - want| <= atol·max(1, max|want|) + rtol·|want|): output
// bf16 2e-2, f16 4e-3; gradients bf16 4e-2, f16 1e-2 (docs/attention.md).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "ember/optim.hpp"
#include "ember/train/capture.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"

namespace {

using ember::DType;
using ember::SdpaBackend;
using ember::SdpaOptions;
using ember::Shape;
using ember::Tensor;
using ember::test_util::error_of;
using ember_test::check_close;

const nlohmann::ordered_json& sdpa_file() {
  static const nlohmann::ordered_json doc = [] {
    const std::string path = ember_test::data_dir() + "/sdpa_fixtures.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path + " (run tests/gen_sdpa_fixtures.py)");
    return nlohmann::ordered_json::parse(in);
  }();
  return doc;
}

std::vector<std::string> sdpa_case_names() {
  std::vector<std::string> out;
  for (const auto& [k, v] : sdpa_file().at("cases").items()) out.push_back(k);
  return out;
}

class SdpaFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(SdpaFixture, MatchesPyTorch) {
  const nlohmann::ordered_json& c = sdpa_file().at("cases").at(GetParam());
  const nlohmann::ordered_json& attrs = c.at("attrs");
  const nlohmann::ordered_json& t = c.at("tensors");
  auto get = [&](const char* key) { return ember_test::tensor_from_json(t.at(key)); };
  Tensor q = get("q").requires_grad_(), k = get("k").requires_grad_(),
         v = get("v").requires_grad_();
  SdpaOptions o;
  if (t.contains("mask")) {
    o.attn_mask = get("mask");
    if (t.contains("grad_mask")) o.attn_mask.requires_grad_();
  }
  o.is_causal = attrs.value("is_causal", false);
  if (attrs.contains("scale")) o.scale = attrs.at("scale").get<double>();
  const double rtol = attrs.at("rtol").get<double>(), atol = attrs.at("atol").get<double>();
  Tensor out = ember::scaled_dot_product_attention(q, k, v, o);
  EXPECT_EQ(ember::sdpa_last_backend(), SdpaBackend::unfused);
  EXPECT_TRUE(check_close(out, get("out"), rtol, atol, GetParam() + " output"));
  (out * get("w")).sum().backward();
  EXPECT_TRUE(check_close(q.grad(), get("grad_q"), rtol, atol, GetParam() + " grad q"));
  EXPECT_TRUE(check_close(k.grad(), get("grad_k"), rtol, atol, GetParam() + " grad k"));
  EXPECT_TRUE(check_close(v.grad(), get("grad_v"), rtol, atol, GetParam() + " grad v"));
  if (t.contains("grad_mask")) {
    EXPECT_TRUE(
        check_close(o.attn_mask.grad(), get("grad_mask"), rtol, atol, GetParam() + " grad mask"));
  }
}

INSTANTIATE_TEST_SUITE_P(Sdpa, SdpaFixture, ::testing::ValuesIn(sdpa_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(Sdpa, FixtureFileCoversEveryMaskKind) {
  const std::vector<std::string> names = sdpa_case_names();
  EXPECT_GE(names.size(), 13u);
  for (const char* want : {"plain", "bool_mask", "key_padding", "float_mask", "causal"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

Tensor randn_of(const Shape& s, DType dt = DType::f64) { return ember::randn(s, {.dtype = dt}); }

TEST(Sdpa, GradcheckF64) {
  ember::manual_seed(3);
  const Tensor q = randn_of({2, 2, 3, 4}), k = randn_of({2, 2, 5, 4}), v = randn_of({2, 2, 5, 3});
  const Tensor fmask = randn_of({3, 5}), bmask = ember::gt(randn_of({2, 1, 3, 5}), -0.5);
  auto run = [](SdpaOptions o) {
    return [o](const std::vector<Tensor>& x) {
      return ember::scaled_dot_product_attention(x[0], x[1], x[2], o);
    };
  };
  EXPECT_TRUE(ember::gradcheck(run({}), {q, k, v}));
  EXPECT_TRUE(ember::gradcheck(run({.is_causal = true, .scale = 0.7}), {q, k, v}));
  // column 0 always attends, so no row is fully masked
  const Tensor first = ember::lt(ember::arange(5.0, {.dtype = DType::f64}).reshape({1, 5}), 1.0);
  const SdpaOptions with_bool{.attn_mask = ember::logical_or(bmask, first)};
  EXPECT_TRUE(ember::gradcheck(run(with_bool), {q, k, v}));
  EXPECT_TRUE(ember::gradcheck(
      [](const std::vector<Tensor>& x) {
        return ember::scaled_dot_product_attention(x[0], x[1], x[2], {.attn_mask = x[3]});
      },
      {q, k, v, fmask}));
}

TEST(Sdpa, Errors) {
  const Tensor q = randn_of({2, 3, 4}, DType::f32), k = randn_of({2, 5, 4}, DType::f32),
               v = randn_of({2, 5, 3}, DType::f32);
  auto call = [](const Tensor& a, const Tensor& b, const Tensor& c, SdpaOptions o = {}) {
    return [=] { ember::scaled_dot_product_attention(a, b, c, o); };
  };
  std::string m = error_of(call(randn_of({4}, DType::f32), k, v));
  EXPECT_NE(m.find("scaled_dot_product_attention: query shape [4]"), std::string::npos) << m;
  EXPECT_NE(m.find("expected rank >= 2"), std::string::npos) << m;
  m = error_of(call(q, randn_of({2, 5, 6}, DType::f32), v));
  EXPECT_NE(m.find("head dim 6 (expected the query's 4)"), std::string::npos) << m;
  m = error_of(call(q, k, randn_of({2, 4, 3}, DType::f32)));
  EXPECT_NE(m.find("(expected the key's length S = 5)"), std::string::npos) << m;
  m = error_of(call(q, k.to(DType::f64), v));
  EXPECT_NE(m.find("query dtype f32, key f64, value f32 (expected all equal)"), std::string::npos)
      << m;
  m = error_of(call(q.to(DType::i64), k.to(DType::i64), v.to(DType::i64)));
  EXPECT_NE(m.find("unsupported dtype i64"), std::string::npos) << m;
  m = error_of(call(q, k, v, {.dropout_p = 1.5}));
  EXPECT_NE(m.find("dropout_p 1.5 (expected 0 <= dropout_p <= 1)"), std::string::npos) << m;
  m = error_of(call(q, k, v, {.attn_mask = ember::ones({3, 5}), .is_causal = true}));
  EXPECT_NE(m.find("attn_mask and is_causal were both given"), std::string::npos) << m;
  m = error_of(call(q, k, v, {.attn_mask = ember::ones({4, 5})}));
  EXPECT_NE(m.find("attn_mask shape [4, 5] does not broadcast to the scores' shape [2, 3, 5]"),
            std::string::npos)
      << m;
  m = error_of(call(q, k, v, {.attn_mask = ember::ones({3, 5}, {.dtype = DType::i64})}));
  EXPECT_NE(m.find("attn_mask dtype i64 (expected bool, or a float mask"), std::string::npos) << m;
  m = error_of(call(q, k, v, {.scale = std::nan("")}));
  EXPECT_NE(m.find("expected a finite number"), std::string::npos) << m;
  m = error_of(call(q, k, randn_of({3, 5, 3}, DType::f32)));
  EXPECT_NE(m.find("cannot be broadcast"), std::string::npos) << m;
  if (ember::cuda_available()) {
    m = error_of(call(q, k.to(ember::Device::cuda()), v));
    EXPECT_NE(m.find("scaled_dot_product_attention"), std::string::npos) << m;
  }
}

TEST(Sdpa, DropoutIsSeededAndScaled) {
  const Tensor q = randn_of({2, 2, 8, 4}, DType::f32), k = randn_of({2, 2, 16, 4}, DType::f32);
  const Tensor v = ember::ones({2, 2, 16, 4});
  auto run = [&](uint64_t seed, double p) {
    ember::manual_seed(seed);
    return ember::scaled_dot_product_attention(q, k, v, {.dropout_p = p});
  };
  const Tensor a = run(5, 0.3), b = run(5, 0.3), c = run(6, 0.3);
  EXPECT_TRUE(check_close(a, b, 0.0, 0.0, "same seed"));
  EXPECT_FALSE(check_close(a, c, 0.0, 0.0, "other seed"));
  // v = 1: each output is Σ kept weights / (1 - p), 1 on average.
  EXPECT_NEAR(a.mean().item<float>(), 1.0, 0.15);
  EXPECT_TRUE(check_close(run(5, 1.0), ember::zeros({2, 2, 8, 4}), 0.0, 0.0, "p = 1"));
  EXPECT_TRUE(check_close(run(5, 0.0), ember::ones({2, 2, 8, 4}), 1e-6, 1e-6, "p = 0"));
}

TEST(Sdpa, CpuTakesTheComposedPathAndSaysWhy) {
  const Tensor q = randn_of({1, 2, 4, 8}, DType::f32);
  ember::scaled_dot_product_attention(q, q, q);
  EXPECT_EQ(ember::sdpa_last_backend(), SdpaBackend::unfused);
  EXPECT_NE(ember::sdpa_fallback_reason().find("device cpu"), std::string::npos)
      << ember::sdpa_fallback_reason();
}

TEST(Sdpa, HalfPrecisionOnTheCpu) {
  const Tensor q = randn_of({2, 3, 5, 8}, DType::f32), k = randn_of({2, 3, 6, 8}, DType::f32),
               v = randn_of({2, 3, 6, 8}, DType::f32);
  for (DType dt : {DType::bf16, DType::f16}) {
    const Tensor qh = q.to(dt), kh = k.to(dt), vh = v.to(dt);
    const Tensor want = ember::scaled_dot_product_attention(qh.to(DType::f32), kh.to(DType::f32),
                                                            vh.to(DType::f32), {.is_causal = true});
    const Tensor got = ember::scaled_dot_product_attention(qh, kh, vh, {.is_causal = true});
    EXPECT_EQ(got.dtype(), dt);
    const double tol = dt == DType::bf16 ? 1e-2 : 2e-3;
    EXPECT_TRUE(
        check_close(got.to(DType::f32), want, tol, tol, std::string(ember::dtype_name(dt))));
  }
}

// ---- GPU: the fused path against the composed one

enum class MaskKind { none, causal, key_padding };

const char* mask_name(MaskKind m) {
  return m == MaskKind::none ? "none" : m == MaskKind::causal ? "causal" : "key_padding";
}

struct FusedCase {
  DType dtype;
  int64_t head_dim;
  MaskKind mask;
  int64_t len_q = 256, len_kv = 256;
};

std::string case_name(const FusedCase& c) {
  return std::string(ember::dtype_name(c.dtype)) + "_d" + std::to_string(c.head_dim) + "_" +
         mask_name(c.mask) + "_L" + std::to_string(c.len_q) + "_S" + std::to_string(c.len_kv);
}

class SdpaFused : public ::testing::TestWithParam<FusedCase> {};

TEST_P(SdpaFused, MatchesComposedPath) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device: the fused path needs a GPU";
  const FusedCase c = GetParam();
  const ember::Device gpu = ember::Device::cuda();
  const int64_t b = 2, h = 3;
  ember::manual_seed(11);
  // Inputs rounded to the dtype once; the reference runs on those values in f32.
  auto make = [&](int64_t len, int64_t d) {
    return ember::randn({b, h, len, d}, {.device = gpu}).to(c.dtype);
  };
  const Tensor q0 = make(c.len_q, c.head_dim), k0 = make(c.len_kv, c.head_dim),
               v0 = make(c.len_kv, c.head_dim);
  SdpaOptions o;
  o.is_causal = c.mask == MaskKind::causal;
  if (c.mask == MaskKind::key_padding) {
    const Tensor cols = ember::arange(static_cast<double>(c.len_kv), {.device = gpu});
    const Tensor lens =
        ember::from_vector<float>(
            {static_cast<float>(c.len_kv), static_cast<float>(c.len_kv / 2 + 3)}, {b, 1, 1, 1})
            .to(gpu);
    o.attn_mask = ember::lt(cols.reshape({1, 1, 1, c.len_kv}), lens);
  }
  const Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(),
               v = v0.detach().requires_grad_();
  const Tensor out = ember::scaled_dot_product_attention(q, k, v, o);
  ASSERT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn)
      << "fell back: " << ember::sdpa_fallback_reason() << " | " << ember::sdpa_cudnn_status();
  EXPECT_EQ(out.dtype(), c.dtype);
  EXPECT_EQ(out.shape(), (Shape{b, h, c.len_q, c.head_dim}));

  const Tensor qr = q0.to(DType::f32).requires_grad_(), kr = k0.to(DType::f32).requires_grad_(),
               vr = v0.to(DType::f32).requires_grad_();
  const Tensor want = ember::scaled_dot_product_attention(qr, kr, vr, o);
  EXPECT_EQ(ember::sdpa_last_backend(), SdpaBackend::unfused);

  const bool bf = c.dtype == DType::bf16;
  const double tol_out = bf ? 2e-2 : 4e-3, tol_grad = bf ? 4e-2 : 1e-2;
  const std::string name = case_name(c);
  EXPECT_TRUE(check_close(out.to(DType::f32), want, tol_out, tol_out, name + " output"));
  {
    ember::NoGradGuard no_grad;  // a forward no backward follows takes the fused path too
    const Tensor inference = ember::scaled_dot_product_attention(q0, k0, v0, o);
    ASSERT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn)
        << "inference fell back: " << ember::sdpa_fallback_reason() << " | "
        << ember::sdpa_cudnn_status();
    EXPECT_TRUE(check_close(inference.to(DType::f32), want.detach(), tol_out, tol_out,
                            name + " inference output"));
  }
  const Tensor w = ember::randn(want.shape(), {.device = gpu});
  (out.to(DType::f32) * w).sum().backward();
  (want * w).sum().backward();
  EXPECT_TRUE(check_close(q.grad().to(DType::f32), qr.grad(), tol_grad, tol_grad, name + " dq"));
  EXPECT_TRUE(check_close(k.grad().to(DType::f32), kr.grad(), tol_grad, tol_grad, name + " dk"));
  EXPECT_TRUE(check_close(v.grad().to(DType::f32), vr.grad(), tol_grad, tol_grad, name + " dv"));
}

std::vector<FusedCase> fused_cases() {
  std::vector<FusedCase> out;
  for (DType dt : {DType::bf16, DType::f16})
    for (int64_t d : {64, 128})
      for (MaskKind m : {MaskKind::none, MaskKind::causal, MaskKind::key_padding})
        out.push_back({dt, d, m});
  out.push_back({DType::bf16, 64, MaskKind::none, 128, 384});     // L != S
  out.push_back({DType::bf16, 128, MaskKind::causal, 200, 200});  // lengths not multiples of 64
  out.push_back({DType::f16, 96, MaskKind::none, 256, 256});      // another head dim
  return out;
}

INSTANTIATE_TEST_SUITE_P(Cuda, SdpaFused, ::testing::ValuesIn(fused_cases()),
                         [](const ::testing::TestParamInfo<FusedCase>& info) {
                           return case_name(info.param);
                         });

TEST(CudaSdpa, DropoutIsReproducibleBySeed) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device: the fused path needs a GPU";
  const ember::Device gpu = ember::Device::cuda();
  ember::manual_seed(1);
  const Tensor q = ember::randn({2, 4, 256, 64}, {.device = gpu}).to(DType::bf16);
  const Tensor k = ember::randn({2, 4, 256, 64}, {.device = gpu}).to(DType::bf16);
  const Tensor v = ember::ones({2, 4, 256, 64}, {.device = gpu}).to(DType::bf16);
  auto run = [&](uint64_t seed) {
    ember::manual_seed(seed);
    Tensor r = ember::scaled_dot_product_attention(q, k, v, {.dropout_p = 0.25});
    EXPECT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn) << ember::sdpa_fallback_reason();
    return r.to(DType::f32);
  };
  const Tensor a = run(9), b = run(9), c = run(10);
  EXPECT_TRUE(check_close(a, b, 0.0, 0.0, "same seed"));
  EXPECT_FALSE(check_close(a, c, 0.0, 0.0, "other seed"));
  // v = 1: every output is Σ kept weights / (1 - p), 1 on average.
  EXPECT_NEAR(a.mean().item<float>(), 1.0, 0.05);
  // The backward regenerates the same mask: gradients are finite and reproducible.
  auto grad_of = [&](uint64_t seed) {
    const Tensor qq = q.detach().requires_grad_();
    ember::manual_seed(seed);
    ember::scaled_dot_product_attention(qq, k, v, {.dropout_p = 0.25})
        .to(DType::f32)
        .sum()
        .backward();
    return qq.grad().to(DType::f32);
  };
  const Tensor g1 = grad_of(4), g2 = grad_of(4);
  EXPECT_TRUE(check_close(g1, g2, 0.0, 0.0, "dropout backward, same seed"));
  EXPECT_TRUE(ember::all(ember::isfinite(g1)).item<bool>());
}

// Fused dropout inside a captured step: cuDNN reads its seed and offset from a device buffer
// the step writes from the replay's generator state, so every replay draws what eager would.
TEST(CudaSdpa, DropoutInsideACapturedStepEqualsEager) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device: the fused path needs a GPU";
  const ember::Device gpu = ember::Device::cuda();
  ember::manual_seed(21);
  auto make = [&] { return ember::randn({2, 4, 128, 64}, {.device = gpu}).to(DType::bf16); };
  const Tensor q = make(), k = make(), v = make();
  auto attend = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        ember::scaled_dot_product_attention(in[0], k, v, {.dropout_p = 0.25})};
  };
  std::vector<std::vector<float>> eager, graphed;
  ember::manual_seed(3);
  for (int i = 0; i < 4; ++i) eager.push_back(attend({q})[0].to(DType::f32).to_vector<float>());
  ASSERT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn) << ember::sdpa_fallback_reason();
  ember::manual_seed(3);
  ember::train::CapturedStep step(attend, {.warmup = 1});
  for (int i = 0; i < 4; ++i) graphed.push_back(step({q})[0].to(DType::f32).to_vector<float>());
  EXPECT_EQ(step.replay_count(), 3);  // the capturing call launches the graph too
  for (int i = 0; i < 4; ++i) EXPECT_EQ(eager[i], graphed[i]) << "call " << i;
  EXPECT_NE(graphed[2], graphed[3]) << "a replay drew the previous call's numbers";
}

// bf16 q0, k0, v0 with `mask` on the GPU: the fused path runs and matches the composed one
// in f32 on the same values, output and the three input gradients (bf16 tolerances).
void expect_fused_matches_composed(const Tensor& q0, const Tensor& k0, const Tensor& v0,
                                   const Tensor& mask, const std::string& what) {
  const Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(),
               v = v0.detach().requires_grad_();
  const Tensor out = ember::scaled_dot_product_attention(q, k, v, {.attn_mask = mask});
  ASSERT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn)
      << what << " fell back: " << ember::sdpa_fallback_reason();
  const Tensor qr = q0.to(DType::f32).requires_grad_(), kr = k0.to(DType::f32).requires_grad_(),
               vr = v0.to(DType::f32).requires_grad_();
  const Tensor want = ember::scaled_dot_product_attention(qr, kr, vr, {.attn_mask = mask});
  EXPECT_TRUE(check_close(out.to(DType::f32), want, 2e-2, 2e-2, what + " output"));
  const Tensor w = ember::randn(want.shape(), {.device = q0.device()});
  (out.to(DType::f32) * w).sum().backward();
  (want * w).sum().backward();
  EXPECT_TRUE(check_close(q.grad().to(DType::f32), qr.grad(), 4e-2, 4e-2, what + " dq"));
  EXPECT_TRUE(check_close(k.grad().to(DType::f32), kr.grad(), 4e-2, 4e-2, what + " dk"));
  EXPECT_TRUE(check_close(v.grad().to(DType::f32), vr.grad(), 4e-2, 4e-2, what + " dv"));
}

// Key padding of any pattern runs fused with no host read (Note [Key padding by sorting the
// keys]): the keys and values are reordered on the device so the kept ones come first. Masks
// that are not prefixes, a [1, 1, 1, S] mask shared by the batch, S not a multiple of 64, and
// a batch whose every key is blocked (NaN rows, as the composed path gives).
TEST(CudaSdpa, KeyPaddingOfAnyPatternRunsFused) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device: the fused path needs a GPU";
  const ember::Device gpu = ember::Device::cuda();
  ember::manual_seed(41);
  const int64_t b = 3, h = 2, l = 96, s = 200;
  auto make = [&](int64_t len) {
    return ember::randn({b, h, len, 64}, {.device = gpu}).to(DType::bf16);
  };
  const Tensor q0 = make(l), k0 = make(s), v0 = make(s);
  const Tensor first = ember::eq(ember::arange(static_cast<double>(s), {.device = gpu}), 0.0);
  // Scattered holes; key 0 always kept, so no batch is fully blocked.
  const Tensor scattered =
      ember::logical_or(ember::gt(ember::rand({b, 1, 1, s}, {.device = gpu}), 0.5), first);
  const Tensor shared = ember::gt(ember::rand({1, 1, 1, s}, {.device = gpu}), 0.3);
  for (const auto& [mask, what] : {std::pair{scattered, std::string("scattered [B,1,1,S]")},
                                   std::pair{shared, std::string("shared [1,1,1,S]")}}) {
    expect_fused_matches_composed(q0, k0, v0, mask, what);
  }
  // Batch 1 blocks every key: its rows are NaN, the other batches match the composed path.
  const Tensor keep_batch = ember::from_vector<float>({1, 0, 1}, {b, 1, 1, 1}).to(gpu);
  const Tensor blocked = ember::logical_and(scattered, ember::ne(keep_batch, 0.0));
  const Tensor out = ember::scaled_dot_product_attention(q0, k0, v0, {.attn_mask = blocked});
  ASSERT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn) << ember::sdpa_fallback_reason();
  const Tensor want = ember::scaled_dot_product_attention(
      q0.to(DType::f32), k0.to(DType::f32), v0.to(DType::f32), {.attn_mask = blocked});
  EXPECT_TRUE(ember::all(ember::isnan(out.select(0, 1))).item<bool>());
  EXPECT_TRUE(ember::all(ember::isnan(want.select(0, 1))).item<bool>());
  for (int64_t i : {0, 2})
    EXPECT_TRUE(check_close(out.select(0, i).to(DType::f32), want.select(0, i), 2e-2, 2e-2,
                            "batch " + std::to_string(i) + " beside a blocked batch"));
}

// A training step through key-padded attention (forward, backward, SGD) captured in a
// CapturedStep gives the eager steps' losses bitwise: nothing on the way reads the mask on
// the host, and each replay reorders the keys again.
TEST(CudaSdpa, KeyPaddingInsideACapturedStepEqualsEager) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device: the fused path needs a GPU";
  const ember::Device gpu = ember::Device::cuda();
  auto run = [&](bool captured) {
    ember::manual_seed(43);
    auto make = [&] { return ember::randn({2, 4, 128, 64}, {.device = gpu}).to(DType::bf16); };
    const Tensor q = make(), x = make(), v = make();
    const Tensor mask = ember::gt(ember::rand({2, 1, 1, 128}, {.device = gpu}), 0.25);
    Tensor w = (ember::randn({64, 64}, {.device = gpu}) * 0.1).requires_grad_();
    ember::optim::SGD opt({w}, {.lr = 0.05});
    auto step_fn = [&](const std::vector<Tensor>& in) {
      opt.zero_grad();
      const Tensor out = ember::scaled_dot_product_attention(
          q, ember::matmul(in[0], w.to(DType::bf16)), v, {.attn_mask = mask});
      Tensor loss = ember::mean(ember::square(out.to(DType::f32)));
      loss.backward();
      opt.step();
      return std::vector<Tensor>{loss};
    };
    std::vector<float> losses;
    std::unique_ptr<ember::train::CapturedStep> step;
    if (captured) step = std::make_unique<ember::train::CapturedStep>(step_fn);
    for (int i = 0; i < 5; ++i)
      losses.push_back((captured ? (*step)({x}) : step_fn({x}))[0].item<float>());
    EXPECT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn) << ember::sdpa_fallback_reason();
    if (captured) EXPECT_EQ(step->replay_count(), 4);
    return losses;
  };
  const std::vector<float> eager = run(false), graphed = run(true);
  EXPECT_EQ(eager, graphed);
  EXPECT_NE(eager.front(), eager.back()) << "the weight did not train";
}

TEST(CudaSdpa, FusedForwardKeepsNoScoresMatrix) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device: the fused path needs a GPU";
  const ember::Device gpu = ember::Device::cuda();
  const int64_t l = 8192;
  const Tensor q = ember::randn({1, 2, l, 64}, {.device = gpu}).to(DType::bf16);
  ember::scaled_dot_product_attention(q, q, q, {.is_causal = true});  // plans built, cached
  ember::synchronize(gpu);
  const int64_t before = ember::memory_stats(gpu).pass_in_use;
  ember::reset_peak_stats(gpu);
  ember::scaled_dot_product_attention(q, q, q, {.is_causal = true});
  ember::synchronize(gpu);
  ASSERT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn) << ember::sdpa_fallback_reason();
  const int64_t grew = ember::memory_stats(gpu).pass_peak - before;
  EXPECT_LT(grew, 2 * l * l / 4) << "peak grew by " << grew << " bytes (scores would be "
                                 << 2 * 2 * l * l << ")";
  // A key-padding mask adds the reordered keys and values, not an [L, S] bias.
  const Tensor mask = ember::gt(ember::rand({1, 1, 1, l}, {.device = gpu}), 0.5);
  ember::scaled_dot_product_attention(q, q, q, {.attn_mask = mask});
  ember::synchronize(gpu);
  const int64_t before_mask = ember::memory_stats(gpu).pass_in_use;
  ember::reset_peak_stats(gpu);
  ember::scaled_dot_product_attention(q, q, q, {.attn_mask = mask});
  ember::synchronize(gpu);
  ASSERT_EQ(ember::sdpa_last_backend(), SdpaBackend::cudnn) << ember::sdpa_fallback_reason();
  const int64_t grew_mask = ember::memory_stats(gpu).pass_peak - before_mask;
  EXPECT_LT(grew_mask, 2 * l * l / 4)
      << "peak grew by " << grew_mask << " bytes with a key-padding mask";
}

TEST(CudaSdpa, StatusNamesCudnn) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device";
  EXPECT_NE(ember::sdpa_cudnn_status().find("cuDNN 9."), std::string::npos)
      << ember::sdpa_cudnn_status();
}

TEST(CudaSdpa, FallsBackForF32AndMasksWithGradients) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const ember::Device gpu = ember::Device::cuda();
  const Tensor q = ember::randn({1, 2, 64, 64}, {.device = gpu});
  ember::scaled_dot_product_attention(q, q, q);
  EXPECT_EQ(ember::sdpa_last_backend(), SdpaBackend::unfused);
  EXPECT_NE(ember::sdpa_fallback_reason().find("dtype f32"), std::string::npos);
  const Tensor qb = q.to(DType::bf16);
  const Tensor mask = ember::zeros({64, 64}, {.device = gpu}).requires_grad_();
  ember::scaled_dot_product_attention(qb, qb, qb, {.attn_mask = mask});
  EXPECT_EQ(ember::sdpa_last_backend(), SdpaBackend::unfused);
  EXPECT_NE(ember::sdpa_fallback_reason().find("requires grad"), std::string::npos);
}

// Any bool mask and any float mask run fused as cuDNN's additive bias (no host read of the
// mask): a random [B, 1, L, S] bool mask (every query keeps its own key) and a float one.
TEST(CudaSdpa, GeneralAndFloatMasksRunFused) {
  if (!ember::cuda_available()) GTEST_SKIP() << "no CUDA device";
  const ember::Device gpu = ember::Device::cuda();
  ember::manual_seed(31);
  const int64_t b = 2, h = 2, l = 128, s = 128;
  auto make = [&] { return ember::randn({b, h, l, 64}, {.device = gpu}).to(DType::bf16); };
  const Tensor q0 = make(), k0 = make(), v0 = make();
  const Tensor eye =
      ember::eq(ember::arange(static_cast<double>(l), {.device = gpu}).reshape({l, 1}),
                ember::arange(static_cast<double>(s), {.device = gpu}).reshape({1, s}));
  const Tensor general =
      ember::logical_or(ember::gt(ember::rand({b, 1, l, s}, {.device = gpu}), 0.4), eye);
  const Tensor additive = ember::randn({1, h, l, s}, {.device = gpu});
  for (const Tensor& mask : {general, additive}) {
    const std::string what = mask.dtype() == DType::boolean ? "bool mask" : "float mask";
    expect_fused_matches_composed(q0, k0, v0, mask, what);
  }
}

}  // namespace
