// ember/device.hpp — where a tensor lives: the CPU or one CUDA device.
#pragma once

#include <cstdint>
#include <string>

namespace ember {

enum class DeviceType : uint8_t { cpu, cuda };
inline constexpr int kNumDeviceTypes = 2;

/// A device handle. Example: Device d = Device::cuda(0); if (d.is_cuda()) ...
struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  constexpr bool operator==(const Device&) const = default;
  /// "cpu" or "cuda:0".
  std::string str() const;
  /// Parses "cpu", "cuda", "cuda:1".
  static Device parse(const std::string& text);
};

/// True when ember was built with CUDA and at least one device is present.
bool cuda_available();
/// Number of CUDA devices; 0 in a CPU-only build.
int cuda_device_count();
/// The device new tensors are created on when none is given (initially the CPU).
Device default_device();
/// Sets default_device() and returns the previous one. Example:
///   Device old = set_default_device(Device::cuda(0));  ...  set_default_device(old);
Device set_default_device(Device d);
/// Waits until every kernel and copy queued on `device` has finished (torch.cuda.synchronize),
/// then reports an error a kernel recorded. Nothing to wait for on the CPU.
void synchronize(Device device);

}  // namespace ember
