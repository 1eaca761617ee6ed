// src/cpu/attention.cpp — attention_with_kv_cache on the CPU (Note [Attention over a KV cache]
// in src/kernels/attention.hpp), and the fused-attention slots, which the CPU does not have:
// scaled_dot_product_attention composes its CPU path from other ops (src/ops/attention.cpp)
// and never calls them; they refuse clearly if something else does.
#include "kernels/attention.hpp"

#include <cmath>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "ember/error.hpp"

namespace ember::cpu {

bool sdpa_forward(const SdpaArgs&) {
  ember::detail::throw_error(
      "scaled_dot_product_attention: the fused kernel needs CUDA (the CPU path is composed from "
      "other ops)");
}

void sdpa_backward(const SdpaArgs&) {
  ember::detail::throw_error(
      "scaled_dot_product_attention: the fused backward needs CUDA (the CPU path is composed "
      "from other ops)");
}

const char* sdpa_status(int) { return "the fused attention kernel needs CUDA"; }

bool kv_cache_rotary_fits(const KvCacheAttentionArgs&) { return false; }

bool kv_cache_attention(const KvCacheAttentionArgs& a) {
  for (int64_t b = 0; b < a.batch; ++b)
    if (a.seqlens[b] < 0 || a.seqlens[b] + a.len_q > a.capacity) return false;
  const int64_t group = a.heads / a.kv_heads, E = a.head_dim, Ev = a.head_dim_v;
  dispatch_any_float(a.dtype, "attention_with_kv_cache", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = Compute<T>;
    const T* q = static_cast<const T*>(a.q);
    const T* k = static_cast<const T*>(a.k);
    const T* v = static_cast<const T*>(a.v);
    const T* kc = static_cast<const T*>(a.k_cache);
    const T* vc = static_cast<const T*>(a.v_cache);
    T* out = static_cast<T*>(a.out);
    const auto exp = [](A x) { return std::exp(x); };
    // One work item per (b, h, i) query; the cache writes come after every read of the call
    // (the reads of new rows go to k and v: the Note).
    const int64_t queries = a.batch * a.heads * a.len_q;
    parallel_for(queries, std::max<int64_t>(1, 64), [&](int64_t begin, int64_t end) {
      std::vector<A> qv(static_cast<size_t>(E)), acc(static_cast<size_t>(Ev));
      for (int64_t n = begin; n < end; ++n) {
        const int64_t i = n % a.len_q, h = n / a.len_q % a.heads, b = n / (a.len_q * a.heads);
        const int64_t hk = h / group, past = a.seqlens[b];
        const bool* mask_row = a.key_mask ? a.key_mask + b * a.key_mask_len : nullptr;
        const T* qrow = q + kernels::kv_offset(a.q_strides, b, h, i);
        for (int64_t e = 0; e < E; ++e) qv[e] = static_cast<A>(qrow[e * a.q_strides[3]]);
        std::fill(acc.begin(), acc.end(), A(0));
        kernels::OnlineSoftmax<A> sm;
        for (int64_t j = 0; j <= past + i; ++j) {
          if (!kernels::kv_key_allowed(j, i, past, mask_row, a.key_mask_len)) continue;
          const T* krow = kernels::kv_row(kc, a.k_cache_strides, k, a.k_strides, b, hk, j, past);
          const int64_t ks = j < past ? a.k_cache_strides[3] : a.k_strides[3];
          A s = 0;
          for (int64_t e = 0; e < E; ++e) s += qv[e] * static_cast<A>(krow[e * ks]);
          const auto step = sm.add(s * static_cast<A>(a.scale), exp);
          const T* vrow = kernels::kv_row(vc, a.v_cache_strides, v, a.v_strides, b, hk, j, past);
          const int64_t vs = j < past ? a.v_cache_strides[3] : a.v_strides[3];
          for (int64_t e = 0; e < Ev; ++e)
            acc[e] = acc[e] * step.rescale + step.weight * static_cast<A>(vrow[e * vs]);
        }
        T* orow = out + ((b * a.heads + h) * a.len_q + i) * Ev;
        for (int64_t e = 0; e < Ev; ++e) orow[e] = static_cast<T>(acc[e] / sm.sum);
      }
    });
    // The new rows into the caches.
    parallel_for(a.batch * a.kv_heads * a.len_q, 64, [&](int64_t begin, int64_t end) {
      for (int64_t n = begin; n < end; ++n) {
        const int64_t t = n % a.len_q, hk = n / a.len_q % a.kv_heads,
                      b = n / (a.len_q * a.kv_heads), row = a.seqlens[b] + t;
        T* kd = static_cast<T*>(a.k_cache) + kernels::kv_offset(a.k_cache_strides, b, hk, row);
        T* vd = static_cast<T*>(a.v_cache) + kernels::kv_offset(a.v_cache_strides, b, hk, row);
        const T* ks = k + kernels::kv_offset(a.k_strides, b, hk, t);
        const T* vs = v + kernels::kv_offset(a.v_strides, b, hk, t);
        for (int64_t e = 0; e < E; ++e) kd[e * a.k_cache_strides[3]] = ks[e * a.k_strides[3]];
        for (int64_t e = 0; e < Ev; ++e) vd[e * a.v_cache_strides[3]] = vs[e * a.v_strides[3]];
      }
    });
  });
  return true;
}

}  // namespace ember::cpu
