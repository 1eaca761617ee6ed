// src/backend/registry.cpp — maps a device type to its kernel table.
#include "backend/backend.hpp"
#include "backend/device_runtime.hpp"
#include "ember/error.hpp"
#include "ember/profiler.hpp"

namespace ember::backend {

// Every catalogue entry names a kernel that exists: a Backend slot (every table is filled
// from src/backend/slots.def, and a slot a backend does not define fails the link), or
// `composite` / `view` for ops without a kernel of their own. Entries
// of the unary, binary and reduce lists are kernel enum entries of the same name, whose
// formulas src/kernels/ checks at compile time.
namespace {
struct KernelColumn : Backend {
  int composite;  // built from other ops
  int view;       // a new view of the input, no kernel
};
#define EMBER_KERNEL_EXISTS_(name, family, grad, cpu, cuda, kernel) \
  static_assert(sizeof(&KernelColumn::kernel) > 0,                  \
                #name ": its kernel " #kernel " is not a Backend slot");
EMBER_OPS_OTHER(EMBER_KERNEL_EXISTS_)
#undef EMBER_KERNEL_EXISTS_
}  // namespace

const Backend& backend_for(DeviceType type) {
#if defined(EMBER_WITH_CUDA)
  if (detail::profiling()) [[unlikely]]
    return profiled_backend(type);
  if (type == DeviceType::cpu) return cpu_backend();
  return cuda_backend();
#else
  if (type == DeviceType::cpu) return detail::profiling() ? profiled_backend(type) : cpu_backend();
  (void)runtime_for(type);  // throws "ember was built without CUDA" (the runtime's one message)
  return cpu_backend();     // not reached
#endif
}

}  // namespace ember::backend
