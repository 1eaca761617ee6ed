// src/core/deterministic.cpp — set_deterministic / deterministic() (include/ember/runtime.hpp):
// the process-wide switch that the CUDA backend reads where a kernel has a faster,
// nondeterministic form (docs/cuda.md, "Deterministic mode").
#include <atomic>
#include <cstdlib>

#include "ember/runtime.hpp"

namespace ember {
namespace {

// Off unless EMBER_DETERMINISTIC=1; the variable is read once, when the library loads (a
// setenv later in the program changes nothing; set_deterministic does).
std::atomic<bool>& setting() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("EMBER_DETERMINISTIC");
    return v != nullptr && v[0] == '1';
  }()};
  return on;
}
[[maybe_unused]] const bool g_read_at_load = (setting(), true);

}  // namespace

void set_deterministic(bool on) { setting().store(on, std::memory_order_relaxed); }
bool deterministic() { return setting().load(std::memory_order_relaxed); }

}  // namespace ember
