// src/autograd/engine.cpp — grad mode, saved tensors, graph wiring and the backward engine.
//
// Note [Backward order]: the engine counts, for every node reachable from the roots, how
// many consumers will send it a gradient, and runs a node once all of them have. Each
// node's incoming gradients are summed in `pending_grad`. Gradients are reduced to each
// input's shape here (sum_to) and nowhere else.
#include <array>
#include <atomic>
#include <optional>
#include <unordered_map>

#include "autograd/anomaly.hpp"
#include "autograd/hooks.hpp"
#include "autograd/node.hpp"
#include "core/capture.hpp"
#include "core/make.hpp"
#include "core/profiler.hpp"
#include "ember/anomaly.hpp"
#include "ember/autocast.hpp"
#include "ember/ops.hpp"

namespace ember {

namespace {
thread_local bool t_grad_mode = true;
std::atomic<uint64_t> g_sequence{0};
std::atomic<uint64_t> g_visit_epoch{0};
}  // namespace

bool grad_mode_enabled() { return t_grad_mode; }
void set_grad_mode(bool enabled) { t_grad_mode = enabled; }
NoGradGuard::NoGradGuard() : previous_(t_grad_mode) { t_grad_mode = false; }
NoGradGuard::~NoGradGuard() { t_grad_mode = previous_; }

namespace autograd {

uint64_t next_sequence_nr() { return g_sequence.fetch_add(1, std::memory_order_relaxed); }

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

SavedTensor::SavedTensor(const Tensor& t) {
  if (!t.defined()) return;
  if ((slot_ = checkpoint_slot(t))) return;  // inside a checkpointed segment's forward
  tensor_ = t.detach();
  version_ = t.version();
}

Tensor SavedTensor::get() const {
  if (slot_) return checkpoint_unpack(*slot_);
  EMBER_CHECK(!tensor_.defined() || tensor_.version() == version_,
              "a tensor needed for the gradient was modified in place after it was saved "
              "(version ",
              tensor_.version(), ", expected ", version_,
              "); clone it before the in-place change, or make the change out of place");
  return tensor_;
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  TensorImpl* impl = detail::TensorAccess::impl(t);
  if (impl->grad_fn) return impl->grad_fn;
  std::shared_ptr<Node> acc = impl->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(detail::TensorAccess::impl_ptr(t));
    impl->grad_accumulator = acc;
  }
  return acc;
}

void attach(const std::shared_ptr<Node>& node, Tensor& out, std::span<const Tensor* const> inputs) {
  node->sequence_nr = next_sequence_nr();
  if (detail::profiling()) [[unlikely]]
    node->profile_module = core::profiler::current_module();
  node->edges.reserve(inputs.size());
  for (const Tensor* in : inputs) {
    if (in->defined() && in->requires_grad())
      node->edges.push_back({gradient_edge(*in), in->shape()});
    else
      node->edges.push_back({nullptr, in->defined() ? in->shape() : Shape()});
  }
  detail::TensorAccess::impl(out)->requires_grad = true;
  detail::TensorAccess::impl(out)->grad_fn = node;
  if (detail::anomaly_checking()) [[unlikely]]  // Note [Anomaly checks at no cost when off]
    check_forward_anomaly(*node, out, inputs);
}

// Note [Gradients stolen into the Persistent pool]
// A leaf's first gradient is kept, not copied, whenever nothing else holds it (PyTorch's
// AccumulateGrad steals likewise): the buffer the backward kernel wrote becomes `.grad`.
// For a Persistent leaf (a parameter) that buffer came from the Pass pool; Storage::recharge
// counts it as Persistent from then on while the block stays in the Pass pool's cache, so
// when zero_grad() drops the gradient the block goes back to where the next step's backward
// finds it again. Steady-state training thus allocates nothing new and copies no gradient.
// Later gradients of the same step accumulate in place into that buffer.
// The accumulation itself; apply() then runs the leaf's post-accumulate-grad hooks.
static void accumulate_into(const std::shared_ptr<TensorImpl>& leaf, const Tensor& grad_out) {
  // A captured step's replays restore the gradient handle this leaf ends the capture with.
  if (detail::CaptureRecorder* capture = detail::active_capture()) capture->note_grad(leaf);
  Tensor g = grad_out;
  if (g.dtype() != leaf->dtype) g = g.to(leaf->dtype);
  const Pool pool = leaf->storage->pool();
  if (!leaf->grad) {
    // The gradient is laid out as its parameter (a channels_last weight gets a channels_last
    // gradient, as in torch): the optimizers walk both buffers in one flat order.
    const MemoryFormat format = detail::TensorAccess::wrap(leaf).suggest_memory_format();
    const bool laid_out = format == MemoryFormat::contiguous
                              ? g.is_contiguous()
                              : g.strides() == core::format_strides(leaf->shape, format);
    const bool stealable = detail::TensorAccess::impl_ptr(g).use_count() <= 2 &&
                           g.storage().use_count() == 1 && laid_out &&
                           g.device() == leaf->storage->device();
    if (stealable) {
      detail::StorageAccess::recharge(*g.storage(), pool);
      leaf->grad = detail::TensorAccess::impl_ptr(g);
    } else {
      PoolGuard guard(pool);
      Tensor owned = core::make_tensor(leaf->shape, leaf->dtype, leaf->storage->device(), format);
      owned.copy_(g);
      leaf->grad = detail::TensorAccess::impl_ptr(owned);
    }
    return;
  }
  Tensor current = detail::TensorAccess::wrap(leaf->grad);
  if (pool == Pool::Persistent) {
    current.add_(g);  // same buffer across the step (ARCHITECTURE §3 rule 3)
  } else {
    leaf->grad = detail::TensorAccess::impl_ptr(add(current, g));
  }
}

void AccumulateGrad::apply(const Tensor& grad_out, GradList&) {
  accumulate_into(leaf_, grad_out);
  run_post_accumulate_grad_hooks(leaf_);  // ember/hooks.hpp
}

// Note [Slice gradients land in place]
// The gradient of x.slice(...) is zeros shaped like x with the slice's gradient in place. Built
// as such and summed (q, k, v = split(qkv): three full zero tensors, three copies, two full
// adds per attention layer; 9.5 ms of GPT-2's 68 ms step on the H200), it is the costliest
// view's backward. So SliceNode hands the engine the slice-shaped gradient, and the engine
// writes it into the input's pending gradient: the first to arrive makes zeros and copies
// into its slice; later ones add into their slices in place when the pending gradient is
// this pass's own buffer (no other handle, no shared storage: nothing else can see the
// write), else the plain sum. The values are the plain sum's: adding zeros is exact.
// Whether the engine's pending gradient `p` may be written in place: its handle is the
// tensor's only one (impl_ptr is a reference, so 1; add hands one tensor to both its inputs,
// and another node may still have to read this very buffer), no view shares its storage, and
// it is contiguous and of `shape`.
// Only this handle sees p's values, laid out densely (row-major or channels-last: the node
// checks the layout it writes), with the edge's shape.
static bool sole_owner(const Tensor& p, const Shape& shape) {
  return detail::TensorAccess::impl_ptr(p).use_count() == 1 && p.storage().use_count() == 1 &&
         (p.is_contiguous() || p.is_contiguous(MemoryFormat::channels_last) ||
          p.is_contiguous(MemoryFormat::channels_last_3d)) &&
         p.shape() == shape;
}

static void accumulate_slice(const SliceNode& s, Tensor& pending, const Tensor& g,
                             const Shape& shape) {
  const auto place = [&](const Tensor& base) { return base.slice(s.dim, s.start, s.end, s.step); };
  if (!pending.defined()) {
    pending = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
    place(pending).copy_(g);
    return;
  }
  if (sole_owner(pending, shape) && pending.dtype() == g.dtype() &&
      pending.device() == g.device()) {
    place(pending).add_(g);
    return;
  }
  Tensor z = zeros(shape, {.dtype = g.dtype(), .device = g.device()});
  place(z).copy_(g);
  pending = add(pending, z);
}

// Note [Gradients accumulate where they land]
// A tensor used twice gets the sum of two gradients: the engine keeps the first as the
// pending gradient and adds the second into a new buffer (the residual stream of a
// transformer: every x in x + f(layer_norm(x)) pays a full read-read-write pass). A node
// whose kernel can add into its output instead (LayerNorm's backward, a GEMM with beta 1)
// sets bit i of Node::accumulates; before apply(), the engine then hands it edge i's pending
// gradient in grad_inputs[i] when nothing else can see that buffer (its only handle is the
// pending one, no view shares its storage, dense row-major or channels-last, of the edge's
// shape), and apply() returns in grad_inputs[i] that gradient plus its own
// (autograd::accumulate when its kernel cannot, or the buffer is not in the layout its kernel
// writes). Values are the plain sum's up to the order of the two addends (and, where a kernel
// adds in its own accumulator, one rounding fewer).
static void hand_over_pending(Node& n, GradList& gi) {
  for (size_t i = 0; i < n.edges.size() && i < 32; ++i) {
    if (!(n.accumulates & (1u << i)) || !n.edges[i].node) continue;
    Node* m = n.edges[i].node.get();
    bool seen = false;  // an input used twice by this node gets its pending gradient once
    for (size_t j = 0; j < i; ++j) seen = seen || (gi[j].defined() && n.edges[j].node.get() == m);
    Tensor& p = m->pending_grad;
    if (seen || !p.defined()) continue;
    if (sole_owner(p, n.edges[i].shape)) gi[i] = std::move(p);  // leaves it empty
  }
}

// The accumulating node whose apply() is running and, per edge (up to 32), the dtype of the copy
// the node behind it wants of the gradient apply() finalises there (final_gradient_copy).
thread_local const Node* t_applying = nullptr;
thread_local uint32_t t_copy_edges = 0;
thread_local std::array<DType, 32> t_copy_dtypes{};

std::optional<DType> final_gradient_copy(size_t edge) {
  if (!t_applying || edge >= 32 || !(t_copy_edges & (1u << edge))) return std::nullopt;
  return t_copy_dtypes[edge];
}

// t_applying for one apply() (restored after, also when it throws or runs a nested backward).
class ApplyingScope {
 public:
  explicit ApplyingScope(const Node* n)
      : previous_(t_applying), previous_edges_(t_copy_edges), previous_dtypes_(t_copy_dtypes) {
    t_applying = n;
    t_copy_edges = 0;
  }
  ~ApplyingScope() {
    t_applying = previous_;
    t_copy_edges = previous_edges_;
    t_copy_dtypes = previous_dtypes_;
  }
  ApplyingScope(const ApplyingScope&) = delete;
  ApplyingScope& operator=(const ApplyingScope&) = delete;

 private:
  const Node* previous_;
  uint32_t previous_edges_;
  std::array<DType, 32> previous_dtypes_;
};

// Note [A lower-precision copy beside a tensor] (src/ops/autocast.cpp), in the backward: an
// accumulating node is the last to add into edge i's gradient when the node behind the edge
// waits on nothing else (pending_deps 1); if that node reads the gradient in a 16-bit dtype
// too, apply() may write that copy as it writes the sum. A pending gradient handed over to be
// added into loses any copy it had (the add happens in place).
static void mark_final_copies(const Node& n, const GradList& gi) {
  t_copy_edges = 0;
  for (size_t i = 0; i < n.edges.size() && i < 32; ++i) {
    if (gi[i].defined()) detail::TensorAccess::impl(gi[i])->low_copy.reset();
    if (!(n.accumulates & (1u << i)) || !n.edges[i].node) continue;
    const Node& m = *n.edges[i].node;
    if (!m.reads_gradient_as || m.pending_deps != 1) continue;
    bool twice = false;  // an input used twice by this node: not final after the first
    for (size_t j = 0; j < n.edges.size(); ++j)
      twice = twice || (j != i && n.edges[j].node.get() == &m);
    if (twice) continue;
    t_copy_edges |= 1u << i;
    t_copy_dtypes[i] = *m.reads_gradient_as;
  }
}

std::vector<Tensor> run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                                 bool retain_graph, const std::vector<Tensor>& capture) {
  NoGradGuard no_grad;
  AutocastGuard no_autocast(DType::bf16, false);  // Note [Autocast]: backward ops keep their dtypes
  const core::profiler::PhaseScope backward_phase(ProfilePhase::backward);
  const detail::ProfileScope backward_range(ProfileKind::range, "backward");
  const uint64_t epoch = g_visit_epoch.fetch_add(1, std::memory_order_relaxed) + 1;

  // Capture targets (autograd::grad): the node each input's gradient arrives at.
  // The nodes are held here: a leaf's accumulator is otherwise owned only by the graph's
  // edges, and an output that is the input itself (an identity op) has no edge to it.
  std::unordered_map<Node*, size_t> capture_index;
  std::vector<std::shared_ptr<Node>> capture_nodes;
  std::vector<Tensor> captured(capture.size());
  for (size_t i = 0; i < capture.size(); ++i) {
    EMBER_CHECK(capture[i].defined() && capture[i].requires_grad(), "grad: input ", i,
                " does not require grad (set requires_grad_() before the forward)");
    capture_nodes.push_back(gradient_edge(capture[i]));
    capture_nodes.back()->grad_observed = true;
    capture_index[capture_nodes.back().get()] = i;
  }
  struct Unobserve {
    std::vector<std::shared_ptr<Node>>& nodes;
    ~Unobserve() {
      for (auto& n : nodes) n->grad_observed = false;
    }
  } unobserve{capture_nodes};

  // Pass 1: discover the graph and count consumers per node. `visited` owns every node
  // until backward ends: freeing the graph (edges cleared) must not destroy queued nodes.
  std::vector<std::shared_ptr<Node>> visited;
  std::vector<Node*> stack;
  std::vector<std::shared_ptr<Node>> root_nodes;
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    EMBER_CHECK(root.defined(), "backward: the tensor is undefined");
    EMBER_CHECK(root.requires_grad(),
                "backward: the tensor does not require grad and has no grad_fn (got a tensor ",
                "computed from inputs none of which require grad; expected at least one input made "
                "with requires_grad_() or parameter())");
    std::shared_ptr<Node> node = gradient_edge(root);
    root_nodes.push_back(node);
    if (node->visit_mark != epoch) {
      node->visit_mark = epoch;
      node->pending_deps = 0;
      visited.push_back(node);
      stack.push_back(node.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    EMBER_CHECK(!n->released,
                "backward: trying to backward through the graph a second time, but the saved "
                "tensors of '",
                n->name,
                "' were freed after the first backward (expected retain_graph=true in the first "
                "backward call if you need to backward twice)");
    for (Edge& e : n->edges) {
      if (!e.node) continue;
      Node* m = e.node.get();
      if (m->visit_mark != epoch) {
        m->visit_mark = epoch;
        m->pending_deps = 0;
        visited.push_back(e.node);
        stack.push_back(m);
      }
      ++m->pending_deps;
    }
  }

  struct Cleanup {
    std::vector<std::shared_ptr<Node>>& nodes;
    ~Cleanup() {
      for (auto& n : nodes) n->pending_grad = Tensor();
    }
  } cleanup{visited};

  // Seed the roots.
  for (size_t r = 0; r < roots.size(); ++r) {
    const Tensor& root = roots[r];
    Tensor g = r < grads.size() ? grads[r] : Tensor();
    if (!g.defined()) {
      EMBER_CHECK(root.numel() == 1,
                  "backward: grad can be created implicitly only for a scalar "
                  "output (got shape ",
                  root.shape().to_string(),
                  "; expected a gradient tensor of that shape: t.backward(grad))");
      g = ones(root.shape(), {.dtype = root.dtype(), .device = root.device()});
    } else {
      EMBER_CHECK(g.shape() == root.shape(), "backward: gradient shape ", g.shape().to_string(),
                  " does not match the output shape ", root.shape().to_string());
    }
    Node* n = root_nodes[r].get();
    n->pending_grad = n->pending_grad.defined() ? add(n->pending_grad, g) : g;
  }
  std::vector<Node*> ready;
  for (auto& n : root_nodes)
    if (n->pending_deps == 0 && n->visit_mark == epoch) {
      n->visit_mark = epoch + (1ull << 62);  // queued once
      ready.push_back(n.get());
    }

  GradList grad_inputs;
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    Tensor grad = std::move(n->pending_grad);
    n->pending_grad = Tensor();
    if (!capture.empty()) {
      auto it = capture_index.find(n);
      if (it != capture_index.end()) captured[it->second] = grad;
      if (n->is_accumulator()) continue;
    }
    grad_inputs.assign(n->edges.size(), Tensor());
    if (grad.defined()) {
      try {
        const core::profiler::BackwardScope profile(n->name, n->profile_module);
        std::optional<ApplyingScope> applying;
        if (n->accumulates) [[unlikely]] {
          applying.emplace(n);
          hand_over_pending(*n, grad_inputs);
          mark_final_copies(*n, grad_inputs);
        }
        n->apply(grad, grad_inputs);
      } catch (const Error& e) {
        throw Error(detail::concat("backward of ", n->name, ": ", e.what()));
      }
      if (detail::anomaly_checking()) [[unlikely]]  // Note [Anomaly checks at no cost when off]
        check_backward_anomaly(*n, grad, grad_inputs);
    }
    if (!retain_graph && !n->is_accumulator()) {
      n->release();
      n->released = true;
    }
    for (size_t i = 0; i < n->edges.size(); ++i) {
      Edge& e = n->edges[i];
      if (!e.node) continue;
      Node* m = e.node.get();
      Tensor& g = grad_inputs[i];
      if (g.defined()) {
        if (const SliceNode* sl = n->as_slice()) [[unlikely]] {
          if (m->pending_grad.defined())  // written in place: a copy beside it would go stale
            detail::TensorAccess::impl(m->pending_grad)->low_copy.reset();
          accumulate_slice(*sl, m->pending_grad, g, e.shape);
        } else {
          if (g.shape() != e.shape) g = sum_to(g, e.shape);
          m->pending_grad = m->pending_grad.defined() ? add(m->pending_grad, g) : std::move(g);
        }
      }
      if (--m->pending_deps == 0) ready.push_back(m);
    }
    if (!retain_graph && !n->is_accumulator()) n->edges.clear();
  }
  return captured;
}

}  // namespace autograd

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph) {
  EMBER_CHECK(!inputs.empty(), "grad: no inputs given (expected at least one tensor)");
  return autograd::run_backward(outputs, grad_outputs, retain_graph, inputs);
}

}  // namespace ember
