// src/autograd/hooks.hpp — the engine's side of include/ember/hooks.hpp.
#pragma once

#include <memory>

#include "ember/tensor.hpp"

namespace ember::autograd {

/// Runs the post-accumulate-grad hooks registered on `leaf` (cheap when there are none).
void run_post_accumulate_grad_hooks(const std::shared_ptr<TensorImpl>& leaf);

}  // namespace ember::autograd
