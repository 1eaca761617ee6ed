// src/backend/profiled.cpp — the kernel tables the profiler sees (Note [Profiling at no cost
// when off] in src/core/profiler.hpp). While a Profiler records, backend_for() hands out
// these tables instead of the backends' own: each slot is a wrapper, generated from
// slots.def, that records the call as a kernel range of the op that made it, with a device
// timing mark (the device runtime's) on each side, and then calls the backend's own slot. The
// kernel table's queries (sdpa_status, conv_library_status, kv_cache_rotary_fits) pass
// straight through; the device services are the runtime's and are not recorded.
#include "backend/backend.hpp"
#include "backend/device_runtime.hpp"
#include "backend/slot_index.hpp"
#include "core/profiler.hpp"

namespace ember::backend {
namespace {

const Backend& own_table(DeviceType type) {
  if (type == DeviceType::cpu) return cpu_backend();
#if defined(EMBER_WITH_CUDA)
  return cuda_backend();
#else
  return cpu_backend();  // unreachable: backend_for refuses cuda first
#endif
}

template <DeviceType Type, int Slot, auto Member, typename Fn>
struct Wrapped;
template <DeviceType Type, int Slot, auto Member, typename R, typename... A>
struct Wrapped<Type, Slot, Member, R (*)(A...)> {
  static R call(A... args) {
    const Backend& own = own_table(Type);
    if constexpr (is_service(Slot)) {
      return (own.*Member)(std::forward<A>(args)...);
    } else {
      const core::profiler::KernelRange range(kSlotNames[Slot], Type, runtime_for(Type));
      return (own.*Member)(std::forward<A>(args)...);
    }
  }
};

template <DeviceType Type>
const Backend& profiled_table() {
  static const Backend table = {
      own_table(Type).name,
#define EMBER_SLOT(ret, slot, params) \
  &Wrapped<Type, kSlot_##slot, &Backend::slot, decltype(Backend::slot)>::call,
#include "backend/slots.def"
#undef EMBER_SLOT
  };
  return table;
}

}  // namespace

const Backend& profiled_backend(DeviceType type) {
  if (type == DeviceType::cpu) return profiled_table<DeviceType::cpu>();
  return profiled_table<DeviceType::cuda>();
}

}  // namespace ember::backend
