// src/core/device.cpp — device names, parsing and the process default device.
#include "ember/device.hpp"

#include <atomic>
#include <string>

#include "backend/device_runtime.hpp"
#include "ember/error.hpp"
#include "ember/runtime.hpp"

namespace ember {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda" || text == "gpu") return cuda(0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string digits = text.substr(5);
    EMBER_CHECK(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos,
                "Device::parse: bad device index in '", text, "' (expected cpu, cuda or cuda:N)");
    return cuda(std::stoi(digits));
  }
  detail::throw_error(
      detail::concat("Device::parse: unknown device '", text, "' (expected cpu, cuda or cuda:N)"));
}

namespace {
std::atomic<uint16_t> g_default_device{0};  // type << 8 | index
}

Device default_device() {
  const uint16_t v = g_default_device.load(std::memory_order_relaxed);
  return {static_cast<DeviceType>(v >> 8), static_cast<int>(v & 0xff)};
}

Device set_default_device(Device d) {
  if (d.is_cuda()) {
    backend::runtime_for(d);  // throws "built without CUDA" in a CPU-only build
    EMBER_CHECK(d.index >= 0 && d.index < cuda_device_count(), "set_default_device: ", d.str(),
                " does not exist (", cuda_device_count(), " CUDA devices)");
  }
  const uint16_t previous = g_default_device.exchange(
      static_cast<uint16_t>((static_cast<int>(d.type) << 8) | d.index), std::memory_order_relaxed);
  return {static_cast<DeviceType>(previous >> 8), static_cast<int>(previous & 0xff)};
}

}  // namespace ember
