// src/data/image_folder.cpp — ImageFolder: listing root/<class>/<file> as torchvision does,
// decoding, augmenting with the per-sample generator, and skipping bad images.
//
// Note [ImageFolder's order]
// torchvision's find_classes takes the sorted names of root's sub-folders; make_dataset walks
// each class folder with os.walk(followlinks=True), sorts the (folder, files) tuples by folder
// path and each folder's file names, and keeps files whose lower-cased name ends with an
// extension. Python sorts str by code point, which for UTF-8 names is byte order, so sorting
// std::string paths gives the same order: class indices and sample order equal torchvision's
// for the same folder (files with extensions torchvision reads and we do not, .bmp or .webp,
// are left out here and listed there).
#include "ember/data/image_folder.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "ember/data/image_io.hpp"
#include "ember/error.hpp"

namespace ember::data {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& ch : s)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  return s;
}

bool has_extension(const std::string& name, const std::vector<std::string>& extensions) {
  const std::string l = lower(name);
  for (const std::string& e : extensions)
    if (l.size() >= e.size() && l.compare(l.size() - e.size(), e.size(), lower(e)) == 0)
      return true;
  return false;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& item : items) s += (s.empty() ? "" : ", ") + item;
  return s;
}

// Every folder under `dir` (itself included), following links, as os.walk(followlinks=True).
void walk(const fs::path& dir, std::vector<fs::path>& folders) {
  folders.push_back(dir);
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) walk(it->path(), folders);
}

}  // namespace

ImageFolder::ImageFolder(std::string root, ImageFolderOptions options)
    : root_(std::move(root)), options_(std::move(options)) {
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(root_, ec), "ImageFolder: ", root_,
              fs::exists(root_, ec) ? " is not a folder" : " does not exist",
              " (expected a folder with one sub-folder of images per class)");
  EMBER_CHECK(!options_.extensions.empty(),
              "ImageFolder: no extensions (expected some, e.g. .jpg, .jpeg, .png)");
  // Classes: the sorted sub-folder names (Note [ImageFolder's order]).
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) classes_.push_back(it->path().filename().string());
  EMBER_CHECK(!ec, "ImageFolder: ", root_, ": cannot list the folder (", ec.message(), ")");
  std::sort(classes_.begin(), classes_.end());
  EMBER_CHECK(!classes_.empty(), "ImageFolder: ", root_,
              " has no class folder (expected root/<class>/<image>, as torchvision's ImageFolder)");
  std::vector<std::string> empty_classes;
  for (size_t k = 0; k < classes_.size(); ++k) {
    class_to_idx_[classes_[k]] = static_cast<int64_t>(k);
    std::vector<fs::path> folders;
    walk(fs::path(root_) / classes_[k], folders);
    std::vector<std::string> folder_names;
    for (const fs::path& f : folders) folder_names.push_back(f.string());
    std::sort(folder_names.begin(), folder_names.end());
    const size_t before = samples_.size();
    for (const std::string& folder : folder_names) {
      std::vector<std::string> files;
      for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        if (!it->is_directory(ec) &&
            has_extension(it->path().filename().string(), options_.extensions))
          files.push_back(it->path().filename().string());
      std::sort(files.begin(), files.end());
      for (const std::string& f : files)
        samples_.push_back({(fs::path(folder) / f).string(), static_cast<int64_t>(k)});
    }
    if (samples_.size() == before) empty_classes.push_back(classes_[k]);
  }
  EMBER_CHECK(empty_classes.empty(), "ImageFolder: ", root_, ": no image in the class folder",
              empty_classes.size() > 1 ? "s " : " ", joined(empty_classes),
              " (expected files ending with ", joined(options_.extensions), ", any case)");
}

std::vector<int64_t> ImageFolder::targets() const {
  std::vector<int64_t> t;
  t.reserve(samples_.size());
  for (const Sample& s : samples_) t.push_back(s.target);
  return t;
}

Tensor ImageFolder::load(int64_t index) const {
  EMBER_CHECK(index >= 0 && index < size(), "ImageFolder: index ", index,
              " is out of range (expected 0 to ", size() - 1, ")");
  return read_image(samples_[static_cast<size_t>(index)].path);
}

Example ImageFolder::get(int64_t index) const { return get(index, epoch_.load()); }

Example ImageFolder::get(int64_t index, int64_t epoch) const {
  EMBER_CHECK(index >= 0 && index < size(), "ImageFolder: index ", index,
              " is out of range (expected 0 to ", size() - 1, ")");
  const int64_t n = size();
  Tensor image;
  int64_t used = index;
  for (int64_t step = 0; step < n && !image.defined(); ++step) {
    used = (index + step) % n;
    if (options_.skip_bad) {
      std::lock_guard<std::mutex> lock(bad_mutex_);
      if (bad_.count(used)) continue;
    }
    try {
      image = read_image(samples_[static_cast<size_t>(used)].path);
    } catch (const ImageLibraryMissing&) {
      throw;  // the machine lacks a library: no file is bad, none is skipped
    } catch (const Error& e) {
      if (!options_.skip_bad)
        detail::throw_error(detail::concat(
            "ImageFolder: sample ", used, ": ", e.what(),
            " (set ImageFolderOptions::skip_bad to skip bad images and count them)"));
      std::lock_guard<std::mutex> lock(bad_mutex_);
      bad_.insert(used);
    }
  }
  EMBER_CHECK(image.defined(), "ImageFolder: ", root_, ": none of the ", n,
              " images could be decoded (", skipped(), " bad files; bad_files() lists them)");
  transforms::SampleRng rng(options_.seed, epoch, index);
  Example e;
  e.input = options_.transform(image, rng);
  e.target = scalar_tensor(static_cast<double>(samples_[static_cast<size_t>(used)].target),
                           {.dtype = DType::i64, .device = Device::cpu()});
  return e;
}

int64_t ImageFolder::skipped() const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  return static_cast<int64_t>(bad_.size());
}

std::vector<std::string> ImageFolder::bad_files() const {
  std::vector<std::string> paths;
  {
    std::lock_guard<std::mutex> lock(bad_mutex_);
    for (const int64_t i : bad_) paths.push_back(samples_[static_cast<size_t>(i)].path);
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace ember::data
