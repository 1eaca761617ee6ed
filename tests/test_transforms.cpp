// tests/test_transforms.cpp — vision transforms against torchvision 0.14 (fixtures from
// tests/gen_image_fixtures.py), the per-sample generator, RandomResizedCrop's sampling and
// fallback, and argument errors.
//
// Tolerances: u8 outputs within 1 (torch rounds f32 sums that may differ from ours in the
// last bit, e.g. through FMA contraction), f32 outputs within 2e-6 (values in [0, 1]); most
// values are expected bitwise equal and the tests check that too.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ember/data/transforms.hpp"
#include "error_of.hpp"

namespace {

using namespace ember;
using namespace ember::data::transforms;
using ember::test_util::error_of;
using nlohmann::json;

const json& image_fixtures() {
  static const json j = [] {
    std::ifstream in(std::string(EMBER_TEST_DATA_DIR) + "/image_fixtures.json");
    EXPECT_TRUE(in.good()) << "tests/data/image_fixtures.json is missing: run "
                              "/usr/bin/python3 tests/gen_image_fixtures.py";
    return json::parse(in);
  }();
  return j;
}

const json& tcase(const std::string& name) { return image_fixtures()["transforms"][name]; }

// The fixture's u8 image [H, W, 3] and its f32 [3, H, W] (/ 255, as the generator).
Tensor image_u8() {
  const json& im = tcase("image");
  const std::vector<uint8_t> data = im["data"].get<std::vector<uint8_t>>();
  const auto shape = im["shape"].get<std::vector<int64_t>>();
  return from_vector(data, {shape[0], shape[1], shape[2]}, {.device = Device::cpu()});
}

Tensor image_f32() { return ToTensor()(image_u8()); }

// Compares got (flattened in its own layout) with want; returns the share of exact matches.
template <typename T>
double expect_near(const Tensor& got, const std::vector<T>& want, double tol,
                   const std::string& what) {
  const std::vector<T> g = got.contiguous().to_vector<T>();
  EXPECT_EQ(g.size(), want.size()) << what << ": shape " << got.shape().to_string();
  if (g.size() != want.size()) return 0;
  size_t exact = 0, bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double d = std::abs(static_cast<double>(g[i]) - static_cast<double>(want[i]));
    exact += d == 0;
    if (d > tol && bad++ < 3)
      ADD_FAILURE() << what << ": element " << i << " is " << +g[i] << ", torchvision " << +want[i];
  }
  return static_cast<double>(exact) / static_cast<double>(g.size());
}

TEST(Transforms, ResizeU8MatchesTorchvision) {
  const Tensor img = image_u8();
  for (const char* name : {"resize_down_u8", "resize_up_u8", "resize_mixed_u8",
                           "resize_width_only_u8", "resize_shorter_u8"}) {
    const json& c = tcase(name);
    const auto size = c["size"].get<std::vector<int64_t>>();
    const Tensor out = size.size() == 1 ? Resize(size[0])(img) : Resize(size[0], size[1])(img);
    EXPECT_EQ(out.dtype(), DType::u8) << name;
    const double exact = expect_near(out, c["data"].get<std::vector<uint8_t>>(), 1.0, name);
    EXPECT_GT(exact, 0.98) << name << ": share of values bitwise equal to torchvision";
  }
  // Resize(16) on 23 x 29: the shorter side 16, the other int(16 * 29 / 23) = 20.
  EXPECT_EQ(Resize(16)(img).shape(), Shape({16, 20, 3}));
  EXPECT_EQ(Resize(16).output_size(29, 23), (std::array<int64_t, 2>{20, 16}));
}

TEST(Transforms, ResizeF32MatchesTorchvision) {
  const Tensor img = image_f32();
  for (const char* name : {"resize_down_f32", "resize_up_f32"}) {
    const json& c = tcase(name);
    const auto size = c["size"].get<std::vector<int64_t>>();
    const Tensor out = Resize(size[0], size[1])(img);
    EXPECT_EQ(out.shape(), Shape({3, size[0], size[1]})) << name;
    const double exact = expect_near(out, c["data"].get<std::vector<float>>(), 2e-6, name);
    EXPECT_GT(exact, 0.5) << name << ": share of values bitwise equal to torchvision";
  }
}

TEST(Transforms, ResizedCropAndCenterCropMatchTorchvision) {
  const Tensor img = image_u8();
  const json& rc = tcase("resized_crop_u8");
  const auto box = rc["box"].get<std::vector<int64_t>>();
  const Tensor out = resized_crop(img, {box[0], box[1], box[2], box[3]}, 9, 9);
  expect_near(out, rc["data"].get<std::vector<uint8_t>>(), 1.0, "resized_crop");
  for (const char* name : {"center_crop_u8", "center_crop_pad_u8", "center_crop_odd_u8"}) {
    const json& c = tcase(name);
    const auto size = c["size"].get<std::vector<int64_t>>();
    const Tensor crop = CenterCrop(size[0], size[1])(img);
    EXPECT_EQ(crop.shape(), Shape(c["shape"].get<std::vector<int64_t>>())) << name;
    expect_near(crop, c["data"].get<std::vector<uint8_t>>(), 0.0, name);  // exact
  }
}

TEST(Transforms, FlipToTensorNormalizeMatchTorchvision) {
  expect_near(hflip(image_f32()), tcase("hflip_f32")["data"].get<std::vector<float>>(), 0.0,
              "hflip f32");
  // hflip of u8 [H, W, C] mirrors the columns.
  const Tensor u = image_u8(), f = hflip(u);
  EXPECT_EQ(f.select(1, 0).to_vector<uint8_t>(), u.select(1, u.size(1) - 1).to_vector<uint8_t>());
  expect_near(image_f32(), tcase("to_tensor")["data"].get<std::vector<float>>(), 0.0, "ToTensor");
  const json& n = tcase("normalize");
  const Normalize norm(n["mean"].get<std::vector<double>>(), n["std"].get<std::vector<double>>());
  const Tensor separate = norm(image_f32());
  expect_near(separate, n["data"].get<std::vector<float>>(), 1e-6, "Normalize");
  // Compose runs ToTensor + Normalize as one pass: bitwise the same.
  const Tensor fused = Compose({ToTensor(), norm})(image_u8());
  EXPECT_EQ(fused.to_vector<float>(), separate.to_vector<float>());
}

TEST(Transforms, SampleRngDependsOnSeedEpochIndexOnly) {
  auto draws = [](uint64_t seed, int64_t epoch, int64_t index) {
    SampleRng rng(seed, epoch, index);
    std::vector<uint64_t> v;
    for (int i = 0; i < 4; ++i) v.push_back(rng.next());
    return v;
  };
  EXPECT_EQ(draws(1, 2, 3), draws(1, 2, 3));
  EXPECT_NE(draws(1, 2, 3), draws(1, 2, 4));
  EXPECT_NE(draws(1, 2, 3), draws(1, 3, 3));
  EXPECT_NE(draws(1, 2, 3), draws(2, 2, 3));
  SampleRng rng(0, 0, 0);
  double lo = 1, hi = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.uniform();
    ASSERT_TRUE(u >= 0 && u < 1);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    const int64_t k = rng.integer(-2, 2);
    ASSERT_TRUE(k >= -2 && k <= 2);
  }
  EXPECT_LT(lo, 0.001);
  EXPECT_GT(hi, 0.999);
}

TEST(Transforms, RandomResizedCropSamplesAsTorchvision) {
  const RandomResizedCrop rrc(8);
  double min_share = 1, max_share = 0;
  for (int64_t i = 0; i < 2000; ++i) {
    SampleRng rng(5, 0, i);
    const CropBox b = rrc.get_params(100, 120, rng);
    ASSERT_TRUE(b.top >= 0 && b.left >= 0 && b.height >= 1 && b.width >= 1 &&
                b.top + b.height <= 100 && b.left + b.width <= 120)
        << i;
    const double share = static_cast<double>(b.height * b.width) / (100.0 * 120.0);
    const double aspect = static_cast<double>(b.width) / static_cast<double>(b.height);
    // Rounding w and h to integers moves area and ratio a little past the drawn values.
    EXPECT_TRUE(share > 0.07 && share < 1.01) << i << ": " << share;
    EXPECT_TRUE(aspect > 0.7 && aspect < 1.45) << i << ": " << aspect;
    min_share = std::min(min_share, share);
    max_share = std::max(max_share, share);
  }
  EXPECT_LT(min_share, 0.1);
  EXPECT_GT(max_share, 0.9);
  // No draw can fit (every ratio >= 10 needs w >= 44 on 20 x 20): the fallback crop of the
  // nearest ratio, centred: w = 20, h = round(20 / 10) = 2, top = (20 - 2) / 2.
  SampleRng rng(0, 0, 0);
  const RandomResizedCrop wide(8, {.scale = {0.5, 1.0}, .ratio = {10.0, 20.0}});
  const CropBox f = wide.get_params(20, 20, rng);
  EXPECT_EQ((std::array<int64_t, 4>{f.top, f.left, f.height, f.width}),
            (std::array<int64_t, 4>{9, 0, 2, 20}));
  const RandomResizedCrop tall(8, {.scale = {0.5, 1.0}, .ratio = {0.05, 0.1}});
  const CropBox t = tall.get_params(20, 20, rng);
  EXPECT_EQ((std::array<int64_t, 4>{t.top, t.left, t.height, t.width}),
            (std::array<int64_t, 4>{0, 9, 20, 2}));
  // The crop is resized_crop of the drawn box: same generator, same result.
  SampleRng a(3, 1, 4), b(3, 1, 4);
  const Tensor img = image_u8();
  const Tensor out = RandomResizedCrop(9)(img, a);
  EXPECT_EQ(out.shape(), Shape({9, 9, 3}));
  const CropBox box = RandomResizedCrop(9).get_params(23, 29, b);
  EXPECT_EQ(out.to_vector<uint8_t>(), resized_crop(img, box, 9, 9).to_vector<uint8_t>());
}

TEST(Transforms, RandomHorizontalFlipProbability) {
  const Tensor img = image_u8();
  const Tensor flipped = hflip(img);
  int flips = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    SampleRng rng(9, 0, i);
    const Tensor out = RandomHorizontalFlip(0.5)(img, rng);
    flips += out.to_vector<uint8_t>() == flipped.to_vector<uint8_t>();
  }
  EXPECT_GT(flips, 430);
  EXPECT_LT(flips, 570);
  SampleRng rng(0, 0, 0);
  EXPECT_EQ(RandomHorizontalFlip(1.0)(img, rng).to_vector<uint8_t>(), flipped.to_vector<uint8_t>());
  EXPECT_EQ(RandomHorizontalFlip(0.0)(img, rng).to_vector<uint8_t>(), img.to_vector<uint8_t>());
}

TEST(Transforms, ComposeIsReproduciblePerSample) {
  const Transform t = Compose({RandomResizedCrop(12), RandomHorizontalFlip(), ToTensor(),
                               Normalize({0.5, 0.5, 0.5}, {0.25, 0.25, 0.25})});
  const Tensor img = image_u8();
  SampleRng a(1, 2, 3), b(1, 2, 3), c(1, 2, 4);
  const std::vector<float> first = t(img, a).to_vector<float>();
  EXPECT_EQ(first, t(img, b).to_vector<float>());
  EXPECT_NE(first, t(img, c).to_vector<float>());
  EXPECT_EQ(t(img, a).shape(), Shape({3, 12, 12}));
  EXPECT_NE(t.repr().find("RandomResizedCrop(size=(12, 12), scale=(0.08, 1)"), std::string::npos)
      << t.repr();
  EXPECT_EQ(Transform().repr(), "Identity()");
  EXPECT_EQ(Resize(256).repr(), "Resize(size=256)");
}

TEST(Transforms, BadArgumentsAreRefused) {
  EXPECT_NE(error_of([] { Resize(0); }).find("Resize: size 0 (expected a positive size)"),
            std::string::npos);
  EXPECT_NE(error_of([] { Resize(-3, 4); }).find("Resize: size (-3, 4)"), std::string::npos);
  EXPECT_NE(error_of([] { CenterCrop(0); }).find("CenterCrop"), std::string::npos);
  EXPECT_NE(error_of([] { RandomResizedCrop(-1); }).find("RandomResizedCrop: size (-1, -1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              RandomResizedCrop(8, {.scale = {0.9, 0.1}});
            }).find("scale (0.9, 0.1) (expected 0 < scale[0] <= scale[1] <= 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              RandomResizedCrop(8, {.scale = {0.0, 1.0}});
            }).find("scale (0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              RandomResizedCrop(8, {.ratio = {2.0, 1.0}});
            }).find("ratio (2, 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              RandomHorizontalFlip(1.5);
            }).find("RandomHorizontalFlip: p 1.5 (expected 0 <= p <= 1)"),
            std::string::npos);
  EXPECT_NE(error_of([] { RandomHorizontalFlip(-0.1); }).find("p -0.1"), std::string::npos);
  EXPECT_NE(error_of([] { Normalize({0.5}, {0.0}); }).find("Normalize: std[0] is 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Normalize({0.5, 0.5}, {1.0});
            }).find("2 means and 1 standard deviations"),
            std::string::npos);
  const Tensor img = image_u8();
  EXPECT_NE(error_of([&] {
              Normalize({0.5}, {1.0})(img);
            }).find("Normalize: image [23, 29, 3] u8 (expected f32 [C, H, W]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              Normalize({0.5}, {1.0})(image_f32());
            }).find("Normalize: 1 means for an image of 3 channels"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ToTensor()(image_f32());
            }).find("ToTensor: image [3, 23, 29] f32 (expected u8 [H, W, C]"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              Resize(4)(zeros({5, 5}));
            }).find("Resize: image [5, 5] f32 on cpu (expected a CPU u8 [H, W, C] image"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              resized_crop(img, {0, 0, 0, 4}, 4, 4);
            }).find("resized_crop: crop of 0x4 (expected positive sizes)"),
            std::string::npos);
}

}  // namespace
