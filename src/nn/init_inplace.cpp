// src/nn/init_inplace.cpp — torch.nn.init's in-place initialisers (uniform_, normal_,
// trunc_normal_, constant_/ones_/zeros_, eye_, dirac_, xavier_*, kaiming_*, orthogonal_,
// sparse_) on existing tensors and parameters: each checks its tensor and arguments, draws
// from ember's generator (skipped under a SkipInitGuard) and copies into the tensor's own
// buffer under NoGradGuard, so identity, dtype and device are kept.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ember/autograd.hpp"
#include "ember/error.hpp"
#include "ember/nn/init.hpp"
#include "ember/ops.hpp"

namespace ember::nn::init {

namespace {

// Names the function the user called in every error raised below it (Note [Errors name the op
// the user called] in ember/error.hpp): "init::orthogonal_: tensor [5] f32: ...".
class InitScope final : public ember::detail::ErrorScope {
 public:
  InitScope(const char* fn, const Tensor& t) : ErrorScope(fn), t_(t) {}
  std::string describe() const override {
    if (!t_.defined()) return "undefined tensor";
    return ember::detail::concat("tensor ", t_.shape().to_string(), " ", dtype_name(t_.dtype()));
  }

 private:
  const Tensor& t_;
};

void check_defined(const char* fn, const Tensor& t) {
  EMBER_CHECK(t.defined(), fn, ": undefined tensor (expected a tensor to fill)");
}

// The random initialisers fill floating tensors only (torch's do too).
void check_floating(const char* fn, const Tensor& t) {
  check_defined(fn, t);
  EMBER_CHECK(is_floating(t.dtype()), fn, ": tensor of dtype ", dtype_name(t.dtype()),
              " (expected f32, f64, f16 or bf16)");
}

void check_finite(const char* fn, const char* what, double v) {
  EMBER_CHECK(std::isfinite(v), fn, ": ", what, " ", v, " (expected a finite number)");
}

void check_std(const char* fn, double std) {
  EMBER_CHECK(std::isfinite(std) && std >= 0.0, fn, ": std ", std, " (expected a finite std >= 0)");
}

// Writes `values` (any dtype, any device) into `t` without recording a gradient.
Tensor write(Tensor& t, const Tensor& values) {
  NoGradGuard no_grad;
  t.copy_(values);
  return t;
}

TensorOptions like(const Tensor& t) { return {.dtype = t.dtype(), .device = t.device()}; }

// The dtype trunc_normal_ and the host-built initialisers compute in.
DType work_dtype(const Tensor& t) { return t.dtype() == DType::f64 ? DType::f64 : DType::f32; }

Tensor draw_uniform(const char* fn, Tensor& t, double a, double b) {
  check_finite(fn, "a", a);
  check_finite(fn, "b", b);
  EMBER_CHECK(a <= b, fn, ": range [a, b) = [", a, ", ", b, ") (expected a <= b)");
  if (detail::skipping() || t.numel() == 0) return t;
  return write(t, rand(t.shape(), like(t), a, b));
}

Tensor draw_normal(const char* fn, Tensor& t, double mean, double std) {
  check_finite(fn, "mean", mean);
  check_std(fn, std);
  if (detail::skipping() || t.numel() == 0) return t;
  return write(t, randn(t.shape(), like(t), mean, std));
}

// torch's _calculate_correct_fan.
double kaiming_std(const Tensor& t, const KaimingOptions& o) {
  const auto [fan_in, fan_out] = fans(t.shape());
  const double gain = calculate_gain(o.nonlinearity, o.a);
  const int64_t fan = o.mode == FanMode::fan_in ? fan_in : fan_out;
  return gain / std::sqrt(static_cast<double>(fan));
}

double xavier_std(const Tensor& t, double gain) {
  const auto [fan_in, fan_out] = fans(t.shape());
  return gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out));
}

}  // namespace

Tensor uniform_(Tensor t, double a, double b) {
  const InitScope scope("init::uniform_", t);
  check_floating("init::uniform_", t);
  return draw_uniform("init::uniform_", t, a, b);
}

Tensor normal_(Tensor t, double mean, double std) {
  const InitScope scope("init::normal_", t);
  check_floating("init::normal_", t);
  return draw_normal("init::normal_", t, mean, std);
}

Tensor trunc_normal_(Tensor t, double mean, double std, double a, double b) {
  const char* fn = "init::trunc_normal_";
  const InitScope scope(fn, t);
  check_floating(fn, t);
  check_finite(fn, "mean", mean);
  check_std(fn, std);
  EMBER_CHECK(!std::isnan(a) && !std::isnan(b) && a <= b, fn, ": bounds [a, b] = [", a, ", ", b,
              "] (expected a <= b)");
  if (detail::skipping() || t.numel() == 0) return t;
  if (std == 0.0) return constant_(t, std::clamp(mean, a, b));
  // PyTorch's method: u ~ Uniform(2Φ(α)-1, 2Φ(β)-1), x = mean + std·√2·erfinv(u), clamped.
  const auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  const double lo = 2.0 * cdf((a - mean) / std) - 1.0, hi = 2.0 * cdf((b - mean) / std) - 1.0;
  const DType work = work_dtype(t);
  Tensor u = rand(t.shape(), {.dtype = work, .device = t.device()}, lo, hi);
  // erfinv(±1) is ±inf: with an infinite bound keep u inside (-1, 1), so no value is infinite.
  const double edge = work == DType::f64 ? 0x1p-53 : 0x1p-24;
  if (lo <= -1.0 || hi >= 1.0) u = clamp(u, -1.0 + edge, 1.0 - edge);
  Tensor x = clamp(erfinv(u) * (std * std::sqrt(2.0)) + mean, a, b);
  write(t, x);
  NoGradGuard no_grad;
  t.clamp_(a, b);  // again in t's dtype, whose rounding may cross a bound (as torch's clamp_)
  return t;
}

Tensor constant_(Tensor t, double value) {
  const InitScope scope("init::constant_", t);
  check_defined("init::constant_", t);
  NoGradGuard no_grad;
  t.fill_(value);
  return t;
}

Tensor ones_(Tensor t) {
  const InitScope scope("init::ones_", t);
  check_defined("init::ones_", t);
  return constant_(t, 1.0);
}

Tensor zeros_(Tensor t) {
  const InitScope scope("init::zeros_", t);
  check_defined("init::zeros_", t);
  return constant_(t, 0.0);
}

Tensor eye_(Tensor t) {
  const char* fn = "init::eye_";
  const InitScope scope(fn, t);
  check_defined(fn, t);
  EMBER_CHECK(t.dim() == 2, fn, ": tensor of shape ", t.shape().to_string(), " (expected 2 dims)");
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  Tensor host = zeros(t.shape(), {.dtype = DType::f32, .device = Device::cpu()});
  float* p = host.data<float>();
  for (int64_t i = 0; i < std::min(rows, cols); ++i) p[i * cols + i] = 1.0f;
  return write(t, host);
}

Tensor dirac_(Tensor t, int64_t groups) {
  const char* fn = "init::dirac_";
  const InitScope scope(fn, t);
  check_defined(fn, t);
  EMBER_CHECK(t.dim() >= 3 && t.dim() <= 5, fn, ": tensor of shape ", t.shape().to_string(),
              " (expected 3, 4 or 5 dims)");
  const Shape& s = t.shape();
  EMBER_CHECK(groups >= 1 && s[0] % groups == 0, fn, ": ", groups, " groups of dim 0 = ", s[0],
              " (expected a positive number of groups dividing dim 0)");
  const int64_t per_group = s[0] / groups, channels = std::min(per_group, s[1]);
  // Strides of a contiguous tensor of shape s, and the offset of the kernel's centre.
  std::vector<int64_t> stride(s.size(), 1);
  for (int i = s.size() - 2; i >= 0; --i) stride[i] = stride[i + 1] * s[i + 1];
  int64_t centre = 0;
  for (int i = 2; i < s.size(); ++i) centre += (s[i] / 2) * stride[i];
  Tensor host = zeros(s, {.dtype = DType::f32, .device = Device::cpu()});
  float* p = host.data<float>();
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t d = 0; d < channels; ++d)
      p[(g * per_group + d) * stride[0] + d * stride[1] + centre] = 1.0f;
  return write(t, host);
}

Tensor xavier_uniform_(Tensor t, double gain) {
  const char* fn = "init::xavier_uniform_";
  const InitScope scope(fn, t);
  check_floating(fn, t);
  check_finite(fn, "gain", gain);
  const double bound = std::sqrt(3.0) * xavier_std(t, gain);
  return draw_uniform(fn, t, -bound, bound);
}

Tensor xavier_normal_(Tensor t, double gain) {
  const char* fn = "init::xavier_normal_";
  const InitScope scope(fn, t);
  check_floating(fn, t);
  check_finite(fn, "gain", gain);
  return draw_normal(fn, t, 0.0, xavier_std(t, gain));
}

Tensor kaiming_uniform_(Tensor t, const KaimingOptions& options) {
  const char* fn = "init::kaiming_uniform_";
  const InitScope scope(fn, t);
  check_floating(fn, t);
  if (t.numel() == 0) return t;  // torch: zero-element tensors are a no-op
  const double bound = std::sqrt(3.0) * kaiming_std(t, options);
  return draw_uniform(fn, t, -bound, bound);
}

Tensor kaiming_uniform_(Tensor t, double a, const std::string& mode,
                        const std::string& nonlinearity) {
  const InitScope scope("init::kaiming_uniform_", t);
  return kaiming_uniform_(t, {.a = a, .mode = fan_mode(mode), .nonlinearity = nonlinearity});
}

Tensor kaiming_normal_(Tensor t, const KaimingOptions& options) {
  const char* fn = "init::kaiming_normal_";
  const InitScope scope(fn, t);
  check_floating(fn, t);
  if (t.numel() == 0) return t;  // torch: zero-element tensors are a no-op
  return draw_normal(fn, t, 0.0, kaiming_std(t, options));
}

Tensor kaiming_normal_(Tensor t, double a, const std::string& mode,
                       const std::string& nonlinearity) {
  const InitScope scope("init::kaiming_normal_", t);
  return kaiming_normal_(t, {.a = a, .mode = fan_mode(mode), .nonlinearity = nonlinearity});
}

Tensor orthogonal_(Tensor t, double gain) {
  const char* fn = "init::orthogonal_";
  const InitScope scope(fn, t);
  check_floating(fn, t);
  check_finite(fn, "gain", gain);
  EMBER_CHECK(t.dim() >= 2, fn, ": tensor of shape ", t.shape().to_string(),
              " (expected at least 2 dims)");
  if (detail::skipping() || t.numel() == 0) return t;
  const int64_t rows = t.shape()[0], cols = t.numel() / rows;
  NoGradGuard no_grad;
  Tensor flat = randn({rows, cols}, {.dtype = DType::f64, .device = Device::cpu()});
  if (rows < cols) flat = transpose(flat, 0, 1).contiguous();
  QR qr_of = qr(flat);  // Q [m, k], R [k, k]: k = min(rows, cols)
  Tensor q = qr_of.Q.contiguous(), r = qr_of.R.contiguous();
  const int64_t m = q.shape()[0], k = q.shape()[1];
  double* pq = q.data<double>();
  const double* pr = r.data<double>();
  for (int64_t j = 0; j < k; ++j) {  // Q·diag(sign(diag(R))): R's diagonal made positive
    const double d = pr[j * r.shape()[1] + j];
    const double sign = d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0);
    for (int64_t i = 0; i < m; ++i) pq[i * k + j] *= sign * gain;
  }
  if (rows < cols) q = transpose(q, 0, 1).contiguous();
  return write(t, q.reshape(t.shape()));
}

Tensor sparse_(Tensor t, double sparsity, double std) {
  const char* fn = "init::sparse_";
  const InitScope scope(fn, t);
  check_floating(fn, t);
  EMBER_CHECK(t.dim() == 2, fn, ": tensor of shape ", t.shape().to_string(), " (expected 2 dims)");
  EMBER_CHECK(sparsity >= 0.0 && sparsity < 1.0, fn, ": sparsity ", sparsity,
              " (expected 0 <= sparsity < 1)");
  check_std(fn, std);
  if (detail::skipping() || t.numel() == 0) return t;
  const int64_t rows = t.shape()[0], cols = t.shape()[1];
  const auto zeros_per_col = static_cast<int64_t>(std::ceil(sparsity * static_cast<double>(rows)));
  NoGradGuard no_grad;
  Tensor values = randn({rows, cols}, {.dtype = DType::f64, .device = Device::cpu()}, 0.0, std);
  // A random permutation of the rows per column (torch.randperm's role): the order of
  // uniform keys drawn from ember's generator; the first zeros_per_col rows are zeroed.
  Tensor keys = rand({cols, rows}, {.dtype = DType::f64, .device = Device::cpu()});
  const double* pk = keys.data<double>();
  double* pv = values.data<double>();
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t c = 0; c < cols; ++c) {
    std::iota(order.begin(), order.end(), int64_t{0});
    const double* key = pk + c * rows;
    std::stable_sort(order.begin(), order.end(),
                     [key](int64_t x, int64_t y) { return key[x] < key[y]; });
    for (int64_t i = 0; i < zeros_per_col; ++i) pv[order[i] * cols + c] = 0.0;
  }
  return write(t, values);
}

}  // namespace ember::nn::init
