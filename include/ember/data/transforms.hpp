// ember/data/transforms.hpp — torchvision's vision transforms, seeded per sample (docs/data.md).
//
// An image is a CPU tensor in one of two layouts, fixed by its dtype, as in torchvision where
// PIL images come before ToTensor and tensors after it:
//   u8  [H, W, C]  rows, columns, channels: what read_image gives (C = 3)
//   f32 [C, H, W]  channels first, values in [0, 1]: what ToTensor gives
// Resize, CenterCrop, RandomResizedCrop and RandomHorizontalFlip take either and keep it;
// ToTensor takes u8 [H, W, C] and gives f32 [C, H, W] (/ 255); Normalize takes f32 [C, H, W].
//
//   using namespace data::transforms;
//   Transform train = Compose({RandomResizedCrop(224), RandomHorizontalFlip(),
//                              ToTensor(), Normalize({0.485, 0.456, 0.406}, {0.229, 0.224,
//                              0.225})});
//   Transform eval = Compose({Resize(256), CenterCrop(224), ToTensor()});
//   SampleRng rng(/*seed=*/0, /*epoch=*/3, /*index=*/17);
//   Tensor x = train(data::read_image("cat.jpg"), rng);   // f32 [3, 224, 224]
//
// Note [Augmentation seeded per sample]
// A random transform draws only from the SampleRng it is given, and ImageFolder makes that
// generator from (seed, epoch, index) alone (xoshiro256** seeded through splitmix64, as the
// DataLoader's shuffle). So sample i of epoch e is augmented the same way whichever thread
// decodes it, however many workers there are, and in a run resumed from a checkpoint.
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::data::transforms {

/// The random source of one sample's augmentations (Note [Augmentation seeded per sample]).
/// Example: SampleRng rng(seed, epoch, index); double u = rng.uniform();  // [0, 1)
class SampleRng {
 public:
  SampleRng(uint64_t seed, int64_t epoch, int64_t index);
  /// 64 random bits.
  uint64_t next();
  /// Uniform in [0, 1) with 53 random bits.
  double uniform();
  /// Uniform in [low, high).
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  /// Uniform integer in [low, high] (both included), without modulo bias.
  int64_t integer(int64_t low, int64_t high);

 private:
  uint64_t state_[4];
};

/// What every transform implements. Write a subclass for a transform of your own; a
/// Transform handle holds any of them.
class TransformBase {
 public:
  virtual ~TransformBase() = default;
  /// The transformed image; draws randomness from `rng` only.
  virtual Tensor apply(const Tensor& image, SampleRng& rng) const = 0;
  /// torchvision's repr, e.g. "Resize(size=256)".
  virtual std::string repr() const = 0;
  /// apply(image, rng). Example: Tensor y = Resize(256)(x, rng);
  Tensor operator()(const Tensor& image, SampleRng& rng) const { return apply(image, rng); }
  /// apply() with SampleRng(0, 0, 0): for deterministic transforms and quick checks.
  Tensor operator()(const Tensor& image) const;
};

/// A shared, immutable handle to a transform (copying it shares the transform).
/// An empty handle is the identity.
class Transform {
 public:
  Transform() = default;
  template <std::derived_from<TransformBase> T>
  Transform(T transform) : impl_(std::make_shared<const T>(std::move(transform))) {}
  explicit Transform(std::shared_ptr<const TransformBase> impl) : impl_(std::move(impl)) {}

  Tensor operator()(const Tensor& image, SampleRng& rng) const;
  /// With SampleRng(0, 0, 0): for deterministic transforms and quick checks.
  Tensor operator()(const Tensor& image) const;
  std::string repr() const;
  bool defined() const { return impl_ != nullptr; }
  const TransformBase* get() const { return impl_.get(); }

 private:
  std::shared_ptr<const TransformBase> impl_;
};

/// Applies transforms in order. Example: Compose({Resize(256), CenterCrop(224), ToTensor()})
/// ToTensor directly followed by Normalize runs as one pass (bitwise the same result).
class Compose : public TransformBase {
 public:
  explicit Compose(std::vector<Transform> transforms);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  const std::vector<Transform>& transforms() const { return transforms_; }

 private:
  std::vector<Transform> transforms_;
};

/// Bilinear resize with antialiasing, as torchvision's Resize on tensors with antialias=True
/// (PIL's filter; u8 results rounded half to even). Resize(size): the shorter side becomes
/// `size`, the longer keeps the aspect ratio (truncated); Resize(height, width): exactly that.
/// Example: Resize(256)(img) on [480, 640, 3] gives [256, 341, 3]
class Resize : public TransformBase {
 public:
  explicit Resize(int64_t size);
  Resize(int64_t height, int64_t width);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  /// The (height, width) an image of (height, width) is resized to.
  std::array<int64_t, 2> output_size(int64_t height, int64_t width) const;

 private:
  int64_t height_ = 0, width_ = 0;  // width_ == 0: shorter side to height_
};

/// The central (height, width) region; zero padding where the crop is larger than the image
/// (torchvision's CenterCrop). Example: CenterCrop(224)
class CenterCrop : public TransformBase {
 public:
  explicit CenterCrop(int64_t size) : CenterCrop(size, size) {}
  CenterCrop(int64_t height, int64_t width);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;

 private:
  int64_t height_, width_;
};

/// A crop region: rows [top, top + height), columns [left, left + width).
struct CropBox {
  int64_t top = 0, left = 0, height = 0, width = 0;
};

struct RandomResizedCropOptions {
  /// The crop's area as a fraction of the image's, drawn uniformly in [scale[0], scale[1]].
  std::array<double, 2> scale{0.08, 1.0};
  /// The crop's width / height, drawn log-uniformly in [ratio[0], ratio[1]].
  std::array<double, 2> ratio{3.0 / 4.0, 4.0 / 3.0};
};

/// torchvision's RandomResizedCrop: up to 10 draws of (area, aspect ratio) until the crop
/// fits, else the central crop of the ratio nearest the image's; then Resize to `size`.
/// Example: RandomResizedCrop(224, {.scale = {0.25, 1.0}})
class RandomResizedCrop : public TransformBase {
 public:
  explicit RandomResizedCrop(int64_t size, RandomResizedCropOptions options = {})
      : RandomResizedCrop(size, size, options) {}
  RandomResizedCrop(int64_t height, int64_t width, RandomResizedCropOptions options = {});
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  /// The region cropped from an image of (height, width) (torchvision's get_params).
  CropBox get_params(int64_t height, int64_t width, SampleRng& rng) const;

 private:
  int64_t height_, width_;
  RandomResizedCropOptions options_;
};

/// Mirrors the image left-right with probability p. Example: RandomHorizontalFlip(0.5)
class RandomHorizontalFlip : public TransformBase {
 public:
  explicit RandomHorizontalFlip(double p = 0.5);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;

 private:
  double p_;
};

/// u8 [H, W, C] -> f32 [C, H, W] with values / 255 (torchvision's ToTensor on a PIL image).
class ToTensor : public TransformBase {
 public:
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override { return "ToTensor()"; }
};

/// (x - mean[c]) / std[c] per channel of f32 [C, H, W], in f32 as torchvision.
/// Example: Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})
class Normalize : public TransformBase {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std);
  Tensor apply(const Tensor& image, SampleRng& rng) const override;
  std::string repr() const override;
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& std() const { return std_; }

 private:
  std::vector<double> mean_, std_;
};

// ---- the operations, for images in either layout ----

/// Resize to (height, width) as Resize does. Example: resize(img, 224, 224)
Tensor resize(const Tensor& image, int64_t height, int64_t width);
/// The region `box` (zeros where it lies outside the image). Example: crop(img, {0, 0, 8, 8})
Tensor crop(const Tensor& image, const CropBox& box);
/// crop then resize, in one pass (what RandomResizedCrop does with its drawn box).
Tensor resized_crop(const Tensor& image, const CropBox& box, int64_t height, int64_t width);
/// Mirrored left-right.
Tensor hflip(const Tensor& image);

}  // namespace ember::data::transforms
