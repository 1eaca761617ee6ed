// ember/train/models.hpp — ready-made models used by the `ember` command and the examples.
#pragma once

#include <vector>

#include "ember/nn/module.hpp"

namespace ember::train {

/// Linear/ReLU stack: in → hidden... → out. Example: mlp(784, {256, 256}, 10).
nn::Module mlp(int64_t in_features, const std::vector<int64_t>& hidden, int64_t out_features);
/// The Fashion-MNIST CNN: two Conv2d(3×3, padding 1) + BatchNorm2d + ReLU + MaxPool2d(2)
/// blocks (32 and 64 channels), then Flatten, Linear(64·7·7, 128), ReLU, Linear(128, 10).
/// Input [N, 1, 28, 28].
nn::Module fashion_cnn(int64_t classes = 10);
/// True when the model's first layer expects images [N, C, H, W] (its first leaf is a Conv2d).
bool expects_images(const nn::Module& model);

}  // namespace ember::train
