// tests/test_train_e2e.cpp — end to end: an 8-16-16-3 ReLU MLP (nn::Sequential of
// nn::Linear + nn::ReLU) starts from PyTorch's initial weights (loaded by their PyTorch
// names, "0.weight", "0.bias", "2.weight", ...) and trains for 20 steps on a fixed batch
// with cross_entropy. The loss before every step must match torch's trajectory to 1e-4
// relative, with Adam and with SGD + momentum 0.9, and so must the final weights
// (tests/data/optim_fixtures.json, section "e2e", written by tests/gen_optim_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/nn/linear.hpp"
#include "ember/optim.hpp"
#include "fixtures.hpp"

namespace {

using namespace ember;  // NOLINT: test file
using json = nlohmann::json;

const json& e2e_fixture() {
  static const json doc = [] {
    const std::string path = ember_test::data_dir() + "/optim_fixtures.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path + " (run tests/gen_optim_fixtures.py)");
    return json::parse(in).at("e2e");
  }();
  return doc;
}

Tensor f32_tensor(const json& data, const Shape& shape) {
  return from_vector<float>(data.get<std::vector<float>>(), shape);
}

// The fixture's MLP with torch's initial weights.
nn::Sequential make_net() {
  const std::vector<int64_t> sizes = e2e_fixture()["layers"].get<std::vector<int64_t>>();
  nn::Sequential net;
  for (size_t i = 0; i + 1 < sizes.size(); ++i) {
    if (i > 0) net->push_back(nn::ReLU());
    net->push_back(nn::Linear(sizes[i], sizes[i + 1]));
  }
  nn::StateDict sd;
  for (const auto& [name, entry] : e2e_fixture()["state_dict"].items())
    sd.emplace_back(name,
                    f32_tensor(entry["data"], Shape(entry["shape"].get<std::vector<int64_t>>())));
  const nn::LoadReport report = net->load_state_dict(sd, /*strict=*/true);
  EXPECT_TRUE(report.ok());
  return net;
}

void train_and_compare(
    const std::string& run,
    const std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>& make) {
  const json& fx = e2e_fixture();
  nn::Sequential net = make_net();
  const Tensor x = f32_tensor(fx["x"]["data"], Shape(fx["x"]["shape"].get<std::vector<int64_t>>()));
  const std::vector<int64_t> labels = fx["y"].get<std::vector<int64_t>>();
  const Tensor y = from_vector<int64_t>(labels, {static_cast<int64_t>(labels.size())});
  std::unique_ptr<optim::Optimizer> opt = make(net->parameters());

  std::vector<void*> ptrs;
  for (const Tensor& p : net->parameters()) ptrs.push_back(p.data_ptr());
  const std::vector<double> want = fx["runs"][run]["losses"].get<std::vector<double>>();
  for (size_t step = 0; step < want.size(); ++step) {
    opt->zero_grad();
    Tensor loss = cross_entropy(net(x), y);
    const double got = loss.item<float>();
    EXPECT_NEAR(got, want[step], 1e-4 * std::abs(want[step]))
        << run << ": loss before step " << step + 1 << " (got " << got << ", torch " << want[step]
        << ")";
    loss.backward();
    opt->step();
  }
  const std::vector<Tensor> params = net->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].data_ptr(), ptrs[i]) << run << ": moved";
  for (const auto& [name, p] : net->named_parameters()) {
    const Tensor final_want = f32_tensor(fx["runs"][run]["final"][name], p.shape());
    EXPECT_TRUE(ember_test::check_close(p, final_want, 1e-4, 1e-5, run + " final " + name));
  }
  EXPECT_LT(want.back(), want.front()) << "the fixture's loss should fall";
}

TEST(TrainE2E, AdamMatchesTorchLossTrajectory) {
  train_and_compare("adam", [](std::vector<Tensor> params) {
    return std::make_unique<optim::Adam>(std::move(params), optim::AdamOptions{.lr = 1e-2});
  });
}

TEST(TrainE2E, SgdMomentumMatchesTorchLossTrajectory) {
  train_and_compare("sgd_momentum", [](std::vector<Tensor> params) {
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
  });
}

TEST(TrainE2E, PassPoolStopsGrowingAfterFirstStep) {
  const json& fx = e2e_fixture();
  nn::Sequential net = make_net();
  const Tensor x = f32_tensor(fx["x"]["data"], Shape(fx["x"]["shape"].get<std::vector<int64_t>>()));
  const Tensor y = from_vector<int64_t>(fx["y"].get<std::vector<int64_t>>(), {x.size(0)});
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  auto train_step = [&] {
    opt.zero_grad();
    Tensor loss = cross_entropy(net(x), y);
    loss.backward();
    opt.step();
  };
  train_step();
  train_step();
  const MemoryStats before = memory_stats(Device::cpu());
  for (int i = 0; i < 5; ++i) train_step();
  const MemoryStats after = memory_stats(Device::cpu());
  EXPECT_EQ(after.pass_in_use, before.pass_in_use);
  EXPECT_EQ(after.pass_reserved, before.pass_reserved) << "ARCHITECTURE §3 rule 4";
  EXPECT_EQ(after.persistent_bytes, before.persistent_bytes);
}

}  // namespace
