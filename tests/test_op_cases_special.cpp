// tests/test_op_cases_special.cpp — the op test driver's cases for issue 32's elementwise math
// and activations (see tests/op_cases.hpp); their PyTorch references are
// tests/fixture_cases_special.py, written to tests/data/op_fixtures_special.json by
// `/usr/bin/python3 tests/gen_fixtures.py special`.
#include "ember/ops_math.hpp"
#include "op_cases.hpp"

namespace ember_test {

using ember::Tensor;

void add_special_cases(OpTable& t) {
  using UnaryFn = Tensor (*)(const Tensor&);
  const std::pair<const char*, UnaryFn> unary[] = {
      {"asinh", ember::asinh},
      {"acosh", ember::acosh},
      {"atanh", ember::atanh},
      {"lgamma", ember::lgamma},
      {"lgamma_negative", ember::lgamma},
      {"digamma", ember::digamma},
      {"digamma_negative", ember::special::psi},
      {"i0", ember::i0},
      {"i0_large", ember::special::i0},
      {"special_i0e", ember::special::i0e},
      {"special_i0e_large", ember::special::i0e},
      {"special_i1", ember::special::i1},
      {"special_i1_large", ember::special::i1},
      {"special_i1e", ember::special::i1e},
      {"special_i1e_large", ember::special::i1e},
      {"erfcx", ember::special::erfcx},
      {"erfcx_large", ember::special::erfcx},
      {"sinc", ember::sinc},
      {"signbit", ember::signbit},
      {"fix", ember::fix},
      {"softsign", ember::softsign},
      {"tanhshrink", ember::tanhshrink},
      {"special_entr", ember::special::entr},
      {"special_entr_edges", ember::special::entr},
      {"special_ndtr", ember::special::ndtr},
      {"special_ndtri", ember::special::ndtri},
      {"special_log_ndtr", ember::special::log_ndtr},
      {"special_log_ndtr_tail", ember::special::log_ndtr}};
  for (const auto& [name, fn] : unary) t[name] = [fn](Fixture& f) { return fn(f["x"]); };

  for (const char* name : {"polygamma_n0", "polygamma_n1", "polygamma_n2", "polygamma_n3"})
    t[name] = [](Fixture& f) { return ember::polygamma(f.attr_int("n"), f["x"]); };
  t["mvlgamma_p3"] = [](Fixture& f) { return ember::mvlgamma(f["x"], f.attr_int("p")); };
  t["logit"] = [](Fixture& f) { return ember::logit(f["x"]); };
  t["logit_eps"] = [](Fixture& f) { return ember::special::logit(f["x"], f.attr_double("eps")); };
  t["frexp_mantissa"] = [](Fixture& f) { return ember::frexp(f["x"]).first; };
  t["frexp_exponent"] = [](Fixture& f) { return ember::frexp(f["x"]).second; };

  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  const std::pair<const char*, BinaryFn> binary[] = {
      {"xlogy", ember::xlogy},
      {"xlogy_bcast", ember::special::xlogy},
      {"special_xlog1py", ember::special::xlog1py},
      {"hypot", ember::hypot},
      {"hypot_bcast", ember::hypot},
      {"copysign", ember::copysign},
      {"nextafter", ember::nextafter},
      {"logaddexp", ember::logaddexp},
      {"logaddexp_bcast", ember::logaddexp},
      {"logaddexp2", ember::logaddexp2},
      {"special_zeta", ember::special::zeta},
      {"gcd", ember::gcd},
      {"lcm", ember::lcm},
      {"bitwise_and", ember::bitwise_and},
      {"bitwise_and_bool", ember::bitwise_and},
      {"bitwise_or", ember::bitwise_or},
      {"bitwise_or_bool", ember::bitwise_or},
      {"bitwise_xor", ember::bitwise_xor},
      {"bitwise_xor_bool", ember::bitwise_xor},
      {"bitwise_left_shift", ember::bitwise_left_shift},
      {"bitwise_right_shift", ember::bitwise_right_shift}};
  for (const auto& [name, fn] : binary) t[name] = [fn](Fixture& f) { return fn(f["a"], f["b"]); };
  for (const char* name : {"bitwise_not", "bitwise_not_bool"})
    t[name] = [](Fixture& f) { return ember::bitwise_not(f["x"]); };

  t["ldexp"] = [](Fixture& f) { return ember::ldexp(f["a"], f["b"]); };
  t["float_power"] = [](Fixture& f) { return ember::float_power(f["a"], f["b"]); };
  t["float_power_scalar"] = [](Fixture& f) {
    return ember::float_power(f["x"], f.attr_double("p"));
  };
  t["heaviside"] = [](Fixture& f) { return ember::heaviside(f["x"], f["values"]); };
  t["isclose"] = [](Fixture& f) {
    return ember::isclose(f["a"], f["b"], f.attr_double("close_rtol"), f.attr_double("close_atol"));
  };

  t["celu"] = [](Fixture& f) { return ember::celu(f["x"], f.attr_double("alpha")); };
  t["hardshrink"] = [](Fixture& f) { return ember::hardshrink(f["x"], f.attr_double("lambd")); };
  t["softshrink"] = [](Fixture& f) { return ember::softshrink(f["x"], f.attr_double("lambd")); };
  t["threshold"] = [](Fixture& f) {
    return ember::threshold(f["x"], f.attr_double("threshold"), f.attr_double("value"));
  };
  t["rrelu_eval"] = [](Fixture& f) {
    return ember::rrelu(f["x"], f.attr_double("lower"), f.attr_double("upper"), false);
  };
}

}  // namespace ember_test
