// src/kernels/attention.hpp — attention_with_kv_cache's math, shared by the CPU
// (src/cpu/attention.cpp) and CUDA (src/cuda/attention_kv.cu) kernels.
//
// Note [Attention over a KV cache]
// Row b holds P = seqlens[b] positions in its cache; the call adds T new keys and values at
// rows P .. P + T - 1, and query i (0 <= i < T) attends to keys j <= P + i that key_mask does
// not mark as padding (a mask of L < S_max columns leaves keys j >= L real), and always to its
// own key j = P + i, so no query has an empty row and no NaN can appear (a padded query of a
// left-padded prompt attends to itself only, as CausalLMImpl's masks do). Key j < P is read from
// the cache, j >= P from the new k and v: a kernel's reads never touch the rows the same call
// writes, so the writes and the reads need no ordering between threads or blocks. Scores are
// scale·(q·k) in the compute precision (f32 for the 16-bit floats, f64 for f64); the softmax keeps
// a running maximum and sum (one pass over the keys: OnlineSoftmax), the weighted values are summed
// in the same precision and rounded once into out.
#pragma once

#include <cstdint>

#include "backend/attention.hpp"
#include "kernels/common.hpp"

namespace ember::kernels {

using backend::KvCacheAttentionArgs;

/// Element offset of [b, h, j, 0] in a [B, H, rows, E] operand with these strides.
EMBER_HD inline int64_t kv_offset(const int64_t* strides, int64_t b, int64_t h, int64_t j) {
  return b * strides[0] + h * strides[1] + j * strides[2];
}

/// Where key (or value) j of row b, key head hk, lives: the cache for j < past, else the
/// call's new rows (Note [Attention over a KV cache]).
template <typename T>
EMBER_HD inline const T* kv_row(const T* cache, const int64_t* cache_strides, const T* fresh,
                                const int64_t* fresh_strides, int64_t b, int64_t hk, int64_t j,
                                int64_t past) {
  return j < past ? cache + kv_offset(cache_strides, b, hk, j)
                  : fresh + kv_offset(fresh_strides, b, hk, j - past);
}

/// Whether query i of a row with `past` cached positions attends to key j (mask_row: the
/// row's key_mask of mask_len columns, or null for no padding).
EMBER_HD inline bool kv_key_allowed(int64_t j, int64_t i, int64_t past, const bool* mask_row,
                                    int64_t mask_len) {
  return j == past + i || (j < past + i && (mask_row == nullptr || j >= mask_len || mask_row[j]));
}

/// The running softmax of one query: add(s) takes the next score and returns the factor the
/// accumulated sums are rescaled by and the new key's weight (exp relative to the maximum).
/// `Exp` is the backend's exp for A.
template <typename A>
struct OnlineSoftmax {
  A max{};
  A sum{};
  bool any = false;
  struct Step {
    A rescale;
    A weight;
  };
  template <typename Exp>
  EMBER_HD Step add(A s, Exp exp) {
    if (!any) {
      any = true;
      max = s;
      sum = A(1);
      return {A(0), A(1)};
    }
    const A m = s > max ? s : max;
    const Step step{exp(max - m), exp(s - m)};
    sum = sum * step.rescale + step.weight;
    max = m;
    return step;
  }
  /// Merges another query's partial state (the same query's keys split between workers):
  /// returns the factors this and `o`'s accumulators are multiplied by before adding them.
  template <typename Exp>
  EMBER_HD Step merge(const OnlineSoftmax& o, Exp exp) {
    if (!o.any) return {A(1), A(0)};
    if (!any) {
      *this = o;
      return {A(0), A(1)};
    }
    const A m = o.max > max ? o.max : max;
    const Step step{exp(max - m), exp(o.max - m)};
    sum = sum * step.rescale + o.sum * step.weight;
    max = m;
    return step;
  }
};

}  // namespace ember::kernels
