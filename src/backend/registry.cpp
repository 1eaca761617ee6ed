// src/backend/registry.cpp — maps a device type to its kernel table.
#include "backend/backend.hpp"
#include "ember/error.hpp"

namespace ember::backend {

const Backend& backend_for(DeviceType type) {
  if (type == DeviceType::cpu) return cpu_backend();
#if defined(EMBER_WITH_CUDA)
  return cuda_backend();
#else
  detail::throw_error(
      "ember was built without CUDA: rebuild with -DEMBER_CUDA=ON on a machine with the CUDA "
      "toolkit to use cuda devices");
#endif
}

}  // namespace ember::backend
