// src/cpu/norm.cpp — fused batch-normalisation kernels (per-channel statistics, the
// backward's per-channel sums, the channel-wise affine pass both directions use) and the
// layer-norm and rms-norm forward and backward (the backward with the weight's and bias's
// gradients; the formulas in src/kernels/norm.hpp, f16/bf16 as Note [16-bit layer norm] there:
// rows widened into f32 scratch and run through the f32 row routines, results rounded once).
//
// Shape letters: N batch, C channels, S = the product of the dims after C. Data is a
// contiguous [N, C, S], i.e. N·C runs of S contiguous elements; channel c owns runs
// n·C + c. Reductions split over channels (each task owns its output, sums are
// deterministic); the affine pass splits over runs.
//
// Note [Merged per-run statistics]
// Each run's mean and sum of squared deviations are computed in two passes over the run
// (which sits in L1), then runs are merged with Chan et al.'s pairwise update:
//   M2 = M2_a + M2_b + δ²·n_a·n_b / (n_a + n_b),  δ = mean_b - mean_a.
// One pass over memory, with the accuracy of a two-pass variance (no E[x²] - E[x]²
// cancellation), accumulated in f64 for f32 data.
#pragma GCC optimize("fp-contract=off")  // 16-bit rows run the f32 routines bit for bit

#include "kernels/norm.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu/kernels.hpp"
#include "cpu/loops.hpp"

namespace ember::cpu {

namespace {

struct Nc3 {
  int64_t n, c, s;
};

Nc3 dims_of(const View& v) { return {v.shape[0], v.shape[1], v.shape[2]}; }

// Grain in channels (reductions) or runs (affine) for tasks of `work` elements each.
int64_t grain_for(int64_t work) {
  return std::max<int64_t>(1, kGrainCheap / std::max<int64_t>(work, 1));
}

// Sums over a run in kLanes independent f64 accumulators: the lanes map onto vector
// registers (floating-point adds are not reassociated for us) and hide the add latency.
constexpr int kLanes = 8;

template <typename T, typename F>
EMBER_VECTORIZE inline double lane_sum(int64_t s, F term) {
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= s; i += kLanes)
    for (int j = 0; j < kLanes; ++j) lane[j] += term(i + j);
  for (; i < s; ++i) lane[0] += term(i);
  double total = 0.0;
  for (int j = 0; j < kLanes; ++j) total += lane[j];
  return total;
}

template <typename T>
double run_sum(const T* __restrict x, int64_t s) {
  return lane_sum<T>(s, [x](int64_t i) { return static_cast<double>(x[i]); });
}

template <typename T>
double run_sq_dev(const T* __restrict x, int64_t s, double mean) {
  return lane_sum<T>(s, [x, mean](int64_t i) {
    const double d = static_cast<double>(x[i]) - mean;
    return d * d;
  });
}

template <typename T>
double run_dot_dev(const T* __restrict g, const T* __restrict x, int64_t s, double mean) {
  return lane_sum<T>(s, [g, x, mean](int64_t i) {
    return static_cast<double>(g[i]) * (static_cast<double>(x[i]) - mean);
  });
}

// Note [Batch norm with the channels innermost] (src/cuda/batch_norm.cu): S = 1 ([rows, C]
// row-major: a channels_last tensor, or BatchNorm1d's [N, C]) walks rows, not channels. Blocks of
// rows add their f64 column sums apart (row(acc, r) adds row r's kSums terms into acc[k·C + j]) and
// the blocks are added in order: the same result for every thread count.
template <int kSums, typename Row>
std::vector<double> column_sums(int64_t rows, int64_t c, Row&& row) {
  const int64_t blocks = std::clamp<int64_t>(rows * c / kGrainCheap, 1,
                                             std::min<int64_t>(std::max<int64_t>(rows, 1), 64));
  const int64_t per_block = (rows + blocks - 1) / blocks;
  std::vector<double> partial(static_cast<size_t>(blocks * kSums * c), 0.0);
  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t r = b * per_block; r < std::min(rows, (b + 1) * per_block); ++r)
        row(partial.data() + b * kSums * c, r);
  });
  std::vector<double> total(static_cast<size_t>(kSums * c), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < kSums * c; ++i) total[i] += partial[b * kSums * c + i];
  return total;
}

// The statistics of [rows, C]: the f64 mean, then the f64 sum of squared deviations.
template <typename T>
void stats_columns(T* mean, T* var, const T* in, int64_t rows, int64_t c) {
  std::vector<double> mu = column_sums<1>(rows, c, [&](double* acc, int64_t r) {
    const T* x = in + r * c;
    for (int64_t j = 0; j < c; ++j) acc[j] += static_cast<double>(x[j]);
  });
  for (double& m : mu) m /= static_cast<double>(rows);
  const std::vector<double> m2 = column_sums<1>(rows, c, [&](double* acc, int64_t r) {
    const T* x = in + r * c;
    for (int64_t j = 0; j < c; ++j) {
      const double d = static_cast<double>(x[j]) - mu[j];
      acc[j] += d * d;
    }
  });
  for (int64_t j = 0; j < c; ++j) {
    mean[j] = static_cast<T>(mu[j]);
    var[j] = static_cast<T>(m2[j] / static_cast<double>(rows));
  }
}

template <typename T>
void stats_typed(T* mean, T* var, const T* in, Nc3 d) {
  if (d.s == 1 && d.c > 1 && d.n > 0) return stats_columns(mean, var, in, d.n, d.c);
  parallel_for(d.c, grain_for(d.n * d.s), [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      double count = 0.0, mu = 0.0, m2 = 0.0;  // Note [Merged per-run statistics]
      for (int64_t n = 0; n < d.n; ++n) {
        const T* run = in + (n * d.c + c) * d.s;
        const double nb = static_cast<double>(d.s);
        const double mb = run_sum(run, d.s) / nb;
        const double m2b = run_sq_dev(run, d.s, mb);
        const double total = count + nb, delta = mb - mu;
        mu += delta * nb / total;
        m2 += m2b + delta * delta * count * nb / total;
        count = total;
      }
      mean[c] = static_cast<T>(mu);
      var[c] = static_cast<T>(count > 0.0 ? m2 / count : 0.0);
    }
  });
}

// g where gate > 0, else g·0 (kernels::gated); no gate: g.
template <typename T>
inline double gated_at(const T* __restrict g, const T* __restrict gate, int64_t i) {
  return static_cast<double>(gate ? kernels::gated(g[i], gate[i]) : g[i]);
}

// gate_run: the run's gated gradient (kernels::gated) into `out`, so that run_sum and
// run_dot_dev (vectorised, and the composite's bits: ReLU's backward, then batch norm's) sum it.
template <typename T>
EMBER_VECTORIZE void gate_run(T* __restrict out, const T* __restrict g, const T* __restrict gate,
                              int64_t s) {
  for (int64_t i = 0; i < s; ++i) out[i] = kernels::gated(g[i], gate[i]);
}

template <typename T>
void backward_reduce_typed(T* sum_g, T* sum_gx, const T* g, const T* x, const T* mean,
                           const T* gate, Nc3 d) {
  if (d.s == 1 && d.c > 1 && d.n > 0) {  // Note [Batch norm with the channels innermost]
    const int64_t c = d.c;
    const std::vector<double> sums = column_sums<2>(d.n, c, [&](double* acc, int64_t r) {
      const T* gr = g + r * c;
      const T* xr = x + r * c;
      const T* kr = gate ? gate + r * c : nullptr;
      for (int64_t j = 0; j < c; ++j) {
        const double gi = gated_at(gr, kr, j);
        acc[j] += gi;
        acc[c + j] += gi * (static_cast<double>(xr[j]) - static_cast<double>(mean[j]));
      }
    });
    for (int64_t j = 0; j < c; ++j) {
      sum_g[j] = static_cast<T>(sums[j]);
      sum_gx[j] = static_cast<T>(sums[c + j]);
    }
    return;
  }
  parallel_for(d.c, grain_for(d.n * d.s), [&](int64_t c0, int64_t c1) {
    std::vector<T> gated_run(gate ? static_cast<size_t>(d.s) : 0);
    for (int64_t c = c0; c < c1; ++c) {
      const double mu = static_cast<double>(mean[c]);
      double sg = 0.0, sgx = 0.0;
      for (int64_t n = 0; n < d.n; ++n) {
        const int64_t off = (n * d.c + c) * d.s;
        if (gate) {
          gate_run(gated_run.data(), g + off, gate + off, d.s);
          sg += run_sum(gated_run.data(), d.s);
          sgx += run_dot_dev(gated_run.data(), x + off, d.s, mu);
        } else {
          sg += run_sum(g + off, d.s);
          sgx += run_dot_dev(g + off, x + off, d.s, mu);
        }
      }
      sum_g[c] = static_cast<T>(sg);
      sum_gx[c] = static_cast<T>(sgx);
    }
  });
}

template <typename T>
EMBER_VECTORIZE void affine_run(T* __restrict out, const T* __restrict a, T sa, T shift,
                                int64_t s) {
  for (int64_t i = 0; i < s; ++i) out[i] = a[i] * sa + shift;
}

template <typename T>
EMBER_VECTORIZE void affine2_run(T* __restrict out, const T* __restrict a, T sa,
                                 const T* __restrict b, T sb, T shift, int64_t s) {
  for (int64_t i = 0; i < s; ++i) out[i] = a[i] * sa + b[i] * sb + shift;
}

// S = 1 ([rows, C]): a row at a time, the per-channel factors read along it.
template <typename T>
EMBER_VECTORIZE void affine_row(T* __restrict out, const T* __restrict a, const T* __restrict sa,
                                const T* __restrict b, const T* __restrict sb,
                                const T* __restrict shift, int64_t c) {
  for (int64_t j = 0; j < c; ++j) {
    T v = a[j] * sa[j];
    if (b) v = v + b[j] * sb[j];
    out[j] = v + (shift ? shift[j] : T(0));
  }
}

template <typename T>
void channel_affine_typed(T* out, const T* a, const T* sa, const T* b, const T* sb, const T* shift,
                          Nc3 d) {
  if (d.s == 1 && d.c > 1) {  // Note [Batch norm with the channels innermost]
    parallel_for(d.n, grain_for(d.c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        affine_row(out + r * d.c, a + r * d.c, sa, b ? b + r * d.c : nullptr, sb, shift, d.c);
    });
    return;
  }
  parallel_for(d.n * d.c, grain_for(d.s), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t c = r % d.c, off = r * d.s;
      const T t = shift ? shift[c] : T(0);
      if (b) {
        affine2_run(out + off, a + off, sa[c], b + off, sb[c], t, d.s);
      } else {
        affine_run(out + off, a + off, sa[c], t, d.s);
      }
    }
  });
}

// The affine with a gate, a residual or a ReLU (backend::ChannelAffine): each element through
// kernels::channel_affine_element, as the CUDA kernels compute it. Which operands are present is
// a template argument (with_operands), so each loop reads its operands unconditionally: with a
// null test per element the loads could not be hoisted and the loop ran scalar (the fused batch
// norm's backward affine about 30 % slower for it; the gate's branch was the larger cost: Note
// [A gate without a branch] in kernels/norm.hpp).
template <typename T, bool kGate, bool kB, bool kRes, bool kRelu>
EMBER_VECTORIZE void affine_epilogue_run(T* __restrict out, const T* __restrict a,
                                         const T* __restrict gate, T sa, const T* __restrict b,
                                         T sb, T shift, const T* __restrict res, int64_t s) {
  const auto same = [](T v) { return v; };
  for (int64_t i = 0; i < s; ++i) {
    T av = a[i];
    if constexpr (kGate) av = kernels::gated(av, gate[i]);
    T bv = T(0), rv = T(0);
    if constexpr (kB) bv = b[i];
    if constexpr (kRes) rv = res[i];
    out[i] =
        kernels::channel_affine_element<T, T>(av, sa, kB, bv, sb, shift, kRes, rv, kRelu, same);
  }
}

// S = 1 ([rows, C]): a row at a time, the per-channel factors read along it (affine_row's walk).
template <typename T, bool kGate, bool kB, bool kRes, bool kRelu>
EMBER_VECTORIZE void affine_epilogue_row(T* __restrict out, const T* __restrict a,
                                         const T* __restrict gate, const T* __restrict sa,
                                         const T* __restrict b, const T* __restrict sb,
                                         const T* __restrict shift, const T* __restrict res,
                                         int64_t c) {
  const auto same = [](T v) { return v; };
  for (int64_t j = 0; j < c; ++j) {
    T av = a[j];
    if constexpr (kGate) av = kernels::gated(av, gate[j]);
    T bv = T(0), sbv = T(0), rv = T(0);
    if constexpr (kB) bv = b[j], sbv = sb[j];
    if constexpr (kRes) rv = res[j];
    out[j] = kernels::channel_affine_element<T, T>(av, sa[j], kB, bv, sbv, shift ? shift[j] : T(0),
                                                   kRes, rv, kRelu, same);
  }
}

// f(gate?, b?, residual?, relu?) with the four as std::bool_constant.
template <typename F>
void with_operands(bool gate, bool b, bool res, bool relu, F&& f) {
  const auto pick = [](bool v, auto&& g) {
    if (v)
      g(std::true_type{});
    else
      g(std::false_type{});
  };
  pick(gate, [&](auto kg) {
    pick(b, [&](auto kb) {
      pick(res, [&](auto kr) { pick(relu, [&](auto kl) { f(kg, kb, kr, kl); }); });
    });
  });
}

template <typename T>
void channel_affine_epilogue(const backend::ChannelAffine& f, Nc3 d) {
  const auto ptr = [](const View& v) { return static_cast<const T*>(v.data); };
  T* out = static_cast<T*>(f.out.data);
  const T *a = ptr(f.a), *sa = ptr(f.scale_a), *gate = ptr(f.gate), *b = ptr(f.b);
  const T *sb = ptr(f.scale_b), *shift = ptr(f.shift), *res = ptr(f.residual);
  const auto at = [](const T* p, int64_t off) { return p ? p + off : nullptr; };
  with_operands(gate, b, res, f.relu, [&](auto kg, auto kb, auto kr, auto kl) {
    constexpr bool G = decltype(kg)::value, B = decltype(kb)::value, R = decltype(kr)::value,
                   L = decltype(kl)::value;
    if (d.s == 1 && d.c > 1) {  // rows of C: the per-channel factors change along the row
      parallel_for(d.n, grain_for(d.c), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          affine_epilogue_row<T, G, B, R, L>(out + r * d.c, a + r * d.c, at(gate, r * d.c), sa,
                                             at(b, r * d.c), sb, shift, at(res, r * d.c), d.c);
      });
      return;
    }
    parallel_for(d.n * d.c, grain_for(d.s), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t c = r % d.c, off = r * d.s;
        affine_epilogue_run<T, G, B, R, L>(out + off, a + off, at(gate, off), sa[c], at(b, off),
                                           b ? sb[c] : T(0), shift ? shift[c] : T(0), at(res, off),
                                           d.s);
      }
    });
  });
}

// ---- layer norm and rms norm: one row of n elements per task, sums in f64 ----
// Rows are computed in C (f32 or f64); a 16-bit row is widened into the task's f32 scratch
// first and its results rounded once (Note [16-bit layer norm]). rms_norm takes the same code
// with kKind = rms (Note [RMS norm is layer norm without the mean]).

using kernels::NormKind;

// y, mean and rstd of one row (rms: no mean, no bias; Note [RMS norm is layer norm without the
// mean]).
template <NormKind kKind, typename C>
void layer_norm_forward_row(C* y, C* mean, C& rstd, const C* x, const C* w, const C* b, int64_t n,
                            double eps) {
  double m = 0;
  if constexpr (kKind == NormKind::layer) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
    m = s / static_cast<double>(n);
  }
  double v = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - m;
    v += d * d;
  }
  const C mt = static_cast<C>(m);
  const C rt = static_cast<C>(kernels::layer_norm_rstd(v, n, eps));
  if constexpr (kKind == NormKind::layer) *mean = mt;
  rstd = rt;
  for (int64_t i = 0; i < n; ++i) {
    const C h = kernels::layer_norm_normalized(x[i], mt, rt);
    if constexpr (kKind == NormKind::layer)
      y[i] = kernels::layer_norm_affine(h, w ? w[i] : C(1), b ? b[i] : C(0));
    else
      y[i] = w ? kernels::rms_norm_scale(h, w[i]) : h;
  }
}

// y_low (may be null): each f32 row of y also rounded to L while it is in cache (Note [A
// lower-precision copy beside a tensor]).
template <NormKind kKind, typename T, typename L = BFloat16, typename C = Compute<T>>
void layer_norm_forward_typed(T* y, L* y_low, C* mean, C* rstd, const T* x, const C* w, const C* b,
                              int64_t rows, int64_t n, double eps) {
  parallel_for(rows, grain_for(n), [&](int64_t r0, int64_t r1) {
    std::vector<C> scratch(kIsHalfLike<T> ? static_cast<size_t>(2 * n) : 0);
    for (int64_t r = r0; r < r1; ++r) {
      C* mr = mean ? mean + r : nullptr;
      if constexpr (kIsHalfLike<T>) {
        widen_to_f32(scratch.data(), x + r * n, n);
        layer_norm_forward_row<kKind>(scratch.data() + n, mr, rstd[r], scratch.data(), w, b, n,
                                      eps);
        round_from_f32(y + r * n, scratch.data() + n, n);
      } else {
        layer_norm_forward_row<kKind>(y + r * n, mr, rstd[r], x + r * n, w, b, n, eps);
        if constexpr (std::is_same_v<T, float>)
          if (y_low) round_from_f32(y_low + r * n, y + r * n, n);
      }
    }
  });
}

// One row of the backward: grad_x (= or += when accumulate; gx null: not wanted) and, when
// pw / pb are set, the row's grad·x̂ and grad added into the f64 column partials. Each
// element's grad and x are read before its grad_x is written, so gx may be g's buffer.
template <NormKind kKind, typename C>
void layer_norm_backward_row(C* gx, double* pw, double* pb, const C* g, const C* x, C mt, C rt,
                             const C* w, int64_t n, bool accumulate) {
  double s1 = 0, s2 = 0;  // rms: s1 (a) stays 0
  if (gx)
    for (int64_t i = 0; i < n; ++i) {
      const C h = kernels::layer_norm_normalized(x[i], mt, rt);
      const C gw = w ? g[i] * w[i] : g[i];
      if constexpr (kKind == NormKind::layer) s1 += static_cast<double>(gw);
      s2 += static_cast<double>(gw) * static_cast<double>(h);
    }
  const C a = static_cast<C>(s1 / static_cast<double>(n));
  const C c = static_cast<C>(s2 / static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) {
    const C gi = g[i];
    const C h = kernels::layer_norm_normalized(x[i], mt, rt);
    if (pw) pw[i] += static_cast<double>(gi) * static_cast<double>(h);
    if (pb) pb[i] += static_cast<double>(gi);
    if (!gx) continue;
    const C d = kernels::layer_norm_grad_x(w ? gi * w[i] : gi, a, h, c, rt);
    gx[i] = accumulate ? gx[i] + d : d;
  }
}

// Row r of the backward from T data: directly for f32/f64; a 16-bit row through f32 scratch of
// 3n elements (grad, x, grad_x; grad_x widened first when accumulating), grad_x rounded once.
template <NormKind kKind, typename T, typename C>
void layer_norm_backward_row_of(std::vector<C>& scratch, T* gx, double* pw, double* pb, const T* g,
                                const T* x, const C* mean, const C* rstd, const C* w, int64_t r,
                                int64_t n, bool accumulate) {
  T* gxr = gx ? gx + r * n : nullptr;
  const C mt = mean ? mean[r] : C(0);  // rms: no mean
  if constexpr (kIsHalfLike<T>) {
    scratch.resize(static_cast<size_t>(3 * n));
    C* gs = scratch.data();
    C* xs = gs + n;
    C* out = gxr ? xs + n : nullptr;
    widen_to_f32(gs, g + r * n, n);
    widen_to_f32(xs, x + r * n, n);
    if (out && accumulate) widen_to_f32(out, gxr, n);
    layer_norm_backward_row<kKind, C>(out, pw, pb, gs, xs, mt, rstd[r], w, n, accumulate);
    if (out) round_from_f32(gxr, out, n);
  } else {
    layer_norm_backward_row<kKind, C>(gxr, pw, pb, g + r * n, x + r * n, mt, rstd[r], w, n,
                                      accumulate);
  }
}

// Note [Layer norm parameter gradients on the CPU]
// The weight's and bias's gradients are column sums over all rows. The rows are cut into a
// fixed number of blocks (from the shape, never from the thread count); each block's task adds
// its rows into its own f64 partials while it writes grad_x, and the partials are then summed
// per column in block order: one pass over grad and x, the same bits with any thread count.
// The sums are rounded to C, then to the parameters' dtype P (Note [16-bit layer norm]).
// gx_low (may be null, an f32 T only): each finished row of gx also rounded to L (Note [A
// lower-precision copy beside a tensor]).
template <NormKind kKind, typename T, typename P, typename L, typename C = Compute<T>>
void layer_norm_backward_typed(T* gx, L* gx_low, P* gw_out, P* gb_out, const T* g, const T* x,
                               const C* mean, const C* rstd, const C* w, int64_t rows, int64_t n,
                               bool accumulate) {
  const auto low_row = [&](int64_t r) {
    if constexpr (std::is_same_v<T, float>)
      if (gx_low && gx) round_from_f32(gx_low + r * n, gx + r * n, n);
  };
  if (!gw_out && !gb_out) {
    if (!gx) return;
    parallel_for(rows, grain_for(n), [&](int64_t r0, int64_t r1) {
      std::vector<C> scratch;
      for (int64_t r = r0; r < r1; ++r) {
        layer_norm_backward_row_of<kKind, T, C>(scratch, gx, nullptr, nullptr, g, x, mean, rstd, w,
                                                r, n, accumulate);
        low_row(r);
      }
    });
    return;
  }
  if (rows == 0) {  // empty column sums (and no blocks to divide the rows into)
    for (int64_t j = 0; j < n; ++j) {
      if (gw_out) gw_out[j] = P(0);
      if (gb_out) gb_out[j] = P(0);
    }
    return;
  }
  const int64_t blocks =
      std::clamp<int64_t>(rows * n / kGrainCheap, 1, std::min<int64_t>(rows, 64));
  const int64_t per_block = (rows + blocks - 1) / blocks;
  std::vector<double> partial(static_cast<size_t>(blocks * 2 * n), 0.0);  // [blocks][w, b][n]
  parallel_for(blocks, 1, [&](int64_t k0, int64_t k1) {
    std::vector<C> scratch;
    for (int64_t k = k0; k < k1; ++k) {
      double* pw = gw_out ? partial.data() + k * 2 * n : nullptr;
      double* pb = gb_out ? partial.data() + (k * 2 + 1) * n : nullptr;
      for (int64_t r = k * per_block; r < std::min(rows, (k + 1) * per_block); ++r) {
        layer_norm_backward_row_of<kKind, T, C>(scratch, gx, pw, pb, g, x, mean, rstd, w, r, n,
                                                accumulate);
        low_row(r);
      }
    }
  });
  parallel_for(n, grain_for(blocks), [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      double sw = 0, sb = 0;
      for (int64_t k = 0; k < blocks; ++k) {
        sw += partial[(k * 2) * n + j];
        sb += partial[(k * 2 + 1) * n + j];
      }
      if (gw_out) gw_out[j] = static_cast<P>(static_cast<C>(sw));
      if (gb_out) gb_out[j] = static_cast<P>(static_cast<C>(sb));
    }
  });
}

// A weight or bias as C values: its own data when it has dtype C, else (a 16-bit parameter of a
// 16-bit input) widened once into `storage`; null when absent.
template <typename C>
class ParamAsCompute {
 public:
  ParamAsCompute(const View& v, int64_t n) {
    if (!v.data) return;
    if (v.dtype == dtype_of<C>()) {
      data_ = static_cast<const C*>(v.data);
      return;
    }
    if constexpr (std::is_same_v<C, float>) {
      storage_.resize(static_cast<size_t>(n));
      dispatch_any_float(v.dtype, "layer_norm", [&](auto tag) {
        using P = typename decltype(tag)::type;
        if constexpr (kIsHalfLike<P>)
          widen_to_f32(storage_.data(), static_cast<const P*>(v.data), n);
      });
      data_ = storage_.data();
    }
    EMBER_ASSERT(data_, "layer_norm: a parameter of dtype ", dtype_name(v.dtype), " for ",
                 dtype_name(dtype_of<C>()), " math");
  }
  const C* get() const { return data_; }

 private:
  std::vector<C> storage_;
  const C* data_ = nullptr;
};

}  // namespace

void batch_norm_stats(const View& mean, const View& var, const View& in) {
  dispatch_float(in.dtype, "batch_norm_stats", [&](auto tag) {
    using T = typename decltype(tag)::type;
    stats_typed(static_cast<T*>(mean.data), static_cast<T*>(var.data),
                static_cast<const T*>(in.data), dims_of(in));
  });
}

void batch_norm_backward_reduce(const View& sum_g, const View& sum_gx, const View& grad_out,
                                const View& in, const View& mean, const View& gate) {
  dispatch_float(in.dtype, "batch_norm_backward_reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    backward_reduce_typed(static_cast<T*>(sum_g.data), static_cast<T*>(sum_gx.data),
                          static_cast<const T*>(grad_out.data), static_cast<const T*>(in.data),
                          static_cast<const T*>(mean.data), static_cast<const T*>(gate.data),
                          dims_of(in));
  });
}

void batch_norm_prepare(const backend::BatchNormPrepare& p) {
  dispatch_float(p.mean.dtype, "batch_norm_prepare", [&](auto tag) {
    using P = typename decltype(tag)::type;
    const auto in = [](const View& v) { return static_cast<const P*>(v.data); };
    const auto io = [](const View& v) { return static_cast<P*>(v.data); };
    const bool update = p.training && p.running_mean.data && p.running_var.data;
    for (int64_t c = 0; c < p.mean.shape[0]; ++c) {
      const kernels::BatchNormChannel<P> r = kernels::batch_norm_channel<P>(
          in(p.mean)[c], in(p.var)[c], p.weight.data ? in(p.weight) + c : nullptr,
          p.bias.data ? in(p.bias) + c : nullptr, update ? io(p.running_mean) + c : nullptr,
          update ? io(p.running_var) + c : nullptr, p.eps, p.momentum, p.unbias);
      io(p.invstd)[c] = r.invstd;
      io(p.scale)[c] = r.scale;
      io(p.shift)[c] = r.shift;
    }
  });
}

void batch_norm_backward_prepare(const backend::BatchNormBackwardPrepare& p) {
  dispatch_float(p.mean.dtype, "batch_norm_backward_prepare", [&](auto tag) {
    using P = typename decltype(tag)::type;
    const auto in = [](const View& v) { return static_cast<const P*>(v.data); };
    const auto io = [](const View& v) { return static_cast<P*>(v.data); };
    for (int64_t c = 0; c < p.mean.shape[0]; ++c) {
      const P sg = in(p.sum_g)[c], sgx = in(p.sum_gx)[c], r = in(p.invstd)[c];
      const kernels::BatchNormBackwardChannel<P> k = kernels::batch_norm_backward_channel<P>(
          sg, sgx, in(p.mean)[c], r, p.weight.data ? in(p.weight) + c : nullptr, p.inv_m,
          p.training);
      if (p.scale_g.data) io(p.scale_g)[c] = k.scale_g;
      if (p.scale_x.data) io(p.scale_x)[c] = k.scale_x;
      if (p.shift.data) io(p.shift)[c] = k.shift;
      if (p.grad_weight.data) io(p.grad_weight)[c] = kernels::bn_mul(sgx, r);
      if (p.grad_bias.data) io(p.grad_bias)[c] = sg;
    }
  });
}

void channel_affine(const backend::ChannelAffine& f) {
  dispatch_float(f.out.dtype, "channel_affine", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (f.gate.data || f.residual.data || f.relu)
      return channel_affine_epilogue<T>(f, dims_of(f.out));
    channel_affine_typed(static_cast<T*>(f.out.data), static_cast<const T*>(f.a.data),
                         static_cast<const T*>(f.scale_a.data), static_cast<const T*>(f.b.data),
                         static_cast<const T*>(f.scale_b.data), static_cast<const T*>(f.shift.data),
                         dims_of(f.out));
  });
}

namespace {

// layer_norm's and rms_norm's slots (mean and bias: views with no data for rms).
template <NormKind kKind>
void norm_forward(const View& y, const View& y_low, const View& mean, const View& rstd,
                  const View& x, const View& weight, const View& bias, double eps) {
  EMBER_ASSERT(!y_low.data || (x.dtype == DType::f32 &&
                               (y_low.dtype == DType::bf16 || y_low.dtype == DType::f16)),
               "layer_norm_forward: a low copy is bf16 or f16 of an f32 output");
  dispatch_any_float(x.dtype, "layer_norm_forward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const int64_t n = x.shape[1];
    const ParamAsCompute<C> w(weight, n), b(bias, n);
    auto run = [&](auto* low) {
      layer_norm_forward_typed<kKind, T>(static_cast<T*>(y.data), low, static_cast<C*>(mean.data),
                                         static_cast<C*>(rstd.data), static_cast<const T*>(x.data),
                                         w.get(), b.get(), x.shape[0], n, eps);
    };
    if (y_low.data && y_low.dtype == DType::f16)
      run(static_cast<Half*>(y_low.data));
    else
      run(static_cast<BFloat16*>(y_low.data));
  });
}

template <NormKind kKind>
void norm_backward(const View& grad_x, const View& grad_x_low, const View& grad_weight,
                   const View& grad_bias, const View& grad_y, const View& x, const View& mean,
                   const View& rstd, const View& weight, bool accumulate) {
  EMBER_ASSERT(!grad_x_low.data || (x.dtype == DType::f32 && (grad_x_low.dtype == DType::bf16 ||
                                                              grad_x_low.dtype == DType::f16)),
               "layer_norm_backward: a low copy is bf16 or f16 of an f32 gradient");
  dispatch_any_float(x.dtype, "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = Compute<T>;
    const int64_t n = x.shape[1];
    const ParamAsCompute<C> w(weight, n);
    const DType p = grad_weight.data ? grad_weight.dtype
                    : grad_bias.data ? grad_bias.dtype
                                     : dtype_of<C>();
    kernels::dispatch_layer_norm_param<T, C>(p, x.dtype, [&](auto param_tag) {
      using P = typename decltype(param_tag)::type;
      auto run = [&](auto* low) {
        layer_norm_backward_typed<kKind, T, P>(
            static_cast<T*>(grad_x.data), low, static_cast<P*>(grad_weight.data),
            static_cast<P*>(grad_bias.data), static_cast<const T*>(grad_y.data),
            static_cast<const T*>(x.data), static_cast<const C*>(mean.data),
            static_cast<const C*>(rstd.data), w.get(), x.shape[0], n, accumulate);
      };
      if (grad_x_low.data && grad_x_low.dtype == DType::f16)
        run(static_cast<Half*>(grad_x_low.data));
      else
        run(static_cast<BFloat16*>(grad_x_low.data));
    });
  });
}

}  // namespace

#include "kernels/norm_slots.inc"

}  // namespace ember::cpu
