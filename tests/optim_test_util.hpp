// tests/optim_test_util.hpp — what the optimizer fixture tests share (tests/test_optim.cpp,
// tests/test_optim_more.cpp, tests/test_optim_swa.cpp): a JSON fixture of tests/data, tensors
// from its flat lists, error checks, a state through a checkpoint, two SGD groups, and one
// optimizer case of a generator's `optimizers` section (parameters from "init",
// a gradient per step and parameter from "grads", null: none) stepped through an optimizer.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ember/ember.hpp"
#include "ember/optim.hpp"
#include "error_of.hpp"
#include "fixtures.hpp"

namespace ember_test::optim_util {

using json = nlohmann::json;

/// tests/data/<file>, parsed once; a missing file names the script that writes it.
inline const json& json_fixture(const std::string& file, const std::string& generator) {
  static std::map<std::string, json> cache;
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  const std::string path = data_dir() + "/" + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path + " (run " + generator + ")");
  return cache.emplace(file, json::parse(in)).first->second;
}

/// tests/data/optim_fixtures.json (tests/gen_optim_fixtures.py).
inline const json& optim_fixtures() {
  return json_fixture("optim_fixtures.json", "tests/gen_optim_fixtures.py");
}

/// The case names of a fixture section, for INSTANTIATE_TEST_SUITE_P.
inline std::vector<std::string> keys_of(const json& section) {
  std::vector<std::string> names;
  for (const auto& [name, c] : section.items()) names.push_back(name);
  return names;
}

/// A flat list of numbers as a tensor of `shape` and `dtype` (read through f64).
inline ember::Tensor from_json(const json& data, const ember::Shape& shape, ember::DType dtype) {
  ember::Tensor t = ember::from_vector<double>(data.get<std::vector<double>>(), shape);
  return dtype == ember::DType::f64 ? t : t.to(dtype);
}

// `fn` must throw an ember::Error whose message contains every one of `parts`.
using ember::test_util::expect_error;

/// `s` as a checkpoint would give it back: the metadata through its JSON text, the tensors cloned.
inline ember::optim::OptimizerState through_checkpoint(const ember::optim::OptimizerState& s) {
  ember::optim::OptimizerState out;
  out.meta = json::parse(s.meta.dump());
  for (const auto& [name, t] : s.tensors) out.tensors.emplace_back(name, t.clone());
  return out;
}

/// SGD over two parameter groups with learning rates 0.1 and 0.02, as the generators use.
struct TwoGroups {
  ember::Tensor a = ember::parameter(ember::zeros({2}));
  ember::Tensor b = ember::parameter(ember::zeros({3}));
  ember::optim::SGD opt{
      std::vector<ember::optim::SGD::Group>{{{a}, {.lr = 0.1}}, {{b}, {.lr = 0.02}}}};
};

struct OptimCase {
  json spec;
  ember::DType dtype = ember::DType::f32;
  std::vector<ember::Shape> shapes;
  std::vector<ember::Tensor> params;
};

/// The case `spec` ({"dtype", "shapes", "init", "grads", "groups", ...}) with its parameters
/// on `device`.
inline OptimCase load_optim_case(const json& spec, ember::Device device) {
  OptimCase c;
  c.spec = spec;
  c.dtype = spec["dtype"] == "f64" ? ember::DType::f64 : ember::DType::f32;
  for (size_t i = 0; i < spec["shapes"].size(); ++i) {
    c.shapes.emplace_back(spec["shapes"][i].get<std::vector<int64_t>>());
    c.params.push_back(
        ember::parameter(from_json(spec["init"][i], c.shapes[i], c.dtype).to(device)));
  }
  return c;
}

/// An `Opt` over `params` with the groups of a case ({"options": {...}, "params": [i, ...]}).
template <typename Opt>
std::unique_ptr<ember::optim::Optimizer> make_typed(const json& groups,
                                                    const std::vector<ember::Tensor>& params) {
  std::vector<typename Opt::Group> gs;
  for (const json& g : groups) {
    typename Opt::Group group;
    g["options"].get_to(group.options);
    for (int64_t i : g["params"].get<std::vector<int64_t>>()) group.params.push_back(params[i]);
    gs.push_back(group);
  }
  return std::make_unique<Opt>(gs);
}

/// Sets the gradients of step `step` (null: no gradient).
inline void set_grads(const OptimCase& c, size_t step) {
  const json& row = c.spec["grads"][step];
  for (size_t i = 0; i < c.params.size(); ++i) {
    if (row[i].is_null())
      c.params[i].zero_grad(true);
    else
      c.params[i].set_grad(from_json(row[i], c.shapes[i], c.dtype).to(c.params[i].device()));
  }
}

/// Steps begin .. end-1 of the case.
inline void run_steps(const OptimCase& c, ember::optim::Optimizer& opt, size_t begin, size_t end) {
  for (size_t step = begin; step < end; ++step) {
    set_grads(c, step);
    opt.step();
  }
}

/// Runs every step of the case, checking each parameter against PyTorch's after each step
/// (within rtol, atol; see ember_test::check_close) and that the update kept its buffer.
inline void expect_torch_trajectory(const OptimCase& c, ember::optim::Optimizer& opt, double rtol,
                                    double atol, const std::string& what) {
  std::vector<void*> ptrs;
  for (const ember::Tensor& p : c.params) ptrs.push_back(p.data_ptr());
  for (size_t step = 0; step < c.spec["params"].size(); ++step) {
    run_steps(c, opt, step, step + 1);
    for (size_t i = 0; i < c.params.size(); ++i) {
      const ember::Tensor want = from_json(c.spec["params"][step][i], c.shapes[i], c.dtype);
      ASSERT_TRUE(
          check_close(c.params[i], want, rtol, atol,
                      what + " step " + std::to_string(step + 1) + " param " + std::to_string(i)));
      EXPECT_EQ(c.params[i].data_ptr(), ptrs[i]) << "the update must be in place";
    }
  }
}

/// The state dict in PyTorch's layout: each parameter's entries (tensors and meta scalars,
/// "step" included) as spec["state_names"], the scalars as spec["state_scalars"] (within
/// scalar_rtol) and each group's keys as spec["group_keys"].
inline void expect_torch_layout(const ember::optim::OptimizerState& s, const json& spec,
                                double scalar_rtol, const std::string& what) {
  for (const auto& [key, names] : spec["state_names"].items()) {
    std::vector<std::string> got = {"step"};
    for (const auto& [name, v] : s.meta["state"][key].items())
      if (name != "step") got.push_back(name);
    for (const auto& [name, t] : s.tensors)
      if (name.rfind("state." + key + ".", 0) == 0) got.push_back(name.substr(key.size() + 7));
    std::sort(got.begin(), got.end());
    EXPECT_EQ(json(got), names) << what << " state of parameter " << key;
    for (const auto& [name, v] : spec["state_scalars"][key].items())
      EXPECT_NEAR(s.meta["state"][key][name].get<double>(), v.get<double>(),
                  scalar_rtol * std::abs(v.get<double>()))
          << what << " " << name;
  }
  for (size_t g = 0; g < spec["group_keys"].size(); ++g) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : s.meta["param_groups"][g].items())
      if (k != "params") keys.push_back(k);
    EXPECT_EQ(json(keys), spec["group_keys"][g]) << what << " group " << g;
  }
}

/// Learning rates (or momenta) per group against PyTorch's: the same double expressions, so
/// within 1e-13 relative.
inline void expect_values(const std::vector<double>& got, const json& want,
                          const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t g = 0; g < got.size(); ++g) {
    const double w = want[g].get<double>();
    EXPECT_NEAR(got[g], w, 1e-15 + 1e-13 * std::abs(w)) << what << " group " << g;
  }
}

}  // namespace ember_test::optim_util
