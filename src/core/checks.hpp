// src/core/checks.hpp — argument checks that every layer above core shares (ops, autograd, nn):
// kept here so that autograd needs nothing from ops for them.
#pragma once

#include "ember/tensor.hpp"

namespace ember::core {

/// ember::Error unless `t` is defined: "op: what is an undefined tensor (expected a tensor)".
void check_defined(const char* op, const Tensor& t, const char* what = "input");

}  // namespace ember::core
