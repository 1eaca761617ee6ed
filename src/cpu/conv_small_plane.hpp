// src/cpu/conv_small_plane.hpp — convolutions onto planes of a few output positions as GEMMs
// (Note [Convolutions onto small planes] in conv_small_plane.cpp): the CPU library slots
// (conv_onednn.cpp) take these routes before oneDNN's primitives.
#pragma once

#include "backend/conv_library.hpp"

namespace ember::cpu {

/// f32 2-D convolutions with one group onto at most 4 output positions an image: every pass
/// is GEMMs over the windows' valid taps (Notes [Convolutions onto small planes] and [Weight
/// gradients of small output planes]), in either layout.
bool small_plane(const backend::ConvGeometry& g);

/// The forward of a small_plane geometry.
void small_plane_forward(const backend::ConvForwardArgs& a);

/// The input's gradient of a small_plane geometry.
void small_plane_backward_data(const backend::ConvBackwardArgs& a);

/// The weight's (and bias's) gradient of a small_plane geometry.
void small_plane_weight_grad(const backend::ConvBackwardArgs& a);

}  // namespace ember::cpu
