// bench/bench_image_folder.cpp — decoded + augmented images per second: ember's ImageFolder +
// DataLoader against torchvision's ImageFolder + DataLoader (bench/torch/image_folder_bench.py)
// with the same transforms (RandomResizedCrop 224, RandomHorizontalFlip, ToTensor, Normalize),
// batch size and worker count, over whole epochs of a generated folder of JPEGs.
//
//   build/bench/bench_image_folder [--images 2000] [--side 256] [--workers 2] [--epochs 3]
//
// The folder ($TMPDIR/ember_bench_images_<images>_<side>: 10 classes of side x side JPEGs at
// quality 90, textured so they compress as photos do, ~25 KB each) is made once and reused.
// Validation first: both sides list the same number of images and classes, and decode sample 0
// to the same pixels (the sum of its bytes); then each side times its epochs after one warm-up
// epoch and reports the median, torchvision once before ember and once after (the median of
// both runs' epochs), so that on a shared machine both sides meet the same load. Napkin math: a 256
// x 256 JPEG decode is ~0.4 ms of one core, the antialiased resize of the crop ~0.3 ms, so 2 cores
// top out near 2 / 0.8 ms = 2500 /s.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/data/image_folder.hpp"
#include "ember/data/image_io.hpp"
#include "ember/runtime.hpp"
#include "torch_reference.hpp"

namespace fs = std::filesystem;
using namespace ember;
namespace tf = ember::data::transforms;

namespace {

// A textured side x side RGB image: gradients, blobs and noise, different per image.
Tensor texture(int64_t side, uint64_t salt) {
  std::vector<uint8_t> px(static_cast<size_t>(side * side * 3));
  uint64_t s = salt * 0x9E3779B97F4A7C15ull + 1;
  auto noise = [&] {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<int>(s % 41) - 20;
  };
  const double fx = 0.02 + (salt % 7) * 0.01, fy = 0.03 + (salt % 5) * 0.01;
  for (int64_t y = 0; y < side; ++y)
    for (int64_t x = 0; x < side; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = 128 + 60 * std::sin(fx * x * (c + 1) + salt) * std::cos(fy * y) +
                         40 * std::sin(0.2 * (x + y) / (c + 1)) + noise();
        px[static_cast<size_t>((y * side + x) * 3 + c)] =
            static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  return from_vector(px, {side, side, 3}, {.device = Device::cpu()});
}

std::string make_folder(int64_t images, int64_t side) {
  const char* tmp = std::getenv("TMPDIR");
  const fs::path root =
      fs::path(tmp ? tmp : "/tmp") /
      ("ember_bench_images_" + std::to_string(images) + "_" + std::to_string(side));
  if (fs::exists(root / "complete")) return root.string();
  fs::remove_all(root);
  std::fprintf(stderr, "bench_image_folder: writing %lld JPEGs of %lldx%lld into %s\n",
               static_cast<long long>(images), static_cast<long long>(side),
               static_cast<long long>(side), root.c_str());
  for (int64_t i = 0; i < images; ++i) {
    const fs::path dir = root / ("class_" + std::to_string(i % 10));
    fs::create_directories(dir);
    data::write_jpeg((dir / ("img_" + std::to_string(i) + ".jpg")).string(),
                     texture(side, static_cast<uint64_t>(i)), 90);
  }
  std::ofstream(root / "complete") << "ok\n";
  return root.string();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t images = 2000, side = 256, batch = 64;
  int workers = 2, epochs = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long long v = std::atoll(argv[i + 1]);
    if (a == "--images")
      images = v;
    else if (a == "--side")
      side = v;
    else if (a == "--workers")
      workers = static_cast<int>(v);
    else if (a == "--epochs")
      epochs = static_cast<int>(v);
    else if (a == "--batch")
      batch = v;
  }
  try {
    const std::string root = make_folder(images, side);
    auto ds = std::make_shared<data::ImageFolder>(
        root, data::ImageFolderOptions{
                  .transform = tf::Compose(
                      {tf::RandomResizedCrop(224), tf::RandomHorizontalFlip(), tf::ToTensor(),
                       tf::Normalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225})}),
                  .seed = 1});
    // Validate: the same listing and the same decoded pixels as torchvision + PIL.
    const std::string torch_args = "image_folder_bench.py " + root + " --workers " +
                                   std::to_string(workers) + " --batch " + std::to_string(batch) +
                                   " --epochs " + std::to_string(epochs);
    const nlohmann::json py = bench::run_torch_script("bench_image_folder", torch_args);
    int64_t first_sum = 0;
    for (const uint8_t v : ds->load(0).to_vector<uint8_t>()) first_sum += v;
    if (!py.is_null()) {
      const bool same =
          py["images"].get<int64_t>() == ds->size() &&
          py["classes"].get<int64_t>() == static_cast<int64_t>(ds->classes().size()) &&
          py["first_sum"].get<int64_t>() == first_sum;
      std::fprintf(stderr,
                   "bench_image_folder: %s: %lld images, %zu classes, sample 0 byte sum %lld "
                   "(torchvision: %lld images, %lld classes, sum %lld)\n",
                   same ? "validated" : "VALIDATION FAILED", static_cast<long long>(ds->size()),
                   ds->classes().size(), static_cast<long long>(first_sum),
                   static_cast<long long>(py["images"].get<int64_t>()),
                   static_cast<long long>(py["classes"].get<int64_t>()),
                   static_cast<long long>(py["first_sum"].get<int64_t>()));
      if (!same) return 1;
    }
    data::DataLoader loader(
        ds, {.batch_size = batch, .shuffle = true, .seed = 1, .num_workers = workers});
    std::vector<double> rates;
    for (int e = 0; e <= epochs; ++e) {  // epoch 0 warms up
      const auto start = bench::Clock::now();
      int64_t n = 0;
      for (data::Example& b : loader) n += b.input.size(0);
      const double s = std::chrono::duration<double>(bench::Clock::now() - start).count();
      if (n != ds->size()) {
        std::fprintf(stderr, "bench_image_folder: VALIDATION FAILED: an epoch gave %lld images\n",
                     static_cast<long long>(n));
        return 1;
      }
      if (e > 0) rates.push_back(static_cast<double>(n) / s);
      std::fprintf(stderr, "ember epoch %d: %lld images in %.2f s (%.0f images/s)\n", e,
                   static_cast<long long>(n), s, static_cast<double>(n) / s);
    }
    std::sort(rates.begin(), rates.end());
    const double ember_rate = rates[rates.size() / 2];
    // torchvision again after ember, so the two sides' epochs bracket the same stretch of a
    // shared machine's load: its figure is the median of both runs' epochs.
    std::optional<double> torch_rate;
    if (!py.is_null()) {
      const nlohmann::json again = bench::run_torch_script("bench_image_folder", torch_args);
      std::vector<double> epochs = py["epochs"].get<std::vector<double>>();
      if (!again.is_null())
        for (double r : again["epochs"].get<std::vector<double>>()) epochs.push_back(r);
      std::sort(epochs.begin(), epochs.end());
      torch_rate = epochs.size() % 2
                       ? epochs[epochs.size() / 2]
                       : 0.5 * (epochs[epochs.size() / 2 - 1] + epochs[epochs.size() / 2]);
    }
    std::fprintf(stderr,
                 "bench_image_folder: %lld JPEGs %lldx%lld, RandomResizedCrop 224 + flip + "
                 "normalize, batch %lld, %d workers: ember %.0f images/s, torchvision %s images/s, "
                 "ratio %s\n",
                 static_cast<long long>(images), static_cast<long long>(side),
                 static_cast<long long>(side), static_cast<long long>(batch), workers, ember_rate,
                 bench::json_number(torch_rate).c_str(),
                 torch_rate ? bench::json_number(ember_rate / *torch_rate).c_str() : "n/a");
    bench::emit("image_folder_rrc224_w" + std::to_string(workers), ember_rate, torch_rate,
                "images/s", true, 1.0,
                {bench::num("images", static_cast<double>(images)),
                 bench::num("side", static_cast<double>(side)), bench::num("workers", workers),
                 bench::num("batch", static_cast<double>(batch))});
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_image_folder: error: %s\n", e.what());
    return 1;
  }
}
