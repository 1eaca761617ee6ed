// tests/test_layers_conv_norm.cpp — Conv2d, MaxPool2d, AvgPool2d, BatchNorm1d/2d, LayerNorm and
// Embedding: against PyTorch runs, f64 finite differences, and their module contracts.
//
// Tier 1: every case of tests/data/layer_fixtures.json (tests/gen_layer_fixtures.py) builds
// the module from its config JSON with nn::build, loads PyTorch's state_dict strictly (so the
// parameter and buffer names match PyTorch's), and replays the steps: output, gradients of
// sum(out * w) for the input and every parameter, and the buffers after each step (BatchNorm
// running statistics, num_batches_tracked). The repr must equal PyTorch's too.
// Tier 2: gradcheck of conv2d (strides, padding, dilation, groups), both pools, batch_norm and
// layer_norm. Then: default initialisation, config round trips, and error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ember/nn/conv.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "layer_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file, the op names are the subject
using nlohmann::ordered_json;
using Inputs = std::vector<Tensor>;
using ember::test_util::data;
using ember::test_util::expect_error;

// ---- tier 1: PyTorch fixtures

const ordered_json& layer_file() {
  static const ordered_json doc =
      test_util::read_layer_fixtures("layer_fixtures.json", "tests/gen_layer_fixtures.py");
  return doc;
}

std::vector<std::string> layer_case_names() { return test_util::fixture_case_names(layer_file()); }

class LayerFixturesConvPoolNormEmbedding : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerFixturesConvPoolNormEmbedding, MatchesPyTorch) {
  const std::string name = GetParam();
  const ordered_json& c = layer_file().at("cases").at(name);
  const double rtol = c.at("attrs").at("rtol").get<double>(),
               atol = c.at("attrs").at("atol").get<double>();
  nn::Module m = nn::build(nlohmann::json::parse(c.at("module").dump()));

  // PyTorch's state_dict names, in PyTorch's order, load strictly.
  nn::StateDict sd;
  for (const auto& [key, value] : c.at("state_dict").items())
    sd.emplace_back(key, ember_test::tensor_from_json(value));
  std::vector<std::string> want_names, got_names;
  for (auto& [n, t] : sd) want_names.push_back(n);
  for (auto& [n, t] : m->state_dict()) got_names.push_back(n);
  EXPECT_EQ(got_names, want_names) << name << ": state_dict names or order differ from PyTorch's";
  m->load_state_dict(sd, /*strict=*/true);
  EXPECT_EQ(m->type_name() + "(" + m->extra_repr() + ")", c.at("repr").get<std::string>()) << name;

  int step = 0;
  for (const ordered_json& s : c.at("steps")) {
    const std::string where = name + " step " + std::to_string(step++);
    const ordered_json& t = s.at("tensors");
    m->train(s.at("train").get<bool>());
    m->zero_grad();
    Tensor x = ember_test::tensor_from_json(t.at("input"));
    if (is_floating(x.dtype())) x.requires_grad_();
    Tensor out = m(x);
    ember_test::expect_close(out, ember_test::tensor_from_json(t.at("output")), rtol, atol,
                             where + " output");
    (out * ember_test::tensor_from_json(t.at("w"))).sum().backward();
    if (t.contains("grad_input"))
      ember_test::expect_close(x.grad(), ember_test::tensor_from_json(t.at("grad_input")), rtol,
                               atol, where + " grad_input");
    int grads = 0, states = 0;
    for (const auto& [key, value] : t.items()) {
      grads += key.rfind("grad.", 0) == 0;
      states += key.rfind("state.", 0) == 0;
    }
    const nn::NamedTensors params = m->named_parameters(), buffers = m->named_buffers();
    EXPECT_EQ(grads, static_cast<int>(params.size()))
        << where << ": parameter count differs from PyTorch's";
    EXPECT_EQ(states, static_cast<int>(buffers.size()))
        << where << ": buffer count differs from PyTorch's";
    for (const auto& [n, p] : params) {
      ASSERT_TRUE(t.contains("grad." + n)) << where << ": PyTorch has no parameter " << n;
      ember_test::expect_close(p.grad(), ember_test::tensor_from_json(t.at("grad." + n)), rtol,
                               atol, where + " grad of " + n);
    }
    for (const auto& [n, b] : buffers) {
      ASSERT_TRUE(t.contains("state." + n)) << where << ": PyTorch has no buffer " << n;
      ember_test::expect_close(b, ember_test::tensor_from_json(t.at("state." + n)), rtol, atol,
                               where + " buffer " + n);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, LayerFixturesConvPoolNormEmbedding,
                         ::testing::ValuesIn(layer_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---- tier 2: f64 central differences

/// Well separated values in random order (no two within 0.05): max pooling has no near-ties.
Tensor distinct(const Shape& s, uint32_t seed) {
  std::vector<double> v(static_cast<size_t>(s.numel()));
  std::iota(v.begin(), v.end(), 0.0);
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  for (double& e : v) e = e * 0.1 - static_cast<double>(v.size()) * 0.05;
  return from_vector<double>(v, s);
}

using ember::test_util::expect_gradcheck;

struct Conv2dCase {
  const char* name;
  Shape x, w;
  Size2d stride, padding, dilation;
  int64_t groups;
  bool bias;
};

TEST(ConvGradcheck, StridePaddingDilationGroups) {
  manual_seed(11);
  const std::vector<Conv2dCase> cases = {
      {"plain", {2, 3, 5, 4}, {2, 3, 3, 2}, 1, 0, 1, 1, true},
      {"stride_padding", {1, 2, 6, 5}, {3, 2, 3, 3}, {2, 1}, {1, 2}, 1, 1, true},
      {"dilation", {2, 1, 7, 6}, {2, 1, 2, 3}, 1, 1, {2, 2}, 1, false},
      {"groups", {2, 4, 4, 5}, {6, 2, 2, 2}, {1, 2}, 1, 1, 2, true},
      {"depthwise_everything", {1, 3, 7, 7}, {3, 1, 3, 2}, 2, {1, 0}, {2, 1}, 3, true},
      {"unbatched", {2, 4, 4}, {3, 2, 2, 2}, 1, 1, 1, 1, true},
  };
  for (const Conv2dCase& c : cases) {
    Inputs in = {data(c.x), data(c.w, 0.5)};
    if (c.bias) in.push_back(data({c.w[0]}));
    expect_gradcheck(
        std::string("conv2d ") + c.name,
        [c](const Inputs& x) {
          return conv2d(x[0], x[1], c.bias ? x[2] : Tensor(), c.stride, c.padding, c.dilation,
                        c.groups);
        },
        in);
  }
}

TEST(PoolGradcheck, MaxAndAverage) {
  manual_seed(12);
  expect_gradcheck("max_pool2d 2", [](const Inputs& x) { return max_pool2d(x[0], 2); },
                   {distinct({2, 2, 4, 6}, 1)});
  expect_gradcheck("max_pool2d 3 s2 p1 ceil",
                   [](const Inputs& x) { return max_pool2d(x[0], 3, 2, 1, 1, true); },
                   {distinct({1, 2, 7, 6}, 2)});
  expect_gradcheck("max_pool2d dilation",
                   [](const Inputs& x) {
                     return max_pool2d(x[0], {2, 3}, Size2d{1, 2}, {1, 1}, {2, 1});
                   },
                   {distinct({1, 2, 6, 7}, 3)});
  expect_gradcheck("avg_pool2d 2", [](const Inputs& x) { return avg_pool2d(x[0], 2); },
                   {data({2, 2, 4, 5})});
  expect_gradcheck("avg_pool2d 3 s2 p1", [](const Inputs& x) { return avg_pool2d(x[0], 3, 2, 1); },
                   {data({1, 2, 7, 6})});
  expect_gradcheck("avg_pool2d exclude pad ceil",
                   [](const Inputs& x) {
                     return avg_pool2d(x[0], {3, 2}, 2, {1, 1}, true, false);
                   },
                   {data({1, 2, 8, 7})});
}

TEST(NormGradcheck, BatchNormAndLayerNorm) {
  manual_seed(13);
  expect_gradcheck(
      "batch_norm training [N, C, H, W]",
      [](const Inputs& x) { return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true); },
      {data({3, 2, 2, 3}), data({2}), data({2})});
  expect_gradcheck("batch_norm training [N, C]",
                   [](const Inputs& x) {
                     return batch_norm(x[0], Tensor(), Tensor(), x[1], x[2], true, 0.1, 1e-3);
                   },
                   {data({5, 3}), data({3}), data({3})});
  const Tensor rm = data({2}), rv = abs(data({2})) + 0.5;
  expect_gradcheck(
      "batch_norm eval",
      [rm, rv](const Inputs& x) { return batch_norm(x[0], rm, rv, x[1], x[2], false); },
      {data({2, 2, 3}), data({2}), data({2})});
  expect_gradcheck("layer_norm last dim",
                   [](const Inputs& x) { return layer_norm(x[0], {5}, x[1], x[2]); },
                   {data({2, 3, 5}), data({5}), data({5})});
  expect_gradcheck("layer_norm two dims, no affine",
                   [](const Inputs& x) {
                     return layer_norm(x[0], {3, 4}, Tensor(), Tensor(), 1e-3);
                   },
                   {data({2, 3, 4})});
}

// Small output planes make conv2d group several images into one GEMM, and a batch of 25
// runs as chunks of 6, 6, 6, 6 and 1 images (Note [Convolution as GEMMs] in src/ops/conv.cpp):
// results and gradients equal image-by-image convolutions, with and without the bias folded
// into the GEMM (groups = 1 and groups = 3).
TEST(ConvChunks, MatchImageByImage) {
  manual_seed(14);
  for (int64_t groups : {1, 3}) {
    const std::string what = "chunked conv2d, groups " + std::to_string(groups);
    Tensor x = randn({25, 3, 5, 5}).requires_grad_();
    Tensor w = randn({6, 3 / groups, 3, 3}).requires_grad_();
    Tensor b = randn({6}).requires_grad_();
    Tensor y = conv2d(x, w, b, 1, 1, 1, groups);
    Tensor gy = randn(y.shape());
    (y * gy).sum().backward();
    Tensor gx = x.grad(), gw = w.grad(), gb = b.grad();
    x.zero_grad();
    w.zero_grad();
    b.zero_grad();
    for (int64_t n = 0; n < 25; ++n) {
      Tensor yn = conv2d(x.narrow(0, n, 1), w, b, 1, 1, 1, groups);
      ember_test::expect_close(yn, y.narrow(0, n, 1).detach(), 1e-5, 1e-5,
                               what + " image " + std::to_string(n));
      (yn * gy.narrow(0, n, 1)).sum().backward();
    }
    ember_test::expect_close(gx, x.grad(), 1e-5, 1e-5, what + " grad input");
    ember_test::expect_close(gw, w.grad(), 1e-5, 1e-5, what + " grad weight");
    ember_test::expect_close(gb, b.grad(), 1e-5, 1e-5, what + " grad bias");
  }
}

// PyTorch's argmax rules (checked against torch 1.13): the first maximum wins a tie, a NaN
// takes the place of anything before it (so the last NaN wins). Both the 2×2 fast path and
// the general window loop.
TEST(PoolIndices, TiesAndNaNAsPyTorch) {
  const float nan = std::nanf("");
  Tensor x = from_vector<float>({1, nan, 5, 2, 3, nan, 0, 7}, {1, 1, 2, 4});
  auto [out, idx] = max_pool2d_with_indices(x, 2);
  EXPECT_EQ(idx.to_vector<int64_t>(), (std::vector<int64_t>{5, 7}));
  EXPECT_TRUE(std::isnan(out.to_vector<float>()[0]));
  auto [out1, idx1] = max_pool2d_with_indices(x, 2, 1);
  EXPECT_EQ(idx1.to_vector<int64_t>(), (std::vector<int64_t>{5, 5, 7}));
  Tensor ties = from_vector<float>({4, 4, 1, 0, 4, 2, 9, 9}, {1, 1, 2, 4});
  EXPECT_EQ(max_pool2d_with_indices(ties, 2).second.to_vector<int64_t>(),
            (std::vector<int64_t>{0, 6}));
  EXPECT_EQ(max_pool2d_with_indices(ties, 2, 1).second.to_vector<int64_t>(),
            (std::vector<int64_t>{0, 6, 6}));
}

// The row-at-a-time pool (tap-major, branch-free) against PyTorch's one-window-at-a-time scan
// written out here, on values full of ties, NaNs and -inf, over strides, padding, dilation and
// ceil_mode, NCHW and channels_last: every value (NaN for NaN) and every index equal.
TEST(PoolIndices, RowKernelEqualsTheWindowScan) {
  struct Case {
    int64_t h, w, k, s, p, d;
    bool ceil;
  };
  const Case cases[] = {{9, 11, 3, 2, 1, 1, false}, {8, 8, 3, 1, 1, 1, false},
                        {10, 7, 2, 3, 1, 2, true},  {7, 9, 3, 2, 0, 2, false},
                        {5, 13, 4, 3, 2, 1, true},  {6, 6, 1, 2, 0, 1, false}};
  std::mt19937 gen(7);
  const float ninf = -std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float pick[] = {ninf, -1, 0, 0, 1, 2, 2, 3, nan};
  for (const Case& c : cases) {
    const int64_t n = 2, ch = 3;
    std::vector<float> v(static_cast<size_t>(n * ch * c.h * c.w));
    for (float& e : v) e = pick[gen() % 9];
    const Tensor x = from_vector<float>(v, {n, ch, c.h, c.w});
    const std::string what = "h" + std::to_string(c.h) + " w" + std::to_string(c.w) + " k" +
                             std::to_string(c.k) + " s" + std::to_string(c.s) + " p" +
                             std::to_string(c.p) + " d" + std::to_string(c.d);
    for (const bool cl : {false, true}) {
      const Tensor in = cl ? x.contiguous(MemoryFormat::channels_last) : x;
      auto [out, idx] = max_pool2d_with_indices(in, c.k, c.s, c.p, c.d, c.ceil);
      const int64_t oh = out.shape()[2], ow = out.shape()[3];
      const std::vector<float> got = out.contiguous().to_vector<float>();
      const std::vector<int64_t> got_idx = idx.contiguous().to_vector<int64_t>();
      for (int64_t plane = 0; plane < n * ch; ++plane)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            int64_t h0 = oy * c.s - c.p, w0 = ox * c.s - c.p;
            const int64_t h1 = std::min(h0 + (c.k - 1) * c.d + 1, c.h);
            const int64_t w1 = std::min(w0 + (c.k - 1) * c.d + 1, c.w);
            while (h0 < 0) h0 += c.d;
            while (w0 < 0) w0 += c.d;
            float best = ninf;
            int64_t at = h0 * c.w + w0;
            for (int64_t y = h0; y < h1; y += c.d)
              for (int64_t xx = w0; xx < w1; xx += c.d) {
                const float e = v[static_cast<size_t>((plane * c.h + y) * c.w + xx)];
                if (e > best || std::isnan(e)) {
                  best = e;
                  at = y * c.w + xx;
                }
              }
            const auto o = static_cast<size_t>((plane * oh + oy) * ow + ox);
            ASSERT_EQ(got_idx[o], at) << what << (cl ? " channels_last" : "") << " at " << o;
            if (std::isnan(best))
              ASSERT_TRUE(std::isnan(got[o])) << what << " at " << o;
            else
              ASSERT_EQ(got[o], best) << what << (cl ? " channels_last" : "") << " at " << o;
          }
    }
  }
}

// ---- default initialisation (PyTorch's distributions and bounds)

using ember::test_util::expect_uniform;

TEST(ConvInit, KaimingUniformBounds) {
  manual_seed(15);
  nn::Conv2d conv(16, 64, 3);  // fan_in = 16·3·3 = 144
  EXPECT_EQ(conv->weight().shape(), Shape({64, 16, 3, 3}));
  expect_uniform(conv->weight(), 1.0 / 12.0, "Conv2d weight");
  nn::Conv2d grouped(8, 256, Size2d{3, 2}, 1, 0, 1, /*groups=*/4);  // fan_in = 2·3·2 = 12
  EXPECT_EQ(grouped->weight().shape(), Shape({256, 2, 3, 2}));
  expect_uniform(grouped->weight(), 1.0 / std::sqrt(12.0), "grouped Conv2d weight");
  expect_uniform(grouped->bias(), 1.0 / std::sqrt(12.0), "grouped Conv2d bias");
}

TEST(NormInit, ParametersAndBuffers) {
  nn::BatchNorm2d bn(5);
  const nn::StateDict sd = bn->state_dict();
  ASSERT_EQ(sd.size(), 5u);
  const char* names[] = {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"};
  const double values[] = {1.0, 0.0, 0.0, 1.0};
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(sd[i].first, names[i]);
  for (size_t i = 0; i < 4; ++i)
    ember_test::expect_equal(sd[i].second, full({5}, values[i]),
                             std::string("BatchNorm2d ") + names[i]);
  EXPECT_EQ(sd[4].second.dtype(), DType::i64);
  EXPECT_EQ(sd[4].second.dim(), 0);
  EXPECT_EQ(sd[4].second.item<int64_t>(), 0);
  EXPECT_EQ(bn->named_parameters().size(), 2u);
  nn::BatchNorm1d untracked(3, 1e-5, 0.1, /*affine=*/false, /*track_running_stats=*/false);
  EXPECT_TRUE(untracked->state_dict().empty());
  nn::LayerNorm ln(Shape{2, 3});
  ember_test::expect_equal(ln->param("weight"), ones({2, 3}), "LayerNorm weight");
  ember_test::expect_equal(ln->param("bias"), zeros({2, 3}), "LayerNorm bias");
}

TEST(EmbeddingInit, NormalWithZeroPaddingRow) {
  manual_seed(16);
  nn::Embedding emb(400, 50, /*padding_idx=*/-3);
  EXPECT_EQ(*emb->embedding_options().padding_idx, 397);
  Tensor w = emb->weight();
  ember_test::expect_equal(w.select(0, 397), zeros({50}), "Embedding padding row");
  const std::vector<double> v = ember_test::values_f64(w);
  double sum = 0.0, sq = 0.0;
  for (double e : v) sum += e, sq += e * e;
  const double n = static_cast<double>(v.size()) - 50.0;  // the zero row aside
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(std::sqrt(sq / n), 1.0, 0.03);
}

TEST(EmbeddingModule, PaddingRowGetsNoGradient) {
  nn::Embedding emb(5, 2, /*padding_idx=*/1);
  Tensor idx = from_vector<int64_t>({1, 0, 1, 4}, {2, 2});
  emb(idx).sum().backward();
  const std::vector<float> g = emb->weight().grad().to_vector<float>();
  const std::vector<float> want = {1, 1, 0, 0, 0, 0, 0, 0, 1, 1};
  EXPECT_EQ(g, want);
}

// ---- BatchNorm bookkeeping

TEST(NormModules, BatchNormCountsBatchesAndFreezesInEval) {
  manual_seed(17);
  nn::BatchNorm2d bn(2);
  Tensor x = randn({4, 2, 3, 3});
  void* const mean_ptr = bn->buffer("running_mean").data_ptr();
  bn(x);
  bn(x);
  EXPECT_EQ(bn->buffer("num_batches_tracked").item<int64_t>(), 2);
  const std::vector<float> mean = bn->buffer("running_mean").to_vector<float>();
  bn->eval();
  bn(x);
  EXPECT_EQ(bn->buffer("num_batches_tracked").item<int64_t>(), 2);
  EXPECT_EQ(bn->buffer("running_mean").to_vector<float>(), mean);
  EXPECT_EQ(bn->buffer("running_mean").data_ptr(), mean_ptr)
      << "running stats are updated in place";
}

// ---- config round trips: nn::build(config()) rebuilds the same type and options

TEST(ConvNormModules, ConfigRoundTrip) {
  const std::vector<nn::Module> modules = {
      nn::Conv2d(4, 6, Size2d{3, 2}, Size2d{2, 1}, Size2d{1, 0}, Size2d{1, 2}, 2, false),
      nn::MaxPool2d(3, 2, 1, 1, true),
      nn::MaxPool2d(nn::MaxPool2dOptions{.kernel_size = {2, 3}}),
      nn::AvgPool2d(3, std::nullopt, 1, false, false),
      nn::BatchNorm1d(7, 1e-3, std::nullopt, false, true),
      nn::BatchNorm2d(3),
      nn::LayerNorm(Shape{3, 4}, 1e-6, true, false),
      nn::Embedding(10, 3, 0),
      nn::Sequential({nn::Conv2d(1, 4, 3, 1, 1), nn::BatchNorm2d(4), nn::ReLU(), nn::MaxPool2d(2)}),
  };
  for (const nn::Module& m : modules) ember::test_util::expect_config_round_trip(m);
}

// ---- errors name what was expected and what came

TEST(ConvErrors, MessagesNameExpectedAndGot) {
  nn::Conv2d conv(1, 32, 3);
  expect_error(
      [&] {
        conv(zeros({2, 3, 8, 8}));
      },
      {"conv2d: input has 3 channels, expected 1", "weight shape [32, 1, 3, 3]", "groups 1"});
  expect_error([&] { conv(zeros({8, 8})); }, {"conv2d", "[8, 8]", "expected 4-D"});
  expect_error(
      [] {
        conv2d(zeros({1, 1, 2, 2}), zeros({1, 1, 5, 5}), Tensor(), 1, 1);
      },
      {"kernel size (5, 5)", "padded input (4, 4)"});
  expect_error(
      [] {
        conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 2, 2}), Tensor(), 0);
      },
      {"stride (0, 0)"});
  expect_error(
      [] {
        conv2d(zeros({1, 1, 4, 4}), zeros({1, 1, 2, 2}), Tensor(), 1, 0, {1, 0});
      },
      {"dilation (1, 0)"});
  expect_error(
      [] {
        conv2d(zeros({1, 4, 4, 4}), zeros({3, 2, 2, 2}), Tensor(), 1, 0, 1, 2);
      },
      {"out_channels 3 is not divisible by groups 2"});
  expect_error(
      [] {
        conv2d(zeros({1, 4, 4, 4}), zeros({2, 4, 2, 2}), zeros({3}));
      },
      {"bias shape [3]", "[2]"});
  expect_error([] { nn::Conv2d(3, 4, 3, 1, 0, 1, 2); },
               {"in_channels 3 is not divisible by groups 2"});
}

TEST(PoolErrors, MessagesNameExpectedAndGot) {
  expect_error(
      [] {
        max_pool2d(zeros({1, 1, 4, 4}), 2, std::nullopt, 2);
      },
      {"max_pool2d", "padding (2, 2)"});
  expect_error(
      [] {
        avg_pool2d(zeros({1, 1, 1, 1}), 3);
      },
      {"avg_pool2d", "output size (0, 0)", "too small"});
  expect_error([] { max_pool2d(zeros({1, 4}), 2); }, {"max_pool2d", "[1, 4]"});
  expect_error([] { max_pool2d(zeros({1, 1, 4, 4}), 0); }, {"kernel size (0, 0)"});
}

TEST(NormErrors, MessagesNameExpectedAndGot) {
  nn::BatchNorm2d bn(3);
  expect_error([&] { bn(zeros({2, 3, 4})); }, {"BatchNorm2d", "expected 4D input", "3D"});
  expect_error([&] { bn(zeros({2, 4, 2, 2})); }, {"input has 4 channels, expected 3"});
  nn::BatchNorm1d bn1(3);
  expect_error([&] { bn1(zeros({2, 3, 4, 5})); }, {"BatchNorm1d", "expected 2D or 3D input"});
  nn::LayerNorm ln(4);
  expect_error([&] { ln(zeros({2, 5})); }, {"layer_norm", "[2, 5]", "[4]"});
}

TEST(ConvErrors, UnknownModuleTypeInSpec) {
  expect_error(
      [] {
        nn::build(nn::json{{"type", "Conv4d"}, {"options", nn::json::object()}});
      },
      {"unknown module type 'Conv4d'", "Conv2d"});
  expect_error(
      [] {
        nn::build(nn::json{
            {"type", "Conv2d"},
            {"options", {{"in_channels", 1}, {"out_channels", 2}, {"kernel_size", {1, 2, 3}}}}});
      },
      {"kernel_size", "[height, width]"});
}

}  // namespace
