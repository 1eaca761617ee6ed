// src/backend/profiled.cpp — the kernel tables the profiler sees (Note [Profiling at no cost
// when off] in src/core/profiler.hpp). While a Profiler records, backend_for() hands out
// these tables instead of the backends' own: each slot is a wrapper, generated from
// slots.def, that records the call as a kernel range of the op that made it, with a device
// timing mark (the device runtime's) on each side, and then calls the backend's own slot. The
// kernel table's queries (sdpa_status, conv_library_status) pass straight through; the device
// services are the runtime's and are not recorded.
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

// One kernel-table call as a kernel range with its two device timing marks.
class KernelRange {
 public:
  KernelRange(DeviceType type, int slot) noexcept : runtime_(runtime_for(type)) {
    const int op_device = core::profiler::current_device();
    device_ = type == DeviceType::cpu ? 0 : (op_device >= 0 ? op_device : 0);
    index_ = core::profiler::open_kernel(kSlotNames[slot], type, device_);
    if (index_ >= 0 && core::profiler::recorder().device_time) begin_ = mark();
  }
  ~KernelRange() {
    if (index_ < 0) return;
    if (begin_ >= 0) core::profiler::set_marks(index_, begin_, mark());
    core::profiler::close(index_);
  }
  KernelRange(const KernelRange&) = delete;
  KernelRange& operator=(const KernelRange&) = delete;

 private:
  int64_t mark() noexcept {
    try {
      return runtime_.timing_mark(device_);
    } catch (...) {
      return -1;  // a device that cannot take a mark: the kernel keeps its host time only
    }
  }
  const DeviceRuntime& runtime_;
  int device_ = 0;
  int64_t index_ = -1;
  int64_t begin_ = -1;
};

template <DeviceType Type, int Slot, auto Member, typename Fn>
struct Wrapped;
template <DeviceType Type, int Slot, auto Member, typename R, typename... A>
struct Wrapped<Type, Slot, Member, R (*)(A...)> {
  static R call(A... args) {
    const Backend& own = own_table(Type);
    if constexpr (is_service(Slot)) {
      return (own.*Member)(std::forward<A>(args)...);
    } else {
      const KernelRange range(Type, Slot);
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
