// ember/data/image_folder.hpp — torchvision's ImageFolder: one class per sub-folder (docs/data.md).
//
//   root/cat/001.jpg        classes() = {"cat", "dog"} (sorted), class_to_idx: cat 0, dog 1
//   root/cat/x/002.png      samples(): (path, class) sorted as torchvision (sub-folders too)
//   root/dog/003.jpeg
//
//   using namespace data::transforms;
//   auto train = std::make_shared<data::ImageFolder>("root", data::ImageFolderOptions{
//       .transform = Compose({RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(),
//                             Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})}),
//       .seed = 7});
//   data::DataLoader loader(train, {.batch_size = 64, .shuffle = true, .num_workers = 2});
//   for (data::Example& b : loader) ...   // b.input f32 [64, 3, 224, 224], b.target i64 [64]
//
// get(i) decodes sample i (read_image: JPEG or PNG to u8 [H, W, 3]), runs the transform with
// SampleRng(seed, epoch, i) and returns {image, i64 target}. The DataLoader tells the dataset
// its epoch (Dataset::begin_epoch) before each epoch's batches, so augmentations depend on
// (seed, epoch, index) only: the same with any number of workers and after a resume.
//
// A bad image (corrupt, truncated, not JPEG/PNG) throws ember::Error naming the file. With
// skip_bad, get(i) instead takes the next good sample (i + 1, i + 2, ... wrapping around;
// its image and target, augmented with sample i's generator) and the bad file is counted in
// skipped() once, however often it is met. A missing decoding library (ImageLibraryMissing)
// is never skipped: it is the machine's fault, not the file's.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ember/data/dataset.hpp"
#include "ember/data/transforms.hpp"

namespace ember::data {

struct ImageFolderOptions {
  /// Applied to each decoded u8 [H, W, 3] image. Batching needs every result to have one
  /// shape: put a Resize + CenterCrop or a RandomResizedCrop first for photos of mixed sizes.
  transforms::Transform transform = transforms::ToTensor();
  /// File name endings listed (case-insensitive), a subset of torchvision's IMG_EXTENSIONS.
  std::vector<std::string> extensions{".jpg", ".jpeg", ".png"};
  /// Replace a bad image by the next good sample and count it, instead of throwing.
  bool skip_bad = false;
  /// With the epoch and the index, fixes each sample's augmentation.
  uint64_t seed = 0;
};

/// A labelled image dataset laid out as root/<class>/<file> (torchvision's ImageFolder).
class ImageFolder : public Dataset {
 public:
  struct Sample {
    std::string path;
    int64_t target = 0;
  };

  /// Lists the classes and samples. Throws, naming the folder, when `root` is missing or not
  /// a folder, has no class folders, or a class folder holds no file with a listed extension.
  explicit ImageFolder(std::string root, ImageFolderOptions options = {});

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  /// Sample `index` augmented for the epoch begin_epoch() last set (0 at first).
  Example get(int64_t index) const override;
  /// Sample `index` augmented for `epoch`: input from the transform, target i64 [].
  Example get(int64_t index, int64_t epoch) const;
  /// Records the epoch whose augmentations get(index) makes (the DataLoader calls it).
  void begin_epoch(int64_t epoch) override { epoch_.store(epoch); }
  int64_t epoch() const { return epoch_.load(); }

  /// Sample `index`'s decoded image, u8 [H, W, 3], before any transform (throws if bad).
  Tensor load(int64_t index) const;

  const std::string& root() const { return root_; }
  /// Class names, sorted; class i is classes()[i].
  const std::vector<std::string>& classes() const { return classes_; }
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }
  /// Every (path, class), in torchvision's order.
  const std::vector<Sample>& samples() const { return samples_; }
  /// The class of every sample, in order.
  std::vector<int64_t> targets() const;
  const ImageFolderOptions& options() const { return options_; }

  /// Bad image files met so far (each counted once); always 0 without skip_bad.
  int64_t skipped() const;
  /// Their paths, sorted.
  std::vector<std::string> bad_files() const;

 private:
  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
  std::vector<Sample> samples_;
  std::atomic<int64_t> epoch_{0};
  mutable std::mutex bad_mutex_;
  mutable std::set<int64_t> bad_;  // indices of samples whose image failed to decode
};

}  // namespace ember::data
