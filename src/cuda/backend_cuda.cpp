// src/cuda/backend_cuda.cpp — the CUDA kernel table (every slot of src/backend/slots.def, each
// slot that queues device work wrapped to count its launch: Note [What kernel_launches counts]
// in launch_count.cpp) and device runtime (every slot of src/backend/runtime_slots.def; the
// allocator counts the host transfers itself).
#include <tuple>
#include <type_traits>
#include <utility>

#include "backend/slot_index.hpp"
#include "cuda/kernels.cuh"
#include "cuda/launch_count.hpp"

namespace ember::cuda {
namespace {

// The device an argument names: a View's, an argument struct's (GemmArgs, SdpaArgs, ...), its
// geometry's (ConvForwardArgs) or its first View's (ChannelAffine's out, BatchNormPrepare's
// mean); -1 when it names none (a Window2d, an enum, a pointer).
template <typename T>
constexpr bool kNamesDevice = requires(const T& a) {
  a.device;
}
|| requires(const T& a) { a.geo.device; }
|| requires(const T& a) { a.out.device; }
|| requires(const T& a) { a.mean.device; };

template <typename T>
int device_of(const T& a) {
  if constexpr (requires { a.device; })
    return a.device;
  else if constexpr (requires { a.geo.device; })
    return a.geo.device;
  else if constexpr (requires { a.out.device; })
    return a.out.device;
  else if constexpr (requires { a.mean.device; })
    return a.mean.device;
  else
    return -1;
}

// The device of a slot's call: its leading `int device`, else the first argument naming one.
template <typename First, typename... Rest>
int call_device(const First& first, const Rest&... rest) {
  if constexpr (std::is_same_v<First, int>) {
    return first;
  } else {
    int d = device_of(first);
    ((d = d >= 0 ? d : device_of(rest)), ...);
    return d;
  }
}

void count_launch(int device) {
  if (!graph_recording(device)) count_kernel_launches(device, 1);
}

template <int Slot, auto Fn>
struct Counted;
template <int Slot, typename R, typename... A, R (*Fn)(A...)>
struct Counted<Slot, Fn> {
  static R call(A... args) {
    if constexpr (backend::is_service(Slot)) {
      return Fn(std::forward<A>(args)...);
    } else {
      static_assert((std::is_same_v<std::tuple_element_t<0, std::tuple<A...>>, int>) ||
                        (kNamesDevice<std::remove_cvref_t<A>> || ...),
                    "a slot that queues device work must name its device (an int device first, "
                    "a View, or an argument struct with a device)");
      const int device = call_device(args...);
      if constexpr (std::is_void_v<R>) {
        Fn(std::forward<A>(args)...);
        count_launch(device);
      } else {
        R result = Fn(std::forward<A>(args)...);
        count_launch(device);
        return result;
      }
    }
  }
};

}  // namespace
}  // namespace ember::cuda

#define EMBER_BACKEND cuda
#define EMBER_TABLE_ENTRY(slot) \
  &::ember::cuda::Counted<::ember::backend::kSlot_##slot, &::ember::cuda::slot>::call
#include "backend/table.inc"
