// src/core/runtime.cpp — every function of include/ember/runtime.hpp: the process-wide
// settings (threads, the ReLU fold, synchronous device errors, poisoned allocations,
// deterministic mode, f32 matmul precision) and the CUDA device queries. The settings live here and
// the layers that act on them read them through runtime.hpp (ops, the CUDA backend); the thread
// count goes to core's pool, whose size OpenBLAS follows (src/cpu/threads.cpp); the device queries
// ask the device runtime (src/backend/device_runtime.hpp).
#include "ember/runtime.hpp"

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "backend/device_runtime.hpp"
#include "core/thread_pool.hpp"
#include "ember/error.hpp"

namespace ember {
namespace {

// An environment variable read once, when the library loads (a setenv later in the program
// changes nothing; the setter does).
bool env_is(const char* name, char value) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == value;
}

// PyTorch's names (its "magma" is ember's "host"); index 0 is the default.
constexpr const char* kLinalgLibraries[] = {"default", "cusolver", "host"};

int initial_linalg_library() {
  const char* v = std::getenv("EMBER_LINALG_LIBRARY");
  for (int i = 0; v && i < 3; ++i)
    if (std::string(v) == kLinalgLibraries[i]) return i;
  return 0;
}

struct Settings {
  std::atomic<bool> relu_fold[kNumDeviceTypes];
  std::atomic<bool> sync_errors{env_is("EMBER_CUDA_SYNC_ERRORS", '1')};
  std::atomic<bool> poison{env_is("EMBER_POISON_ALLOCATIONS", '1')};
  std::atomic<bool> deterministic{env_is("EMBER_DETERMINISTIC", '1')};
  std::atomic<int> matmul_precision{0};                       // an index of kPrecisions
  std::atomic<int> linalg_library{initial_linalg_library()};  // an index of kLinalgLibraries
  Settings() {
    // The fold pays on the CPU (on unless EMBER_RELU_FOLD=0) and not on the H200 (off unless
    // EMBER_RELU_FOLD=1): docs/benchmarks.md.
    relu_fold[static_cast<int>(DeviceType::cpu)] = !env_is("EMBER_RELU_FOLD", '0');
    relu_fold[static_cast<int>(DeviceType::cuda)] = env_is("EMBER_RELU_FOLD", '1');
  }
};

Settings& settings() {
  static Settings s;
  return s;
}
[[maybe_unused]] const bool g_read_at_load = (settings(), true);

// PyTorch's names, in the order of falling precision; index 0 is the default.
constexpr const char* kPrecisions[] = {"highest", "high", "medium"};

}  // namespace

void set_num_threads(int n) { core::set_pool_threads(n); }
int get_num_threads() { return core::num_threads(); }

void set_relu_fold(DeviceType type, bool on) {
  settings().relu_fold[static_cast<int>(type)].store(on, std::memory_order_relaxed);
}
bool relu_fold(DeviceType type) {
  return settings().relu_fold[static_cast<int>(type)].load(std::memory_order_relaxed);
}

void set_sync_errors(bool on) { settings().sync_errors.store(on, std::memory_order_relaxed); }
bool sync_errors() { return settings().sync_errors.load(std::memory_order_relaxed); }

void set_poison_allocations(bool on) { settings().poison.store(on, std::memory_order_relaxed); }
bool poison_allocations() { return settings().poison.load(std::memory_order_relaxed); }

void set_deterministic(bool on) { settings().deterministic.store(on, std::memory_order_relaxed); }
bool deterministic() { return settings().deterministic.load(std::memory_order_relaxed); }

namespace {
// Stores the index of `value` in the three `names` into `slot`, or refuses naming them.
void set_named(std::atomic<int>& slot, const char* const (&names)[3], const std::string& value,
               const char* function, const char* what) {
  for (int i = 0; i < 3; ++i)
    if (value == names[i]) {
      slot.store(i, std::memory_order_relaxed);
      return;
    }
  throw Error(detail::concat(function, ": unknown ", what, " \"", value, "\" (expected \"",
                             names[0], "\", \"", names[1], "\" or \"", names[2], "\")"));
}
}  // namespace

void set_float32_matmul_precision(const std::string& precision) {
  set_named(settings().matmul_precision, kPrecisions, precision, "set_float32_matmul_precision",
            "precision");
}
std::string get_float32_matmul_precision() {
  return kPrecisions[settings().matmul_precision.load(std::memory_order_relaxed)];
}
void set_preferred_linalg_library(const std::string& library) {
  set_named(settings().linalg_library, kLinalgLibraries, library, "set_preferred_linalg_library",
            "library");
}
std::string preferred_linalg_library() {
  return kLinalgLibraries[settings().linalg_library.load(std::memory_order_relaxed)];
}

namespace {
thread_local std::string t_linalg_fallback_reason;
}  // namespace

std::string linalg_fallback_reason() { return t_linalg_fallback_reason; }

namespace detail {
int linalg_library() noexcept { return settings().linalg_library.load(std::memory_order_relaxed); }
void set_linalg_fallback_reason(std::string reason) {
  t_linalg_fallback_reason = std::move(reason);
}
bool allow_tf32() noexcept {
  return settings().matmul_precision.load(std::memory_order_relaxed) > 0;
}
}  // namespace detail

#if defined(EMBER_WITH_CUDA)
bool cuda_available() { return cuda_device_count() > 0; }
int cuda_device_count() { return backend::runtime_for(DeviceType::cuda).device_count(); }
std::string cuda_device_description(int index) {
  return backend::runtime_for(DeviceType::cuda).device_description(index);
}
#else
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_description(int /*index*/) {
  backend::runtime_for(DeviceType::cuda);  // throws "ember was built without CUDA"
  return {};
}
#endif

}  // namespace ember
