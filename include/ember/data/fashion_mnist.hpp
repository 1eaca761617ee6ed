// ember/data/fashion_mnist.hpp — the Fashion-MNIST data set (Zalando, 28x28 grey images,
// 10 classes; 60000 training and 10000 test examples) read from its IDX files.
//
// The files are looked for in, first to last: the `directory` argument, the environment
// variable EMBER_FASHION_MNIST, /usr/share/datasets/fashion-mnist (the Debian package
// dataset-fashion-mnist). Gzip-compressed (.gz) and uncompressed names are both accepted.
//
//   data::FashionMnist train = data::load_fashion_mnist("train");
//   auto ds = std::make_shared<data::TensorDataset>(train.flat_images(), train.labels);
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "ember/tensor.hpp"

namespace ember::data {

inline constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int64_t kFashionMnistClasses = 10;

struct FashionMnist {
  Tensor images{};  // f32 [N, 1, 28, 28], pixel values scaled to [0, 1]
  Tensor labels{};  // i64 [N], class indices 0..9

  /// The images as f32 [N, 784] (a view, no copy).
  Tensor flat_images() const { return images.reshape({images.size(0), 28 * 28}); }
  int64_t size() const { return labels.numel(); }
};

/// Loads split "train" (60000 examples) or "test" (10000). An empty `directory` means
/// EMBER_FASHION_MNIST, then the default. Throws naming the directory checked and how to
/// install the data when a file is missing, and naming the file when it is malformed.
/// Example: FashionMnist test = load_fashion_mnist("test");
FashionMnist load_fashion_mnist(const std::string& split = "train",
                                const std::string& directory = "");

/// The directory load_fashion_mnist would read for `directory` (see the precedence above).
std::string fashion_mnist_directory(const std::string& directory = "");

/// Class names by label: "T-shirt/top", "Trouser", ..., "Ankle boot".
const std::array<std::string_view, 10>& fashion_mnist_class_names();

}  // namespace ember::data
