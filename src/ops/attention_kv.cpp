// src/ops/attention_kv.cpp — attention_with_kv_cache (include/ember/attention.hpp): the checks,
// and the kv_cache_attention slot (Note [Attention over a KV cache] in
// src/kernels/attention.hpp). Inference only: no autograd node.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/attention.hpp"
#include "ember/attention.hpp"
#include "ember/ops.hpp"
#include "ops/common.hpp"

namespace ember {

namespace {

constexpr const char* kName = "attention_with_kv_cache";

void copy_strides(const Tensor& t, int64_t* out) {
  for (int d = 0; d < 4; ++d) out[d] = t.strides()[d];
}

std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().to_string() : "undefined"; }

}  // namespace

Tensor attention_with_kv_cache(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const Tensor& k, const Tensor& v, const Tensor& cache_seqlens,
                               const KVCacheAttentionOptions& options) {
  const ops::UserOp user(Op::attention_with_kv_cache, {&q, &k_cache, &v_cache, &k, &v});
  ops::check_defined(kName, q, "query");
  ops::check_defined(kName, k_cache, "k_cache");
  ops::check_defined(kName, v_cache, "v_cache");
  ops::check_defined(kName, k, "key");
  ops::check_defined(kName, v, "value");
  ops::check_defined(kName, cache_seqlens, "cache_seqlens");
  const ops::OpScope op_scope(Op::attention_with_kv_cache, q);
  ops::check_supported(Op::attention_with_kv_cache, q, "query");
  for (const Tensor* t : {&k_cache, &v_cache, &k, &v}) {
    EMBER_CHECK(t->dtype() == q.dtype(), kName, ": query dtype ", dtype_name(q.dtype()),
                ", k_cache ", dtype_name(k_cache.dtype()), ", v_cache ",
                dtype_name(v_cache.dtype()), ", key ", dtype_name(k.dtype()), ", value ",
                dtype_name(v.dtype()), " (expected all equal)");
    ops::check_same_device(kName, q, *t);
  }
  ops::check_same_device(kName, q, cache_seqlens);
  EMBER_CHECK(
      q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && k_cache.dim() == 4 && v_cache.dim() == 4,
      kName, ": query ", shape_of(q), ", k_cache ", shape_of(k_cache), ", v_cache ",
      shape_of(v_cache), ", key ", shape_of(k), ", value ", shape_of(v),
      " (expected rank 4: [B, H, T, E], caches [B, H_kv, S_max, E|Ev], new keys and values "
      "[B, H_kv, T, E|Ev])");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), E = q.size(3);
  const int64_t Hkv = k_cache.size(1), S = k_cache.size(2), Ev = v_cache.size(3);
  EMBER_CHECK(k_cache.shape() == Shape({B, Hkv, S, E}) &&
                  v_cache.shape() == Shape({B, Hkv, S, Ev}) && k.shape() == Shape({B, Hkv, T, E}) &&
                  v.shape() == Shape({B, Hkv, T, Ev}),
              kName, ": query ", shape_of(q), ", k_cache ", shape_of(k_cache), ", v_cache ",
              shape_of(v_cache), ", key ", shape_of(k), ", value ", shape_of(v),
              " (expected k_cache [B, H_kv, S_max, E], v_cache [B, H_kv, S_max, Ev], key [B, "
              "H_kv, T, E] and value [B, H_kv, T, Ev] for a query [B, H, T, E])");
  EMBER_CHECK(Hkv > 0 && H % Hkv == 0, kName, ": ", H, " query heads over ", Hkv,
              " key heads (expected a multiple: grouped-query attention)");
  EMBER_CHECK(E > 0 && Ev > 0 && (q.device().is_cpu() || (E <= 256 && Ev <= 256)), kName,
              ": head dims ", E, " and ", Ev, " (expected 1 to 256 on a GPU)");
  EMBER_CHECK(cache_seqlens.shape() == Shape({B}) &&
                  (cache_seqlens.dtype() == DType::i64 || cache_seqlens.dtype() == DType::i32),
              kName, ": cache_seqlens ", shape_of(cache_seqlens), " ",
              dtype_name(cache_seqlens.dtype()),
              " (expected i64 or i32 [B]: the positions each row's cache holds)");
  EMBER_CHECK(
      !grad_mode_enabled() || !(q.requires_grad() || k.requires_grad() || v.requires_grad()), kName,
      ": inputs that require grad while gradients are recorded (it has no "
      "backward: run inference under NoGradGuard, train with "
      "scaled_dot_product_attention)");
  ops::check_inplace(kName, k_cache);
  ops::check_inplace(kName, v_cache);
  Tensor mask;
  if (options.key_padding_mask.defined()) {
    const Tensor& m = options.key_padding_mask;
    EMBER_CHECK(m.dim() == 2 && m.size(0) == B && m.size(1) >= 1 && m.size(1) <= S &&
                    !is_floating(m.dtype()),
                kName, ": key_padding_mask ", m.shape().to_string(), " ", dtype_name(m.dtype()),
                " (expected bool or integer [B, L] = [", B, ", 1 to ", S,
                "]: 1 for a real key, 0 for padding)");
    ops::check_same_device(kName, q, m);
  }
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  EMBER_CHECK(std::isfinite(scale), kName, ": scale ", scale, " (expected a finite number)");
  const Tensor& cos = options.rotary_cos;
  const Tensor& sin = options.rotary_sin;
  EMBER_CHECK(cos.defined() == sin.defined(), kName, ": rotary_cos ", shape_of(cos),
              " and rotary_sin ", shape_of(sin), " (expected both or neither)");
  if (cos.defined()) {
    for (const Tensor* t : {&cos, &sin}) {
      EMBER_CHECK(t->dim() == 4 && (t->size(0) == B || t->size(0) == 1) && t->size(1) == 1 &&
                      t->size(2) == T && t->size(3) == E && t->dtype() == q.dtype() && E % 2 == 0,
                  kName, ": rotary_cos ", shape_of(cos), " ", dtype_name(cos.dtype()),
                  ", rotary_sin ", shape_of(sin), " ", dtype_name(sin.dtype()), " (expected [", B,
                  " or 1, 1, ", T, ", ", E, "] in the query's ", dtype_name(q.dtype()),
                  ", E even: the rotary tables of the new positions)");
      ops::check_same_device(kName, q, *t);
    }
  }

  Tensor out, seqlens, rcos, rsin;
  {
    NoGradGuard no_grad;
    if (cos.defined()) {
      rcos = cos.contiguous();
      rsin = sin.contiguous();
    }
    if (options.key_padding_mask.defined())
      mask = options.key_padding_mask.to(DType::boolean).contiguous();
    seqlens = cache_seqlens.to(DType::i64).contiguous();
    out = empty({B, H, T, Ev}, {.dtype = q.dtype(), .device = q.device()});
  }
  backend::KvCacheAttentionArgs a;
  a.dtype = q.dtype();
  a.device = q.device().index;
  a.batch = B;
  a.heads = H;
  a.kv_heads = Hkv;
  a.len_q = T;
  a.capacity = S;
  a.head_dim = E;
  a.head_dim_v = Ev;
  copy_strides(q, a.q_strides);
  copy_strides(k, a.k_strides);
  copy_strides(v, a.v_strides);
  copy_strides(k_cache, a.k_cache_strides);
  copy_strides(v_cache, a.v_cache_strides);
  a.q = ops::view_of(q).data;
  a.k = ops::view_of(k).data;
  a.v = ops::view_of(v).data;
  a.k_cache = ops::view_of(k_cache).data;
  a.v_cache = ops::view_of(v_cache).data;
  a.out = ops::view_of(out).data;
  a.seqlens = static_cast<const int64_t*>(ops::view_of(seqlens).data);
  a.key_mask = mask.defined() ? static_cast<const bool*>(ops::view_of(mask).data) : nullptr;
  a.key_mask_len = mask.defined() ? mask.size(1) : 0;
  a.scale = scale;
  Tensor q_rotated, k_rotated;  // held until the slot has run
  if (rcos.defined()) {
    const int64_t batch_stride = rcos.size(0) == 1 ? 0 : rcos.strides()[0];
    a.rotary_cos = ops::view_of(rcos).data;
    a.rotary_sin = ops::view_of(rsin).data;
    a.rotary_strides[0] = batch_stride;
    a.rotary_strides[1] = rcos.strides()[2];
    if (!ops::backend_of(q).kv_cache_rotary_fits(a)) {
      // The composite: the rotations first, then the call without tables.
      NoGradGuard no_grad;
      q_rotated = rotary_embedding(q, rcos, rsin);
      k_rotated = rotary_embedding(k, rcos, rsin);
      copy_strides(q_rotated, a.q_strides);
      copy_strides(k_rotated, a.k_strides);
      a.q = ops::view_of(q_rotated).data;
      a.k = ops::view_of(k_rotated).data;
      a.rotary_cos = a.rotary_sin = nullptr;
    }
  }
  if (!ops::backend_of(q).kv_cache_attention(a)) {
    // Only the CPU gets here (a GPU reports at the next synchronisation): name the row.
    const std::vector<int64_t> held = seqlens.to_vector<int64_t>();
    const auto bad =
        std::find_if(held.begin(), held.end(), [&](int64_t p) { return p < 0 || p + T > S; });
    const int64_t row = bad - held.begin();
    detail::throw_error(detail::concat(kName, ": cache_seqlens[", row, "] is ",
                                       held[static_cast<size_t>(row)], " and ", T,
                                       " new positions follow (expected 0 <= cache_seqlens and "
                                       "cache_seqlens + T <= the cache's ",
                                       S, " positions)"));
  }
  return out;
}

}  // namespace ember
