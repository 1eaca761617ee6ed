// tools/train_images.cpp — `ember train --model resnet18 --images DIR` (tools/train_images.hpp;
// docs/vision.md).
//
// torchvision's ImageNet recipe at any size S (--image-size): training images through
// RandomResizedCrop(S) and RandomHorizontalFlip, validation images through Resize(S·256/224) and
// CenterCrop(S), both then ToTensor and Normalize with ImageNet's mean and std, decoded on
// --workers threads and augmented per (seed, epoch, index) so a resumed run sees the same crops.
// The run itself is `ember train`'s (run_training: optimizer, scheduler, clipping, checkpoints
// and --resume, progress, --capture, --bf16); the model is saved with io::save_model, its class
// names and input preparation in the metadata.
#include "train_images.hpp"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "ember/data/image_folder.hpp"
#include "ember/distributed.hpp"
#include "ember/error.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/io/foreign.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/models/mobilenet.hpp"
#include "ember/models/resnet.hpp"
#include "ember/random.hpp"

namespace ember_cli {

using namespace ember;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kDefaultImageBatch = 32;  // --batch-size with --images
// torchvision's ImageNet normalisation (its pretrained weights expect it).
const std::vector<double> kMean = {0.485, 0.456, 0.406};
const std::vector<double> kStd = {0.229, 0.224, 0.225};

std::string names_list(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

void check_folder(const char* flag, const std::string& path) {
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(path, ec), "ember train: ", flag, " ", path,
              ": no such folder (expected a folder of class folders of images, "
              "FOLDER/<class>/<image>)");
}

// The zoo's image models: the ResNets and MobileNetV2, each with the prefix of its classifier
// (the layer --weights may leave fresh).
std::vector<std::string> image_model_names() {
  std::vector<std::string> names = models::resnet_names();
  names.push_back("mobilenet_v2");
  return names;
}

struct ImageModel {
  nn::Module module;
  std::string head;  // "fc" (ResNet), "classifier.1" (MobileNetV2)
};

ImageModel make_image_model(const std::string& name, int64_t classes) {
  if (name == "mobilenet_v2")
    return {models::mobilenet_v2({.num_classes = classes}), "classifier.1"};
  return {models::resnet(name, {.num_classes = classes}), "fc"};
}

// --weights: a torchvision state_dict (safetensors). Every tensor must fit, except the
// classifier when the file has another number of classes: it then keeps its fresh values.
void load_weights(const ImageModel& model, const std::string& path, bool lead) {
  const std::string weight = model.head + ".weight", bias = model.head + ".bias";
  const io::SafetensorsFile file(path);
  const io::TensorEntry* fc = file.find(weight);
  Shape fc_shape;
  for (const auto& [name, p] : model.module->named_parameters())
    if (name == weight) fc_shape = p.shape();
  const bool fresh_fc = fc != nullptr && fc->shape != fc_shape;
  io::LoadStateOptions o;
  if (fresh_fc)
    o.rename = [weight, bias](const std::string& name) {
      return name == weight || name == bias ? std::string() : name;
    };
  o.strict = !fresh_fc;
  const nn::LoadReport r = io::load_state(model.module, path, o);
  if (fresh_fc) {
    std::vector<std::string> missing = r.missing;
    std::erase_if(missing, [&](const std::string& n) { return n == weight || n == bias; });
    EMBER_CHECK(missing.empty() && r.unexpected.empty() && r.mismatched.empty(),
                "ember train: --weights ", path,
                " does not fit --model (missing: ", names_list(missing),
                "; unexpected: ", names_list(r.unexpected),
                "; mismatched: ", names_list(r.mismatched), ")");
  }
  if (lead) {
    std::cout << "weights: " << path;
    if (fresh_fc)
      std::cout << " (all but " << model.head << ": the file's classifier has " << fc->shape[0]
                << " classes; " << model.head << " starts fresh)";
    std::cout << "\n";
  }
}

data::transforms::Transform train_transform(int64_t size) {
  using namespace data::transforms;
  return Compose(
      {RandomResizedCrop(size), RandomHorizontalFlip(), ToTensor(), Normalize(kMean, kStd)});
}

data::transforms::Transform eval_transform(int64_t size) {
  using namespace data::transforms;
  return Compose({Resize(size * 256 / 224), CenterCrop(size), ToTensor(), Normalize(kMean, kStd)});
}

std::string accuracy_line(const train::Metrics& m) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(4) << "loss " << m.loss;
  if (m.accuracy) o << ", accuracy " << std::setprecision(2) << 100.0 * *m.accuracy << "%";
  return o.str();
}

}  // namespace

bool is_image_model(const std::string& model) {
  const std::vector<std::string> names = image_model_names();
  return std::find(names.begin(), names.end(), model) != names.end();
}

void add_image_options(CLI::App* train, ImageArgs& x) {
  CLI::Option* images = train->add_option(
      "--images", x.images,
      "train an image model (--model resnet18, resnet50, ..., mobilenet_v2) on this folder of "
      "class folders");
  for (const char* other : {"--dataset", "--label", "--data-dir", "--test-csv", "--standardize",
                            "--header", "--no-header", "--text"})
    images->excludes(train->get_option(other));
  const std::vector<CLI::Option*> with_images = {
      train->add_option("--val-images", x.val_images,
                        "a folder with the same class folders to validate on (with --images)"),
      train->add_option("--image-size", x.image_size, "the side of the crops the model sees")
          ->capture_default_str()
          ->check(whole_number<int64_t>(8)),
      train->add_option("--workers", x.workers, "threads decoding and augmenting images")
          ->capture_default_str()
          ->check(whole_number<int64_t>(0)),
      train->add_option("--weights", x.weights,
                        "start from these torchvision weights (a state_dict as safetensors)")};
  for (CLI::Option* o : with_images) o->needs(images);
}

int cmd_train_images(const TrainArgs& given, const ImageArgs& x,
                     std::optional<int64_t> batch_size) {
  TrainArgs t = given;
  if (t.output.empty()) t.output = "model.safetensors";
  // ---- every check before any work (Note [Argument checks] in tools/ember.cpp) ----
  EMBER_CHECK(is_image_model(t.model), "ember train: --model ", t.model,
              " with --images (expected an image model: ", names_list(image_model_names()), ")");
  check_folder("--images", x.images);
  if (!x.val_images.empty()) check_folder("--val-images", x.val_images);
  if (!x.weights.empty()) check_input_file("--weights", x.weights);
  check_train_args(t);
  check_output_path("--output", t.output);

  // ---- the data: listed now, decoded by the loader's workers ----
  auto train_set = std::make_shared<data::ImageFolder>(
      x.images,
      data::ImageFolderOptions{.transform = train_transform(x.image_size), .seed = t.seed});
  const std::vector<std::string>& classes = train_set->classes();
  std::shared_ptr<data::ImageFolder> val_set;
  if (!x.val_images.empty()) {
    val_set = std::make_shared<data::ImageFolder>(
        x.val_images, data::ImageFolderOptions{.transform = eval_transform(x.image_size)});
    EMBER_CHECK(val_set->classes() == classes, "ember train: --val-images ", x.val_images,
                " has the classes ", names_list(val_set->classes()),
                " (expected those of --images ", x.images, ": ", names_list(classes), ")");
  }
  EMBER_CHECK(classes.size() >= 2, "ember train: --images ", x.images, " has one class (",
              classes.front(), "; expected two or more class folders)");
  const int64_t B = batch_size.value_or(kDefaultImageBatch);

  // ---- the model ----
  if (t.distributed) join_job();
  const bool lead = !t.distributed || distributed::rank() == 0;  // prints and writes files
  manual_seed(t.seed);
  const ImageModel image_model = make_image_model(t.model, static_cast<int64_t>(classes.size()));
  const nn::Module model = image_model.module;
  if (!x.weights.empty()) load_weights(image_model, x.weights, lead);
  model->to(Device::parse(t.device));
  const int workers = static_cast<int>(x.workers);
  std::optional<data::DataLoader> val_loader;
  if (val_set)
    val_loader.emplace(val_set, data::DataLoaderOptions{.batch_size = B, .num_workers = workers});
  if (lead)
    std::cout << t.model << ": " << model->parameter_count() << " parameters, " << classes.size()
              << " classes (" << names_list(classes) << "), on " << t.device << "\n"
              << "images: " << x.images << ", " << train_set->size() << " at " << x.image_size
              << "x" << x.image_size << " (random resized crops, flips), " << B
              << " a step, decoded on " << workers << " worker(s)"
              << (val_set ? "; validation: " + x.val_images + ", " +
                                std::to_string(val_set->size()) + " images"
                          : std::string("; no validation (--val-images)"))
              << "\n";

  // ---- the run: ember train's ----
  TrainJob job{.model = model,
               .train = train_set,
               .batch_size = B,
               .epochs = t.epochs,
               .val_loader = val_loader ? &*val_loader : nullptr,
               .loss = train::cross_entropy_loss(),
               .lead = lead,
               .num_workers = workers};
  run_training(t, std::move(job));

  if (lead) {
    if (val_loader)
      std::cout << "validation: "
                << accuracy_line(train::evaluate(model, *val_loader, train::cross_entropy_loss()))
                << " (" << val_set->size() << " images)\n";
    nn::json names = classes;
    io::save_model(model, t.output,
                   {.metadata = {{"train.label_classes", names.dump()},
                                 {"train.image_size", std::to_string(x.image_size)},
                                 {"train.image_mean", nn::json(kMean).dump()},
                                 {"train.image_std", nn::json(kStd).dump()}}});
    std::cout << "saved " << t.output << " (" << fs::file_size(t.output) << " bytes)\n";
  }
  if (t.distributed) {
    distributed::barrier();  // the file is complete before any rank leaves
    distributed::finalize();
  }
  return 0;
}

}  // namespace ember_cli
