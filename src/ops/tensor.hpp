// src/ops/tensor.hpp — ops on whole tensors that ops use internally, declared without the
// backend table.
#pragma once

#include <cstddef>

#include "core/make.hpp"
#include "ember/tensor.hpp"

namespace ember::ops {

using core::copy_from_host;

}  // namespace ember::ops
