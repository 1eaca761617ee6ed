// src/data/transforms.cpp — torchvision's transforms on u8 [H, W, C] and f32 [C, H, W] images:
// antialiased bilinear resize, crops, flip, ToTensor, Normalize, and the per-sample generator.
//
// Note [Antialiased bilinear as torch]
// Resize reproduces torch 1.13's _upsample_bilinear2d_aa on the CPU (what torchvision's
// tensor Resize with antialias=True calls, and what imitates PIL's BILINEAR): per output
// coordinate i, scale = in / out (f32), support = scale when downscaling else 1, center =
// scale * (i + 0.5), taps [xmin, xmin + xsize) with xmin = int(center - support + 0.5) and
// xsize = min(int(center + support + 0.5), in) - xmin, weights the triangle filter of
// (j + xmin - center + 0.5) / max(scale, 1), normalised to sum 1. The rows are filtered
// first (horizontal pass), then the columns, each pass skipped when its size does not
// change, in f32 with the same order of operations as torch; a u8 image is filtered as f32
// and rounded half to even at the end, as torchvision casts back. Results equal torch's to
// f32 rounding (tests/test_transforms.cpp: f32 within 2e-6, u8 within 1).
#include "ember/data/transforms.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "data/xoshiro.hpp"
#include "ember/error.hpp"

namespace ember::data::transforms {

// ---- SampleRng ----

SampleRng::SampleRng(uint64_t seed, int64_t epoch, int64_t index) {
  uint64_t sm = seed;
  sm = splitmix64(sm) ^ (static_cast<uint64_t>(epoch) * 0xD1B54A32D192ED03ull);
  sm = splitmix64(sm) ^ (static_cast<uint64_t>(index) * 0xABC98388FB8FAC03ull);
  for (uint64_t& word : state_) word = splitmix64(sm);
}

uint64_t SampleRng::next() { return xoshiro256_next(state_); }

double SampleRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

int64_t SampleRng::integer(int64_t low, int64_t high) {
  EMBER_CHECK(low <= high, "SampleRng::integer: low ", low, " > high ", high);
  const uint64_t bound = static_cast<uint64_t>(high - low) + 1;
  if (bound == 0) return static_cast<int64_t>(next());  // the whole 64-bit range
  return low + static_cast<int64_t>(xoshiro256_below(state_, bound));
}

// ---- image views ----

namespace {

// An image in either layout, read through strides (in elements).
template <typename T>
struct View {
  const T* data;
  int64_t height, width, channels;
  int64_t stride_y, stride_x, stride_c;
  const T& at(int64_t y, int64_t x, int64_t c) const {
    return data[y * stride_y + x * stride_x + c * stride_c];
  }
};

bool is_hwc(const Tensor& image) { return image.dtype() == DType::u8; }

// Checks an image and gives its (height, width, channels).
std::array<int64_t, 3> image_dims(const char* op, const Tensor& image) {
  const bool ok = image.defined() && image.dim() == 3 && image.device().is_cpu() &&
                  (image.dtype() == DType::u8 || image.dtype() == DType::f32);
  EMBER_CHECK(ok, op, ": image ",
              image.defined()
                  ? image.shape().to_string() + " " + std::string(dtype_name(image.dtype())) +
                        " on " + image.device().str()
                  : std::string("undefined"),
              " (expected a CPU u8 [H, W, C] image, as read_image gives, or f32 [C, H, W], as "
              "ToTensor gives)");
  if (is_hwc(image)) return {image.size(0), image.size(1), image.size(2)};
  return {image.size(1), image.size(2), image.size(0)};
}

template <typename T>
View<T> view_of(const Tensor& image) {
  const auto [h, w, c] = image_dims("transforms", image);
  const T* p = static_cast<const T*>(image.data_ptr());
  if (is_hwc(image)) return {p, h, w, c, image.stride(0), image.stride(1), image.stride(2)};
  return {p, h, w, c, image.stride(1), image.stride(2), image.stride(0)};
}

// A new contiguous image of (h, w, c) in `like`'s layout and dtype.
Tensor new_image(const Tensor& like, int64_t h, int64_t w, int64_t c) {
  const TensorOptions o{.dtype = like.dtype(), .device = Device::cpu()};
  return is_hwc(like) ? empty({h, w, c}, o) : empty({c, h, w}, o);
}

// Output strides (y, x, c) of a contiguous image in `like`'s layout.
std::array<int64_t, 3> out_strides(const Tensor& like, int64_t h, int64_t w, int64_t c) {
  if (is_hwc(like)) return {w * c, c, 1};
  return {w, 1, h * w};
}

template <typename T>
T store(float v) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    // torchvision: torch.round (half to even), then the cast to u8. Adding and taking away
    // 1.5 * 2^23 rounds a float in [0, 2^22) to the nearest integer, ties to even, as
    // nearbyint does in the default rounding mode (which a call would cost per value).
    const float r = std::min(std::max(v, 0.0f), 255.0f);
    return static_cast<uint8_t>((r + 12582912.0f) - 12582912.0f);
  } else {
    return v;
  }
}

// Calls fn.template operator()<T>() with T the image's element type.
template <typename Fn>
Tensor dispatch(const Tensor& image, Fn&& fn) {
  if (image.dtype() == DType::u8) return fn(uint8_t{});
  return fn(float{});
}

// ---- the antialiased bilinear resize (Note [Antialiased bilinear as torch]) ----

struct AxisWeights {
  std::vector<int64_t> first, count;  // per output index: first input tap, number of taps
  std::vector<float> weights;         // taps per output index, `stride` apart
  int64_t stride = 0;
};

AxisWeights aa_weights(int64_t in, int64_t out) {
  AxisWeights a;
  const float scale = static_cast<float>(in) / static_cast<float>(out);
  const float support = scale >= 1.0f ? 1.0f * scale : 1.0f;  // (interp_size 2) * 0.5 * scale
  const float invscale = scale >= 1.0f ? static_cast<float>(1.0 / scale) : 1.0f;
  a.stride = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  a.first.resize(out);
  a.count.resize(out);
  a.weights.assign(static_cast<size_t>(out * a.stride), 0.0f);
  for (int64_t i = 0; i < out; ++i) {
    const float center = static_cast<float>(scale * (i + 0.5));
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    const int64_t xsize =
        std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in) - xmin;
    float* w = &a.weights[i * a.stride];
    float total = 0.0f;
    for (int64_t j = 0; j < xsize; ++j) {
      float x = static_cast<float>((static_cast<float>(j + xmin) - center + 0.5) * invscale);
      if (x < 0) x = -x;
      w[j] = x < 1.0f ? 1.0f - x : 0.0f;
      total += w[j];
    }
    for (int64_t j = 0; j < xsize; ++j)
      if (total != 0.0f) w[j] /= total;
    a.first[i] = xmin;
    a.count[i] = xsize;
  }
  return a;
}

// Resizes box of `src` to (oh, ow) into `out` (contiguous, `like`'s layout). The box lies
// inside the image. kC > 0: the channel count, known at compile time (3, the common case).
template <typename T, int kC>
void resize_box(const View<T>& src, const CropBox& box, int64_t oh, int64_t ow, T* out,
                std::array<int64_t, 3> os) {
  const int64_t c = kC > 0 ? kC : src.channels;
  const bool horizontal = ow != box.width, vertical = oh != box.height;
  const bool packed_rows = src.stride_c == 1 && src.stride_x == c;  // HWC
  // Pass 1: rows of the box, columns resized (or converted): tmp [box.height, ow, c] f32.
  std::vector<float> tmp(static_cast<size_t>(box.height * ow * c));
  std::vector<float> row(static_cast<size_t>(box.width * c));
  const AxisWeights wx = horizontal ? aa_weights(box.width, ow) : AxisWeights{};
  for (int64_t y = 0; y < box.height; ++y) {
    if (packed_rows) {
      const T* p = &src.at(box.top + y, box.left, 0);
      for (int64_t i = 0; i < box.width * c; ++i) row[i] = static_cast<float>(p[i]);
    } else {
      for (int64_t x = 0; x < box.width; ++x)
        for (int64_t k = 0; k < c; ++k)
          row[x * c + k] = static_cast<float>(src.at(box.top + y, box.left + x, k));
    }
    float* t = &tmp[y * ow * c];
    if (!horizontal) {
      std::memcpy(t, row.data(), row.size() * sizeof(float));
      continue;
    }
    for (int64_t x = 0; x < ow; ++x) {
      const float* w = &wx.weights[x * wx.stride];
      const float* r = &row[wx.first[x] * c];
      const int64_t taps = wx.count[x];
      for (int64_t k = 0; k < c; ++k) {
        float acc = r[k] * w[0];
        for (int64_t j = 1; j < taps; ++j) acc += r[j * c + k] * w[j];
        t[x * c + k] = acc;
      }
    }
  }
  // Pass 2: columns resized (or copied) into the output's layout.
  const AxisWeights wy = vertical ? aa_weights(box.height, oh) : AxisWeights{};
  const int64_t n = ow * c;
  std::vector<float> acc(static_cast<size_t>(n));
  const bool packed_out = os[2] == 1 && os[1] == c;
  for (int64_t y = 0; y < oh; ++y) {
    if (vertical) {
      const float* w = &wy.weights[y * wy.stride];
      const float* t0 = &tmp[wy.first[y] * n];
      const float w0 = w[0];
      for (int64_t i = 0; i < n; ++i) acc[i] = t0[i] * w0;
      for (int64_t j = 1; j < wy.count[y]; ++j) {
        const float* tj = t0 + j * n;
        const float wj = w[j];
        for (int64_t i = 0; i < n; ++i) acc[i] += tj[i] * wj;
      }
    } else {
      std::memcpy(acc.data(), &tmp[y * n], static_cast<size_t>(n) * sizeof(float));
    }
    if (packed_out) {
      T* o = out + y * os[0];
      for (int64_t i = 0; i < n; ++i) o[i] = store<T>(acc[i]);
    } else {
      for (int64_t k = 0; k < c; ++k)
        for (int64_t x = 0; x < ow; ++x)
          out[y * os[0] + x * os[1] + k * os[2]] = store<T>(acc[x * c + k]);
    }
  }
}

template <typename T>
void resize_box_any(const View<T>& src, const CropBox& box, int64_t oh, int64_t ow, T* out,
                    std::array<int64_t, 3> os) {
  if (src.channels == 3) return resize_box<T, 3>(src, box, oh, ow, out, os);
  resize_box<T, 0>(src, box, oh, ow, out, os);
}

void check_size(const char* op, int64_t height, int64_t width) {
  EMBER_CHECK(height >= 1 && width >= 1, op, ": size (", height, ", ", width,
              ") (expected positive sizes)");
}

}  // namespace

// ---- the operations ----

Tensor resized_crop(const Tensor& image, const CropBox& box, int64_t height, int64_t width) {
  const auto [h, w, c] = image_dims("resized_crop", image);
  check_size("resized_crop", height, width);
  EMBER_CHECK(box.height >= 1 && box.width >= 1, "resized_crop: crop of ", box.height, "x",
              box.width, " (expected positive sizes)");
  // A box reaching outside the image is cropped (zero padded) first.
  if (box.top < 0 || box.left < 0 || box.top + box.height > h || box.left + box.width > w)
    return resized_crop(crop(image, box), {0, 0, box.height, box.width}, height, width);
  Tensor out = new_image(image, height, width, c);
  const auto os = out_strides(image, height, width, c);
  return dispatch(image, [&]<typename T>(T) {
    resize_box_any(view_of<T>(image), box, height, width, static_cast<T*>(out.data_ptr()), os);
    return out;
  });
}

Tensor resize(const Tensor& image, int64_t height, int64_t width) {
  const auto [h, w, c] = image_dims("resize", image);
  (void)c;
  return resized_crop(image, {0, 0, h, w}, height, width);
}

Tensor crop(const Tensor& image, const CropBox& box) {
  const auto [h, w, c] = image_dims("crop", image);
  EMBER_CHECK(box.height >= 1 && box.width >= 1, "crop: crop of ", box.height, "x", box.width,
              " (expected positive sizes)");
  Tensor out = new_image(image, box.height, box.width, c);
  const auto os = out_strides(image, box.height, box.width, c);
  return dispatch(image, [&]<typename T>(T) {
    const View<T> src = view_of<T>(image);
    T* dst = static_cast<T*>(out.data_ptr());
    for (int64_t y = 0; y < box.height; ++y)
      for (int64_t x = 0; x < box.width; ++x) {
        const int64_t sy = box.top + y, sx = box.left + x;
        const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
        for (int64_t k = 0; k < c; ++k)
          dst[y * os[0] + x * os[1] + k * os[2]] = inside ? src.at(sy, sx, k) : T{0};
      }
    return out;
  });
}

Tensor hflip(const Tensor& image) {
  const auto [h, w, c] = image_dims("hflip", image);
  Tensor out = new_image(image, h, w, c);
  const auto os = out_strides(image, h, w, c);
  return dispatch(image, [&]<typename T>(T) {
    const View<T> src = view_of<T>(image);
    T* dst = static_cast<T*>(out.data_ptr());
    if (src.stride_c == 1 && src.stride_x == c && os[1] == c) {  // packed HWC: whole pixels
      for (int64_t y = 0; y < h; ++y) {
        const T* r = &src.at(y, 0, 0);
        T* d = dst + y * os[0];
        for (int64_t x = 0; x < w; ++x)
          for (int64_t k = 0; k < c; ++k) d[x * c + k] = r[(w - 1 - x) * c + k];
      }
      return out;
    }
    for (int64_t k = 0; k < c; ++k)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          dst[y * os[0] + x * os[1] + k * os[2]] = src.at(y, w - 1 - x, k);
    return out;
  });
}

// ---- Transform and Compose ----

Tensor Transform::operator()(const Tensor& image, SampleRng& rng) const {
  return impl_ ? impl_->apply(image, rng) : image;
}

Tensor TransformBase::operator()(const Tensor& image) const {
  SampleRng rng(0, 0, 0);
  return apply(image, rng);
}

Tensor Transform::operator()(const Tensor& image) const {
  SampleRng rng(0, 0, 0);
  return (*this)(image, rng);
}

std::string Transform::repr() const { return impl_ ? impl_->repr() : "Identity()"; }

namespace {

// ToTensor then Normalize in one pass: ((float)v / 255 - mean) / std, the same f32 operations.
Tensor to_tensor_normalized(const Tensor& image, const std::vector<float>* mean,
                            const std::vector<float>* std);

}  // namespace

Compose::Compose(std::vector<Transform> transforms) : transforms_(std::move(transforms)) {}

Tensor Compose::apply(const Tensor& image, SampleRng& rng) const {
  Tensor x = image;
  for (size_t i = 0; i < transforms_.size(); ++i) {
    const auto* to_tensor = dynamic_cast<const ToTensor*>(transforms_[i].get());
    const auto* normalize = i + 1 < transforms_.size()
                                ? dynamic_cast<const Normalize*>(transforms_[i + 1].get())
                                : nullptr;
    if (to_tensor && normalize) {
      const auto [h, w, c] = image_dims("ToTensor", x);
      (void)h;
      (void)w;
      EMBER_CHECK(static_cast<int64_t>(normalize->mean().size()) == c,
                  "Normalize: ", normalize->mean().size(), " means for an image of ", c,
                  " channels (expected one per channel)");
      const std::vector<float> mean(normalize->mean().begin(), normalize->mean().end());
      const std::vector<float> std(normalize->std().begin(), normalize->std().end());
      x = to_tensor_normalized(x, &mean, &std);
      ++i;
      continue;
    }
    x = transforms_[i](x, rng);
  }
  return x;
}

std::string Compose::repr() const {
  std::string s = "Compose(\n";
  for (const Transform& t : transforms_) s += "    " + t.repr() + "\n";
  return s + ")";
}

// ---- the transforms ----

Resize::Resize(int64_t size) : height_(size), width_(0) {
  EMBER_CHECK(size >= 1, "Resize: size ", size, " (expected a positive size)");
}

Resize::Resize(int64_t height, int64_t width) : height_(height), width_(width) {
  check_size("Resize", height, width);
}

std::array<int64_t, 2> Resize::output_size(int64_t height, int64_t width) const {
  if (width_ != 0) return {height_, width_};
  // torchvision: the shorter side to size, the longer int(size * long / short).
  const int64_t shorter = std::min(height, width), longer = std::max(height, width);
  const auto other = static_cast<int64_t>(static_cast<double>(height_ * longer) / shorter);
  return width <= height ? std::array<int64_t, 2>{other, height_}
                         : std::array<int64_t, 2>{height_, other};
}

Tensor Resize::apply(const Tensor& image, SampleRng&) const {
  const auto [h, w, c] = image_dims("Resize", image);
  (void)c;
  const auto [oh, ow] = output_size(h, w);
  if (oh == h && ow == w) return image;  // as torchvision: unchanged
  return resize(image, oh, ow);
}

std::string Resize::repr() const {
  if (width_ == 0) return detail::concat("Resize(size=", height_, ")");
  return detail::concat("Resize(size=(", height_, ", ", width_, "))");
}

CenterCrop::CenterCrop(int64_t height, int64_t width) : height_(height), width_(width) {
  check_size("CenterCrop", height, width);
}

Tensor CenterCrop::apply(const Tensor& image, SampleRng&) const {
  const auto [h, w, c] = image_dims("CenterCrop", image);
  (void)c;
  if (h == height_ && w == width_) return image;
  // torchvision: pad (left, top) by half the shortfall, else offset round((size - crop) / 2),
  // Python's round (half to even).
  auto offset = [](int64_t size, int64_t want) {
    if (want > size) return -((want - size) / 2);
    return static_cast<int64_t>(std::nearbyint(static_cast<double>(size - want) / 2.0));
  };
  return crop(image, {offset(h, height_), offset(w, width_), height_, width_});
}

std::string CenterCrop::repr() const {
  return detail::concat("CenterCrop(size=(", height_, ", ", width_, "))");
}

RandomResizedCrop::RandomResizedCrop(int64_t height, int64_t width,
                                     RandomResizedCropOptions options)
    : height_(height), width_(width), options_(options) {
  check_size("RandomResizedCrop", height, width);
  const auto& s = options_.scale;
  const auto& r = options_.ratio;
  EMBER_CHECK(s[0] > 0 && s[0] <= s[1] && s[1] <= 1.0 && std::isfinite(s[0]),
              "RandomResizedCrop: scale (", s[0], ", ", s[1],
              ") (expected 0 < scale[0] <= scale[1] <= 1)");
  EMBER_CHECK(r[0] > 0 && r[0] <= r[1] && std::isfinite(r[1]), "RandomResizedCrop: ratio (", r[0],
              ", ", r[1], ") (expected 0 < ratio[0] <= ratio[1], finite)");
}

CropBox RandomResizedCrop::get_params(int64_t height, int64_t width, SampleRng& rng) const {
  const double area = static_cast<double>(height * width);
  const double log_r0 = std::log(options_.ratio[0]), log_r1 = std::log(options_.ratio[1]);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(options_.scale[0], options_.scale[1]);
    const double aspect = std::exp(rng.uniform(log_r0, log_r1));
    const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area * aspect)));
    const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target_area / aspect)));
    if (0 < w && w <= width && 0 < h && h <= height) {
      const int64_t top = rng.integer(0, height - h);
      const int64_t left = rng.integer(0, width - w);
      return {top, left, h, w};
    }
  }
  // The fallback: the central crop of the ratio nearest the image's.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < options_.ratio[0]) {
    h = static_cast<int64_t>(std::nearbyint(static_cast<double>(w) / options_.ratio[0]));
  } else if (in_ratio > options_.ratio[1]) {
    w = static_cast<int64_t>(std::nearbyint(static_cast<double>(h) * options_.ratio[1]));
  }
  return {(height - h) / 2, (width - w) / 2, h, w};
}

Tensor RandomResizedCrop::apply(const Tensor& image, SampleRng& rng) const {
  const auto [h, w, c] = image_dims("RandomResizedCrop", image);
  (void)c;
  return resized_crop(image, get_params(h, w, rng), height_, width_);
}

std::string RandomResizedCrop::repr() const {
  return detail::concat("RandomResizedCrop(size=(", height_, ", ", width_, "), scale=(",
                        options_.scale[0], ", ", options_.scale[1], "), ratio=(", options_.ratio[0],
                        ", ", options_.ratio[1], "))");
}

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0, "RandomHorizontalFlip: p ", p, " (expected 0 <= p <= 1)");
}

Tensor RandomHorizontalFlip::apply(const Tensor& image, SampleRng& rng) const {
  image_dims("RandomHorizontalFlip", image);
  return rng.uniform() < p_ ? hflip(image) : image;  // one draw per sample, flipped or not
}

std::string RandomHorizontalFlip::repr() const {
  return detail::concat("RandomHorizontalFlip(p=", p_, ")");
}

namespace {

Tensor to_tensor_normalized(const Tensor& image, const std::vector<float>* mean,
                            const std::vector<float>* std) {
  const auto [h, w, c] = image_dims("ToTensor", image);
  EMBER_CHECK(image.dtype() == DType::u8, "ToTensor: image ", image.shape().to_string(), " ",
              dtype_name(image.dtype()), " (expected u8 [H, W, C], as read_image gives)");
  Tensor out = empty({c, h, w}, {.dtype = DType::f32, .device = Device::cpu()});
  const View<uint8_t> src = view_of<uint8_t>(image);
  float* dst = out.data<float>();
  // Every u8 value's result, per channel: the same f32 operations, looked up.
  std::vector<float> table(static_cast<size_t>(c * 256));
  for (int64_t k = 0; k < c; ++k) {
    const float m = mean ? (*mean)[k] : 0.0f, s = std ? (*std)[k] : 1.0f;
    for (int v = 0; v < 256; ++v) {
      const float x = static_cast<float>(v) / 255.0f;
      table[k * 256 + v] = mean ? (x - m) / s : x;
    }
  }
  const int64_t plane = h * w;
  if (c == 3 && src.stride_c == 1 && src.stride_x == 3 && src.stride_y == 3 * w) {  // packed RGB
    const uint8_t* p = src.data;
    const float *t0 = &table[0], *t1 = &table[256], *t2 = &table[512];
    for (int64_t i = 0; i < plane; ++i) {
      dst[i] = t0[p[3 * i]];
      dst[plane + i] = t1[p[3 * i + 1]];
      dst[2 * plane + i] = t2[p[3 * i + 2]];
    }
    return out;
  }
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const uint8_t* p = &src.at(y, x, 0);
      for (int64_t k = 0; k < c; ++k)
        dst[k * plane + y * w + x] = table[k * 256 + p[k * src.stride_c]];
    }
  return out;
}

}  // namespace

Tensor ToTensor::apply(const Tensor& image, SampleRng&) const {
  return to_tensor_normalized(image, nullptr, nullptr);
}

Normalize::Normalize(std::vector<double> mean, std::vector<double> std)
    : mean_(std::move(mean)), std_(std::move(std)) {
  EMBER_CHECK(!mean_.empty() && mean_.size() == std_.size(), "Normalize: ", mean_.size(),
              " means and ", std_.size(), " standard deviations (expected as many, at least one)");
  for (size_t k = 0; k < std_.size(); ++k)
    EMBER_CHECK(std_[k] != 0.0 && std::isfinite(std_[k]), "Normalize: std[", k, "] is ", std_[k],
                " (expected a finite non-zero value; it divides)");
}

Tensor Normalize::apply(const Tensor& image, SampleRng&) const {
  const auto [h, w, c] = image_dims("Normalize", image);
  EMBER_CHECK(image.dtype() == DType::f32, "Normalize: image ", image.shape().to_string(), " ",
              dtype_name(image.dtype()), " (expected f32 [C, H, W]: put ToTensor before it)");
  EMBER_CHECK(static_cast<int64_t>(mean_.size()) == c, "Normalize: ", mean_.size(),
              " means for an image of ", c, " channels (expected one per channel)");
  Tensor out = empty({c, h, w}, {.dtype = DType::f32, .device = Device::cpu()});
  const View<float> src = view_of<float>(image);
  float* dst = out.data<float>();
  for (int64_t k = 0; k < c; ++k) {
    const auto m = static_cast<float>(mean_[k]), s = static_cast<float>(std_[k]);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) dst[(k * h + y) * w + x] = (src.at(y, x, k) - m) / s;
  }
  return out;
}

std::string Normalize::repr() const {
  std::ostringstream s;
  s << "Normalize(mean=[";
  for (size_t k = 0; k < mean_.size(); ++k) s << (k ? ", " : "") << mean_[k];
  s << "], std=[";
  for (size_t k = 0; k < std_.size(); ++k) s << (k ? ", " : "") << std_[k];
  s << "])";
  return s.str();
}

}  // namespace ember::data::transforms
