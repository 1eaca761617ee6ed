// src/autograd/node.hpp — graph nodes and the recording helper every op uses (ARCHITECTURE §4).
//
// A Node is the backward of one op application: it holds edges to the nodes of its
// differentiable inputs (with each input's shape) and a backward function over the
// tensors it saved. Backward functions produce gradients shaped like the op's broadcast
// operands; the engine sums them down to each input's shape (broadcasting is undone in
// exactly one place: Engine, via sum_to).
//
// Defining an op's backward (see src/ops/*.cpp):
//   Tensor out = ...forward...;
//   if (autograd::needs_grad(x))
//     autograd::record(Op::sigmoid, out, {&x}, [y = autograd::SavedTensor(out)](
//         const Tensor& g, autograd::GradList& gi) { Tensor s = y.get(); gi[0] = g * s * (1.0 - s);
//         });
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ember/autograd.hpp"
#include "ember/catalogue.hpp"
#include "ember/tensor.hpp"

namespace ember::autograd {

struct Node;

/// Where a gradient flows: the input's node (AccumulateGrad for leaves) and its shape.
struct Edge {
  std::shared_ptr<Node> node;  // null when that input needs no gradient
  Shape shape;
};

using GradList = std::vector<Tensor>;

struct Node {
  explicit Node(const char* op) : name(op) {}
  virtual ~Node() = default;
  /// Fills grad_inputs[i] (same order as edges; may stay undefined) from the output grad.
  virtual void apply(const Tensor& grad_out, GradList& grad_inputs) = 0;
  /// Drops saved tensors once the graph is freed.
  virtual void release() {}
  virtual bool is_accumulator() const { return false; }
  /// A slice's backward (SliceNode): its one gradient is slice-shaped and the engine writes it
  /// into the input's gradient in place (Note [Slice gradients land in place] in engine.cpp).
  virtual const struct SliceNode* as_slice() const { return nullptr; }

  const char* name;
  std::vector<Edge> edges;
  uint64_t sequence_nr = 0;
  // The module path that ran the op's forward, for the profiler's backward rows (-1: none,
  // or no Profiler recorded when the node was made).
  int32_t profile_module = -1;
  bool released = false;
  // engine scratch (single-threaded backward)
  Tensor pending_grad;
  int pending_deps = 0;
  uint64_t visit_mark = 0;
  // This node's incoming gradient goes back to the caller (autograd::grad's inputs): it must
  // arrive as the true gradient, not one already folded through this node's own backward
  // (Note [ReLU backward in the next GEMM] in src/ops/linalg.cpp).
  bool grad_observed = false;
  // Bit i: edge i's pending gradient may arrive in apply()'s grad_inputs[i] for apply to add
  // its own into (Note [Gradients accumulate where they land] in engine.cpp).
  uint32_t accumulates = 0;
  // This node's backward also reads its incoming gradient in this 16-bit dtype (add_widened's
  // narrow operand): the last node to add into that gradient may write the copy beside it
  // (final_gradient_copy; Note [A lower-precision copy beside a tensor] in src/ops/autocast.cpp).
  std::optional<DType> reads_gradient_as;
};

/// While an accumulating node's apply() runs: the dtype in which the node behind its edge
/// `edge` will also read the gradient apply() returns there, when apply() is the last to add
/// into that gradient, so its kernel may write that copy beside it (and attach it with
/// ops::attach_low_copy); otherwise nothing.
std::optional<DType> final_gradient_copy(size_t edge);

/// Accumulates into a leaf's .grad (Note [Gradients stolen into the Persistent pool]).
struct AccumulateGrad final : Node {
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf)
      : Node("AccumulateGrad"), leaf_(std::move(leaf)) {}
  void apply(const Tensor& grad_out, GradList& grad_inputs) override;
  bool is_accumulator() const override { return true; }
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

/// The backward of x.slice(dim, start, end, step): grad_inputs[0] is the incoming gradient
/// itself, slice-shaped; the engine places it (zeros elsewhere) into the input's gradient.
struct SliceNode final : Node {
  SliceNode(int dim, int64_t start, int64_t end, int64_t step)
      : Node(op_name(Op::slice)), dim(dim), start(start), end(end), step(step) {}
  void apply(const Tensor& grad_out, GradList& grad_inputs) override { grad_inputs[0] = grad_out; }
  const SliceNode* as_slice() const override { return this; }
  int dim;
  int64_t start, end, step;
};

struct SavedSlot;

/// A tensor saved for backward: a graph-free alias plus the version it had when saved.
/// get() throws when the tensor was modified in place since. Saved inside a checkpointed
/// segment's forward it is a slot instead, refilled by recomputation when backward first needs
/// it (Note [Saved tensors of a checkpointed segment] in checkpoint.cpp).
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t);
  Tensor get() const;
  bool defined() const { return tensor_.defined() || slot_ != nullptr; }

 private:
  Tensor tensor_;
  uint64_t version_ = 0;
  std::shared_ptr<SavedSlot> slot_;
};

/// checkpoint.cpp's side of SavedTensor: the slot `t` goes into while this thread runs a
/// checkpointed segment's forward (nullptr elsewhere: `t` is saved as usual), and the tensor a
/// slot holds (its segment recomputed first when backward reaches it).
std::shared_ptr<SavedSlot> checkpoint_slot(const Tensor& t);
Tensor checkpoint_unpack(SavedSlot& slot);

template <typename F>
struct LambdaNode final : Node {
  LambdaNode(const char* op, F&& f) : Node(op), fn_(std::move(f)) {}
  void apply(const Tensor& grad_out, GradList& grad_inputs) override {
    (*fn_)(grad_out, grad_inputs);
  }
  void release() override { fn_.reset(); }

 private:
  std::optional<F> fn_;
};

/// True when grad mode is on and any input requires grad.
inline bool needs_grad(const Tensor& a) { return grad_mode_enabled() && a.requires_grad(); }
template <typename... T>
bool needs_grad(const Tensor& a, const T&... rest) {
  return grad_mode_enabled() && (a.requires_grad() || (rest.requires_grad() || ...));
}
bool needs_grad(const std::vector<Tensor>& inputs);

/// The node gradients of `t` flow into: its grad_fn, or its leaf accumulator (created once).
std::shared_ptr<Node> gradient_edge(const Tensor& t);
uint64_t next_sequence_nr();

/// Wires `node` to `inputs` and makes it `out`'s grad_fn (out becomes a non-leaf needing grad).
void attach(const std::shared_ptr<Node>& node, Tensor& out, std::span<const Tensor* const> inputs);

/// Records backward `fn(grad_out, grad_inputs)` for `out` computed from `inputs`.
/// The node is named after the catalogue entry (grad_fn names are op_name(op)).
template <typename F>
Node& record(Op op, Tensor& out, std::initializer_list<const Tensor*> inputs, F&& fn) {
  auto node = std::make_shared<LambdaNode<std::decay_t<F>>>(op_name(op), std::forward<F>(fn));
  attach(node, out, std::span<const Tensor* const>(inputs.begin(), inputs.size()));
  return *node;
}
template <typename F>
Node& record(Op op, Tensor& out, const std::vector<const Tensor*>& inputs, F&& fn) {
  auto node = std::make_shared<LambdaNode<std::decay_t<F>>>(op_name(op), std::forward<F>(fn));
  attach(node, out, std::span<const Tensor* const>(inputs.data(), inputs.size()));
  return *node;
}

// The gradient `own` added to `slot`: the pending gradient an accumulating node was handed
// (Note [Gradients accumulate where they land]), or nothing yet.
inline void accumulate(Tensor& slot, Tensor own) {
  if (slot.defined())
    slot.add_(own);
  else
    slot = std::move(own);
}

/// Runs backward from `roots` with `grads` (engine entry). When `capture` is non-empty,
/// gradients reaching those tensors are returned instead of accumulated into `.grad`.
std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                                 bool retain_graph, const std::vector<Tensor>& capture);

}  // namespace ember::autograd
