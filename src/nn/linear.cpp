// src/nn/linear.cpp — Linear and Bilinear (ember/nn/linear.hpp).
#include "ember/nn/linear.hpp"

#include <cmath>

#include "core/profiler.hpp"
#include "ember/nn/init.hpp"
#include "ember/profiler.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

LinearImpl::LinearImpl(LinearOptions o) : options_(o) {
  check_options(o, "Linear");
  weight_ =
      register_parameter("weight", init::kaiming_uniform_default({o.out_features, o.in_features}));
  if (o.bias) bias_ = register_parameter("bias", init::bias_default(o.out_features, o.in_features));
}

Tensor LinearImpl::forward(const Tensor& x) { return forward(x, Activation::none); }

namespace {
void check_features(const LinearOptions& o, const Tensor& x) {
  EMBER_CHECK(x.dim() >= 1 && x.shape().at(-1) == o.in_features,
              "Linear(in_features=", o.in_features, ", out_features=", o.out_features,
              "): input shape ", x.shape().to_string(), " has ", x.dim() ? x.shape().at(-1) : 0,
              " features in its last dim (expected ", o.in_features, ")");
}
}  // namespace

Tensor LinearImpl::forward(const Tensor& x, Activation activation) {
  refresh_parametrizations();
  check_features(options_, x);
  return activation == Activation::none ? linear(x, weight_, bias_)
                                        : linear(x, weight_, bias_, activation);
}

Tensor LinearImpl::forward(const Tensor& x, const Tensor& residual) {
  // Forward hooks see the layer's own input and output: then the add comes after them.
  if (has_forward_hooks()) return add(residual, call_forward(*this, x));
  const core::profiler::ModuleFrame frame(this, detail::profiling() ? type_name() : std::string());
  refresh_parametrizations();
  check_features(options_, x);
  return linear(x, weight_, bias_, residual);
}

void LinearImpl::rebind_parameter(const std::string& name, const Tensor& param) {
  (name == "weight" ? weight_ : bias_) = param;  // tie() checked the name and the shape
}

json LinearImpl::options() const { return options_json(options_); }

std::string LinearImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

BilinearImpl::BilinearImpl(BilinearOptions o) : options_(o) {
  check_options(o, "Bilinear");
  // PyTorch's reset_parameters: bound = 1/√in1_features for the weight and the bias.
  const double bound = 1.0 / std::sqrt(static_cast<double>(o.in1_features));
  weight_ = register_parameter(
      "weight", init::uniform({o.out_features, o.in1_features, o.in2_features}, bound));
  if (o.bias) bias_ = register_parameter("bias", init::uniform({o.out_features}, bound));
}

Tensor BilinearImpl::forward(const Tensor&) {
  detail::throw_error(
      "Bilinear: takes two inputs (call forward(x1, x2) or bilinear(x1, x2), not one tensor)");
}

Tensor BilinearImpl::forward(const Tensor& x1, const Tensor& x2) {
  refresh_parametrizations();
  const BilinearOptions& o = options_;
  EMBER_CHECK(x1.defined() && x2.defined() && x1.dim() >= 1 && x2.dim() == x1.dim() &&
                  x1.size(-1) == o.in1_features && x2.size(-1) == o.in2_features,
              "Bilinear(in1_features=", o.in1_features, ", in2_features=", o.in2_features,
              ", out_features=", o.out_features, "): input shapes ",
              x1.defined() ? x1.shape().to_string() : "undefined", " and ",
              x2.defined() ? x2.shape().to_string() : "undefined", " (expected [.., ",
              o.in1_features, "] and [.., ", o.in2_features, "] with the same leading dims)");
  for (int64_t i = 0; i + 1 < x1.dim(); ++i)
    EMBER_CHECK(x1.size(i) == x2.size(i), "Bilinear: input shapes ", x1.shape().to_string(),
                " and ", x2.shape().to_string(), " differ in their leading dims");
  // y[n, o] = Σ_ij x1[n, i]·W[o, i, j]·x2[n, j]: one GEMM x1 · W' with W' [in1, out·in2],
  // then a product with x2 summed over j.
  std::vector<int64_t> lead;
  for (int64_t i = 0; i + 1 < x1.dim(); ++i) lead.push_back(x1.size(i));
  const Tensor a = x1.reshape({-1, o.in1_features});
  const Tensor b = x2.reshape({-1, 1, o.in2_features});
  const Tensor w =
      weight_.permute({1, 0, 2}).reshape({o.in1_features, o.out_features * o.in2_features});
  Tensor y = sum(mul(matmul(a, w).reshape({-1, o.out_features, o.in2_features}), b), {2});
  if (bias_.defined()) y = add(y, bias_);
  lead.push_back(o.out_features);
  return y.reshape(Shape(lead));
}

json BilinearImpl::options() const { return options_json(options_); }

std::string BilinearImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

}  // namespace ember::nn
