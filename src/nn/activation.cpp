// src/nn/activation.cpp — the parametrised activation modules, Unflatten and Bilinear, built
// from the ops of ember/ops.hpp (no backward of their own).
#include "ember/nn/activation.hpp"

#include <cmath>

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

Tensor GLUImpl::forward(const Tensor& x) {
  const int64_t dim = options_.dim;
  EMBER_CHECK(x.defined() && x.dim() > 0, "GLU: input shape ",
              x.defined() ? x.shape().to_string() : "undefined", " (expected at least 1 dim)");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  EMBER_CHECK(d >= 0 && d < x.dim() && x.size(d) % 2 == 0, "GLU(dim=", dim, "): input shape ",
              x.shape().to_string(), " (expected dim ", dim, " to exist and have an even size)");
  return glu(x, dim);
}

UnflattenImpl::UnflattenImpl(UnflattenOptions options) : options_(std::move(options)) {
  const Shape& sizes = options_.unflattened_size;
  EMBER_CHECK(!sizes.empty(), "Unflatten: unflattened_size is empty (expected at least one size)");
  int inferred = 0;
  for (int64_t s : sizes) {
    EMBER_CHECK(s > 0 || s == -1, "Unflatten: unflattened_size ", sizes.to_string(),
                " (expected sizes > 0, or one -1)");
    inferred += s == -1;
  }
  EMBER_CHECK(inferred <= 1, "Unflatten: unflattened_size ", sizes.to_string(),
              " has more than one -1");
}

Tensor UnflattenImpl::forward(const Tensor& x) {
  const int64_t dim = options_.dim;
  const Shape& sizes = options_.unflattened_size;
  EMBER_CHECK(x.defined() && x.dim() > 0, "Unflatten: input is undefined or 0-d");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  EMBER_CHECK(d >= 0 && d < x.dim(), "Unflatten(dim=", dim, "): input shape ",
              x.shape().to_string(), " has no dim ", dim);
  int64_t known = 1;
  bool infer = false;
  for (int64_t s : sizes) {
    if (s == -1)
      infer = true;
    else
      known *= s;
  }
  const int64_t n = x.size(d);
  EMBER_CHECK(infer ? n % known == 0 : n == known, "Unflatten(dim=", dim,
              ", unflattened_size=", pyrepr::py_tuple(sizes), "): input shape ",
              x.shape().to_string(), " has ", n, " elements in dim ", dim, " (expected ",
              infer ? "a multiple of " : "", known, ")");
  std::vector<int64_t> shape;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i != d) {
      shape.push_back(x.size(i));
      continue;
    }
    for (int64_t s : sizes) shape.push_back(s == -1 ? n / known : s);
  }
  return x.reshape(Shape(shape));
}

std::string UnflattenImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

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
