// tests/test_cli_train_images.cpp — `ember train --model resnet18 --images DIR` (and
// mobilenet_v2)
// (tools/train_images.cpp) run as a child process on tiny image folders written by the test
// (PNG, two classes: reddish and bluish squares): the model trains (its BatchNorms count every
// step, its weights move), validates, and saves a ResNet with the class names in its metadata;
// --weights starts from a torchvision-named state_dict, its 1000-class fc left fresh; bad input
// ends in one clear line before any work.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "ember/data/image_io.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/io/foreign.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/mobilenet.hpp"
#include "ember/models/resnet.hpp"
#include "fixtures.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::CliRun;
using ember_test::expect_cli_error;
using ember_test::run_cli;
using ember_test::ScratchDir;
using ember_test::write_text;
namespace fs = std::filesystem;

// root/<class>/<i>.png for each class: 40x40 squares, class "blue" bluish, "red" reddish,
// with noise.
void write_folder(const std::string& root, const std::vector<std::string>& classes, int per_class,
                  uint64_t seed) {
  manual_seed(seed);
  for (size_t c = 0; c < classes.size(); ++c) {
    fs::create_directories(root + "/" + classes[c]);
    for (int i = 0; i < per_class; ++i) {
      Tensor img = rand({40, 40, 3}) * 100.0;
      img.select(2, classes[c] == "red" ? 0 : 2).add_(ones({40, 40}) * 150.0);
      data::write_png(root + "/" + classes[c] + "/" + std::to_string(i) + ".png",
                      img.to(DType::u8));
    }
  }
}

// Every parameter of `tuned` but the classifier's (`head`) holds the value the --weights file
// `want` gave it (the runs train at lr 1e-12).
void expect_weights_kept(const nn::Module& tuned, const nn::StateDict& want,
                         const std::string& head) {
  for (const auto& [name, p] : tuned->named_parameters()) {
    if (name.starts_with(head)) continue;
    const auto it =
        std::find_if(want.begin(), want.end(), [&](auto& e) { return e.first == name; });
    ASSERT_NE(it, want.end()) << name;
    ember_test::expect_close(p, it->second, 1e-6, 1e-8, "--weights " + name);
  }
}

std::string quiet(const std::string& args) {
  return args + " --image-size 32 --batch-size 4 --workers 2 --progress none";
}

TEST(CliTrainImages, TrainsValidatesAndSavesAResNet) {
  SKIP_WITHOUT_CLI();
  ScratchDir dir;
  write_folder(dir.file("train"), {"blue", "red"}, 6, 1);
  write_folder(dir.file("val"), {"blue", "red"}, 2, 2);
  const std::string out = dir.file("resnet.safetensors");
  const CliRun r =
      run_cli(quiet("train --model resnet18 --images " + dir.file("train") + " --val-images " +
                    dir.file("val") + " --epochs 2 --optimizer sgd --lr 0.05 --seed 3 -o " + out));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("resnet18: 11177538 parameters, 2 classes (blue, red), on cpu"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("images: " + dir.file("train") + ", 12 at 32x32"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("validation: loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("saved " + out), std::string::npos) << r.output;

  nn::Module model = io::load_model(out);
  ASSERT_EQ(model->type_name(), "ResNet");
  EXPECT_EQ(model->config()["options"]["num_classes"], 2);
  // 12 images in batches of 4 for 2 epochs: every BatchNorm counted 6 training steps.
  for (const auto& [name, t] : model->named_buffers())
    if (name.ends_with("num_batches_tracked")) ASSERT_EQ(t.item<int64_t>(), 6) << name;
  // The weights moved away from the start the same seed draws.
  manual_seed(3);
  nn::ResNet start = models::resnet18({.num_classes = 2});
  EXPECT_GT(max(abs(model->state_dict()[0].second - start->state_dict()[0].second)).item<float>(),
            1e-4f);
  const io::SafetensorsFile file(out);
  EXPECT_EQ(file.metadata().at("train.label_classes"), R"(["blue","red"])");
  EXPECT_EQ(file.metadata().at("train.image_size"), "32");
  NoGradGuard no_grad;
  EXPECT_EQ(model(randn({1, 3, 32, 32})).shape(), Shape({1, 2}));
}

TEST(CliTrainImages, WeightsLoadAllButAClassifierOfAnotherSize) {
  SKIP_WITHOUT_CLI();
  ScratchDir dir;
  write_folder(dir.file("train"), {"blue", "red"}, 2, 4);
  manual_seed(5);
  nn::ResNet imagenet = models::resnet18();  // 1000 classes, torchvision's names
  io::save_state(imagenet, dir.file("resnet18.safetensors"));
  const std::string out = dir.file("tuned.safetensors");
  const CliRun r = run_cli(quiet("train --model resnet18 --images " + dir.file("train") +
                                 " --weights " + dir.file("resnet18.safetensors") +
                                 " --epochs 1 --optimizer sgd --lr 1e-12 -o " + out));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("(all but fc: the file's classifier has 1000 classes; fc starts fresh)"),
            std::string::npos)
      << r.output;
  nn::Module tuned = io::load_model(out);
  expect_weights_kept(tuned, imagenet->state_dict(), "fc.");
  EXPECT_EQ(tuned->named_parameters().back().second.shape(), Shape({2}));  // fc.bias
}

// MobileNetV2 from the zoo, and torchvision-named weights whose classifier.1 has 1000 classes.
TEST(CliTrainImages, TrainsAMobileNetV2FromWeights) {
  SKIP_WITHOUT_CLI();
  ScratchDir dir;
  write_folder(dir.file("train"), {"blue", "red"}, 2, 9);
  manual_seed(10);
  nn::MobileNetV2 imagenet = models::mobilenet_v2();
  io::save_state(imagenet, dir.file("mobilenet_v2.safetensors"));
  const std::string out = dir.file("mobile.safetensors");
  const CliRun r = run_cli(quiet("train --model mobilenet_v2 --images " + dir.file("train") +
                                 " --weights " + dir.file("mobilenet_v2.safetensors") +
                                 " --epochs 1 --optimizer sgd --lr 1e-12 -o " + out));
  ASSERT_EQ(r.status, 0) << r.output;
  // torchvision's mobilenet_v2(num_classes=2).parameters(): 2,236,682 at 10 classes less 8·1281.
  EXPECT_NE(r.output.find("mobilenet_v2: 2226434 parameters, 2 classes (blue, red)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(all but classifier.1: the file's classifier has 1000 classes; "
                          "classifier.1 starts fresh)"),
            std::string::npos)
      << r.output;
  nn::Module tuned = io::load_model(out);
  ASSERT_EQ(tuned->type_name(), "MobileNetV2");
  expect_weights_kept(tuned, imagenet->state_dict(), "classifier.");
}

TEST(CliTrainImages, BadInputEndsInOneClearLine) {
  SKIP_WITHOUT_CLI();
  ScratchDir dir;
  write_folder(dir.file("train"), {"blue", "red"}, 2, 6);
  write_folder(dir.file("other"), {"blue", "green"}, 1, 7);
  write_folder(dir.file("one"), {"red"}, 2, 8);
  const std::string images = " --images " + dir.file("train");
  expect_cli_error("train --model resnet18",
                   "ember: --model resnet18 is an image model (expected --images FOLDER with it)");
  expect_cli_error("train --model mlp" + images,
                   "ember train: --model mlp with --images (expected an image model: resnet18, "
                   "resnet34, resnet50, resnet101, resnet152, resnext50_32x4d, wide_resnet50_2, "
                   "mobilenet_v2)");
  expect_cli_error("train --model resnet18 --images " + dir.file("missing"),
                   "ember train: --images " + dir.file("missing") + ": no such folder");
  expect_cli_error("train --model resnet18" + images + " --val-images " + dir.file("other"),
                   "has the classes blue, green (expected those of --images " + dir.file("train") +
                       ": blue, red)");
  expect_cli_error("train --model resnet18 --images " + dir.file("one"),
                   "has one class (red; expected two or more class folders)");
  expect_cli_error("train --model resnet18" + images + " --dataset x.csv",
                   "--dataset excludes --images");
  expect_cli_error("train --model resnet18 --val-images " + dir.file("train"),
                   "--val-images requires --images");
  expect_cli_error("train --model resnet18" + images + " --image-size 4",
                   "'4' is not a whole number >= 8");
  expect_cli_error("train --model resnet18" + images + " --weights " + dir.file("none"),
                   dir.file("none"));
  manual_seed(9);
  io::save_state(models::resnet34({.num_classes = 2}), dir.file("r34.safetensors"));
  expect_cli_error(
      quiet("train --model resnet18" + images + " --weights " + dir.file("r34.safetensors")),
      "unexpected");
  // A corrupt image is named when the loader meets it.
  write_text(dir.file("train") + "/red/9.png", "not a png");
  expect_cli_error(
      quiet("train --model resnet18 --epochs 1" + images + " -o " + dir.file("m.safetensors")),
      "9.png");
}

}  // namespace
