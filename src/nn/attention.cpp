// src/nn/attention.cpp — MultiheadAttention and causal_mask.
//
// Shape letters as in the header: L target length, S source length, N batch, E embed_dim,
// H heads, Dh = E / H. The forward is built from primitive ops only (linear, views, matmul,
// where, softmax, dropout), so autograd supplies the backward:
//   q, k, v = in_proj(query, key, value)                  [.., E] each
//   q, k, v -> [N, H, L|S, Dh]                            views (permute), no copies
//   scores  = (q / √Dh) · kᵀ                              [N, H, L, S], one batched matmul
//   scores  = mask(scores)                                -inf where blocked, + float masks
//   attn    = dropout(softmax(scores, -1))                training only
//   out     = out_proj((attn · v) -> [L, N, E])
// Fully masked rows give softmax(-inf, ..., -inf) = NaN, as PyTorch: we do not hide them.
#include "ember/nn/attention.hpp"

#include <cmath>
#include <limits>

#include "ember/attention.hpp"
#include "ember/autograd.hpp"
#include "ember/nn/init.hpp"
#include "py_repr.hpp"

namespace ember::nn {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Applies one mask to scores [N, H, L, S]: bool → -inf where true, float → added.
Tensor apply_mask(const Tensor& scores, const Tensor& mask) {
  if (mask.dtype() == DType::boolean) return masked_fill(scores, mask, kNegInf);
  return add(scores, mask.dtype() == scores.dtype() ? mask : mask.to(scores.dtype()));
}

// MultiheadAttention's masks (bool: true = blocked; float: added) as one mask of
// scaled_dot_product_attention (bool: true = may attend; float: added).
Tensor sdpa_mask(const Tensor& attn_mask, const Tensor& kpm, DType dtype) {
  auto allowed = [](const Tensor& m) { return m.dtype() == DType::boolean ? logical_not(m) : m; };
  if (!attn_mask.defined() || !kpm.defined()) {
    const Tensor& m = attn_mask.defined() ? attn_mask : kpm;
    return m.defined() ? allowed(m) : Tensor();
  }
  if (attn_mask.dtype() == DType::boolean && kpm.dtype() == DType::boolean)
    return logical_not(logical_or(attn_mask, kpm));
  auto additive = [&](const Tensor& m) {
    if (m.dtype() != DType::boolean) return m.dtype() == dtype ? m : m.to(dtype);
    return masked_fill(zeros(m.shape(), {.dtype = dtype, .device = m.device()}), m, kNegInf);
  };
  return add(additive(attn_mask), additive(kpm));
}

void check_mask_dtype(const Tensor& mask, const char* what) {
  EMBER_CHECK(mask.dtype() == DType::boolean || is_floating(mask.dtype()),
              "MultiheadAttention: ", what, " dtype ", dtype_name(mask.dtype()),
              " (expected bool, or a float mask added to the scores)");
}

}  // namespace

Tensor causal_mask(int64_t size, int64_t source_size, Device device) {
  if (source_size <= 0) source_size = size;
  EMBER_CHECK(size >= 0, "causal_mask: size ", size, " (expected >= 0)");
  const TensorOptions o{.dtype = DType::f32, .device = device};
  Tensor rows = size ? arange(0.0, static_cast<double>(size), 1.0, o) : zeros({0}, o);
  Tensor cols = arange(0.0, static_cast<double>(source_size), 1.0, o);
  return gt(cols.reshape({1, source_size}), rows.reshape({size, 1}));
}

MultiheadAttentionImpl::MultiheadAttentionImpl(MultiheadAttentionOptions o) : options_(o) {
  const int64_t e = o.embed_dim;
  check_options(o, "MultiheadAttention");
  EMBER_CHECK(e % o.num_heads == 0, "MultiheadAttention: embed_dim ", e,
              " is not divisible by num_heads ", o.num_heads,
              " (expected embed_dim % num_heads == 0)");
  EMBER_CHECK((o.kdim == 0 || o.kdim == e) && (o.vdim == 0 || o.vdim == e),
              "MultiheadAttention: kdim ", o.kdim, " and vdim ", o.vdim,
              " are not supported (expected both equal to embed_dim ", e, ")");
  options_.kdim = options_.vdim = e;
  in_proj_weight_ = register_parameter("in_proj_weight", init::xavier_uniform({3 * e, e}));
  if (o.bias) in_proj_bias_ = register_parameter("in_proj_bias", zeros({3 * e}));
  out_proj_ = std::make_shared<LinearImpl>(e, e, o.bias);
  register_module("out_proj", out_proj_);
  if (o.bias) {
    NoGradGuard g;
    Tensor(out_proj_->bias()).zero_();
  }
}

Tensor MultiheadAttentionImpl::forward(const Tensor& x) {
  AttentionOptions o;
  o.need_weights = false;
  return forward(x, x, x, o).output;
}

AttentionOutput MultiheadAttentionImpl::forward(const Tensor& query, const Tensor& key,
                                                const Tensor& value, const AttentionOptions& o) {
  const int64_t e = options_.embed_dim, h = options_.num_heads, dh = e / h;
  const bool bf = options_.batch_first;
  EMBER_CHECK(query.defined() && key.defined() && value.defined(),
              "MultiheadAttention: query, key and value must all be defined");
  EMBER_CHECK(query.dim() == 3 || query.dim() == 2, "MultiheadAttention: query shape ",
              query.shape().to_string(), " (expected ", bf ? "[N, L, E]" : "[L, N, E]",
              " or unbatched [L, E])");
  const bool unbatched = query.dim() == 2;
  EMBER_CHECK(key.dim() == query.dim() && value.dim() == query.dim(),
              "MultiheadAttention: key shape ", key.shape().to_string(), " and value shape ",
              value.shape().to_string(), " (expected the query's rank ", query.dim(), ")");
  const bool self = query.is_same(key) && key.is_same(value);

  // Everything below works on batched inputs; an unbatched call gets N = 1.
  const int bdim = bf ? 0 : 1, sdim = bf ? 1 : 0;
  auto batched = [&](const Tensor& t) { return unbatched ? t.unsqueeze(bdim) : t; };
  const Tensor q_in = batched(query), k_in = self ? q_in : batched(key),
               v_in = self ? q_in : batched(value);
  const int64_t n = q_in.size(bdim), l = q_in.size(sdim), s = k_in.size(sdim);
  EMBER_CHECK(q_in.size(2) == e, "MultiheadAttention: query shape ", query.shape().to_string(),
              " has ", q_in.size(2), " features (expected embed_dim ", e, ")");
  EMBER_CHECK(k_in.size(2) == e && v_in.size(2) == e, "MultiheadAttention: key shape ",
              key.shape().to_string(), " and value shape ", value.shape().to_string(),
              " (expected embed_dim ", e, " features)");
  EMBER_CHECK(k_in.size(bdim) == n && v_in.size(bdim) == n, "MultiheadAttention: batch of query ",
              n, ", key ", k_in.size(bdim), ", value ", v_in.size(bdim), " (expected all equal)");
  EMBER_CHECK(v_in.size(sdim) == s, "MultiheadAttention: key length ", s, " and value length ",
              v_in.size(sdim), " (expected equal)");

  // ---- input projections: one GEMM for self-attention, three slices of the weight otherwise
  Tensor q, k, v;
  const Tensor& w = in_proj_weight_;
  const Tensor& b = in_proj_bias_;
  if (self) {
    std::vector<Tensor> qkv = chunk(linear(q_in, w, b), 3, -1);
    q = qkv[0];
    k = qkv[1];
    v = qkv[2];
  } else {
    auto part = [&](const Tensor& t, int64_t i) {
      return t.defined() ? t.slice(0, i * e, (i + 1) * e) : Tensor();
    };
    q = linear(q_in, part(w, 0), part(b, 0));
    k = linear(k_in, part(w, 1), part(b, 1));
    v = linear(v_in, part(w, 2), part(b, 2));
  }
  // [L, N, E] (or [N, L, E]) -> [N, H, L, Dh] as views.
  auto heads = [&](const Tensor& t, int64_t len) {
    Tensor r = bf ? t.reshape({n, len, h, dh}) : t.reshape({len, n, h, dh});
    return bf ? r.permute({0, 2, 1, 3}) : r.permute({1, 2, 0, 3});
  };
  q = heads(q, l);
  k = heads(k, s);
  v = heads(v, s);

  // ---- masks
  Tensor attn_mask = o.attn_mask;
  const bool causal_only = !attn_mask.defined() && o.is_causal && !o.key_padding_mask.defined();
  if (!attn_mask.defined() && o.is_causal) attn_mask = causal_mask(l, s, query.device());
  if (attn_mask.defined()) {
    check_mask_dtype(attn_mask, "attn_mask");
    if (attn_mask.dim() == 2) {
      EMBER_CHECK(attn_mask.size(0) == l && attn_mask.size(1) == s,
                  "MultiheadAttention: attn_mask shape ", attn_mask.shape().to_string(),
                  " (expected [L, S] = [", l, ", ", s, "])");
    } else {
      EMBER_CHECK(attn_mask.dim() == 3 && attn_mask.size(0) == n * h && attn_mask.size(1) == l &&
                      attn_mask.size(2) == s,
                  "MultiheadAttention: attn_mask shape ", attn_mask.shape().to_string(),
                  " (expected [L, S] = [", l, ", ", s, "] or [N*H, L, S] = [", n * h, ", ", l, ", ",
                  s, "])");
      attn_mask = attn_mask.reshape({n, h, l, s});
    }
  }
  Tensor kpm = o.key_padding_mask;
  if (kpm.defined()) {
    check_mask_dtype(kpm, "key_padding_mask");
    if (unbatched && kpm.dim() == 1) kpm = kpm.unsqueeze(0);
    EMBER_CHECK(kpm.dim() == 2 && kpm.size(0) == n && kpm.size(1) == s,
                "MultiheadAttention: key_padding_mask shape ",
                o.key_padding_mask.shape().to_string(), " (expected [N, S] = [", n, ", ", s, "])");
    kpm = kpm.reshape({n, 1, 1, s});
  }
  const double dropout_p = is_training() ? options_.dropout : 0.0;

  // ---- attention: the fused op when the weights are not returned, else written out
  Tensor out, attn;
  if (!o.need_weights) {
    out = scaled_dot_product_attention(
        q, k, v,
        {.attn_mask = causal_only ? Tensor() : sdpa_mask(attn_mask, kpm, q.dtype()),
         .is_causal = causal_only,
         .dropout_p = dropout_p,
         .scale = 1.0 / std::sqrt(static_cast<double>(dh))});
  } else {
    Tensor scores = matmul(mul(q, 1.0 / std::sqrt(static_cast<double>(dh))), k.transpose(-1, -2));
    if (attn_mask.defined()) scores = apply_mask(scores, attn_mask);
    if (kpm.defined()) scores = apply_mask(scores, kpm);
    attn = softmax(scores, -1);
    if (dropout_p > 0.0) attn = dropout(attn, dropout_p, true);
    out = matmul(attn, v);  // [N, H, L, Dh]
  }

  // ---- heads merged back, output projection
  out = bf ? out.permute({0, 2, 1, 3}).reshape({n, l, e})
           : out.permute({2, 0, 1, 3}).reshape({l, n, e});
  out = run_forward(*out_proj_, out);

  AttentionOutput result;
  result.output = unbatched ? out.squeeze(bdim) : out;
  if (o.need_weights) {
    result.weights = o.average_attn_weights ? mean(attn, {1}) : attn;
    if (unbatched) result.weights = result.weights.squeeze(0);
  }
  return result;
}

json MultiheadAttentionImpl::options() const { return options_json(options_); }

std::string MultiheadAttentionImpl::extra_repr() const {
  return "embed_dim=" + std::to_string(options_.embed_dim) +
         ", num_heads=" + std::to_string(options_.num_heads) +
         ", dropout=" + pyrepr::py_float(options_.dropout) +
         ", bias=" + pyrepr::py_bool(options_.bias) +
         ", batch_first=" + pyrepr::py_bool(options_.batch_first);
}

}  // namespace ember::nn
