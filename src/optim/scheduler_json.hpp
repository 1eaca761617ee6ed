// src/optim/scheduler_json.hpp — what the scheduler files share: PyTorch's math.pi, argument
// checks, and reading and writing state-dict numbers (inf and nan travel as strings).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/optim/scheduler.hpp"

namespace ember::optim::detail {

inline constexpr double kPi = 3.141592653589793;  // math.pi

// A setting's check, as the constructors make it: "StepLR: invalid step_size 0 (expected
// step_size > 0)".
inline void check_setting(const std::string& who, const char* key, double v, const Check& c) {
  options_detail::check_number(v, c, key, who);
}

// JSON has no inf/nan: they travel as the strings "inf", "-inf", "nan".
inline json number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

inline double number_from(const json& j, const std::string& who, const char* key) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf" || s == "Infinity") return std::numeric_limits<double>::infinity();
    if (s == "-inf" || s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "nan" || s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  EMBER_CHECK(false, who, ".load_state_dict: '", key, "' is not a number (got ", j.dump(), ")");
  return 0.0;
}

// Reads `key` from `j` into `out` when present.
inline void read(const json& j, const char* key, double* out, const std::string& who) {
  if (j.contains(key)) *out = number_from(j[key], who, key);
}
inline void read(const json& j, const char* key, int64_t* out, const std::string& who) {
  if (!j.contains(key)) return;
  EMBER_CHECK(j[key].is_number(), who, ".load_state_dict: '", key, "' is not a number (got ",
              j[key].dump(), ")");
  *out = j[key].get<int64_t>();
}
inline void read(const json& j, const char* key, std::vector<double>* out, const std::string& who) {
  if (!j.contains(key)) return;
  EMBER_CHECK(j[key].is_array(), who, ".load_state_dict: '", key, "' is not a list (got ",
              j[key].dump(), ")");
  std::vector<double> v;
  for (const json& x : j[key]) v.push_back(number_from(x, who, key));
  *out = std::move(v);
}

// Reads `key` into *out when present, refusing before it assigns a value that fails `c`:
// "StepLR.load_state_dict: invalid step_size 0 (expected step_size > 0)".
template <typename M>
void read_checked(const json& j, const char* key, M* out, const std::string& who, const Check& c) {
  M v = *out;
  read(j, key, &v, who);
  check_setting(who + ".load_state_dict", key, static_cast<double>(v), c);
  *out = v;
}

// A scheduler's settings (S::settings(): key, member, check): checked as made, written to
// and read from its state dict. Reading checks each value before it is assigned.
template <typename S>
void check_settings(const S& self) {
  options_detail::for_each_field(
      [&](const auto& f) {
        check_setting(self.type_name(), f.key, static_cast<double>(self.*(f.member)), f.check);
      },
      S::settings());
}

template <typename S>
void save_settings(json& state, const S& self) {
  options_detail::for_each_field(
      [&](const auto& f) {
        if constexpr (std::is_floating_point_v<std::decay_t<decltype(self.*(f.member))>>)
          state[f.key] = number_json(self.*(f.member));
        else
          state[f.key] = self.*(f.member);
      },
      S::settings());
}

template <typename S>
void load_settings(const json& state, S& self) {
  options_detail::for_each_field(
      [&](const auto& f) {
        read_checked(state, f.key, &(self.*(f.member)), self.type_name(), f.check);
      },
      S::settings());
}

inline json numbers_json(const std::vector<double>& v) {
  json out = json::array();
  for (double x : v) out.push_back(number_json(x));
  return out;
}

inline void check_type(const json& state, const std::string& type) {
  EMBER_CHECK(state.is_object(), type, ".load_state_dict: expected a JSON object (got ",
              state.dump().substr(0, 80), ")");
  if (state.contains("type"))
    EMBER_CHECK(state["type"] == type, type,
                ".load_state_dict: the state is for another scheduler (got ", state["type"].dump(),
                ", expected \"", type, "\")");
}

}  // namespace ember::optim::detail
