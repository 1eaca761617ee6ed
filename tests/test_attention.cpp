// tests/test_attention.cpp — MultiheadAttention, TransformerEncoderLayer/Encoder, ModuleList and
// the loss modules.
//
// Tier 1: every case of tests/data/attention_fixtures.json (tests/gen_attention_fixtures.py)
// loads PyTorch's state dict with strict=true (which proves the parameter names), runs the
// forward, back-propagates sum(out * w) and compares the output, the attention weights, the
// input gradients and every parameter gradient. Tier 2: f64 finite differences on a tiny
// MultiheadAttention, for its inputs and its parameters. Then masks, modes, errors, config
// round trips and the printed tree.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ember/nn/attention.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/loss.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/transformer.hpp"
#include "fixtures.hpp"

namespace {

using ember::DType;
using ember::Shape;
using ember::Tensor;
using ember_test::check_close;
using ember_test::expect_close;
namespace nn = ember::nn;
using nlohmann::ordered_json;

// ---- attention_fixtures.json ----

const ordered_json& attention_file() {
  static const ordered_json doc = [] {
    const std::string path = ember_test::data_dir() + "/attention_fixtures.json";
    std::ifstream in(path);
    if (!in)
      throw std::runtime_error("cannot open " + path + " (run tests/gen_attention_fixtures.py)");
    return ordered_json::parse(in);
  }();
  return doc;
}

struct ModuleCase {
  std::string name;
  ordered_json attrs;
  nn::StateDict state;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, Tensor> grads;

  bool has(const std::string& k) const { return tensors.count(k) != 0; }
  Tensor get(const std::string& k) const { return has(k) ? tensors.at(k) : Tensor(); }
  double rtol() const { return attrs.at("rtol").get<double>(); }
  double atol() const { return attrs.at("atol").get<double>(); }
};

ModuleCase load_attention_case(const std::string& name) {
  const ordered_json& c = attention_file().at("cases").at(name);
  ModuleCase m;
  m.name = name;
  m.attrs = c.at("attrs");
  for (const auto& [k, v] : c.at("state_dict").items())
    m.state.emplace_back(k, ember_test::tensor_from_json(v));
  for (const auto& [k, v] : c.at("tensors").items())
    m.tensors.emplace(k, ember_test::tensor_from_json(v));
  for (const auto& [k, v] : c.at("grads").items())
    m.grads.emplace(k, ember_test::tensor_from_json(v));
  return m;
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : attention_file().at("cases").items()) names.push_back(k);
  return names;
}

nn::TransformerEncoderLayerOptions layer_options(const ordered_json& a) {
  nn::TransformerEncoderLayerOptions o;
  o.d_model = a.at("d_model").get<int64_t>();
  o.nhead = a.at("nhead").get<int64_t>();
  o.dim_feedforward = a.at("dim_feedforward").get<int64_t>();
  o.dropout = 0.0;
  o.activation = a.at("activation").get<std::string>();
  o.layer_norm_eps = a.at("layer_norm_eps").get<double>();
  o.batch_first = a.at("batch_first").get<bool>();
  o.norm_first = a.at("norm_first").get<bool>();
  return o;
}

// Builds the case's module, loads its state dict strictly and runs the forward on the case's
// inputs (made requires_grad). Returns {out, weights}.
nn::AttentionOutput run_case(const ModuleCase& c, nn::Module& module,
                             std::map<std::string, Tensor>& inputs) {
  const std::string kind = c.attrs.at("kind").get<std::string>();
  for (const char* k : {"query", "key", "value", "src"})
    if (c.has(k)) inputs[k] = c.get(k).clone().requires_grad_();
  if (kind == "mha") {
    nn::MultiheadAttentionOptions o;
    o.embed_dim = c.attrs.at("embed_dim").get<int64_t>();
    o.num_heads = c.attrs.at("num_heads").get<int64_t>();
    o.bias = c.attrs.at("bias").get<bool>();
    o.batch_first = c.attrs.at("batch_first").get<bool>();
    nn::MultiheadAttention mha(o);
    module = mha;
    module->load_state_dict(c.state, true);
    nn::AttentionOptions a;
    a.key_padding_mask = c.get("key_padding_mask");
    a.attn_mask = c.get("attn_mask");
    a.average_attn_weights = c.attrs.at("average_attn_weights").get<bool>();
    const Tensor q = inputs.at("query");
    if (c.attrs.at("self_attn").get<bool>()) return mha(q, q, q, a);
    return mha(q, inputs.at("key"), inputs.at("value"), a);
  }
  nn::EncoderMasks masks;
  masks.src_mask = c.get("src_mask");
  masks.src_key_padding_mask = c.get("src_key_padding_mask");
  nn::AttentionOutput r;
  if (kind == "encoder_layer") {
    nn::TransformerEncoderLayer layer(layer_options(c.attrs));
    module = layer;
    module->load_state_dict(c.state, true);
    r.output = layer(inputs.at("src"), masks);
  } else {
    nn::TransformerEncoder enc(
        nn::TransformerEncoderOptions{.layer = layer_options(c.attrs),
                                      .num_layers = c.attrs.at("num_layers").get<int64_t>(),
                                      .final_norm = c.attrs.at("final_norm").get<bool>()});
    module = enc;
    module->load_state_dict(c.state, true);
    r.output = enc(inputs.at("src"), masks);
  }
  return r;
}

class AttentionFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(AttentionFixture, MatchesPyTorch) {
  const ModuleCase c = load_attention_case(GetParam());
  nn::Module module;
  std::map<std::string, Tensor> inputs;
  nn::AttentionOutput r;
  ASSERT_NO_THROW(r = run_case(c, module, inputs)) << c.name;
  expect_close(r.output, c.get("out"), c.rtol(), c.atol(), c.name + " output");
  if (c.has("weights"))
    expect_close(r.weights, c.get("weights"), c.rtol(), c.atol(), c.name + " weights");
  ember::sum(r.output * c.get("w")).backward();
  for (auto& [k, x] : inputs)
    expect_close(x.grad(), c.get("grad_" + k), c.rtol(), c.atol(), c.name + " grad_" + k);
  std::set<std::string> seen;
  for (auto& [name, p] : module->named_parameters()) {
    seen.insert(name);
    ASSERT_TRUE(c.grads.count(name)) << c.name << ": PyTorch has no parameter " << name;
    expect_close(p.grad(), c.grads.at(name), c.rtol(), c.atol(), c.name + " grad of " + name);
  }
  EXPECT_EQ(seen.size(), c.grads.size()) << c.name << ": parameter lists differ";
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionFixture, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---- MultiheadAttention: names, init, masks, modes, gradcheck, errors ----

TEST(MultiheadAttention, ParametersHavePyTorchNamesAndInit) {
  nn::MultiheadAttention mha(16, 4);
  std::vector<std::string> names;
  for (auto& [n, p] : mha->state_dict()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                             "out_proj.bias"}));
  EXPECT_EQ(mha->in_proj_weight().shape(), Shape({48, 16}));
  EXPECT_EQ(ember::abs(mha->in_proj_bias()).max().item<float>(), 0.0f);
  EXPECT_EQ(ember::abs(mha->out_proj()->bias()).max().item<float>(), 0.0f);
  const double xavier = std::sqrt(6.0 / (48 + 16));
  EXPECT_LE(ember::abs(mha->in_proj_weight()).max().item<float>(), xavier);
  EXPECT_GT(ember::abs(mha->in_proj_weight()).max().item<float>(), 0.5 * xavier);
  EXPECT_LE(ember::abs(mha->out_proj()->weight()).max().item<float>(), 1.0 / std::sqrt(16.0));
  EXPECT_EQ(mha->parameter_count(), 48 * 16 + 48 + 16 * 16 + 16);

  nn::MultiheadAttention nobias(
      nn::MultiheadAttentionOptions{.embed_dim = 8, .num_heads = 2, .bias = false});
  EXPECT_EQ(nobias->state_dict().size(), 2u);
  EXPECT_FALSE(nobias->in_proj_bias().defined());
}

TEST(MultiheadAttention, CausalMaskHelperAndIsCausal) {
  EXPECT_EQ(nn::causal_mask(3).to(DType::f32).to_vector<float>(),
            (std::vector<float>{0, 1, 1, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(nn::causal_mask(2, 3).to(DType::f32).to_vector<float>(),
            (std::vector<float>{0, 1, 1, 0, 0, 1}));
  ember::manual_seed(3);
  nn::MultiheadAttention mha(8, 2);
  Tensor x = ember::randn({5, 2, 8});
  auto explicit_mask = mha(x, x, x, {.attn_mask = nn::causal_mask(5)});
  auto hinted = mha(x, x, x, {.is_causal = true});
  expect_close(hinted.output, explicit_mask.output, 0, 0, "is_causal output");
  expect_close(hinted.weights, explicit_mask.weights, 0, 0, "is_causal weights");
  // Row i attends to keys 0..i only, and the weights of each row sum to 1.
  std::vector<float> w = hinted.weights.to_vector<float>();  // [N, L, S]
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 5; ++i) {
      double row = 0;
      for (int j = 0; j < 5; ++j) {
        const float v = w[(n * 5 + i) * 5 + j];
        if (j > i) {
          EXPECT_EQ(v, 0.0f) << "n " << n << " i " << i << " j " << j;
        }
        row += v;
      }
      EXPECT_NEAR(row, 1.0, 1e-5);
    }
}

TEST(MultiheadAttention, FullyMaskedRowIsNaNAsPyTorch) {
  nn::MultiheadAttention mha(4, 2);
  Tensor x = ember::randn({3, 1, 4});
  Tensor pad = ember::ones({1, 3}).to(DType::boolean);  // every key is padding
  auto r = mha(x, x, x, {.key_padding_mask = pad});
  for (float v : r.output.to_vector<float>()) EXPECT_TRUE(std::isnan(v));
}

TEST(MultiheadAttention, WeightsOptionsAndShapes) {
  nn::MultiheadAttention mha(
      nn::MultiheadAttentionOptions{.embed_dim = 8, .num_heads = 4, .batch_first = true});
  Tensor q = ember::randn({2, 3, 8}), kv = ember::randn({2, 5, 8});
  auto avg = mha(q, kv, kv);
  EXPECT_EQ(avg.output.shape(), Shape({2, 3, 8}));
  EXPECT_EQ(avg.weights.shape(), Shape({2, 3, 5}));
  auto per_head = mha(q, kv, kv, {.average_attn_weights = false});
  EXPECT_EQ(per_head.weights.shape(), Shape({2, 4, 3, 5}));
  expect_close(ember::mean(per_head.weights, {1}), avg.weights, 1e-6, 1e-7,
               "mean of per-head weights");
  auto none = mha(q, kv, kv, {.need_weights = false});
  EXPECT_FALSE(none.weights.defined());
  expect_close(none.output, avg.output, 0, 0, "need_weights=false output");
  // forward(x) is self-attention: the same as passing x three times.
  expect_close(mha(q), mha(q, q, q).output, 0, 0, "forward(x)");
  // Unbatched input [L, E].
  auto single = mha(q.select(0, 1), kv.select(0, 1), kv.select(0, 1));
  EXPECT_EQ(single.output.shape(), Shape({3, 8}));
  expect_close(single.output, avg.output.select(0, 1), 1e-5, 1e-6, "unbatched output");
}

TEST(MultiheadAttention, DropoutOnlyInTraining) {
  ember::manual_seed(7);
  nn::MultiheadAttention mha(
      nn::MultiheadAttentionOptions{.embed_dim = 8, .num_heads = 2, .dropout = 0.5});
  Tensor x = ember::randn({6, 2, 8});
  mha->eval();
  auto a = mha(x, x, x), b = mha(x, x, x);
  expect_close(a.output, b.output, 0, 0, "eval is deterministic");
  mha->train();
  auto t = mha(x, x, x, {.average_attn_weights = false});
  int zeros = 0;
  for (float v : t.weights.to_vector<float>()) zeros += v == 0.0f;
  EXPECT_GT(zeros, 0) << "dropout in training zeroes some attention weights";
  EXPECT_FALSE(check_close(t.output, a.output, 1e-3, 1e-4, "train vs eval"))
      << "dropout changed nothing";
}

TEST(MultiheadAttention, HeadsAreIndependent) {
  // Heads batched in one matmul must equal one attention per head: zero every head's query
  // rows but head 0 and the output must equal the single-head computation on that slice.
  ember::manual_seed(11);
  nn::MultiheadAttention mha(
      nn::MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2, .bias = false});
  Tensor x = ember::randn({3, 1, 4});
  auto r = mha(x, x, x, {.average_attn_weights = false});
  Tensor w = mha->in_proj_weight().detach();
  for (int head = 0; head < 2; ++head) {
    Tensor wq = w.slice(0, 2 * head, 2 * head + 2), wk = w.slice(0, 4 + 2 * head, 4 + 2 * head + 2);
    Tensor q = ember::linear(x.select(1, 0), wq), k = ember::linear(x.select(1, 0), wk);
    Tensor ref = ember::softmax(ember::matmul(q, k.t()) / std::sqrt(2.0), -1);
    expect_close(r.weights.select(0, 0).select(0, head), ref, 1e-5, 1e-6,
                 "head " + std::to_string(head));
  }
}

// Central differences on every parameter element of `module` for loss = sum(fn() * w).
void check_parameter_grads(nn::ModuleImpl& module, const std::function<Tensor()>& fn,
                           double eps = 1e-6) {
  Tensor out = fn();
  Tensor w = ember::randn(out.shape(), {.dtype = DType::f64});
  module.zero_grad();
  ember::sum(out * w).backward();
  for (auto& [name, p] : module.named_parameters()) {
    Tensor analytic = p.grad();
    ASSERT_TRUE(analytic.defined()) << name;
    std::vector<double> numeric(static_cast<size_t>(p.numel()));
    double* data = p.data<double>();
    for (int64_t i = 0; i < p.numel(); ++i) {
      ember::NoGradGuard g;
      const double saved = data[i];
      data[i] = saved + eps;
      const double up = ember::sum(fn() * w).item<double>();
      data[i] = saved - eps;
      const double down = ember::sum(fn() * w).item<double>();
      data[i] = saved;
      numeric[static_cast<size_t>(i)] = (up - down) / (2 * eps);
    }
    expect_close(analytic, ember::from_vector<double>(numeric, p.shape()), 1e-5, 1e-7,
                 "d/d " + name);
  }
}

TEST(MultiheadAttention, GradcheckF64) {
  ember::manual_seed(5);
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions{.embed_dim = 4, .num_heads = 2});
  mha->to(DType::f64);
  {
    ember::NoGradGuard g;  // non-zero biases so their gradients are exercised
    mha->in_proj_bias().copy_(ember::randn({12}, {.dtype = DType::f64}) * 0.3);
  }
  Tensor q = ember::randn({3, 2, 4}, {.dtype = DType::f64}),
         kv = ember::randn({4, 2, 4}, {.dtype = DType::f64});
  Tensor pad = ember::from_vector<float>({0, 0, 0, 1, 0, 0, 1, 1}, {2, 4}).to(DType::boolean);
  Tensor additive = ember::randn({3, 4}, {.dtype = DType::f64}) * 0.5;
  auto fn = [&](const std::vector<Tensor>& in) {
    return mha(in[0], in[1], in[2], {.key_padding_mask = pad, .attn_mask = additive}).output;
  };
  auto r = ember::gradcheck(fn, {q, kv, kv.clone()});
  EXPECT_TRUE(r.ok) << r.message;
  auto self = [&](const std::vector<Tensor>& in) {
    return mha(in[0], in[0], in[0], {.is_causal = true}).output;
  };
  auto rs = ember::gradcheck(self, {q});
  EXPECT_TRUE(rs.ok) << rs.message;
  check_parameter_grads(*mha, [&] { return mha(q, kv, kv, {.key_padding_mask = pad}).output; });
}

TEST(MultiheadAttention, ClearErrors) {
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const ember::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { nn::MultiheadAttention(10, 3); }).find("not divisible by num_heads"),
            std::string::npos);
  EXPECT_NE(message([] {
              nn::MultiheadAttention(
                  nn::MultiheadAttentionOptions{.embed_dim = 8, .num_heads = 2, .kdim = 4});
            }).find("kdim 4"),
            std::string::npos);
  nn::MultiheadAttention mha(8, 2);
  Tensor x = ember::randn({4, 2, 8});
  EXPECT_NE(message([&] {
              mha(x, x, x, {.attn_mask = nn::causal_mask(3)});
            }).find("attn_mask shape [3, 3]"),
            std::string::npos);
  EXPECT_NE(message([&] {
              mha(x, x, x, {.key_padding_mask = ember::zeros({4, 2}).to(DType::boolean)});
            }).find("key_padding_mask shape [4, 2] (expected [N, S] = [2, 4])"),
            std::string::npos);
  EXPECT_NE(message([&] {
              mha(ember::randn({4, 2, 6}));
            }).find("expected embed_dim 8"),
            std::string::npos);
  EXPECT_NE(message([&] {
              mha(x, x, x, {.attn_mask = ember::zeros({4, 4}, {.dtype = DType::i64})});
            }).find("dtype i64"),
            std::string::npos);
}

// ---- Transformer ----

TEST(TransformerEncoder, PyTorchChildNamesAndClones) {
  nn::TransformerEncoder enc(
      nn::TransformerEncoderOptions{.layer = {.d_model = 8, .nhead = 2, .dim_feedforward = 16},
                                    .num_layers = 2,
                                    .final_norm = true});
  std::vector<std::string> names;
  for (auto& [n, p] : enc->state_dict()) names.push_back(n);
  const std::vector<std::string> layer = {"self_attn.in_proj_weight",
                                          "self_attn.in_proj_bias",
                                          "self_attn.out_proj.weight",
                                          "self_attn.out_proj.bias",
                                          "linear1.weight",
                                          "linear1.bias",
                                          "linear2.weight",
                                          "linear2.bias",
                                          "norm1.weight",
                                          "norm1.bias",
                                          "norm2.weight",
                                          "norm2.bias"};
  std::vector<std::string> want;
  for (int i = 0; i < 2; ++i)
    for (auto& n : layer) want.push_back("layers." + std::to_string(i) + "." + n);
  want.push_back("norm.weight");
  want.push_back("norm.bias");
  EXPECT_EQ(names, want);
  std::vector<std::string> children;
  for (auto& [n, c] : enc->layer(0)->named_children()) children.push_back(n);
  EXPECT_EQ(children, (std::vector<std::string>{"self_attn", "linear1", "dropout", "linear2",
                                                "norm1", "norm2", "dropout1", "dropout2"}));
  // As PyTorch's _get_clones: the layers start equal but do not share storage.
  expect_close(enc->layer(1)->self_attn()->in_proj_weight(),
               enc->layer(0)->self_attn()->in_proj_weight(), 0, 0, "cloned layer");
  EXPECT_NE(enc->layer(1)->self_attn()->in_proj_weight().data_ptr(),
            enc->layer(0)->self_attn()->in_proj_weight().data_ptr());
}

TEST(TransformerEncoder, FromLayerCopiesItsWeightsDtypeAndNorm) {
  nn::TransformerEncoderLayer layer(
      nn::TransformerEncoderLayerOptions{.d_model = 4, .nhead = 2, .dim_feedforward = 8});
  layer->to(DType::f64);
  {
    ember::NoGradGuard g;
    layer->self_attn()->in_proj_weight().fill_(0.25);
  }
  nn::TransformerEncoder enc(layer, 3, nn::LayerNorm(4));
  EXPECT_EQ(enc->num_layers(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(enc->layer(i)->self_attn()->in_proj_weight().dtype(), DType::f64);
    EXPECT_EQ(enc->layer(i)->self_attn()->in_proj_weight().max().item<double>(), 0.25);
  }
  EXPECT_EQ(enc->config()["children"]["norm"]["type"], "LayerNorm");
  enc->to(DType::f64);
  EXPECT_EQ(enc(ember::randn({3, 2, 4}, {.dtype = DType::f64})).shape(), Shape({3, 2, 4}));
  EXPECT_THROW(nn::TransformerEncoder(layer, 0), ember::Error);
}

TEST(TransformerEncoder, IsCausalMatchesExplicitMaskAndEvalDisablesDropout) {
  ember::manual_seed(21);
  nn::TransformerEncoderLayer layer(nn::TransformerEncoderLayerOptions{
      .d_model = 8, .nhead = 2, .dim_feedforward = 16, .dropout = 0.3});
  layer->eval();
  Tensor x = ember::randn({5, 2, 8});
  expect_close(layer(x, {.is_causal = true}), layer(x, {.src_mask = nn::causal_mask(5)}), 0, 0,
               "is_causal");
  expect_close(layer(x), layer(x), 0, 0, "eval is deterministic");
  layer->train();
  EXPECT_FALSE(check_close(layer(x), layer(x), 1e-4, 1e-5, "train"))
      << "dropout had no effect in training";
}

TEST(TransformerEncoder, ErrorsAreClear) {
  EXPECT_THROW(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions{
                   .d_model = 8, .nhead = 2, .activation = "tanh"}),
               ember::Error);
  nn::TransformerEncoderLayer layer(8, 2);
  try {
    layer(ember::randn({3, 2, 6}));
    ADD_FAILURE() << "expected an error";
  } catch (const ember::Error& e) {
    EXPECT_NE(std::string(e.what()).find("src shape [3, 2, 6]"), std::string::npos) << e.what();
  }
}

// ---- ModuleList ----

TEST(ModuleList, NamesIndexingAndNoForward) {
  nn::ModuleList list({nn::Linear(4, 3), nn::ReLU(), nn::Linear(3, 2)});
  EXPECT_EQ(list->size(), 3u);
  std::vector<std::string> names;
  for (auto& [n, p] : list->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  Tensor x = ember::randn({5, 4});
  EXPECT_EQ(list[2](list[1](list[0](x))).shape(), Shape({5, 2}));
  EXPECT_EQ(list->at<nn::LinearImpl>(0)->weight().shape(), Shape({3, 4}));
  EXPECT_THROW(list->at<nn::LinearImpl>(1), ember::Error);
  EXPECT_THROW(list[3], ember::Error);
  try {
    list(x);
    ADD_FAILURE() << "expected an error";
  } catch (const ember::Error& e) {
    EXPECT_NE(std::string(e.what()).find("ModuleList: has no forward"), std::string::npos)
        << e.what();
  }
}

// ---- config round trips and printing ----

void expect_round_trip(const nn::Module& m, const Tensor& x) {
  const nn::json config = m->config();
  nn::Module rebuilt = nn::build(config);
  EXPECT_EQ(rebuilt->config(), config);
  std::vector<std::string> a, b;
  for (auto& [n, t] : m->state_dict()) a.push_back(n);
  for (auto& [n, t] : rebuilt->state_dict()) b.push_back(n);
  EXPECT_EQ(a, b) << config.dump();
  if (!x.defined()) return;
  rebuilt->load_state_dict(m->state_dict(), true);
  m->eval();
  rebuilt->eval();
  expect_close(rebuilt(x), m(x), 0, 0, m->type_name() + " rebuilt output");
}

TEST(ModuleList, ConfigRoundTrip) {
  expect_round_trip(nn::ModuleList({nn::Linear(4, 3), nn::GELU("tanh")}), Tensor());
}

TEST(MultiheadAttention, ConfigRoundTrip) {
  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions{
      .embed_dim = 8, .num_heads = 2, .dropout = 0.25, .bias = false, .batch_first = true});
  EXPECT_EQ(mha->config()["options"]["batch_first"], true);
  expect_round_trip(mha, ember::randn({2, 3, 8}));
}

TEST(TransformerEncoder, ConfigRoundTrip) {
  nn::TransformerEncoderLayerOptions lo{.d_model = 8,
                                        .nhead = 2,
                                        .dim_feedforward = 12,
                                        .dropout = 0.2,
                                        .activation = "gelu",
                                        .layer_norm_eps = 1e-6,
                                        .batch_first = true,
                                        .norm_first = true};
  expect_round_trip(nn::TransformerEncoderLayer(lo), ember::randn({2, 3, 8}));
  expect_round_trip(nn::TransformerEncoder(nn::TransformerEncoderOptions{
                        .layer = lo, .num_layers = 2, .final_norm = true}),
                    ember::randn({2, 3, 8}));
  expect_round_trip(
      nn::TransformerEncoder(nn::TransformerEncoderOptions{.layer = lo, .num_layers = 3}),
      ember::randn({2, 3, 8}));
}

TEST(TransformerEncoder, PrintsTreeWithParameterCounts) {
  nn::TransformerEncoder enc(
      nn::TransformerEncoderOptions{.layer = {.d_model = 8, .nhead = 2, .dim_feedforward = 16},
                                    .num_layers = 2,
                                    .final_norm = true});
  std::ostringstream s;
  s << *enc;
  const std::string text = s.str();
  for (const char* piece :
       {"TransformerEncoder(", "(layers): ModuleList(", "(0): TransformerEncoderLayer(",
        "(self_attn): MultiheadAttention(embed_dim=8, num_heads=2",
        "(out_proj): Linear(in_features=8, out_features=8, bias=True)  # 72 params",
        "(linear1): Linear(in_features=8, out_features=16, bias=True)  # 144 params",
        "(norm1): LayerNorm(", "(dropout2): Dropout(p=0.1", "(norm): LayerNorm("})
    EXPECT_NE(text.find(piece), std::string::npos) << "missing '" << piece << "' in\n" << text;
  // 2 layers of (216 + 72 + 144 + 136 + 2·16) + 16 = 1,216 parameters.
  EXPECT_NE(text.find("# 1,216 params in total"), std::string::npos) << text;
  EXPECT_EQ(enc->parameter_count(), 1216);
}

// ---- loss modules ----

TEST(LossModules, ParseReduction) {
  EXPECT_EQ(nn::parse_reduction("mean"), ember::Reduction::mean);
  EXPECT_EQ(nn::parse_reduction("sum"), ember::Reduction::sum);
  EXPECT_EQ(nn::parse_reduction("none"), ember::Reduction::none);
  EXPECT_EQ(nn::reduction_name(ember::Reduction::sum), "sum");
  try {
    nn::parse_reduction("avg");
    ADD_FAILURE() << "expected an error";
  } catch (const ember::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "parse_reduction: reduction 'avg' (expected \"mean\", \"sum\", \"none\" or "
              "\"batchmean\")");
  }
  EXPECT_THROW(nn::MSELoss("max"), ember::Error);
}

TEST(LossModules, MatchFunctionalOps) {
  ember::manual_seed(2);
  Tensor x = ember::randn({4, 5}), y = ember::randn({4, 5});
  Tensor labels = ember::from_vector<int64_t>({1, 0, 4, 2}, {4});
  Tensor probs = ember::softmax(ember::randn({4, 5}), 1);
  Tensor bits = ember::gt(ember::randn({4, 5}), 0.0).to(DType::f32);
  Tensor pw = ember::rand({5}, {}, 0.5, 2.0);
  expect_close(nn::MSELoss()(x, y), ember::mse_loss(x, y), 0, 0, "MSELoss");
  expect_close(nn::MSELoss("sum")(x, y), ember::mse_loss(x, y, ember::Reduction::sum), 0, 0,
               "MSELoss sum");
  expect_close(nn::CrossEntropyLoss()(x, labels), ember::cross_entropy(x, labels), 0, 0,
               "CrossEntropyLoss");
  expect_close(nn::CrossEntropyLoss({.label_smoothing = 0.1})(x, probs),
               ember::cross_entropy(x, probs, {.label_smoothing = 0.1}), 0, 0,
               "CrossEntropyLoss probs");
  Tensor logp = ember::log_softmax(x, 1);
  expect_close(nn::NLLLoss(ember::Reduction::none, 2)(logp, labels),
               ember::nll_loss(logp, labels, ember::Reduction::none, 2), 0, 0, "NLLLoss");
  // cross_entropy = nll_loss(log_softmax)
  expect_close(nn::CrossEntropyLoss()(x, labels), nn::NLLLoss()(logp, labels), 1e-6, 1e-7,
               "CE vs NLL");
  expect_close(nn::BCEWithLogitsLoss(ember::Reduction::mean, pw)(x, bits),
               ember::bce_with_logits(x, bits, ember::Reduction::mean, pw), 0, 0,
               "BCEWithLogitsLoss");
  EXPECT_THROW(nn::CrossEntropyLoss({.label_smoothing = 1.5}), ember::Error);
}

// PyTorch values (tests/data/op_fixtures.json): ignore_index and label_smoothing, with gradients.
TEST(LossModules, CrossEntropyLossAgainstPyTorch) {
  for (const char* name :
       {"cross_entropy_ignore_index", "cross_entropy_label_smoothing",
        "cross_entropy_smoothing_ignore", "cross_entropy_smoothing_sum", "cross_entropy_none"}) {
    ember_test::Fixture f = ember_test::load_fixture(name);
    nn::CrossEntropyLoss criterion({.reduction = nn::parse_reduction(f.attr_string("reduction")),
                                    .ignore_index = f.attr_int("ignore_index"),
                                    .label_smoothing = f.attr_double("label_smoothing")});
    Tensor logits = f["logits"].clone().requires_grad_();
    Tensor loss = criterion(logits, f["target"]);
    expect_close(loss, f["out"], f.rtol(), f.atol(), std::string(name) + " loss");
    ember::sum(loss * f["w"]).backward();
    expect_close(logits.grad(), f["grad_logits"], f.rtol(), f.atol(), std::string(name) + " grad");
  }
}

TEST(LossModules, OtherLossesAgainstPyTorch) {
  {
    ember_test::Fixture f = ember_test::load_fixture("nll_loss_ignore_index");
    Tensor out = nn::NLLLoss(nn::parse_reduction(f.attr_string("reduction")),
                             f.attr_int("ignore_index"))(f["log_probs"], f["target"]);
    expect_close(out, f["out"], f.rtol(), f.atol(), "NLLLoss ignore_index");
  }
  {
    ember_test::Fixture f = ember_test::load_fixture("bce_with_logits_pos_weight");
    Tensor out =
        nn::BCEWithLogitsLoss(ember::Reduction::mean, f["pos_weight"])(f["logits"], f["target"]);
    expect_close(out, f["out"], f.rtol(), f.atol(), "BCEWithLogitsLoss pos_weight");
  }
  {
    ember_test::Fixture f = ember_test::load_fixture("mse_loss_sum");
    expect_close(nn::MSELoss("sum")(f["input"], f["target"]), f["out"], f.rtol(), f.atol(),
                 "MSELoss sum");
  }
}

}  // namespace
