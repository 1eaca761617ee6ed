// ember/optim/clip.hpp — gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_).
//
//   loss.backward();
//   double norm = optim::clip_grad_norm(net->parameters(), /*max_norm=*/1.0);
//   opt.step();
#pragma once

#include <limits>
#include <vector>

#include "ember/tensor.hpp"

namespace ember::optim {

/// Scales the gradients of `params` in place so that their global norm (the norm of all
/// gradients together) is at most `max_norm`, and returns the norm before clipping.
/// norm_type: p > 0, or infinity for the largest |g|. As PyTorch: the scale is
/// max_norm / (norm + 1e-6), applied only when below 1; parameters without a gradient are
/// skipped (none: returns 0). error_if_nonfinite: a NaN or infinite norm throws
/// ember::Error instead of scaling the gradients by it.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                      bool error_if_nonfinite = false);

/// clip_grad_norm without reading the norm: returns it as a 0-d tensor (the gradients'
/// dtype, on their device; an undefined tensor when no parameter has a gradient). On a GPU
/// the norm and the scaling run as two kernels over all gradients and the host never waits;
/// only reading the result (`item()`) synchronises. Example:
///   Tensor norm = optim::clip_grad_norm_tensor(net->parameters(), 1.0);
Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm,
                             double norm_type = 2.0);

/// Clamps every gradient of `params` to [-clip_value, clip_value] in place.
void clip_grad_value(const std::vector<Tensor>& params, double clip_value);

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

}  // namespace ember::optim
