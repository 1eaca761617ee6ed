// src/nn/conv_nd.cpp — the convolution modules beyond Conv2d: Conv1d, Conv3d and
// ConvTranspose1d/2d, over the functional ops of src/ops/conv_nd.cpp; and what every
// convolution module shares (padding_mode, padding="same" / "valid"). Parameter names, shapes,
// initialisation and extra_repr() follow PyTorch 1.13 (transposed convolutions keep weight
// [in, out/groups, k...]).
#include "ember/nn/conv.hpp"
#include "ember/nn/init.hpp"
#include "ember/ops_nn.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

namespace {

// Python's repr of a tuple of ints: "(3,)", "(1, 2, 2)".
std::string py_tuple(std::initializer_list<int64_t> v) {
  std::string s = "(";
  size_t i = 0;
  for (int64_t e : v) s += (i++ ? ", " : "") + std::to_string(e);
  return s + (v.size() == 1 ? ",)" : ")");
}
std::string py_tuple3(Size3d s) { return py_tuple({s.d, s.h, s.w}); }
std::string py_tuple1(int64_t v) { return py_tuple({v}); }

void check_positive(const char* module, const char* what, int64_t v, int64_t min) {
  EMBER_CHECK(v >= min, module, ": ", what, " ", v, " (expected >= ", min, ")");
}

// The checks every convolution module makes on its channel counts.
void check_channels(const char* module, int64_t in, int64_t out, int64_t groups) {
  EMBER_CHECK(in > 0 && out > 0, module, ": in_channels ", in, " and out_channels ", out,
              " (expected both > 0)");
  EMBER_CHECK(groups >= 1, module, ": groups ", groups, " (expected >= 1)");
  EMBER_CHECK(in % groups == 0, module, ": in_channels ", in, " is not divisible by groups ",
              groups);
  EMBER_CHECK(out % groups == 0, module, ": out_channels ", out, " is not divisible by groups ",
              groups);
}

}  // namespace

void check_padding_mode(const char* module, const std::string& mode) {
  EMBER_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular",
              module, ": padding_mode '", mode,
              "' (expected zeros, reflect, replicate or circular)");
}

// F.pad's pads (last dim first) for a convolution module's padding: the numbers on both
// sides, or PyTorch's "same" (total dilation·(k - 1) per dim, the odd one after) or "valid".
Shape conv_module_pads(std::optional<ConvPadding> preset, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& kernel, const std::vector<int64_t>& dilation) {
  Shape pads;
  for (size_t r = padding.size(); r-- > 0;) {
    int64_t before = padding[r], after = padding[r];
    if (preset == ConvPadding::valid) before = after = 0;
    if (preset == ConvPadding::same) {
      const int64_t total = dilation[r] * (kernel[r] - 1);
      before = total / 2;
      after = total - before;
    }
    pads.push_back(before);
    pads.push_back(after);
  }
  return pads;
}

// Whether every dim pads the same on both sides; `both` gets those, first dim first.
bool symmetric_pads(const Shape& pads, std::vector<int64_t>& both) {
  both.clear();
  for (int i = pads.size() - 2; i >= 0; i -= 2) {
    if (pads[i] != pads[i + 1]) return false;
    both.push_back(pads[i]);
  }
  return true;
}

// The input a convolution module convolves with zero padding `both` per dim: x itself when
// its zero padding is symmetric, else x padded with the module's mode (and `both` zeros).
Tensor conv_module_input(const Tensor& x, const Shape& pads, const std::string& mode,
                         std::vector<int64_t>& both) {
  if (mode == "zeros" && symmetric_pads(pads, both)) return x;
  both.assign(static_cast<size_t>(pads.size() / 2), 0);
  return pad(x, pads, mode == "zeros" ? "constant" : mode);
}

void check_preset_stride(const char* module, std::optional<ConvPadding> preset, bool unit_stride) {
  EMBER_CHECK(preset != ConvPadding::same || unit_stride, module,
              ": padding='same' needs stride 1 (as PyTorch; got a larger stride)");
}

std::string preset_name(ConvPadding p) { return p == ConvPadding::same ? "same" : "valid"; }

namespace {

// PyTorch's _ConvNd.extra_repr from the already formatted pieces.
std::string conv_repr(int64_t in, int64_t out, const std::string& kernel, const std::string& stride,
                      const std::string& padding, bool padding_zero, const std::string& dilation,
                      bool dilation_one, const std::string& output_padding, bool output_zero,
                      int64_t groups, bool bias, const std::string& padding_mode) {
  std::string s = std::to_string(in) + ", " + std::to_string(out) + ", kernel_size=" + kernel +
                  ", stride=" + stride;
  if (!padding_zero) s += ", padding=" + padding;
  if (!dilation_one) s += ", dilation=" + dilation;
  if (!output_zero) s += ", output_padding=" + output_padding;
  if (groups != 1) s += ", groups=" + std::to_string(groups);
  if (!bias) s += ", bias=False";
  if (padding_mode != "zeros") s += ", padding_mode=" + padding_mode;
  return s;
}

}  // namespace

// ---- Conv1d ----

Conv1dImpl::Conv1dImpl(Conv1dOptions o) : options_(std::move(o)) {
  const Conv1dOptions& c = options_;
  check_channels("Conv1d", c.in_channels, c.out_channels, c.groups);
  check_positive("Conv1d", "kernel_size", c.kernel_size, 1);
  check_positive("Conv1d", "stride", c.stride, 1);
  check_positive("Conv1d", "padding", c.padding, 0);
  check_positive("Conv1d", "dilation", c.dilation, 1);
  check_padding_mode("Conv1d", c.padding_mode);
  check_preset_stride("Conv1d", c.padding_preset, c.stride == 1);
  const Shape shape{c.out_channels, c.in_channels / c.groups, c.kernel_size};
  weight_ = register_parameter("weight", init::kaiming_uniform_default(shape));
  if (c.bias)
    bias_ = register_parameter("bias", init::bias_default(c.out_channels, init::fans(shape).first));
}

Tensor Conv1dImpl::forward(const Tensor& x) {
  refresh_parametrizations();
  const Conv1dOptions& o = options_;
  std::vector<int64_t> both;
  const Tensor xp = conv_module_input(
      x, conv_module_pads(o.padding_preset, {o.padding}, {o.kernel_size}, {o.dilation}),
      o.padding_mode, both);
  return conv1d(xp, weight_, bias_, o.stride, both[0], o.dilation, o.groups);
}

json Conv1dImpl::options() const { return options_json(options_); }

std::string Conv1dImpl::extra_repr() const {
  const Conv1dOptions& o = options_;
  return conv_repr(o.in_channels, o.out_channels, py_tuple1(o.kernel_size), py_tuple1(o.stride),
                   o.padding_preset ? preset_name(*o.padding_preset) : py_tuple1(o.padding),
                   !o.padding_preset && o.padding == 0, py_tuple1(o.dilation), o.dilation == 1, "",
                   true, o.groups, o.bias, o.padding_mode);
}

// ---- Conv3d ----

Conv3dImpl::Conv3dImpl(Conv3dOptions o) : options_(std::move(o)) {
  const Conv3dOptions& c = options_;
  check_channels("Conv3d", c.in_channels, c.out_channels, c.groups);
  for (auto [what, s, min] :
       {std::tuple{"kernel_size", c.kernel_size, 1}, std::tuple{"stride", c.stride, 1},
        std::tuple{"padding", c.padding, 0}, std::tuple{"dilation", c.dilation, 1}})
    EMBER_CHECK(s.d >= min && s.h >= min && s.w >= min, "Conv3d: ", what, " ", py_tuple3(s),
                " (expected every entry >= ", min, ")");
  check_padding_mode("Conv3d", c.padding_mode);
  check_preset_stride("Conv3d", c.padding_preset, c.stride == Size3d(1));
  const Shape shape{c.out_channels, c.in_channels / c.groups, c.kernel_size.d, c.kernel_size.h,
                    c.kernel_size.w};
  weight_ = register_parameter("weight", init::kaiming_uniform_default(shape));
  if (c.bias)
    bias_ = register_parameter("bias", init::bias_default(c.out_channels, init::fans(shape).first));
}

Tensor Conv3dImpl::forward(const Tensor& x) {
  refresh_parametrizations();
  const Conv3dOptions& o = options_;
  const Size3d p = o.padding, k = o.kernel_size, d = o.dilation;
  std::vector<int64_t> both;
  const Tensor xp = conv_module_input(
      x, conv_module_pads(o.padding_preset, {p.d, p.h, p.w}, {k.d, k.h, k.w}, {d.d, d.h, d.w}),
      o.padding_mode, both);
  return conv3d(xp, weight_, bias_, o.stride, Size3d(both[0], both[1], both[2]), o.dilation,
                o.groups);
}

json Conv3dImpl::options() const { return options_json(options_); }

std::string Conv3dImpl::extra_repr() const {
  const Conv3dOptions& o = options_;
  return conv_repr(o.in_channels, o.out_channels, py_tuple3(o.kernel_size), py_tuple3(o.stride),
                   o.padding_preset ? preset_name(*o.padding_preset) : py_tuple3(o.padding),
                   !o.padding_preset && o.padding == Size3d(0), py_tuple3(o.dilation),
                   o.dilation == Size3d(1), "", true, o.groups, o.bias, o.padding_mode);
}

// ---- ConvTranspose2d ----

ConvTranspose2dImpl::ConvTranspose2dImpl(ConvTranspose2dOptions o) : options_(o) {
  check_channels("ConvTranspose2d", o.in_channels, o.out_channels, o.groups);
  const Size2d k = o.kernel_size;
  EMBER_CHECK(k.h >= 1 && k.w >= 1 && o.stride.h >= 1 && o.stride.w >= 1 && o.padding.h >= 0 &&
                  o.padding.w >= 0 && o.dilation.h >= 1 && o.dilation.w >= 1,
              "ConvTranspose2d: kernel_size ", pyrepr::py_pair(k), ", stride ",
              pyrepr::py_pair(o.stride), ", padding ", pyrepr::py_pair(o.padding), ", dilation ",
              pyrepr::py_pair(o.dilation),
              " (expected kernel_size, stride, dilation >= 1 and padding >= 0)");
  const Size2d op = o.output_padding;
  EMBER_CHECK(op.h >= 0 && op.w >= 0 && (op.h < o.stride.h || op.h < o.dilation.h) &&
                  (op.w < o.stride.w || op.w < o.dilation.w),
              "ConvTranspose2d: output_padding ", pyrepr::py_pair(op),
              " (expected >= 0 and smaller than the stride ", pyrepr::py_pair(o.stride),
              " or the dilation ", pyrepr::py_pair(o.dilation), ")");
  const Shape shape{o.in_channels, o.out_channels / o.groups, k.h, k.w};
  weight_ = register_parameter("weight", init::kaiming_uniform_default(shape));
  if (o.bias)
    bias_ = register_parameter("bias", init::bias_default(o.out_channels, init::fans(shape).first));
}

Tensor ConvTranspose2dImpl::forward(const Tensor& x) {
  refresh_parametrizations();
  const ConvTranspose2dOptions& o = options_;
  return conv_transpose2d(x, weight_, bias_, o.stride, o.padding, o.output_padding, o.groups,
                          o.dilation);
}

json ConvTranspose2dImpl::options() const { return options_json(options_); }

std::string ConvTranspose2dImpl::extra_repr() const {
  const ConvTranspose2dOptions& o = options_;
  return conv_repr(o.in_channels, o.out_channels, pyrepr::py_pair(o.kernel_size),
                   pyrepr::py_pair(o.stride), pyrepr::py_pair(o.padding), o.padding == Size2d(0),
                   pyrepr::py_pair(o.dilation), o.dilation == Size2d(1),
                   pyrepr::py_pair(o.output_padding), o.output_padding == Size2d(0), o.groups,
                   o.bias, "zeros");
}

// ---- ConvTranspose1d ----

ConvTranspose1dImpl::ConvTranspose1dImpl(ConvTranspose1dOptions o) : options_(o) {
  check_channels("ConvTranspose1d", o.in_channels, o.out_channels, o.groups);
  check_positive("ConvTranspose1d", "kernel_size", o.kernel_size, 1);
  check_positive("ConvTranspose1d", "stride", o.stride, 1);
  check_positive("ConvTranspose1d", "padding", o.padding, 0);
  check_positive("ConvTranspose1d", "dilation", o.dilation, 1);
  EMBER_CHECK(
      o.output_padding >= 0 && (o.output_padding < o.stride || o.output_padding < o.dilation),
      "ConvTranspose1d: output_padding ", o.output_padding,
      " (expected >= 0 and smaller than the stride ", o.stride, " or the dilation ", o.dilation,
      ")");
  const Shape shape{o.in_channels, o.out_channels / o.groups, o.kernel_size};
  weight_ = register_parameter("weight", init::kaiming_uniform_default(shape));
  if (o.bias)
    bias_ = register_parameter("bias", init::bias_default(o.out_channels, init::fans(shape).first));
}

Tensor ConvTranspose1dImpl::forward(const Tensor& x) {
  refresh_parametrizations();
  const ConvTranspose1dOptions& o = options_;
  return conv_transpose1d(x, weight_, bias_, o.stride, o.padding, o.output_padding, o.groups,
                          o.dilation);
}

json ConvTranspose1dImpl::options() const { return options_json(options_); }

std::string ConvTranspose1dImpl::extra_repr() const {
  const ConvTranspose1dOptions& o = options_;
  return conv_repr(o.in_channels, o.out_channels, py_tuple1(o.kernel_size), py_tuple1(o.stride),
                   py_tuple1(o.padding), o.padding == 0, py_tuple1(o.dilation), o.dilation == 1,
                   py_tuple1(o.output_padding), o.output_padding == 0, o.groups, o.bias, "zeros");
}

// ---- ConvTranspose3d ----

ConvTranspose3dImpl::ConvTranspose3dImpl(ConvTranspose3dOptions o) : options_(o) {
  check_channels("ConvTranspose3d", o.in_channels, o.out_channels, o.groups);
  const Size3d k = o.kernel_size, st = o.stride, pd = o.padding, dl = o.dilation;
  EMBER_CHECK(k.d >= 1 && k.h >= 1 && k.w >= 1 && st.d >= 1 && st.h >= 1 && st.w >= 1 &&
                  pd.d >= 0 && pd.h >= 0 && pd.w >= 0 && dl.d >= 1 && dl.h >= 1 && dl.w >= 1,
              "ConvTranspose3d: kernel_size ", py_tuple3(k), ", stride ", py_tuple3(st),
              ", padding ", py_tuple3(pd), ", dilation ", py_tuple3(dl),
              " (expected kernel_size, stride, dilation >= 1 and padding >= 0)");
  const Size3d op = o.output_padding;
  EMBER_CHECK(op.d >= 0 && op.h >= 0 && op.w >= 0 && (op.d < st.d || op.d < dl.d) &&
                  (op.h < st.h || op.h < dl.h) && (op.w < st.w || op.w < dl.w),
              "ConvTranspose3d: output_padding ", py_tuple3(op),
              " (expected >= 0 and smaller than the stride ", py_tuple3(st), " or the dilation ",
              py_tuple3(dl), ")");
  const Shape shape{o.in_channels, o.out_channels / o.groups, k.d, k.h, k.w};
  weight_ = register_parameter("weight", init::kaiming_uniform_default(shape));
  if (o.bias)
    bias_ = register_parameter("bias", init::bias_default(o.out_channels, init::fans(shape).first));
}

Tensor ConvTranspose3dImpl::forward(const Tensor& x) {
  refresh_parametrizations();
  const ConvTranspose3dOptions& o = options_;
  return conv_transpose3d(x, weight_, bias_, o.stride, o.padding, o.output_padding, o.groups,
                          o.dilation);
}

std::string ConvTranspose3dImpl::extra_repr() const {
  const ConvTranspose3dOptions& o = options_;
  return conv_repr(o.in_channels, o.out_channels, py_tuple3(o.kernel_size), py_tuple3(o.stride),
                   py_tuple3(o.padding), o.padding == Size3d(0), py_tuple3(o.dilation),
                   o.dilation == Size3d(1), py_tuple3(o.output_padding),
                   o.output_padding == Size3d(0), o.groups, o.bias, "zeros");
}

}  // namespace ember::nn
