// tests/test_special_vocabulary.cpp — issue 32's elementwise math, special functions and
// activations beyond the op driver's fixtures (tests/test_op_cases_special.cpp): values at the
// edges (poles, infinities, signed zeros, tails where the naive formula underflows; references
// from torch 1.13 in f64), bad input with the op named in the error, rrelu's draws, and the
// modules (PyTorch's repr, config round trips).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/activation.hpp"
#include "ember/ops_math.hpp"
#include "error_of.hpp"
#include "layer_test_util.hpp"
#include "tensor_values.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember::test_util::error_of;
using ember_test::doubles;
using ember_test::f64;
using ember_test::kInf;
using ember_test::kNaN;

Tensor int_tensor(std::vector<int64_t> v, DType dtype = DType::i64) {
  const int64_t n = static_cast<int64_t>(v.size());
  return from_vector<int64_t>(v, Shape{n}).to(dtype);
}

// got[i] against want[i]: equal infinities and NaNs, else within rtol.
void expect_doubles_within(const Tensor& got, const std::vector<double>& want, double rtol,
                           const std::string& what) {
  const std::vector<double> g = doubles(got);
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << what << "[" << i << "] = " << g[i] << " (expected NaN)";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << what << "[" << i << "]";
    } else {
      EXPECT_NEAR(g[i], want[i], rtol * std::max(1.0, std::abs(want[i])))
          << what << "[" << i << "]";
    }
  }
}

// ---- values at the edges (torch 1.13, f64)

TEST(SpecialMath, GammaFamilyAtPolesAndReflection) {
  expect_doubles_within(digamma(f64({0.0, -0.0, -1.0, -100.25, 1.0})),
                        {-kInf, kInf, kNaN, 7.754238959208646, -0.5772156649015329}, 1e-12,
                        "digamma");
  expect_doubles_within(lgamma(f64({0.0, -1.0, -2.5, 0.5})),
                        {kInf, kInf, -0.05624371649767405, 0.5723649429247001}, 1e-12, "lgamma");
  expect_doubles_within(polygamma(3, f64({-1.5})), {194.59427621918758}, 1e-10, "polygamma(3)");
  expect_doubles_within(polygamma(1, f64({0.0})), {kInf}, 0.0, "polygamma(1, 0)");
  expect_doubles_within(special::zeta(f64({3.0, 1.0, 0.5}), f64({-2.5, 1.0, 1.0})),
                        {0.0541020258208641, kInf, kNaN}, 1e-10, "zeta");
}

TEST(SpecialMath, BesselAndErfcxTails) {
  expect_doubles_within(special::i0e(f64({1000.0, kInf, -kInf, 0.0})),
                        {0.012617240455891257, 0, 0, 1}, 1e-12, "i0e");
  expect_doubles_within(special::i1(f64({100.0, -kInf})), {1.0683693903381625e+42, -kInf}, 1e-12,
                        "i1");
  expect_doubles_within(i0(f64({700.0})), {1.5295933476718735e+302}, 1e-11, "i0");
  expect_doubles_within(special::erfcx(f64({-30.0, 0.0, 30.0, 1e10})),
                        {kInf, 1.0, 0.018795888861416754, 5.641895835477563e-11}, 1e-12, "erfcx");
  expect_doubles_within(special::log_ndtr(f64({-40.0})), {-804.6084420137539}, 1e-12, "log_ndtr");
  expect_doubles_within(special::ndtri(f64({1e-10, 0.0, 1.0, 0.5})),
                        {-6.361340902404056, -kInf, kInf, 0}, 1e-10, "ndtri");
  expect_doubles_within(special::entr(f64({-1.0, 0.0, kNaN})), {-kInf, 0.0, kNaN}, 0.0, "entr");
}

TEST(SpecialMath, FloatBitsAndSigns) {
  expect_doubles_within(sinc(f64({0.0})), {1.0}, 0.0, "sinc(0)");
  expect_doubles_within(xlogy(f64({0.0, 0.0, 1.0}), f64({0.0, kNaN, 0.0})), {0.0, kNaN, -kInf}, 0.0,
                        "xlogy");
  expect_doubles_within(logaddexp(f64({kInf, -kInf}), f64({kInf, -kInf})), {kInf, -kInf}, 0.0,
                        "logaddexp");
  expect_doubles_within(logaddexp2(f64({-kInf, 1.0}), f64({-kInf, 1.0})), {-kInf, 2.0}, 1e-15,
                        "logaddexp2");
  const std::vector<double> sign = doubles(signbit(f64({-0.0, 0.0, -kNaN, kNaN, -2.0})));
  EXPECT_EQ(sign, (std::vector<double>{1, 0, 1, 0, 1}));
  EXPECT_EQ(signbit(f64({1.0})).dtype(), DType::boolean);
  const Tensor one32 = ones({1});
  EXPECT_EQ(nextafter(one32, full({1}, 2.0)).item<float>(),
            1.0f + std::numeric_limits<float>::epsilon());
  EXPECT_EQ(nextafter(f64({1.0}), f64({0.0})).item<double>(), std::nextafter(1.0, 0.0));
}

// NaN, ±inf and ±0 through every unary function, against torch 1.13 (f64). Two deliberate
// differences: i0/i1 at ±inf are ±inf here (torch's Cephes code gives NaN), and softshrink
// passes NaN on (torch 1.13 gives 0). polygamma(1, 0.5) is π²/2 exactly (torch's trigamma is
// 3e-10 off).
TEST(SpecialMath, NonFiniteInputsAsPyTorch) {
  const Tensor x = f64({kNaN, kInf, -kInf, 0.0, -0.0, 0.5});
  struct Row {
    const char* name;
    Tensor got;
    std::vector<double> want;
  };
  const std::vector<Row> rows = {
      {"celu", celu(x, 1.5), {kNaN, kInf, -1.5, 0, 0, 0.5}},
      {"softsign", softsign(x), {kNaN, kNaN, kNaN, 0, 0, 1.0 / 3}},
      {"hardshrink", hardshrink(x), {kNaN, kInf, -kInf, 0, 0, 0}},
      {"softshrink", softshrink(x), {kNaN, kInf, -kInf, 0, 0, 0}},
      {"tanhshrink", tanhshrink(x), {kNaN, kInf, -kInf, 0, 0, 0.03788284273999026}},
      {"threshold", threshold(x, 0.1, 20.0), {kNaN, kInf, 20, 20, 20, 0.5}},
      {"rrelu", rrelu(x, 0.1, 0.3, false), {kNaN, kInf, -kInf, 0, 0, 0.5}},
      {"entr", special::entr(x), {kNaN, -kInf, -kInf, 0, 0, 0.34657359027997264}},
      {"ndtr", special::ndtr(x), {kNaN, 1, 0, 0.5, 0.5, 0.6914624612740131}},
      {"log_ndtr",
       special::log_ndtr(x),
       {kNaN, 0, -kInf, -0.6931471805599453, -0.6931471805599453, -0.36894641528865635}},
      {"logit", logit(x), {kNaN, kNaN, kNaN, -kInf, -kInf, 0}},
      {"sinc", sinc(x), {kNaN, kNaN, kNaN, 1, 1, 0.6366197723675814}},
      {"erfcx", special::erfcx(x), {kNaN, 0, kInf, 1, 1, 0.6156903441929258}},
      {"i0e", special::i0e(x), {kNaN, 0, 0, 1, 1, 0.6450352704491501}},
      {"i1e", special::i1e(x), {kNaN, 0, 0, 0, 0, 0.15642080318487173}},
      {"i0", i0(x), {kNaN, kInf, kInf, 1, 1, 1.0634833707413236}},
      {"i1", special::i1(x), {kNaN, kInf, -kInf, 0, 0, 0.25789430539089636}},
      {"asinh", asinh(x), {kNaN, kInf, -kInf, 0, 0, 0.48121182505960347}},
      {"acosh", acosh(x), {kNaN, kInf, kNaN, kNaN, kNaN, kNaN}},
      {"atanh", atanh(x), {kNaN, kNaN, kNaN, 0, 0, 0.5493061443340548}},
      {"lgamma", lgamma(x), {kNaN, kInf, kInf, kInf, kInf, 0.5723649429247001}},
      {"digamma", digamma(x), {kNaN, kInf, kNaN, -kInf, kInf, -1.9635100260214229}},
      {"ndtri", special::ndtri(x), {kNaN, kNaN, kNaN, -kInf, -kInf, 0}},
      {"polygamma(1)", polygamma(1, x), {kNaN, 0, kNaN, kInf, kInf, 4.934802200544679}}};
  for (const Row& r : rows) expect_doubles_within(r.got, r.want, 1e-14, r.name);
}

// Empty and 0-d inputs keep their shapes through every op (no kernel launch on nothing, no
// data check on nothing: mvlgamma's bound, allclose's all()).
TEST(SpecialMath, EmptyAndZeroDimInputs) {
  for (const Shape& shape : {Shape{0}, Shape{2, 0}, Shape{}}) {
    const Tensor x = full(shape, 2.5, {.dtype = DType::f64});
    const Tensor n = full(shape, 6.0, {.dtype = DType::i64});
    for (const Tensor& y : {lgamma(x),
                            digamma(x),
                            polygamma(2, x),
                            mvlgamma(x, 3),
                            special::i1e(x),
                            special::erfcx(x),
                            sinc(x),
                            logit(x, 0.1),
                            signbit(x),
                            frexp(x).first,
                            frexp(x).second,
                            xlogy(x, x),
                            hypot(x, x),
                            logaddexp(x, x),
                            special::zeta(x, x),
                            ldexp(x, x),
                            float_power(n, x),
                            heaviside(x, x),
                            isclose(x, x),
                            gcd(n, n),
                            bitwise_not(n),
                            bitwise_left_shift(n, n),
                            celu(x),
                            softsign(x),
                            hardshrink(x),
                            softshrink(x),
                            tanhshrink(x),
                            threshold(x, 0.0, 1.0),
                            rrelu(x, 0.1, 0.3, true),
                            special::entr(x),
                            special::ndtri(mul(x, 0.1)),
                            special::log_ndtr(x)})
      EXPECT_EQ(y.shape(), shape) << shape.to_string();
    EXPECT_TRUE(allclose(x, x));
  }
}

TEST(SpecialMath, FrexpSplitsExactly) {
  const std::vector<double> x = {0.0, kInf, 8.0, -0.75, 1e-310, 3.0e300};
  const auto [m, e] = frexp(f64(x));
  EXPECT_EQ(e.dtype(), DType::i32);
  const std::vector<double> mv = doubles(m), ev = doubles(e);
  for (size_t i = 0; i < x.size(); ++i) {
    int want_e = 0;
    const double want_m = std::isinf(x[i]) ? x[i] : std::frexp(x[i], &want_e);
    EXPECT_EQ(mv[i], want_m) << "mantissa of " << x[i];
    EXPECT_EQ(ev[i], std::isinf(x[i]) ? 0 : want_e) << "exponent of " << x[i];
  }
}

TEST(SpecialMath, IntegerOpsAtTheirEdges) {
  EXPECT_EQ(gcd(int_tensor({0, -4, 6}), int_tensor({0, 6, -9})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(lcm(int_tensor({0, -4, 6}), int_tensor({3, 6, -9})).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 12, 18}));
  // PyTorch 2.x: a shift by a negative count or by the width or more gives 0 (left) or the
  // sign (right); torch 1.13 left it to the hardware.
  EXPECT_EQ(
      bitwise_left_shift(int_tensor({1, 5, -8}, DType::i32), int_tensor({32, 1, -1}, DType::i32))
          .to_vector<int32_t>(),
      (std::vector<int32_t>{0, 10, 0}));
  EXPECT_EQ(
      bitwise_right_shift(int_tensor({-8, 8, 9}, DType::i32), int_tensor({40, 40, 1}, DType::i32))
          .to_vector<int32_t>(),
      (std::vector<int32_t>{-1, 0, 4}));
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(bitwise_not(int_tensor({kMin, -1, 12})).to_vector<int64_t>(),
            (std::vector<int64_t>{std::numeric_limits<int64_t>::max(), 0, -13}));
  EXPECT_EQ(heaviside(f64({kNaN, 0.0, -1.0}), f64({5.0})).to_vector<double>(),
            (std::vector<double>{0.0, 5.0, 0.0}));
  EXPECT_TRUE(allclose(f64({1.0, kNaN}), f64({1.0 + 1e-9, kNaN}), 1e-5, 1e-8, true));
  EXPECT_FALSE(allclose(f64({1.0, kNaN}), f64({1.0, kNaN})));
  EXPECT_EQ(float_power(int_tensor({2}), 0.5).dtype(), DType::f64);
}

// ---- bad input names the op

TEST(SpecialMath, BadInputNamesTheOp) {
  const Tensor x = randn({3});
  const Tensor i = int_tensor({1, 2, 3});
  EXPECT_NE(error_of([&] { lgamma(i); }).find("lgamma"), std::string::npos);
  EXPECT_NE(error_of([&] { polygamma(-1, x); }).find("polygamma: order n = -1"), std::string::npos);
  EXPECT_NE(error_of([&] { mvlgamma(full({2}, 0.5), 3); }).find("mvlgamma: every element"),
            std::string::npos);
  EXPECT_NE(error_of([&] { mvlgamma(x, 0); }).find("mvlgamma: p = 0"), std::string::npos);
  EXPECT_NE(error_of([&] { gcd(x, x); }).find("gcd"), std::string::npos);
  EXPECT_NE(error_of([&] { bitwise_and(x, x); }).find("bitwise_and"), std::string::npos);
  EXPECT_NE(error_of([&] { bitwise_not(x); }).find("bitwise_not"), std::string::npos);
  EXPECT_NE(error_of([&] { nextafter(x.to(DType::f16), x.to(DType::f16)); }).find("nextafter"),
            std::string::npos);
  EXPECT_NE(error_of([&] { heaviside(x, i); }).find("heaviside: values dtype"), std::string::npos);
  EXPECT_NE(error_of([&] { isclose(x, x, -1.0); }).find("isclose: rtol"), std::string::npos);
  EXPECT_NE(error_of([&] { isclose(x, x.to(DType::f64)); }).find("isclose"), std::string::npos);
  EXPECT_NE(error_of([&] { hypot(x, randn({4})); }).find("hypot"), std::string::npos);
  EXPECT_NE(error_of([&] { softshrink(x, -1.0); }).find("softshrink: lambd"), std::string::npos);
  EXPECT_NE(error_of([&] { celu(x, 0.0); }).find("celu: alpha is 0"), std::string::npos);
  EXPECT_NE(error_of([&] { rrelu(x, 0.5, 0.1, true); }).find("rrelu: lower bound"),
            std::string::npos);
  EXPECT_NE(error_of([&] { threshold(i, 0.0, 1.0); }).find("threshold"), std::string::npos);
  const Tensor s = full({1}, 2.0).requires_grad_();
  EXPECT_NE(error_of([&] { special::zeta(s, ones({1})); }).find("special_zeta: the gradient"),
            std::string::npos);
  EXPECT_NE(error_of([&] { logit(Tensor()); }).find("logit"), std::string::npos);
}

// ---- rrelu: one slope per element from the generator

TEST(SpecialMath, RReLUTrainingDrawsRepeatableSlopes) {
  const Tensor x = from_vector<double>({-1.0, -2.0, 3.0, -0.5, 0.0, -4.0}, Shape{6});
  manual_seed(7);
  const Tensor a = rrelu(x, 0.1, 0.3, true);
  manual_seed(7);
  const Tensor xg = x.clone().requires_grad_();
  const Tensor b = rrelu(xg, 0.1, 0.3, true);
  EXPECT_EQ(doubles(a), doubles(b)) << "the same seed draws the same slopes";
  b.sum().backward();
  const std::vector<double> xs = doubles(x), ys = doubles(a), gs = doubles(xg.grad());
  for (size_t k = 0; k < xs.size(); ++k) {
    if (xs[k] > 0) {
      EXPECT_EQ(ys[k], xs[k]);
      EXPECT_EQ(gs[k], 1.0);
    } else {
      EXPECT_GE(gs[k], 0.1);  // the drawn slope is the gradient
      EXPECT_LE(gs[k], 0.3);
      EXPECT_DOUBLE_EQ(ys[k], xs[k] * gs[k]);
    }
  }
  manual_seed(8);
  EXPECT_NE(doubles(rrelu(x, 0.1, 0.3, true)), doubles(a)) << "another seed, other slopes";
  expect_doubles_within(rrelu(x, 0.1, 0.3, false), {-0.2, -0.4, 3.0, -0.1, 0.0, -0.8}, 1e-15,
                        "eval");
}

// On a GPU: rand draws the same numbers on every device for one seed (a counter-based
// generator), so training rrelu picks the CPU's slopes; and the special functions agree with
// the CPU's f64 run through their tails.
TEST(CudaSpecialMath, RReLUSlopesAndTailsMatchTheCPU) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const Tensor x = randn({64}, {.dtype = DType::f64});
  manual_seed(11);
  const Tensor cpu = rrelu(x, 0.1, 0.3, true);
  manual_seed(11);
  const Tensor gpu = rrelu(x.to(Device::cuda()), 0.1, 0.3, true);
  expect_doubles_within(gpu.to(Device::cpu()), doubles(cpu), 1e-15, "rrelu on the GPU");
  const Tensor t = f64({-40.0, -3.0, 0.5, 27.0, 31.0, 700.0});
  const Tensor g = t.to(Device::cuda());
  expect_doubles_within(special::erfcx(g), doubles(special::erfcx(t)), 1e-13, "erfcx");
  expect_doubles_within(special::i1e(g), doubles(special::i1e(t)), 1e-13, "i1e");
  expect_doubles_within(digamma(g), doubles(digamma(t)), 1e-13, "digamma");
  expect_doubles_within(special::log_ndtr(g), doubles(special::log_ndtr(t)), 1e-13, "log_ndtr");
}

// ---- the modules

TEST(SpecialModules, PrintAsPyTorch) {
  auto repr = [](const nn::Module& m) { return m->type_name() + "(" + m->extra_repr() + ")"; };
  EXPECT_EQ(repr(nn::CELU()), "CELU(alpha=1.0)");
  EXPECT_EQ(repr(nn::Softsign()), "Softsign()");
  EXPECT_EQ(repr(nn::Tanhshrink()), "Tanhshrink()");
  EXPECT_EQ(repr(nn::Hardshrink()), "Hardshrink(0.5)");
  EXPECT_EQ(repr(nn::Softshrink(0.25)), "Softshrink(0.25)");
  EXPECT_EQ(repr(nn::Threshold(0.1, 20.0)), "Threshold(threshold=0.1, value=20.0)");
  EXPECT_EQ(repr(nn::RReLU()), "RReLU(lower=0.125, upper=0.3333333333333333)");
}

TEST(SpecialModules, ConfigRoundTripsAndForward) {
  const std::vector<nn::Module> modules = {
      nn::CELU(1.5),       nn::Softsign(),           nn::Tanhshrink(),   nn::Hardshrink(0.3),
      nn::Softshrink(0.2), nn::Threshold(0.1, 20.0), nn::RReLU(0.1, 0.2)};
  for (const nn::Module& m : modules) ember::test_util::expect_config_round_trip(m);
  const Tensor x = from_vector<double>({-2.0, -0.25, 0.05, 1.0}, Shape{4});
  expect_doubles_within(nn::CELU(1.5)(x), doubles(celu(x, 1.5)), 0.0, "CELU");
  expect_doubles_within(nn::Threshold(0.1, 20.0)(x), {20.0, 20.0, 20.0, 1.0}, 0.0, "Threshold");
  expect_doubles_within(nn::Hardshrink(0.3)(x), {-2.0, 0.0, 0.0, 1.0}, 0.0, "Hardshrink");
  expect_doubles_within(nn::Softshrink(0.2)(x), {-1.8, -0.05, 0.0, 0.8}, 1e-15, "Softshrink");
  nn::RReLU r(0.1, 0.2);
  r->eval();
  expect_doubles_within(r(x), {-0.3, -0.0375, 0.05, 1.0}, 1e-15, "RReLU in eval");
  EXPECT_NE(error_of([] { nn::Softshrink(-0.5); }).find("Softshrink: lambd"), std::string::npos);
  EXPECT_NE(error_of([] { nn::CELU(0.0); }).find("CELU: alpha is 0"), std::string::npos);
  EXPECT_NE(error_of([] { nn::RReLU(0.5, 0.1); }).find("RReLU: lower bound"), std::string::npos);
}

}  // namespace
