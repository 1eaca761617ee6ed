// tools/train_images.hpp — `ember train --model resnet18 --images DIR -o model.safetensors`:
// an image classifier from the vision zoo (models::resnet*, models::mobilenet_v2) trained on a
// folder of JPEG/PNG images laid out as torchvision's ImageFolder (DIR/<class>/<file>), saved with
// ember's checkpoints (docs/vision.md, "Training from the command line").
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "cli_common.hpp"

namespace ember_cli {

/// The flags only image training has (the rest are TrainArgs).
struct ImageArgs {
  std::string images;        // the ImageFolder to train on
  std::string val_images;    // an ImageFolder with the same classes to validate on
  int64_t image_size = 224;  // the side of the crops the model sees
  int64_t workers = 2;       // threads decoding and augmenting images
  std::string weights;       // a torchvision state_dict as safetensors to start from
};

/// Adds --images, --val-images, --image-size, --workers and --weights to `train`, with the
/// rules between them and the other flags (--images excludes the data flags and --text; the
/// others need --images).
void add_image_options(CLI::App* train, ImageArgs& x);

/// Whether `model` names one of the zoo's image models (models::resnet_names(), mobilenet_v2).
bool is_image_model(const std::string& model);

/// Trains the image model; `batch_size` is --batch-size when given (default: 32).
int cmd_train_images(const TrainArgs& t, const ImageArgs& x, std::optional<int64_t> batch_size);

}  // namespace ember_cli
