// src/core/runtime.cpp — every function of include/ember/runtime.hpp: the process-wide
// settings (threads, the ReLU fold, synchronous device errors, deterministic mode, f32 matmul
// precision) and the CUDA device queries. The settings live here and the layers that act on
// them read them through runtime.hpp (ops, the CUDA backend); the thread count goes to core's
// pool, whose size OpenBLAS follows (src/cpu/threads.cpp); the device queries ask the device
// runtime (src/backend/device_runtime.hpp).
#include "ember/runtime.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

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

struct Settings {
  std::atomic<bool> relu_fold[kNumDeviceTypes];
  std::atomic<bool> sync_errors{env_is("EMBER_CUDA_SYNC_ERRORS", '1')};
  std::atomic<bool> deterministic{env_is("EMBER_DETERMINISTIC", '1')};
  std::atomic<int> matmul_precision{0};  // an index of kPrecisions
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

void set_deterministic(bool on) { settings().deterministic.store(on, std::memory_order_relaxed); }
bool deterministic() { return settings().deterministic.load(std::memory_order_relaxed); }

void set_float32_matmul_precision(const std::string& precision) {
  for (int i = 0; i < 3; ++i)
    if (precision == kPrecisions[i]) {
      settings().matmul_precision.store(i, std::memory_order_relaxed);
      return;
    }
  throw Error(detail::concat("set_float32_matmul_precision: unknown precision \"", precision,
                             "\" (expected \"highest\", \"high\" or \"medium\")"));
}
std::string get_float32_matmul_precision() {
  return kPrecisions[settings().matmul_precision.load(std::memory_order_relaxed)];
}
namespace detail {
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
