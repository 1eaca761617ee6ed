// src/nn/pool.cpp — the 1-D pools (MaxPool1d, AvgPool1d) and the adaptive pools
// (AdaptiveAvg/MaxPool1d/2d), over the functional ops of src/ops/conv_nd.cpp; the 2-D pools
// sit beside Conv2d in src/nn/conv.cpp. extra_repr() follows PyTorch 1.13.
#include "ember/nn/conv.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

// ---- 1-D pools ----

MaxPool1dImpl::MaxPool1dImpl(MaxPool1dOptions o) : options_(o) {
  if (!options_.stride) options_.stride = options_.kernel_size;
  check_options(options_, "MaxPool1d");
}

Tensor MaxPool1dImpl::forward(const Tensor& x) {
  const MaxPool1dOptions& o = options_;
  return max_pool1d(x, o.kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
}

json MaxPool1dImpl::options() const { return options_json(options_); }

std::string MaxPool1dImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

AvgPool1dImpl::AvgPool1dImpl(AvgPool1dOptions o) : options_(o) {
  if (!options_.stride) options_.stride = options_.kernel_size;
  check_options(options_, "AvgPool1d");
}

Tensor AvgPool1dImpl::forward(const Tensor& x) {
  const AvgPool1dOptions& o = options_;
  return avg_pool1d(x, o.kernel_size, o.stride, o.padding, o.ceil_mode, o.count_include_pad);
}

json AvgPool1dImpl::options() const { return options_json(options_); }

std::string AvgPool1dImpl::extra_repr() const {
  const AvgPool1dOptions& o = options_;
  return "kernel_size=" + pyrepr::py_tuple(Shape{o.kernel_size}) +
         ", stride=" + pyrepr::py_tuple(Shape{*o.stride}) +
         ", padding=" + pyrepr::py_tuple(Shape{o.padding});
}

// ---- adaptive pools ----

AdaptivePoolImpl::AdaptivePoolImpl(int dims, bool max, AdaptivePoolOptions options)
    : dims_(dims), max_(max), options_(options) {
  const Size2d s = options_.output_size;
  EMBER_CHECK(s.w >= 1 && (dims_ == 1 || s.h >= 1), type_name(), ": output_size ",
              dims_ == 1 ? std::to_string(s.w) : pyrepr::py_pair(s),
              " (expected every entry >= 1)");
}

std::string AdaptivePoolImpl::type_name() const {
  return std::string(max_ ? "AdaptiveMaxPool" : "AdaptiveAvgPool") + (dims_ == 1 ? "1d" : "2d");
}

Tensor AdaptivePoolImpl::forward(const Tensor& x) {
  const Size2d s = options_.output_size;
  if (dims_ == 1) return max_ ? adaptive_max_pool1d(x, s.w) : adaptive_avg_pool1d(x, s.w);
  return max_ ? adaptive_max_pool2d(x, s) : adaptive_avg_pool2d(x, s);
}

json AdaptivePoolImpl::options() const {
  return dims_ == 1 ? options_json(AdaptivePool1dOptions{options_.output_size.w})
                    : options_json(options_);
}

std::string AdaptivePoolImpl::extra_repr() const {
  const Size2d s = options_.output_size;
  return "output_size=" + (dims_ == 1 ? std::to_string(s.w) : pyrepr::py_size(s));
}

}  // namespace ember::nn
