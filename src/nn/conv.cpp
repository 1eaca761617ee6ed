// src/nn/conv.cpp — Conv2d, MaxPool2d and AvgPool2d modules over the functional ops in
// src/ops/conv.cpp and src/ops/pool.cpp.
#include "ember/nn/conv.hpp"

#include "ember/nn/init.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

// conv_nd.cpp: padding_mode and padding="same" / "valid" for the convolution modules.
void check_padding_mode(const char* module, const std::string& mode);
Shape conv_module_pads(std::optional<ConvPadding> preset, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& kernel, const std::vector<int64_t>& dilation);
Tensor conv_module_input(const Tensor& x, const Shape& pads, const std::string& mode,
                         std::vector<int64_t>& both);
void check_preset_stride(const char* module, std::optional<ConvPadding> preset, bool unit_stride);
std::string preset_name(ConvPadding p);

namespace {

void check_size(const char* module, const char* what, Size2d s, int64_t min) {
  EMBER_CHECK(s.h >= min && s.w >= min, module, ": ", what, " ", pyrepr::py_pair(s),
              " (expected every entry >= ", min, ")");
}

}  // namespace

// ---- Conv2d ----

Conv2dImpl::Conv2dImpl(Conv2dOptions o) : options_(o) {
  EMBER_CHECK(o.in_channels > 0 && o.out_channels > 0, "Conv2d: in_channels ", o.in_channels,
              " and out_channels ", o.out_channels, " (expected both > 0)");
  EMBER_CHECK(o.groups >= 1, "Conv2d: groups ", o.groups, " (expected >= 1)");
  EMBER_CHECK(o.in_channels % o.groups == 0, "Conv2d: in_channels ", o.in_channels,
              " is not divisible by groups ", o.groups);
  EMBER_CHECK(o.out_channels % o.groups == 0, "Conv2d: out_channels ", o.out_channels,
              " is not divisible by groups ", o.groups);
  check_size("Conv2d", "kernel_size", o.kernel_size, 1);
  check_size("Conv2d", "stride", o.stride, 1);
  check_size("Conv2d", "padding", o.padding, 0);
  check_size("Conv2d", "dilation", o.dilation, 1);
  check_padding_mode("Conv2d", o.padding_mode);
  check_preset_stride("Conv2d", o.padding_preset, o.stride == Size2d(1));
  const Shape shape{o.out_channels, o.in_channels / o.groups, o.kernel_size.h, o.kernel_size.w};
  weight_ = register_parameter("weight", init::kaiming_uniform_default(shape));
  if (o.bias)
    bias_ = register_parameter("bias", init::bias_default(o.out_channels, init::fans(shape).first));
}

Tensor Conv2dImpl::forward(const Tensor& x) {
  refresh_parametrizations();
  const Conv2dOptions& o = options_;
  // Zero padding is conv2d's own; other modes (and an odd "same") pad first, as PyTorch.
  const Size2d p = o.padding, k = o.kernel_size, d = o.dilation;
  std::vector<int64_t> both;
  const Tensor xp =
      conv_module_input(x, conv_module_pads(o.padding_preset, {p.h, p.w}, {k.h, k.w}, {d.h, d.w}),
                        o.padding_mode, both);
  return conv2d(xp, weight_, bias_, o.stride, Size2d(both[0], both[1]), o.dilation, o.groups);
}

json Conv2dImpl::options() const { return options_json(options_); }

std::string Conv2dImpl::extra_repr() const {
  // torch.nn.Conv2d's repr: defaults other than the stride are left out.
  const Conv2dOptions& o = options_;
  std::string s = std::to_string(o.in_channels) + ", " + std::to_string(o.out_channels) +
                  ", kernel_size=" + pyrepr::py_pair(o.kernel_size) +
                  ", stride=" + pyrepr::py_pair(o.stride);
  if (o.padding_preset)
    s += ", padding=" + preset_name(*o.padding_preset);
  else if (o.padding != Size2d(0))
    s += ", padding=" + pyrepr::py_pair(o.padding);
  if (o.dilation != Size2d(1)) s += ", dilation=" + pyrepr::py_pair(o.dilation);
  if (o.groups != 1) s += ", groups=" + std::to_string(o.groups);
  if (!o.bias) s += ", bias=False";
  if (o.padding_mode != "zeros") s += ", padding_mode=" + o.padding_mode;
  return s;
}

// ---- MaxPool2d ----

MaxPool2dImpl::MaxPool2dImpl(MaxPool2dOptions o) : options_(o) {
  if (!options_.stride) options_.stride = options_.kernel_size;  // as torch.nn.MaxPool2d stores it
  check_size("MaxPool2d", "kernel_size", o.kernel_size, 1);
  check_size("MaxPool2d", "stride", *options_.stride, 1);
  check_size("MaxPool2d", "padding", o.padding, 0);
  check_size("MaxPool2d", "dilation", o.dilation, 1);
}

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  const MaxPool2dOptions& o = options_;
  return max_pool2d(x, o.kernel_size, o.stride, o.padding, o.dilation, o.ceil_mode);
}

json MaxPool2dImpl::options() const { return options_json(options_); }

std::string MaxPool2dImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

// ---- AvgPool2d ----

AvgPool2dImpl::AvgPool2dImpl(AvgPool2dOptions o) : options_(o) {
  if (!options_.stride) options_.stride = options_.kernel_size;
  check_size("AvgPool2d", "kernel_size", o.kernel_size, 1);
  check_size("AvgPool2d", "stride", *options_.stride, 1);
  check_size("AvgPool2d", "padding", o.padding, 0);
}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  const AvgPool2dOptions& o = options_;
  return avg_pool2d(x, o.kernel_size, o.stride, o.padding, o.ceil_mode, o.count_include_pad);
}

json AvgPool2dImpl::options() const { return options_json(options_); }

std::string AvgPool2dImpl::extra_repr() const {
  const AvgPool2dOptions& o = options_;
  return "kernel_size=" + pyrepr::py_size(o.kernel_size) +
         ", stride=" + pyrepr::py_size(*o.stride) + ", padding=" + pyrepr::py_size(o.padding);
}

}  // namespace ember::nn
