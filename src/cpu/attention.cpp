// src/cpu/attention.cpp — the fused attention slots on the CPU: there is no fused CPU kernel.
// scaled_dot_product_attention composes its CPU path from other ops (src/ops/attention.cpp)
// and never calls these; they refuse clearly if something else does.
#include "cpu/kernels.hpp"
#include "ember/error.hpp"

namespace ember::cpu {

bool sdpa_forward(const SdpaArgs&) {
  detail::throw_error(
      "scaled_dot_product_attention: the fused kernel needs CUDA (the CPU path is composed from "
      "other ops)");
}

void sdpa_backward(const SdpaArgs&) {
  detail::throw_error(
      "scaled_dot_product_attention: the fused backward needs CUDA (the CPU path is composed "
      "from other ops)");
}

const char* sdpa_status(int) { return "the fused attention kernel needs CUDA"; }

}  // namespace ember::cpu
