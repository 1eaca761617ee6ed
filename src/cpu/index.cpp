// src/cpu/index.cpp — index_select, index_add, gather, scatter (scatter_add and
// scatter_reduce's other combinations).
//
// Index tensors are i64 or i32 and contiguous. Every index is checked before anything is
// written: a negative or too-large index makes the kernel return false and leaves the
// output untouched (the op turns that into an error naming the op and the bad index).
// Shape letters for index_select / index_add: `in`/`out` are [O, S, I] around `dim`
// (O = outer, S = size of dim, I = inner), the selected side is [O, L, I] with
// L = index.numel(). gather / scatter_add walk index's shape with a strided loop in which
// the indexed tensor's stride along `dim` is 0 (the index supplies that coordinate).
// Accumulating kernels never split work along the indexed dim, so duplicate indices add up
// on one thread, in order: results are deterministic. f16/bf16 index_add accumulates in f32
// and rounds once per destination (Note [16-bit index_add] in src/kernels/index.hpp).
#include "kernels/index.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {
namespace {

constexpr int64_t kInnerChunk = 256;  // elements of I per index_add work item

using Layout = kernels::IndexLayout;  // [O, S, I] around the indexed dim
using kernels::layout_of;

template <typename I>
bool all_in_range(const I* index, int64_t n, int64_t size) {
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) ok &= index[i] >= 0 && static_cast<int64_t>(index[i]) < size;
  return ok;
}

}  // namespace

bool index_select(const View& out, const View& in, int dim, const View& index) {
  const int64_t count = kernels::check_index_rows("index_select", in, out, dim, index);
  const Layout l = layout_of(in.shape, dim);
  const size_t row_bytes = static_cast<size_t>(l.inner) * element_size(in.dtype);
  return dispatch_index(index.dtype, "index", "index", [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* idx = static_cast<const I*>(index.data);
    if (!all_in_range(idx, count, l.size)) return false;
    const char* src = static_cast<const char*>(in.data);
    char* dst = static_cast<char*>(out.data);
    const int64_t rows = l.outer * count;
    const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(l.inner, 1));
    parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t o = r / count, j = r % count;
        std::memcpy(dst + static_cast<size_t>(r) * row_bytes,
                    src + static_cast<size_t>(o * l.size + idx[j]) * row_bytes, row_bytes);
      }
    });
    return true;
  });
}

namespace {

// index_add of f32/f64/i32/i64: each source row added into its destination in index order.
template <typename T, typename I>
void index_add_rows(T* o, const T* s, const I* idx, const Layout& l, int64_t count) {
  const int64_t chunks = (l.inner + kInnerChunk - 1) / kInnerChunk;
  const int64_t work = count * std::min(l.inner, kInnerChunk);
  const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(work, 1));
  parallel_for(l.outer * chunks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t outer = item / chunks, c0 = item % chunks * kInnerChunk;
      const int64_t nc = std::min(kInnerChunk, l.inner - c0);
      T* out_base = o + outer * l.size * l.inner + c0;
      const T* src_base = s + outer * count * l.inner + c0;
      for (int64_t j = 0; j < count; ++j) {
        T* __restrict dst = out_base + static_cast<int64_t>(idx[j]) * l.inner;
        const T* __restrict from = src_base + j * l.inner;
        for (int64_t i = 0; i < nc; ++i) dst[i] = static_cast<T>(dst[i] + from[i]);
      }
    }
  });
}

// index_add of f16/bf16 (Note [16-bit index_add]): the source rows sorted stably by destination,
// each destination's run summed in f32 from its old value, in index order, and stored once.
template <typename T, typename I>
void index_add_rows_rounded_once(T* o, const T* s, const I* idx, const Layout& l, int64_t count) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [idx](int64_t a, int64_t b) { return idx[a] < idx[b]; });
  const int64_t chunks = (l.inner + kInnerChunk - 1) / kInnerChunk;
  const int64_t work = count * std::min(l.inner, kInnerChunk);
  const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(work, 1));
  parallel_for(l.outer * chunks, grain, [&](int64_t begin, int64_t end) {
    float acc[kInnerChunk];
    for (int64_t item = begin; item < end; ++item) {
      const int64_t outer = item / chunks, c0 = item % chunks * kInnerChunk;
      const int64_t nc = std::min(kInnerChunk, l.inner - c0);
      T* out_base = o + outer * l.size * l.inner + c0;
      const T* src_base = s + outer * count * l.inner + c0;
      for (int64_t p = 0; p < count;) {
        const I row = idx[order[p]];
        T* dst = out_base + static_cast<int64_t>(row) * l.inner;
        widen_to_f32(acc, dst, nc);
        for (; p < count && idx[order[p]] == row; ++p) {
          const T* from = src_base + order[p] * l.inner;
          for (int64_t i = 0; i < nc; ++i) acc[i] += static_cast<float>(from[i]);
        }
        round_from_f32(dst, acc, nc);
      }
    }
  });
}

}  // namespace

bool index_add(const View& out, int dim, const View& index, const View& src) {
  const int64_t count = kernels::check_index_rows("index_add", out, src, dim, index);
  const Layout l = layout_of(out.shape, dim);
  return dispatch_index(index.dtype, "index", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    const I* idx = static_cast<const I*>(index.data);
    if (!all_in_range(idx, count, l.size)) return false;
    kernels::dispatch_arithmetic<Half, BFloat16>(out.dtype, "index_add", "CPU", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* o = static_cast<T*>(out.data);
      const T* s = static_cast<const T*>(src.data);
      if constexpr (kIsHalfLike<T>)
        index_add_rows_rounded_once(o, s, idx, l, count);
      else
        index_add_rows(o, s, idx, l, count);
    });
    return true;
  });
}

bool gather(const View& out, const View& in, int dim, const View& index) {
  kernels::check_elementwise_index("gather", out, in, index);
  EMBER_ASSERT(out.shape == index.shape, "gather: out must have index's shape");
  const int64_t size = in.shape[dim];
  Shape in_strides = in.strides;  // the index supplies the coordinate along dim
  const int64_t dim_stride = in.strides[dim];
  in_strides[dim] = 0;
  const Operand ops[3] = {
      operand(out), operand(index), {in.data, in_strides.data(), element_size(in.dtype)}};
  const Loop<3> loop = make_loop(index.shape, ops);
  return dispatch_index(index.dtype, "index", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    if (!all_in_range(static_cast<const I*>(index.data), loop.numel, size)) return false;
    dispatch_bytes(element_size(in.dtype), [&](auto tag) {
      using U = typename decltype(tag)::type;
      parallel_loop(loop, kGrainCheap, [&](char* const* p, const int64_t* s, int64_t n) {
        U* o = reinterpret_cast<U*>(p[0]);
        const I* idx = reinterpret_cast<const I*>(p[1]);
        const U* x = reinterpret_cast<const U*>(p[2]);
        const int64_t so = s[0] / static_cast<int64_t>(sizeof(U));
        const int64_t si = s[1] / static_cast<int64_t>(sizeof(I));
        const int64_t sx = s[2] / static_cast<int64_t>(sizeof(U));
        for (int64_t i = 0; i < n; ++i)
          o[i * so] = x[i * sx + static_cast<int64_t>(idx[i * si]) * dim_stride];
      });
    });
    return true;
  });
}

bool scatter(ScatterOp op, const View& out, int dim, const View& index, const View& src) {
  kernels::check_elementwise_index("scatter", out, src, index);
  const int rank = index.shape.size();
  const int64_t size = out.shape[dim];
  // Walk index's shape with `dim` moved innermost, so each thread owns whole lines along
  // dim: every write to one output element then happens on one thread, in order.
  int64_t shape[kMaxRank], out_strides[kMaxRank], idx_strides[kMaxRank], src_strides[kMaxRank];
  int r = 0;
  for (int d = 0; d <= rank; ++d) {
    const int from = d == rank ? dim : d;
    if (d == dim) continue;
    shape[r] = index.shape[from];
    out_strides[r] = from == dim ? 0 : out.strides[from];
    idx_strides[r] = index.strides[from];
    src_strides[r] = src.strides[from];
    ++r;
  }
  const int64_t line = index.shape[dim];
  const int64_t dim_stride = out.strides[dim];
  const Operand ops[3] = {{out.data, out_strides, element_size(out.dtype)},
                          {index.data, idx_strides, element_size(index.dtype)},
                          {src.data, src_strides, element_size(src.dtype)}};
  const Loop<3> loop = make_loop(r, shape, ops);
  return dispatch_index(index.dtype, "index", "index", [&](auto index_tag) {
    using I = typename decltype(index_tag)::type;
    if (!all_in_range(static_cast<const I*>(index.data), loop.numel, size)) return false;
    if (loop.numel == 0) return true;
    dispatch_numeric(out.dtype, "scatter", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const int64_t lines = loop.numel / line;
      const int64_t grain = std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(line, 1));
      parallel_for(lines, grain, [&](int64_t begin, int64_t end) {
        for_each_range(loop, begin * line, end * line,
                       [&](char* const* p, const int64_t* s, int64_t n) {
                         T* o = reinterpret_cast<T*>(p[0]);
                         const I* idx = reinterpret_cast<const I*>(p[1]);
                         const T* x = reinterpret_cast<const T*>(p[2]);
                         const int64_t so = s[0] / static_cast<int64_t>(sizeof(T));
                         const int64_t si = s[1] / static_cast<int64_t>(sizeof(I));
                         const int64_t sx = s[2] / static_cast<int64_t>(sizeof(T));
                         for (int64_t i = 0; i < n; ++i) {
                           T& target = o[i * so + static_cast<int64_t>(idx[i * si]) * dim_stride];
                           target = kernels::scatter_combine(op, target, x[i * sx]);
                         }
                       });
      });
    });
    return true;
  });
}

}  // namespace ember::cpu
