// src/cpu/random.cpp — uniform, normal and dropout from counter-based Philox.
//
// Element i (its position in row-major order) draws block (seed, offset + i), as described
// in Note [Random streams] (src/kernels/random.hpp), so results do not depend on threads or strides
// and the CUDA backend produces the same values. f16/bf16 outputs are drawn as f32 and rounded.
// Contiguous runs go through vectorised loops (Philox's 32x32->64-bit multiplies map to
// vpmuludq); strided ones through the plain strided loop.
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]
#pragma GCC optimize("fp-contract=off")   // Note [Identical clones] (loops.hpp)

#include "kernels/random.hpp"

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {
namespace {

constexpr int64_t kGrainRandom = 4096;  // Philox costs ~20 multiplies per element

template <typename F>
void dispatch_random(DType t, const char* op, F&& f) {
  kernels::dispatch_any_float<Half, BFloat16>(t, op, "CPU", f);
}

template <typename T, typename Gen>
EMBER_VECTORIZE_WIDE void generate_contiguous(T* __restrict o, int64_t n, uint64_t seed,
                                              uint64_t first, Gen gen) {
  for (int64_t i = 0; i < n; ++i)
    o[i] = cast<T>(gen(philox::block_for(seed, first + static_cast<uint64_t>(i))));
}

// Fills `out` with gen(block of element i), converted to T.
template <typename T, typename Gen>
void generate(const View& out, uint64_t seed, uint64_t offset, Gen gen) {
  const Operand ops[1] = {operand(out)};
  const Loop<1> loop = make_loop(out.shape, ops);
  parallel_loop_indexed(loop, kGrainRandom,
                        [&](char* const* p, const int64_t* s, int64_t n, int64_t position) {
                          T* o = reinterpret_cast<T*>(p[0]);
                          const uint64_t first = offset + static_cast<uint64_t>(position);
                          if (s[0] == static_cast<int64_t>(sizeof(T)))
                            return generate_contiguous(o, n, seed, first, gen);
                          const int64_t so = s[0] / static_cast<int64_t>(sizeof(T));
                          for (int64_t i = 0; i < n; ++i)
                            o[i * so] = cast<T>(gen(philox::block_for(seed, first + i)));
                        });
}

template <typename T>
EMBER_VECTORIZE_WIDE void dropout_contiguous(T* __restrict o, T* __restrict m,
                                             const T* __restrict x, int64_t n, uint64_t seed,
                                             uint64_t first, double p, T scale) {
  for (int64_t i = 0; i < n; ++i) {
    const bool kept =
        philox::dropout_keep(philox::block_for(seed, first + static_cast<uint64_t>(i)), p);
    const T keep = kept ? scale : T(0);
    m[i] = keep;
    o[i] = x[i] * keep;
  }
}

}  // namespace

void uniform(const View& out, uint64_t seed, uint64_t offset, double lo, double hi) {
  dispatch_random(out.dtype, "uniform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      generate<T>(out, seed, offset, philox::UniformF64(lo, hi));
    } else {
      generate<T>(out, seed, offset,
                  philox::UniformF32(static_cast<float>(lo), static_cast<float>(hi)));
    }
  });
}

void normal(const View& out, uint64_t seed, uint64_t offset, double mean, double std) {
  dispatch_random(out.dtype, "normal", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      generate<T>(out, seed, offset,
                  [=](const philox::Block& b) { return mean + std * philox::normal_f64(b); });
    } else {
      const float fmean = static_cast<float>(mean), fstd = static_cast<float>(std);
      generate<T>(out, seed, offset,
                  [=](const philox::Block& b) { return fmean + fstd * philox::normal_f32(b); });
    }
  });
}

void dropout(const View& out, const View& mask, const View& in, double p, uint64_t seed,
             uint64_t offset) {
  EMBER_ASSERT(mask.dtype == in.dtype && out.dtype == in.dtype, "dropout: dtype mismatch");
  const Operand ops[3] = {operand(out), operand(mask), operand(in)};
  const Loop<3> loop = make_loop(out.shape, ops);
  dispatch_any_float(in.dtype, "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;  // Note [16-bit floats on the CPU]
    const C scale = p < 1.0 ? static_cast<C>(1.0 / (1.0 - p)) : C(0);
    parallel_loop_indexed(
        loop, kGrainRandom, [&](char* const* ptr, const int64_t* s, int64_t n, int64_t position) {
          T* o = reinterpret_cast<T*>(ptr[0]);
          T* m = reinterpret_cast<T*>(ptr[1]);
          const T* x = reinterpret_cast<const T*>(ptr[2]);
          const uint64_t first = offset + static_cast<uint64_t>(position);
          constexpr int64_t kT = sizeof(T);
          if constexpr (!kIsHalfLike<T>) {
            if (s[0] == kT && s[1] == kT && s[2] == kT)
              return dropout_contiguous(o, m, x, n, seed, first, p, scale);
          }
          const int64_t so = s[0] / kT, sm = s[1] / kT, sx = s[2] / kT;
          for (int64_t i = 0; i < n; ++i) {
            const bool kept = philox::dropout_keep(philox::block_for(seed, first + i), p);
            const C keep = kept ? scale : C(0);
            m[i * sm] = T(keep);
            o[i * so] = T(static_cast<C>(x[i * sx]) * keep);
          }
        });
  });
}

}  // namespace ember::cpu
