// src/autograd/gradcheck.cpp — analytic gradients against f64 central differences.
#include <cmath>
#include <sstream>

#include "ember/autograd.hpp"
#include "ember/ops.hpp"
#include "ember/random.hpp"

namespace ember {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions o) {
  EMBER_CHECK(o.eps > 0.0, "gradcheck: eps ", o.eps, " (expected > 0)");
  // f64 leaves; the inputs that require grad are checked (every floating one if none does).
  bool any_requires = false;
  for (const Tensor& t : inputs) any_requires |= t.defined() && t.requires_grad();
  std::vector<Tensor> x;
  std::vector<size_t> checked;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !is_floating(t.dtype())) {
      x.push_back(t);
      continue;
    }
    Tensor c;
    {
      NoGradGuard g;
      c = t.detach().to(DType::f64).to(Device::cpu()).clone();
    }
    if (!any_requires || t.requires_grad()) {
      c.requires_grad_(true);
      checked.push_back(i);
    }
    x.push_back(c);
  }
  EMBER_CHECK(!checked.empty(),
              "gradcheck: no floating input to check (expected at least one f32/f64 input)");

  const RngState saved = get_rng_state();
  Tensor out = fn(x);
  EMBER_CHECK(out.defined() && out.requires_grad(),
              "gradcheck: the function's output does not depend on any checked input");
  // Fixed weights make every output element matter with a different coefficient.
  manual_seed(0x9e3779b97f4a7c15ull);
  Tensor w;
  {
    NoGradGuard g;
    w = randn(out.shape(), {.dtype = DType::f64});
  }
  set_rng_state(saved);
  Tensor loss = sum(mul(out.to(DType::f64), w));
  std::vector<Tensor> targets;
  for (size_t i : checked) targets.push_back(x[i]);
  std::vector<Tensor> analytic = grad({loss}, targets);

  auto objective = [&]() {
    NoGradGuard g;
    set_rng_state(saved);
    return sum(mul(fn(x).to(DType::f64), w)).item<double>();
  };
  for (size_t c = 0; c < checked.size(); ++c) {
    Tensor& in = x[checked[c]];
    const int64_t n = in.numel();
    std::vector<double> a = analytic[c].defined()
                                ? analytic[c].to_vector<double>()
                                : std::vector<double>(static_cast<size_t>(n), 0.0);
    double* p = static_cast<double*>(in.data_ptr());
    for (int64_t e = 0; e < n; ++e) {
      const double orig = p[e];
      p[e] = orig + o.eps;
      const double plus = objective();
      p[e] = orig - o.eps;
      const double minus = objective();
      p[e] = orig;
      const double numeric = (plus - minus) / (2.0 * o.eps);
      if (!(std::abs(a[e] - numeric) <= o.atol + o.rtol * std::abs(numeric))) {
        std::ostringstream m;
        m << "gradcheck: input " << checked[c] << " (shape " << in.shape().to_string()
          << "), element " << e << ": analytic " << a[e] << " vs numeric " << numeric << " (atol "
          << o.atol << ", rtol " << o.rtol << ")";
        set_rng_state(saved);
        return {false, m.str()};
      }
    }
  }
  set_rng_state(saved);
  return {true, ""};
}

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  return gradcheck(fn, inputs, GradcheckOptions{eps, atol, rtol});
}

}  // namespace ember
