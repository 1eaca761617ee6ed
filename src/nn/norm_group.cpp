// src/nn/norm_group.cpp — GroupNorm and InstanceNorm1d/2d (instance norm is group norm with one
// channel per group), composed from layer_norm, mean, var and rsqrt (src/ops), so autograd
// supplies every backward.
//
// GroupNorm and the instance statistics both reduce to one layer_norm over the last dim of a
// reshaped view: [N, C, *] -> [N, G, C/G·*] (groups) or [N, C, *] (instances).
#include "ember/autograd.hpp"
#include "ember/nn/norm.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

namespace {

// [1, C, 1, ..., 1] of rank `rank`: a per-channel vector that broadcasts over [N, C, *].
Tensor per_channel(const Tensor& v, int64_t rank) {
  std::vector<int64_t> s(static_cast<size_t>(rank), 1);
  s[1] = v.numel();
  return v.reshape(Shape(s));
}

// A channels_last (3d) input's result in its format (Note [Memory formats] in
// src/core/tensor.cpp): the statistics run on the grouped rows, and the normalised result is
// transposed back once so the format carries to the next layer (the affine keeps it).
Tensor in_format_of(const Tensor& x, const Tensor& y) {
  const MemoryFormat format = x.suggest_memory_format();
  return format == MemoryFormat::contiguous ? y : y.contiguous(format);
}

}  // namespace

// ---- GroupNorm ----

GroupNormImpl::GroupNormImpl(GroupNormOptions o) : options_(o) {
  check_options(o, "GroupNorm");
  EMBER_CHECK(o.num_channels % o.num_groups == 0, "GroupNorm: num_channels ", o.num_channels,
              " is not divisible by num_groups ", o.num_groups,
              " (expected num_channels % num_groups == 0)");
  if (o.affine) {
    weight_ = register_parameter("weight", ones({o.num_channels}));
    bias_ = register_parameter("bias", zeros({o.num_channels}));
  }
}

Tensor GroupNormImpl::forward(const Tensor& x) {
  const GroupNormOptions& o = options_;
  EMBER_CHECK(x.defined() && x.dim() >= 2 && x.size(1) == o.num_channels, "GroupNorm(",
              o.num_groups, ", ", o.num_channels, "): input shape ",
              x.defined() ? x.shape().to_string() : "undefined", " (expected [N, ", o.num_channels,
              ", *] with at least 2 dims)");
  const int64_t n = x.size(0);
  const Tensor grouped = x.reshape({n, o.num_groups, -1});
  Tensor y = layer_norm(grouped, {grouped.size(2)}, Tensor(), Tensor(), o.eps).reshape(x.shape());
  y = in_format_of(x, y);
  if (o.affine) y = add(mul(y, per_channel(weight_, x.dim())), per_channel(bias_, x.dim()));
  return y;
}

json GroupNormImpl::options() const { return options_json(options_); }

std::string GroupNormImpl::extra_repr() const {
  return std::to_string(options_.num_groups) + ", " + std::to_string(options_.num_channels) +
         ", eps=" + pyrepr::py_float(options_.eps) + ", affine=" + pyrepr::py_bool(options_.affine);
}

// ---- InstanceNorm ----

InstanceNormImpl::InstanceNormImpl(InstanceNormOptions o, int spatial_dims, const char* name)
    : options_(o), spatial_dims_(spatial_dims) {
  check_options(o, name);
  const int64_t c = o.num_features;
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

Tensor InstanceNormImpl::forward(const Tensor& x) {
  const InstanceNormOptions& o = options_;
  const int64_t batched_rank = spatial_dims_ + 2;
  EMBER_CHECK(x.defined() && (x.dim() == batched_rank || x.dim() == batched_rank - 1), type_name(),
              ": expected ", batched_rank - 1, "D (unbatched) or ", batched_rank, "D input (got ",
              x.defined() ? std::to_string(x.dim()) + "D input of shape " : "",
              x.defined() ? x.shape().to_string() : "an undefined tensor", ")");
  const bool unbatched = x.dim() == batched_rank - 1;
  const Tensor xb = unbatched ? x.unsqueeze(0) : x;
  const int64_t n = xb.size(0), c = xb.size(1);
  // Without affine or running statistics num_features is not used (PyTorch only warns).
  EMBER_CHECK(c == o.num_features || (!o.affine && !o.track_running_stats), type_name(), "(",
              o.num_features, "): input has ", c, " channels, expected ", o.num_features,
              " (input shape ", x.shape().to_string(), ")");
  Tensor y;
  if (is_training() || !o.track_running_stats) {
    const Tensor rows = xb.reshape({n, c, -1});
    // One position has variance 0: every output would be 0 and the statistics meaningless.
    EMBER_CHECK(!is_training() || rows.size(2) > 1, type_name(),
                ": expected more than 1 spatial element when training (got input shape ",
                x.shape().to_string(), ")");
    y = layer_norm(rows, {rows.size(2)}, Tensor(), Tensor(), o.eps).reshape(xb.shape());
    if (is_training() && o.track_running_stats) {
      // PyTorch runs batch_norm on [1, N·C, *] with the running stats repeated N times, then
      // averages them back: the new stats are the batch mean of the per-instance updates.
      NoGradGuard g;
      const Tensor d = rows.detach();
      const Tensor m = mean(mean(d, {2}), {0}), v = mean(var(d, {2}, 1), {0});
      Tensor(running_mean_).mul_(1.0 - o.momentum).add_(m.to(running_mean_.dtype()), o.momentum);
      Tensor(running_var_).mul_(1.0 - o.momentum).add_(v.to(running_var_.dtype()), o.momentum);
    }
  } else {
    const int64_t rank = xb.dim();
    const Tensor rm = per_channel(running_mean_, rank).to(xb.dtype());
    const Tensor rv = per_channel(running_var_, rank).to(xb.dtype());
    y = mul(sub(xb, rm), rsqrt(add(rv, o.eps)));
  }
  y = in_format_of(xb, y);
  if (o.affine) y = add(mul(y, per_channel(weight_, y.dim())), per_channel(bias_, y.dim()));
  return unbatched ? y.squeeze(0) : y;
}

json InstanceNormImpl::options() const { return options_json(options_); }

std::string InstanceNormImpl::extra_repr() const {
  const InstanceNormOptions& o = options_;
  return std::to_string(o.num_features) + ", eps=" + pyrepr::py_float(o.eps) +
         ", momentum=" + pyrepr::py_float(o.momentum) + ", affine=" + pyrepr::py_bool(o.affine) +
         ", track_running_stats=" + pyrepr::py_bool(o.track_running_stats);
}

}  // namespace ember::nn
