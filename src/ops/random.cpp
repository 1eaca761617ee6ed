// src/ops/random.cpp — the random family: rand, randn, randint and dropout. Every draw takes
// its numbers from the counter-based generator (Philox, src/kernels/random.hpp) at the
// offset advance_rng() hands out, so each device gives the same stream for a seed (the
// generator's state: src/core/random.cpp).
#include "ember/random.hpp"

#include <cmath>

#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;
using ops::device_or_default;
using ops::dtype_or_default;
using ops::finish;

Tensor rand(const Shape& shape, TensorOptions o, double low, double high) {
  EMBER_CHECK(std::isfinite(low) && std::isfinite(high) && low <= high, op_name(Op::rand),
              ": range [low, high) = [", low, ", ", high,
              ") (expected finite bounds with low <= high)");
  Tensor t = ops::make_tensor(shape, dtype_or_default(o), device_or_default(o));
  const ops::OpScope op_scope(Op::rand, t);
  ops::check_supported(Op::rand, t, "output");
  const uint64_t offset = advance_rng(static_cast<uint64_t>(t.numel()));
  ops::backend_of(t).uniform(ops::view_of(t), get_rng_state().seed, offset, low, high);
  return finish(t, o);
}

Tensor randn(const Shape& shape, TensorOptions o, double mean, double std) {
  EMBER_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0.0, op_name(Op::randn),
              ": mean ", mean, " and std ", std, " (expected a finite mean and std >= 0)");
  Tensor t = ops::make_tensor(shape, dtype_or_default(o), device_or_default(o));
  const ops::OpScope op_scope(Op::randn, t);
  ops::check_supported(Op::randn, t, "output");
  const uint64_t offset = advance_rng(static_cast<uint64_t>(t.numel()));
  ops::backend_of(t).normal(ops::view_of(t), get_rng_state().seed, offset, mean, std);
  return finish(t, o);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions o) {
  EMBER_CHECK(high > low, "randint: empty range [", low, ", ", high, ") (expected high > low)");
  Device dev = device_or_default(o);
  Tensor u = rand(shape, {.dtype = DType::f64, .device = dev}, static_cast<double>(low),
                  static_cast<double>(high));
  // floor via the i64 cast (values are >= low); clamp guards the rounding edge at `high`.
  Tensor r = clamp(u, static_cast<double>(low), static_cast<double>(high - 1)).to(DType::i64);
  const DType want = o.dtype.value_or(DType::i64);
  return want == DType::i64 ? r : r.to(want);
}

Tensor dropout(const Tensor& x, double p, bool training) {
  ops::check_defined("dropout", x);
  EMBER_CHECK(p >= 0.0 && p <= 1.0, op_name(Op::dropout), ": probability ", p,
              " (expected 0 <= p <= 1)");
  if (!training || p == 0.0) return x;
  const ops::OpScope op_scope(Op::dropout, x);
  ops::check_supported(Op::dropout, x);
  if (p == 1.0) return mul(x, 0.0);
  Tensor xc = x.contiguous();
  Tensor out = ops::make_tensor(x.shape(), x.dtype(), x.device());
  Tensor mask = ops::make_tensor(x.shape(), x.dtype(), x.device());
  const RngState rng = get_rng_state();
  const uint64_t offset = advance_rng(static_cast<uint64_t>(x.numel()));
  ops::backend_of(x).dropout(ops::view_of(out), ops::view_of(mask), ops::view_of(xc), p, rng.seed,
                             offset);
  if (autograd::needs_grad(x))
    autograd::record(
        Op::dropout, out, {&x},
        [sm = SavedTensor(mask)](const Tensor& g, GradList& gi) { gi[0] = mul(g, sm.get()); });
  return out;
}

}  // namespace ember
