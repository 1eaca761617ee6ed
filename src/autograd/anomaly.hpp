// src/autograd/anomaly.hpp — the engine's side of AnomalyGuard (ember/anomaly.hpp): the checks
// attach() runs on a recorded op's output and run_backward() on a node's gradients, each
// called only when detail::anomaly_checking() (Note [Anomaly checks at no cost when off] in
// anomaly.cpp).
#pragma once

#include <span>

#include "autograd/node.hpp"

namespace ember::autograd {

/// Throws when `out` (just made by `node`'s op from `inputs`) holds a NaN or an Inf.
void check_forward_anomaly(const Node& node, const Tensor& out,
                           std::span<const Tensor* const> inputs);
/// Throws when a gradient `node`'s backward produced from `grad` holds a NaN or an Inf.
void check_backward_anomaly(const Node& node, const Tensor& grad, const GradList& grad_inputs);

}  // namespace ember::autograd
