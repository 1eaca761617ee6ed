// src/nn/pool3d.cpp — the pooling modules of ember/nn/pool3d.hpp over the functional pools of
// src/ops/pool3d.cpp. extra_repr() follows PyTorch 1.13 (sizes as given: 2 or (1, 2, 2); the
// unpools print tuples, as PyTorch stores them).
#include "ember/nn/pool3d.hpp"

#include <cmath>
#include <type_traits>

#include "nn/py_repr.hpp"

namespace ember::nn {

namespace {

// "2" for a cubic size, "(1, 2, 2)" otherwise.
std::string py_size3(Size3d s) {
  if (s.d == s.h && s.h == s.w) return std::to_string(s.d);
  return pyrepr::py_tuple(Shape{s.d, s.h, s.w});
}
// Sizes as the tuples MaxUnpool stores: (2,), (2, 2), (2, 2, 2).
std::string py_tuple_of(int64_t s) { return pyrepr::py_tuple(Shape{s}); }
std::string py_tuple_of(Size2d s) { return pyrepr::py_pair(s); }
std::string py_tuple_of(Size3d s) { return pyrepr::py_tuple(Shape{s.d, s.h, s.w}); }
// Sizes as given (LPPool): 2, (2, 3), (1, 2, 2).
std::string py_given(int64_t s) { return std::to_string(s); }
std::string py_given(Size2d s) { return pyrepr::py_size(s); }
std::string py_given(Size3d s) { return py_size3(s); }

bool positive(int64_t s) { return s >= 1; }
bool positive(Size2d s) { return s.h >= 1 && s.w >= 1; }
bool positive(Size3d s) { return s.d >= 1 && s.h >= 1 && s.w >= 1; }

template <typename Size>
void check_sizes(const std::string& type, Size kernel, Size stride) {
  EMBER_CHECK(positive(kernel), type, ": kernel_size ", py_given(kernel),
              " (expected every entry >= 1)");
  EMBER_CHECK(positive(stride), type, ": stride ", py_given(stride),
              " (expected every entry >= 1)");
}

template <typename Size>
const char* dims_suffix() {
  if constexpr (std::is_same_v<Size, int64_t>) return "1d";
  if constexpr (std::is_same_v<Size, Size2d>) return "2d";
  return "3d";
}

}  // namespace

// ---- MaxPool3d, AvgPool3d ----

MaxPool3dImpl::MaxPool3dImpl(MaxPool3dOptions o) : options_(o) {
  if (!options_.stride) options_.stride = options_.kernel_size;
  check_sizes("MaxPool3d", options_.kernel_size, *options_.stride);
}

Tensor MaxPool3dImpl::forward(const Tensor& x) { return forward_with_indices(x).first; }

std::pair<Tensor, Tensor> MaxPool3dImpl::forward_with_indices(const Tensor& x) {
  const MaxPool3dOptions& o = options_;
  return max_pool3d_with_indices(x, o.kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
}

std::string MaxPool3dImpl::extra_repr() const {
  const MaxPool3dOptions& o = options_;
  return "kernel_size=" + py_size3(o.kernel_size) + ", stride=" + py_size3(*o.stride) +
         ", padding=" + py_size3(o.padding) + ", dilation=" + py_size3(o.dilation) +
         ", ceil_mode=" + pyrepr::py_bool(o.ceil_mode);
}

AvgPool3dImpl::AvgPool3dImpl(AvgPool3dOptions o) : options_(o) {
  if (!options_.stride) options_.stride = options_.kernel_size;
  check_sizes("AvgPool3d", options_.kernel_size, *options_.stride);
  EMBER_CHECK(!o.divisor_override || *o.divisor_override != 0,
              "AvgPool3d: divisor_override 0 (expected a non-zero divisor)");
}

Tensor AvgPool3dImpl::forward(const Tensor& x) {
  const AvgPool3dOptions& o = options_;
  return avg_pool3d(x, o.kernel_size, o.stride, o.padding, o.ceil_mode, o.count_include_pad,
                    o.divisor_override);
}

std::string AvgPool3dImpl::extra_repr() const {
  const AvgPool3dOptions& o = options_;
  return "kernel_size=" + py_size3(o.kernel_size) + ", stride=" + py_size3(*o.stride) +
         ", padding=" + py_size3(o.padding);
}

// ---- adaptive 3-D pools ----

AdaptivePool3dImpl::AdaptivePool3dImpl(bool max, AdaptivePool3dOptions options)
    : max_(max), options_(options) {
  EMBER_CHECK(positive(options_.output_size), type_name(), ": output_size ",
              py_size3(options_.output_size), " (expected every entry >= 1)");
}

Tensor AdaptivePool3dImpl::forward(const Tensor& x) {
  return max_ ? adaptive_max_pool3d(x, options_.output_size)
              : adaptive_avg_pool3d(x, options_.output_size);
}

std::string AdaptivePool3dImpl::extra_repr() const {
  return "output_size=" + py_size3(options_.output_size);
}

std::pair<Tensor, Tensor> AdaptiveMaxPool3dImpl::forward_with_indices(const Tensor& x) {
  return adaptive_max_pool3d_with_indices(x, pool_options().output_size);
}

// ---- MaxUnpool1d/2d/3d ----

template <typename Size>
MaxUnpoolImpl<Size>::MaxUnpoolImpl(MaxUnpoolOptions<Size> o) : options_(o) {
  if (!options_.stride) options_.stride = options_.kernel_size;
  check_sizes(type_name(), options_.kernel_size, *options_.stride);
}

template <typename Size>
std::string MaxUnpoolImpl<Size>::type_name() const {
  return std::string("MaxUnpool") + dims_suffix<Size>();
}

template <typename Size>
Tensor MaxUnpoolImpl<Size>::forward(const Tensor&) {
  detail::throw_error(detail::concat(type_name(),
                                     ": forward needs the pool's indices (call forward(x, "
                                     "indices) with those of max_pool",
                                     dims_suffix<Size>(), "_with_indices)"));
}

template <typename Size>
Tensor MaxUnpoolImpl<Size>::forward(const Tensor& x, const Tensor& indices,
                                    std::optional<Size> output_size) {
  const MaxUnpoolOptions<Size>& o = options_;
  if constexpr (std::is_same_v<Size, int64_t>)
    return max_unpool1d(x, indices, o.kernel_size, o.stride, o.padding, output_size);
  else if constexpr (std::is_same_v<Size, Size2d>)
    return max_unpool2d(x, indices, o.kernel_size, o.stride, o.padding, output_size);
  else
    return max_unpool3d(x, indices, o.kernel_size, o.stride, o.padding, output_size);
}

template <typename Size>
std::string MaxUnpoolImpl<Size>::extra_repr() const {
  const MaxUnpoolOptions<Size>& o = options_;
  return "kernel_size=" + py_tuple_of(o.kernel_size) + ", stride=" + py_tuple_of(*o.stride) +
         ", padding=" + py_tuple_of(o.padding);
}

template class MaxUnpoolImpl<int64_t>;
template class MaxUnpoolImpl<Size2d>;
template class MaxUnpoolImpl<Size3d>;

// ---- LPPool1d/2d/3d ----

template <typename Size>
LPPoolImpl<Size>::LPPoolImpl(LPPoolOptions<Size> o) : options_(o) {
  check_sizes(type_name(), o.kernel_size, o.stride.value_or(o.kernel_size));
  EMBER_CHECK(o.norm_type > 0.0 && std::isfinite(o.norm_type), type_name(), ": norm_type ",
              o.norm_type, " (expected a finite power > 0)");
}

template <typename Size>
std::string LPPoolImpl<Size>::type_name() const {
  return std::string("LPPool") + dims_suffix<Size>();
}

template <typename Size>
Tensor LPPoolImpl<Size>::forward(const Tensor& x) {
  const LPPoolOptions<Size>& o = options_;
  if constexpr (std::is_same_v<Size, int64_t>)
    return lp_pool1d(x, o.norm_type, o.kernel_size, o.stride, o.ceil_mode);
  else if constexpr (std::is_same_v<Size, Size2d>)
    return lp_pool2d(x, o.norm_type, o.kernel_size, o.stride, o.ceil_mode);
  else
    return lp_pool3d(x, o.norm_type, o.kernel_size, o.stride, o.ceil_mode);
}

template <typename Size>
std::string LPPoolImpl<Size>::extra_repr() const {
  const LPPoolOptions<Size>& o = options_;
  return "norm_type=" + pyrepr::py_float(o.norm_type) + ", kernel_size=" + py_given(o.kernel_size) +
         ", stride=" + (o.stride ? py_given(*o.stride) : std::string("None")) +
         ", ceil_mode=" + pyrepr::py_bool(o.ceil_mode);
}

template class LPPoolImpl<int64_t>;
template class LPPoolImpl<Size2d>;
template class LPPoolImpl<Size3d>;

// ---- FractionalMaxPool2d/3d ----

template <typename Size>
FractionalMaxPoolImpl<Size>::FractionalMaxPoolImpl(FractionalMaxPoolModuleOptions<Size> o)
    : options_(std::move(o)) {
  const auto& k = options_.kernel_size;
  EMBER_CHECK(positive(k), type_name(), ": kernel_size ", py_given(k),
              " (expected every entry >= 1)");
  EMBER_CHECK(options_.output_size.has_value() != !options_.output_ratio.empty(), type_name(),
              ": give exactly one of output_size and output_ratio");
  for (double r : options_.output_ratio)
    EMBER_CHECK(r > 0.0 && r < 1.0, type_name(), ": output_ratio ", r, " (expected 0 < ratio < 1)");
}

template <typename Size>
std::string FractionalMaxPoolImpl<Size>::type_name() const {
  return std::string("FractionalMaxPool") + dims_suffix<Size>();
}

template <typename Size>
std::pair<Tensor, Tensor> FractionalMaxPoolImpl<Size>::forward_with_indices(const Tensor& x) {
  constexpr size_t dims = std::is_same_v<Size, Size2d> ? 2 : 3;
  FractionalMaxPoolOptions o;
  if (options_.output_size) {
    const Size s = *options_.output_size;
    if constexpr (dims == 2)
      o.output_size = std::vector<int64_t>{s.h, s.w};
    else
      o.output_size = std::vector<int64_t>{s.d, s.h, s.w};
  } else {
    std::vector<double> r = options_.output_ratio;
    if (r.size() == 1) r.assign(dims, r[0]);
    o.output_ratio = r;
  }
  if constexpr (dims == 2)
    return fractional_max_pool2d(x, options_.kernel_size, o);
  else
    return fractional_max_pool3d(x, options_.kernel_size, o);
}

template class FractionalMaxPoolImpl<Size2d>;
template class FractionalMaxPoolImpl<Size3d>;

}  // namespace ember::nn
