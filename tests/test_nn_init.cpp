// tests/test_nn_init.cpp — nn::init's in-place initialisers (include/ember/nn/init.hpp):
// every gain, fan, bound and standard deviation against torch.nn.init's own
// (tests/data/init_fixtures.json, written by tests/gen_init_fixtures.py), the distributions
// drawn from ember's generator checked statistically, identity/dtype/device kept, the module
// walk that re-initialises a model, and the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cuda_skip.hpp"
#include "ember/ember.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/linear.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"
#include "tensor_values.hpp"

using namespace ember;
using ember::test_util::error_of;
namespace init = ember::nn::init;

namespace {
using ember_test::doubles;

const nlohmann::json& fixture() {
  static const nlohmann::json j = [] {
    std::ifstream in(ember_test::data_dir() + "/init_fixtures.json");
    EXPECT_TRUE(in.good()) << "tests/data/init_fixtures.json missing";
    return nlohmann::json::parse(in);
  }();
  return j;
}

Shape shape_of(const nlohmann::json& j) { return Shape(j.get<std::vector<int64_t>>()); }

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double std_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// Mean within 4 standard errors of `mean`, std within `rel` of `std`: a 256×256 draw.
void expect_moments(const Tensor& t, double mean, double std, double rel, const std::string& what) {
  const std::vector<double> v = doubles(t);
  const double se = std / std::sqrt(static_cast<double>(v.size()));
  EXPECT_NEAR(mean_of(v), mean, 4 * se) << what;
  EXPECT_NEAR(std_of(v), std, rel * std) << what;
}

void expect_bitwise(const Tensor& got, const Tensor& want, const std::string& what) {
  const std::vector<double> g = doubles(got), w = doubles(want);
  ASSERT_EQ(g.size(), w.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] != w[i]) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", expected " << w[i];
      return;
    }
  }
}

// ‖AᵀA − gain²·I‖_max with A = the [rows, rest] view of `t` (or AAᵀ when rows < rest).
double orthogonality_error(const Tensor& t, double gain) {
  const int64_t rows = t.shape()[0], cols = t.numel() / rows;
  Tensor a = t.to(DType::f64).reshape({rows, cols});
  Tensor g = rows >= cols ? matmul(transpose(a, 0, 1), a) : matmul(a, transpose(a, 0, 1));
  const int64_t n = g.shape()[0];
  Tensor e = g - init::eye_(zeros({n, n}, {.dtype = DType::f64})) * (gain * gain);
  return max(abs(e)).item<double>();
}

}  // namespace

// ---- formulas, against torch.nn.init ----

TEST(NnInitFixture, GainsAreTorchs) {
  int n = 0;
  for (const auto& g : fixture()["gains"]) {
    const std::string name = g[0];
    const double want = g[2];
    const double got = g[1].is_null() ? init::calculate_gain(name)
                                      : init::calculate_gain(name, g[1].get<double>());
    EXPECT_EQ(got, want) << name << " " << g[1];
    ++n;
  }
  EXPECT_EQ(n, 16);
}

TEST(NnInitFixture, FansAreTorchs) {
  for (const auto& f : fixture()["fans"]) {
    const auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(empty(shape_of(f[0])));
    EXPECT_EQ(fan_in, f[1][0].get<int64_t>()) << f[0];
    EXPECT_EQ(fan_out, f[1][1].get<int64_t>()) << f[0];
  }
}

// Each xavier/kaiming draw equals, with the same seed, ember's rand/randn at the bound or std
// torch.nn.init asked for: the formula is torch's to the last bit.
TEST(NnInitFixture, XavierAndKaimingDrawTorchsBoundsAndStds) {
  int n = 0;
  for (const auto& d : fixture()["draws"]) {
    const std::string fn = d[0];
    const Shape shape = shape_of(d[1]);
    const auto& kw = d[2];
    const std::string kind = d[3][0];
    const double p1 = d[3][1], p2 = d[3][2];
    Tensor w = zeros(shape);
    manual_seed(11);
    if (fn == "xavier_uniform_") init::xavier_uniform_(w, kw["gain"].get<double>());
    if (fn == "xavier_normal_") init::xavier_normal_(w, kw["gain"].get<double>());
    if (fn == "kaiming_uniform_" || fn == "kaiming_normal_") {
      const double a = kw["a"];
      const std::string mode = kw["mode"], nl = kw["nonlinearity"];
      if (fn == "kaiming_uniform_")
        init::kaiming_uniform_(w, a, mode, nl);
      else
        init::kaiming_normal_(w, a, mode, nl);
    }
    manual_seed(11);
    const Tensor want = kind == "uniform" ? rand(shape, {}, p1, p2) : randn(shape, {}, p1, p2);
    expect_bitwise(w, want, fn + " " + shape.to_string() + " " + kw.dump());
    ++n;
  }
  EXPECT_EQ(n, 396);
  // The options-struct spelling is the same function.
  Tensor w = zeros({8, 4, 3, 3}), v = zeros({8, 4, 3, 3});
  manual_seed(3);
  init::kaiming_uniform_(w, {.a = 0.2, .mode = init::FanMode::fan_out, .nonlinearity = "relu"});
  manual_seed(3);
  init::kaiming_uniform_(v, 0.2, "FAN_OUT", "relu");  // torch lowercases the mode
  expect_bitwise(w, v, "kaiming_uniform_ options vs strings");
}

// trunc_normal_ is PyTorch's inverse-CDF method with torch's uniform range, then the moments of
// the truncated normal and the bounds.
TEST(NnInitFixture, TruncNormalIsTorchsMethod) {
  for (const auto& c : fixture()["trunc_normal"]) {
    const double mean = c["mean"], std = c["std"], a = c["a"], b = c["b"];
    const double lo = c["uniform"][0], hi = c["uniform"][1];
    const std::string what = "trunc_normal_ " + c.dump();
    Tensor w = zeros({256, 256});
    manual_seed(21);
    init::trunc_normal_(w, mean, std, a, b);
    manual_seed(21);
    Tensor want = clamp(erfinv(rand({256, 256}, {}, lo, hi)) * (std * std::sqrt(2.0)) + mean, a, b);
    ember_test::expect_close(w, want, 1e-5, 1e-6, what);
    EXPECT_GE(min(w).item<float>(), static_cast<float>(a)) << what;
    EXPECT_LE(max(w).item<float>(), static_cast<float>(b)) << what;
    expect_moments(w, c["out_mean"], c["out_std"], 0.02, what);
  }
}

TEST(NnInitFixture, EyeAndDiracAreTorchs) {
  for (const auto& e : fixture()["eye"]) {
    Tensor t = full(shape_of(e[0]), 7.0);
    Tensor r = init::eye_(t);
    EXPECT_EQ(r.data_ptr(), t.data_ptr());
    EXPECT_EQ(doubles(t), e[1].get<std::vector<double>>()) << e[0];
  }
  for (const auto& d : fixture()["dirac"]) {
    Tensor t = full(shape_of(d[0]), 7.0);
    init::dirac_(t, d[1].get<int64_t>());
    EXPECT_EQ(doubles(t), d[2].get<std::vector<double>>()) << d[0] << " groups " << d[1];
  }
  Tensor i = zeros({3, 3}, {.dtype = DType::i64});  // integer tensors take eye_, as torch's
  init::eye_(i);
  EXPECT_EQ(doubles(i), (std::vector<double>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
}

TEST(NnInitFixture, SparseZeroesTorchsCountPerColumn) {
  for (const auto& s : fixture()["sparse"]) {
    const int64_t rows = s[0], cols = s[1], zeros_per_col = s[3];
    const double sparsity = s[2];
    Tensor t = full({rows, cols}, 7.0);
    init::sparse_(t, sparsity, 0.01);
    const std::vector<double> v = doubles(t);
    for (int64_t c = 0; c < cols; ++c) {
      int64_t n = 0;
      for (int64_t r = 0; r < rows; ++r) n += v[r * cols + c] == 0.0;
      EXPECT_EQ(n, zeros_per_col) << rows << "x" << cols << " sparsity " << sparsity << " col "
                                  << c;
    }
  }
  // The non-zeros are Normal(0, std); which rows are zeroed differs between columns.
  Tensor t = zeros({256, 256});
  manual_seed(4);
  init::sparse_(t, 0.25, 0.5);
  std::vector<double> v = doubles(t), nonzero;
  for (double x : v)
    if (x != 0.0) nonzero.push_back(x);
  EXPECT_EQ(nonzero.size(), 256u * 192u);
  EXPECT_NEAR(std_of(nonzero), 0.5, 0.01);
  int same = 0;
  for (int64_t r = 0; r < 256; ++r) same += (v[r * 256] == 0.0) == (v[r * 256 + 1] == 0.0);
  EXPECT_LT(same, 256);
}

// Where torch.nn.init raises (fewer dims than a function needs, a bad mode or name, groups
// that do not divide dim 0), ember throws ember::Error, and only there.
TEST(NnInitFixture, RefusesWhatTorchRefuses) {
  const std::map<std::string, std::function<void(Tensor)>> calls = {
      {"xavier_uniform_", [](Tensor t) { init::xavier_uniform_(t); }},
      {"xavier_normal_", [](Tensor t) { init::xavier_normal_(t); }},
      {"kaiming_uniform_", [](Tensor t) { init::kaiming_uniform_(t); }},
      {"kaiming_normal_", [](Tensor t) { init::kaiming_normal_(t); }},
      {"orthogonal_", [](Tensor t) { init::orthogonal_(t); }},
      {"eye_", [](Tensor t) { init::eye_(t); }},
      {"sparse_", [](Tensor t) { init::sparse_(t, 0.5); }},
      {"dirac_", [](Tensor t) { init::dirac_(t); }},
      {"kaiming_uniform_ mode fan_avg",
       [](Tensor t) { init::kaiming_uniform_(t, 0.0, "fan_avg"); }},
      {"calculate_gain swish", [](Tensor) { init::calculate_gain("swish"); }},
      {"dirac_ groups 3 of 4", [](Tensor t) { init::dirac_(t, 3); }},
  };
  int n = 0;
  for (const auto& r : fixture()["refused"]) {
    const std::string name = r[0];
    const Tensor t = zeros(shape_of(r[1]));
    bool threw = false;
    try {
      calls.at(name)(t);
    } catch (const Error&) {
      threw = true;
    }
    EXPECT_EQ(threw, r[2].get<bool>()) << name << " " << r[1];
    ++n;
  }
  EXPECT_EQ(n, 51);
}

// ---- distributions from ember's generator ----

TEST(NnInitStats, UniformAndNormal) {
  Tensor t = zeros({256, 256});
  manual_seed(1);
  init::uniform_(t, -0.5, 1.5);
  EXPECT_GE(min(t).item<float>(), -0.5f);
  EXPECT_LE(max(t).item<float>(), 1.5f);
  expect_moments(t, 0.5, 2.0 / std::sqrt(12.0), 0.02, "uniform_(-0.5, 1.5)");
  init::normal_(t, 3.0, 0.25);
  expect_moments(t, 3.0, 0.25, 0.02, "normal_(3, 0.25)");
  init::xavier_normal_(t, 2.0);
  expect_moments(t, 0.0, 2.0 * std::sqrt(2.0 / 512.0), 0.02, "xavier_normal_ gain 2");
  init::kaiming_normal_(t, {.mode = init::FanMode::fan_out, .nonlinearity = "relu"});
  expect_moments(t, 0.0, std::sqrt(2.0 / 256.0), 0.02, "kaiming_normal_ relu");
  const double bound = std::sqrt(6.0 / 512.0);
  init::xavier_uniform_(t);
  EXPECT_LE(max(abs(t)).item<float>(), bound);
  EXPECT_GT(max(abs(t)).item<float>(), 0.99 * bound);
  expect_moments(t, 0.0, bound / std::sqrt(3.0), 0.02, "xavier_uniform_");
  init::normal_(t, 0.0, 0.0);  // std 0 is allowed, as torch's
  EXPECT_EQ(max(abs(t)).item<float>(), 0.0f);
}

TEST(NnInitStats, SameSeedSameValues) {
  for (const auto& fn : std::vector<std::function<void(Tensor)>>{
           [](Tensor t) { init::uniform_(t, -1, 1); }, [](Tensor t) { init::normal_(t); },
           [](Tensor t) { init::trunc_normal_(t); }, [](Tensor t) { init::orthogonal_(t); },
           [](Tensor t) { init::sparse_(t, 0.3); }, [](Tensor t) { init::kaiming_uniform_(t); }}) {
    Tensor a = zeros({16, 12}), b = zeros({16, 12}), c = zeros({16, 12});
    manual_seed(99);
    fn(a);
    manual_seed(99);
    fn(b);
    fn(c);  // the generator moved on
    expect_bitwise(a, b, "same seed");
    EXPECT_GT(max(abs(a - c)).item<float>(), 0.0f);
  }
}

TEST(NnInitStats, OrthogonalIsTorchsQrWithSignCorrection) {
  for (const auto& [shape, gain] :
       std::vector<std::pair<Shape, double>>{{{256, 256}, 1.0},
                                             {{64, 3, 4, 4}, 2.0},
                                             {{16, 8, 3, 3}, std::sqrt(2.0)},
                                             {{1, 5}, 1.0},
                                             {{7, 1}, 0.5}}) {
    const std::string what = "orthogonal_ " + shape.to_string();
    Tensor w = zeros(shape);
    manual_seed(5);
    const Tensor r = init::orthogonal_(w, gain);
    EXPECT_EQ(r.data_ptr(), w.data_ptr()) << what;
    EXPECT_LT(orthogonality_error(w, gain), 1e-5) << what;
    // The draw it factorised: M = Q·R with R upper triangular and diag(R) > 0 (torch's sign
    // correction), which makes Q unique, so it is torch's Q of the same M.
    const int64_t rows = shape[0], cols = w.numel() / rows;
    manual_seed(5);
    Tensor m = randn({rows, cols}, {.dtype = DType::f64});
    Tensor q = w.to(DType::f64).reshape({rows, cols}) / gain;
    Tensor rr = rows >= cols ? matmul(transpose(q, 0, 1), m) : matmul(q, transpose(m, 0, 1));
    const std::vector<double> rv = doubles(rr);
    const int64_t k = rr.shape()[0];
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_GT(rv[i * k + i], 0.0) << what << " diag " << i;
      for (int64_t j = 0; j < i; ++j) EXPECT_NEAR(rv[i * k + j], 0.0, 1e-4) << what;
    }
  }
  Tensor d = zeros({32, 32}, {.dtype = DType::f64});
  init::orthogonal_(d, 3.0);
  EXPECT_LT(orthogonality_error(d, 3.0), 1e-12);
}

// Half-precision and f64 tensors are filled in their own dtype; a parameter keeps its handle,
// buffer, requires_grad, and gets no graph node.
TEST(NnInitStats, DtypesAndParametersKeepIdentity) {
  for (DType dt : {DType::f16, DType::bf16, DType::f64}) {
    const std::string what = std::string(dtype_name(dt));
    Tensor t = zeros({256, 256}, {.dtype = dt});
    void* ptr = t.data_ptr();
    init::uniform_(t, -2.0, 2.0);
    EXPECT_EQ(t.dtype(), dt);
    EXPECT_EQ(t.data_ptr(), ptr);
    EXPECT_GE(min(t).to(DType::f64).item<double>(), -2.0) << what;
    EXPECT_LE(max(t).to(DType::f64).item<double>(), 2.0) << what;
    expect_moments(t, 0.0, 4.0 / std::sqrt(12.0), 0.02, "uniform_ " + what);
    init::trunc_normal_(t, 0.0, 1.0, -1.0, 1.5);
    EXPECT_GE(min(t).to(DType::f64).item<double>(), -1.0) << what;
    EXPECT_LE(max(t).to(DType::f64).item<double>(), 1.5) << what;
    init::orthogonal_(t);
    EXPECT_LT(orthogonality_error(t, 1.0), dt == DType::f64 ? 1e-12 : 0.05) << what;
    init::eye_(t);
    EXPECT_EQ(sum(t).to(DType::f64).item<double>(), 256.0) << what;
  }
  nn::Linear fc(64, 32);
  Tensor& w = fc->weight();
  void* ptr = w.data_ptr();
  init::orthogonal_(w, 0.5);  // grad mode on: the initialiser runs under NoGradGuard itself
  EXPECT_EQ(w.data_ptr(), ptr);
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.grad_fn(), nullptr);
  EXPECT_LT(orthogonality_error(w, 0.5), 1e-5);
  EXPECT_EQ(fc->parameters()[0].data_ptr(), ptr);
}

// A view (here a transpose, not contiguous) is written through to the tensor it views; infinite
// trunc_normal_ bounds give finite values.
TEST(NnInitStats, ViewsAndInfiniteBounds) {
  Tensor base = zeros({8, 6});
  Tensor view = transpose(base, 0, 1);
  init::eye_(view);
  Tensor eye8x6 = init::eye_(zeros({8, 6}));
  expect_bitwise(base, eye8x6, "eye_ through a transposed view");
  init::orthogonal_(view, 1.5);
  EXPECT_LT(orthogonality_error(view.contiguous(), 1.5), 1e-5);
  Tensor t = zeros({256, 256});
  init::trunc_normal_(t, 0.0, 1.0, -INFINITY, INFINITY);
  EXPECT_TRUE(std::isfinite(max(abs(t)).item<float>()));
  expect_moments(t, 0.0, 1.0, 0.02, "trunc_normal_ unbounded");
  init::trunc_normal_(t, 5.0, 0.0, -1.0, 1.0);  // std 0: the mean, clamped
  EXPECT_EQ(min(t).item<float>(), 1.0f);
}

TEST(NnInitStats, SkipInitGuardDrawsNothing) {
  Tensor t = full({8, 8}, 2.0);
  manual_seed(1);
  const RngState before = get_rng_state();
  {
    init::SkipInitGuard skip;
    init::uniform_(t);
    init::normal_(t);
    init::trunc_normal_(t);
    init::xavier_uniform_(t);
    init::kaiming_normal_(t);
    init::orthogonal_(t);
    init::sparse_(t, 0.5);
  }
  EXPECT_EQ(get_rng_state().offset, before.offset);
  EXPECT_EQ(min(t).item<float>(), 2.0f);
  EXPECT_EQ(max(t).item<float>(), 2.0f);
}

// torch's model.apply(init_fn): named_modules() walks every module of the tree.
TEST(NnInitStats, ReinitialisesAModelThroughNamedModules) {
  nn::Sequential mlp(
      {nn::Linear(32, 64), nn::ReLU(), nn::Linear(64, 48), nn::ReLU(), nn::Linear(48, 10)});
  int linears = 0;
  for (auto& [name, m] : mlp->named_modules()) {
    if (auto* linear = dynamic_cast<nn::LinearImpl*>(m.get())) {
      init::orthogonal_(linear->weight());
      init::zeros_(linear->bias());
      ++linears;
    }
  }
  EXPECT_EQ(linears, 3);
  for (const auto& [name, p] : mlp->named_parameters()) {
    if (name.ends_with("bias")) {
      EXPECT_EQ(max(abs(p)).item<float>(), 0.0f) << name;
    } else {
      EXPECT_LT(orthogonality_error(p, 1.0), 1e-5) << name;
    }
  }
  Tensor y = mlp(randn({4, 32}));
  EXPECT_EQ(y.shape(), Shape({4, 10}));
}

// ---- bad input: each refusal names the function and says what came and what was expected ----

TEST(NnInitErrors, EachRefusalNamesItsFunction) {
  const auto has = [](const std::string& msg, const std::string& want) {
    EXPECT_NE(msg.find(want), std::string::npos) << "got: " << msg << "\nwanted: " << want;
  };
  Tensor undefined;
  has(error_of([&] { init::uniform_(undefined); }), "init::uniform_: undefined tensor");
  has(error_of([&] { init::zeros_(undefined); }), "init::zeros_: undefined tensor");
  Tensor ints = zeros({4, 4}, {.dtype = DType::i32});
  has(error_of([&] { init::normal_(ints); }),
      "init::normal_: tensor of dtype i32 (expected f32, f64, f16 or bf16)");
  has(error_of([&] { init::orthogonal_(ints); }), "init::orthogonal_: tensor of dtype i32");
  Tensor v = zeros({5}), m = zeros({4, 6});
  has(error_of([&] { init::xavier_uniform_(v); }),
      "init::xavier_uniform_: tensor [5] f32: init: fan in/out need at least 2 dims");
  has(error_of([&] { init::kaiming_uniform_(v); }), "init::kaiming_uniform_: tensor [5] f32");
  has(error_of([&] { init::orthogonal_(v); }),
      "init::orthogonal_: tensor of shape [5] (expected at least 2 dims)");
  has(error_of([&] { init::normal_(m, 0.0, -1.0); }),
      "init::normal_: std -1 (expected a finite std >= 0)");
  has(error_of([&] { init::sparse_(m, 0.5, -0.1); }), "init::sparse_: std -0.1");
  has(error_of([&] { init::uniform_(m, 2.0, 1.0); }),
      "init::uniform_: range [a, b) = [2, 1) (expected a <= b)");
  has(error_of([&] { init::trunc_normal_(m, 0.0, 1.0, 1.0, -1.0); }),
      "init::trunc_normal_: bounds [a, b] = [1, -1] (expected a <= b)");
  has(error_of([&] { init::sparse_(m, 1.0); }),
      "init::sparse_: sparsity 1 (expected 0 <= sparsity < 1)");
  has(error_of([&] { init::sparse_(m, -0.1); }), "init::sparse_: sparsity -0.1");
  has(error_of([&] {
        init::sparse_(zeros({2, 3, 4}), 0.1);
      }),
      "init::sparse_: tensor of shape [2, 3, 4] (expected 2 dims)");
  has(error_of([&] {
        init::eye_(zeros({2, 3, 4}));
      }),
      "init::eye_: tensor of shape [2, 3, 4] (expected 2 dims)");
  has(error_of([&] { init::dirac_(m); }),
      "init::dirac_: tensor of shape [4, 6] (expected 3, 4 or 5 dims)");
  has(error_of([&] {
        init::dirac_(zeros({4, 2, 3}), 3);
      }),
      "init::dirac_: 3 groups of dim 0 = 4 (expected a positive number of groups dividing dim 0)");
  has(error_of([&] { init::kaiming_normal_(m, 0.0, "fan_avg"); }),
      "init::kaiming_normal_: tensor [4, 6] f32: init: mode \"fan_avg\" (expected fan_in or "
      "fan_out)");
  has(error_of([&] { init::kaiming_uniform_(m, {.nonlinearity = "swish"}); }),
      "init::calculate_gain: unknown nonlinearity \"swish\"");
  has(error_of([&] { init::calculate_gain("gelu"); }),
      "init::calculate_gain: unknown nonlinearity \"gelu\" (expected linear, conv1d");
  has(error_of([&] { init::xavier_normal_(m, NAN); }), "init::xavier_normal_: gain nan");
  // A refused call leaves the tensor as it was.
  Tensor kept = full({4, 6}, 3.0);
  error_of([&] { init::uniform_(kept, 1.0, 0.0); });
  EXPECT_EQ(min(kept).item<float>(), 3.0f);
}

// ---- the GPU: drawn on the device, the same values as the CPU for a seed ----

TEST(NnInitCuda, DrawsOnTheDeviceAsOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor g = zeros({64, 32}, {.dtype = dt, .device = Device::cuda(0)});
    Tensor c = zeros({64, 32}, {.dtype = dt});
    void* ptr = g.data_ptr();
    // f32 bitwise; bf16 within one rounding (the two backends may round f64 -> bf16 apart).
    const double rtol = dt == DType::f32 ? 0.0 : 1.0 / 128;
    manual_seed(8);
    init::kaiming_uniform_(g);
    manual_seed(8);
    init::kaiming_uniform_(c);
    EXPECT_EQ(g.device(), Device::cuda(0));
    EXPECT_EQ(g.data_ptr(), ptr);
    ember_test::expect_close(g.to(Device::cpu()), c, rtol, 0.0, "kaiming_uniform_ cuda vs cpu");
    manual_seed(8);
    init::orthogonal_(g, 2.0);
    manual_seed(8);
    init::orthogonal_(c, 2.0);
    EXPECT_EQ(g.data_ptr(), ptr);
    ember_test::expect_close(g.to(Device::cpu()), c, rtol, 0.0, "orthogonal_ cuda vs cpu");
    manual_seed(8);
    init::trunc_normal_(g, 0.0, 0.05, -0.0625, 0.0625);  // bounds every dtype holds exactly
    EXPECT_LE(max(abs(g)).to(DType::f64).item<double>(), 0.0625);
    init::dirac_(g.reshape({64, 32, 1}));
    EXPECT_EQ(sum(g).to(DType::f64).item<double>(), 32.0);
  }
}
