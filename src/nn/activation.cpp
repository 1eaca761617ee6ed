// src/nn/activation.cpp — the activation modules with options (ember/nn/activation.hpp), built
// from the ops of ember/ops.hpp (no backward of their own).
#include "ember/nn/activation.hpp"

#include "ember/nn/init.hpp"
#include "py_repr.hpp"

namespace ember::nn {

std::string SoftplusImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

std::string LeakyReLUImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

std::string ELUImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

HardtanhImpl::HardtanhImpl(HardtanhOptions o) : options_(o) {
  EMBER_CHECK(o.max_val > o.min_val, "Hardtanh: max_val ", o.max_val,
              " must be greater than min_val ", o.min_val);
}

std::string HardtanhImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

PReLUImpl::PReLUImpl(PReLUOptions o) : options_(o) {
  check_options(o, "PReLU");
  weight_ = register_parameter("weight", full({o.num_parameters}, o.init));
}

Tensor PReLUImpl::forward(const Tensor& x) {
  EMBER_CHECK(x.defined(), "PReLU: input is an undefined tensor");
  const int64_t num_parameters = options_.num_parameters;
  if (num_parameters > 1) {
    EMBER_CHECK(x.dim() >= 2 && x.size(1) == num_parameters,
                "PReLU(num_parameters=", num_parameters, "): input shape ", x.shape().to_string(),
                " (expected ", num_parameters,
                " channels in dim 1 of an input of at least 2 dims)");
  }
  return prelu(x, weight_);
}

std::string PReLUImpl::extra_repr() const {
  return "num_parameters=" + std::to_string(options_.num_parameters);
}

GELUImpl::GELUImpl(GELUOptions o) : options_(std::move(o)) {
  const std::string& a = options_.approximate;
  EMBER_CHECK(a == "none" || a == "tanh", "GELU: approximate '", a,
              "' (expected \"none\" or \"tanh\")");
}

std::string GELUImpl::extra_repr() const {
  const std::string& a = options_.approximate;
  return a == "none" ? "" : "approximate='" + a + "'";
}

CELUImpl::CELUImpl(CELUOptions o) : options_(o) {
  EMBER_CHECK(o.alpha != 0.0, "CELU: alpha is 0 (expected a non-zero alpha)");
}

std::string CELUImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

std::string HardshrinkImpl::extra_repr() const { return pyrepr::py_float(options_.lambd); }

SoftshrinkImpl::SoftshrinkImpl(ShrinkOptions o) : options_(o) {
  EMBER_CHECK(o.lambd >= 0.0, "Softshrink: lambd ", o.lambd, " (expected >= 0)");
}

std::string SoftshrinkImpl::extra_repr() const { return pyrepr::py_float(options_.lambd); }

std::string ThresholdImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

RReLUImpl::RReLUImpl(RReLUOptions o) : options_(o) {
  EMBER_CHECK(o.lower <= o.upper, "RReLU: lower bound ", o.lower, " is above upper bound ",
              o.upper);
}

std::string RReLUImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

Tensor GLUImpl::forward(const Tensor& x) {
  const int64_t dim = options_.dim;
  EMBER_CHECK(x.defined() && x.dim() > 0, "GLU: input shape ",
              x.defined() ? x.shape().to_string() : "undefined", " (expected at least 1 dim)");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  EMBER_CHECK(d >= 0 && d < x.dim() && x.size(d) % 2 == 0, "GLU(dim=", dim, "): input shape ",
              x.shape().to_string(), " (expected dim ", dim, " to exist and have an even size)");
  return glu(x, dim);
}

}  // namespace ember::nn
