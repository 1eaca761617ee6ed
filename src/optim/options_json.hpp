// src/optim/options_json.hpp — reading optimizer options from PyTorch's JSON keys: the keys
// present are read, the others keep their value (from_json of each options struct).
#pragma once

#include <array>

#include "ember/optim/optimizer.hpp"

namespace ember::optim::detail {

template <typename T>
void read(const json& j, const char* key, T& out) {
  if (j.contains(key)) out = j[key].get<T>();
}

/// A two-number list such as betas or etas: "Adamax options: betas must be a list of two
/// numbers (got [0.9])".
inline void read_pair(const json& j, const char* key, std::array<double, 2>& out, const char* who) {
  if (!j.contains(key)) return;
  const json& v = j[key];
  EMBER_CHECK(v.is_array() && v.size() == 2 && v[0].is_number() && v[1].is_number(), who,
              " options: ", key, " must be a list of two numbers (got ", v.dump(), ")");
  out = {v[0].get<double>(), v[1].get<double>()};
}

}  // namespace ember::optim::detail
