// tests/fixtures.hpp — loads PyTorch reference fixtures and compares tensors (STYLE §8).
//
// tests/data/op_fixtures.json is written by tests/gen_fixtures.py. Each case holds named
// tensors ({"shape", "dtype", "data"}) and `attrs` (the op's non-tensor arguments and the
// comparison tolerances `rtol`/`atol`):
//
//   Fixture f = load_fixture("matmul_2d");
//   Tensor out = ember::matmul(f["a"], f["b"]);
//   expect_close(out, f["out"], f.rtol(), f.atol(), "matmul_2d output");
//
// expect_close passes when |got - want| <= atol * max(1, max|want|) + rtol * |want| for every
// element, and on failure names the op, the shape and the first mismatching indices.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.hpp"

#ifndef EMBER_TEST_DATA_DIR
#error "tests/CMakeLists.txt must define EMBER_TEST_DATA_DIR (the path of tests/data)"
#endif

namespace ember_test {

/// The folder holding the fixtures; the EMBER_TEST_DATA_DIR environment variable overrides
/// the path compiled in.
inline std::string data_dir() {
  if (const char* env = std::getenv("EMBER_TEST_DATA_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return EMBER_TEST_DATA_DIR;
}

/// One named case of op_fixtures.json: tensors in file order, plus attrs.
struct Fixture {
  std::string name;
  nlohmann::ordered_json attrs;
  std::vector<std::string> order;  // tensor names as they appear in the file
  std::map<std::string, ember::Tensor> tensors;

  bool has(const std::string& key) const { return tensors.count(key) != 0; }
  /// The tensor named `key` (a handle: ops that write in place change the fixture's copy).
  ember::Tensor& operator[](const std::string& key) {
    auto it = tensors.find(key);
    if (it == tensors.end()) {
      throw std::runtime_error("fixture " + name + " has no tensor '" + key + "'");
    }
    return it->second;
  }
  const nlohmann::ordered_json& attr(const std::string& key) const {
    if (!attrs.contains(key))
      throw std::runtime_error("fixture " + name + " has no attr '" + key + "'");
    return attrs.at(key);
  }
  int64_t attr_int(const std::string& key) const { return attr(key).get<int64_t>(); }
  double attr_double(const std::string& key) const { return attr(key).get<double>(); }
  bool attr_bool(const std::string& key) const { return attr(key).get<bool>(); }
  std::string attr_string(const std::string& key) const { return attr(key).get<std::string>(); }
  ember::Shape attr_shape(const std::string& key) const {
    return ember::Shape(attr(key).get<std::vector<int64_t>>());
  }
  double rtol() const { return attrs.value("rtol", 1e-5); }
  double atol() const { return attrs.value("atol", 1e-6); }
};

/// op_fixtures.json and every op_fixtures_<group>.json (tests/fixture_cases_<group>.py) as one
/// document, parsed once per process; a case name in two files is an error.
inline const nlohmann::ordered_json& fixture_file() {
  static const nlohmann::ordered_json doc = [] {
    std::vector<std::string> paths{data_dir() + "/op_fixtures.json"};
    std::vector<std::string> groups;
    for (const auto& entry : std::filesystem::directory_iterator(data_dir())) {
      const std::string file = entry.path().filename().string();
      if (file.rfind("op_fixtures_", 0) == 0 && entry.path().extension() == ".json")
        groups.push_back(entry.path().string());
    }
    std::sort(groups.begin(), groups.end());
    paths.insert(paths.end(), groups.begin(), groups.end());
    nlohmann::ordered_json merged;
    for (const std::string& path : paths) {
      std::ifstream in(path);
      if (!in) throw std::runtime_error("cannot open " + path + " (run tests/gen_fixtures.py)");
      nlohmann::ordered_json one = nlohmann::ordered_json::parse(in);
      if (merged.is_null()) {
        merged = std::move(one);
        continue;
      }
      for (auto& [key, value] : one.at("cases").items()) {
        if (merged["cases"].contains(key))
          throw std::runtime_error("fixture case '" + key + "' is in two files (" + path + ")");
        merged["cases"][key] = std::move(value);
      }
    }
    return merged;
  }();
  return doc;
}

/// Names of every case in the file, sorted.
inline std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& [key, value] : fixture_file().at("cases").items()) names.push_back(key);
  std::sort(names.begin(), names.end());
  return names;
}

/// Builds an ember tensor (on the CPU) from one {"shape", "dtype", "data"} record.
inline ember::Tensor tensor_from_json(const nlohmann::ordered_json& j) {
  const ember::Shape shape(j.at("shape").get<std::vector<int64_t>>());
  const std::string dtype = j.at("dtype").get<std::string>();
  const nlohmann::ordered_json& data = j.at("data");
  if (dtype == "f32") {
    return ember::from_vector<float>(data.get<std::vector<float>>(), shape);
  }
  if (dtype == "f64") {
    return ember::from_vector<double>(data.get<std::vector<double>>(), shape);
  }
  if (dtype == "i64") {
    return ember::from_vector<int64_t>(data.get<std::vector<int64_t>>(), shape);
  }
  // The exact dtypes of mixed-dtype cases (fixture_json.encode_tensor(exact=True)).
  if (dtype == "i32") {
    return ember::from_vector<int32_t>(data.get<std::vector<int32_t>>(), shape);
  }
  if (dtype == "u8") {
    return ember::from_vector<int64_t>(data.get<std::vector<int64_t>>(), shape)
        .to(ember::DType::u8);
  }
  if (dtype == "f16" || dtype == "bf16") {
    return ember::from_vector<float>(data.get<std::vector<float>>(), shape)
        .to(dtype == "f16" ? ember::DType::f16 : ember::DType::bf16);
  }
  if (dtype == "bool") {
    std::vector<float> values;
    for (const auto& v : data)
      values.push_back(v.is_boolean() ? (v.get<bool>() ? 1.0f : 0.0f) : v.get<float>());
    return ember::from_vector<float>(values, shape).to(ember::DType::boolean);
  }
  throw std::runtime_error("fixture tensor has unknown dtype " + dtype);
}

/// Loads case `name` with fresh tensors (each call builds new storage).
inline Fixture load_fixture(const std::string& name) {
  const nlohmann::ordered_json& cases = fixture_file().at("cases");
  if (!cases.contains(name)) throw std::runtime_error("no fixture named " + name);
  const nlohmann::ordered_json& c = cases.at(name);
  Fixture f;
  f.name = name;
  f.attrs = c.value("attrs", nlohmann::ordered_json::object());
  for (const auto& [key, value] : c.at("tensors").items()) {
    f.order.push_back(key);
    f.tensors.emplace(key, tensor_from_json(value));
  }
  return f;
}

/// Row-major multi-index of flat index `i` in `shape`, printed as "[i, j, k]".
inline std::string index_string(int64_t i, const ember::Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (int d = shape.size() - 1; d >= 0; --d) {
    const int64_t n = shape[d] == 0 ? 1 : shape[d];
    idx[d] = i % n;
    i /= n;
  }
  std::ostringstream out;
  out << "[";
  for (size_t d = 0; d < idx.size(); ++d) out << (d ? ", " : "") << idx[d];
  out << "]";
  return out.str();
}

/// Values of `t` (any dtype, any strides) as doubles, row-major.
inline std::vector<double> values_f64(const ember::Tensor& t) {
  return t.detach().to(ember::DType::f64).contiguous().to_vector<double>();
}

/// Compares got with want (same shape and dtype; values within tolerance). Float values pass
/// when |got - want| <= atol * max(1, max|want|) + rtol * |want|; integer and bool values must
/// match exactly. The failure message names `what`, the shape and the first mismatches.
inline ::testing::AssertionResult check_close(const ember::Tensor& got, const ember::Tensor& want,
                                              double rtol, double atol, const std::string& what) {
  if (!got.defined()) {
    return ::testing::AssertionFailure()
           << what << ": got an undefined tensor, expected shape " << want.shape().to_string();
  }
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << what << ": shape " << got.shape().to_string()
                                         << ", expected " << want.shape().to_string();
  }
  if (got.dtype() != want.dtype()) {
    return ::testing::AssertionFailure()
           << what << " " << want.shape().to_string() << ": dtype "
           << ember::dtype_name(got.dtype()) << ", expected " << ember::dtype_name(want.dtype());
  }
  const std::vector<double> g = values_f64(got);
  const std::vector<double> w = values_f64(want);
  const bool exact = !ember::is_floating(want.dtype());
  double scale = 1.0;
  for (double v : w)
    if (std::isfinite(v)) scale = std::max(scale, std::abs(v));
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < w.size(); ++i) {
    // The same infinity, or NaN where NaN is wanted (an input beyond a 16-bit dtype's range
    // overflows in both runs), matches; NaN anywhere else fails below.
    if (g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))) continue;
    const double diff = std::abs(g[i] - w[i]);
    const double bound = exact ? 0.0 : atol * scale + rtol * std::abs(w[i]);
    if (!(diff <= bound)) {  // NaN fails too
      if (bad < 5) {
        first << "\n  at " << index_string(static_cast<int64_t>(i), want.shape()) << ": got "
              << g[i] << ", want " << w[i] << " (|diff| " << diff << ", allowed " << bound << ")";
      }
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << what << " " << want.shape().to_string() << ": " << bad << " of " << w.size()
    << " elements differ (rtol " << rtol << ", atol " << atol << " x " << scale << ")";
  r << first.str();
  if (bad > 5) r << "\n  ...";
  return r;
}

/// EXPECT-style wrapper of check_close (records a failure, does not stop the test).
inline bool expect_close(const ember::Tensor& got, const ember::Tensor& want, double rtol,
                         double atol, const std::string& what) {
  ::testing::AssertionResult r = check_close(got, want, rtol, atol, what);
  if (!r) ADD_FAILURE() << r.message();
  return static_cast<bool>(r);
}

/// Exact comparison (for integer, bool and view results).
inline bool expect_equal(const ember::Tensor& got, const ember::Tensor& want,
                         const std::string& what) {
  return expect_close(got, want, 0.0, 0.0, what);
}

}  // namespace ember_test
