// tests/test_parametrize.cpp — parametrizations (nn/parametrize.hpp): weight_norm and
// spectral_norm against PyTorch (tests/gen_parametrize_fixtures.py: names, outputs, gradients,
// the power iteration's buffers), custom and chained parametrizations, removal, config
// round trips, and the refusals.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/containers.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/parametrize.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"

using namespace ember;
using ember::test_util::error_of;
using ember_test::expect_close;
namespace pz = ember::nn::utils::parametrize;
namespace pzs = ember::nn::utils::parametrizations;

namespace {

using OJson = nlohmann::ordered_json;

const OJson& fixture(const std::string& name) {
  static const OJson doc = [] {
    const std::string path = ember_test::data_dir() + "/parametrize_fixtures.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return OJson::parse(in);
  }();
  return doc.at("cases").at(name);
}

Tensor tensor_of(const OJson& j) { return ember_test::tensor_from_json(j); }

std::vector<std::string> names_of(const nn::StateDict& sd) {
  std::vector<std::string> out;
  for (auto& [n, t] : sd) out.push_back(n);
  return out;
}

// Registers on `m` (in f64), checks PyTorch's state-dict names, loads PyTorch's values, runs
// the case's forwards in training mode and one backward, and compares the output, every
// parameter's gradient, the state after (spectral_norm's _u/_v) and the eval output.
void check_case(const std::string& name, const nn::Module& m,
                const std::function<void(const nn::Module&)>& reg) {
  SCOPED_TRACE(name);
  const OJson& c = fixture(name);
  m->to(DType::f64);
  reg(m);
  nn::StateDict want;
  for (auto& [k, v] : c.at("state").items()) want.emplace_back(k, tensor_of(v));
  ASSERT_EQ(names_of(m->state_dict()), names_of(want));
  m->load_state_dict(want);
  m->train();
  const Tensor x = tensor_of(c.at("x"));
  Tensor out;
  for (int i = 0; i < c.at("train_steps").get<int>(); ++i) out = m(x);
  expect_close(out, tensor_of(c.at("out")), 1e-10, 1e-12, name + " output");
  (out * tensor_of(c.at("w"))).sum().backward();
  for (auto& [n, p] : m->named_parameters())
    expect_close(p.grad(), tensor_of(c.at("grads").at(n)), 1e-9, 1e-11, name + " grad of " + n);
  for (auto& [n, t] : m->state_dict())
    expect_close(t, tensor_of(c.at("after").at(n)), 1e-10, 1e-12, name + " after: " + n);
  if (c.contains("eval_out")) {
    m->eval();
    NoGradGuard no_grad;
    const Tensor u = m->state_dict().back().second.clone();
    expect_close(m(x), tensor_of(c.at("eval_out")), 1e-10, 1e-12, name + " eval output");
    // eval mode runs no power iteration: the last buffer (_v) is unchanged
    expect_close(m->state_dict().back().second, u, 0, 0, name + " buffers in eval mode");
  }
}

auto weight_norm_at(std::optional<int64_t> dim) {
  return [dim](const nn::Module& m) { pzs::weight_norm(m, "weight", dim); };
}
auto spectral_norm_with(int64_t iterations) {
  return [iterations](const nn::Module& m) { pzs::spectral_norm(m, "weight", iterations); };
}

}  // namespace

TEST(Parametrize, WeightNormMatchesPyTorch) {
  check_case("weight_norm_linear", nn::Linear(5, 3), weight_norm_at(0));
  check_case("weight_norm_linear_dim1", nn::Linear(5, 3), weight_norm_at(1));
  check_case("weight_norm_conv1d_all", nn::Conv1d(nn::Conv1dOptions{3, 4, 3}),
             weight_norm_at(std::nullopt));
  check_case("weight_norm_conv2d", nn::Conv2d(2, 3, 3, 1, 1), weight_norm_at(0));
}

TEST(Parametrize, SpectralNormMatchesPyTorch) {
  check_case("spectral_norm_linear", nn::Linear(6, 4), spectral_norm_with(1));
  check_case("spectral_norm_conv2d", nn::Conv2d(3, 5, 3), spectral_norm_with(3));
  // ConvTranspose's weight is [in, out, ...]: dim 1 by default, as PyTorch
  check_case("spectral_norm_conv_transpose2d",
             nn::ConvTranspose2d(nn::ConvTranspose2dOptions{4, 3, 2}), spectral_norm_with(1));
}

TEST(Parametrize, OrthogonalMatchesPyTorch) {
  auto orth = [](std::optional<std::string> map) {
    return [map](const nn::Module& m) { pzs::orthogonal(m, "weight", map); };
  };
  check_case("orthogonal_square", nn::Linear(4, 4), orth(std::nullopt));
  check_case("orthogonal_wide_householder", nn::Linear(5, 3), orth(std::nullopt));
  check_case("orthogonal_tall_householder", nn::Linear(3, 5), orth(std::nullopt));
  check_case("orthogonal_cayley", nn::Linear(3, 6), orth("cayley"));
  check_case("orthogonal_tall_matrix_exp", nn::Linear(3, 5), orth("matrix_exp"));
}

TEST(Parametrize, OrthogonalStartsOrthogonalAndStaysSoWhileTraining) {
  manual_seed(12);
  for (auto [out, in] : {std::pair<int64_t, int64_t>{4, 4}, {6, 3}, {3, 6}}) {
    nn::Linear fc(in, out);
    fc->to(DType::f64);
    pzs::orthogonal(fc);
    // the original starts at -I (PyTorch's trivialization)
    const Tensor original = fc->named_parameters()[1].second;
    ASSERT_EQ(fc->named_parameters()[1].first, "parametrizations.weight.original");
    const int64_t k = std::min(out, in);
    expect_close(diagonal(original), full({k}, -1.0, {.dtype = DType::f64}), 0, 0, "-I's diagonal");
    EXPECT_EQ(abs(original).sum().item<double>(), static_cast<double>(k));
    optim::SGD opt(fc->parameters(), {.lr = 0.05});
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      square(fc(randn({5, in}, {.dtype = DType::f64}))).sum().backward();
      opt.step();
      const Tensor w = fc->weight();
      const Tensor gram = out >= in ? matmul(w.t(), w) : matmul(w, w.t());
      expect_close(gram, diag(ones({k}, {.dtype = DType::f64})), 1e-10, 1e-10,
                   "orthonormal after a step");
    }
  }
  nn::Linear fc(3, 3);
  EXPECT_NE(error_of([&] {
              pzs::orthogonal(fc, "weight", "qr");
            }).find("orthogonal_map 'qr' (expected matrix_exp, cayley or householder)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { pzs::orthogonal(fc, "bias"); }).find("at least 2 dims"),
            std::string::npos);
}

TEST(Parametrize, RegistrationKeepsTheValueAndTheOptimizerTrainsTheOriginals) {
  manual_seed(11);
  nn::Linear fc(4, 3);
  const Tensor x = randn({2, 4});
  const Tensor before = fc(x).detach();
  pzs::weight_norm(fc);
  EXPECT_TRUE(pz::is_parametrized(fc));
  EXPECT_TRUE(pz::is_parametrized(fc, "weight"));
  EXPECT_FALSE(pz::is_parametrized(fc, "bias"));
  expect_close(fc(x), before, 1e-6, 1e-6, "output after weight_norm");
  const std::vector<std::string> want{"bias", "parametrizations.weight.original0",
                                      "parametrizations.weight.original1"};
  std::vector<std::string> names;
  for (auto& [n, p] : fc->named_parameters()) names.push_back(n);
  EXPECT_EQ(names, want);

  optim::SGD opt(fc->parameters(), {.lr = 0.1});
  square(fc(x)).sum().backward();
  opt.step();
  // The value follows the stepped originals, at the next forward and through param().
  const Tensor g0 = fc->named_parameters()[1].second, v = fc->named_parameters()[2].second;
  const Tensor expect = v * (g0 / sqrt(sum(square(v), Shape{1}, true)));
  expect_close(fc->weight(), expect, 1e-6, 1e-7, "param(\"weight\") after a step");
  expect_close(fc->forward(x), linear(x, expect, fc->bias()), 1e-6, 1e-6,
               "forward (called directly) after a step");
}

namespace {

// A user parametrization: a symmetric matrix from the upper triangle (the PyTorch tutorial's
// Symmetric), and a scaling to chain after another.
class SymmetricImpl : public nn::ParametrizationImpl {
 public:
  Tensor forward(const Tensor& x) override { return triu(x) + triu(x, 1).transpose(0, 1); }
  std::string type_name() const override { return "Symmetric"; }
};
class TwiceImpl : public nn::ParametrizationImpl {
 public:
  Tensor forward(const Tensor& x) override { return x * 2.0; }
  std::string type_name() const override { return "Twice"; }
};

}  // namespace

TEST(Parametrize, CustomParametrizationHasFiniteDifferenceGradients) {
  manual_seed(5);
  nn::Linear fc(nn::LinearOptions{3, 3, false});
  fc->to(DType::f64);
  pz::register_parametrization(fc, "weight", nn::Module(std::make_shared<SymmetricImpl>()));
  const Tensor w = fc->weight();
  expect_close(w, w.transpose(0, 1), 0, 0, "the parametrized weight is symmetric");
  const Tensor x = randn({4, 3}, {.dtype = DType::f64});
  const Tensor r = randn({4, 3}, {.dtype = DType::f64});
  Tensor original = fc->named_parameters()[0].second;
  ASSERT_EQ(fc->named_parameters()[0].first, "parametrizations.weight.original");
  (fc(x) * r).sum().backward();
  const std::vector<double> grad = original.grad().contiguous().to_vector<double>();
  const double h = 1e-6;
  for (int64_t i = 0; i < 9; ++i) {
    NoGradGuard no_grad;
    Tensor e = original.view({9}).narrow(0, i, 1);
    const double keep = e.item<double>();
    e.fill_(keep + h);
    const double up = (fc(x) * r).sum().item<double>();
    e.fill_(keep - h);
    const double down = (fc(x) * r).sum().item<double>();
    e.fill_(keep);
    EXPECT_NEAR(grad[static_cast<size_t>(i)], (up - down) / (2 * h), 1e-6) << "element " << i;
  }
}

TEST(Parametrize, ChainsApplyInOrder) {
  manual_seed(6);
  nn::Linear fc(4, 4);
  pzs::weight_norm(fc);
  const Tensor normed = fc->weight().detach();
  pz::register_parametrization(fc, "weight", nn::Module(std::make_shared<TwiceImpl>()));
  expect_close(fc->weight(), normed * 2.0, 1e-6, 1e-7, "weight_norm then Twice");
  std::ostringstream printed;
  printed << *fc;
  EXPECT_NE(printed.str().find("(parametrizations): ModuleDict"), std::string::npos)
      << printed.str();
  EXPECT_NE(printed.str().find("(1): Twice"), std::string::npos) << printed.str();
}

TEST(Parametrize, RemoveLeavesThePlainParameter) {
  manual_seed(7);
  nn::Linear fc(3, 2);
  const Tensor x = randn({5, 3});
  pzs::spectral_norm(fc);
  fc->eval();
  const Tensor value = fc->weight().detach().clone();
  const Tensor out = fc(x).detach();
  pz::remove_parametrizations(fc, "weight");
  EXPECT_FALSE(pz::is_parametrized(fc));
  EXPECT_EQ(names_of(fc->state_dict()), (std::vector<std::string>{"bias", "weight"}));
  EXPECT_TRUE(fc->weight().is_leaf() && fc->weight().requires_grad());
  expect_close(fc->weight(), value, 0, 0, "weight after removal");
  expect_close(fc(x), out, 1e-6, 1e-7, "output after removal");
  for (auto& [n, c] : fc->named_children()) ADD_FAILURE() << "child left behind: " << n;

  // leave_parametrized = false: the original comes back
  nn::Linear other(3, 2);
  const Tensor w = other->weight();
  pzs::spectral_norm(other);
  pz::remove_parametrizations(other, "weight", false);
  EXPECT_TRUE(other->weight().is_same(w));
}

TEST(Parametrize, ConfigRebuildsTheParametrizations) {
  manual_seed(8);
  nn::Sequential net({nn::Module(nn::Linear(4, 6)), nn::Module(nn::ReLU()),
                      nn::Module(nn::Linear(6, 6)), nn::Module(nn::ReLU()),
                      nn::Module(nn::Linear(6, 2))});
  pzs::weight_norm(net->children()[0]);
  pzs::orthogonal(net->children()[2], "weight", "cayley");
  pzs::spectral_norm(net->children()[4], "weight", 2);
  const nn::json config = net->config();
  nn::Module back = nn::build(config);
  EXPECT_EQ(names_of(back->state_dict()), names_of(net->state_dict()));
  back->load_state_dict(net->state_dict());
  net->eval();
  back->eval();
  const Tensor x = randn({3, 4});
  expect_close(back(x), net(x), 1e-6, 1e-7, "rebuilt network");
  EXPECT_EQ(back->config(), config);

  const std::string path = testing::TempDir() + "ember_parametrized.safetensors";
  io::save_model(net, path);
  nn::Module loaded = io::load_model(path);
  expect_close(loaded(x), net(x), 1e-6, 1e-7, "load_model of a parametrized network");
  std::remove(path.c_str());
}

TEST(Parametrize, RefusesBadInput) {
  nn::Linear fc(3, 2);
  EXPECT_NE(error_of([&] { pzs::weight_norm(nn::Module()); }).find("empty"), std::string::npos);
  const std::string absent = error_of([&] { pzs::weight_norm(fc, "kernel"); });
  EXPECT_NE(absent.find("Linear has no parameter named 'kernel' (parameters: weight, bias)"),
            std::string::npos)
      << absent;
  nn::LayerNorm ln(std::vector<int64_t>{3});
  const std::string norebind = error_of([&] { pzs::weight_norm(ln); });
  EXPECT_NE(norebind.find("LayerNorm computes with its own handle to 'weight'"), std::string::npos)
      << norebind;
  EXPECT_NE(error_of([&] { pzs::weight_norm(fc, "weight", 2); }).find("dim 2 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] { pzs::spectral_norm(fc, "weight", 0); }).find("n_power_iterations"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              pz::remove_parametrizations(fc, "weight");
            }).find("'weight' of Linear is not parametrized"),
            std::string::npos);
  // A parametrization that changes the shape is refused unless unsafe, and nothing changes.
  class TransposeImpl : public nn::ParametrizationImpl {
   public:
    Tensor forward(const Tensor& x) override { return x.transpose(0, 1); }
    std::string type_name() const override { return "Transpose"; }
  };
  const std::string shape = error_of([&] {
    pz::register_parametrization(fc, "weight", nn::Module(std::make_shared<TransposeImpl>()));
  });
  EXPECT_NE(shape.find("Transpose gives 'weight' [3, 2] f32 but the parameter is [2, 3] f32"),
            std::string::npos)
      << shape;
  EXPECT_FALSE(pz::is_parametrized(fc));
  EXPECT_EQ(names_of(fc->state_dict()), (std::vector<std::string>{"weight", "bias"}));
}
