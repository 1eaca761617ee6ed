// tests/test_layers_activation_rnn.cpp — against PyTorch: the activations, Identity, Flatten,
// Unflatten, Bilinear, GroupNorm, InstanceNorm1d/2d, RMSNorm, RNN/LSTM/GRU (with
// initial states, bidirectional, stacked, projected and variable lengths), the cells,
// TransformerDecoderLayer, TransformerDecoder and Transformer.
//
// Tier 1: every case of tests/data/layer_fixtures_more.json (the "more" section of
// tests/gen_layer_fixtures.py) builds the module from its config with nn::build, loads
// PyTorch's state_dict strictly (same names, same order), calls it as the case says, and
// compares every output, the gradients of Σ sum(out·w) for every float input and parameter,
// and the buffers after each step. Tier 2: f64 finite differences of an LSTM with lengths,
// a GRU, GroupNorm, InstanceNorm, RMSNorm and Bilinear. Tier 3: the same cases on a CUDA
// device against the CPU run (skipped without a GPU). Then: an LSTM learns the running sum
// of a sequence with Adam and matches torch's 20-step loss trajectory.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "ember/nn/activation.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/optim.hpp"
#include "fixtures.hpp"
#include "layer_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using nlohmann::ordered_json;
using Results = std::map<std::string, Tensor>;  // "step.key" -> tensor (on the CPU)
using ember::test_util::data;

const ordered_json& more_file() {
  static const ordered_json doc = test_util::read_layer_fixtures(
      "layer_fixtures_more.json", "/usr/bin/python3 tests/gen_layer_fixtures.py --only-more");
  return doc;
}

std::vector<std::string> more_case_names() { return test_util::fixture_case_names(more_file()); }

Tensor get(const std::map<std::string, Tensor>& in, const std::string& key) {
  auto it = in.find(key);
  return it == in.end() ? Tensor() : it->second;
}

// Calls the module as the case's "call" says; returns the named outputs.
std::map<std::string, Tensor> call(const std::string& kind, const nn::Module& m,
                                   const std::map<std::string, Tensor>& in) {
  if (kind == "single") return {{"output", m(get(in, "input"))}};
  if (kind == "bilinear") {
    auto b = std::dynamic_pointer_cast<nn::BilinearImpl>(m.ptr());
    return {{"output", b->forward(get(in, "input1"), get(in, "input2"))}};
  }
  if (kind == "rnn") {
    auto r = std::dynamic_pointer_cast<nn::RNNBaseImpl>(m.ptr());
    nn::RNNOutput o =
        r->forward(get(in, "input"), {get(in, "h0"), get(in, "c0")}, get(in, "lengths"));
    std::map<std::string, Tensor> out = {{"output", o.output}, {"h_n", o.h_n}};
    if (o.c_n.defined()) out["c_n"] = o.c_n;
    return out;
  }
  if (kind == "cell") {
    auto c = std::dynamic_pointer_cast<nn::RNNCellBaseImpl>(m.ptr());
    nn::RNNState s = c->step(get(in, "input"), {get(in, "h"), get(in, "c")});
    std::map<std::string, Tensor> out = {{"h", s.h}};
    if (s.c.defined()) out["c"] = s.c;
    return out;
  }
  if (kind == "decoder") {
    nn::DecoderMasks masks;
    masks.tgt_mask = get(in, "tgt_mask");
    masks.memory_key_padding_mask = get(in, "memory_key_padding_mask");
    if (auto layer = std::dynamic_pointer_cast<nn::TransformerDecoderLayerImpl>(m.ptr()))
      return {{"output", layer->forward(get(in, "tgt"), get(in, "memory"), masks)}};
    auto dec = std::dynamic_pointer_cast<nn::TransformerDecoderImpl>(m.ptr());
    return {{"output", dec->forward(get(in, "tgt"), get(in, "memory"), masks)}};
  }
  if (kind == "transformer") {
    auto t = std::dynamic_pointer_cast<nn::TransformerImpl>(m.ptr());
    nn::TransformerMasks masks;
    masks.tgt_mask = get(in, "tgt_mask");
    return {{"output", t->forward(get(in, "src"), get(in, "tgt"), masks)}};
  }
  throw std::runtime_error("unknown call kind " + kind);
}

// Builds case `name` on `device`, runs every step and returns what it produced. On the CPU
// (`check` true) every result is also compared with PyTorch's.
Results run_case(const std::string& name, Device device, bool check) {
  const ordered_json& c = more_file().at("cases").at(name);
  const double rtol = c.at("attrs").at("rtol").get<double>(),
               atol = c.at("attrs").at("atol").get<double>();
  const std::string kind = c.at("call").get<std::string>();
  nn::Module m = nn::build(nlohmann::json::parse(c.at("module").dump()));
  nn::StateDict sd;
  for (const auto& [key, value] : c.at("state_dict").items())
    sd.emplace_back(key, ember_test::tensor_from_json(value));
  if (check) {
    std::vector<std::string> want_names, got_names;
    for (auto& [n, t] : sd) want_names.push_back(n);
    for (auto& [n, t] : m->state_dict()) got_names.push_back(n);
    EXPECT_EQ(got_names, want_names) << name << ": state_dict names or order differ from PyTorch's";
    const std::string repr = c.at("repr").get<std::string>();
    if (repr.back() != '(') {  // containers print their children on further lines
      EXPECT_EQ(m->type_name() + "(" + m->extra_repr() + ")", repr) << name;
    }
  }
  m->load_state_dict(sd, /*strict=*/true);
  m->to(device);
  Results results;
  int step = 0;
  for (const ordered_json& s : c.at("steps")) {
    const std::string where = name + " step " + std::to_string(step);
    const std::string prefix = std::to_string(step++) + ".";
    const ordered_json& t = s.at("tensors");
    m->train(s.at("train").get<bool>());
    m->zero_grad();
    std::map<std::string, Tensor> in;
    for (const auto& [key, value] : t.items()) {
      if (key.rfind("input.", 0) != 0) continue;
      Tensor x = ember_test::tensor_from_json(value);
      const std::string k = key.substr(6);
      if (k != "lengths") x = x.to(device);  // lengths stay on the CPU, as in PyTorch
      if (is_floating(x.dtype())) x.requires_grad_();
      in[k] = x;
    }
    const std::map<std::string, Tensor> out = call(kind, m, in);
    Tensor loss;
    for (const auto& [k, o] : out) {
      if (!t.contains("output." + k)) {
        ADD_FAILURE() << where << ": PyTorch has no output " << k;
        continue;
      }
      const Tensor w = ember_test::tensor_from_json(t.at("w." + k)).to(device);
      loss = loss.defined() ? add(loss, sum(mul(o, w))) : sum(mul(o, w));
      results[prefix + "output." + k] = o.detach().to(Device::cpu()).clone();
      if (check)
        ember_test::expect_close(o, ember_test::tensor_from_json(t.at("output." + k)), rtol, atol,
                                 where + " output " + k);
    }
    loss.backward();
    for (const auto& [k, x] : in) {
      if (!is_floating(x.dtype())) continue;
      results[prefix + "grad_input." + k] = x.grad().to(Device::cpu()).clone();
      if (check)
        ember_test::expect_close(x.grad(), ember_test::tensor_from_json(t.at("grad_input." + k)),
                                 rtol, atol, where + " grad of input " + k);
    }
    for (const auto& [n, p] : m->named_parameters()) {
      results[prefix + "grad." + n] = p.grad().to(Device::cpu()).clone();
      if (!check) continue;
      if (!t.contains("grad." + n)) {
        ADD_FAILURE() << where << ": PyTorch has no parameter " << n;
        continue;
      }
      ember_test::expect_close(p.grad(), ember_test::tensor_from_json(t.at("grad." + n)), rtol,
                               atol, where + " grad of " + n);
    }
    for (const auto& [n, b] : m->named_buffers()) {
      results[prefix + "state." + n] =
          b.to(Device::cpu()).clone();  // a copy: updated in place later
      if (!check) continue;
      if (!t.contains("state." + n)) {
        ADD_FAILURE() << where << ": PyTorch has no buffer " << n;
        continue;
      }
      ember_test::expect_close(b, ember_test::tensor_from_json(t.at("state." + n)), rtol, atol,
                               where + " buffer " + n);
    }
  }
  return results;
}

class LayerFixturesActivationRnn : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerFixturesActivationRnn, MatchesPyTorch) { run_case(GetParam(), Device::cpu(), true); }

TEST_P(LayerFixturesActivationRnn, CudaMatchesCpu) {
  if (!cuda_available())
    GTEST_SKIP() << "no CUDA device: the CUDA-vs-CPU tier of " << GetParam()
                 << " runs on a machine with a GPU";
  const Results cpu = run_case(GetParam(), Device::cpu(), false);
  const Results gpu = run_case(GetParam(), Device::cuda(0), false);
  ASSERT_EQ(cpu.size(), gpu.size()) << GetParam();
  for (const auto& [key, want] : cpu)
    ember_test::expect_close(gpu.at(key), want, 1e-4, 1e-5, GetParam() + " CUDA vs CPU " + key);
}

INSTANTIATE_TEST_SUITE_P(All, LayerFixturesActivationRnn, ::testing::ValuesIn(more_case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---- tier 2: f64 central differences through the composed modules

using ember::test_util::expect_gradcheck;

TEST(ActivationRnnGradcheck, RecurrentLayersInF64) {
  manual_seed(161);
  nn::LSTM lstm(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .bidirectional = true});
  lstm->to(DType::f64);
  const Tensor lengths = from_vector<int64_t>({3, 1}, {2});
  expect_gradcheck("LSTM bidirectional with lengths",
                   [&](const std::vector<Tensor>& x) {
                     nn::RNNOutput o = lstm->forward(x[0], {x[1], x[2]}, lengths);
                     return cat({o.output.flatten(), o.h_n.flatten(), o.c_n.flatten()}, 0);
                   },
                   {data({3, 2, 2}), data({2, 2, 3}), data({2, 2, 3})});
  nn::GRU gru(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .num_layers = 2});
  gru->to(DType::f64);
  expect_gradcheck("GRU two layers",
                   [&](const std::vector<Tensor>& x) { return gru->forward(x[0], {x[1]}).output; },
                   {data({3, 2, 2}), data({2, 2, 3})});
  nn::RNN rnn(nn::RNNOptions{.input_size = 2, .hidden_size = 3, .nonlinearity = "tanh"});
  rnn->to(DType::f64);
  expect_gradcheck("RNN tanh", [&](const std::vector<Tensor>& x) { return rnn(x[0]); },
                   {data({4, 1, 2})});
}

TEST(ActivationRnnGradcheck, NormsAndBilinearInF64) {
  manual_seed(162);
  nn::GroupNorm gn(2, 4);
  gn->to(DType::f64);
  expect_gradcheck("GroupNorm", [&](const std::vector<Tensor>& x) { return gn(x[0]); },
                   {data({2, 4, 3})});
  nn::InstanceNorm2d in(nn::InstanceNormOptions{.num_features = 2, .affine = true});
  in->to(DType::f64);
  expect_gradcheck("InstanceNorm2d", [&](const std::vector<Tensor>& x) { return in(x[0]); },
                   {data({2, 2, 2, 3})});
  nn::RMSNorm rms(4);
  rms->to(DType::f64);
  expect_gradcheck("RMSNorm", [&](const std::vector<Tensor>& x) { return rms(x[0]); },
                   {data({3, 4})});
  nn::Bilinear bil(2, 3, 2);
  bil->to(DType::f64);
  expect_gradcheck("Bilinear", [&](const std::vector<Tensor>& x) { return bil(x[0], x[1]); },
                   {data({3, 2}), data({3, 3})});
}

// ---- end to end: an LSTM learns the running sum with Adam, as torch does

TEST(LSTMTraining, MatchesTorchLossTrajectoryWithAdam) {
  const ordered_json& t = more_file().at("trajectory");
  nn::LSTM lstm(1, 8);
  nn::Linear head(8, 1);
  nn::StateDict lstm_sd, head_sd;
  for (const auto& [key, value] : t.at("state_dict").items()) {
    const Tensor v = ember_test::tensor_from_json(value);
    if (key.rfind("lstm.", 0) == 0) lstm_sd.emplace_back(key.substr(5), v);
    if (key.rfind("head.", 0) == 0) head_sd.emplace_back(key.substr(5), v);
  }
  lstm->load_state_dict(lstm_sd, true);
  head->load_state_dict(head_sd, true);
  const Tensor x = ember_test::tensor_from_json(t.at("input"));
  const Tensor y = ember_test::tensor_from_json(t.at("target"));
  std::vector<Tensor> params = lstm->parameters();
  for (const Tensor& p : head->parameters()) params.push_back(p);
  optim::Adam opt(params, {.lr = t.at("lr").get<double>()});
  const std::vector<double> want = t.at("losses").get<std::vector<double>>();
  const double rtol = t.at("rtol").get<double>();
  for (size_t step = 0; step < want.size(); ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss(head(lstm(x)), y);
    loss.backward();
    opt.step();
    const double got = loss.item<float>();
    EXPECT_NEAR(got, want[step], rtol * std::abs(want[step])) << "LSTM Adam step " << step;
  }
  EXPECT_LT(want.back(), 0.5 * want.front()) << "the reference run should learn";
}

}  // namespace

namespace {

// The reductions and in-place updates InstanceNorm's running statistics use, each on the GPU
// against the CPU (a failure here points at the op, not at the module).
TEST(ActivationRnnCuda, InstanceNormStatisticOps) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device: CUDA op checks skipped";
  manual_seed(175);
  const Tensor x = randn({2, 3, 6});
  const Tensor g = x.to(Device::cuda(0));
  auto both = [&](const std::string& what, const std::function<Tensor(const Tensor&)>& f) {
    ember_test::expect_close(f(g).to(Device::cpu()), f(x), 1e-5, 1e-6, what);
  };
  both("mean over dim 2", [](const Tensor& t) { return mean(t, {2}); });
  both("mean over dims 2 then 0", [](const Tensor& t) { return mean(mean(t, {2}), {0}); });
  both("var over dim 2", [](const Tensor& t) { return var(t, {2}, 1); });
  both("mean of var", [](const Tensor& t) { return mean(var(t, {2}, 1), {0}); });
  both("mul_ then add_ with alpha", [](const Tensor& t) {
    Tensor r = ones({3}, {.device = t.device()});
    NoGradGuard ng;
    r.mul_(0.9).add_(mean(mean(t, {2}), {0}), 0.1);
    return r;
  });
  for (int variant = 0; variant < 8; ++variant) {
    const bool affine = variant & 1, grad = variant & 2, loaded = variant & 4;
    both("buffer update, affine " + std::to_string(affine) + ", input requires grad " +
             std::to_string(grad) + ", loaded state " + std::to_string(loaded),
         [&](const Tensor& t) {
           nn::InstanceNorm1d in(3, 1e-5, 0.1, affine, true);
           if (loaded) in->load_state_dict(in->state_dict(), true);
           in->to(t.device());
           Tensor v = t.detach().clone();
           if (grad) v.requires_grad_();
           Tensor y = in(v);
           if (grad) y.sum().backward();
           return in->buffer("running_mean");
         });
  }
}

}  // namespace
