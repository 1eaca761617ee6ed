// tests/test_promotion.cpp — dtype promotion of binary ops (torch.result_type; Note [Type
// promotion] in src/ops/common.cpp): the dtype rules, the 0-d rules, gradients coming back in
// each input's own dtype, and the errors when the promoted dtype is not computed. The values
// against PyTorch are the *_mix_* cases of the op test driver (tests/test_catalogue.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "error_of.hpp"

namespace {

using ember::DType;
using ember::Tensor;
using ember::test_util::error_of;

Tensor of(const std::vector<double>& v, DType dtype, const ember::Shape& shape) {
  return ember::from_vector<double>(v, shape).to(dtype);
}
Tensor vec(const std::vector<double>& v, DType dtype) {
  return of(v, dtype, {static_cast<int64_t>(v.size())});
}
Tensor zero_d(double v, DType dtype) { return of({v}, dtype, {}); }
bool flag(const Tensor& b) { return b.to(DType::i64).item<int64_t>() != 0; }

TEST(Promotion, PromoteTypesAsTorch) {
  using ember::promote_types;
  EXPECT_EQ(promote_types(DType::u8, DType::i32), DType::i32);
  EXPECT_EQ(promote_types(DType::i32, DType::i64), DType::i64);
  EXPECT_EQ(promote_types(DType::i64, DType::f32), DType::f32);
  EXPECT_EQ(promote_types(DType::i32, DType::f16), DType::f16);
  EXPECT_EQ(promote_types(DType::f16, DType::bf16), DType::f32);
  EXPECT_EQ(promote_types(DType::bf16, DType::f32), DType::f32);
  EXPECT_EQ(promote_types(DType::f32, DType::f64), DType::f64);
  EXPECT_EQ(promote_types(DType::f16, DType::f64), DType::f64);
  for (int i = 0; i < ember::kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_EQ(promote_types(DType::boolean, t), t) << ember::dtype_name(t);
    EXPECT_EQ(promote_types(t, t), t) << ember::dtype_name(t);
    for (int j = 0; j < ember::kNumDTypes; ++j) {
      const auto u = static_cast<DType>(j);
      EXPECT_EQ(promote_types(t, u), promote_types(u, t));
    }
  }
}

TEST(Promotion, ZeroDimOperandsDecideOnlyFromAHigherCategory) {
  using ember::result_type;
  const Tensor i32 = vec({1, 2}, DType::i32), f32 = vec({1, 2}, DType::f32);
  // a higher category decides
  EXPECT_EQ(result_type(i32, zero_d(1, DType::f64)), DType::f64);
  EXPECT_EQ(result_type(i32, zero_d(1, DType::f16)), DType::f16);
  EXPECT_EQ(result_type(vec({1, 0}, DType::boolean), zero_d(3, DType::i64)), DType::i64);
  // the same or a lower category does not
  EXPECT_EQ(result_type(f32, zero_d(1, DType::f64)), DType::f32);
  EXPECT_EQ(result_type(zero_d(1, DType::f64), f32), DType::f32);
  EXPECT_EQ(result_type(i32, zero_d(1, DType::i64)), DType::i32);
  EXPECT_EQ(result_type(vec({1}, DType::u8), zero_d(1, DType::i64)), DType::u8);
  EXPECT_EQ(result_type(vec({1}, DType::f16), zero_d(1, DType::f32)), DType::f16);
  EXPECT_EQ(result_type(f32, zero_d(1, DType::boolean)), DType::f32);
  // two dimensioned tensors, or two 0-d ones: promote_types
  EXPECT_EQ(result_type(f32, vec({1}, DType::f64)), DType::f64);
  EXPECT_EQ(result_type(zero_d(1, DType::i32), zero_d(1, DType::i64)), DType::i64);
  EXPECT_EQ(result_type(zero_d(1, DType::f32), zero_d(1, DType::f64)), DType::f64);
  // an empty tensor of shape [0] is dimensioned
  EXPECT_EQ(result_type(ember::zeros({0}, {.dtype = DType::f32}), zero_d(1, DType::f64)),
            DType::f32);
}

TEST(Promotion, BinaryOpsComputeInTheResultType) {
  Tensor a = vec({1, 2, 3}, DType::i32);
  Tensor s = ember::add(a, zero_d(0.5, DType::f64));
  EXPECT_EQ(s.dtype(), DType::f64);
  EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{1.5, 2.5, 3.5}));
  Tensor t = ember::add(vec({1, 2}, DType::f32), zero_d(0.25, DType::f64));
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.25f, 2.25f}));
  Tensor big = ember::mul(a, zero_d(3, DType::i64));  // stays i32
  EXPECT_EQ(big.dtype(), DType::i32);
  EXPECT_EQ(big.to_vector<int32_t>(), (std::vector<int32_t>{3, 6, 9}));
  EXPECT_EQ(ember::sub(vec({1}, DType::u8), vec({2}, DType::i64)).to_vector<int64_t>(),
            (std::vector<int64_t>{-1}));
  // integer true division, also between two integer dtypes
  Tensor q = ember::div(a, vec({2, 2, 2}, DType::i64));
  EXPECT_EQ(q.dtype(), DType::f32);
  EXPECT_EQ(q.to_vector<float>(), (std::vector<float>{0.5f, 1.0f, 1.5f}));
  // f16 with bf16 computes in f32
  EXPECT_EQ(ember::add(vec({1}, DType::f16), vec({2}, DType::bf16)).dtype(), DType::f32);
  // comparisons compare in the result type: 2 < 2.5
  Tensor lt = ember::lt(vec({2, 3}, DType::i64), zero_d(2.5, DType::f64));
  EXPECT_EQ(lt.dtype(), DType::boolean);
  EXPECT_EQ(lt.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ember::eq(a, vec({1, 2.5, 3}, DType::f32)).to(DType::i64).to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0, 1}));
  // where promotes its two values (the condition stays bool)
  Tensor w = ember::where(vec({1, 0, 1}, DType::boolean), a, vec({0.5, 0.5, 0.5}, DType::f32));
  EXPECT_EQ(w.dtype(), DType::f32);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1.0f, 0.5f, 3.0f}));
  // operators go through the same ops
  EXPECT_EQ((a * vec({0.5, 0.5, 0.5}, DType::f64)).dtype(), DType::f64);
}

TEST(Promotion, GradientsComeBackInEachInputsDtype) {
  Tensor a = vec({1, 2, 3}, DType::f32).requires_grad_();
  Tensor b = vec({4, 5, 6}, DType::f64).requires_grad_();
  Tensor out = a * b;
  EXPECT_EQ(out.dtype(), DType::f64);
  out.sum().backward();
  ASSERT_TRUE(a.grad().defined());
  EXPECT_EQ(a.grad().dtype(), DType::f32);
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(b.grad().dtype(), DType::f64);
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{1, 2, 3}));

  // a 0-d f64 operand of an f32 tensor: the result is f32, its gradient f64 (0-d, summed)
  Tensor x = vec({1, 2, 3}, DType::f32).requires_grad_();
  Tensor s = zero_d(2, DType::f64).requires_grad_();
  Tensor y = ember::sub(x, s);
  EXPECT_EQ(y.dtype(), DType::f32);
  ember::mul(y, x).sum().backward();  // d/ds = -sum(x) = -6
  EXPECT_EQ(s.grad().dtype(), DType::f64);
  EXPECT_EQ(s.grad().shape(), ember::Shape{});
  EXPECT_DOUBLE_EQ(s.grad().item<double>(), -6.0);
  EXPECT_EQ(x.grad().dtype(), DType::f32);

  // an integer operand takes no gradient; the float one gets its own dtype back
  Tensor w = vec({0.5, 1.5}, DType::f32).requires_grad_();
  Tensor n = vec({3, 4}, DType::i64);
  ember::where(vec({1, 0}, DType::boolean), n, w).sum().backward();
  EXPECT_EQ(w.grad().dtype(), DType::f32);
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{0, 1}));
  EXPECT_FALSE(n.grad().defined());

  // f16 and bf16 leaves, f32 result
  Tensor h = vec({1, 2}, DType::f16).requires_grad_();
  Tensor g = vec({3, 4}, DType::bf16).requires_grad_();
  ember::mul(h, g).sum().backward();
  EXPECT_EQ(h.grad().dtype(), DType::f16);
  EXPECT_EQ(g.grad().dtype(), DType::bf16);
  EXPECT_EQ(h.grad().to(DType::f32).to_vector<float>(), (std::vector<float>{3, 4}));
}

TEST(Promotion, SixteenBitFloatsComputeWhereTheCatalogueSaysSo) {
  // i32 with a 0-d f16 is f16, computed in f32 and rounded once
  Tensor s = ember::add(vec({1, 2}, DType::i32), zero_d(0.5, DType::f16));
  EXPECT_EQ(s.dtype(), DType::f16);
  EXPECT_EQ(s.to(DType::f32).to_vector<float>(), (std::vector<float>{1.5f, 2.5f}));
  // a comparison of a 16-bit float tensor with an integer one compares in bf16
  Tensor c = ember::lt(vec({1, 3}, DType::bf16), vec({2, 2}, DType::i32));
  EXPECT_EQ(c.dtype(), DType::boolean);
  EXPECT_EQ(c.to(DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{1, 0}));
}

TEST(Promotion, AResultTypeTheOpDoesNotComputeIsRefused) {
  // pow computes in floats only: i32 with i64 is i64
  std::string msg = error_of([] { ember::pow(vec({1}, DType::i32), vec({2}, DType::i64)); }, "pow");
  EXPECT_NE(msg.find("pow: unsupported dtype i64"), std::string::npos) << msg;
  msg = error_of([] { ember::maximum(vec({1}, DType::u8), vec({1}, DType::boolean)); }, "max");
  EXPECT_NE(msg.find("maximum: unsupported dtype u8"), std::string::npos) << msg;
  // an op the 16-bit floats do not run in says how to compute it in f32
  msg = error_of([] { ember::logsumexp(vec({1, 2}, DType::f16), {0}); }, "logsumexp");
  EXPECT_NE(msg.find("logsumexp: unsupported dtype f16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("AutocastGuard"), std::string::npos) << msg;
  // undefined operands and shapes are still named
  msg = error_of([] { ember::add(Tensor(), vec({1}, DType::f32)); }, "undefined");
  EXPECT_NE(msg.find("add: first input is an undefined tensor"), std::string::npos) << msg;
  msg = error_of([] { ember::mul(vec({1, 2}, DType::f32), vec({1, 2, 3}, DType::f64)); }, "shape");
  EXPECT_NE(msg.find("mul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3]"), std::string::npos) << msg;
  // where's condition must still be bool
  msg = error_of(
      [] { ember::where(vec({1}, DType::i32), vec({1}, DType::f32), vec({1}, DType::f64)); },
      "where");
  EXPECT_NE(msg.find("condition dtype i32"), std::string::npos) << msg;
}

TEST(Promotion, CompositesPromoteAllTheirOperands) {
  // clamp with tensor bounds: result_type of the three (i32, f32, 0-d i64) is f32
  Tensor c = ember::clamp(vec({-3, 0, 5}, DType::i32), vec({-1.5, -1.5, -1.5}, DType::f32),
                          zero_d(2, DType::i64));
  EXPECT_EQ(c.dtype(), DType::f32);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{-1.5f, 0.0f, 2.0f}));
  Tensor m = ember::addcmul(vec({1, 1}, DType::f32), vec({2, 3}, DType::i32),
                            vec({0.5, 0.5}, DType::f64), 2.0);
  EXPECT_EQ(m.dtype(), DType::f64);
  EXPECT_EQ(m.to_vector<double>(), (std::vector<double>{3, 4}));
  Tensor l = ember::lerp(vec({0, 0}, DType::f32), vec({2, 4}, DType::f64), 0.5);
  EXPECT_EQ(l.dtype(), DType::f64);
  EXPECT_EQ(l.to_vector<double>(), (std::vector<double>{1, 2}));
}

TEST(Promotion, IntegerTensorsInAbsSignClampAndPredicates) {
  constexpr double kMin = std::numeric_limits<int32_t>::min();
  Tensor x = vec({kMin, -2, 0, 7}, DType::i32);
  EXPECT_EQ(ember::abs(x).dtype(), DType::i32);
  // |MIN| wraps to MIN, as PyTorch's
  EXPECT_EQ(ember::abs(x).to_vector<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 2, 0, 7}));
  EXPECT_EQ(ember::sign(x).to_vector<int32_t>(), (std::vector<int32_t>{-1, -1, 0, 1}));
  EXPECT_EQ(ember::clamp(x, -1.0, 3.0).to_vector<int32_t>(), (std::vector<int32_t>{-1, -1, 0, 3}));
  // a fractional bound makes it f32; bounds beyond the dtype's range clamp nothing
  EXPECT_EQ(ember::clamp(x, -1.5, 3.0).dtype(), DType::f32);
  EXPECT_EQ(ember::clamp(x, -1e12, 1e12).to_vector<int32_t>(), x.to_vector<int32_t>());
  EXPECT_EQ(ember::clamp(x, std::nullopt, 0.0).to_vector<int32_t>(),
            (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -2, 0, 0}));
  EXPECT_EQ(ember::clamp_min(vec({-5, 5}, DType::i64), 0.0).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 5}));
  for (DType t : {DType::i32, DType::i64, DType::u8, DType::boolean}) {
    Tensor v = vec({0, 1, 1}, t);
    EXPECT_EQ(ember::isnan(v).dtype(), DType::boolean);
    EXPECT_FALSE(flag(ember::any(ember::isnan(v)))) << ember::dtype_name(t);
    EXPECT_FALSE(flag(ember::any(ember::isinf(v)))) << ember::dtype_name(t);
    EXPECT_TRUE(flag(ember::all(ember::isfinite(v)))) << ember::dtype_name(t);
  }
  // integer sums run in i64
  Tensor big = vec({2147483647.0, 2147483647.0}, DType::i32);
  EXPECT_EQ(ember::sum(big).dtype(), DType::i64);
  EXPECT_EQ(ember::sum(big).to_vector<int64_t>(), (std::vector<int64_t>{4294967294LL}));
  EXPECT_EQ(ember::nansum(big, {}, false).to_vector<int64_t>(),
            (std::vector<int64_t>{4294967294LL}));
  EXPECT_EQ(ember::cumsum(big, 0).to_vector<int64_t>(),
            (std::vector<int64_t>{2147483647LL, 4294967294LL}));
  // integer reductions and indices
  Tensor m = of({3, -1, 4, 1, -5, 9}, DType::i64, {2, 3});
  EXPECT_EQ(ember::amax(m, {1}, false).to_vector<int64_t>(), (std::vector<int64_t>{4, 9}));
  EXPECT_EQ(ember::min(m).to_vector<int64_t>(), (std::vector<int64_t>{-5}));
  auto [values, indices] = ember::max(m, int64_t{0}, false);
  EXPECT_EQ(values.to_vector<int64_t>(), (std::vector<int64_t>{3, -1, 9}));
  EXPECT_EQ(indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(ember::argmin(m, 1, false).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
}

}  // namespace

namespace {
std::vector<int64_t> bits(const Tensor& b) { return b.to(DType::i64).to_vector<int64_t>(); }
}  // namespace

// A number that is not a value of the tensor's integer dtype is compared exactly (in f64),
// never truncated or wrapped into that dtype first.
TEST(Promotion, ComparingAnIntegerTensorWithANumberIsExact) {
  for (DType dt : {DType::i32, DType::i64, DType::u8}) {
    SCOPED_TRACE(ember::dtype_name(dt));
    const Tensor x = vec({0, 2, 3}, dt);
    EXPECT_EQ(bits(ember::lt(x, 2.5)), (std::vector<int64_t>{1, 1, 0}));
    EXPECT_EQ(bits(ember::le(x, 2.5)), (std::vector<int64_t>{1, 1, 0}));
    EXPECT_EQ(bits(ember::gt(x, 2.5)), (std::vector<int64_t>{0, 0, 1}));
    EXPECT_EQ(bits(ember::ge(x, 2.5)), (std::vector<int64_t>{0, 0, 1}));
    EXPECT_EQ(bits(ember::eq(x, 2.5)), (std::vector<int64_t>{0, 0, 0}));
    EXPECT_EQ(bits(ember::ne(x, 2.5)), (std::vector<int64_t>{1, 1, 1}));
    EXPECT_EQ(bits(ember::eq(x, 2.0)), (std::vector<int64_t>{0, 1, 0}));
    EXPECT_EQ(bits(ember::lt(x, -0.5)), (std::vector<int64_t>{0, 0, 0}));  // u8 must not wrap
    EXPECT_EQ(bits(ember::lt(x, 1e12)), (std::vector<int64_t>{1, 1, 1}));  // nor overflow
    EXPECT_EQ(bits(ember::lt(x, std::numeric_limits<double>::quiet_NaN())),
              (std::vector<int64_t>{0, 0, 0}));
  }
  const Tensor b = vec({0, 1}, DType::boolean);
  EXPECT_EQ(bits(ember::lt(b, 0.5)), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(bits(ember::eq(b, 1.0)), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(bits(ember::lt(b, 2.0)), (std::vector<int64_t>{1, 1}));
  // 2^53 + 1 is no double: a whole number that is an i64 value compares in i64, exactly.
  const Tensor big = ember::from_vector<int64_t>({9007199254740993, 0}, {2});
  EXPECT_EQ(bits(ember::gt(big, 9007199254740992.0)), (std::vector<int64_t>{1, 0}));
}

// Note [In-place type promotion]: the op computes in the result type, which must be castable
// to the target's dtype; the target keeps its dtype.
TEST(Promotion, InPlaceOpsPromoteLikePyTorch) {
  // f32 target, f64 operand: computed in f64, rounded once into f32.
  Tensor x = vec({1.0, 2.0}, DType::f32);
  const Tensor y = vec({1e-8, 0.1}, DType::f64);
  x.add_(y);
  EXPECT_EQ(x.dtype(), DType::f32);
  EXPECT_EQ(x.to_vector<float>(),
            (std::vector<float>{static_cast<float>(1.0 + 1e-8), static_cast<float>(2.0 + 0.1)}));
  // i32 target, i64 operand: computed in i64, written back into i32.
  Tensor i = vec({5, -3}, DType::i32);
  i.mul_(vec({3, 2}, DType::i64));
  EXPECT_EQ(i.dtype(), DType::i32);
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{15, -6}));
  // A float target with an integer or bool operand.
  Tensor f = vec({1.5, 2.5}, DType::f32);
  f.mul_(vec({1, 0}, DType::boolean));
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{1.5f, 0.0f}));
  f.sub_(vec({2, 2}, DType::i64));
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{-0.5f, -2.0f}));
  // A 0-d f64 operand does not widen an f32 target's computation (result type f32).
  Tensor g = vec({1.0}, DType::f32);
  g.div_(zero_d(3.0, DType::f64));
  EXPECT_EQ(g.to_vector<float>(), (std::vector<float>{1.0f / 3.0f}));
  // Results the target cannot hold are refused, naming both dtypes, with the target unchanged.
  Tensor n = vec({4, 6}, DType::i64);
  const std::string e1 = error_of([&] { n.add_(vec({0.5, 0.5}, DType::f32)); });
  EXPECT_NE(e1.find("add_: the result type f32"), std::string::npos) << e1;
  EXPECT_NE(e1.find("in-place target's dtype i64"), std::string::npos) << e1;
  const std::string e2 = error_of([&] { n.div_(vec({2, 2}, DType::i64)); });
  EXPECT_NE(e2.find("div_: the result type f32"), std::string::npos) << e2;
  Tensor b = vec({1, 0}, DType::boolean);
  EXPECT_NE(error_of([&] {
              b.add_(vec({1, 1}, DType::i32));
            }).find("cannot be cast"),
            std::string::npos);
  EXPECT_EQ(n.to_vector<int64_t>(), (std::vector<int64_t>{4, 6}));
}
