// tests/io_load_all.hpp — every way of reading a checkpoint file, for the bad-file corpus
// (tests/test_io_corrupt.cpp) and the fuzz target (fuzz/fuzz_safetensors.cpp). No GoogleTest.
//
// A file may load or may be refused, but only with ember::Error: any other exception escapes
// to the caller (a test failure, a fuzzer crash), as does any memory error under ASan.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/optim.hpp"

namespace ember_test {

/// The small model, optimizer, scheduler and loader the corpus files are written from.
struct IoFixture {
  ember::nn::Module model;
  std::unique_ptr<ember::optim::Adam> optimizer;
  std::unique_ptr<ember::optim::StepLR> scheduler;
  std::unique_ptr<ember::data::DataLoader> loader;

  IoFixture() {
    using namespace ember;  // NOLINT: test helper
    model = nn::Sequential(std::vector<nn::Module>{nn::Linear(3, 2), nn::BatchNorm1d(2)});
    optimizer = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = 0.01});
    scheduler = std::make_unique<optim::StepLR>(*optimizer, 2, 0.5);
    auto ds =
        std::make_shared<data::TensorDataset>(zeros({4, 3}), zeros({4}, {.dtype = DType::i64}));
    loader = std::make_unique<data::DataLoader>(
        ds, data::DataLoaderOptions{.batch_size = 2, .prefetch = false});
  }
  /// One optimizer step so the checkpoint carries moments and a step count.
  void step() {
    using namespace ember;  // NOLINT: test helper
    optimizer->zero_grad();
    model->train();
    Tensor x = from_vector<float>({1, 2, 3, -1, 0, 2}, {2, 3});
    (model(x) * model(x)).sum().backward();
    optimizer->step();
    scheduler->step();
  }
};

/// Reads `path` every way there is; returns the ember::Error messages (one per reader that
/// refused the file; empty when every reader accepted it). `builder`, when given, is what
/// load_model builds the module with instead of the registry.
inline std::vector<std::string> load_all(
    const std::string& path,
    const std::function<ember::nn::Module(const ember::nn::json&)>& builder = nullptr) {
  using namespace ember;  // NOLINT: test helper
  std::vector<std::string> errors;
  auto attempt = [&](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      errors.emplace_back(e.what());
    }
  };
  attempt([&] {
    io::SafetensorsFile f(path);
    f.verify_checksum();
    for (const io::TensorEntry& e : f.entries()) (void)f.read(e.name);
  });
  attempt([&] {
    const io::Inspection r = io::inspect(path);
    (void)r.to_string();
    (void)r.to_json().dump();
  });
  attempt([&] { (void)(builder ? io::load_model(path, builder) : io::load_model(path)); });
  IoFixture fx;
  attempt([&] { (void)io::load_state(fx.model, path, /*strict=*/true); });
  attempt([&] { (void)io::load_state(fx.model, path, /*strict=*/false); });
  attempt([&] {
    (void)io::load_checkpoint(path, fx.model, *fx.optimizer, fx.scheduler.get(), fx.loader.get());
  });
  return errors;
}

}  // namespace ember_test
