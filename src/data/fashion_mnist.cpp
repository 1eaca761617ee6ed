// src/data/fashion_mnist.cpp — loads Fashion-MNIST from its four IDX files.
#include "ember/data/fashion_mnist.hpp"

#include <cstdlib>
#include <filesystem>

#include "ember/data/readers.hpp"

namespace ember::data {
namespace {

constexpr int64_t kSide = 28;

// Where the directory came from, for error messages.
std::string directory_source(const std::string& directory) {
  if (!directory.empty()) return "the directory argument";
  const char* env = std::getenv("EMBER_FASHION_MNIST");
  if (env && *env) return "EMBER_FASHION_MNIST";
  return "the default location";
}

// The file for `stem` (e.g. "train-images-idx3-ubyte") in `dir`: gzip first, then plain.
std::string find_file(const std::string& dir, const std::string& stem, const std::string& source) {
  namespace fs = std::filesystem;
  const std::string candidates[] = {stem + ".gz", stem};
  for (const std::string& name : candidates) {
    std::error_code ec;
    const fs::path p = fs::path(dir) / name;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  detail::throw_error(detail::concat(
      "load_fashion_mnist: ", stem, "(.gz) not found in '", dir, "' (the directory from ", source,
      "); install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist) "
      "or set EMBER_FASHION_MNIST to the directory holding the four Fashion-MNIST files"));
}

}  // namespace

std::string fashion_mnist_directory(const std::string& directory) {
  if (!directory.empty()) return directory;
  const char* env = std::getenv("EMBER_FASHION_MNIST");
  if (env && *env) return env;
  return kFashionMnistDefaultDir;
}

FashionMnist load_fashion_mnist(const std::string& split, const std::string& directory) {
  EMBER_CHECK(split == "train" || split == "test", "load_fashion_mnist: split '", split,
              "' (expected \"train\" or \"test\")");
  const std::string dir = fashion_mnist_directory(directory);
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string source = directory_source(directory);
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte", source);
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte", source);

  const Tensor images = read_idx(images_path);
  const Tensor labels = read_idx(labels_path);
  EMBER_CHECK(images.dtype() == DType::u8 && images.dim() == 3 && images.size(1) == kSide &&
                  images.size(2) == kSide,
              "load_fashion_mnist: ", images_path, ": images are ", dtype_name(images.dtype()), " ",
              images.shape().to_string(), " (expected u8 [N, 28, 28])");
  EMBER_CHECK(labels.dtype() == DType::u8 && labels.dim() == 1, "load_fashion_mnist: ", labels_path,
              ": labels are ", dtype_name(labels.dtype()), " ", labels.shape().to_string(),
              " (expected u8 [N])");
  EMBER_CHECK(images.size(0) == labels.size(0), "load_fashion_mnist: ", images.size(0),
              " images in ", images_path, " but ", labels.size(0), " labels in ", labels_path,
              " (expected equal counts)");
  const uint8_t* y = labels.data<uint8_t>();
  for (int64_t i = 0; i < labels.numel(); ++i)
    EMBER_CHECK(y[i] < kFashionMnistClasses, "load_fashion_mnist: ", labels_path, ": label ",
                int{y[i]}, " at index ", i, " (expected 0 to ", kFashionMnistClasses - 1, ")");

  // One host pass each. Pixels are divided by 255 in f32 (not multiplied by 1/255), which
  // matches torchvision's ToTensor bit for bit.
  const int64_t n = images.size(0);
  float scaled[256];
  for (int v = 0; v < 256; ++v) scaled[v] = static_cast<float>(v) / 255.0f;
  FashionMnist out;
  out.images = empty({n, 1, kSide, kSide}, {.dtype = DType::f32, .device = Device::cpu()});
  const uint8_t* px = images.data<uint8_t>();
  float* dst = out.images.data<float>();
  for (int64_t i = 0; i < images.numel(); ++i) dst[i] = scaled[px[i]];
  out.labels = empty({n}, {.dtype = DType::i64, .device = Device::cpu()});
  int64_t* cls = out.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) cls[i] = y[i];
  return out;
}

const std::array<std::string_view, 10>& fashion_mnist_class_names() {
  static constexpr std::array<std::string_view, 10> kNames = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return kNames;
}

}  // namespace ember::data
