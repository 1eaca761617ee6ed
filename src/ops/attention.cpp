// src/ops/attention.cpp — scaled_dot_product_attention: the checks, the composed path (the
// reference, and the CPU's path) and the fused path (cuDNN's flash attention through the
// sdpa_forward / sdpa_backward slots, src/cuda/attention.cpp) with its autograd node.
//
// Shape letters: L query length, S key length, E head dim of q and k, Ev of v; "lead" the
// leading dims (broadcast among q, k, v as torch.matmul does).
//
// Note [Which attention path runs]
// The fused path runs when every one of these holds (else the composed one, and
// sdpa_fallback_reason() says which did not): a CUDA device; f16 or bf16; q, k, v with the
// same leading dims (no broadcasting), seen as [B, H, L|S, E] without a copy when they have
// rank 4 and unit last stride (MultiheadAttention's head views qualify); E and Ev multiples
// of 8 up to 256; no mask, is_causal, a bool key-padding mask ([B|1, 1, 1, S]), a mask with a
// row per query, or a float mask broadcast along the queries of at most 64 MiB expanded
// (Note [Masks on the fused path]); dropout_p < 1; cuDNN found and its engines accepting the graph.
// The composed path: scores = (q·scale)·kᵀ (+ mask), softmax, dropout, ·v, all primitive ops, so
// autograd gives the backward; f16/bf16 run it in f32 where a primitive lacks the dtype, and cast
// back.
#include "ember/attention.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ember/random.hpp"
#include "ops/common.hpp"

namespace ember {

using autograd::GradList;
using autograd::SavedTensor;

namespace {

constexpr const char* kName = "scaled_dot_product_attention";
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

thread_local SdpaBackend t_last_backend = SdpaBackend::none;
thread_local std::string t_fallback_reason;

Shape lead_of(const Tensor& t) {
  Shape s = t.shape();
  s.resize(s.size() - 2);
  return s;
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const SdpaOptions& o) {
  ops::check_defined(kName, q, "query");
  ops::check_defined(kName, k, "key");
  ops::check_defined(kName, v, "value");
  const ops::OpScope op_scope(Op::scaled_dot_product_attention, q);
  ops::check_supported(Op::scaled_dot_product_attention, q, "query");
  EMBER_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), kName, ": query dtype ",
              dtype_name(q.dtype()), ", key ", dtype_name(k.dtype()), ", value ",
              dtype_name(v.dtype()), " (expected all equal)");
  ops::check_same_device(kName, q, k);
  ops::check_same_device(kName, q, v);
  EMBER_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, kName, ": query shape ",
              q.shape().to_string(), ", key ", k.shape().to_string(), ", value ",
              v.shape().to_string(),
              " (expected rank >= 2: [..., L, E], [..., S, E], [..., S, Ev])");
  EMBER_CHECK(k.size(-1) == q.size(-1), kName, ": key shape ", k.shape().to_string(),
              " has head dim ", k.size(-1), " (expected the query's ", q.size(-1), ")");
  EMBER_CHECK(v.size(-2) == k.size(-2), kName, ": value shape ", v.shape().to_string(), " has ",
              v.size(-2), " rows (expected the key's length S = ", k.size(-2), ")");
  EMBER_CHECK(o.dropout_p >= 0.0 && o.dropout_p <= 1.0, kName, ": dropout_p ", o.dropout_p,
              " (expected 0 <= dropout_p <= 1)");
  EMBER_CHECK(!(o.attn_mask.defined() && o.is_causal), kName,
              ": attn_mask and is_causal were both given (expected at most one)");
  EMBER_CHECK(!o.scale || std::isfinite(*o.scale), kName, ": scale ", o.scale.value_or(0.0),
              " (expected a finite number)");
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    EMBER_CHECK(m.dtype() == DType::boolean || is_floating(m.dtype()), kName, ": attn_mask dtype ",
                dtype_name(m.dtype()), " (expected bool, or a float mask added to the scores)");
    ops::check_same_device(kName, q, m);
  }
}

// The composed path (Note [Which attention path runs]).
Tensor sdpa_unfused(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                    const SdpaOptions& o, double scale) {
  const DType dtype = q_in.dtype();
  const Device dev = q_in.device();
  const bool native = supports(Op::matmul, dtype, dev) && supports(Op::softmax, dtype, dev) &&
                      (o.dropout_p == 0.0 || supports(Op::dropout, dtype, dev));
  const DType ct = native ? dtype : DType::f32;
  const Tensor q = ops::cast_to(q_in, ct), k = ops::cast_to(k_in, ct), v = ops::cast_to(v_in, ct);
  Tensor scores = matmul(mul(q, scale), k.transpose(-1, -2));  // [lead, L, S]
  const int64_t l = q.size(-2), s = k.size(-2);
  if (o.is_causal) {
    const TensorOptions opt{.dtype = DType::f32, .device = dev};
    Tensor rows = l ? arange(0.0, static_cast<double>(l), 1.0, opt) : zeros({0}, opt);
    Tensor cols = s ? arange(0.0, static_cast<double>(s), 1.0, opt) : zeros({0}, opt);
    scores = masked_fill(scores, gt(cols.reshape({1, s}), rows.reshape({l, 1})), kNegInf);
  } else if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    scores = m.dtype() == DType::boolean ? masked_fill(scores, logical_not(m), kNegInf)
                                         : add(scores, ops::cast_to(m, ct));
  }
  Tensor attn = softmax(scores, -1);
  if (o.dropout_p > 0.0) attn = dropout(attn, o.dropout_p, true);
  return ops::cast_to(matmul(attn, v), dtype);
}

// ---- the fused path

// `t` seen as [B, H, len, D] (a view when possible); undefined when its lead is not 1-2 dims
// that can be merged into two.
Tensor as_bhsd(const Tensor& t) {
  switch (t.dim()) {
    case 2: return t.unsqueeze(0).unsqueeze(0);
    case 3: return t.unsqueeze(0);
    case 4: return t;
    default: {
      Shape s{1, t.size(-3), t.size(-2), t.size(-1)};
      s[0] = t.numel() / (s[1] * s[2] * s[3] > 0 ? s[1] * s[2] * s[3] : 1);
      return t.reshape(s);
    }
  }
}

bool aligned(const Tensor& t) {
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0 || t.stride(3) != 1) return false;
  for (int d = 0; d < 3; ++d)
    if (t.size(d) > 1 && t.stride(d) % 8 != 0) return false;
  return true;
}

void fill_strides(int64_t* dst, const int64_t (&size)[4], const int64_t (&stride)[4]) {
  for (int d = 0; d < 4; ++d) dst[d] = size[d] == 1 ? 0 : stride[d];
  // cuDNN wants real strides even for size-1 dims: the packed stride there.
  int64_t packed = 1;
  for (int d = 3; d >= 0; --d) {
    if (size[d] == 1) dst[d] = packed;
    packed = dst[d] * size[d];
  }
}
void fill_strides(int64_t* dst, const Tensor& t) {
  fill_strides(dst, {t.size(0), t.size(1), t.size(2), t.size(3)},
               {t.stride(0), t.stride(1), t.stride(2), t.stride(3)});
}

// Note [Attention in the projections' layout]
// The fused kernel's output and the gradients of q, k and v are written as [B, L, H, E] in
// memory, seen as [B, H, L, E] views: the layout the projections around attention read and
// write ([B, T, H·E] once the heads are merged). Then `y.transpose(1, 2).reshape({B, T, d})`
// after attention, and the backward of the `reshape(...).transpose(1, 2)` that made the heads
// from a projection, are views instead of copies, and the gradient of the output arrives in
// the output's own layout (cuDNN reads dO with o's strides). GPT-2's step spent 1.3 ms in
// those copies.
Tensor heads_second(int64_t b, int64_t h, int64_t l, int64_t e, DType dtype, Device device) {
  return ops::make_tensor(Shape{b, l, h, e}, dtype, device).transpose(1, 2);
}
void fill_heads_second_strides(int64_t* dst, int64_t b, int64_t h, int64_t l, int64_t e) {
  fill_strides(dst, {b, h, l, e}, {l * h * e, e, h * e, 1});
}

// Note [Key padding by sorting the keys]
// cuDNN takes key padding as per-batch key lengths: the first len[b] keys of batch b are seen,
// the rest are not. A bool key-padding mask ([B|1, 1, 1, S], true = may attend) need not be
// a prefix, but attention does not depend on the order of the keys as long as the values
// follow them: each batch's keys and values are reordered (a stable argsort of "blocked",
// so the kept keys come first in their order) and the number of kept keys is the length. All
// of it runs on the device (argsort, index_select, sum): no host read of the mask, so it can
// be captured, and no [L, S] tensor exists. The backward gathers dK and dV back to the keys'
// places with the inverse permutation (blocked keys get zero: cuDNN gives them none). A batch with
// no kept key gets length 1 for cuDNN and NaN output rows afterwards, as the composed path's
// softmax over nothing gives.
struct SortedKeys {
  Tensor k, v;       // reordered, k_in's and v_in's shapes
  Tensor lengths;    // i32 [B], at least 1
  Tensor none_kept;  // bool [B]: every key blocked
};

SortedKeys sort_keys(const Tensor& mask, const Tensor& k_in, const Tensor& v_in, int64_t b,
                     int64_t s) {
  const Device dev = k_in.device();
  const Tensor kept = mask.reshape({mask.numel() / s, s}).expand({b, s});
  const Tensor order = argsort(logical_not(kept).to(DType::i32), -1);  // [B, S], stable
  const Tensor base = arange(0.0, static_cast<double>(b * s), static_cast<double>(s),
                             {.dtype = DType::i64, .device = dev});
  const Tensor rows = add(order, base.reshape({b, 1})).reshape({b * s});
  // The inverse permutation: the backward gathers the gradient back (no scatter, no atomics).
  const Tensor back = add(argsort(order, -1), base.reshape({b, 1})).reshape({b * s});
  auto reorder = [&](const Tensor& t_in) {
    const Tensor t = as_bhsd(t_in);  // [B, H, S, D]
    const int64_t h = t.size(1), d = t.size(3);
    const Tensor flat = t.transpose(1, 2).reshape({b * s, h * d});
    Tensor moved;
    {
      NoGradGuard no_grad;
      moved = index_select(flat, 0, rows);
    }
    if (autograd::needs_grad(flat))
      autograd::record(Op::index_select, moved, {&flat},
                       [back](const Tensor& g, GradList& gi) { gi[0] = index_select(g, 0, back); });
    return moved.reshape({b, s, h, d}).transpose(1, 2).reshape(t_in.shape());
  };
  SortedKeys out;
  out.k = reorder(k_in);
  out.v = reorder(v_in);
  const Tensor count = sum(kept.to(DType::i32), Shape{1});
  out.none_kept = eq(count, 0.0);
  out.lengths = clamp_min(count, 1.0).to(DType::i32);
  return out;
}

// The largest mask broadcast along the queries that is materialised as a bias (Note [Masks
// on the fused path]).
constexpr int64_t kMaxExpandedMaskBytes = int64_t{64} << 20;

// The mask as the fused path's additive bias, with no host read: q's dtype, 0 where a bool
// mask lets a query attend and -inf where it blocks (a float mask as it is), shaped
// [1|B, 1|H, 1|L, S] with broadcast dims kept at 1 (cuDNN broadcasts them), the L dim
// materialised when `expand_l`. Undefined with *why set when the mask cannot be one.
Tensor additive_bias(const Tensor& mask, const Tensor& q, int q_rank, bool expand_l,
                     std::string* why) {
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2);
  if (mask.requires_grad()) {
    *why = "attn_mask requires grad (the fused path has no mask gradient)";
    return Tensor();
  }
  Shape m = mask.shape();
  while (m.size() < 4) m.insert(0, 1);

  if (q_rank > 4 || m.size() != 4 || (m[0] != 1 && m[0] != b) || (m[1] != 1 && m[1] != h) ||
      (m[2] != 1 && m[2] != l)) {
    *why = "attn_mask shape " + mask.shape().to_string() + " (the fused path takes masks " +
           "broadcastable from [B, H, L, S] over a 4-D query)";
    return Tensor();
  }
  NoGradGuard no_grad;
  const TensorOptions o{.dtype = q.dtype(), .device = q.device()};
  Tensor bias = mask.dtype() == DType::boolean
                    ? where(mask, zeros(Shape{}, o), full(Shape{}, -INFINITY, o))
                    : mask.to(q.dtype());
  bias = bias.reshape(m);
  if (expand_l && m[2] == 1) bias = bias.expand(Shape{m[0], m[1], l, m[3]});
  return bias.contiguous();
}

// Note [Attention's gradients in the fused projection]
// q, k and v are usually three views of one projection's output: qkv = c_attn(x) [B, T, 3C]
// split along its last dim, each viewed as heads [B, H, T, E] (GPT-2 and every fused-QKV
// transformer). Their gradients then travel back through the views to three SliceNodes, which
// build the projection's gradient from zeros and add each part in (Note [Slice gradients land
// in place]): a zero fill of [B, T, 3C], a copy and two adds per layer. When the three are such
// views — in memory (one storage, strides [T·3C, E, 3C, 1], k at q + C, v at q + 2C) and in the
// graph (each grad_fn chain is view ops down to a slice of the last dim at 0, C and 2C of one
// node's [..., 3C] output) — the node gets a fourth edge, to that node, and its backward writes
// dQ, dK and dV with those strides into one [B, T, 3, H, E] buffer handed to that edge; the
// three view edges get nothing, and the views' nodes pass nothing on. Unless autograd::grad
// asks for a tensor of the chains (Node::grad_observed): then the three plain gradients. The
// values are the same: the same kernel writes the same numbers elsewhere, and nothing is
// added to zeros.
struct FusedQkv {
  std::shared_ptr<autograd::Node> base;       // the node whose output was split
  Shape base_shape;                           // its output's shape, [..., 3C]
  std::vector<const autograd::Node*> chains;  // every node from q, k, v down to the slices
};

bool is_view_node(const autograd::Node& n) {
  for (Op op : {Op::view, Op::reshape, Op::permute, Op::squeeze, Op::unsqueeze, Op::flatten})
    if (std::string_view(n.name) == op_name(op)) return true;
  return false;
}

std::optional<FusedQkv> fused_qkv(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& q_in, const Tensor& k_in, const Tensor& v_in) {
  if (q.dim() != 4 || !q.data_ptr() || !q.is_same(q_in) || !k.is_same(k_in) || !v.is_same(v_in) ||
      k.shape() != q.shape() || v.shape() != q.shape() || q.storage() != k.storage() ||
      q.storage() != v.storage() || !q.requires_grad() || !k.requires_grad() || !v.requires_grad())
    return {};
  const int64_t t = q.size(2), h = q.size(1), e = q.size(3), c = h * e;
  const Shape strides{t * 3 * c, e, 3 * c, 1};
  const int64_t es = static_cast<int64_t>(element_size(q.dtype()));
  const auto at = [&](const Tensor& x) {
    return (static_cast<const char*>(x.data_ptr()) - static_cast<const char*>(q.data_ptr())) / es;
  };
  if (q.strides() != strides || k.strides() != strides || v.strides() != strides || at(k) != c ||
      at(v) != 2 * c)
    return {};
  FusedQkv f;
  const Tensor* parts[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    autograd::Node* n = detail::TensorAccess::impl(*parts[i])->grad_fn.get();
    while (n && is_view_node(*n) && n->edges.size() == 1) {
      f.chains.push_back(n);
      n = n->edges[0].node.get();
    }
    const autograd::SliceNode* sl = n ? n->as_slice() : nullptr;
    if (!sl || n->edges.size() != 1 || !n->edges[0].node) return {};
    const autograd::Edge& e0 = n->edges[0];
    const int64_t last = static_cast<int64_t>(e0.shape.size()) - 1;
    if (last < 0 || (sl->dim != last && sl->dim != -1) || sl->step != 1 || sl->start != i * c ||
        sl->end != (i + 1) * c || e0.shape[last] != 3 * c ||
        e0.shape.numel() != q.size(0) * t * 3 * c)
      return {};
    if (i == 0) {
      f.base = e0.node;
      f.base_shape = e0.shape;
    } else if (f.base != e0.node) {
      return {};
    }
    f.chains.push_back(n);
  }
  return f;
}

// No fused result: *why says why (the caller takes the composed path).
Tensor fallback(std::string* why, std::string reason) {
  *why = std::move(reason);
  return Tensor();
}

// The fused forward, or an undefined tensor with *why set.
Tensor sdpa_fused(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const SdpaOptions& o,
                  double scale, std::string* why) {
  if (q_in.device().type != DeviceType::cuda)
    return fallback(why, "device cpu (the fused path needs CUDA)");
  if (q_in.dtype() != DType::f16 && q_in.dtype() != DType::bf16) {
    *why =
        "dtype " + std::string(dtype_name(q_in.dtype())) + " (the fused path takes f16 and bf16)";
    return Tensor();
  }
  if (lead_of(q_in) != lead_of(k_in) || lead_of(q_in) != lead_of(v_in)) {
    *why = "query, key and value leading dims differ (broadcast)";
    return Tensor();
  }
  const int64_t e = q_in.size(-1), ev = v_in.size(-1);
  if (e % 8 || ev % 8 || e > 256 || ev > 256 || e == 0 || ev == 0) {
    *why = "head dims E = " + std::to_string(e) + ", Ev = " + std::to_string(ev) +
           " (the fused path takes multiples of 8 up to 256)";
    return Tensor();
  }
  if (o.dropout_p >= 1.0) return fallback(why, "dropout_p 1");
  auto usable = [](const Tensor& t) {
    Tensor x = as_bhsd(t);
    return aligned(x) ? x : as_bhsd(t.contiguous());
  };
  const Tensor q = usable(q_in);  // [B, H, L, E]; k and v once the mask has chosen them
  const int64_t b = q.size(0), h = q.size(1), l = q.size(2), s = k_in.size(-2);
  if (l == 0 || s == 0 || b == 0 || h == 0) return fallback(why, "an empty operand");
  // Note [Masks on the fused path]: a bool key-padding mask ([B|1, 1, 1, S]) becomes per-batch
  // key lengths over reordered keys (Note [Key padding by sorting the keys]); a mask with a
  // row per query ([B|1, H|1, L, S]) becomes cuDNN's additive bias. Both need no host read. A
  // float mask broadcast along the queries is materialised along L as such a bias when that
  // takes at most kMaxExpandedMaskBytes (cuDNN 9.14's backward gave wrong gradients for a bias
  // broadcast along L on the H200, and cuDNN documents no backward for one); beyond, and for
  // masks broadcast along the keys, the composed path runs.
  Tensor bias;
  Tensor k_use = k_in, v_use = v_in;
  SortedKeys sorted;
  if (o.attn_mask.defined()) {
    if (o.attn_mask.size(-1) != s) return fallback(why, "attn_mask broadcast along the keys");
    Shape m = o.attn_mask.shape();
    while (m.size() < 4) m.insert(0, 1);
    const bool along_l = m.size() == 4 && m[2] == 1;
    const bool key_padding = o.attn_mask.dtype() == DType::boolean && along_l && m[1] == 1 &&
                             (m[0] == 1 || m[0] == b) && q_in.dim() <= 4;
    const int64_t expanded = m[0] * m[1] * l * s * static_cast<int64_t>(element_size(q_in.dtype()));
    if (key_padding) {
      sorted = sort_keys(o.attn_mask, k_in, v_in, b, s);
      k_use = sorted.k;
      v_use = sorted.v;
    } else if (along_l && expanded > kMaxExpandedMaskBytes) {
      return fallback(why,
                      "a float attn_mask broadcast along the queries (materialised it would "
                      "take more than 64 MiB)");
    } else {
      bias = additive_bias(o.attn_mask, q, q_in.dim(), /*expand_l=*/along_l, why);
      if (!bias.defined()) return Tensor();
    }
  }
  const Tensor k = usable(k_use), v = usable(v_use);
  if (!aligned(q) || !aligned(k) || !aligned(v))
    return fallback(why, "operands not 16-byte aligned");
  const Device dev = q.device();
  const bool grad = autograd::needs_grad(q_in, k_use, v_use);
  // Note [Attention in the projections' layout].
  Tensor out = heads_second(b, h, l, ev, q.dtype(), dev);
  Tensor stats = ops::make_tensor(Shape{b, h, l, 1}, DType::f32, dev);
  Tensor seq_q, rng;
  backend::SdpaArgs a;
  a.dtype = q.dtype();
  a.device = dev.index;
  a.batch = b;
  a.heads = h;
  a.len_q = l;
  a.len_kv = s;
  a.head_dim = e;
  a.head_dim_v = ev;
  fill_strides(a.q_strides, q);
  fill_strides(a.k_strides, k);
  fill_strides(a.v_strides, v);
  fill_strides(a.o_strides, out);
  fill_heads_second_strides(a.grad_q_strides, b, h, l, e);
  fill_heads_second_strides(a.grad_k_strides, b, h, s, e);
  fill_heads_second_strides(a.grad_v_strides, b, h, s, ev);
  a.q = q.data_ptr();
  a.k = k.data_ptr();
  a.v = v.data_ptr();
  a.o = out.data_ptr();
  a.stats = stats.data_ptr();
  a.scale = scale;
  a.causal = o.is_causal;
  if (sorted.lengths.defined()) {
    seq_q = full({b}, static_cast<double>(l), {.dtype = DType::i32, .device = dev});
    a.seq_len_q = seq_q.data<int32_t>();
    a.seq_len_kv = sorted.lengths.data<int32_t>();
  }
  if (bias.defined()) {
    a.bias = bias.data_ptr();
    fill_strides(a.bias_strides, bias);
    for (int d = 0; d < 4; ++d) a.bias_dims[d] = bias.size(d);
  }
  if (o.dropout_p > 0.0) {
    const RngState state = get_rng_state();
    a.philox_seed = state.seed;
    a.philox_offset = advance_rng(static_cast<uint64_t>(b * h * l * s));
    rng = ops::make_tensor(Shape{4}, DType::i64, dev);  // written by the slot, on the device
    a.dropout_p = o.dropout_p;
    a.rng_state = rng.data<int64_t>();
  }
  a.need_backward = grad;
  if (!ops::backend_of(q).sdpa_forward(a)) {
    *why = ops::backend_of(q).sdpa_status(dev.index);
    return Tensor();
  }
  Shape out_shape = lead_of(q_in);
  out_shape.push_back(l);
  out_shape.push_back(ev);
  Tensor result = out.reshape(out_shape);
  if (grad) {
    // Note [Attention's gradients in the fused projection]
    std::optional<FusedQkv> fused =
        sorted.lengths.defined() ? std::nullopt : fused_qkv(q, k, v, q_in, k_use, v_use);
    // The lambda keeps every buffer `a` points into (bias, lengths, Philox state).
    autograd::Node& node = autograd::record(
        Op::scaled_dot_product_attention, result, {&q_in, &k_use, &v_use},
        [a, sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), so = SavedTensor(out),
         st = SavedTensor(stats), bias, rng, seq_q, seq_kv = sorted.lengths, qs = q_in.shape(),
         ks = k_use.shape(), vs = v_use.shape(),
         chains = fused ? fused->chains : std::vector<const autograd::Node*>{},
         base_shape = fused ? fused->base_shape : Shape{}](const Tensor& g, GradList& gi) mutable {
          const Tensor q = sq.get(), k = sk.get(), v = sv.get(), o = so.get();
          // dO in o's layout, dQ, dK, dV heads-second (Note [Attention in the projections'
          // layout]).
          Tensor go = g.reshape(o.shape());
          if (go.strides() != o.strides()) {
            Tensor laid =
                heads_second(a.batch, a.heads, a.len_q, a.head_dim_v, o.dtype(), o.device());
            laid.copy_(go);
            go = laid;
          }
          bool into_base = gi.size() == 4;
          for (const autograd::Node* n : chains) into_base = into_base && !n->grad_observed;
          Tensor dq, dk, dv, dqkv;
          if (into_base) {  // [B, T, 3, H, E]: dQ, dK, dV side by side, as q, k, v were
            dqkv = ops::make_tensor(Shape{a.batch, a.len_q, 3, a.heads, a.head_dim}, q.dtype(),
                                    q.device());
            const Tensor parts = dqkv.permute({2, 0, 3, 1, 4});  // [3, B, H, T, E]
            dq = parts.select(0, 0);
            dk = parts.select(0, 1);
            dv = parts.select(0, 2);
            for (int d = 0; d < 4; ++d)
              a.grad_q_strides[d] = a.grad_k_strides[d] = a.grad_v_strides[d] = dq.stride(d);
          } else {
            dq = heads_second(a.batch, a.heads, a.len_q, a.head_dim, q.dtype(), q.device());
            dk = heads_second(a.batch, a.heads, a.len_kv, a.head_dim, k.dtype(), k.device());
            dv = heads_second(a.batch, a.heads, a.len_kv, a.head_dim_v, v.dtype(), v.device());
            fill_heads_second_strides(a.grad_q_strides, a.batch, a.heads, a.len_q, a.head_dim);
            fill_heads_second_strides(a.grad_k_strides, a.batch, a.heads, a.len_kv, a.head_dim);
            fill_heads_second_strides(a.grad_v_strides, a.batch, a.heads, a.len_kv, a.head_dim_v);
          }
          a.q = q.data_ptr();
          a.k = k.data_ptr();
          a.v = v.data_ptr();
          a.o = o.data_ptr();
          a.stats = st.get().data_ptr();
          a.grad_o = go.data_ptr();
          a.grad_q = dq.data_ptr();
          a.grad_k = dk.data_ptr();
          a.grad_v = dv.data_ptr();
          ops::backend_of(q).sdpa_backward(a);
          if (into_base) {
            gi[3] = dqkv.reshape(base_shape);
            return;
          }
          gi[0] = dq.reshape(qs);
          gi[1] = dk.reshape(ks);
          gi[2] = dv.reshape(vs);
        });
    if (fused) node.edges.push_back({fused->base, fused->base_shape});
  }
  if (sorted.none_kept.defined()) {
    Shape rows(std::vector<int64_t>(static_cast<size_t>(result.dim()), 1));
    rows[0] = result.dim() == 4 ? b : 1;  // b is 1 below rank 4
    result = where(sorted.none_kept.reshape(rows),
                   full(Shape{}, std::numeric_limits<double>::quiet_NaN(),
                        {.dtype = result.dtype(), .device = dev}),
                   result);
  }
  return result;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const SdpaOptions& o) {
  if (const auto c = ops::autocast(Op::scaled_dot_product_attention, {&q, &k, &v, &o.attn_mask})) {
    SdpaOptions cast = o;
    cast.attn_mask = c[3];
    return scaled_dot_product_attention(c[0], c[1], c[2], cast);
  }
  check_inputs(q, k, v, o);
  const int64_t l = q.size(-2), s = k.size(-2);
  Shape lead = broadcast_shapes(broadcast_shapes(lead_of(q), lead_of(k), kName), lead_of(v), kName);
  if (o.attn_mask.defined()) {
    Shape scores = lead;
    scores.push_back(l);
    scores.push_back(s);
    const Shape& m = o.attn_mask.shape();
    bool fits = m.size() <= scores.size();
    for (int i = 1; fits && i <= m.size(); ++i) {
      const int64_t md = m[m.size() - i], sd = scores[scores.size() - i];
      fits = md == sd || md == 1;
    }
    EMBER_CHECK(fits, kName, ": attn_mask shape ", m.to_string(),
                " does not broadcast to the scores' shape ", scores.to_string(),
                " (expected [..., L, S] = [..., ", l, ", ", s, "])");
  }
  const double scale =
      o.scale ? *o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1) > 0 ? q.size(-1) : 1));
  std::string why;
  Tensor fused = sdpa_fused(q, k, v, o, scale, &why);
  if (fused.defined()) {
    t_last_backend = SdpaBackend::cudnn;
    t_fallback_reason.clear();
    return fused;
  }
  t_last_backend = SdpaBackend::unfused;
  t_fallback_reason = why;
  return sdpa_unfused(q, k, v, o, scale);
}

SdpaBackend sdpa_last_backend() { return t_last_backend; }

std::string sdpa_fallback_reason() { return t_fallback_reason; }

std::string sdpa_cudnn_status(int device) {
#if defined(EMBER_WITH_CUDA)
  try {
    return backend::backend_for(DeviceType::cuda).sdpa_status(device);
  } catch (const std::exception& e) {
    return e.what();
  }
#else
  (void)device;
  return "ember was built without CUDA";
#endif
}

}  // namespace ember
