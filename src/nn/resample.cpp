// src/nn/resample.cpp — the modules that resample or rearrange images: Upsample,
// PixelShuffle / PixelUnshuffle and Unfold / Fold, over the functional ops of
// src/ops/conv_nd.cpp. extra_repr() follows PyTorch 1.13.
#include "ember/nn/conv.hpp"
#include "ember/ops_nn.hpp"
#include "nn/py_repr.hpp"

namespace ember::nn {

// ---- Upsample ----

UpsampleImpl::UpsampleImpl(InterpolateOptions options) : options_(std::move(options)) {
  const bool has_size = !options_.size.empty(), has_scale = !options_.scale_factor.empty();
  EMBER_CHECK(has_size != has_scale, "Upsample: give exactly one of size and scale_factor (got ",
              has_size ? "both" : "neither", ")");
}

Tensor UpsampleImpl::forward(const Tensor& x) { return interpolate(x, options_); }

json UpsampleImpl::options() const { return options_json(options_); }

std::string UpsampleImpl::extra_repr() const {
  const InterpolateOptions& o = options_;
  std::string s;
  if (!o.scale_factor.empty()) {
    s = "scale_factor=";
    if (o.scale_factor.size() == 1) {
      s += pyrepr::py_float(o.scale_factor[0]);
    } else {
      s += "(";
      for (size_t i = 0; i < o.scale_factor.size(); ++i)
        s += (i ? ", " : "") + pyrepr::py_float(o.scale_factor[i]);
      s += ")";
    }
  } else {
    s = "size=";
    if (o.size.size() == 1) {
      s += std::to_string(o.size[0]);
    } else {
      s += "(";
      for (int i = 0; i < o.size.size(); ++i) s += (i ? ", " : "") + std::to_string(o.size[i]);
      s += ")";
    }
  }
  return s + ", mode=" + o.mode;  // torch 1.13 prints the mode unquoted
}

// ---- PixelShuffle, PixelUnshuffle ----

PixelShuffleImpl::PixelShuffleImpl(PixelShuffleOptions o) : options_(o) {
  check_options(o, "PixelShuffle");
}
std::string PixelShuffleImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

PixelUnshuffleImpl::PixelUnshuffleImpl(PixelUnshuffleOptions o) : options_(o) {
  check_options(o, "PixelUnshuffle");
}
std::string PixelUnshuffleImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

// ---- Unfold, Fold ----

namespace {

json fold_json(const FoldOptions& o, bool with_output) {
  json j = options_json(o);
  if (!with_output) j.erase("output_size");  // Unfold has no output size
  return j;
}

std::string fold_repr(const FoldOptions& o) {
  return "kernel_size=" + pyrepr::py_size(o.kernel_size) +
         ", dilation=" + pyrepr::py_size(o.dilation) + ", padding=" + pyrepr::py_size(o.padding) +
         ", stride=" + pyrepr::py_size(o.stride);
}

}  // namespace

Tensor UnfoldImpl::forward(const Tensor& x) {
  const FoldOptions& o = options_;
  return im2col(x, o.kernel_size, o.dilation, o.padding, o.stride);
}
json UnfoldImpl::options() const { return fold_json(options_, false); }
std::string UnfoldImpl::extra_repr() const { return fold_repr(options_); }

Tensor FoldImpl::forward(const Tensor& x) {
  const FoldOptions& o = options_;
  return col2im(x, o.output_size, o.kernel_size, o.dilation, o.padding, o.stride);
}
json FoldImpl::options() const { return fold_json(options_, true); }
std::string FoldImpl::extra_repr() const {
  return "output_size=" + pyrepr::py_size(options_.output_size) + ", " + fold_repr(options_);
}

// ---- ChannelShuffle ----

ChannelShuffleImpl::ChannelShuffleImpl(ChannelShuffleOptions o) : options_(o) {
  check_options(o, "ChannelShuffle");
}
Tensor ChannelShuffleImpl::forward(const Tensor& x) { return channel_shuffle(x, options_.groups); }
std::string ChannelShuffleImpl::extra_repr() const { return pyrepr::fields_repr(options_); }

}  // namespace ember::nn
