// src/cpu/optim.cpp — fused optimizer steps: Backend::adam_step, sgd_step and
// optim_step_multi (Adam/AdamW, SGD, and RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam:
// the per-element math is src/kernels/optim.hpp's, shared with CUDA, run here with plain
// rounded operators inside vectorised loops).
//
// Each step is one pass over memory: every element of the parameter, its gradient and its
// state is read once and written once, where torch.optim's single-tensor path makes 6-10
// passes. The arithmetic is torch.optim's, operation for operation and in the same order,
// in the parameter's dtype with each Python scalar cast to it (see the formulas beside
// each element function in src/kernels/optim.hpp and Note [Fused multiply-add]), so an f32
// step reproduces a float32 PyTorch step bit for bit.
//
// Note [Fused multiply-add]
// PyTorch's CPU kernels (AVX2 build) compute `x.add_(y, alpha=a)` as fma(y, a, x) and
// `x.addcmul_(y, z, value=s)` as fma(s·y, z, x) (GCC contracts the multiply-add); addcdiv
// and plain mul/div round every operation. We use std::fma in exactly those places. It is
// one instruction where the CPU has FMA (the AVX2+FMA path below, and CUDA's fmaf) and a
// correctly rounded library call elsewhere, so every machine gives the same bits.
//
// Note [Blocked Adam]
// sqrt keeps a plain loop scalar (GCC must call sqrtf for errno on negative inputs; see
// unary.cpp), so the Adam loop is split into L1-resident blocks of kBlock elements:
// (A) a vectorised loop updates m, v (and v_max) and writes the second moment used by the
// denominator into a stack buffer, (B) the buffer's square roots come from the SSE/AVX
// sqrt instructions, (C) a vectorised loop finishes the parameter. Memory traffic stays
// one pass; (B) and (C) re-read data that is still in L1.
//
// ISA dispatch: each range function is compiled twice, for AVX2+FMA (chosen at run time
// when the CPU has both) and for the baseline; the loop bodies are always_inline templates
// so each copy is vectorised for its own instruction set.
#pragma GCC optimize("no-trapping-math")  // Note [Vectorising under trapping math]
// Only the std::fma calls may fuse (Note [Fused multiply-add]): no implicit contraction.
#pragma GCC optimize("fp-contract=off")

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"
#include "kernels/optim.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EMBER_OPTIM_AVX2 1
#define EMBER_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
#else
#define EMBER_OPTIM_AVX2 0
#endif
#define EMBER_INLINE inline __attribute__((always_inline))

namespace ember::cpu {
namespace {

using backend::AdamArgs;
using backend::SgdArgs;

constexpr int64_t kBlock = 256;        // elements per L1-resident block (Note [Blocked Adam])
constexpr int64_t kGrainAdam = 16384;  // ~12 flops and 5 streams per element
constexpr int64_t kGrainSgd = kGrainCheap;

struct Baseline {};  // x86-64 baseline (SSE2)
struct Avx2Fma {};   // AVX2 + FMA, picked at run time

bool use_avx2_fma() {
#if EMBER_OPTIM_AVX2
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
#else
  return false;
#endif
}

// The CPU's rounding policy: each operator rounds once (no contraction in this file), fma is
// std::fma.
struct CpuRound {
  template <typename T>
  static T mul(T a, T b) {
    return a * b;
  }
  template <typename T>
  static T add(T a, T b) {
    return a + b;
  }
  template <typename T>
  static T div(T a, T b) {
    return a / b;
  }
  template <typename T>
  static T sqrt(T a) {
    return std::sqrt(a);
  }
  template <typename T>
  static T fma(T a, T b, T c) {
    return std::fma(a, b, c);
  }
};

// ---- square roots of a block (Note [Blocked Adam]) ----

template <typename T>
void sqrt_block(Baseline, T* x, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float>) {
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
  } else {
    for (; i + 2 <= n; i += 2) _mm_storeu_pd(x + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
  }
#endif
  for (; i < n; ++i) x[i] = std::sqrt(x[i]);
}

#if EMBER_OPTIM_AVX2
EMBER_TARGET_AVX2_FMA void sqrt_block(Avx2Fma, float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) _mm_store_ss(x + i, _mm_sqrt_ss(_mm_load_ss(x + i)));
}
EMBER_TARGET_AVX2_FMA void sqrt_block(Avx2Fma, double* x, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(x + i, _mm256_sqrt_pd(_mm256_loadu_pd(x + i)));
  for (; i < n; ++i) _mm_store_sd(x + i, _mm_sqrt_sd(_mm_load_sd(x + i), _mm_load_sd(x + i)));
}
#endif

// ---- Adam / AdamW (the element formula: kernels::adam_element) ----

using kernels::adam_scalars;
using kernels::AdamScalars;

// (A): moments; `second` gets the second moment the denominator uses. Each loop loads into
// locals and stores back, so the element function sees no pointer and the __restrict
// pointers keep the loop free of alias checks (with them GCC gave up vectorising).
template <typename T, bool kL2, bool kAmsgrad>
EMBER_INLINE void adam_moments(const T* __restrict p, const T* __restrict g, T* __restrict m,
                               T* __restrict v, T* __restrict vmax, T* __restrict second, int64_t n,
                               const AdamScalars<T>& s) {
  for (int64_t i = 0; i < n; ++i) {
    T mi = m[i], vi = v[i], top = kAmsgrad ? vmax[i] : T(0);
    second[i] = kernels::adam_moments_element<CpuRound>(p[i], g[i], mi, vi, &top,
                                                        kernels::AdamFlags{kL2, kAmsgrad}, s);
    m[i] = mi;
    v[i] = vi;
    if constexpr (kAmsgrad) vmax[i] = top;
  }
}

// (C): the parameter, from m and the square roots of the second moments.
template <typename T>
EMBER_INLINE void adam_apply(T* __restrict p, const T* __restrict m, const T* __restrict root,
                             int64_t n, const AdamScalars<T>& s) {
  for (int64_t i = 0; i < n; ++i) {
    T pi = p[i];
    kernels::adam_param_element<CpuRound>(pi, m[i], root[i], s);
    p[i] = pi;
  }
}

template <typename Isa, typename T, bool kL2, bool kAmsgrad>
EMBER_INLINE void adam_range_body(T* p, const T* g, T* m, T* v, T* vmax, int64_t begin, int64_t end,
                                  const AdamScalars<T>& s) {
  alignas(64) T second[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = std::min(kBlock, end - b);
    adam_moments<T, kL2, kAmsgrad>(p + b, g + b, m + b, v + b, kAmsgrad ? vmax + b : nullptr,
                                   second, n, s);
    sqrt_block(Isa{}, second, n);
    adam_apply<T>(p + b, m + b, second, n, s);
  }
}

template <typename T, bool kL2, bool kAmsgrad>
void adam_range_baseline(T* p, const T* g, T* m, T* v, T* vmax, int64_t begin, int64_t end,
                         const AdamScalars<T>& s) {
  adam_range_body<Baseline, T, kL2, kAmsgrad>(p, g, m, v, vmax, begin, end, s);
}

#if EMBER_OPTIM_AVX2
template <typename T, bool kL2, bool kAmsgrad>
EMBER_TARGET_AVX2_FMA void adam_range_avx2(T* p, const T* g, T* m, T* v, T* vmax, int64_t begin,
                                           int64_t end, const AdamScalars<T>& s) {
  adam_range_body<Avx2Fma, T, kL2, kAmsgrad>(p, g, m, v, vmax, begin, end, s);
}
#endif

template <typename T, bool kL2, bool kAmsgrad>
void adam_typed(const View& param, const View& grad, const View& exp_avg, const View& exp_avg_sq,
                const View& max_exp_avg_sq, const AdamArgs& args) {
  T* p = static_cast<T*>(param.data);
  const T* g = static_cast<const T*>(grad.data);
  T* m = static_cast<T*>(exp_avg.data);
  T* v = static_cast<T*>(exp_avg_sq.data);
  T* vmax = static_cast<T*>(max_exp_avg_sq.data);
  const AdamScalars<T> s = adam_scalars<T>(args);
  const bool avx2 = use_avx2_fma();
  parallel_for(param.numel(), kGrainAdam, [&](int64_t begin, int64_t end) {
#if EMBER_OPTIM_AVX2
    if (avx2) {
      adam_range_avx2<T, kL2, kAmsgrad>(p, g, m, v, vmax, begin, end, s);
      return;
    }
#endif
    (void)avx2;
    adam_range_baseline<T, kL2, kAmsgrad>(p, g, m, v, vmax, begin, end, s);
  });
}

template <typename T>
void adam_dispatch(const View& param, const View& grad, const View& exp_avg, const View& exp_avg_sq,
                   const View& max_exp_avg_sq, const AdamArgs& args) {
  const bool l2 = !args.decoupled_weight_decay && args.weight_decay != 0.0;
  if (l2) {
    if (args.amsgrad)
      adam_typed<T, true, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
    else
      adam_typed<T, true, false>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
  } else {
    if (args.amsgrad)
      adam_typed<T, false, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
    else
      adam_typed<T, false, false>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
  }
}

// ---- SGD (the element formula: kernels::sgd_element) ----

using kernels::sgd_scalars;
using kernels::SgdScalars;

template <typename T, bool kL2, bool kMomentum, bool kFirst, bool kNesterov>
EMBER_INLINE void sgd_body(T* __restrict p, const T* __restrict g, T* __restrict buf, int64_t n,
                           const SgdScalars<T>& s) {
  for (int64_t i = 0; i < n; ++i) {  // locals, as adam_moments
    T pi = p[i], bi = kMomentum && !kFirst ? buf[i] : T(0);
    kernels::sgd_element<CpuRound>(pi, g[i], &bi,
                                   kernels::SgdFlags{kL2, kMomentum, kFirst, kNesterov}, s);
    p[i] = pi;
    if constexpr (kMomentum) buf[i] = bi;
  }
}

template <typename T, bool kL2, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_run_baseline(T* p, const T* g, T* buf, int64_t n, const SgdScalars<T>& s) {
  sgd_body<T, kL2, kMomentum, kFirst, kNesterov>(p, g, buf, n, s);
}

#if EMBER_OPTIM_AVX2
template <typename T, bool kL2, bool kMomentum, bool kFirst, bool kNesterov>
EMBER_TARGET_AVX2_FMA void sgd_run_avx2(T* p, const T* g, T* buf, int64_t n,
                                        const SgdScalars<T>& s) {
  sgd_body<T, kL2, kMomentum, kFirst, kNesterov>(p, g, buf, n, s);
}
#endif

template <typename T, bool kL2, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_typed(const View& param, const View& grad, const View& momentum_buf, const SgdArgs& a) {
  T* p = static_cast<T*>(param.data);
  const T* g = static_cast<const T*>(grad.data);
  T* buf = static_cast<T*>(momentum_buf.data);
  const SgdScalars<T> s = sgd_scalars<T>(a);
  const bool avx2 = use_avx2_fma();
  parallel_for(param.numel(), kGrainSgd, [&](int64_t begin, int64_t end) {
    T* b = kMomentum ? buf + begin : nullptr;
#if EMBER_OPTIM_AVX2
    if (avx2) {
      sgd_run_avx2<T, kL2, kMomentum, kFirst, kNesterov>(p + begin, g + begin, b, end - begin, s);
      return;
    }
#endif
    (void)avx2;
    sgd_run_baseline<T, kL2, kMomentum, kFirst, kNesterov>(p + begin, g + begin, b, end - begin, s);
  });
}

// Turns a runtime flag into a template argument: f(std::true_type{}) or f(std::false_type{}).
template <typename F>
void with_bool(bool b, F&& f) {
  if (b)
    f(std::true_type{});
  else
    f(std::false_type{});
}

template <typename T>
void sgd_dispatch(const View& param, const View& grad, const View& momentum_buf, const SgdArgs& a) {
  with_bool(a.weight_decay != 0.0, [&](auto l2) {
    if (a.momentum == 0.0) {
      sgd_typed<T, decltype(l2)::value, false, false, false>(param, grad, momentum_buf, a);
      return;
    }
    with_bool(a.first_step, [&](auto first) {
      with_bool(a.nesterov, [&](auto nesterov) {
        sgd_typed<T, decltype(l2)::value, true, decltype(first)::value, decltype(nesterov)::value>(
            param, grad, momentum_buf, a);
      });
    });
  });
}

void check_views(const char* op, const View& param, std::initializer_list<const View*> others) {
  EMBER_ASSERT(param.dtype == DType::f32 || param.dtype == DType::f64, op,
               ": unsupported dtype (got ", dtype_name(param.dtype), ", expected f32 or f64)");
  for (const View* v : others) {
    EMBER_ASSERT(v->dtype == param.dtype && v->numel() == param.numel(), op,
                 ": state views must match the parameter");
  }
}

// One parameter's step; the multi-tensor slots below run it on each slot (the CPU has no
// launches to save).
void adam_step(const View& param, const View& grad, const View& exp_avg, const View& exp_avg_sq,
               const View& max_exp_avg_sq, const AdamArgs& args) {
  check_views("adam_step", param, {&grad, &exp_avg, &exp_avg_sq});
  EMBER_ASSERT(!args.amsgrad || max_exp_avg_sq.data != nullptr,
               "adam_step: amsgrad needs max_exp_avg_sq");
  if (param.dtype == DType::f32)
    adam_dispatch<float>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
  else
    adam_dispatch<double>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, args);
}

void sgd_step(const View& param, const View& grad, const View& momentum_buf, const SgdArgs& args) {
  check_views("sgd_step", param, {&grad});
  EMBER_ASSERT(args.momentum == 0.0 || momentum_buf.data != nullptr,
               "sgd_step: momentum needs a buffer");
  if (param.dtype == DType::f32)
    sgd_dispatch<float>(param, grad, momentum_buf, args);
  else
    sgd_dispatch<double>(param, grad, momentum_buf, args);
}

View flat_view(void* data, DType dtype, int64_t numel) {
  return {data, dtype, 0, Shape{numel}, Shape{1}};
}

// Note [Blocked gradient norms]
// grad_norm_multi sums over fixed blocks of kNormBlock elements of each tensor, the blocks in
// parallel, each in kNormLanes f64 lanes (a single running f64 sum does not vectorise), and
// then adds the blocks' sums in order: the result depends on neither the thread count nor
// the schedule. GPT-2 small's 16M gradients: 30 ms a step on one thread before.
constexpr int64_t kNormBlock = 16384;
constexpr int kNormLanes = 8;

template <typename T, bool kSquare>
EMBER_VECTORIZE_WIDE double lane_sum(const T* __restrict g, int64_t n) {
  double lane[kNormLanes] = {};
  int64_t i = 0;
  for (; i + kNormLanes <= n; i += kNormLanes)
    for (int j = 0; j < kNormLanes; ++j) {
      const double x = static_cast<double>(g[i + j]);
      lane[j] += kSquare ? x * x : std::fabs(x);
    }
  for (; i < n; ++i) {
    const double x = static_cast<double>(g[i]);
    lane[0] += kSquare ? x * x : std::fabs(x);
  }
  double acc = 0.0;
  for (int j = 0; j < kNormLanes; ++j) acc += lane[j];
  return acc;
}

template <typename T>
double norm_power_sum(const T* g, int64_t n, double p) {
  if (p == 1.0) return lane_sum<T, false>(g, n);
  if (p == 2.0) return lane_sum<T, true>(g, n);
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += std::pow(std::fabs(static_cast<double>(g[i])), p);
  return acc;
}

template <typename T>
double norm_max(const T* g, int64_t n) {
  double m = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(g[i]));
    if (a > m || std::isnan(a)) m = a;
  }
  return m;
}

// ---- optim_step_multi: the elementwise optimizers of src/kernels/optim.hpp ----

constexpr int64_t kGrainOptim = 16384;

template <backend::OptimAlgo kAlgo, typename T>
void optim_range(T* p, const T* g, T* s0, T* s1, T* s2, int64_t begin, int64_t end,
                 const kernels::OptimScalars<T>& s) {
  for (int64_t i = begin; i < end; ++i)
    kernels::optim_element<kAlgo, CpuRound>(p, g, s0, s1, s2, i, s);
}

#if EMBER_OPTIM_AVX2
template <backend::OptimAlgo kAlgo, typename T>
EMBER_TARGET_AVX2_FMA void optim_range_avx2(T* p, const T* g, T* s0, T* s1, T* s2, int64_t begin,
                                            int64_t end, const kernels::OptimScalars<T>& s) {
  for (int64_t i = begin; i < end; ++i)
    kernels::optim_element<kAlgo, CpuRound>(p, g, s0, s1, s2, i, s);
}
#endif

template <typename T>
void optim_slot(const backend::OptimSlot& slot, const backend::OptimArgs& args,
                const kernels::OptimScalars<T>& s) {
  T* p = static_cast<T*>(slot.param);
  const T* g = static_cast<const T*>(slot.grad);
  T* s0 = static_cast<T*>(slot.state[0]);
  T* s1 = static_cast<T*>(slot.state[1]);
  T* s2 = static_cast<T*>(slot.state[2]);
  const bool avx2 = use_avx2_fma();
  kernels::with_optim_algo(args.algo, [&](auto algo) {
    constexpr backend::OptimAlgo kAlgo = decltype(algo)::value;
    parallel_for(slot.numel, kGrainOptim, [&](int64_t begin, int64_t end) {
#if EMBER_OPTIM_AVX2
      if (avx2) {
        optim_range_avx2<kAlgo, T>(p, g, s0, s1, s2, begin, end, s);
        return;
      }
#endif
      (void)avx2;
      optim_range<kAlgo, T>(p, g, s0, s1, s2, begin, end, s);
    });
  });
}

}  // namespace

void adam_step_multi(int /*device*/, DType dtype, const backend::OptimSlot* slots, int64_t count,
                     const AdamArgs& scaled_args) {
  // Loss scaling (Note [Skipped steps] in src/kernels/optim.hpp): read where the flags live.
  if (scaled_args.found_inf && *scaled_args.found_inf != 0.0f) return;
  AdamArgs args = scaled_args;
  if (args.skipped_steps) args.step -= *args.skipped_steps;
  args.skipped_steps = nullptr;
  for (int64_t i = 0; i < count; ++i) {
    const backend::OptimSlot& s = slots[i];
    adam_step(flat_view(s.param, dtype, s.numel),
              flat_view(const_cast<void*>(s.grad), dtype, s.numel),
              flat_view(s.state[0], dtype, s.numel), flat_view(s.state[1], dtype, s.numel),
              s.state[2] ? flat_view(s.state[2], dtype, s.numel) : View{}, args);
  }
}

void sgd_step_multi(int /*device*/, DType dtype, const backend::OptimSlot* slots, int64_t count,
                    const SgdArgs& scaled_args) {
  if (scaled_args.found_inf && *scaled_args.found_inf != 0.0f) return;
  SgdArgs args = scaled_args;
  if (args.skipped_steps) args.first_step = sgd_scalars<float>(args, *args.skipped_steps).first;
  args.skipped_steps = nullptr;
  for (int64_t i = 0; i < count; ++i) {
    const backend::OptimSlot& s = slots[i];
    sgd_step(flat_view(s.param, dtype, s.numel),
             flat_view(const_cast<void*>(s.grad), dtype, s.numel),
             s.state[0] ? flat_view(s.state[0], dtype, s.numel) : View{}, args);
  }
}

void optim_step_multi(int /*device*/, DType dtype, const backend::OptimSlot* slots, int64_t count,
                      const backend::OptimArgs& args) {
  EMBER_ASSERT(dtype == DType::f32 || dtype == DType::f64, "optim_step_multi: unsupported dtype ",
               dtype_name(dtype), " (expected f32 or f64)");
  const kernels::OptimScalars<float> s32 = kernels::optim_scalars<float>(args);
  const kernels::OptimScalars<double> s64 = kernels::optim_scalars<double>(args);
  for (int64_t i = 0; i < count; ++i) {
    for (int k = 0; k < 3; ++k)
      EMBER_ASSERT(!kernels::optim_uses_state(args, k) || slots[i].numel == 0 ||
                       slots[i].state[k] != nullptr,
                   "optim_step_multi: slot ", i, " lacks state buffer ", k);
    if (dtype == DType::f32)
      optim_slot<float>(slots[i], args, s32);
    else
      optim_slot<double>(slots[i], args, s64);
  }
}

void grad_norm_multi(int /*device*/, DType dtype, void* const* grads, const int64_t* numels,
                     int64_t count, double norm_type, void* total_norm) {
  EMBER_ASSERT(dtype == DType::f32 || dtype == DType::f64, "grad_norm_multi: unsupported dtype ",
               dtype_name(dtype), " (expected f32 or f64)");
  const bool inf = std::isinf(norm_type);
  // Note [Blocked gradient norms]: (tensor, first element) of every block, in order.
  std::vector<std::pair<int64_t, int64_t>> blocks;
  for (int64_t i = 0; i < count; ++i)
    for (int64_t b = 0; b < numels[i]; b += kNormBlock) blocks.push_back({i, b});
  std::vector<double> parts(blocks.size());
  parallel_for(static_cast<int64_t>(blocks.size()), 4, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const auto [i, first] = blocks[static_cast<size_t>(b)];
      const int64_t n = std::min(kNormBlock, numels[i] - first);
      parts[static_cast<size_t>(b)] =
          dtype == DType::f32
              ? (inf ? norm_max(static_cast<const float*>(grads[i]) + first, n)
                     : norm_power_sum(static_cast<const float*>(grads[i]) + first, n, norm_type))
              : (inf ? norm_max(static_cast<const double*>(grads[i]) + first, n)
                     : norm_power_sum(static_cast<const double*>(grads[i]) + first, n, norm_type));
    }
  });
  double acc = 0.0;
  for (const double part : parts)
    acc = inf ? ((part > acc || std::isnan(part)) ? part : acc) : acc + part;
  const double total = inf ? acc
                           : (norm_type == 1.0   ? acc
                              : norm_type == 2.0 ? std::sqrt(acc)
                                                 : std::pow(acc, 1.0 / norm_type));
  if (dtype == DType::f32)
    *static_cast<float*>(total_norm) = static_cast<float>(total);
  else
    *static_cast<double*>(total_norm) = total;
}

void clip_grads_by_norm(int /*device*/, DType dtype, void* const* grads, const int64_t* numels,
                        int64_t count, double max_norm, const void* total_norm) {
  const double total = dtype == DType::f32 ? *static_cast<const float*>(total_norm)
                                           : *static_cast<const double*>(total_norm);
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  for (int64_t i = 0; i < count; ++i) {
    parallel_for(numels[i], kGrainCheap, [&](int64_t begin, int64_t end) {
      if (dtype == DType::f32) {
        float* __restrict g = static_cast<float*>(grads[i]);
        const float c = static_cast<float>(coef);
        for (int64_t j = begin; j < end; ++j) g[j] *= c;
      } else {
        double* __restrict g = static_cast<double*>(grads[i]);
        for (int64_t j = begin; j < end; ++j) g[j] *= coef;
      }
    });
  }
}

// ---- loss scaling (GradScaler) ----

namespace {

template <typename T>
void unscale_one(T* g, int64_t n, T inv_scale, float* found_inf) {
  bool bad = false;
  for (int64_t i = 0; i < n; ++i) {
    bad |= !std::isfinite(g[i]);
    g[i] = g[i] * inv_scale;
  }
  if (bad) *found_inf = 1.0f;
}

}  // namespace

void amp_unscale(int /*device*/, DType dtype, void* const* grads, const int64_t* numels,
                 int64_t count, const void* scale, void* found_inf) {
  EMBER_ASSERT(dtype == DType::f32 || dtype == DType::f64, "amp_unscale: unsupported dtype ",
               dtype_name(dtype), " (expected f32 or f64)");
  // torch: inv_scale = scale.double().reciprocal().float(), multiplied in the grad's opmath.
  const float inv =
      static_cast<float>(1.0 / static_cast<double>(*static_cast<const float*>(scale)));
  float* found = static_cast<float*>(found_inf);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == DType::f32)
      unscale_one(static_cast<float*>(grads[i]), numels[i], inv, found);
    else
      unscale_one(static_cast<double*>(grads[i]), numels[i], static_cast<double>(inv), found);
  }
}

void amp_update_scale(int /*device*/, void* scale, void* growth_tracker, void* found_combined,
                      const float* const* found_infs, int64_t* const* skipped_steps, int64_t count,
                      double growth_factor, double backoff_factor, int64_t growth_interval) {
  bool found = false;
  for (int64_t i = 0; i < count; ++i) found |= *found_infs[i] != 0.0f;
  *static_cast<float*>(found_combined) = found ? 1.0f : 0.0f;
  if (scale)
    kernels::amp_update_scale_rule(*static_cast<float*>(scale),
                                   *static_cast<int32_t*>(growth_tracker), found, growth_factor,
                                   backoff_factor, growth_interval);
  for (int64_t i = 0; i < count; ++i)
    if (skipped_steps[i] && *found_infs[i] != 0.0f) *skipped_steps[i] += 1;
}

}  // namespace ember::cpu
