// ember/nn/utils.hpp — torch.nn.utils' flat views of a model's parameters: one vector of all
// of them (for second-order methods, evolution strategies, weight averaging by hand) and the
// way back.
//
//   Tensor flat = nn::utils::parameters_to_vector(net->parameters());   // [n], differentiable
//   nn::utils::vector_to_parameters(flat * 0.5, net->parameters());     // writes them back
#pragma once

#include <vector>

#include "ember/tensor.hpp"

namespace ember::nn::utils {

/// The parameters flattened and concatenated in order into one 1-D tensor (a copy), as
/// torch.nn.utils.parameters_to_vector: differentiable with respect to each parameter. Every
/// parameter must be defined and on one device, with one dtype; an empty list is refused.
Tensor parameters_to_vector(const std::vector<Tensor>& parameters);

/// Copies consecutive slices of the 1-D `vec` into the parameters, in order and in place
/// (shapes kept, no autograd record: torch.nn.utils.vector_to_parameters). `vec` must hold
/// exactly as many elements as the parameters together, on their device; it is cast to each
/// parameter's dtype. Bumps each parameter's version.
void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters);

}  // namespace ember::nn::utils
