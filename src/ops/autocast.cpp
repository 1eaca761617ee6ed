// src/ops/autocast.cpp — the autocast table (which op runs in which dtype), the scope's
// thread-local state, and the cast every listed op makes of its inputs.
//
// Note [Autocast]
// An op listed below starts with
//   if (const auto c = ops::autocast(Op::linear, {&x, &weight, &bias})) return linear(c[0], ...);
// Outside a scope that is one thread-local read. Inside, the inputs the policy changes are
// cast with the differentiable .to(DType) (so gradients come back in each input's own dtype:
// f32 for master weights) and the op is called again on the casts, which then need none.
// A `lower` cast of a leaf that requires grad (a parameter) is cached for the rest of the
// outermost scope, keyed by the tensor, its version (an in-place update makes a new cast)
// and the grad mode, so a weight used by several ops is converted once per forward.
// The backward engine runs with autocast off: backward ops compute in the dtypes their
// forward ops used, as PyTorch's.
#include "ember/autocast.hpp"

#include <atomic>
#include <cstdlib>
#include <map>
#include <tuple>

#include "ember/autograd.hpp"
#include "ops/common.hpp"

namespace ember {
namespace {

thread_local bool t_enabled = false;
thread_local DType t_dtype = DType::bf16;
thread_local int t_enabled_scopes = 0;  // live guards that enabled autocast

struct CacheEntry {
  Tensor source;  // held so that the key's address cannot be reused while cached
  Tensor cast;
};
using CacheKey = std::tuple<const void*, uint64_t, DType, bool>;
thread_local std::map<CacheKey, CacheEntry>* t_cache = nullptr;

std::map<CacheKey, CacheEntry>& cache() {
  if (!t_cache) t_cache = new std::map<CacheKey, CacheEntry>();  // freed with the scope
  return *t_cache;
}

void drop_cache() {
  delete t_cache;
  t_cache = nullptr;
}

bool castable(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

Tensor cast_lower(const Tensor& t, DType to) {
  if (!(t.requires_grad() && t.is_leaf())) {
    // A cast that records no node may take the copy its producer wrote (Note [A
    // lower-precision copy beside a tensor]).
    if (!(grad_mode_enabled() && t.requires_grad()))
      if (Tensor copy = ops::low_copy_of(t, to); copy.defined()) return copy;
    return t.to(to);
  }
  const CacheKey key{detail::TensorAccess::impl(t), t.version(), to, grad_mode_enabled()};
  auto& c = cache();
  if (auto it = c.find(key); it != c.end()) return it->second.cast;
  Tensor cast = t.to(to);
  c.emplace(key, CacheEntry{t, cast});
  return cast;
}

}  // namespace

AutocastPolicy autocast_policy(Op op) {
  switch (op) {
    // GEMM-class: tensor cores in the low dtype, f32 accumulation inside the kernel.
    case Op::matmul:
    case Op::linear:
    case Op::mm:
    case Op::bmm:
    case Op::dot:
    case Op::outer:
    case Op::addmm:
    case Op::baddbmm:
    case Op::conv1d:
    case Op::conv2d:
    case Op::conv3d:
    case Op::conv_transpose1d:
    case Op::conv_transpose2d:
    case Op::scaled_dot_product_attention: return AutocastPolicy::lower;
    // Range or accuracy: f32.
    case Op::exp:
    case Op::exp2:
    case Op::expm1:
    case Op::log:
    case Op::log1p:
    case Op::log2:
    case Op::log10:
    case Op::pow:
    case Op::reciprocal:
    case Op::rsqrt:
    case Op::erfinv:
    case Op::sinh:
    case Op::cosh:
    case Op::tan:
    case Op::asin:
    case Op::acos:
    case Op::softplus:
    case Op::sum:
    case Op::prod:
    case Op::cumsum:
    case Op::cumprod:
    case Op::var:
    case Op::std:
    case Op::norm:
    case Op::logsumexp:
    case Op::softmax:
    case Op::log_softmax:
    case Op::layer_norm:
    case Op::rms_norm:
    case Op::interpolate:
    case Op::mse_loss:
    case Op::cross_entropy_probs:
    case Op::cross_entropy:
    case Op::nll_loss:
    case Op::bce_with_logits:
    case Op::binary_cross_entropy:
    case Op::l1_loss:
    case Op::smooth_l1_loss:
    case Op::huber_loss:
    case Op::kl_div:
    case Op::margin_ranking_loss:
    case Op::triplet_margin_loss:
    case Op::cosine_embedding_loss:
    case Op::poisson_nll_loss:
    case Op::ctc_loss:
    case Op::multilabel_margin_loss:
    case Op::multilabel_soft_margin_loss:
    case Op::multi_margin_loss:
    case Op::hinge_embedding_loss:
    case Op::soft_margin_loss:
    case Op::gaussian_nll_loss:
    case Op::triplet_margin_with_distance_loss:
    case Op::cosine_similarity:
    case Op::pairwise_distance:
    case Op::pdist: return AutocastPolicy::f32;
    // Several inputs that must agree: the widest.
    case Op::cat:
    case Op::stack: return AutocastPolicy::promote;
    default: return AutocastPolicy::none;
  }
}

const char* autocast_policy_name(AutocastPolicy policy) {
  switch (policy) {
    case AutocastPolicy::lower: return "lower";
    case AutocastPolicy::f32: return "f32";
    case AutocastPolicy::promote: return "promote";
    default: return "none";
  }
}

AutocastGuard::AutocastGuard(DType dtype, bool enabled)
    : previous_enabled_(t_enabled), previous_dtype_(t_dtype), counted_(enabled) {
  EMBER_CHECK(!enabled || dtype == DType::bf16 || dtype == DType::f16,
              "AutocastGuard: the low precision dtype must be bf16 or f16 (got ", dtype_name(dtype),
              ")");
  t_enabled = enabled;
  if (enabled) {
    t_dtype = dtype;
    ++t_enabled_scopes;
  }
}

AutocastGuard::~AutocastGuard() {
  t_enabled = previous_enabled_;
  t_dtype = previous_dtype_;
  if (counted_ && --t_enabled_scopes == 0) drop_cache();
}

bool autocast_enabled() { return t_enabled; }
DType autocast_dtype() { return t_dtype; }
int64_t autocast_cache_size() { return t_cache ? static_cast<int64_t>(t_cache->size()) : 0; }

namespace ops {

namespace {
// The widest floating dtype among the defined floating tensors `ts` (f32 when there is none),
// and in *mixed whether they differ.
DType widest_float(const Tensor* const* ts, size_t n, bool* mixed) {
  bool first = true;
  *mixed = false;
  DType widest = DType::f32;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = *ts[i];
    if (!t.defined() || !is_floating(t.dtype())) continue;
    *mixed = *mixed || (!first && t.dtype() != widest);
    widest = first ? t.dtype() : promote_types(widest, t.dtype());
    first = false;
  }
  return widest;
}
}  // namespace

// Note [A lower-precision copy beside a tensor]
// Under autocast a pre-norm block's layer_norm (or rms_norm) computes in f32 and the linear after
// it casts that output to bf16: a pass that reads 4 bytes an element and writes 2 (GPT-2 124M: 25
// of them a step, each over 12.6M elements). layer_norm's kernel instead rounds each output element
// once more while it holds it and writes the bf16 copy beside the f32 output (ops::want_low_copy,
// TensorImpl::low_copy); the linear's cast finds it (low_copy_of) and reads nothing. The copy has
// the bits the cast would give (the same round-to-nearest-even), so results are unchanged; it is
// valid while the storage's version is the one recorded (an in-place write makes the cast run
// again), and it is freed with the f32 tensor or with the last op that saved it. Only a cast that
// records no node may take it: autocast's linear makes its casts without a graph (Note [Autocast's
// linear writes f32 gradients]), and so does any autocast cast of a tensor that needs no gradient
// (inference); the differentiable .to() of a tensor that does still builds its node and its own
// pass. The backward has the same pass the other way: a block's bf16 output enters the f32 residual
// stream through add_widened, whose backward casts the stream's gradient to bf16 for it (24
// casts a GPT-2 step). That gradient is finished by layer_norm's backward, which adds its
// own into it in place (Note [Gradients accumulate where they land] in engine.cpp): when the
// engine sees that the add's node waits for nothing else and reads its gradient in bf16
// (Node::reads_gradient_as), it tells layer_norm's node (autograd::final_gradient_copy), whose
// kernel writes the rounded copy of the sum as it stores it; the add's backward takes it. A
// pending gradient handed to a node to add into, or written in place by a slice, loses its copy.
// EMBER_LOW_COPY=0 (set_low_copies) turns both directions off.
namespace {
std::atomic<bool>& low_copies_on() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("EMBER_LOW_COPY");
    return !(v && v[0] == '0');
  }();
  return on;
}
}  // namespace

bool low_copies_enabled() { return low_copies_on().load(std::memory_order_relaxed); }
void set_low_copies(bool on) { low_copies_on().store(on, std::memory_order_relaxed); }

Tensor low_copy_of(const Tensor& t, DType dtype) {
  if (!t.defined()) return Tensor();
  const TensorImpl& i = *detail::TensorAccess::impl(t);
  if (!i.low_copy || i.low_copy->dtype != dtype || i.low_copy_version != t.version() ||
      i.low_copy->shape != i.shape)
    return Tensor();
  return detail::TensorAccess::wrap(i.low_copy);
}

void attach_low_copy(const Tensor& t, const Tensor& low) {
  TensorImpl& i = *detail::TensorAccess::impl(t);
  i.low_copy = detail::TensorAccess::impl_ptr(low);
  i.low_copy_version = t.version();
}

Tensor autocast_lower(const Tensor& t) {
  if (!t.defined() || !castable(t.dtype()) || t.dtype() == t_dtype) return t;
  return cast_lower(t, t_dtype);
}

AutocastInputs autocast_slow(Op op, std::initializer_list<const Tensor*> inputs) {
  const AutocastPolicy policy = autocast_policy(op);
  if (policy == AutocastPolicy::none) return {};
  auto cast = std::make_unique<std::array<Tensor, 6>>();
  EMBER_ASSERT(inputs.size() <= cast->size(), "autocast: too many inputs for ", op_name(op));
  bool mixed = false;
  const DType widest = policy == AutocastPolicy::promote
                           ? widest_float(inputs.begin(), inputs.size(), &mixed)
                           : DType::f32;
  bool any = false;
  size_t i = 0;
  for (const Tensor* t : inputs) {
    Tensor& slot = (*cast)[i++];
    slot = *t;
    if (!t->defined()) continue;
    const DType from = t->dtype();
    switch (policy) {
      case AutocastPolicy::lower:
        if (castable(from) && from != t_dtype) slot = cast_lower(*t, t_dtype);
        break;
      case AutocastPolicy::f32:
        if (from == DType::f16 || from == DType::bf16) slot = t->to(DType::f32);
        break;
      case AutocastPolicy::promote:
        if (is_floating(from) && from != widest) slot = t->to(widest);
        break;
      case AutocastPolicy::none: break;
    }
    any = any || !slot.is_same(*t);
  }
  if (!any) return {};
  return {std::move(cast)};
}

std::optional<std::vector<Tensor>> autocast_list(Op op, const std::vector<Tensor>& tensors) {
  if (!autocast_enabled()) return std::nullopt;
  EMBER_ASSERT(autocast_policy(op) == AutocastPolicy::promote, "autocast_list: ", op_name(op),
               " is not a promote op");
  std::vector<const Tensor*> ptrs;
  ptrs.reserve(tensors.size());
  for (const Tensor& t : tensors) ptrs.push_back(&t);
  bool mixed = false;
  const DType widest = widest_float(ptrs.data(), ptrs.size(), &mixed);
  if (!mixed) return std::nullopt;
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors)
    out.push_back(t.defined() && is_floating(t.dtype()) ? cast_to(t, widest) : t);
  return out;
}

}  // namespace ops
}  // namespace ember
