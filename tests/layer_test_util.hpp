// tests/layer_test_util.hpp — helpers the layer tests share: reading a layer fixture file and
// its case names, PyTorch's U(-b, b) default initialisation, the state_dict names and shapes
// of a module, and the nn::build(config()) round trip.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "ember/autograd.hpp"
#include "ember/nn/module.hpp"
#include "fixtures.hpp"

namespace ember::test_util {

/// tests/data/`file`, parsed in its order; a missing file throws, naming `how` to make it.
inline nlohmann::ordered_json read_layer_fixtures(const std::string& file, const std::string& how) {
  const std::string path = ember_test::data_dir() + "/" + file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path + " (run " + how + ")");
  return nlohmann::ordered_json::parse(in);
}

/// The keys of doc["cases"], in file order.
inline std::vector<std::string> fixture_case_names(const nlohmann::ordered_json& doc) {
  std::vector<std::string> names;
  for (const auto& [key, value] : doc.at("cases").items()) names.push_back(key);
  return names;
}

/// Random f64 values of `shape` (normal, mean 0, standard deviation `std`): gradcheck inputs.
inline Tensor data(const Shape& shape, double std = 1.0) {
  return randn(shape, {.dtype = DType::f64}, 0.0, std);
}

/// Expects gradcheck(fn, in) to pass; a throw is a failure too. `what` names the case.
inline void expect_gradcheck(const std::string& what,
                             const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                             const std::vector<Tensor>& in) {
  try {
    GradcheckResult r = gradcheck(fn, in);
    EXPECT_TRUE(r.ok) << what << ": " << r.message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw: " << e.what();
  }
}

/// Expects `t` to look drawn from U(-bound, bound): within it, reaching 0.9 of it, mean 0 and
/// spread bound/sqrt(3) (each to 0.1·bound). `what` names the tensor in failures.
inline void expect_uniform(const Tensor& t, double bound, const std::string& what) {
  const std::vector<double> v = ember_test::values_f64(t);
  double mx = 0.0, sum = 0.0, sq = 0.0;
  for (double e : v) {
    mx = std::max(mx, std::abs(e));
    sum += e;
    sq += e * e;
  }
  const double n = static_cast<double>(v.size()), mean = sum / n,
               sd = std::sqrt(sq / n - mean * mean);
  EXPECT_LE(mx, bound) << what << ": a value is beyond the bound";
  EXPECT_GT(mx, 0.9 * bound) << what << ": values do not reach the bound";
  EXPECT_NEAR(mean, 0.0, 0.1 * bound) << what;
  EXPECT_NEAR(sd, bound / std::sqrt(3.0), 0.1 * bound)
      << what << ": spread of U(-b, b) is b/sqrt(3)";
}

/// "name [shape]" for every state_dict entry, in order.
inline std::vector<std::string> state_names(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [n, t] : m->state_dict()) out.push_back(n + " " + t.shape().to_string());
  return out;
}

/// nn::build(m.config()) gives the same type, config, repr and state_dict names and shapes.
inline void expect_config_round_trip(const nn::Module& m) {
  const nn::json config = m->config();
  nn::Module rebuilt = nn::build(config);
  EXPECT_EQ(rebuilt->type_name(), m->type_name());
  EXPECT_EQ(rebuilt->config(), config) << config.dump();
  EXPECT_EQ(rebuilt->extra_repr(), m->extra_repr());
  EXPECT_EQ(state_names(rebuilt), state_names(m)) << config.dump();
}

}  // namespace ember::test_util
