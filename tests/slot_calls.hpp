// tests/slot_calls.hpp — the kernel-table calls a piece of code makes, by slot name (the
// Profiler's kernel list): for tests that a fusion took its one kernel and the composite's
// kernels did not run.
//
//   const auto calls = ember_test::slot_calls([&] { y = layer_norm_linear(x, ...); });
//   EXPECT_EQ(calls.count("layer_norm_forward"), 0u);
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ember/ember.hpp"

namespace ember_test {

template <typename F>
std::map<std::string, int64_t> slot_calls(F f) {
  ember::Profiler prof;
  f();
  prof.stop();
  std::map<std::string, int64_t> calls;
  for (const auto& k : prof.kernels()) calls[k.name] += k.calls;
  return calls;
}

}  // namespace ember_test
