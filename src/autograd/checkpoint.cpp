// src/autograd/checkpoint.cpp — activation checkpointing (ember/checkpoint.hpp): a segment's
// frame, the slots its saved tensors become, and the recomputation that refills them.
//
// Note [Saved tensors of a checkpointed segment]
// checkpoint(fn, inputs) runs fn once, as a plain run would: recording on, on the inputs
// themselves, so the ops record the very graph (same nodes, same edges into the outer graph,
// same kernels: some ops take another kernel when no gradient is needed, linear with gelu_tanh
// fused into the GEMM, which may round differently) and backward walks it
// in the same order. What differs is what the graph holds: while fn runs, this thread's top
// Level makes every SavedTensor an op creates a *slot* of the segment's frame (SavedTensor's
// constructor asks checkpoint_slot), and when fn returns every slot lets go of its tensor. The
// frame (SegmentFrame) keeps fn, its inputs, the generator's state and the autocast state; the
// slots keep the frame. When backward first reads an empty slot (SavedTensor::get →
// checkpoint_unpack), the frame recomputes: fn runs again on detached aliases of the inputs
// (requires_grad as the originals) with recording on, the generator replayed and autocast as in
// the forward, while the top Level collects, in order, every tensor its ops save; the k-th
// refills slot k (the recomputation's own graph is then dropped). Because backward runs through
// the original graph with bitwise the original saved values, every gradient — inputs,
// parameters, tensors fn captured — is the plain run's, autograd::grad and hooks work unchanged,
// and the engine needs no re-entrant backward. This is PyTorch's non-reentrant checkpoint
// (saved-tensor hooks).
// Consequences:
//   - the k-th saved tensor must be the same one in both runs: fn must run the same ops on
//     tensors of the same shapes each call; a different count, shape, dtype or device is an
//     error naming "checkpoint";
//   - a checkpoint inside a segment saves its own inputs as SavedTensors of the enclosing
//     segment (they are made before its Level is pushed), so nesting frees them too: the inner
//     segment's recomputation reads them through the outer's slots, recomputing it first if
//     need be; the inner checkpoint runs again inside the outer recomputation, with a frame of
//     its own whose slots die with that recomputation's graph;
//   - what an op keeps outside SavedTensor (the ReLU bit mask of a fused Linear+ReLU, an
//     attention mask) stays alive as in a plain run;
//   - modules whose forward changes state (BatchNorm's running statistics) change it again when
//     recomputed, as in PyTorch;
//   - under a captured step a random kernel draws at (its offset − the offset at capture start)
//     from the replay's base (Note [Captured steps] in src/cuda/graph.cu), so replaying the
//     forward's generator state makes every replay recompute the masks of its own forward; a
//     forward and a recomputation in different captures (or one outside) would not, and is
//     refused.
#include "ember/checkpoint.hpp"

#include <memory>
#include <vector>

#include "autograd/node.hpp"
#include "core/capture.hpp"
#include "ember/autocast.hpp"
#include "ember/error.hpp"
#include "ember/random.hpp"

namespace ember {
namespace autograd {

struct SegmentFrame;

// A saved tensor of a checkpointed segment; SavedTensor copies share it.
struct SavedSlot {
  std::shared_ptr<SegmentFrame> frame;
  size_t index = 0;
  Tensor tensor;  // held while the forward runs and after the recomputation; empty between
  uint64_t version = 0;
};

namespace {

struct SavedMeta {
  Shape shape;
  DType dtype;
  Device device;
};

struct Collected {
  Tensor tensor;
  uint64_t version = 0;
};

// What a SavedTensor made on this thread does: becomes a slot of `forward` (its segment is
// running), or is kept as usual and also collected for a segment being recomputed. Levels
// nest (a checkpoint inside a segment); the innermost decides. A plain pointer, so that the
// check every SavedTensor makes outside checkpoints is one thread-local load.
struct Level {
  SegmentFrame* forward = nullptr;
  std::vector<Collected>* collect = nullptr;
  const Level* enclosing = nullptr;
};
thread_local const Level* t_level = nullptr;

class LevelScope {
 public:
  LevelScope(SegmentFrame* forward, std::vector<Collected>* collect)
      : level_{forward, collect, t_level} {
    t_level = &level_;
  }
  ~LevelScope() { t_level = level_.enclosing; }
  LevelScope(const LevelScope&) = delete;
  LevelScope& operator=(const LevelScope&) = delete;

 private:
  Level level_;
};

class GradModeOn {
 public:
  GradModeOn() : previous_(grad_mode_enabled()) { set_grad_mode(true); }
  ~GradModeOn() { set_grad_mode(previous_); }
  GradModeOn(const GradModeOn&) = delete;
  GradModeOn& operator=(const GradModeOn&) = delete;

 private:
  bool previous_;
};

// Sets the generator to `replay` and gives the caller's state back at the end of the scope.
class GeneratorReplay {
 public:
  GeneratorReplay(bool active, RngState replay) : active_(active), caller_(get_rng_state()) {
    if (active_) set_rng_state(replay);
  }
  ~GeneratorReplay() {
    if (active_) set_rng_state(caller_);
  }
  GeneratorReplay(const GeneratorReplay&) = delete;
  GeneratorReplay& operator=(const GeneratorReplay&) = delete;

 private:
  bool active_;
  RngState caller_;
};

std::string describe(const Shape& shape, DType dtype, Device device) {
  return detail::concat(shape.to_string(), " ", dtype_name(dtype), " on ", device.str());
}

}  // namespace

struct SegmentFrame : std::enable_shared_from_this<SegmentFrame> {
  CheckpointMultiFn fn;
  std::vector<SavedTensor> inputs;
  std::vector<bool> input_requires_grad;
  RngState rng;
  bool preserve_rng = true;
  bool autocast = false;
  DType autocast_dtype = DType::bf16;
  const detail::CaptureRecorder* capture = nullptr;
  std::vector<std::weak_ptr<SavedSlot>> slots;
  std::vector<SavedMeta> metas;
  bool recomputed = false;

  // The forward has returned: the slots let go of their tensors.
  void finish() {
    for (const std::weak_ptr<SavedSlot>& w : slots)
      if (std::shared_ptr<SavedSlot> s = w.lock()) s->tensor = Tensor();
  }

  std::vector<Tensor> recomputation_inputs() const {
    std::vector<Tensor> in(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor t;
      try {
        t = inputs[i].get();  // an enclosing segment's slot recomputes that segment first
      } catch (const OutOfMemory&) {
        throw;
      } catch (const Error& e) {
        throw Error(detail::concat("checkpoint: input ", i, " of the segment: ", e.what()));
      }
      in[i] = t.detach();
      if (input_requires_grad[i]) in[i].requires_grad_();
    }
    return in;
  }

  void recompute() {
    EMBER_ASSERT(!recomputed, "checkpoint: a segment recomputed twice");
    EMBER_CHECK(detail::active_capture() == capture, "checkpoint: the segment's forward ran ",
                capture ? "inside a captured step" : "outside any captured step",
                " but its backward runs ", detail::active_capture() ? "inside one" : "outside any",
                " (expected the forward and the backward in the same step function: a "
                "recomputation replays the random numbers of its own forward only there)");
    const std::vector<Tensor> in = recomputation_inputs();
    std::vector<Collected> saved;
    saved.reserve(metas.size());
    {
      const GeneratorReplay replay(preserve_rng, rng);
      const GradModeOn grad_on;
      const AutocastGuard autocast_as_forward(autocast_dtype, autocast);
      const LevelScope level(nullptr, &saved);
      try {
        const std::vector<Tensor> outputs = fn(in);  // its graph is dropped right here
      } catch (const OutOfMemory&) {
        throw;
      } catch (const Error& e) {
        throw Error(detail::concat("checkpoint: recomputing the segment: ", e.what()));
      }
    }
    EMBER_CHECK(saved.size() == metas.size(), "checkpoint: the recomputation of the segment saved ",
                saved.size(), " tensors for backward where its forward saved ", metas.size(),
                " (expected fn to run the same ops each call: no branch on host state that "
                "changes between the forward and the backward)");
    for (size_t k = 0; k < saved.size(); ++k) {
      const Tensor& t = saved[k].tensor;
      const SavedMeta& m = metas[k];
      EMBER_CHECK(t.shape() == m.shape && t.dtype() == m.dtype && t.device() == m.device,
                  "checkpoint: the recomputation saved tensor ", k, " as ",
                  describe(t.shape(), t.dtype(), t.device()), " where the forward saved ",
                  describe(m.shape, m.dtype, m.device),
                  " (expected fn to run the same ops on the same shapes each call)");
    }
    for (size_t k = 0; k < saved.size(); ++k)
      if (std::shared_ptr<SavedSlot> s = slots[k].lock()) {
        s->tensor = std::move(saved[k].tensor);
        s->version = saved[k].version;
      }
    recomputed = true;
  }
};

std::shared_ptr<SavedSlot> checkpoint_slot(const Tensor& t) {
  if (!t_level) return nullptr;
  const Level& level = *t_level;
  if (level.collect) {
    level.collect->push_back({t.detach(), t.version()});
    return nullptr;
  }
  SegmentFrame& f = *level.forward;
  auto slot = std::make_shared<SavedSlot>();
  slot->frame = f.shared_from_this();
  slot->index = f.slots.size();
  slot->tensor = t.detach();
  slot->version = t.version();
  f.slots.push_back(slot);
  f.metas.push_back({t.shape(), t.dtype(), t.device()});
  return slot;
}

Tensor checkpoint_unpack(SavedSlot& slot) {
  if (!slot.tensor.defined()) slot.frame->recompute();
  EMBER_ASSERT(slot.tensor.defined(), "checkpoint: slot ", slot.index, " not refilled");
  EMBER_CHECK(slot.tensor.version() == slot.version,
              "a tensor needed for the gradient was modified in place after it was saved "
              "(version ",
              slot.tensor.version(), ", expected ", slot.version,
              "); clone it before the in-place change, or make the change out of place");
  return slot.tensor;
}

}  // namespace autograd

namespace {

// The forward of every form: fn on the inputs, its saved tensors made slots of a new frame.
std::vector<Tensor> run_segment(const CheckpointMultiFn& fn, const std::vector<Tensor>& inputs,
                                const CheckpointOptions& options) {
  EMBER_CHECK(!inputs.empty(),
              "checkpoint: no inputs given (expected at least one tensor the segment starts "
              "from)");
  for (size_t i = 0; i < inputs.size(); ++i)
    EMBER_CHECK(inputs[i].defined(), "checkpoint: input ", i,
                " is undefined (expected a defined tensor)");
  if (!grad_mode_enabled()) return fn(inputs);  // nothing is saved: nothing to recompute
  auto frame = std::make_shared<autograd::SegmentFrame>();
  frame->fn = fn;
  frame->inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    frame->inputs.emplace_back(t);  // under the enclosing segment's Level, if any (the Note)
    frame->input_requires_grad.push_back(t.requires_grad());
  }
  frame->rng = get_rng_state();
  frame->preserve_rng = options.preserve_rng_state;
  frame->autocast = autocast_enabled();
  frame->autocast_dtype = autocast_dtype();
  frame->capture = detail::active_capture();
  std::vector<Tensor> outputs;
  {
    const autograd::LevelScope level(frame.get(), nullptr);
    outputs = fn(inputs);
  }
  frame->finish();
  return outputs;
}

void check_fn(bool defined) {
  EMBER_CHECK(defined, "checkpoint: fn is empty (expected a callable that runs the segment)");
}

}  // namespace

Tensor checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                  CheckpointOptions options) {
  check_fn(static_cast<bool>(fn));
  const std::vector<Tensor> out = run_segment(
      [fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }, inputs, options);
  EMBER_CHECK(out[0].defined(),
              "checkpoint: fn returned an undefined tensor (expected the segment's output)");
  return out[0];
}

std::vector<Tensor> checkpoint(const CheckpointMultiFn& fn, const std::vector<Tensor>& inputs,
                               CheckpointOptions options) {
  check_fn(static_cast<bool>(fn));
  std::vector<Tensor> out = run_segment(fn, inputs, options);
  EMBER_CHECK(!out.empty(), "checkpoint: fn returned no tensors (expected at least one output)");
  for (size_t i = 0; i < out.size(); ++i)
    EMBER_CHECK(out[i].defined(), "checkpoint: fn returned an undefined tensor (output ", i, " of ",
                out.size(), "; expected every output defined)");
  return out;
}

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                  CheckpointOptions options) {
  check_fn(static_cast<bool>(fn));
  return checkpoint(CheckpointFn([fn](const std::vector<Tensor>& in) { return fn(in[0]); }),
                    std::vector<Tensor>{input}, options);
}

}  // namespace ember
