// ember/checkpoint.hpp — activation checkpointing (PyTorch's torch.utils.checkpoint with its
// default non-reentrant semantics; ggmlR's ag_checkpoint): a segment's activations are not kept
// for backward but recomputed from its inputs when backward reaches them (docs/autograd.md,
// "Activation checkpointing").
//
//   for (const nn::Sequential& block : blocks)
//     h = checkpoint(block, h);              // keeps h, not the activations inside the block
//   Tensor loss = cross_entropy(head(h), y);
//   loss.backward();                         // each block runs forward again, then backward
//
// The forward runs the segment as usual (recording on, so every op picks the kernel it picks
// in a plain run) but every tensor an op saves for backward is dropped when the segment
// returns; only the inputs, the generator's state and the autocast state are kept. When
// backward first needs one of them, the segment runs again from its inputs with that generator
// state (dropout draws the same masks) and autocast state, refilling them, and backward goes on
// through the segment's own graph. Gradients (of the inputs, of the parameters the segment
// uses, of any tensor it captures) are therefore bitwise those of the plain run, and the
// generator after the step is where the plain step leaves it.
#pragma once

#include <functional>
#include <vector>

#include "ember/tensor.hpp"

namespace ember {

struct CheckpointOptions {
  /// The recomputation replays the generator's state of the forward, so random ops (dropout)
  /// draw what they drew then; the caller's state is restored after it (PyTorch's
  /// preserve_rng_state). false: the recomputation draws from the generator as it stands
  /// (new masks) and advances it.
  bool preserve_rng_state = true;
};

/// A segment of one or more inputs and one output.
using CheckpointFn = std::function<Tensor(const std::vector<Tensor>& inputs)>;
/// A segment with several outputs.
using CheckpointMultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

/// fn(inputs), recomputed in backward instead of keeping its activations. `fn` is kept until
/// backward and called again there: what it captures by reference must still exist, and it
/// must run the same ops each time (no branching on host state that changes). Inputs must be
/// defined; they may or may not require grad. Throws ember::Error naming "checkpoint" for an
/// empty fn, no inputs, an undefined input or output.
/// Example: Tensor y = checkpoint([&](const std::vector<Tensor>& in) { return mlp(in[0]); }, {x});
Tensor checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                  CheckpointOptions options = {});
/// The same for a segment with several outputs (each may be used or not).
std::vector<Tensor> checkpoint(const CheckpointMultiFn& fn, const std::vector<Tensor>& inputs,
                               CheckpointOptions options = {});
/// A module (any nn handle) or any callable on one tensor: checkpoint(block, x) is block(x)
/// with block's activations recomputed in backward. The module handle is kept (shared).
/// Example: h = checkpoint(block, h);
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  CheckpointOptions options = {});

}  // namespace ember
