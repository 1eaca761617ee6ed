// tests/test_image_folder.cpp — JPEG/PNG decoding against PIL (tests/data/images, fixtures from
// tests/gen_image_fixtures.py), bad files named in errors, ImageFolder's listing (torchvision's
// rules), skip_bad counting, and seeded augmentation through the DataLoader: identical across
// worker counts and after a resume.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/data/distributed_sampler.hpp"
#include "ember/data/image_folder.hpp"
#include "ember/data/image_io.hpp"
#include "error_of.hpp"
#include "io_test_util.hpp"

namespace {

using namespace ember;
using namespace ember::data;
using ember::test_util::contains;
using ember::test_util::error_of;
using ember_test::write_bytes;
namespace fs = std::filesystem;
namespace tf = ember::data::transforms;

// Decoding opens libturbojpeg.so.0 and libpng16.so.16 at run time; a machine without them (the
// GPU machine may lack libturbojpeg0) skips the tests that decode, naming what is missing.
#define SKIP_WITHOUT_IMAGE_LIBS()                                                               \
  do {                                                                                          \
    if (!jpeg_supported() || !png_supported())                                                  \
      GTEST_SKIP() << "image decoding needs"                                                    \
                   << (jpeg_supported() ? ""                                                    \
                                        : " libturbojpeg.so.0 (apt-get install libturbojpeg0)") \
                   << (png_supported() ? "" : " libpng16.so.16 (apt-get install libpng16-16)"); \
  } while (0)

// A fresh folder under the temp dir, removed at the end of the test.
struct ImageFolderDir {
  fs::path path;
  explicit ImageFolderDir(const std::string& name) {
    path = fs::temp_directory_path() / ("ember_imgs_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ImageFolderDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& rel) const {
    fs::create_directories((path / rel).parent_path());
    return (path / rel).string();
  }
};

// A u8 [h, w, 3] image whose pixels depend on `salt`.
Tensor pattern(int64_t h, int64_t w, int salt) {
  std::vector<uint8_t> v(static_cast<size_t>(h * w * 3));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 7 + salt * 31) % 251);
  return from_vector(v, {h, w, 3}, {.device = Device::cpu()});
}

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(ImageDecode, MatchesPil) {
  SKIP_WITHOUT_IMAGE_LIBS();
  std::ifstream in(std::string(EMBER_TEST_DATA_DIR) + "/image_fixtures.json");
  ASSERT_TRUE(in.good()) << "run /usr/bin/python3 tests/gen_image_fixtures.py";
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_GE(j["decode"].size(), 15u);
  for (const auto& c : j["decode"]) {
    const std::string name = c["file"];
    const Tensor img = read_image(std::string(EMBER_TEST_DATA_DIR) + "/images/" + name);
    EXPECT_EQ(img.shape(), Shape(c["shape"].get<std::vector<int64_t>>())) << name;
    EXPECT_EQ(img.dtype(), DType::u8) << name;
    // Same libjpeg-turbo, same conversions: every pixel equal.
    EXPECT_EQ(img.to_vector<uint8_t>(), c["pixels"].get<std::vector<uint8_t>>()) << name;
  }
}

TEST(ImageDecode, WritersRoundTrip) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("roundtrip");
  const Tensor img = pattern(17, 23, 1);
  write_png(dir.file("a.png"), img);
  EXPECT_EQ(read_image(dir.file("a.png")).to_vector<uint8_t>(), img.to_vector<uint8_t>());
  write_png(dir.file("g.png"), img.select(2, 0).contiguous());  // gray becomes RGB
  const Tensor g = read_image(dir.file("g.png"));
  EXPECT_EQ(g.select(2, 2).contiguous().to_vector<uint8_t>(),
            img.select(2, 0).contiguous().to_vector<uint8_t>());
  // JPEG is lossy: a smooth image comes back close.
  std::vector<uint8_t> smooth(32 * 40 * 3);
  for (size_t i = 0; i < smooth.size(); ++i) smooth[i] = static_cast<uint8_t>((i / 3 % 40) * 5);
  const Tensor s = from_vector(smooth, {32, 40, 3}, {.device = Device::cpu()});
  write_jpeg(dir.file("s.jpg"), s, 95);
  const std::vector<uint8_t> back = read_image(dir.file("s.jpg")).to_vector<uint8_t>();
  double err = 0;
  for (size_t i = 0; i < back.size(); ++i) err += std::abs(back[i] - smooth[i]);
  EXPECT_LT(err / static_cast<double>(back.size()), 3.0);
  EXPECT_TRUE(contains(error_of([&] { write_jpeg(dir.file("x.jpg"), s, 0); }),
                       "write_jpeg: " + dir.file("x.jpg") + ": quality 0 (expected 1 to 100)"));
  EXPECT_TRUE(contains(error_of([&] {
                         write_png(dir.file("x.png"), zeros({4, 4, 3}));
                       }),
                       "(expected u8 [H, W] or [H, W, C])"));
  EXPECT_TRUE(contains(error_of([&] {
                         write_png(dir.file("x.png"), zeros({4, 4, 2}, {.dtype = DType::u8}));
                       }),
                       "2 channels (expected 1, 3 or 4)"));
}

TEST(ImageDecode, BadFilesAreNamed) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("bad");
  write_jpeg(dir.file("ok.jpg"), pattern(32, 32, 2), 90);
  write_png(dir.file("ok.png"), pattern(32, 32, 3));
  const std::vector<uint8_t> jpg = file_bytes(dir.file("ok.jpg")),
                             png = file_bytes(dir.file("ok.png"));
  struct Case {
    std::string name;
    std::vector<uint8_t> bytes;
    std::string what;
  };
  std::vector<uint8_t> flipped = png;
  for (size_t i = 40; i < 60; ++i) flipped[i] ^= 0x5A;  // inside IDAT: bad CRC / bad data
  const std::vector<Case> cases = {
      {"trunc.jpg",
       {jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() / 2)},
       "truncated JPEG"},
      {"head.jpg", {jpg.begin(), jpg.begin() + 20}, "corrupt JPEG header"},
      {"trunc.png",
       {png.begin(), png.begin() + static_cast<long>(png.size() / 2)},
       "truncated PNG"},
      {"flipped.png", flipped, "corrupt PNG"},
      {"empty.png", {}, "empty file"},
      {"anim.jpg",
       {'G', 'I', 'F', '8', '9', 'a', 1, 0},
       "unsupported image format (got a GIF image"},
      {"notes.png",
       {'h', 'e', 'l', 'l', 'o'},
       "unsupported image format (got a file starting with bytes 68 65 6c 6c"},
  };
  for (const Case& c : cases) {
    const std::string path = dir.file(c.name);
    write_bytes(path, c.bytes);
    const std::string e = error_of([&] { read_image(path); }, c.name);
    EXPECT_TRUE(contains(e, "read_image: " + path + ": " + c.what)) << c.name << ": " << e;
  }
  EXPECT_TRUE(contains(error_of([&] { read_image(dir.file("missing.jpg")); }),
                       "read_image: " + dir.file("missing.jpg") + ": cannot open"));
}

// A process without the libraries (here: the variables point at files that do not exist) is
// told which library is missing and how to install it. A death test of the "threadsafe" style
// runs in a fresh process, where neither library was loaded yet.
TEST(ImageDecode, MissingLibrariesAreNamed) {
  // No SKIP_WITHOUT_IMAGE_LIBS: it would load the libraries before the variables are set.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string images = std::string(EMBER_TEST_DATA_DIR) + "/images/";
  auto decode = [](const std::string& path) {
    try {
      read_image(path);
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::exit(jpeg_supported() || png_supported() ? 1 : 0);
    }
    std::exit(2);
  };
  EXPECT_EXIT(
      {
        ::setenv("EMBER_TURBOJPEG_LIBRARY", "/nonexistent/libturbojpeg.so.0", 1);
        ::setenv("EMBER_LIBPNG_LIBRARY", "/nonexistent/libpng16.so.16", 1);
        decode(images + "rgb420.jpg");
      },
      ::testing::ExitedWithCode(0),
      "read_image: .*rgb420.jpg: JPEG needs libjpeg-turbo's TurboJPEG library "
      "\\(libturbojpeg.so.0\\), which could not be loaded \\(EMBER_TURBOJPEG_LIBRARY=/nonexistent/"
      "libturbojpeg.so.0: .*\\); install it \\(Debian/Ubuntu: apt-get install libturbojpeg0\\)");
  EXPECT_EXIT(
      {
        ::setenv("EMBER_LIBPNG_LIBRARY", "/nonexistent/libpng16.so.16", 1);
        ::setenv("EMBER_TURBOJPEG_LIBRARY", "/nonexistent/libturbojpeg.so.0", 1);
        decode(images + "rgb.png");
      },
      ::testing::ExitedWithCode(0),
      "read_image: .*rgb.png: PNG needs libpng \\(libpng16.so.16\\), which could not be loaded "
      "\\(EMBER_LIBPNG_LIBRARY=/nonexistent/libpng16.so.16: .*\\); install it \\(Debian/Ubuntu: "
      "apt-get install libpng16-16\\)");
  // skip_bad does not skip images because the machine cannot decode them.
  ImageFolderDir dir("nolib");
  fs::copy_file(images + "rgb420.jpg", dir.file("root/a/0.jpg"));
  fs::copy_file(images + "rgb.png", dir.file("root/a/1.png"));
  const std::string root = (dir.path / "root").string();
  EXPECT_EXIT(
      {
        ::setenv("EMBER_TURBOJPEG_LIBRARY", "/nonexistent/libturbojpeg.so.0", 1);
        const ImageFolder ds(root, {.skip_bad = true});
        std::error_code ec;
        try {
          ds.get(0);
        } catch (const ImageLibraryMissing& e) {
          fs::remove_all(dir.path, ec);  // the child's own copy: exit skips destructors
          std::fprintf(stderr, "%s; skipped %lld\n", e.what(),
                       static_cast<long long>(ds.skipped()));
          std::exit(0);
        }
        fs::remove_all(dir.path, ec);
        std::exit(2);
      },
      ::testing::ExitedWithCode(0), "0.jpg: JPEG needs libjpeg-turbo.*; skipped 0");
}

// root/<class>/... with some non-images, a sub-folder and mixed-case extensions.
std::vector<std::string> make_folder(const ImageFolderDir& dir) {
  const Tensor a = pattern(20, 24, 1), b = pattern(30, 18, 2);
  write_jpeg(dir.file("root/dog/b.PNG.jpg"), a, 90);
  write_png(dir.file("root/dog/a.png"), b);
  write_png(dir.file("root/cat/z.JPEG"), a);  // a PNG named .JPEG: found by its bytes
  write_jpeg(dir.file("root/cat/sub/a.jpg"), b, 90);
  write_jpeg(dir.file("root/cat/sub b/c.jpg"), a, 90);
  write_png(dir.file("root/cat/sub/deep/d.png"), b);
  write_png(dir.file("root/cat/m.png"), a);
  write_bytes(dir.file("root/cat/readme.txt"), {'h', 'i'});
  write_bytes(dir.file("root/cat/x.bmp"), {'B', 'M'});
  write_bytes(dir.file("root/notes.txt"), {'h', 'i'});
  // torchvision: classes sorted; in a class, folders sorted by path as strings ("cat" <
  // "cat/sub" < "cat/sub b" < "cat/sub/deep": ' ' sorts before '/'), files sorted in each.
  const std::string r = (dir.path / "root").string();
  return {r + "/cat/m.png",       r + "/cat/z.JPEG",         r + "/cat/sub/a.jpg",
          r + "/cat/sub b/c.jpg", r + "/cat/sub/deep/d.png", r + "/dog/a.png",
          r + "/dog/b.PNG.jpg"};
}

TEST(ImageFolder, ListsAsTorchvision) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("list");
  const std::vector<std::string> expected = make_folder(dir);
  const ImageFolder ds((dir.path / "root").string());
  EXPECT_EQ(ds.classes(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(ds.class_to_idx().at("dog"), 1);
  ASSERT_EQ(ds.size(), 7);
  for (int64_t i = 0; i < ds.size(); ++i) EXPECT_EQ(ds.samples()[i].path, expected[i]) << i;
  EXPECT_EQ(ds.targets(), (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 1}));
  // The default transform is ToTensor: f32 [3, H, W], target i64 [].
  const Example e = ds.get(5);
  EXPECT_EQ(e.input.shape(), Shape({3, 30, 18}));
  EXPECT_EQ(e.target.dtype(), DType::i64);
  EXPECT_EQ(e.target.item<int64_t>(), 1);
  EXPECT_EQ(e.input.to_vector<float>(), tf::ToTensor()(ds.load(5)).to_vector<float>());
  // Only .jpeg: the class with none is named.
  const std::string err =
      error_of([&] { ImageFolder((dir.path / "root").string(), {.extensions = {".jpeg"}}); });
  EXPECT_TRUE(contains(err, ": no image in the class folder dog (expected files ending with .jpeg"))
      << err;
}

TEST(ImageFolder, MissingOrEmptyFoldersAreNamed) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("empty");
  const std::string missing = (dir.path / "nope").string();
  EXPECT_TRUE(contains(error_of([&] { ImageFolder{missing}; }),
                       "ImageFolder: " + missing + " does not exist"));
  const std::string file = dir.file("plain.txt");
  write_bytes(file, {'x'});
  EXPECT_TRUE(contains(error_of([&] { ImageFolder{file}; }), file + " is not a folder"));
  fs::create_directories(dir.path / "flat");
  write_png(dir.file("flat/a.png"), pattern(4, 4, 0));
  EXPECT_TRUE(contains(error_of([&] { ImageFolder{(dir.path / "flat").string()}; }),
                       " has no class folder (expected root/<class>/<image>"));
  fs::create_directories(dir.path / "two/a");
  fs::create_directories(dir.path / "two/b");
  write_png(dir.file("two/b/x.png"), pattern(4, 4, 0));
  EXPECT_TRUE(contains(error_of([&] { ImageFolder{(dir.path / "two").string()}; }),
                       "no image in the class folder a (expected files ending with .jpg, .jpeg, "
                       ".png, any case)"));
  write_png(dir.file("two/a/y.png"), pattern(4, 4, 1));
  const ImageFolder two((dir.path / "two").string());
  EXPECT_TRUE(contains(error_of([&] { two.get(2); }), "ImageFolder: index 2 is out of range"));
}

TEST(ImageFolder, BadImagesThrowOrAreSkippedAndCounted) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("skip");
  for (int i = 0; i < 5; ++i)
    write_png(dir.file("root/c/" + std::to_string(i) + ".png"), pattern(8, 8, i));
  const std::string bad1 = dir.file("root/c/1.png"), bad4 = dir.file("root/c/4.png");
  write_bytes(bad1, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0});
  write_bytes(bad4, {0xFF, 0xD8, 0xFF, 0xE0});
  const std::string root = (dir.path / "root").string();
  const ImageFolder strict(root);
  const std::string e = error_of([&] { strict.get(1); });
  EXPECT_TRUE(contains(e, "ImageFolder: sample 1: read_image: " + bad1 + ": ")) << e;
  EXPECT_TRUE(contains(e, "set ImageFolderOptions::skip_bad")) << e;
  EXPECT_EQ(strict.skipped(), 0);

  const ImageFolder lenient(root, {.skip_bad = true});
  // Sample 1 is bad: sample 2 stands in; sample 4 is bad: wraps round to sample 0.
  EXPECT_EQ(lenient.get(1).input.to_vector<float>(), lenient.get(2).input.to_vector<float>());
  EXPECT_EQ(lenient.get(4).input.to_vector<float>(), lenient.get(0).input.to_vector<float>());
  EXPECT_EQ(lenient.skipped(), 2);
  lenient.get(1);  // met again: counted once
  EXPECT_EQ(lenient.skipped(), 2);
  EXPECT_EQ(lenient.bad_files(), (std::vector<std::string>{bad1, bad4}));
  // Through a loader with workers, a full epoch counts the same bad files.
  auto ds = std::make_shared<ImageFolder>(root, ImageFolderOptions{.skip_bad = true});
  DataLoader loader(ds, {.batch_size = 2, .num_workers = 2});
  int64_t seen = 0;
  for (Example& b : loader) seen += b.input.size(0);
  EXPECT_EQ(seen, 5);
  EXPECT_EQ(ds->skipped(), 2);
}

// Every batch of `epochs` epochs: inputs then targets, flattened.
std::vector<std::vector<float>> batches_of(DataLoader& loader, int epochs) {
  std::vector<std::vector<float>> out;
  for (int e = 0; e < epochs; ++e)
    for (Example& b : loader) {
      std::vector<float> v = b.input.to_vector<float>();
      for (float t : b.target.to(DType::f32).to_vector<float>()) v.push_back(t);
      out.push_back(std::move(v));
    }
  return out;
}

// An ImageFolder augmenting as training does (crops of 12 x 12).
std::shared_ptr<ImageFolder> augmenting_folder(const std::string& root) {
  return std::make_shared<ImageFolder>(
      root, ImageFolderOptions{
                .transform =
                    tf::Compose({tf::RandomResizedCrop(12), tf::RandomHorizontalFlip(),
                                 tf::ToTensor(), tf::Normalize({0.5, 0.4, 0.3}, {0.2, 0.25, 0.3})}),
                .seed = 11});
}

std::vector<std::vector<float>> run_epochs(const std::string& root, int workers, bool prefetch,
                                           int epochs) {
  DataLoader loader(
      augmenting_folder(root),
      {.batch_size = 4, .shuffle = true, .seed = 3, .prefetch = prefetch, .num_workers = workers});
  return batches_of(loader, epochs);
}

TEST(ImageFolder, AugmentationsAreTheSameForAnyWorkerCount) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("workers");
  for (int i = 0; i < 10; ++i)
    write_jpeg(
        dir.file("root/" + std::string(i % 2 ? "b" : "a") + "/" + std::to_string(i) + ".jpg"),
        pattern(20 + i, 26 - i, i), 90);
  const std::string root = (dir.path / "root").string();
  const auto base = run_epochs(root, 0, true, 2);
  ASSERT_EQ(base.size(), 6u);  // 3 batches per epoch
  EXPECT_EQ(base[0].size(), 4u * 3 * 12 * 12 + 4);
  EXPECT_EQ(run_epochs(root, 1, false, 2), base);
  EXPECT_EQ(run_epochs(root, 3, true, 2), base);
  // Epochs differ: the order and the augmentations change.
  EXPECT_NE(base[0], base[3]);
}

TEST(ImageFolder, ResumeSeesTheSameAugmentations) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("resume");
  for (int i = 0; i < 8; ++i)
    write_png(dir.file("root/k" + std::to_string(i % 3) + "/" + std::to_string(i) + ".png"),
              pattern(16 + i, 16, i));
  const std::string root = (dir.path / "root").string();
  const auto full = run_epochs(root, 2, true, 3);  // 2 batches per epoch
  ASSERT_EQ(full.size(), 6u);
  // A new process resumes at epoch 1, batch 1, from the saved state.
  DataLoader loader(augmenting_folder(root),
                    {.batch_size = 4, .shuffle = true, .seed = 3, .num_workers = 2});
  loader.load_state(
      {.epoch = 1, .position = 1, .size = 8, .batch_size = 4, .shuffle = true, .seed = 3});
  const auto resumed = batches_of(loader, 2);
  ASSERT_EQ(resumed.size(), 3u);
  EXPECT_EQ(resumed[0], full[3]);
  EXPECT_EQ(resumed[1], full[4]);
  EXPECT_EQ(resumed[2], full[5]);
}

TEST(ImageFolder, MixedSizesWithoutCropAreRefusedWhenBatched) {
  SKIP_WITHOUT_IMAGE_LIBS();
  ImageFolderDir dir("mixed");
  write_png(dir.file("root/a/0.png"), pattern(8, 8, 0));
  write_png(dir.file("root/a/1.png"), pattern(9, 8, 1));
  auto ds = std::make_shared<ImageFolder>((dir.path / "root").string());
  for (int workers : {0, 2}) {  // with workers: the copy into the batch gives way to collate
    DataLoader loader(ds, {.batch_size = 2, .prefetch = false, .num_workers = workers});
    const std::string e = error_of([&] {
      for (Example& b : loader) (void)b;
    });
    EXPECT_TRUE(contains(e, "stack: tensor 1 has shape [3, 9, 8] but tensor 0 has [3, 8, 8]"))
        << workers << " workers: " << e;
  }
}

// Examples i -> [i, i]; get() throws for the indices in `bad`; records begin_epoch calls.
class Probe : public Dataset {
 public:
  std::vector<int64_t> bad;
  mutable std::vector<int64_t> epochs;
  int64_t size() const override { return 23; }
  Example get(int64_t i) const override {
    EMBER_CHECK(std::find(bad.begin(), bad.end(), i) == bad.end(), "bad example ", i);
    return {.input = full({2}, static_cast<double>(i)), .target = scalar_tensor(i % 3)};
  }
  void begin_epoch(int64_t epoch) override { epochs.push_back(epoch); }
};

TEST(DataLoaderWorkers, SameBatchesWithAnyWorkerCount) {
  auto ds = std::make_shared<Probe>();
  DataLoader none(ds, {.batch_size = 5, .shuffle = true, .seed = 4});
  const auto base = batches_of(none, 2);
  ASSERT_EQ(base.size(), 10u);
  for (int workers : {1, 2, 7}) {
    DataLoader with(ds, {.batch_size = 5, .shuffle = true, .seed = 4, .num_workers = workers});
    EXPECT_EQ(batches_of(with, 2), base) << workers << " workers";
    DataLoader direct(
        ds,
        {.batch_size = 5, .shuffle = true, .seed = 4, .prefetch = false, .num_workers = workers});
    EXPECT_EQ(batches_of(direct, 2), base) << workers << " workers, no prefetch";
  }
}

TEST(DataLoaderWorkers, TheFirstFailingExampleIsReported) {
  auto ds = std::make_shared<Probe>();
  ds->bad = {7, 5};
  DataLoader loader(ds, {.batch_size = 10, .num_workers = 3});
  // Batch 0 holds examples 0..9: 5 fails before 7 in the batch, whichever thread ran first.
  EXPECT_TRUE(contains(error_of([&] { loader.begin(); }), "bad example 5"));
  DataLoader direct(ds, {.batch_size = 10, .prefetch = false, .num_workers = 3});
  EXPECT_TRUE(contains(error_of([&] { direct.begin(); }), "bad example 5"));
}

TEST(DataLoaderWorkers, OptionsAndEpochs) {
  auto ds = std::make_shared<Probe>();
  EXPECT_TRUE(contains(error_of([&] { DataLoader(ds, {.num_workers = -1}); }),
                       "DataLoader: num_workers is -1 (expected 0 to 1024"));
  DataLoader loader(ds, {.batch_size = 8, .num_workers = 2});
  EXPECT_TRUE(contains(loader.to_string(), "prefetch=True, num_workers=2, epoch=0"));
  batches_of(loader, 2);
  loader.set_state(5, 1);
  batches_of(loader, 1);
  EXPECT_EQ(ds->epochs, (std::vector<int64_t>{0, 1, 5}));
  // Through a DistributedShard the epoch reaches the base dataset (the shard's own order is
  // set by its set_epoch, not by the loader).
  auto base = std::make_shared<Probe>();
  auto shard = std::make_shared<DistributedShard>(
      base, DistributedSamplerOptions{.num_replicas = 2, .rank = 1});
  DataLoader sharded(shard, {.batch_size = 4});
  batches_of(sharded, 2);
  EXPECT_EQ(base->epochs, (std::vector<int64_t>{0, 1}));
}

}  // namespace
