// src/cpu/elementwise.cpp — fill, copy (with dtype casts) and where, for every dtype.
//
// All three walk their operands with the strided loop of loops.hpp (Note [Strided loops]):
// contiguous operands collapse to one flat run that is a memcpy / memset-like loop.
//
// Note [Vectorised bf16 casts]
// Autocast casts whole activations between f32 and bf16 (GPT-2's logits: 103M elements a
// step each way), so the contiguous f32 <-> bf16 runs have loops of their own, compiled for
// AVX-512 too (EMBER_VECTORIZE_WIDE): the rounding is BFloat16's own (round to nearest even,
// NaN kept quiet) written branch-free in integer operations, so every clone gives BFloat16's
// bits. Through BFloat16's constructor in the generic loop the cast ran at 0.7 ns an element.
#include <bit>
#include <cstring>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {

void fill(const View& out, double value) {
  const Operand ops[1] = {operand(out)};
  const Loop<1> loop = make_loop(out.shape, ops);
  dispatch_all(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = cast<T>(value);
    parallel_loop(loop, kGrainCheap, [v](char* const* p, const int64_t* s, int64_t n) {
      T* __restrict o = reinterpret_cast<T*>(p[0]);
      if (s[0] == static_cast<int64_t>(sizeof(T))) {
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        const int64_t so = s[0] / static_cast<int64_t>(sizeof(T));
        for (int64_t i = 0; i < n; ++i) o[i * so] = v;
      }
    });
  });
}

void arange(const View& out, double start, double step) {
  const int64_t n = out.shape.numel();
  dispatch_all(out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = static_cast<T*>(out.data);
    parallel_for(n, kGrainCheap, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) o[i] = cast<T>(kernels::arange_value(start, step, i));
    });
  });
}

namespace {

EMBER_VECTORIZE_WIDE void bf16_from_f32(uint16_t* __restrict o, const float* __restrict x,
                                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(x[i]);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    o[i] = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
}

EMBER_VECTORIZE_WIDE void f32_from_bf16(float* __restrict o, const uint16_t* __restrict x,
                                        int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = std::bit_cast<float>(static_cast<uint32_t>(x[i]) << 16);
}

constexpr int64_t kTile = 32;  // elements per side of a transpose tile

// A transposing copy (out contiguous along the last dim, in along the one before): walking
// out's rows would read `in` a cache line per element, so both dims go in kTile² tiles.
template <typename To, typename From>
void copy_tiled(const Loop<2>& loop) {
  const int r = loop.rank;
  const int64_t rows = loop.shape[r - 2], cols = loop.shape[r - 1];
  const int64_t outer = loop.numel / (rows * cols);
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  const int64_t so_r = loop.strides[0][r - 2] / static_cast<int64_t>(sizeof(To));
  const int64_t so_c = loop.strides[0][r - 1] / static_cast<int64_t>(sizeof(To));
  const int64_t sx_r = loop.strides[1][r - 2] / static_cast<int64_t>(sizeof(From));
  const int64_t sx_c = loop.strides[1][r - 1] / static_cast<int64_t>(sizeof(From));
  const int64_t grain = std::max<int64_t>(1, kGrainCheap / (kTile * kTile));
  parallel_for(outer * row_tiles * col_tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      int64_t rest = t / (row_tiles * col_tiles);
      const int64_t tile = t % (row_tiles * col_tiles);
      char* o_base = loop.data[0];
      char* x_base = loop.data[1];
      for (int d = r - 3; d >= 0; --d) {  // offsets of the outer dims
        const int64_t i = rest % loop.shape[d];
        rest /= loop.shape[d];
        o_base += i * loop.strides[0][d];
        x_base += i * loop.strides[1][d];
      }
      const int64_t r0 = tile / col_tiles * kTile, c0 = tile % col_tiles * kTile;
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      To* o = reinterpret_cast<To*>(o_base);
      const From* x = reinterpret_cast<const From*>(x_base);
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = c0; j < c1; ++j) o[i * so_r + j * so_c] = cast<To>(x[i * sx_r + j * sx_c]);
    }
  });
}

template <typename To, typename From>
void copy_typed(const Loop<2>& loop) {
  const int r = loop.rank;
  if (r >= 2 && loop.shape[r - 1] >= kTile && loop.shape[r - 2] >= kTile &&
      loop.strides[1][r - 1] != static_cast<int64_t>(sizeof(From)) &&
      loop.strides[1][r - 2] == static_cast<int64_t>(sizeof(From))) {
    copy_tiled<To, From>(loop);
    return;
  }
  parallel_loop(loop, kGrainCheap, [](char* const* p, const int64_t* s, int64_t n) {
    To* __restrict o = reinterpret_cast<To*>(p[0]);
    const From* __restrict x = reinterpret_cast<const From*>(p[1]);
    constexpr int64_t kTo = sizeof(To), kFrom = sizeof(From);
    if (s[0] == kTo && s[1] == kFrom) {
      if constexpr (std::is_same_v<To, From>) {
        std::memcpy(o, x, static_cast<size_t>(n) * sizeof(To));
      } else if constexpr (std::is_same_v<To, BFloat16> && std::is_same_v<From, float>) {
        bf16_from_f32(reinterpret_cast<uint16_t*>(o), x, n);
      } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, BFloat16>) {
        f32_from_bf16(o, reinterpret_cast<const uint16_t*>(x), n);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = cast<To>(x[i]);
      }
    } else if (s[0] == kTo && s[1] == 0) {
      const To v = cast<To>(x[0]);
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    } else {
      const int64_t so = s[0] / kTo, sx = s[1] / kFrom;
      for (int64_t i = 0; i < n; ++i) o[i * so] = cast<To>(x[i * sx]);
    }
  });
}

}  // namespace

void copy(const View& out, const View& in) {
  EMBER_ASSERT(in.shape.size() == out.shape.size(), "copy: rank mismatch ", in.shape.size(), " vs ",
               out.shape.size());
  const Operand ops[2] = {operand(out), operand(in)};
  const Loop<2> loop = make_loop(out.shape, ops);
  dispatch_all(out.dtype, [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    dispatch_all(in.dtype, [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      copy_typed<To, From>(loop);
    });
  });
}

void where(const View& out, const View& cond, const View& a, const View& b) {
  EMBER_ASSERT(cond.dtype == DType::boolean, "where: condition must be bool (got ",
               dtype_name(cond.dtype), ")");
  EMBER_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype, "where: dtype mismatch");
  const Operand ops[4] = {operand(out), operand(cond), operand(a), operand(b)};
  const Loop<4> loop = make_loop(out.shape, ops);
  dispatch_bytes(element_size(out.dtype), [&](auto tag) {
    using U = typename decltype(tag)::type;
    parallel_loop(loop, kGrainCheap, [](char* const* p, const int64_t* s, int64_t n) {
      U* __restrict o = reinterpret_cast<U*>(p[0]);
      const uint8_t* __restrict c = reinterpret_cast<const uint8_t*>(p[1]);
      const U* __restrict x = reinterpret_cast<const U*>(p[2]);
      const U* __restrict y = reinterpret_cast<const U*>(p[3]);
      constexpr int64_t kU = sizeof(U);
      if (s[0] == kU && s[1] == 1 && s[2] == kU && s[3] == kU) {
        for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? x[i] : y[i];
      } else {
        const int64_t so = s[0] / kU, sc = s[1], sx = s[2] / kU, sy = s[3] / kU;
        for (int64_t i = 0; i < n; ++i) o[i * so] = c[i * sc] ? x[i * sx] : y[i * sy];
      }
    });
  });
}

}  // namespace ember::cpu
