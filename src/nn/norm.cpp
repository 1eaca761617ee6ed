// src/nn/norm.cpp — BatchNorm1d/2d, LayerNorm and RMSNorm modules over ember::batch_norm,
// ember::layer_norm (src/ops/nn.cpp) and ember::rms_norm, with PyTorch's state and update rules.
#include "ember/nn/norm.hpp"

#include "core/profiler.hpp"
#include "ember/autograd.hpp"
#include "ember/ops_nn.hpp"
#include "ember/profiler.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

// ---- BatchNorm ----

BatchNormImpl::BatchNormImpl(BatchNormOptions o, const char* name) : options_(o) {
  check_options(o, name);
  const int64_t c = o.num_features;
  // Registration order = PyTorch's state_dict order.
  if (o.affine) {
    weight_ = register_parameter("weight", ones({c}));
    bias_ = register_parameter("bias", zeros({c}));
  }
  if (o.track_running_stats) {
    running_mean_ = register_buffer("running_mean", zeros({c}));
    running_var_ = register_buffer("running_var", ones({c}));
    num_batches_tracked_ = register_buffer("num_batches_tracked", zeros({}, {.dtype = DType::i64}));
  }
}

void BatchNormImpl::reset_running_stats() {
  if (!options_.track_running_stats) return;
  NoGradGuard g;
  running_mean_.fill_(0.0);
  running_var_.fill_(1.0);
  num_batches_tracked_.fill_(0.0);
}

void BatchNormImpl::set_momentum(std::optional<double> momentum) {
  EMBER_CHECK(!momentum || (*momentum >= 0.0 && *momentum <= 1.0), type_name(), ": momentum ",
              momentum.value_or(0.0), " (expected 0 <= momentum <= 1, or none)");
  options_.momentum = momentum;
}

Tensor BatchNormImpl::forward(const Tensor& x) { return norm_forward(x, Tensor(), false); }

Tensor BatchNormImpl::forward_relu(const Tensor& x, const Tensor& residual) {
  // Forward hooks see the layer's own input and output: then the add and the ReLU come after.
  if (has_forward_hooks()) {
    const Tensor y = call_forward(*this, x);
    return relu(residual.defined() ? add(y, residual) : y);
  }
  const core::profiler::ModuleFrame frame(this, detail::profiling() ? type_name() : std::string());
  refresh_parametrizations();
  return norm_forward(x, residual, true);
}

Tensor BatchNormImpl::forward_with_epilogue(const Tensor& x, Activation activation) {
  if (activation != Activation::relu) return Tensor();
  refresh_parametrizations();
  return norm_forward(x, Tensor(), true);
}

Tensor BatchNormImpl::norm_forward(const Tensor& x, const Tensor& residual, bool relu_after) {
  EMBER_CHECK(x.defined(), type_name(), ": input is an undefined tensor (expected a tensor)");
  check_input(x);
  EMBER_CHECK(x.shape()[1] == options_.num_features, type_name(), "(", options_.num_features,
              "): input has ", x.shape()[1], " channels, expected ", options_.num_features,
              " (input shape ", x.shape().to_string(), ")");
  const bool track = options_.track_running_stats;
  double factor = options_.momentum.value_or(0.0);
  if (is_training() && track) {
    NoGradGuard g;
    Tensor(num_batches_tracked_)
        .add_(ones({}, {.dtype = DType::i64, .device = num_batches_tracked_.device()}));
    // momentum none: the running stats are the plain average of every batch so far
    if (!options_.momentum)
      factor = 1.0 / static_cast<double>(num_batches_tracked_.item<int64_t>());
  }
  // Batch statistics in training, and always when no running stats are kept.
  const bool use_batch_stats = is_training() || !track;
  if (relu_after)
    return batch_norm_relu(x, track ? running_mean_ : Tensor(), track ? running_var_ : Tensor(),
                           weight_, bias_, use_batch_stats, factor, options_.eps, residual);
  return batch_norm(x, track ? running_mean_ : Tensor(), track ? running_var_ : Tensor(), weight_,
                    bias_, use_batch_stats, factor, options_.eps);
}

json BatchNormImpl::options() const { return options_json(options_); }

std::string BatchNormImpl::extra_repr() const {
  const BatchNormOptions& o = options_;
  return std::to_string(o.num_features) + ", eps=" + pyrepr::py_float(o.eps) +
         ", momentum=" + (o.momentum ? pyrepr::py_float(*o.momentum) : "None") +
         ", affine=" + pyrepr::py_bool(o.affine) +
         ", track_running_stats=" + pyrepr::py_bool(o.track_running_stats);
}

void BatchNorm1dImpl::check_input(const Tensor& x) const {
  EMBER_CHECK(x.dim() == 2 || x.dim() == 3, "BatchNorm1d: expected 2D or 3D input (got ", x.dim(),
              "D input of shape ", x.shape().to_string(), ")");
}

void BatchNorm2dImpl::check_input(const Tensor& x) const {
  EMBER_CHECK(x.dim() == 4, "BatchNorm2d: expected 4D input (got ", x.dim(), "D input of shape ",
              x.shape().to_string(), ")");
}

// ---- LayerNorm ----

LayerNormImpl::LayerNormImpl(LayerNormOptions o) : options_(o) {
  EMBER_CHECK(!o.normalized_shape.empty(),
              "LayerNorm: normalized_shape is empty (expected at least one dim)");
  for (int64_t d : o.normalized_shape)
    EMBER_CHECK(d > 0, "LayerNorm: normalized_shape ", o.normalized_shape.to_string(),
                " (expected every size > 0)");
  if (o.elementwise_affine) {
    weight_ = register_parameter("weight", ones(o.normalized_shape));
    if (o.bias) bias_ = register_parameter("bias", zeros(o.normalized_shape));
  } else {
    options_.bias = false;
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return layer_norm(x, options_.normalized_shape, weight_, bias_, options_.eps);
}

json LayerNormImpl::options() const { return options_json(options_); }

std::string LayerNormImpl::extra_repr() const {
  const LayerNormOptions& o = options_;
  return pyrepr::py_tuple(o.normalized_shape) + ", eps=" + pyrepr::py_float(o.eps) +
         ", elementwise_affine=" + pyrepr::py_bool(o.elementwise_affine);
}

// ---- RMSNorm ----

RMSNormImpl::RMSNormImpl(RMSNormOptions o) : options_(o) {
  EMBER_CHECK(!o.normalized_shape.empty(),
              "RMSNorm: normalized_shape is empty (expected at least one dim)");
  for (int64_t d : o.normalized_shape)
    EMBER_CHECK(d > 0, "RMSNorm: normalized_shape ", o.normalized_shape.to_string(),
                " (expected every size > 0)");
  EMBER_CHECK(!o.eps || *o.eps >= 0.0, "RMSNorm: eps ", o.eps.value_or(0.0), " (expected >= 0)");
  if (o.elementwise_affine) weight_ = register_parameter("weight", ones(o.normalized_shape));
}

Tensor RMSNormImpl::forward(const Tensor& x) {
  const Shape& ns = options_.normalized_shape;
  const int64_t k = ns.size();
  bool fits = x.defined() && x.dim() >= k;
  for (int64_t i = 0; fits && i < k; ++i) fits = x.size(x.dim() - k + i) == ns[i];
  EMBER_CHECK(fits, "RMSNorm(", pyrepr::py_tuple(ns), "): input shape ",
              x.defined() ? x.shape().to_string() : "undefined", " (expected trailing dims ",
              ns.to_string(), ")");
  return rms_norm(x, ns, weight_, options_.eps);  // one fused kernel per direction
}

json RMSNormImpl::options() const { return options_json(options_); }

std::string RMSNormImpl::extra_repr() const {
  return pyrepr::py_tuple(options_.normalized_shape) +
         ", eps=" + (options_.eps ? pyrepr::py_float(*options_.eps) : "None") +
         ", elementwise_affine=" + pyrepr::py_bool(options_.elementwise_affine);
}

// ---- LocalResponseNorm ----

LocalResponseNormImpl::LocalResponseNormImpl(LocalResponseNormOptions o) : options_(o) {
  check_options(o, "LocalResponseNorm");
}

Tensor LocalResponseNormImpl::forward(const Tensor& x) {
  const LocalResponseNormOptions& o = options_;
  return local_response_norm(x, o.size, o.alpha, o.beta, o.k);
}

std::string LocalResponseNormImpl::extra_repr() const {  // "3, alpha=0.0001, beta=0.75, k=1.0"
  const LocalResponseNormOptions& o = options_;
  return std::to_string(o.size) + ", alpha=" + pyrepr::py_float(o.alpha) +
         ", beta=" + pyrepr::py_float(o.beta) + ", k=" + pyrepr::py_float(o.k);
}

}  // namespace ember::nn
