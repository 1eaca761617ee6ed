// tests/test_optim_options.cpp — options structs declared once (ember/optim/options_fields.hpp):
// JSON both ways by name (a struct whose members are reordered still loads a saved file),
// defaults kept for missing keys, unknown keys ignored, wrong kinds refused naming the key, the
// generated validation messages (the schedulers' settings too), and a real optimizer's state
// through a file and back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <tuple>

#include "ember/ember.hpp"
#include "ember/optim.hpp"
#include "optim_test_util.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using ember_test::optim_util::expect_error;
using optim::json;

// The same three options, declared in two orders.
struct SavedOptions {
  double lr = 1e-3;
  double momentum = 0.0;
  bool nesterov = false;
  static constexpr auto fields() {
    using O = SavedOptions;
    return std::tuple{optim::field("lr", &O::lr, optim::at_least(0)),
                      optim::field("momentum", &O::momentum),
                      optim::field("nesterov", &O::nesterov)};
  }
};

struct ReorderedOptions {
  bool nesterov = false;
  double momentum = 0.0;
  double lr = 1e-3;
  static constexpr auto fields() {
    using O = ReorderedOptions;
    return std::tuple{optim::field("nesterov", &O::nesterov),
                      optim::field("momentum", &O::momentum),
                      optim::field("lr", &O::lr, optim::at_least(0))};
  }
};

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

TEST(OptimOptions, ReorderedMembersStillLoadASavedFileByName) {
  const std::string path = temp_path("ember_test_options_reordered.json");
  {
    std::ofstream out(path);
    out << optim::fields_json(SavedOptions{.lr = 0.5, .momentum = 0.9, .nesterov = true}).dump();
  }
  std::ifstream in(path);
  ReorderedOptions loaded;
  optim::from_json(json::parse(in), loaded);
  EXPECT_EQ(loaded.lr, 0.5);
  EXPECT_EQ(loaded.momentum, 0.9);
  EXPECT_TRUE(loaded.nesterov);
  std::remove(path.c_str());
}

TEST(OptimOptions, MissingKeysKeepDefaultsAndUnknownKeysAreIgnored) {
  optim::AdamWOptions o;
  optim::from_json(json{{"lr", 0.1}, {"params", {0, 1}}, {"foreach", nullptr}}, o);
  EXPECT_EQ(o.lr, 0.1);
  EXPECT_EQ(o.weight_decay, 1e-2);  // AdamW's default, where Adam's is 0
  EXPECT_EQ(optim::AdamOptions{}.weight_decay, 0.0);
  EXPECT_EQ(o.betas[1], 0.999);
  optim::LBFGSOptions l;
  optim::from_json(json{{"max_eval", nullptr}, {"line_search_fn", "strong_wolfe"}}, l);
  EXPECT_FALSE(l.max_eval.has_value());
  EXPECT_EQ(l.line_search_fn, optim::LineSearch::strong_wolfe);
  EXPECT_EQ(json(l)["max_eval"], 25);  // stored resolved: max_iter · 5 / 4
}

TEST(OptimOptions, WrongKindsNameTheKey) {
  optim::SGDOptions o;
  expect_error(
      [&] {
        optim::from_json(json{{"lr", "fast"}}, o);
      },
      {"optimizer options: lr must be a number", "\"fast\""});
  expect_error(
      [&] {
        optim::from_json(json{{"nesterov", 1}}, o);
      },
      {"nesterov must be true or false"});
  optim::AdamOptions a;
  expect_error(
      [&] {
        optim::from_json(json{{"betas", {0.9}}}, a);
      },
      {"betas must be a list of two numbers", "[0.9]"});
  optim::LBFGSOptions l;
  expect_error(
      [&] {
        optim::from_json(json{{"line_search_fn", "armijo"}}, l);
      },
      {"unknown line_search_fn \"armijo\""});
  expect_error([&] { optim::from_json(json::array(), o); }, {"expected a JSON object"});
  // Through an optimizer, the message names it.
  const Tensor w = parameter(zeros({2}));
  optim::SGD opt({w});
  expect_error(
      [&] {
        opt.update_group_options(0, {{"momentum", true}});
      },
      {"SGD options: momentum must be a number (got true)"});
}

TEST(OptimOptions, EveryOptionsStructRoundTripsThroughJson) {
  auto round_trip = [](const auto& o) {
    std::decay_t<decltype(o)> back{};
    optim::from_json(json::parse(json(o).dump()), back);
    EXPECT_EQ(json(back), json(o));
  };
  round_trip(optim::SGDOptions{.lr = 0.2, .momentum = 0.5, .dampening = 0.1, .maximize = true});
  round_trip(optim::AdamOptions{.lr = 0.2, .betas = {0.8, 0.9}, .amsgrad = true});
  round_trip(optim::AdamWOptions{.eps = 1e-6, .weight_decay = 0.3});
  round_trip(optim::RMSpropOptions{.alpha = 0.9, .momentum = 0.1, .centered = true});
  round_trip(optim::AdagradOptions{.lr_decay = 0.1, .initial_accumulator_value = 0.2});
  round_trip(optim::AdadeltaOptions{.rho = 0.5, .maximize = true});
  round_trip(optim::AdamaxOptions{.betas = {0.5, 0.6}});
  round_trip(optim::NAdamOptions{.momentum_decay = 0.01});
  round_trip(optim::RAdamOptions{.weight_decay = 0.1});
  round_trip(optim::ASGDOptions{.lambd = 0.1, .t0 = 10});
  round_trip(optim::RpropOptions{.etas = {0.4, 1.5}, .step_sizes = {1e-5, 10.0}});
  round_trip(optim::LBFGSOptions{.max_eval = 7, .line_search_fn = optim::LineSearch::strong_wolfe});
  EXPECT_EQ(json(optim::SGDOptions{}).size(), 6U);  // every member, by its PyTorch key
}

TEST(OptimOptions, ValidationMessagesComeFromTheFieldList) {
  const Tensor w = parameter(zeros({2}));
  expect_error(
      [&] {
        optim::Adam({w}, {.betas = {1.5, 0.9}});
      },
      {"Adam: invalid beta1 1.5 (expected 0 <= beta1 < 1)"});
  expect_error([&] { optim::AdamW({w}, {.eps = -1.0}); },
               {"AdamW: invalid epsilon -1 (expected eps >= 0)"});
  expect_error([&] { optim::SGD({w}, {.dampening = std::nan("")}); },
               {"SGD: invalid dampening nan (expected a number)"});
  expect_error([&] { optim::SGD({w}, {.momentum = 0.0, .nesterov = true}); },
               {"SGD: nesterov requires momentum > 0"});
  expect_error([&] { optim::ASGD({w}, {.lambd = std::numeric_limits<double>::infinity()}); },
               {"ASGD: invalid lambd inf (expected a finite lambd >= 0)"});
  expect_error([&] { optim::Adadelta({w}, {.rho = 1.5}); },
               {"Adadelta: invalid rho 1.5 (expected 0 <= rho <= 1)"});
  expect_error([&] { optim::LBFGS({w}, {.max_eval = 0}); },
               {"LBFGS: invalid max_eval 0 (expected max_eval >= 1)"});
  // Loaded hyperparameters go through the same checks.
  optim::Adam opt({w});
  expect_error(
      [&] {
        opt.update_group_options(0, {{"betas", {0.9, 1.0}}});
      },
      {"Adam: invalid beta2 1 (expected 0 <= beta2 < 1)"});
  EXPECT_EQ(opt.param_groups()[0].options.betas[1], 0.999) << "a refused update changes nothing";
}

TEST(OptimOptions, AnOptimizersStateThroughAFileAndBack) {
  const Tensor w = parameter(from_vector<float>({1.0f, -2.0f, 3.0f}, Shape{3}));
  optim::AdamW opt({w}, {.lr = 0.05, .betas = {0.8, 0.95}, .weight_decay = 0.2, .amsgrad = true});
  for (int i = 0; i < 3; ++i) {
    w.set_grad(full({3}, 0.5 * (i + 1)));
    opt.step();
  }
  const optim::OptimizerState saved = opt.state_dict();
  const std::string path = temp_path("ember_test_options_state.json");
  {
    std::ofstream out(path);
    out << saved.meta.dump();
  }
  std::ifstream in(path);
  optim::OptimizerState loaded{.meta = json::parse(in)};
  for (const auto& [name, t] : saved.tensors) loaded.tensors.emplace_back(name, t.clone());
  std::remove(path.c_str());

  const Tensor v = parameter(from_vector<float>({1.0f, -2.0f, 3.0f}, Shape{3}));
  optim::AdamW fresh({v});  // default options: the file's must win
  fresh.load_state_dict(loaded);
  const optim::AdamWOptions& o = fresh.param_groups()[0].options;
  EXPECT_EQ(o.lr, 0.05);
  EXPECT_EQ(o.betas[0], 0.8);
  EXPECT_EQ(o.betas[1], 0.95);
  EXPECT_EQ(o.weight_decay, 0.2);
  EXPECT_TRUE(o.amsgrad);
  EXPECT_EQ(fresh.state_dict().meta, saved.meta);
}

// The schedulers' settings take the same checks when made and when loaded.
TEST(OptimOptions, SchedulerSettingsAreCheckedWhenMadeAndWhenLoaded) {
  const Tensor w = parameter(zeros({2}));
  optim::SGD opt({w}, {.lr = 0.1});
  expect_error([&] { optim::StepLR(opt, 0); },
               {"StepLR: invalid step_size 0 (expected step_size > 0)"});
  expect_error([&] { optim::ExponentialLR(opt, -0.5); },
               {"ExponentialLR: invalid gamma -0.5 (expected a finite gamma >= 0)"});
  expect_error([&] { optim::LinearLR(opt, 0.0); },
               {"LinearLR: invalid start_factor 0 (expected 0 < start_factor <= 1)"});
  optim::StepLR step(opt, 3);
  json bad = step.state_dict();
  bad["step_size"] = 0;
  expect_error([&] { step.load_state_dict(bad); },
               {"StepLR.load_state_dict: invalid step_size 0 (expected step_size > 0)"});
  optim::LinearLR linear(opt, 0.5);
  json worse = linear.state_dict();
  worse["end_factor"] = 2.0;
  expect_error([&] { linear.load_state_dict(worse); },
               {"LinearLR.load_state_dict: invalid end_factor 2 (expected 0 <= end_factor <= 1)"});
}

}  // namespace
