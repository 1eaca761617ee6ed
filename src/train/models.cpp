// src/train/models.cpp — the ready-made MLP and Fashion-MNIST CNN.
#include "ember/train/models.hpp"

#include "ember/nn/conv.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"

namespace ember::train {

nn::Module mlp(int64_t in_features, const std::vector<int64_t>& hidden, int64_t out_features) {
  nn::Sequential net;
  int64_t width = in_features;
  for (int64_t h : hidden) {
    net->push_back(nn::Linear(width, h));
    net->push_back(nn::ReLU());
    width = h;
  }
  net->push_back(nn::Linear(width, out_features));
  return net;
}

nn::Module fashion_cnn(int64_t classes) {
  return nn::Sequential({nn::Conv2d(1, 32, 3, 1, 1), nn::BatchNorm2d(32), nn::ReLU(),
                         nn::MaxPool2d(2), nn::Conv2d(32, 64, 3, 1, 1), nn::BatchNorm2d(64),
                         nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(64 * 7 * 7, 128),
                         nn::ReLU(), nn::Linear(128, classes)});
}

bool expects_images(const nn::Module& model) {
  for (auto& [name, m] : model->named_modules())
    if (m->named_children().empty()) return m->type_name() == "Conv2d";
  return false;
}

}  // namespace ember::train
